"""Host time of fusec's generated launcher alone, per call (CPU or GPU; a speed claim only from one machine).

    python bench/launcher_host.py [MODEL ...] [--mode infer|train] [--calls N] [--profile TOP] [--pipeline SPEC]

Compiles each model's inference or training step (bf16 on the GPU, fp32 on the CPU; one short sequence or one
image), records every
extern's results on the first call, then times the graph's launcher with each extern replaced by its recorded
result and each Triton launch by a no-op: what the launcher's own Python costs a call (allocations, views, input
checks, bookkeeping), apart from the kernels, the libraries it calls and Dynamo's guards.  Prints one line per
graph with what its source holds; ``--profile TOP`` also the TOP functions by own time (cProfile, so inflated);
``--pipeline`` compiles with another pipeline (a spec or a .pipeline file: e.g. the default one without a pass).
"""

from __future__ import annotations

import argparse
import functools
import os
import time

import torch
from models import SIZES, build, inputs, loss_of


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("models", nargs="*", default=["gpt2", "bert", "vit"])
    p.add_argument("--mode", choices=["infer", "train"], default="infer")
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--profile", type=int, default=0, metavar="TOP")
    p.add_argument("--pipeline", default=None, metavar="SPEC")
    args = p.parse_args()
    os.environ.setdefault("FUSEC_GRAPH_CACHE", "0")
    import fusec.runtime.compiled as compiled_module
    from fusec.runtime.kernel_runner import KernelRunner

    KernelRunner.launch = lambda self, *a: None  # type: ignore[method-assign]
    recording = [True]
    direct = compiled_module._direct

    def replaying(fn):
        call, seen, at = direct(fn), [], [0]

        def extern(*a, **k):
            if recording[0]:
                seen.append(call(*a, **k))
                return seen[-1]
            at[0] += 1
            return seen[(at[0] - 1) % len(seen)]

        return extern

    compiled_module._direct = replaying
    device = "cuda" if torch.cuda.is_available() else "cpu"
    for name in args.models:
        recording[0] = True
        graphs = []
        original = compiled_module.CompiledGraph.__call__

        def capture(self, graph_inputs, original=original, graphs=graphs):
            graphs.append((self, list(graph_inputs)))
            return original(self, graph_inputs)

        compiled_module.CompiledGraph.__call__ = capture  # type: ignore[method-assign]
        torch._dynamo.reset()
        options = {"pipeline": args.pipeline} if args.pipeline else {}
        model, kind = build(name)
        dtype = torch.bfloat16 if device == "cuda" else torch.float32
        model = model.to(device, dtype).train(args.mode == "train")
        batch, size = (1, 8 if kind == "tokens" else SIZES[name][1])
        data = inputs(kind, batch, size, dtype, torch.Generator().manual_seed(1), device)
        if args.mode == "infer":
            data.pop("labels", None)
            with torch.no_grad():
                torch.compile(model, backend="fusec", options=options)(**data)
        else:  # the forward and the backward graph
            loss_of(torch.compile(model, backend="fusec", options=options)(**data)).backward()
        compiled_module.CompiledGraph.__call__ = original  # type: ignore[method-assign]
        recording[0] = False
        for graph, graph_inputs in graphs:
            call = graph._calls[device != "cuda"]
            for _ in range(50):
                call(graph_inputs)
            start = time.perf_counter()
            for _ in range(args.calls):
                call(graph_inputs)
            us = (time.perf_counter() - start) / args.calls * 1e6
            src = graph.launcher.source
            print(f"{name} @{graph.launcher.graph_name}: {us:.0f} us a call; {src.count(chr(10))} lines, "
                  f"{src.count('.launch(')} launches, {src.count('_empty(')} allocations, "
                  f"{src.count('_reinterpret(')} views, {src.count('data_ptr() % 16')} alignment checks, "
                  f"{sum(len(key[1]) for key in graph.launcher.launch_keys)} kernel pointers checked", flush=True)
            if args.profile:
                profile(functools.partial(call, graph_inputs), args.profile)


def profile(run, top: int, calls: int = 200) -> None:
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        run()
    profiler.disable()
    rows = sorted(pstats.Stats(profiler).stats.items(), key=lambda kv: -kv[1][2])[:top]  # by own time
    for (file, line, fn), (_cc, count, own, _cum, _callers) in rows:
        print(f"    {own / calls * 1e6:8.1f} us a call  x{count // calls:<4d} {fn}  {file.rsplit('/', 1)[-1]}:{line}")


if __name__ == "__main__":
    main()
