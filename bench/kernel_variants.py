"""One kernel of a dump under other launch configurations: checked against the reference interpreter, timed (GPU).

    python bench/kernel_variants.py DUMP/final.mlir KERNEL [KERNEL ...] [--configs 64x8x2,32x16x4]

Reads IR after ``schedule-kernels`` with static sizes (a dump's ``final.mlir``; a kernel inside a combo is taken
alone), lowers each named kernel as the pipeline would, and launches its Triton source on random inputs laid out
as the IR's buffer types say: first at the configuration the launch heuristics give (``heuristic``), then at each
``--configs`` entry ``XBLOCKxRBLOCKxWARPS`` (``XBLOCKxWARPS`` for a pointwise kernel).  Every configuration's
outputs are compared with the dialect's reference interpreter run on the same inputs, and on a GPU timed with
``triton.testing.do_bench`` (median, L2 cleared before each run); the check is the largest difference over the
largest magnitude of each output, at most 1e-2 where an output is 16-bit (the interpreter rounds every 16-bit op,
the lowering keeps fp32 between ops), 1e-5 else.  A persistent kernel needs an RBLOCK of all its rows: a smaller one
shows as a mismatch.  Under ``TRITON_INTERPRET=1`` (no GPU) it checks the values only.  What it answers: does a
tile or warp count the heuristics do not pick run this kernel faster, without a scratch script per question (the
split layer-norm backward's 2 warps were found with one).
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

import torch

from fusec.dialects import fusec as F
from fusec.dialects.attributes import tensor_type_of
from fusec.lowering.triton_kernel import TritonKernel, lower_kernel
from fusec.pipeline import parse_module
from fusec.registry import make_context
from fusec.runtime.interpreter import run_kernel
from fusec.runtime.kernel_cache import load_kernel
from fusec.runtime.kernel_timer import random_buffers


def buffers(kernel: F.KernelOp, device: str, seed: int = 0) -> list[torch.Tensor]:
    """Random inputs for ``kernel`` (normal floats, small non-negative ints), with the strides its types give."""
    return random_buffers([tensor_type_of(v) for v in kernel.inputs], {}, device, seed)


def empty_outputs(kernel: F.KernelOp, device: str) -> list[torch.Tensor]:
    outs = []
    for r in kernel.outputs:
        t = tensor_type_of(r)
        outs.append(torch.empty_strided([int(d) for d in t.dims], [int(s) for s in t.layout], dtype=F.torch_dtype(r.type),
                                        device=device))
    return outs


def relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    """The largest difference over the largest magnitude: the interpreter rounds each 16-bit op's result where the
    lowering keeps fp32 between ops, so 16-bit outputs differ by an ulp of their largest values, not of each."""
    g, w = got.double().cpu(), want.double().cpu()
    if g.numel() == 0:
        return 0.0
    scale = w.abs().max().item() or 1.0
    return (g - w).abs().max().item() / scale


def parse_config(text: str, reduction: bool) -> tuple[int, int, int]:
    parts = [int(p) for p in text.lower().split("x")]
    if len(parts) != (3 if reduction else 2):
        raise SystemExit(f"kernel_variants: config '{text}' is XBLOCKxRBLOCKxWARPS (XBLOCKxWARPS for a pointwise kernel)")
    return (parts[0], parts[1], parts[2]) if reduction else (parts[0], 0, parts[1])


def variants(kernel: F.KernelOp, configs: list[str], device: str) -> list[tuple]:
    """(kernel, configuration, XBLOCK, RBLOCK, warps, matches, µs) for the heuristic's and each config."""
    lowered: TritonKernel = lower_kernel(kernel)
    if lowered.kind == "matmul":
        raise SystemExit(f"kernel_variants: {lowered.name} is a matmul kernel (tiles, not blocks: see bench/matmul_epilogues.py)")
    if any(not d.is_number for d in kernel.domain_exprs):
        raise SystemExit(f"kernel_variants: {kernel.sym_name.data} has symbolic sizes "
                         f"[{', '.join(str(d) for d in kernel.domain_exprs)}]: dump the graph at static sizes")
    dims = [int(d) for d in kernel.domain_exprs]
    xnumel, rnumel = dims[0], (dims[1] if len(dims) > 1 else 1)
    reduction = lowered.kind != "pointwise"
    fn = load_kernel(lowered.source, lowered.name, interpret=device == "cpu")
    inputs = buffers(kernel, device)
    want = run_kernel(kernel, inputs, {}, torch.device(device))
    sizes = [int(v) for _, v in lowered.size_args]  # static: xnumel, rnumel
    heuristic = lowered.config(xnumel, rnumel)
    chosen = [("heuristic", (heuristic.xblock, heuristic.rblock, heuristic.num_warps))]
    chosen += [(c, parse_config(c, reduction)) for c in configs]
    rows = []
    for label, (xblock, rblock, warps) in chosen:
        outs = empty_outputs(kernel, device)
        blocks = {"XBLOCK": xblock, **({"RBLOCK": rblock} if reduction else {})}
        programs = -(-xnumel // xblock) * (-(-rnumel // rblock) if lowered.kind == "tiled" else 1)

        def launch(outs=outs, blocks=blocks, programs=programs, warps=warps):
            fn[(programs,)](*inputs, *outs, *sizes, **blocks, num_warps=warps)

        launch()
        error = max(relative_error(g, w) for g, w in zip(outs, want, strict=True))
        matches = error <= (1e-2 if 16 in {g.dtype.itemsize * 8 for g in outs} else 1e-5)
        us = float("nan")
        if device == "cuda":
            from triton.testing import do_bench

            us = do_bench(launch, warmup=25, rep=200, return_mode="median") * 1000
        rows.append((lowered.name, label, xblock, rblock if reduction else "-", warps, f"{'yes' if matches else 'NO'} ({error:.0e})",
                     f"{us:.1f}"))
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("ir")
    p.add_argument("kernels", nargs="+", help="kernel names (sym_name in the IR)")
    p.add_argument("--configs", default="", help="comma-separated XBLOCKxRBLOCKxWARPS (XBLOCKxWARPS: pointwise)")
    args = p.parse_args()
    warnings.filterwarnings("ignore")
    device = "cpu" if os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available() else "cuda"
    if device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        raise SystemExit("kernel_variants: no GPU; run under TRITON_INTERPRET=1 to check values on the CPU")
    with open(args.ir) as f:
        module = parse_module(make_context(), f.read(), args.ir)
    by_name = {k.sym_name.data: k for k in module.walk() if isinstance(k, F.KernelOp)}
    missing = [n for n in args.kernels if n not in by_name]
    if missing:
        raise SystemExit(f"kernel_variants: no kernel {', '.join(missing)} in {args.ir}")
    configs = [c for c in args.configs.split(",") if c]
    rows = [row for name in args.kernels for row in variants(by_name[name], configs, device)]
    print(f"device: {torch.cuda.get_device_name() if device == 'cuda' else 'cpu (Triton interpreter: values only)'}")
    print("| kernel | configuration | XBLOCK | RBLOCK | warps | matches the interpreter | µs |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(str(c) for c in row) + " |")
    if any(row[5].startswith("NO") for row in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
