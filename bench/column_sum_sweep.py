"""Column sums (``x.sum(0)``: outer reductions) against their schedule (GPU only), beside Inductor+combo.

    python bench/column_sum_sweep.py [--shapes 8192x2048,16384x768] [--dtypes bf16,fp32] [--fn sum|norm_grads]
                                     [--splits 16,32] [--outer-rblocks 16,32] [--outer-columns 16,32] [--outer-warps 2,8]

``--fn sum``: ``x.sum(0)``; ``--fn norm_grads``: a layer norm's backward over [rows, columns] as AOTAutograd hands it
over (the per-row sums given): the input gradient stored per element and three column sums (the norm's weight and
bias gradients, the next bias's) in one kernel -- ViT's fp32 training step ran that kernel over [3152, 192] in
96 programs, 20.8 µs a layer (BENCHMARKS.md, nineteenth session).
For each shape and dtype: Inductor+combo, then fusec as it is, then fusec with outer reductions persistent up to
``--outer-persistent`` rows instead of ``OUTER_PERSISTENT_MAX``, with each ``--splits`` count, and with each
``--outer-rblocks`` rows a step of a looped column reduction instead of ``heuristics.OUTER_LOOP_RBLOCK``, with
each ``--outer-columns`` columns a program instead of ``heuristics.OUTER_LOOP_COLUMNS``, and with each ``--outer-warps``
instead of ``heuristics.OUTER_LOOP_WARPS``.  Each
configuration is compiled anew in this process (kernel runners are keyed by their launch literals, so a changed
launch rule never reuses another configuration's binaries), checked on fresh inputs, and timed with the CUDA
profiler: median of 15 calls, L2 flushed before each, cycling through copies of the input (256 MiB in all).
"""

import argparse
import os

import torch

os.environ.setdefault("FUSEC_GRAPH_CACHE", "0")  # each configuration must really compile

import fusec.analysis.heuristics as heuristics  # noqa: E402
import fusec.passes.schedule_kernels as schedule  # noqa: E402
from fusec.pipeline import default_pipeline_spec  # noqa: E402
from fusec.tools.benchmark import compiled, markdown_table, profile_call, rotating, rotation_sets  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32, "fp16": torch.float16}


def column_sum(x):
    return x.sum(0)


def norm_grads(x, dy, res, a, b, rstd, w):
    """A layer norm's input gradient (``x`` the normalized input, ``a`` and ``b`` its per-row sums) plus a
    residual, and the column sums its backward graph takes with it."""
    dx = res + rstd * (dy * w * x.shape[1] - a - x * b)
    return dy.sum(0), (dy * x).sum(0), dx.sum(0), dx


def norm_grads_inputs(dims, dt):
    rows, cols = dims
    full = [torch.randn(rows, cols, device="cuda", dtype=dt) for _ in range(3)]
    per_row = [torch.randn(rows, 1, device="cuda", dtype=dt) for _ in range(2)] + [torch.rand(rows, 1, device="cuda", dtype=dt) + 0.5]
    return full + per_row + [torch.randn(cols, device="cuda", dtype=dt)]


FUNCTIONS = {"sum": column_sum, "norm_grads": norm_grads}


def fusec(fn, outer_persistent: int, splits: int, outer_rblock: int, outer_columns: int, outer_warps: int):
    """fusec with these choices (0 splits: the pass chooses)."""
    schedule.OUTER_PERSISTENT_MAX = outer_persistent
    heuristics.OUTER_LOOP_RBLOCK, heuristics.OUTER_LOOP_COLUMNS = outer_rblock, outer_columns
    heuristics.OUTER_LOOP_WARPS = outer_warps
    heuristics.looped_config.cache_clear()  # memoised under the old constant
    spec = default_pipeline_spec().replace("split-reductions", f"split-reductions{{splits={splits}}}") if splits else None
    torch._dynamo.reset()
    return torch.compile(fn, backend="fusec", options={"pipeline": spec} if spec else {})


def max_error(got, want, rows: int) -> float:
    """The largest difference over all outputs, per row summed (column sums grow with the rows)."""
    got, want = (got,) if isinstance(got, torch.Tensor) else got, (want,) if isinstance(want, torch.Tensor) else want
    return max((g.double() - w).abs().max().item() for g, w in zip(got, want, strict=True)) / rows


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="8192x2048,16384x768,2048x3072,4096x1024,1024x768")
    p.add_argument("--dtypes", default="bf16,fp32")
    p.add_argument("--outer-persistent", type=int, default=0, help="an alternative OUTER_PERSISTENT_MAX (0: none)")
    p.add_argument("--splits", default="16,32", help="split counts to try besides the pass's own")
    p.add_argument("--outer-rblocks", default="", help="rows a step of a looped column reduction to try (e.g. 16,32)")
    p.add_argument("--outer-columns", default="", help="columns a looped column reduction's program takes (e.g. 16,32)")
    p.add_argument("--outer-warps", default="", help="warps of a looped column reduction's program to try (e.g. 2,8)")
    p.add_argument("--fn", default="sum", choices=sorted(FUNCTIONS))
    args = p.parse_args()
    fn = FUNCTIONS[args.fn]
    current, step, cols = schedule.OUTER_PERSISTENT_MAX, heuristics.OUTER_LOOP_RBLOCK, heuristics.OUTER_LOOP_COLUMNS
    warps = heuristics.OUTER_LOOP_WARPS
    configs = [("fusec", current, 0, step, cols, warps)]
    if args.outer_persistent:
        configs += [(f"persistent to {args.outer_persistent} rows", args.outer_persistent, 0, step, cols, warps)]
    configs += [(f"{s} splits", current, int(s), step, cols, warps) for s in args.splits.split(",") if s]
    configs += [(f"{r} rows a step", current, 0, int(r), cols, warps) for r in args.outer_rblocks.split(",") if r]
    configs += [(f"{c} columns a program", current, 0, step, int(c), warps) for c in args.outer_columns.split(",") if c]
    configs += [(f"{w} warps a looped program", current, 0, step, cols, int(w)) for w in args.outer_warps.split(",") if w]
    rows = []
    for shape in args.shapes.split(","):
        dims = tuple(int(d) for d in shape.split("x"))
        for name in args.dtypes.split(","):
            dt = DTYPES[name]
            torch.manual_seed(0)
            def make(dims=dims, dt=dt):
                return [torch.randn(*dims, device="cuda", dtype=dt) + 1] if fn is column_sum else norm_grads_inputs(dims, dt)

            sets = rotation_sets(make(), make)
            torch._dynamo.reset()
            inductor = compiled(fn, "inductor-combo", False)
            rows.append((shape, name, "inductor-combo", f"{profile_call(rotating(inductor, sets), repeats=15)[2]:.1f}", "-"))
            for label, *choices in configs:
                f = fusec(fn, *choices)
                fresh = [t + 3 for t in make()]  # a stale buffer would not match them
                err = max_error(f(*fresh), fn(*[t.double() for t in fresh]), dims[0])
                us = f"{profile_call(rotating(f, sets), repeats=15)[2]:.1f}"
                rows.append((shape, name, label, us, f"{err:.1g}"))
                schedule.OUTER_PERSISTENT_MAX, heuristics.OUTER_LOOP_RBLOCK, heuristics.OUTER_LOOP_COLUMNS = current, step, cols
                heuristics.OUTER_LOOP_WARPS = warps
                heuristics.looped_config.cache_clear()
    print(markdown_table(["shape", "dtype", "configuration", "device us", "max error / rows"], rows))


if __name__ == "__main__":
    main()
