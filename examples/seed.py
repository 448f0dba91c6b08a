"""The seed example: four independent row reductions compiled with backend="fusec".

    python examples/seed.py [--dynamic] [--dump-dir DIR]

Runs on the GPU when there is one, else on the CPU under Triton's interpreter;
checks the results against eager PyTorch and prints where the per-pass IR, the
remarks and the generated Triton source were dumped.
"""

import argparse
import sys
from pathlib import Path

import torch


def fn(t1, t2, t3, t4):
    return t1.sum(1), t2.max(1).values, t3.min(1).values, t4.sum(1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dynamic", action="store_true", help="compile with dynamic=True (symbolic sizes)")
    parser.add_argument("--dump-dir", default="fusec_dump", help="where the IR after each pass and the Triton source go")
    args = parser.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    rows, cols = (1024, 512) if device == "cuda" else (64, 512)  # the Triton interpreter is slow on CPU
    torch.manual_seed(0)
    inputs = [torch.randn(rows, cols, device=device) for _ in range(4)]

    compiled = torch.compile(fn, backend="fusec", dynamic=args.dynamic, options={"dump_dir": args.dump_dir})
    got, want = compiled(*inputs), fn(*inputs)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)
        print(f"output {i}: shape {tuple(g.shape)} matches eager (max abs diff {(g - w).abs().max().item():.2e})")
    if args.dynamic:  # one compiled artifact, a second size
        more = [torch.randn(rows + 3, cols, device=device) for _ in range(4)]
        for g, w in zip(compiled(*more), fn(*more), strict=True):
            torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)
        print(f"a second size ({rows + 3} rows) ran through the same compiled graph and matches eager")

    dump = Path(args.dump_dir)
    print(f"\ndevice: {device}; dumps under {dump.resolve()}:")
    for path in sorted(p for p in dump.rglob("*") if p.is_file()):
        print(f"  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
