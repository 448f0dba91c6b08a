"""Host and device time of one eager attention call with its backward, per torch attention kernel (GPU), bf16, at
ViT-tiny's and BERT's sizes, with and without an additive mask.

    python bench/attention_host.py

Host: wall per call over 300 calls without synchronising (host-bound: the queue never fills); device: the CUDA
profiler's kernel time per call over 20 calls, measured after every host timing (launches stay slower after it).
"""

from __future__ import annotations

import functools
import time

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

SIZES = {"vit": (16, 3, 197, 64), "bert": (8, 12, 128, 64)}  # batch, heads, tokens, head dim
KERNELS = (SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH)


def step(kernel, q, k, v, grad, mask) -> None:
    with sdpa_kernel(kernel):
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    out.backward(grad)


def host_us(fn, calls: int = 300) -> float:
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / calls * 1e6


def device_us(fn, calls: int = 20) -> float:
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    return sum(e.self_device_time_total for e in prof.key_averages()) / calls


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
                rows.append((f"{name} {'mask' if masked else 'none'} {kernel.name}", fn, host_us(fn)))
    print(f"{'call':40s} {'host us':>9s} {'device us':>9s}")
    for label, fn, host in rows:
        print(f"{label:40s} {host:9.1f} {device_us(fn):9.1f}")


if __name__ == "__main__":
    main()
