"""Matmul epilogues fused or not, over sizes (GPU): the data matmul-epilogues' cost rule is checked against.

    python bench/epilogue_sweep.py [--patterns swiglu,gelu,gateup]

For each shape and epilogue (``swiglu``: ``silu(x @ w.t()) * u``, u product-sized; ``gelu``: ``gelu(x @ w.t() + b,
tanh)``), bf16: fusec with ``matmul-epilogues{when=never}`` (cuBLAS, then the Triton epilogue kernel) against fusec
with ``cost-rule=false`` (always fused; on Hopper the large ones as persistent tensor-descriptor kernels, and with
``--pointers`` also fused with pointer loads, ``schedule-kernels{matmul-tma=never}``), and cuBLAS alone; device µs,
profiler median of 15 calls.  The rule should fuse where ``fused`` is the smaller (BENCHMARKS.md, 2026-11-27
fourteenth session).  ``gateup``: ``silu(x @ wg.t()) *
(x @ wu.t())``, SwiGLU's two projections of one input: ``never``, ``fused`` (the gate alone, the up product read in its
epilogue) and ``siblings`` (``siblings=true``: one kernel of two accumulators), against two cuBLAS calls.
"""
import argparse
import warnings

import torch
import torch.nn.functional as Fn

from fusec.pipeline import default_pipeline_spec
from fusec.tools.benchmark import profile_call

warnings.filterwarnings("ignore")
torch.manual_seed(0)
NEVER = default_pipeline_spec().replace("matmul-epilogues", "matmul-epilogues{when=never}")
ALWAYS = default_pipeline_spec().replace("matmul-epilogues", "matmul-epilogues{cost-rule=false}")
POINTERS = ALWAYS.replace("schedule-kernels", "schedule-kernels{matmul-tma=never}")
SIBLINGS = default_pipeline_spec().replace("matmul-epilogues", "matmul-epilogues{cost-rule=false siblings=true}")
SHAPES = [(1024, 1376, 512), (1024, 3072, 768), (1024, 768, 768), (2048, 2048, 2048), (4096, 4096, 1024),
          (8192, 4096, 1024), (2048, 5632, 2048), (512, 4096, 4096), (4096, 1024, 4096), (8192, 1024, 1024),
          (16384, 1024, 1024), (1024, 8192, 1024)]  # M, N, K


def swiglu(x, w, u):
    return Fn.silu(x @ w.t()) * u


def gelu(x, w, b):
    return Fn.gelu(x @ w.t() + b, approximate="tanh")


def gateup(x, wg, wu):
    return Fn.silu(x @ wg.t()) * (x @ wu.t())


def device_us(fn, args, pipeline=None) -> float:
    """Device µs of one call (profiler median of 15); fusec-compiled with ``pipeline`` unless it is None."""
    if pipeline is not None:
        torch._dynamo.reset()
        fn = torch.compile(fn, backend="fusec", options={"pipeline": pipeline})
        fn(*args)
        torch.cuda.synchronize()
    return profile_call(lambda: fn(*args), repeats=15)[2]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--patterns", default="swiglu,gelu")
    p.add_argument("--pointers", action="store_true", help="also fused with pointer loads (schedule-kernels{matmul-tma=never})")
    options = p.parse_args()
    patterns = options.patterns.split(",")
    for m, n, k in SHAPES:
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k ** 0.5
        w2 = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k ** 0.5
        u = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        cublas = device_us(torch.matmul, (x, w.t()))
        tiles = -(-m // 128) * -(-n // 128)
        cases = [("swiglu", swiglu, (x, w, u)), ("gelu", gelu, (x, w, b)), ("gateup", gateup, (x, w, w2))]
        for name, fn, args in [c for c in cases if c[0] in patterns]:
            never, fused = device_us(fn, args, NEVER), device_us(fn, args, ALWAYS)
            line = f"{name:6s} {m:6d} {n:6d} {k:6d} tiles {tiles:5d} cublas {cublas:7.1f} never {never:7.1f} fused {fused:7.1f}"
            if options.pointers and name != "gateup":
                line += f" fused-pointers {device_us(fn, args, POINTERS):7.1f}"
            if name == "gateup":  # two cuBLAS calls alone, and one kernel of two accumulators
                torch._dynamo.reset()
                siblings = torch.compile(fn, backend="fusec", options={"pipeline": SIBLINGS})
                want, got = fn(*args).float(), siblings(*args).float()  # its first call compiles it, once
                error = ((got - want).norm() / want.norm()).item()
                line += f" siblings {device_us(siblings, args):7.1f} (2 x cublas {2 * cublas:7.1f}, rel. error {error:.1e})"
            print(line, flush=True)


if __name__ == "__main__":
    main()
