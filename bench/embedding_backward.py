"""An embedding's weight gradient, five ways, on the GPU: which one a compiler should generate (issue 18, training).

    python bench/embedding_backward.py [--dtype bf16] [--shapes gpt2-wte,llama,...]

``grad_W[v] = sum of grad[t] over the tokens t with idx[t] == v``, [V, D] from T tokens.  Measured per shape
(device µs, CUDA profiler) and checked against an fp64 reference:

- ``torch``: ``aten.embedding_dense_backward`` (what fusec calls today: a zero fill and a sorting kernel);
- ``inductor``: torch.compile of the same call (Inductor's decomposition: fp32 zeros, an atomic-add kernel, a cast);
- ``atomic fp32``: that decomposition in eager kernels (zeros, ``index_put_(accumulate=True)``, ``to``);
- ``equality mm``: ``S = (idx[:, None] == idx[None, :]) @ grad`` (each token's row summed over the tokens of its
  word, fp32 accumulation on tensor cores, one rounding), then ``out[idx] = S`` into zeros (duplicates write the
  same value): no atomics, deterministic, T*T*D multiply-adds;
- ``tied``: GPT-2's tied LM head: ``lm_grad + grad_W`` where the equality mm adds only the touched rows in place
  (``lm_grad[idx] += S`` as a plain index write) against torch's kernel plus a full [V, D] add.

Prints a Markdown table last.
"""

from __future__ import annotations

import argparse

import torch
from matmul_alignment import kernels

SHAPES = {  # name -> (V, D, T, how the ids repeat)
    "gpt2-wte": (50257, 768, 1024, "random"), "gpt2-wpe": (1024, 768, 1024, "positions"),
    "llama": (32000, 512, 1024, "random"), "bert-word": (30522, 768, 1024, "random"),
    "bert-type": (2, 768, 1024, "zeros"), "gpt2-wte-8k": (50257, 768, 8192, "random"),
    "llama3-4k": (128256, 4096, 4096, "random"),
}


def device_us(fn, reps: int = 20) -> float:
    return kernels(fn, reps)[0]


def ids_for(kind: str, v: int, t: int, g: torch.Generator) -> torch.Tensor:
    if kind == "positions":
        return torch.arange(256).repeat(t // 256)
    if kind == "zeros":
        return torch.zeros(t, dtype=torch.long)
    return torch.randint(0, v, (t,), generator=g)


def equality_sum(grad: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    same = (idx[:, None] == idx[None, :]).to(grad.dtype)
    return same @ grad


def methods(v: int, d: int, idx: torch.Tensor, grad: torch.Tensor, lm: torch.Tensor) -> list:
    """(name, function, µs of the function's own reset to subtract) for one shape."""
    dtype = grad.dtype

    def dense():
        return torch.ops.aten.embedding_dense_backward(grad, idx, v, -1, False)

    def atomic():
        return torch.zeros(v, d, dtype=torch.float32, device="cuda").index_put_((idx,), grad.float(),
                                                                               accumulate=True).to(dtype)

    def equality():
        out = torch.zeros(v, d, dtype=dtype, device="cuda")
        out[idx] = equality_sum(grad, idx)
        return out

    compiled = torch.compile(lambda gr, ix: torch.ops.aten.embedding_dense_backward(gr, ix, v, -1, False))
    lm_copy = lm.clone()

    def tied_equality():
        lm_copy.copy_(lm)  # the benchmark's reset (a real graph writes into the dead LM-head gradient)
        lm_copy[idx] = lm_copy[idx] + equality_sum(grad, idx)
        return lm_copy

    reset_us = device_us(lambda: lm_copy.copy_(lm))
    return [("torch", dense, 0.0), ("inductor", lambda: compiled(grad, idx), 0.0), ("atomic fp32", atomic, 0.0),
            ("equality mm", equality, 0.0), ("tied: torch + add", lambda: lm + dense(), 0.0),
            ("tied: equality in place", tied_equality, reset_us)]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
    p.add_argument("--shapes", default=",".join(SHAPES))
    args = p.parse_args()
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[args.dtype]
    g = torch.Generator().manual_seed(0)
    rows = []
    for name in args.shapes.split(","):
        v, d, t, kind = SHAPES[name]
        idx = ids_for(kind, v, t, g).cuda()
        grad = torch.randn(t, d, generator=g).to("cuda", dtype)
        lm = torch.randn(v, d, generator=g).to("cuda", dtype)
        exact = torch.zeros(v, d, dtype=torch.float64, device="cuda").index_add_(0, idx, grad.double())
        for method, fn, reset_us in methods(v, d, idx, grad, lm):
            want = exact + lm.double() if method.startswith("tied") else exact
            error = ((fn().double() - want).norm() / want.norm()).item()
            rows.append((name, v, d, t, method, device_us(fn) - reset_us, error))
            print(rows[-1], flush=True)
    print(f"\n| shape | V x D, T tokens | method | device µs | rel. error ({args.dtype}) |\n|---|---|---|---|---|")
    for name, v, d, t, method, us, error in rows:
        print(f"| {name} | {v} x {d}, {t} | {method} | {us:.1f} | {error:.1e} |")


if __name__ == "__main__":
    main()
