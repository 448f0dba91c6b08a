"""Matmuls sharing an operand, or summed, as one cuBLAS call on concatenated operands (merge-matmuls), on the GPU, bf16.

    python bench/merge_matmuls.py

Per case (M tokens, K, the N of each projection): device µs (CUDA profiler, 20 calls) of the projections as
separate calls and as one call on concatenated weights (forward), of the input's gradient (a sum of products
against one product of concatenated gradients and weights), of the weight gradients (separate against stacked),
and of the copies a merge adds: the weights' and the gradients' concatenations.  Prints a Markdown table.
"""

from __future__ import annotations

import torch
from matmul_alignment import kernels

CASES = {  # name -> (M, K, [N_i])
    "llama-qkv": (1024, 512, [512, 256, 256]), "llama-gateup": (1024, 512, [1376, 1376]),
    "bert-qkv": (1024, 768, [768] * 3), "vit-qkv": (3152, 192, [192] * 3),
    "llama7b-qkv-2k": (2048, 4096, [4096] * 3), "llama7b-gateup-2k": (2048, 4096, [11008] * 2),
}


def measure(m: int, k: int, ns: list[int], g: torch.Generator) -> list[float]:
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
    ws = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=g) * 0.05 for n in ns]
    wc = torch.cat(ws)
    dys = [torch.randn(m, n, device="cuda", dtype=torch.bfloat16, generator=g) for n in ns]
    dyc = torch.cat(dys, 1)
    torch.testing.assert_close(torch.cat([x @ w.t() for w in ws], 1), x @ wc.t())
    calls = [lambda: [x @ w.t() for w in ws], lambda: x @ wc.t(), lambda: torch.cat(ws),
             lambda: sum(dy @ w for dy, w in zip(dys, ws, strict=True)), lambda: dyc @ wc,
             lambda: [dy.t() @ x for dy in dys], lambda: dyc.t() @ x, lambda: torch.cat(dys, 1)]
    return [kernels(call, 20)[0] for call in calls]


def main() -> None:
    g = torch.Generator(device="cuda").manual_seed(0)
    print("| case (M, K, N each) | fwd separate | fwd merged | cat W | dX separate | dX merged | dW separate | dW merged | cat dY |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, (m, k, ns) in CASES.items():
        row = measure(m, k, ns, g)
        print(f"| {name} ({m}, {k}, {'/'.join(map(str, ns))}) | " + " | ".join(f"{v:.1f}" for v in row) + " |")


if __name__ == "__main__":
    main()
