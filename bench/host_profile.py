"""fusec against Inductor per call (GPU only), measured side by side, interleaved to cancel machine drift.

    python bench/host_profile.py [--programs seed,optimizer16] [--dynamic]

For each program and backend: do_bench's median (device events around each call),
the host time per call (a loop of calls, best and median of 7 rounds; the work is
host-bound when this exceeds the kernel time), and the kernel time per call from
the CUDA profiler.  Rounds alternate between backends.
"""
import argparse
import statistics
import time

import torch
import triton
import triton.testing

from fusec.tools.benchmark import PROGRAMS, compiled, markdown_table

BACKENDS = ("fusec", "inductor-combo")


def kernel_us(call):
    from torch.profiler import ProfilerActivity, profile

    call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA], acc_events=True) as prof:
        for _ in range(20):
            call()
        torch.cuda.synchronize()
    return sum(e.device_time for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA) / 20


def host_us(call, n=200):
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        call()
    dt = time.perf_counter() - t
    torch.cuda.synchronize()
    return dt / n * 1e6


def _fusec_layers(prog, inputs, dynamic):
    """fusec's own layers under torch.compile (static shapes).

    The boxed function AOTAutograd calls, the compiled graph, its generated launcher.
    """
    import fusec.backend as backend

    seen = {}
    boxed, executor = backend.boxed_runner, backend.make_executor

    def make_executor(*args, **kwargs):
        seen["graph"] = executor(*args, **kwargs)
        return seen["graph"]

    def boxed_runner(info, execute):
        def recording(tensors):  # keeps the graph's own inputs (AOTAutograd may reorder them); ~0.1 us a call
            seen["tensors"] = list(tensors)
            return execute(tensors)

        inner = boxed(info, recording)

        def run(args):  # and the boxed function's arguments (Dynamo orders them by first use)
            seen.setdefault("args", list(args))
            return inner(args)

        run._boxed_call = True
        seen["boxed"] = inner
        return run

    backend.make_executor, backend.boxed_runner = make_executor, boxed_runner
    try:
        compiled(prog.fn, "fusec", dynamic)(*inputs)
    finally:
        backend.make_executor, backend.boxed_runner = executor, boxed
    graph, run, tensors = seen["graph"], seen["boxed"], seen["tensors"]
    launcher = graph._calls[not tensors[0].is_cuda]
    args = seen["args"]
    return {"fusec: boxed run": lambda: run(list(args)),
            "fusec: CompiledGraph": lambda: graph(tensors),
            "fusec: launcher call": lambda: launcher(tensors)}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--programs", default="seed,optimizer16")
    p.add_argument("--dynamic", action="store_true")
    p.add_argument("--rounds", type=int, default=25)
    p.add_argument("--layers", action="store_true", help="also time fusec's layers: its boxed function, graph, launcher")
    a = p.parse_args()
    rows = []
    for prog in [q for q in PROGRAMS if q.name in a.programs.split(",")]:
        torch.manual_seed(0)
        inputs = prog.make_inputs(torch.float32, "cuda")
        calls = {}
        layers = _fusec_layers(prog, inputs, a.dynamic) if a.layers else {}
        for name in BACKENDS:
            f = compiled(prog.fn, name, a.dynamic)
            f(*inputs)
            calls[name] = (lambda f=f, inputs=inputs: f(*inputs))
        calls.update(layers)
        host = {name: [] for name in calls}
        bench = {name: [] for name in calls}
        for _ in range(a.rounds):
            for name in calls:
                host[name].append(host_us(calls[name]))
                bench[name].append(triton.testing.do_bench(calls[name], warmup=5, rep=20, return_mode="median") * 1e3)
        for name in calls:
            rows.append((prog.name, name, statistics.median(bench[name]), min(host[name]), statistics.median(host[name]),
                         kernel_us(calls[name])))
    print(f"device {torch.cuda.get_device_name()}  torch {torch.__version__}  triton {triton.__version__}  dynamic={a.dynamic}")
    print(markdown_table(["program", "backend", "do_bench median us", "host us/call (best)", "host us/call (median)",
                          "kernel us/call"], rows))


if __name__ == "__main__":
    main()
