"""Where one model's first call goes, by stage (GPU), bf16, static shapes.

    python bench/first_call.py MODEL infer|train BACKEND [--dynamic]

BACKEND is fusec or one of bench/models.py's fusec variants (``fusec+merge-matmuls{when=never}``: the default
pipeline with a pass's options), inductor, inductor-combo or any Dynamo backend (``aot_eager_decomp_partition``
gives the share of Dynamo and AOTAutograd alone).  For fusec, prints beside the first call's seconds the time in
each stage (import, the pipeline and its slowest passes, lowering, the compile pool's precompile, building
launchers) and the pool's compiles (how many, their summed seconds, the slowest), as one JSON line; ``--profile
FILE`` also writes a cProfile of the first call.  Run each configuration in a fresh process, with fresh caches
(``FUSEC_CACHE_DIR``, ``TORCHINDUCTOR_CACHE_DIR``, ``TRITON_CACHE_DIR``) for a cold start.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import json
import time
from collections.abc import Callable

import torch
from models import SIZES, build, fusec_variant, inputs, loss_of, main_of

spent: collections.Counter[str] = collections.Counter()
calls: collections.Counter[str] = collections.Counter()
passes: collections.Counter[str] = collections.Counter()


def timed(owner, attr: str, key: str) -> None:
    """Replace ``owner.attr`` by a wrapper adding its time to ``spent[key]``."""
    inner: Callable = getattr(owner, attr)

    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[key] += time.perf_counter() - start
            calls[key] += 1

    setattr(owner, attr, wrapper)


def instrument_fusec() -> None:
    import fusec.backend as backend
    import fusec.pipeline as pipeline
    from fusec.runtime import compile_pool, compiled

    timed(backend, "compile_graph", "compile_graph")
    timed(backend, "import_graph", "import")
    timed(pipeline, "run_pipeline", "passes")
    timed(backend, "make_executor", "lowering")
    timed(compiled.CompiledGraph, "compile_ahead", "compile_ahead")
    timed(compiled.CompiledGraph, "compile_known", "compile_known")
    timed(compiled.CompiledGraph, "precompile", "precompile")
    timed(compiled.CompiledGraph, "_build", "launchers")
    timed(compile_pool.CompilePool, "compile", "pool.compile")
    report = pipeline.PassClock.report

    def add_pass_times(clock, out):
        for name, seconds in clock.times:
            passes[name] += seconds
        return report(clock, out)

    pipeline.PassClock.report = add_pass_times  # type: ignore[method-assign]
    try:  # Triton < 3.7 compiles a C launcher per kernel signature in the launching process
        import triton.backends.nvidia.driver as nvidia

        if hasattr(nvidia, "compile_module_from_src"):
            timed(nvidia, "compile_module_from_src", "launchers built or loaded here")
    except ImportError:
        pass


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("model", choices=sorted(SIZES))
    p.add_argument("mode", choices=["infer", "train"])
    p.add_argument("backend")
    p.add_argument("--profile", help="write a cProfile of the first call to this file")
    p.add_argument("--device", default="cuda", help="cuda; cpu checks the script itself (kernels interpreted)")
    p.add_argument("--dynamic", action="store_true", help="torch.compile(dynamic=True)")
    args = p.parse_args()
    fusec = args.backend == "fusec" or args.backend.startswith("fusec+")
    if fusec:
        instrument_fusec()
    torch.manual_seed(0)
    model, kind = build(args.model)
    dtype = torch.bfloat16 if args.device == "cuda" else torch.float32
    model = model.to(args.device, dtype).train(args.mode == "train")
    # On the CPU one short sequence, or one image at the model's size (ViT takes no other)
    batch, size = SIZES[args.model] if args.device == "cuda" else (1, 32 if kind == "tokens" else SIZES[args.model][1])
    data = inputs(kind, batch, size, dtype, torch.Generator().manual_seed(1), args.device)
    if args.mode == "infer":
        data.pop("labels", None)
    if args.backend.startswith("inductor"):
        import torch._inductor.config as inductor_config

        inductor_config.combo_kernels = args.backend == "inductor-combo"
    backend = "inductor" if args.backend.startswith("inductor") else "fusec" if fusec else args.backend
    compiled = torch.compile(model, backend=backend, dynamic=args.dynamic or None,
                             options=fusec_variant(args.backend) if fusec else None)
    profiler = cProfile.Profile() if args.profile else None
    if profiler is not None:
        profiler.enable()
    start = time.perf_counter()
    if args.mode == "train":
        loss_of(compiled(**data)).backward()
    else:
        with torch.no_grad():
            main_of(compiled(**data))
    if args.device == "cuda":
        torch.cuda.synchronize()
    total = time.perf_counter() - start
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(args.profile)
    compiles = {}
    if fusec:
        from fusec.runtime.compile_pool import shared_pool

        pool = shared_pool()
        seconds = sorted(pool.compile_seconds.items(), key=lambda kv: -kv[1])
        compiles = {"workers": pool.workers, "kernels": len(seconds), "sum_s": round(sum(s for _, s in seconds), 2),
                    "slowest_s": {name: round(s, 2) for name, s in seconds[:6]}}
    print(json.dumps({"model": args.model, "mode": args.mode, "backend": args.backend, "dynamic": args.dynamic,
                      "first_call_s": round(total, 2), "compiles": compiles,
                      "stages_s": {k: round(v, 2) for k, v in sorted(spent.items())}, "calls": dict(calls),
                      "slowest_passes_s": {k: round(v, 2) for k, v in passes.most_common(8)}}))


if __name__ == "__main__":
    main()
