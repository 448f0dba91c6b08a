"""Host and device time of one eager attention call with its backward, per torch attention kernel (GPU), bf16, at
ViT-tiny's and BERT's sizes, with and without an additive mask.

    python bench/attention_host.py

Host: wall per call over 300 calls without synchronising (host-bound: the queue never fills); device: the CUDA
profiler's kernel time per call over 20 calls, measured after every host timing (launches stay slower after it);
both timers are host_profile.py's.
"""

from __future__ import annotations

import functools

import torch
from host_profile import host_us, kernel_us
from torch.nn.attention import SDPBackend, sdpa_kernel

SIZES = {"vit": (16, 3, 197, 64), "bert": (8, 12, 128, 64)}  # batch, heads, tokens, head dim
KERNELS = (SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH)


def step(kernel, q, k, v, grad, mask) -> None:
    with sdpa_kernel(kernel):
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    out.backward(grad)


def warm(fn) -> None:
    for _ in range(20):
        fn()


def main() -> None:
    torch.manual_seed(0)
    rows = []
    for name, (b, h, t, d) in SIZES.items():
        q, k, v = (torch.randn(b, h, t, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        grad = torch.randn(b, h, t, d, device="cuda", dtype=torch.bfloat16)
        mask = torch.zeros(b, 1, t, t, device="cuda", dtype=torch.bfloat16)
        for masked in (False, True):
            for kernel in KERNELS:
                if masked and kernel == SDPBackend.FLASH_ATTENTION:
                    continue  # flash attention takes no mask
                fn = functools.partial(step, kernel, q, k, v, grad, mask if masked else None)
                warm(fn)
                rows.append((f"{name} {'mask' if masked else 'none'} {kernel.name}", fn, host_us(fn, 300)))
    print(f"{'call':40s} {'host us':>9s} {'device us':>9s}")
    for label, fn, host in rows:
        print(f"{label:40s} {host:9.1f} {kernel_us(fn):9.1f}")


if __name__ == "__main__":
    main()
