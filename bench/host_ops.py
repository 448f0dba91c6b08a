"""Host time per op of one bf16 training step (GPU), by torch.profiler with CPU activity only (both compilers
measured alike), grouped by op and input shapes, then by op.

    python bench/host_ops.py MODEL fusec|inductor-combo
"""

from __future__ import annotations

import gc
import sys

import torch
from models import SIZES, build, inputs, loss_of
from torch.profiler import ProfilerActivity, profile


def main(name: str, backend: str, steps: int = 10) -> None:
    if backend not in ("fusec", "inductor-combo"):
        raise SystemExit(f"backend {backend!r}: fusec or inductor-combo")
    torch.manual_seed(0)
    model, kind = build(name)
    model = model.to("cuda", torch.bfloat16).train(True)
    batch, size = SIZES[name]
    data = inputs(kind, batch, size, torch.bfloat16, torch.Generator().manual_seed(1))

    def run():
        model.zero_grad(set_to_none=True)
        loss_of(model(**data)).backward()

    if backend == "fusec":
        model.compile(backend="fusec")
    else:
        import torch._inductor.config as inductor_config

        inductor_config.combo_kernels = True
        model.compile()
    run()
    gc.collect()
    for _ in range(5):
        run()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(steps):
            run()
        torch.cuda.synchronize()
    for grouped in (prof.key_averages(group_by_input_shape=True), prof.key_averages()):
        for r in sorted(grouped, key=lambda r: -r.self_cpu_time_total)[:25]:
            print(f"{backend:14s} {r.key[:44]:44s} a step x{r.count / steps:6.1f} {r.self_cpu_time_total / steps:8.1f} us "
                  f"({r.self_cpu_time_total / max(r.count, 1):6.1f} us each)  {str(r.input_shapes)[:60]}")
        print()


if __name__ == "__main__":
    main(*sys.argv[1:3])
