"""Where a compiled call's time goes (GPU only): full call, fusec's executor alone, host-only time, kernel time.

    python bench/host_profile.py [--programs seed,optimizer16]
"""
import argparse
import cProfile
import io
import pstats
import time

import torch
import triton.testing

import fusec.backend as backend
from fusec.tools.benchmark import PROGRAMS, compiled


def kernel_us(call):
    from torch.profiler import ProfilerActivity, profile
    call(); torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            call()
        torch.cuda.synchronize()
    ev = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return sum(e.device_time for e in ev) / 20


def host_us(call, n=300):
    call(); torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        call()
    dt = time.perf_counter() - t
    torch.cuda.synchronize()
    return dt / n * 1e6


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--programs", default="seed,optimizer16")
    p.add_argument("--dynamic", action="store_true")
    p.add_argument("--cprofile", action="store_true")
    a = p.parse_args()
    captured = []
    original = backend.make_executor

    def recording(*x, **k):  # keeps the executor and the tensors it was last called with
        ex = original(*x, **k)
        def run(tensors):
            captured[:] = [ex, list(tensors)]
            return ex(tensors)
        return run
    backend.make_executor = recording
    rows = []
    for prog in [q for q in PROGRAMS if q.name in a.programs.split(",")]:
        torch.manual_seed(0)
        inputs = prog.make_inputs(torch.float32, "cuda")
        for name in ("fusec", "inductor-combo"):
            captured.clear()
            f = compiled(prog.fn, name, a.dynamic)
            f(*inputs)
            full = lambda: f(*inputs)
            r = [prog.name, name, triton.testing.do_bench(full, warmup=50, rep=300, return_mode="median") * 1e3,
                 host_us(full), kernel_us(full)]
            if name == "fusec" and captured:
                ex, tensors = captured
                r += [triton.testing.do_bench(lambda: ex(tensors), warmup=50, rep=300, return_mode="median") * 1e3,
                      host_us(lambda: ex(tensors))]
                if a.cprofile:
                    pr = cProfile.Profile(); pr.enable()
                    for _ in range(200):
                        full()
                    pr.disable(); torch.cuda.synchronize()
                    s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(18); print(s.getvalue()[-4000:])
            rows.append(r)
    print(f"device {torch.cuda.get_device_name()} torch {torch.__version__} triton {triton.__version__} dynamic={a.dynamic}")
    print("| program | backend | call us (do_bench) | host us/call | kernel us/call | executor us | executor host us |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(f"{c:.1f}" if isinstance(c, float) else str(c) for c in r) + " |")


if __name__ == "__main__":
    main()
