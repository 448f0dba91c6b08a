"""What cuDNN attention costs on q/k/v laid out as separate projections or as column slices of one merged projection.

    python bench/attention_strides.py [--batch 8 --length 128 --heads 12 --dim 64]

merge-matmuls gives attention its q, k and v as column slices of one [tokens, 3 * heads * dim] product: every row
stride is 3 * heads * dim, where separate projections give heads * dim.  Each layout runs in a fresh process (cuDNN
builds an execution plan per layout and size, once per process; ``flash``: the flash kernel, for comparison): the
first call's seconds (plan building included), then a second size's first call, then device µs per call (CUDA
events, 200 calls).  One JSON line per layout and kernel, twice.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

CHILD = r"""
import json, sys, time, torch
layout, kernel, b, s, h, d = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:7])
def qkv(seq):
    if layout == "merged":
        x = torch.randn(b, seq, 3 * h * d, device="cuda", dtype=torch.bfloat16)
        return [t.view(b, seq, h, d).transpose(1, 2) for t in x.split(h * d, dim=2)]
    return [torch.randn(b, seq, h, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2) for _ in range(3)]
def call(q, k, v):
    if kernel == "flash":
        return torch._scaled_dot_product_flash_attention(q, k, v)[0]
    return torch._scaled_dot_product_cudnn_attention(q, k, v, None, False, 0.0, False, False)[0]
torch.zeros(1, device="cuda"); torch.cuda.synchronize()
first = []
for seq in (s, s // 2):
    q, k, v = qkv(seq)
    t = time.perf_counter(); call(q, k, v); torch.cuda.synchronize(); first.append(time.perf_counter() - t)
q, k, v = qkv(s)
for _ in range(20): call(q, k, v)
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
start.record()
for _ in range(200): call(q, k, v)
end.record(); torch.cuda.synchronize()
print(json.dumps({"layout": layout, "kernel": kernel, "strides": list(q.stride()), "first_call_s": round(first[0], 3),
                  "second_size_first_call_s": round(first[1], 3), "device_us": round(start.elapsed_time(end) * 5, 2)}))
"""


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--length", type=int, default=128)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--dim", type=int, default=64)
    args = p.parse_args()
    for layout, kernel in [(layout, kernel) for _ in range(2) for kernel in ("cudnn", "flash")
                           for layout in ("separate", "merged")]:
        out = subprocess.run([sys.executable, "-c", CHILD, layout, kernel, str(args.batch), str(args.length), str(args.heads),
                              str(args.dim)], capture_output=True, text=True)
        print(out.stdout.strip() or out.stderr.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
