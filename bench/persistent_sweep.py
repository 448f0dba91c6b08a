"""Persistent-reduction block sizes against kernel time (GPU only): which tile and warps the heuristic should pick.

    python bench/persistent_sweep.py [--programs rmsnorm,layernorm_gelu,softmax,transformer_mix] [--dtypes fp32,bf16]

For each program and each (elements a program holds, elements a warp holds) the
heuristic is replaced, the program recompiled with backend="fusec", checked
on fresh inputs against eager, and its kernels timed with the CUDA profiler (median of 10 calls, L2 flushed before
each, cycling through copies of the inputs).  Before 2026-11-28 kernel runners shared binaries across launch
literals, so a row that changed only XBLOCK at the same warps may have timed the row before's binary.
"""
import argparse
import functools
import os

import torch

os.environ.setdefault("FUSEC_GRAPH_CACHE", "0")  # each configuration must really compile

from fusec.analysis import heuristics
from fusec.base.shapes import next_power_of_2
from fusec.tools.benchmark import PROGRAMS, compiled, markdown_table, profile_call, rotating, rotation_sets

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def config_rule(tile: int, per_warp: int):
    def persistent_config(xnumel, rnumel, outer=False, per_thread=0):
        rblock = max(next_power_of_2(rnumel), 2)
        xblock = max(1, min(tile // rblock, 64 if outer else 32, max(next_power_of_2(xnumel), 1)))
        return heuristics.LaunchConfig(xblock, rblock, max(1, min(16, next_power_of_2(xblock * rblock // per_warp))))
    return persistent_config


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--programs", default="rmsnorm,layernorm_gelu,softmax,transformer_mix")
    p.add_argument("--configs", default="1024:128,1024:256,1024:512,2048:128,2048:256,2048:512,4096:128,4096:256,"
                   "4096:512,8192:128,8192:256,8192:512", help="tile:elements-per-warp pairs; 'current' is the heuristic")
    p.add_argument("--dtypes", default="fp32", help="comma-separated: fp32, bf16, fp16")
    a = p.parse_args()
    original = heuristics.persistent_config
    rows = []
    for prog, dtype in [(q, d) for q in PROGRAMS if q.name in a.programs.split(",") for d in a.dtypes.split(",")]:
        dt = DTYPES[dtype]
        tol = 1e-4 if dt == torch.float32 else 2e-2
        torch.manual_seed(0)
        make = functools.partial(prog.make_inputs, dt, "cuda")
        sets = rotation_sets(make(), make)
        for i, config in enumerate(a.configs.split(",")):
            tile, per_warp = config.split(":") if config != "current" else ("current", "-")
            heuristics.persistent_config = original if config == "current" else config_rule(int(tile), int(per_warp))
            torch._dynamo.reset()
            f = compiled(prog.fn, "fusec", False)
            torch.manual_seed(1000 + i)  # fresh inputs: a kernel that skipped rows would find last config's results there
            fresh = prog.make_inputs(dt, "cuda")
            want, got = prog.fn(*fresh), f(*fresh)
            want, got = (want if isinstance(want, tuple) else (want,)), (got if isinstance(got, tuple) else (got,))
            ok = all(torch.allclose(g.float(), w.float(), rtol=tol, atol=tol) for g, w in zip(got, want, strict=True))
            rows.append((prog.name, dtype, tile, per_warp, "yes" if ok else "NO", profile_call(rotating(f, sets))[2]))
        heuristics.persistent_config = original
        torch._dynamo.reset()
        f = compiled(prog.fn, "inductor", False)
        f(*sets[0])
        rows.append((prog.name, dtype, "inductor", "-", "-", profile_call(rotating(f, sets))[2]))
    print(f"device {torch.cuda.get_device_name()}")
    print(markdown_table(["program", "dtype", "tile elements", "elements per warp", "matches", "kernel us"], rows))


if __name__ == "__main__":
    main()
