"""Benchmark fusec against Inductor (with and without combo kernels) on the GPU.

    python -m fusec.tools.benchmark [--programs seed,softmax,...] [--dtype float32] [--dynamic]

For each program: the result checked against eager (16-bit dtypes: or no further than eager from the
program run in float64, ``matches``), the number of GPU kernels one
call launches (counted with torch.profiler, the same way for every backend;
matrix-multiply library kernels counted apart), the GPU time of those kernels
(profiler, median of 10 calls after 5 warm-up calls, cycling through copies of the inputs, L2 flushed before
each), and the median time of a call
(triton.testing.do_bench, host overhead included).  Prints a Markdown table for
BENCHMARKS.md.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path

import click
import torch
import torch.nn.functional as Fn


@dataclasses.dataclass
class Program:
    name: str
    fn: Callable
    make_inputs: Callable[[torch.dtype, str], list[torch.Tensor]]


def _seed(t1, t2, t3, t4):
    return t1.sum(1), t2.max(1).values, t3.min(1).values, t4.sum(1)


def _rmsnorm(x, w):
    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(x.dtype) * w


def _layer_norm_gelu(x, w, b):
    return Fn.gelu(Fn.layer_norm(x, x.shape[-1:], w, b))


def _transformer_mix(x, w1, b1, w2, b2, bias):
    h = Fn.layer_norm(x, x.shape[-1:], w1, b1)
    h = Fn.gelu(h + bias)
    y = Fn.layer_norm(h + x, x.shape[-1:], w2, b2)
    return y, h.mean(-1), y.amax(-1)


def _swiglu(x, wg, wu, wd):
    return (Fn.silu(x @ wg) * (x @ wu)) @ wd


def _optimizer_step(*tensors):
    n = len(tensors) // 2
    params, grads = tensors[:n], tensors[n:]
    return tuple(p - 0.01 * (g + 0.1 * p) for p, g in zip(params, grads, strict=True))


def _cross_entropy(logits, targets):
    return Fn.cross_entropy(logits.float(), targets)


def _attention_scores(q, k, mask):
    return torch.softmax((q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5 + mask, -1)


def _randn(*shape):
    return lambda dtype, dev: torch.randn(*shape, device=dev, dtype=dtype)


PROGRAMS = [
    Program("seed", _seed, lambda dt, dev: [torch.randn(1024, 512, device=dev, dtype=dt) for _ in range(4)]),
    Program("pointwise", lambda x, w, b: torch.sigmoid(x * w + b),
            lambda dt, dev: [_randn(4096, 1024)(dt, dev), _randn(1024)(dt, dev), _randn(1024)(dt, dev)]),
    Program("rmsnorm", _rmsnorm, lambda dt, dev: [_randn(4096, 2048)(dt, dev), _randn(2048)(dt, dev)]),
    Program("softmax", lambda x: torch.softmax(x, -1), lambda dt, dev: [_randn(4096, 2048)(dt, dev)]),
    Program("layernorm_gelu", _layer_norm_gelu,
            lambda dt, dev: [_randn(4096, 1024)(dt, dev), _randn(1024)(dt, dev), _randn(1024)(dt, dev)]),
    Program("transformer_mix", _transformer_mix,
            lambda dt, dev: [_randn(4096, 1024)(dt, dev)] + [_randn(1024)(dt, dev) for _ in range(5)]),
    Program("swiglu", _swiglu, lambda dt, dev: [_randn(2048, 1024)(dt, dev), _randn(1024, 2816)(dt, dev) * 0.03,
                                                _randn(1024, 2816)(dt, dev) * 0.03, _randn(2816, 1024)(dt, dev) * 0.03]),
    Program("transpose_add", lambda x, y: x.t() + y, lambda dt, dev: [_randn(4096, 4096)(dt, dev), _randn(4096, 4096)(dt, dev)]),
    Program("bias_rows_cols", lambda x, a, b: x * a[:, None] + b[None, :],
            lambda dt, dev: [_randn(4096, 4096)(dt, dev), _randn(4096)(dt, dev), _randn(4096)(dt, dev)]),
    Program("full_sum", lambda x: x.sum(), lambda dt, dev: [_randn(16 * 1024 * 1024)(dt, dev)]),
    Program("mean_of_rows", lambda x: x.mean(0), lambda dt, dev: [_randn(8192, 2048)(dt, dev)]),
    # The issue-12 cases: a loss over a vocabulary, attention's scores, a pointwise kernel on a small domain.
    Program("cross_entropy", _cross_entropy,
            lambda dt, dev: [_randn(512, 32000)(dt, dev), torch.randint(0, 32000, (512,), device=dev)]),
    Program("attention_scores", _attention_scores,
            lambda dt, dev: [_randn(8, 12, 128, 64)(dt, dev), _randn(8, 12, 128, 64)(dt, dev),
                             torch.zeros(8, 1, 1, 128, device=dev, dtype=dt).masked_fill(
                                 torch.rand(8, 1, 1, 128, device=dev) < 0.1, float("-inf"))]),
    Program("pointwise_small", lambda x, w, b: torch.sigmoid(x * w + b),
            lambda dt, dev: [_randn(256, 256)(dt, dev), _randn(256)(dt, dev), _randn(256)(dt, dev)]),
    Program("optimizer16", _optimizer_step,
            lambda dt, dev: [torch.randn(s, device=dev, dtype=dt) for s in SIZES16 + SIZES16]),
]
SIZES16: list[tuple[int, ...]] = [(256, 256), (256,), (1024, 256), (1024,), (256, 1024), (256,), (4096,), (512, 512),
           (512,), (2048, 128), (128,), (64, 64), (64,), (1000,), (333, 77), (77,)]


def profile_call(call: Callable[[], object], repeats: int = 10, warmup: int = 5) -> tuple[int, int, float]:
    """(Triton/other kernels, matrix-library kernels) launched by one call, and the GPU time of one call's
    kernels in microseconds (the median over ``repeats`` calls), from the CUDA profiler.

    ``warmup`` calls come first (right after a compile the GPU has idled for seconds); before each profiled call a
    256 MiB buffer is zeroed outside the profiled window, so no call reads what the previous one left in L2 (a
    program whose inputs fit in the 50 MiB of an H100's L2 would otherwise be timed partly from the cache, by an
    amount that depends on what ran before it)."""
    import statistics

    from torch.profiler import ProfilerActivity, profile

    for _ in range(warmup):
        call()
    # No GPU: a bench script checking itself on the CPU (its profiler then records no kernels).
    flush = torch.empty(64 * 2**20, dtype=torch.int32, device="cuda") if torch.cuda.is_available() else None
    counts, times = [], []
    for _ in range(repeats):
        if flush is not None:
            flush.zero_()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA], acc_events=True) as prof:
            call()
            torch.cuda.synchronize()
        events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        kernels = [e for e in events if "memcpy" not in e.name.lower() and "memset" not in e.name.lower()]
        gemm = [e for e in kernels if any(k in e.name.lower() for k in ("gemm", "sm90", "cutlass", "cublas", "xmma", "nvjet"))]
        counts.append((len(kernels) - len(gemm), len(gemm)))
        times.append(sum(e.device_time for e in events))
    return *counts[-1], statistics.median(times)


def kernel_profile(events, program: str = "") -> list[dict]:
    """Device time per kernel in one call's profiler events, as ``fusec-report --profile`` reads it:
    ``{"name", "device_time_us", "graph", "program"}`` entries, slowest first (memcpy and memset left out).  A kernel
    launched inside a fusec graph's range (``fusec:<graph>``, ``fusec.runtime.compiled.PROFILE_RANGE``) names that
    graph: kernel names are unique within a graph only.  The profiler links a kernel to the runtime call that
    launched it (a ``cuLaunchKernel`` event: the same correlation id), and that call is nested in the range."""
    from fusec.runtime.compiled import PROFILE_RANGE

    launched_in: dict[int, str] = {}  # correlation id of a launch -> the graph whose range holds it
    for e in events:
        if e.device_type == torch.autograd.DeviceType.CPU and e.name.startswith(PROFILE_RANGE):
            launched_in.update((i, e.name[len(PROFILE_RANGE):]) for i in _launches_under(e))
    totals: dict[tuple[str, str], float] = {}
    for e in events:
        name = e.name
        if e.device_type != torch.autograd.DeviceType.CUDA or name.startswith(PROFILE_RANGE) \
                or any(k in name.lower() for k in ("memcpy", "memset")):
            continue  # host events, the ranges' own device-side annotations, copies
        graph = launched_in.get(e.id, "")
        totals[graph, name] = totals.get((graph, name), 0.0) + e.device_time
    return [{"name": name, "device_time_us": round(us, 3), **({"graph": graph} if graph else {}),
             **({"program": program} if program else {})}
            for (graph, name), us in sorted(totals.items(), key=lambda kv: -kv[1])]


def _launches_under(event) -> list[int]:
    """Correlation ids of the CUDA runtime and driver calls (``cuLaunchKernelEx``, ``cudaLaunchKernel``: a kernel
    has its launch's id) nested in the CPU ``event``; ops' ids (``aten::mm``) are another numbering, left out."""
    found, stack = [], list(event.cpu_children)
    while stack:
        e = stack.pop()
        if e.name.startswith("cu"):
            found.append(e.id)
        stack += e.cpu_children
    return found


L2_ROTATION_BYTES = 256 * 2**20  # input sets a timing cycles through, together: five times an H100's L2


def copies_for(nbytes: int, most: int = 32) -> int:
    """How many input sets of ``nbytes`` a timing cycles through so that no call finds its inputs in L2 (METHOD.md:
    the flush before each call should already see to that; Inductor's transformer_mix read 17.6 us on one flushed
    set and 20.4 rotated, H100 2026-11-28, cause not settled); at least 2, at most ``most``."""
    return max(2, min(most, -(-L2_ROTATION_BYTES // max(nbytes, 1))))


def rotation_sets(first: list[torch.Tensor], make: Callable[[], list[torch.Tensor]]) -> list[list[torch.Tensor]]:
    """``first`` and as many more input sets from ``make`` as ``copies_for`` their bytes asks."""
    return [first] + [make() for _ in range(copies_for(sum(t.nbytes for t in first)) - 1)]


def rotating(f: Callable, sets: list[list[torch.Tensor]]) -> Callable[[], object]:
    """A call of ``f`` on the next of ``sets`` each time (same shapes and dtypes: one compiled graph)."""
    turn = itertools.cycle(sets)
    return lambda: f(*next(turn))


def profile_kernels(call: Callable[[], object], program: str = "") -> list[dict]:
    """``kernel_profile`` of one call (after a warm-up call)."""
    from torch.profiler import ProfilerActivity, profile

    call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], acc_events=True) as prof:
        call()
        torch.cuda.synchronize()
    return kernel_profile(prof.events(), program)


def _default_pipeline_without(*names: str) -> str:
    from fusec.pipeline import default_pipeline_spec, parse_pipeline_spec

    return ",".join(str(p.pipeline_pass_spec()) for p in parse_pipeline_spec(default_pipeline_spec()) if p.name not in names)


def compiled(fn, backend: str, dynamic: bool):
    torch._dynamo.reset()
    if backend == "fusec":
        return torch.compile(fn, backend="fusec", dynamic=dynamic)
    if backend == "fusec-flat":  # without tile-pointwise: what 2-D tiles buy
        return torch.compile(fn, backend="fusec", dynamic=dynamic,
                             options={"pipeline": _default_pipeline_without("tile-pointwise")})
    if backend == "inductor":
        return torch.compile(fn, dynamic=dynamic)
    if backend == "inductor-combo":
        return torch.compile(fn, dynamic=dynamic, options={"combo_kernels": True})
    raise click.BadParameter(f"unknown backend {backend}")


def markdown_table(header: list[str], rows) -> str:
    """A Markdown table for BENCHMARKS.md (floats with one decimal)."""
    cell = lambda c: f"{c:.1f}" if isinstance(c, float) else str(c)  # noqa: E731
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows])


def _flatten(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


@click.command()
@click.option("--programs", default=",".join(p.name for p in PROGRAMS), help="comma-separated program names")
@click.option("--backends", default="fusec,inductor,inductor-combo",
              help="comma-separated: fusec, fusec-flat (no tile-pointwise), inductor, inductor-combo")
@click.option("--dtype", default="float32", type=click.Choice(["float32", "float16", "bfloat16"]))
@click.option("--dynamic", is_flag=True, help="compile with dynamic=True")
@click.option("--profile", "profile_path", type=click.Path(dir_okay=False, writable=True), default=None,
              help="write each fusec kernel's device time to this JSON file (for fusec-report --profile)")
def main(programs: str, backends: str, dtype: str, dynamic: bool, profile_path: str | None) -> None:
    import triton.testing

    if not torch.cuda.is_available():
        click.echo("fusec benchmark: error: needs a CUDA GPU", err=True)
        sys.exit(1)
    dt = getattr(torch, dtype)
    wanted = programs.split(",")
    rows: list[tuple[object, ...]] = []
    profiled: list[dict] = []
    for prog in [p for p in PROGRAMS if p.name in wanted]:
        torch.manual_seed(0)
        inputs = prog.make_inputs(dt, "cuda")
        expected = _flatten(prog.fn(*inputs))
        # 16-bit eager rounds after every op where a compiler keeps fp32: both are judged against float64
        exact = _flatten(prog.fn(*[t.double() if t.is_floating_point() else t for t in inputs])) if dt != torch.float32 else None
        sets = rotation_sets(inputs, functools.partial(prog.make_inputs, dt, "cuda"))
        for backend in backends.split(","):
            try:
                f = compiled(prog.fn, backend, dynamic)
                got = _flatten(f(*inputs))
                ok = matches(expected, got, exact)
                kernels, gemms, gpu_us = profile_call(rotating(f, sets))
                ms = triton.testing.do_bench(lambda f=f, inputs=inputs: f(*inputs), warmup=50, rep=300, return_mode="median")
                rows.append((prog.name, backend, "yes" if ok else "NO", kernels, gemms, f"{gpu_us:.1f}", f"{ms * 1000:.1f}"))
                if profile_path and backend.startswith("fusec"):
                    profiled += profile_kernels(functools.partial(f, *inputs), prog.name)
            except Exception as e:  # a failing backend is a row, not the end of the table
                rows.append((prog.name, backend, f"error: {type(e).__name__}: {str(e)[:80]}", "-", "-", "-", "-"))
    click.echo(f"\ndevice: {torch.cuda.get_device_name()}  torch {torch.__version__}  dtype {dtype}  dynamic={dynamic}\n")
    click.echo(markdown_table(["program", "backend", "matches eager", "kernels", "matmul kernels", "kernel us", "median us"], rows))
    for line in ratio_summary(rows):
        click.echo(line)
    if profile_path:
        write_profile(Path(profile_path), profiled)
        click.echo(f"\nkernel profile: {profile_path} (fusec-report DUMP_DIR --profile {profile_path})")


def matches(expected: list[torch.Tensor], got: list[torch.Tensor], exact: list[torch.Tensor] | None) -> bool:
    """Whether a backend's outputs ``got`` agree with eager's ``expected``.  fp32: elementwise within 1e-4.  16-bit
    (``exact``: the program in float64): within 2e-2 of eager, or no further from float64 than eager is, by
    root-mean-square error (x1.5 and a 16-bit ulp of slack): eager bf16 rounds every intermediate, so a compiler
    that keeps fp32 between ops can differ from it by more than 2e-2 while being the more accurate of the two."""
    tol = 1e-4 if exact is None else 2e-2
    for i, (e, g) in enumerate(zip(expected, got, strict=True)):
        if torch.allclose(e.float(), g.float(), rtol=tol, atol=tol):
            continue
        if exact is None:
            return False
        if not no_further_from_exact(g, e, exact[i], factor=1.5, slack=1e-3):
            return False
    return True


def no_further_from_exact(got: torch.Tensor, eager: torch.Tensor, exact: torch.Tensor, factor: float,
                          slack: float) -> bool:
    """``got``'s root-mean-square error against ``exact`` (the program in float64), over its finite elements, at
    most ``factor`` times eager's plus ``slack`` (as Inductor's accuracy check judges against fp64).  A NaN where
    ``exact`` is finite refuses."""
    if got.numel() == 0:
        return True
    x = exact.double()
    finite = x.isfinite()
    if not finite.any():
        return True
    mine = (got.double() - x)[finite].pow(2).mean().sqrt()
    theirs = (eager.double() - x)[finite].pow(2).mean().sqrt()
    return bool(mine <= factor * theirs + slack)  # written so that a NaN error refuses


def ratio_summary(rows: list[tuple[object, ...]], base: str = "inductor-combo") -> list[str]:
    """Each other backend's kernel time against ``base``'s: the geometric mean of the per-program ratios, the
    worst ratio, and the programs where it launches more kernels (rows as ``main`` makes them)."""
    by_program: dict[str, dict[str, tuple[int, float]]] = {}
    for program, backend, ok, kernels, _gemms, kernel_us, _median in rows:
        if ok == "yes":
            by_program.setdefault(str(program), {})[str(backend)] = (int(str(kernels)), float(str(kernel_us)))
    lines = []
    for backend in dict.fromkeys(b for runs in by_program.values() for b in runs if b != base):
        pairs = {p: (runs[backend], runs[base]) for p, runs in by_program.items() if backend in runs and base in runs}
        if not pairs:
            continue
        ratios = {p: mine[1] / theirs[1] for p, (mine, theirs) in pairs.items()}
        geomean = math.exp(sum(math.log(r) for r in ratios.values()) / len(ratios))
        worst = max(ratios, key=ratios.__getitem__)
        more = [f"{p} ({mine[0]} vs {theirs[0]})" for p, (mine, theirs) in pairs.items() if mine[0] > theirs[0]]
        lines.append(f"{backend} / {base} kernel time over {len(ratios)} programs: geometric mean {geomean:.3f}, "
                     f"worst {ratios[worst]:.2f} ({worst}); more kernels: {', '.join(more) or 'none'}")
    return lines


def write_profile(path: Path, kernels: list[dict]) -> None:
    """The JSON ``fusec-report --profile`` reads: ``{"kernels": [{"name", "device_time_us", ...}]}``."""
    path.write_text(json.dumps({"kernels": kernels}, indent=1) + "\n")


if __name__ == "__main__":
    main()
