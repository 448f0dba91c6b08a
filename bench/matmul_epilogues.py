"""Matmul epilogue fusion (issue 18): a matmul and the ops after it, fusec against cuBLAS alone, eager and Inductor (GPU).

    python bench/matmul_epilogues.py [--patterns linear_gelu,rmsnorm_swiglu,linear_residual_layernorm]
                                     [--backends matmul,eager,inductor,inductor-combo,fusec] [--dtype bf16|fp16|fp32]
                                     [--dynamic] [--scale 1.0] [--calls 20] [--top 4] [--cold] [--device cuda|cpu]

Patterns (M, the token count, times ``--scale``):
``linear_gelu``: gelu(x @ w.t() + b, tanh), x [8192, 1024], w [4096, 1024];
``rmsnorm_swiglu``: h = RMSNorm(x) (x [2048, 2048]), (silu(h @ wg.t()) * (h @ wu.t())) @ wd.t(), wg, wu [5632, 2048],
wd [2048, 5632];
``linear_residual_layernorm``: layer_norm(x @ w.t() + b + residual), x [8192, 1024], w [1024, 1024].
Backends: ``matmul`` (the pattern's matmuls alone, eager: cuBLAS, the yardstick the others are divided by),
``eager``, ``inductor`` (torch.compile), ``inductor-combo`` (combo_kernels; skipped where torch has no such
option), ``fusec``, ``fusec+PASS{OPTIONS}+...`` (the default pipeline with those passes' options, as in
bench/models.py); ``--dynamic`` compiles with dynamic=True.

For each (pattern, backend): the largest relative error (in norm, bench/models.py's ``rel_error``) against the
same function run eagerly on fp32 copies of the inputs (WRONG above 2e-2 in bf16/fp16, 1e-4 in fp32), the
kernels one call launches (matrix-library kernels counted apart) and their device time (CUDA profiler, median of
``--calls`` calls: ``fusec.tools.benchmark.profile_call``), the wall time of a call, the slowest kernels by name,
and for compiled backends the first call's seconds (compile included) and the graphs fusec ran with torch.
``--cold`` gives the process fresh Inductor, Triton and fusec caches (else a warm cache makes a warm start); they
stay shared within it (fusec's compile workers keep the Triton cache they were spawned with): the first compile
pays the process's start-up (imports, compile workers), and a backend can find kernels an earlier row compiled
(inductor-combo after inductor).  For one cold first call, run one pattern and one compiled backend per process.
Random inputs (seed 0), weights scaled by 1/sqrt(K).  ``--device cpu`` checks the script itself on a small
``--scale`` (fusec's kernels interpreted; the profiler sees no kernels there).  Prints a Markdown table last.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import os
import tempfile
import time
import warnings
from collections.abc import Callable
from unittest import mock

import torch
import torch.nn.functional as Fn
from models import fusec_variant, profile_kernels, rel_error

import fusec  # noqa: F401  (registers the "fusec" backend with Dynamo)
from fusec.tools.benchmark import compiled, markdown_table, profile_call

BACKENDS = ("matmul", "eager", "inductor", "inductor-combo", "fusec")
COMPILED = ("inductor", "inductor-combo", "fusec")
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def _linear_gelu(x, w, b):
    return Fn.gelu(x @ w.t() + b, approximate="tanh")


def _rmsnorm_swiglu(x, gamma, wg, wu, wd):
    h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * gamma
    return (Fn.silu(h @ wg.t()) * (h @ wu.t())) @ wd.t()


def _linear_residual_layernorm(x, w, b, residual, gamma, beta):
    return Fn.layer_norm(x @ w.t() + b + residual, (w.shape[0],), gamma, beta)


def _linear_only(x, w, *_):
    """The matmul of linear_gelu and linear_residual_layernorm, bias and epilogue left out."""
    return x @ w.t()


def _swiglu_matmuls(x, gamma, wg, wu, wd):
    """rmsnorm_swiglu's three matmuls, the norm, silu and product left out (the down projection reads the gate)."""
    gate, up = x @ wg.t(), x @ wu.t()
    return gate @ wd.t(), up


@dataclasses.dataclass
class Pattern:
    name: str
    fn: Callable
    matmuls: Callable  # the ``matmul`` backend: the same inputs, only the matmuls
    m: int  # tokens at --scale 1
    inputs: Callable[[int], list[tuple[tuple[int, ...], float, float]]]  # M -> (shape, scale, shift) per input


PATTERNS = [
    Pattern("linear_gelu", _linear_gelu, _linear_only, 8192,
            lambda m: [((m, 1024), 1.0, 0.0), ((4096, 1024), 1024**-0.5, 0.0), ((4096,), 0.1, 0.0)]),
    Pattern("rmsnorm_swiglu", _rmsnorm_swiglu, _swiglu_matmuls, 2048,
            lambda m: [((m, 2048), 1.0, 0.0), ((2048,), 0.1, 1.0), ((5632, 2048), 2048**-0.5, 0.0),
                       ((5632, 2048), 2048**-0.5, 0.0), ((2048, 5632), 5632**-0.5, 0.0)]),
    Pattern("linear_residual_layernorm", _linear_residual_layernorm, _linear_only, 8192,
            lambda m: [((m, 1024), 1.0, 0.0), ((1024, 1024), 1024**-0.5, 0.0), ((1024,), 0.1, 0.0),
                       ((m, 1024), 1.0, 0.0), ((1024,), 0.1, 1.0), ((1024,), 0.1, 0.0)]),
]


def make_inputs(pattern: Pattern, m: int, dtype: torch.dtype, device: str) -> list[torch.Tensor]:
    """Normal random inputs (seed 0, drawn on the CPU: the same values on every device), each ``* scale + shift``."""
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(*shape, generator=g) * scale + shift).to(device, dtype) for shape, scale, shift in pattern.inputs(m)]


def _flatten(out) -> list[torch.Tensor]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _profiling(device: str) -> contextlib.AbstractContextManager:
    """The shared profilers synchronize CUDA and record CUDA activity.  On the CPU (a check of this script) they
    wait for nothing and record host activity: the same code runs, and finds no kernels."""
    stack = contextlib.ExitStack()
    if device != "cuda":
        host_profile = functools.partial(torch.profiler.profile, activities=[torch.profiler.ProfilerActivity.CPU])
        stack.enter_context(mock.patch.object(torch.cuda, "synchronize", lambda *args, **kwargs: None))
        stack.enter_context(mock.patch.object(torch.profiler, "profile", lambda *args, activities=(), **kwargs: host_profile(
            *args, **kwargs)))
    return stack


@dataclasses.dataclass
class Row:
    pattern: str
    backend: str
    kernels: str = "-"
    device_us: float | None = None
    error: float | None = None
    wrong: bool = False
    first_s: float | None = None
    note: str = ""


def combo_missing() -> str:
    """Why inductor-combo cannot run with this torch ('' when it can)."""
    import torch._inductor.config as inductor_config

    if hasattr(inductor_config, "combo_kernels"):
        return ""
    return f"skipped: torch {torch.__version__} has no Inductor option combo_kernels"


def first_call(f: Callable, inputs: list[torch.Tensor], device: str) -> tuple[object, float, list[str]]:
    """The compiled function's first call: its output, its seconds (compile included), and fusec's fallbacks
    (graphs that run with torch: the warnings it gives)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _sync(device)
        start = time.perf_counter()
        out = f(*inputs)
        _sync(device)
        seconds = time.perf_counter() - start
    fallbacks = [str(w.message) for w in caught if "runs with torch" in str(w.message)]
    return out, seconds, fallbacks


def wall_us(call: Callable[[], object], calls: int, device: str) -> float:
    for _ in range(3):
        call()
    _sync(device)
    start = time.perf_counter()
    for _ in range(calls):
        call()
    _sync(device)
    return (time.perf_counter() - start) / calls * 1e6


def measure(pattern: Pattern, backend: str, inputs: list[torch.Tensor], want: list[torch.Tensor], args) -> Row:
    """One (pattern, backend): correctness, kernels, device time, first call; prints its details."""
    row = Row(pattern.name, backend)
    fn = pattern.matmuls if backend == "matmul" else pattern.fn
    fallbacks: list[str] = []
    if backend.startswith("fusec+"):  # the default pipeline with some passes' options (bench/models.py's variants)
        torch._dynamo.reset()
        f = torch.compile(fn, backend="fusec", dynamic=args.dynamic, options=fusec_variant(backend))
        got, row.first_s, fallbacks = first_call(f, inputs, args.device)
    elif backend in COMPILED:
        f = compiled(fn, backend, args.dynamic)
        got, row.first_s, fallbacks = first_call(f, inputs, args.device)
    else:
        f = fn
        got = f(*inputs)
    row.error = max(rel_error(a, b) for a, b in zip(_flatten(got), want, strict=True))
    row.wrong = row.error > (1e-4 if args.dtype == "fp32" else 2e-2)
    call = functools.partial(f, *inputs)
    wall = wall_us(call, args.calls, args.device)
    with _profiling(args.device):
        kernels, gemms, device_us = profile_call(call, repeats=args.calls)
        row.device_us = float(device_us)
        slowest = profile_kernels(call, args.top)[2] if args.top and args.device == "cuda" else []
    row.kernels = f"{kernels + gemms} ({gemms} mm)"
    first = f", first call {row.first_s:.2f} s" if row.first_s is not None else ""
    print(f"{pattern.name} {backend}: {row.kernels} kernels, {row.device_us:.1f} µs device, {wall:.1f} µs wall per call, "
          f"rel. error {row.error:.1e}{' WRONG' if row.wrong else ''}{first}", flush=True)
    for name, count, us in slowest:
        print(f"    {us:9.1f} µs  x{count}  {name}")
    for message in fallbacks:
        print(f"    fallback: {message[:160]}")
    if fallbacks:
        row.note = f"{len(fallbacks)} graph(s) ran with torch"
    return row


def run_pattern(pattern: Pattern, args) -> list[Row]:
    m = max(1, round(pattern.m * args.scale))
    inputs = make_inputs(pattern, m, DTYPES[args.dtype], args.device)
    print(f"\n{pattern.name}: M={m}, inputs {', '.join(str(list(t.shape)) for t in inputs)}", flush=True)
    references: dict[str, list[torch.Tensor]] = {}  # "pattern" / "matmuls" -> eager in fp32
    rows = []
    for backend in args.backends:
        kind = "matmuls" if backend == "matmul" else "pattern"
        if kind not in references:
            fn = pattern.matmuls if backend == "matmul" else pattern.fn
            references[kind] = [t.float() for t in _flatten(fn(*[t.float() for t in inputs]))]
        skip = combo_missing() if backend == "inductor-combo" else ""
        if skip:
            print(f"{pattern.name} {backend}: {skip}", flush=True)
            rows.append(Row(pattern.name, backend, note=skip))
            continue
        try:
            rows.append(measure(pattern, backend, inputs, references[kind], args))
        except Exception as e:  # a failing backend is a row, not the end of the table
            note = f"error: {type(e).__name__}: {str(e).strip().splitlines()[0][:100] if str(e).strip() else ''}"
            print(f"{pattern.name} {backend}: {note}", flush=True)
            rows.append(Row(pattern.name, backend, note=note))
    return rows


def table(rows: list[Row]) -> str:
    base = {r.pattern: r.device_us for r in rows if r.backend == "matmul" and r.device_us}
    cells = []
    for r in rows:
        ratio = f"{r.device_us / base[r.pattern]:.2f}" if r.device_us is not None and base.get(r.pattern) else "-"
        error = "-" if r.error is None else f"{r.error:.1e}{' WRONG' if r.wrong else ''}"
        error += f" ({r.note})" if r.note else ""
        cells.append((r.pattern, r.backend, r.kernels, "-" if r.device_us is None else r.device_us, ratio, error,
                      "-" if r.first_s is None else f"{r.first_s:.2f}"))
    return markdown_table(["pattern", "backend", "kernels", "device µs/call", "ratio to matmul", "max rel err", "first-call s"],
                          cells)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="matmul epilogue fusion (issue 18): fusec, Inductor, eager, cuBLAS alone")
    p.add_argument("--patterns", default=",".join(p.name for p in PATTERNS), help="comma-separated pattern names")
    p.add_argument("--backends", default=None, help=f"comma-separated, of {','.join(BACKENDS)} (default: all; on the CPU "
                   "matmul,eager,fusec)")
    p.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    p.add_argument("--dynamic", action="store_true", help="torch.compile(dynamic=True) for the compiled backends")
    p.add_argument("--scale", type=float, default=1.0, help="multiplies the token count M")
    p.add_argument("--calls", type=int, default=None, help="calls timed (profiler median, wall mean); default 20, CPU 3")
    p.add_argument("--top", type=int, default=4, help="list the N kernels with the most device time per run (GPU)")
    p.add_argument("--cold", action="store_true", help="fresh Inductor, Triton and fusec caches for this process")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                   help="cuda; cpu checks the script itself (fusec's kernels interpreted, no kernels counted)")
    args = p.parse_args(argv)
    names = {q.name for q in PATTERNS}
    args.patterns = args.patterns.split(",")
    args.backends = (args.backends or ",".join(BACKENDS if args.device == "cuda" else ("matmul", "eager", "fusec"))).split(",")
    for kind, wanted, known in (("pattern", args.patterns, names), ("backend", args.backends, set(BACKENDS))):
        unknown = [w for w in wanted if w not in known and not (kind == "backend" and w.startswith("fusec+"))]
        if unknown:
            p.error(f"unknown {kind} {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    if args.calls is None:
        args.calls = 20 if args.device == "cuda" else 3
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("matmul_epilogues: needs a CUDA GPU (--device cpu checks the script on the CPU)")
    cold = tempfile.TemporaryDirectory(prefix="fusec-epilogues-", ignore_cleanup_errors=True) if args.cold else None
    if cold is not None:  # read when a compile needs them, so set before the first one
        for var in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "FUSEC_CACHE_DIR"):
            os.environ[var] = os.path.join(cold.name, var.lower())
    device = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    print(f"device: {device}  torch {torch.__version__}  dtype {args.dtype}  dynamic={args.dynamic}  scale {args.scale}  "
          f"calls {args.calls}  caches {'fresh' if args.cold else 'as found'}")
    rows: list[Row] = []
    with contextlib.ExitStack() as stack:
        if cold is not None:
            stack.enter_context(cold)
        for pattern in [q for q in PATTERNS if q.name in args.patterns]:
            rows += run_pattern(pattern, args)
    print()
    print(table(rows))


if __name__ == "__main__":
    main()
