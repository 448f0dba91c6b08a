"""Column sums (``x.sum(0)``: outer reductions) against their schedule (GPU only), beside Inductor+combo.

    python bench/column_sum_sweep.py [--shapes 8192x2048,16384x768] [--dtypes bf16,fp32]

For each shape and dtype: Inductor+combo, then fusec as it is, then fusec with outer reductions persistent up to
``--outer-persistent`` rows instead of ``OUTER_PERSISTENT_MAX``, and with each ``--splits`` count.  Each
configuration is compiled anew in this process (kernel runners are keyed by their launch literals, so a changed
launch rule never reuses another configuration's binaries), checked on fresh inputs, and timed with the CUDA
profiler: median of 15 calls, L2 flushed before each, cycling through copies of the input (256 MiB in all).
"""

import argparse
import os

import torch

os.environ.setdefault("FUSEC_GRAPH_CACHE", "0")  # each configuration must really compile

import fusec.passes.schedule_kernels as schedule  # noqa: E402
from fusec.pipeline import default_pipeline_spec  # noqa: E402
from fusec.tools.benchmark import compiled, markdown_table, profile_call, rotating, rotation_sets  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32, "fp16": torch.float16}


def column_sum(x):
    return x.sum(0)


def fusec(outer_persistent: int, splits: int):
    """fusec with these choices (0 splits: the pass chooses)."""
    schedule.OUTER_PERSISTENT_MAX = outer_persistent
    spec = default_pipeline_spec().replace("split-reductions", f"split-reductions{{splits={splits}}}") if splits else None
    torch._dynamo.reset()
    return torch.compile(column_sum, backend="fusec", options={"pipeline": spec} if spec else {})


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="8192x2048,16384x768,2048x3072,4096x1024,1024x768")
    p.add_argument("--dtypes", default="bf16,fp32")
    p.add_argument("--outer-persistent", type=int, default=128, help="the alternative OUTER_PERSISTENT_MAX")
    p.add_argument("--splits", default="16,32", help="split counts to try besides the pass's own")
    args = p.parse_args()
    current = schedule.OUTER_PERSISTENT_MAX
    configs = [("fusec", current, 0), (f"persistent to {args.outer_persistent} rows", args.outer_persistent, 0)]
    configs += [(f"{s} splits", current, int(s)) for s in args.splits.split(",") if s]
    rows = []
    for shape in args.shapes.split(","):
        dims = tuple(int(d) for d in shape.split("x"))
        for name in args.dtypes.split(","):
            dt = DTYPES[name]
            torch.manual_seed(0)
            def make(dims=dims, dt=dt):
                return [torch.randn(*dims, device="cuda", dtype=dt) + 1]

            sets = rotation_sets(make(), make)
            torch._dynamo.reset()
            inductor = compiled(column_sum, "inductor-combo", False)
            rows.append((shape, name, "inductor-combo", f"{profile_call(rotating(inductor, sets), repeats=15)[2]:.1f}", "-"))
            for label, outer_persistent, splits in configs:
                f = fusec(outer_persistent, splits)
                fresh = torch.randn(*dims, device="cuda", dtype=dt) + 3  # a stale buffer would not match it
                err = (f(fresh).double() - fresh.double().sum(0)).abs().max().item() / dims[0]
                us = f"{profile_call(rotating(f, sets), repeats=15)[2]:.1f}"
                rows.append((shape, name, label, us, f"{err:.1g}"))
                schedule.OUTER_PERSISTENT_MAX = current
    print(markdown_table(["shape", "dtype", "configuration", "device us", "max error / rows"], rows))


if __name__ == "__main__":
    main()
