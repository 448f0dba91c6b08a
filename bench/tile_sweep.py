"""Tiled-pointwise tile shapes against kernel time (GPU only): which [XBLOCK, RBLOCK] the heuristic should pick.

    python bench/tile_sweep.py [--configs 64x64,16x256,4x1024,...]

Programs whose pointwise kernel ``tile-pointwise`` makes 2-D: a zero-padding copy of rows
(pad-matmuls' copy of a language model's logit gradients: every access contiguous along the
rows, 16-byte-misaligned rows), a row broadcast (``x + b``: contiguous along the rows) and a
transpose (one access contiguous along each axis).  For each tile shape the heuristic is
replaced, the program recompiled with backend="fusec", checked against eager, and its
kernels timed with the CUDA profiler (median of 10 calls); then fusec without tile-pointwise
(flat) and Inductor.
"""
import argparse
import os

import torch

from fusec.analysis import heuristics
from fusec.tools.benchmark import compiled, markdown_table, profile_call


def pad_rows(g: torch.Tensor, pad: int) -> torch.Tensor:
    """pad-matmuls' copy: [batch, length, n] rows as [tokens, n + pad], zeros after each row."""
    rows = g.view(-1, g.shape[-1])
    return torch.cat([rows, rows.new_zeros(rows.shape[0], pad)], 1)


PROGRAMS = {  # name -> (function, input shapes)
    "pad-rows-50257": (lambda g: pad_rows(g, 7), [(4, 256, 50257)]),
    "pad-rows-30522": (lambda g: pad_rows(g, 6), [(8, 128, 30522)]),
    "row-broadcast": (lambda x, b: torch.relu(x + b), [(8192, 768), (768,)]),
    "transpose": (lambda x: (x * 2).t().contiguous(), [(8192, 768)]),
}


def fixed(xblock: int, rblock: int):
    def tiled_config(xnumel, rnumel, *rest):
        warps = max(1, min(8, xblock * rblock // 256))
        return heuristics.LaunchConfig(xblock, rblock, warps)
    return tiled_config


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--programs", default=",".join(PROGRAMS))
    p.add_argument("--configs", default="current,64x64,32x128,16x256,8x512,4x1024,2x2048,1x4096")
    p.add_argument("--dtype", default="bfloat16")
    a = p.parse_args()
    os.environ["FUSEC_GRAPH_CACHE"] = "0"  # else a recompile returns the launcher cached with the first tile shape
    dtype = getattr(torch, a.dtype)
    original = heuristics.tiled_config
    rows = []
    for name in a.programs.split(","):
        fn, shapes = PROGRAMS[name]
        torch.manual_seed(0)
        inputs = [torch.randn(s, device="cuda", dtype=dtype) for s in shapes]
        want = fn(*inputs)
        for config in a.configs.split(","):
            heuristics.tiled_config = original if config == "current" else fixed(*map(int, config.split("x")))
            f = compiled(fn, "fusec", False)
            ok = torch.equal(f(*inputs), want)
            rows.append((name, config, "yes" if ok else "NO", profile_call(lambda f=f, inputs=inputs: f(*inputs))[2]))
        heuristics.tiled_config = original
        for backend in ("fusec-flat", "inductor"):
            f = compiled(fn, backend, False)
            ok = torch.equal(f(*inputs), want)
            rows.append((name, backend, "yes" if ok else "NO", profile_call(lambda f=f, inputs=inputs: f(*inputs))[2]))
    print(f"device {torch.cuda.get_device_name()}, {a.dtype}")
    print(markdown_table(["program", "tile (XBLOCK x RBLOCK) or backend", "matches", "kernel us"], rows))


if __name__ == "__main__":
    main()
