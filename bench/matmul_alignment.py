"""Which layouts make cuBLAS pick its fast kernels for a matmul with a misaligned N (GPT-2's LM head), GPU only.

    python bench/matmul_alignment.py [--m 1024 --k 768 --n 50257]

Times ``A[M, K] @ W[N, K].t()`` in bf16 several ways and names the kernels each runs: contiguous output,
output with a padded row stride (``mm.out``), W padded to N' (a multiple of 8) before the product, and
Inductor's compiled version (with its output strides). What fusec's pad-matmuls pass does (pad W, slice the
product) was chosen from this table, copies included.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as Fn
from torch.profiler import ProfilerActivity, profile


def kernels(fn, reps: int = 10) -> tuple[float, list[str]]:
    """Device µs per call and the kernels of one call."""
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA], acc_events=True) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    total = sum(e.device_time_total for e in events) / reps
    names = sorted({e.name[:60] for e in events})
    return total, names


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--m", type=int, default=1024)
    p.add_argument("--k", type=int, default=768)
    p.add_argument("--n", type=int, default=50257)
    args = p.parse_args()
    m, k, n = args.m, args.k, args.n
    n8 = -(-n // 8) * 8
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=g)
    want = a @ w.t()
    padded_out = torch.empty_strided((m, n), (n8, 1), device="cuda", dtype=torch.bfloat16)
    w_rows = Fn.pad(w, (0, 0, 0, n8 - n))  # W with zero rows: N' = n8, made once (a weight that lives padded)

    cases = {
        "mm, contiguous out": lambda: a @ w.t(),
        "mm.out, padded row stride": lambda: torch.mm(a, w.t(), out=padded_out),
        "pad W rows per call, mm, slice": lambda: (a @ Fn.pad(w, (0, 0, 0, n8 - n)).t())[:, :n],
        "pad W rows per call, mm, slice, contiguous": lambda: (a @ Fn.pad(w, (0, 0, 0, n8 - n)).t())[:, :n].contiguous(),
        "W already padded, mm, slice": lambda: (a @ w_rows.t())[:, :n],
        "mm into W-padded product, copy to contiguous": lambda: torch.mm(a, w_rows.t())[:, :n].contiguous(),
    }
    compiled = torch.compile(lambda a, w: a @ w.t())
    out = compiled(a, w)
    cases["inductor (default)"] = lambda: compiled(a, w)
    rows = []
    for name, fn in cases.items():
        got = fn()
        err = (got.float() - want.float()).abs().max().item()
        us, names = kernels(fn)
        rows.append((name, us, err, names))
    print(f"inductor output strides: {tuple(out.stride())} (eager: {tuple(want.stride())})")
    print(f"| layout (M={m}, K={k}, N={n}, bf16) | device µs | max abs error | kernels |")
    print("|---|---|---|---|")
    for name, us, err, names in rows:
        print(f"| {name} | {us:.1f} | {err:.2g} | {'; '.join(names)} |")


if __name__ == "__main__":
    main()
