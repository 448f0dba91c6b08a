"""Per-operation host cost of what a generated launcher does (GPU only): one line per operation, us per call.

    python bench/launch_micro.py
"""
import time

import torch
import triton

from fusec.runtime.kernel_cache import load_kernel_module
from fusec.runtime.kernel_runner import KernelRunner, _current

SOURCE = '''# launch micro-benchmark kernel
import triton
import triton.language as tl


@triton.jit
def rowsum(in0, in1, in2, in3, out0, out1, out2, out3, x0, r0, x1, r1, x2, r2, x3, r3,
           XBLOCK_0: tl.constexpr, RBLOCK_0: tl.constexpr, XBLOCK_1: tl.constexpr, RBLOCK_1: tl.constexpr,
           XBLOCK_2: tl.constexpr, RBLOCK_2: tl.constexpr, XBLOCK_3: tl.constexpr, RBLOCK_3: tl.constexpr):
    pid = tl.program_id(0)
    xindex = pid * XBLOCK_0 + tl.arange(0, XBLOCK_0)[:, None]
    rindex = tl.arange(0, RBLOCK_0)[None, :]
    v = tl.load(in0 + rindex + r0 * xindex, xindex < x0)
    tl.store(out0 + xindex, tl.sum(v, 1)[:, None], xindex < x0)
'''


def per_call(fn, n=3000):
    fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t) / n * 1e6)
        torch.cuda.synchronize()
    return best


class _NoLaunch:
    def launch(self, *args):
        pass


def launcher_rows():
    """The seed's whole compiled graph, its generated launcher alone, and that launcher with launches removed."""
    import fusec.backend as backend
    from fusec.tools.benchmark import PROGRAMS, compiled

    captured = []
    original = backend.make_executor
    backend.make_executor = lambda *a, **k: captured.append(original(*a, **k)) or captured[-1]
    prog = [p for p in PROGRAMS if p.name == "seed"][0]
    inputs = prog.make_inputs(torch.float32, "cuda")
    f = compiled(prog.fn, "fusec", False)
    f(*inputs)
    backend.make_executor = original
    graph = captured[-1]
    call = graph._calls[False]
    namespace = dict(call.__globals__)
    namespace.update({name: _NoLaunch() for name in namespace if name.startswith("fusec_")})
    exec(compile(graph.source, "<no launch>", "exec"), namespace)
    return [("torch.compile'd seed", "f(*inputs)", lambda: f(*inputs)),
            ("CompiledGraph", "graph(inputs)", lambda: graph(inputs)),
            ("launcher call", "call(inputs)", lambda: call(inputs)),
            ("launcher, no launch", "call(inputs)", lambda: namespace["call"](inputs))]


def main():
    module = load_kernel_module(SOURCE, interpret=False)
    ins = [torch.randn(1024, 512, device="cuda") for _ in range(4)]
    outs = [torch.empty(1024, device="cuda") for _ in range(4)]
    sizes = [1024, 512] * 4
    blocks = [8, 512] * 4
    args = (*ins, *outs, *sizes, *blocks)
    runner = KernelRunner(module.rowsum, interpret=False)
    runner.launch(128, 8, *args)
    run, function, metadata = runner.compiled[8]
    device, stream = _current()
    s = stream(device())
    x = ins[0]
    rows = [
        ("empty", "torch.empty_strided((1024,), (1,), dtype=torch.float32, device=device)",
         lambda: torch.empty_strided((1024,), (1,), dtype=torch.float32, device=x.device)),
        ("shape+dtype check", "x.shape != (1024, 512) or x.dtype != torch.float32",
         lambda: x.shape != (1024, 512) or x.dtype != torch.float32),
        ("stride+align check", "x.stride() != (512, 1) or x.data_ptr() % 16", lambda: x.stride() != (512, 1) or x.data_ptr() % 16),
        ("current stream", "stream(device())", lambda: stream(device())),
        ("triton jit launch", "rowsum[(128,)](*args, num_warps=8)", lambda: module.rowsum[(128,)](*args, num_warps=8)),
        ("runner.launch", "runner.launch(128, 8, *args)", lambda: runner.launch(128, 8, *args)),
        ("compiled run", "run(128, 1, 1, s, function, metadata, None, None, None, *args)",
         lambda: run(128, 1, 1, s, function, metadata, None, None, None, *args)),
        ("python call", "(lambda: None)()", lambda: None),
    ]
    rows += launcher_rows()
    print(f"device {torch.cuda.get_device_name()} torch {torch.__version__} triton {triton.__version__}")
    print("| operation | us per call |")
    print("|---|---|")
    for name, _, fn in rows:
        print(f"| {name} | {per_call(fn):.2f} |")


if __name__ == "__main__":
    main()
