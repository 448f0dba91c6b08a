"""Steady-state wall time per call of one model through one backend (GPU), bf16, static shapes.

    python bench/wall.py MODEL infer|train BACKEND

BACKEND: fusec, fusec-ro (fusec's ``cudagraphs`` option) or another of models.py's fusec variants; inductor,
inductor-combo, inductor-ro (``mode="reduce-overhead"``: CUDA graphs), inductor-combo-ro.

Compiles, runs once, collects the compile's garbage (a full collection of it inside a timed loop once read as
several ms a call), warms up, and prints the median, min and max of 5 rounds of 20 calls.  No CUDA profiler runs in
the process (after one, launches stay slower).  One configuration per process: run it in a loop of processes.
"""

from __future__ import annotations

import gc
import statistics
import sys
import time

import torch
from models import SIZES, build, fusec_variant, inputs, loss_of, main_of


def main(name: str, mode: str, backend: str) -> None:
    torch.manual_seed(0)
    model, kind = build(name)
    model = model.to("cuda", torch.bfloat16).train(mode == "train")
    batch, size = SIZES[name]
    data = inputs(kind, batch, size, torch.bfloat16, torch.Generator().manual_seed(1))
    if mode == "infer":
        data.pop("labels", None)

    def run():
        if mode == "infer":
            with torch.no_grad():
                return main_of(model(**data))
        model.zero_grad(set_to_none=True)
        loss = loss_of(model(**data))
        loss.backward()
        return loss

    if backend.startswith("fusec"):
        model.compile(backend="fusec", options=fusec_variant(backend))
    else:
        import torch._inductor.config as ic

        ic.combo_kernels = backend.startswith("inductor-combo")
        model.compile(mode="reduce-overhead" if backend.endswith("-ro") else None)
    run()
    gc.collect()
    for _ in range(5):
        run()
    rounds = []
    for _ in range(5):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(20):
            run()
        torch.cuda.synchronize()
        rounds.append((time.perf_counter() - start) / 20 * 1e3)
    print(f"WALL {name} {mode} {backend} median {statistics.median(rounds):.2f} ms "
          f"min {min(rounds):.2f} max {max(rounds):.2f}")


if __name__ == "__main__":
    main(*sys.argv[1:4])
