"""Differential fuzzer: random programs (``fusec.tools.fuzz_programs``) through fusec, against eager and the interpreter.

Checks of one program (each raises ``Mismatch`` saying what differs):

``backend``          ``torch.compile(backend="fusec")`` against eager: dtype, shape, device, strides, values.
``backend-dynamic``  the same with ``dynamic=True``, then a second size through the same compiled function.
``ir``               the aten graph imported to IR and interpreted, against eager; then every registered pass
                     alone (after form-kernels where it needs kernels) and the default pipeline, pass by pass,
                     against the interpreter before the pass, at both sizes, the IR verified and printed,
                     parsed and printed again (equal) after every pass.
``grad``             float programs with ``requires_grad`` inputs: the gradients of a random-weighted sum
                     of the outputs, compiled (static and ``dynamic=True``) against eager.

Long run: ``python -m fusec.tools.fuzz --minutes 30 --out fuzz-out``.  For each mismatch, hypothesis shrinks
the program and the minimal one is written to ``<out>/<id>/``: ``program.py`` (run it: it prints the
mismatch), ``graph.mlir`` (the imported IR) and ``seed.txt``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import click
import torch
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from fusec.tools.benchmark import matches, no_further_from_exact
from fusec.tools.fuzz_programs import Input, Op, Program, make_inputs, programs, view_as_layout

CHECKS = ("backend", "backend-dynamic", "ir", "grad")
SKIPPED_PASSES = {"expect-fused": "an assertion about kernel counts, not a transformation"}
GRAPH_LEVEL_PASSES = ("form-kernels", "canonicalize", "dce")  # the others work on kernels: form-kernels first


class Mismatch(AssertionError):
    """fusec differs from its reference (eager or the interpreter); the message says where and how."""


class InvalidProgram(Exception):
    """Eager itself refuses the program (e.g. an integer division by zero on these inputs): not a finding."""


# ---------------------------------------------------------------- comparing


def tolerance(dtype: torch.dtype, computed_in: torch.dtype = torch.float32) -> dict:
    """Kernels keep low-precision intermediates in fp32 where eager rounds each op: tolerances follow the
    result's dtype, or the least precise one it was ``computed_in`` (``Program.lowest_precision``)."""
    if dtype.is_floating_point and computed_in.itemsize < dtype.itemsize:
        dtype = computed_in
    if dtype in (torch.float16,):
        return {"rtol": 1e-2, "atol": 1e-2}
    if dtype == torch.bfloat16:
        return {"rtol": 4e-2, "atol": 4e-2}
    if dtype.is_floating_point:
        return {"rtol": 1e-4, "atol": 1e-5}
    return {"rtol": 0, "atol": 0}


def compare(got, want, what: str, strides: bool = True, computed_in: torch.dtype = torch.float32,
            traced: tuple[int, ...] | None = None, values: bool = True) -> None:
    """``got`` equals ``want``: type, dtype, shape, device, strides (dims of size > 1), values (NaNs where eager's).
    ``traced``: the strides torch.compile's trace promised (its fake tensor); accepted too where torch's meta
    function disagrees with its eager kernel (``logical_and(0-d, transposed)``: row-major, as Inductor's too)."""
    if not isinstance(got, torch.Tensor) or not isinstance(want, torch.Tensor):
        if got != want:
            raise Mismatch(f"{what}: {got!r}, expected {want!r}")
        return
    for name, g, w in (("dtype", got.dtype, want.dtype), ("shape", tuple(got.shape), tuple(want.shape)),
                       ("device", got.device, want.device)):
        if g != w:
            raise Mismatch(f"{what}: {name} {g}, expected {w}")
    if strides and want.numel() > 1:
        got_strides = [s for s, d in zip(got.stride(), got.shape, strict=True) if d > 1]
        want_strides = [s for s, d in zip(want.stride(), want.shape, strict=True) if d > 1]
        traced_strides = [s for s, d in zip(traced or (), got.shape, strict=False) if d > 1]
        if got_strides != want_strides and (traced is None or got_strides != traced_strides):
            raise Mismatch(f"{what}: strides {got.stride()}, expected {want.stride()} (shape {tuple(want.shape)})")
    if not values:
        return
    try:
        torch.testing.assert_close(got, want, equal_nan=True, check_stride=False, **tolerance(want.dtype, computed_in))
    except AssertionError as e:
        raise Mismatch(f"{what}: {e}") from None


def compare_all(got: Sequence, want: Sequence, what: str, strides: bool = True,
                computed_in: torch.dtype = torch.float32, traced: Sequence | None = None,
                exact: Callable[[], Sequence] | None = None) -> None:
    """``compare`` for each output.  ``exact``: the outputs computed in float64, asked for only when values differ
    beyond the tolerance.  Eager rounds every 16-bit intermediate, a compiler keeps fp32 between ops, and an
    ill-conditioned program (the cosine of a sum of hundreds of terms) turns that rounding into large differences:
    values no further from float64 than eager's are accepted (``fusec.tools.benchmark.matches``).  In fp32 the same
    holds where eager's own result is off by more than the tolerance: a gradient that is zero in exact arithmetic
    (``sum(x) / x`` of an expanded ``x``: its terms cancel) is rounding noise in both, and fusec's is accepted when
    it is at most twice eager's distance from float64 (``as_accurate_as_eager``).  A wrong dtype, shape or stride
    never is."""
    if len(got) != len(want):
        raise Mismatch(f"{what}: {len(got)} outputs, expected {len(want)}")
    try:
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            compare(g, w, f"{what}, output {i}", strides, computed_in, traced[i] if traced else None)
    except Mismatch:
        if exact is None:
            raise
        for i, (g, w) in enumerate(zip(got, want, strict=True)):  # what a float64 run cannot excuse
            compare(g, w, f"{what}, output {i}", strides, computed_in, traced[i] if traced else None, values=False)
        tensors = [(g, w, x) for g, w, x in zip(got, want, exact(), strict=True) if isinstance(g, torch.Tensor)]
        if not all(g.is_floating_point() and torch.equal(g.isfinite(), w.isfinite()) for g, w, _ in tensors):
            raise
        if computed_in == torch.float32:
            if not all(as_accurate_as_eager(g, w, x) for g, w, x in tensors):
                raise
        elif not matches([w for _, w, _ in tensors], [g for g, _, _ in tensors], [x for _, _, x in tensors]):
            raise


def as_accurate_as_eager(got: torch.Tensor, eager: torch.Tensor, exact: torch.Tensor) -> bool:
    """An fp32 result no further from float64 than twice eager's error, by root-mean-square over the tensor, with
    fp32's absolute tolerance (Inductor's accuracy check judges against an fp64 reference the same way; by element,
    a cancelled sum that eager happens to round to exactly 0 would leave no room for another summation order's
    1.5e-5: seed 9125, ``x.expand(...) / x``).  NaNs refuse."""
    return no_further_from_exact(got, eager, exact, factor=2.0, slack=tolerance(torch.float32)["atol"])


def traced_strides(fn: Callable, inputs: Sequence[torch.Tensor]) -> list | None:
    """Each output's strides as torch's meta functions (what Dynamo traces with) give them; None if they refuse."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    try:
        with warnings.catch_warnings(), FakeTensorMode() as mode:
            warnings.simplefilter("ignore")
            outputs = fn(*[mode.from_tensor(t) for t in inputs])
    except Exception:
        return None
    return [tuple(o.stride()) if isinstance(o, torch.Tensor) else None for o in outputs]


def eager(fn: Callable, inputs: Sequence[torch.Tensor]) -> list:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return list(fn(*inputs))
    except Exception as e:
        raise InvalidProgram(f"eager refuses the program: {e}") from e


@contextlib.contextmanager
def _no_eager_fallback():
    """A graph fusec handed back to torch would match eager trivially: count it as a mismatch."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    fallbacks = [str(w.message) for w in caught if "runs with torch" in str(w.message)]
    if fallbacks:
        raise Mismatch(f"not compiled: {fallbacks[0]}")


def _compile(fn: Callable, dynamic: bool) -> Callable:
    torch._dynamo.reset()
    return torch.compile(fn, backend="fusec", dynamic=dynamic, fullgraph=True)


# ---------------------------------------------------------------- checks


def check_backend(program: Program, seed: int, fn: Callable | None = None, device: str = "cpu",
                  dynamic: bool = False) -> None:
    fn = fn or program.function()
    compiled = _compile(fn, dynamic)
    for n in (program.n1, program.n2) if dynamic else (program.n1,):
        values = [v for _, v in make_inputs(program, n, seed, device)]
        want = eager(fn, values)
        try:
            with _no_eager_fallback():
                got = compiled(*values)
        except Mismatch:
            raise
        except Exception as e:
            raise Mismatch(f"backend{' dynamic' if dynamic else ''} at n={n} raised {type(e).__name__}: {e}") from e
        exact = functools.partial(_exact_outputs, program, values)
        compare_all(got, want, f"backend{' dynamic' if dynamic else ''} at n={n}", computed_in=program.lowest_precision(),
                    traced=traced_strides(fn, values), exact=exact)


def _exact_outputs(program: Program, values: Sequence) -> list:
    """The program's outputs computed in float64 from ``values`` (what a result is judged against where it differs
    from eager's beyond the tolerance: a 16-bit ``remainder(x - 2, 2)`` at a multiple of 2 is 0 where eager rounds
    ``x - 2`` first and 1.99 where a kernel keeps it in fp32, as float64 does)."""
    return eager(program.function_in_float64(), [v.double() if v.is_floating_point() else v for v in values])


def check_grad(program: Program, seed: int, fn: Callable | None = None, device: str = "cpu",
               dynamic: bool = False) -> None:
    """Gradients of every float input of a random-weighted sum of the float outputs, compiled against eager."""
    fn = fn or program.function()
    compiled = _compile(fn, dynamic)
    for n in (program.n1, program.n2) if dynamic else (program.n1,):
        want_out, want_grads = _grads(program, fn, n, seed, device)
        try:
            with _no_eager_fallback():
                got_out, got_grads = _grads(program, compiled, n, seed, device, compiled=True)
        except Mismatch:
            raise
        except Exception as e:
            raise Mismatch(f"grad at n={n} raised {type(e).__name__}: {e}") from e
        low = program.lowest_precision()
        traced = traced_strides(fn, [v for _, v in make_inputs(program, n, seed, device)])
        exact = functools.cache(functools.partial(_exact_grads, program, n, seed, device))
        compare_all(got_out, want_out, f"grad{' dynamic' if dynamic else ''} at n={n}, forward", computed_in=low,
                    traced=traced, exact=functools.partial(_nth, exact, 0))
        compare_all(got_grads, want_grads, f"grad{' dynamic' if dynamic else ''} at n={n}, gradient", computed_in=low,
                    exact=functools.partial(_nth, exact, 1))


def _exact_grads(program: Program, n: int, seed: int, device: str) -> tuple[list, list]:
    """``_grads`` of the program run in float64 (what a 16-bit result is judged against where it is not eager's)."""
    return _grads(program, program.function_in_float64(), n, seed, device, float64=True)


def _nth(thunk: Callable[[], Sequence], i: int):
    return thunk()[i]


def _grads(program: Program, fn: Callable, n: int, seed: int, device: str, compiled: bool = False,
           float64: bool = False):
    """(outputs, gradients of the float inputs) of ``fn`` on the program's inputs; ``float64``: the inputs made
    float64 first (for ``Program.function_in_float64``), the same random weights."""
    pairs = make_inputs(program, n, seed, device)
    if float64:
        pairs = [(b.double() if b.dtype.is_floating_point else b, v) for b, v in pairs]
    bases = [b.requires_grad_() if b.dtype.is_floating_point else b for b, _ in pairs]
    values = [view_as_layout(b, v.shape, spec.layout) for b, (_, v), spec in zip(bases, pairs, program.inputs, strict=True)]
    outputs = list(fn(*values)) if compiled else eager(fn, values)
    gen = torch.Generator().manual_seed(seed + 1)
    weight = torch.double if float64 else torch.float
    terms = [(o.to(weight) * torch.randn(o.shape, generator=gen).to(device, weight)).sum() for o in outputs if o.requires_grad]
    if not terms or not any(b.requires_grad for b in bases):
        raise InvalidProgram("no output depends differentiably on an input")
    sum(terms).backward()
    grads = [b.grad if b.grad is not None else torch.zeros_like(b) for b in bases if b.requires_grad]
    return [o.detach() for o in outputs], grads


def trace(fn: Callable, inputs: Sequence[torch.Tensor]) -> torch.fx.GraphModule:
    """The aten graph the backend would get (fusec's decompositions, functionalized), sizes symbolic.

    Without duck shaping: a stride that happens to equal a size at n1 must not become that size's symbol,
    or the graph would be wrong at n2 (Dynamo would guard and recompile; make_fx has no guards)."""
    from torch.fx.experimental import _config
    from torch.fx.experimental.proxy_tensor import make_fx

    from fusec.frontend.decompositions import fusec_decompositions

    # patch is added to the module at import (torch.utils._config_module.install_config_module): no stub has it.
    with _config.patch(use_duck_shape=False):  # type: ignore[attr-defined]
        decomposed = make_fx(fn, decomposition_table=fusec_decompositions(), tracing_mode="symbolic")(*inputs)
        return make_fx(torch.func.functionalize(decomposed, remove="mutations"), tracing_mode="symbolic")(*inputs)


def import_program(program: Program, seed: int, fn: Callable | None = None):
    """(module, info) of the program traced at n1."""
    from fusec.base import remarks
    from fusec.frontend.importer import import_graph

    fn = fn or program.function()
    values = [v for _, v in make_inputs(program, program.n1, seed)]
    eager(fn, values)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gm = trace(fn, values)
    with remarks.collect():
        return import_graph(gm, values, "fuzz")


def check_ir(program: Program, seed: int, fn: Callable | None = None, device: str = "cpu") -> None:
    """Import, interpret against eager; every pass alone and the default pipeline against the interpreter."""
    from fusec.pipeline import default_pipeline_spec, parse_pipeline_spec
    from fusec.registry import PASSES
    from fusec.runtime import interpreter

    fn = fn or program.function()
    try:
        module, info = import_program(program, seed, fn)
    except InvalidProgram:
        raise
    except Exception as e:
        raise Mismatch(f"import raised {type(e).__name__}: {e}") from e
    text = _round_trip(module, "imported IR")
    runs = []  # (graph inputs, symbols) at n1, and at n2 where the graph traced at n1 holds there
    for n in (program.n1, program.n2):
        values = [v for _, v in make_inputs(program, n, seed, device)]
        try:
            symbols = info.plan.bind(values)
        except Exception:  # the trace specialized on something n2 changes (make_fx has no guards to say so)
            continue
        runs.append((info.tensor_inputs(values, symbols), symbols))
    want = eager(fn, [v for _, v in make_inputs(program, program.n1, seed, device)])
    got = info.assemble_outputs(_interpret(interpreter, text, runs[0][0], "imported IR"), runs[0][1])
    compare_all(got, want, "interpreter on the imported IR", strides=False, computed_in=program.lowest_precision())

    form_kernels, low = parse_pipeline_spec("form-kernels"), program.lowest_precision()
    for name in PASSES:
        if name in SKIPPED_PASSES:
            continue
        before = () if name in GRAPH_LEVEL_PASSES else form_kernels
        _check_passes(text, before, parse_pipeline_spec(name), runs, f"pass '{name}'", low)
        if name in ("canonicalize", "dce"):
            _check_passes(text, form_kernels, parse_pipeline_spec(name), runs, f"pass '{name}' after form-kernels", low)
    _check_passes(text, (), parse_pipeline_spec(default_pipeline_spec()), runs, "default pipeline", low)


def _check_passes(text: str, setup: Sequence, passes: Sequence, runs, what: str, low: torch.dtype) -> None:
    """Run ``setup``, then each of ``passes`` checked against the interpreter before it."""
    from fusec.registry import make_context
    from fusec.runtime import interpreter

    module = _parse(text)
    ctx = make_context()
    for p in setup:
        p.apply(ctx, module)
    current = _round_trip(module, f"{what}: input")
    for p in passes:
        reference = [_interpret(interpreter, current, inputs, f"{what}: before '{p.name}'") for inputs, _ in runs]
        module = _parse(current)
        try:
            p.apply(ctx, module)
            module.verify()
        except Exception as e:
            raise Mismatch(f"{what}: '{p.name}' raised {type(e).__name__}: {e}") from e
        current = _round_trip(module, f"{what}: after '{p.name}'")
        for (inputs, _), ref in zip(runs, reference, strict=True):
            got = _interpret(interpreter, current, inputs, f"{what}: after '{p.name}'")
            compare_all(got, ref, f"{what}: '{p.name}' changed the results at {inputs[0].shape if inputs else ()}",
                        strides=False, computed_in=low)


def _parse(text: str):
    from fusec.pipeline import parse_module
    from fusec.registry import make_context

    return parse_module(make_context(), text)


def _round_trip(module, what: str) -> str:
    """The module's text, after checking it verifies and prints the same once parsed back."""
    from fusec.pipeline import module_text

    try:
        module.verify()
        text = module_text(module)
        again = module_text(_parse(text))
    except Exception as e:
        raise Mismatch(f"{what}: verify/print/parse raised {type(e).__name__}: {e}") from e
    if again != text:
        raise Mismatch(f"{what}: printing the parsed IR differs from the printed IR:\n{text}\n---\n{again}")
    return text


def _interpret(interpreter, text: str, inputs, what: str) -> list:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return interpreter.run(_parse(text), inputs)
    except Exception as e:
        raise Mismatch(f"{what}: the interpreter raised {type(e).__name__}: {e}") from e


def run_check(check: str, program: Program, seed: int, fn: Callable | None = None, device: str = "cpu") -> None:
    if check == "backend":
        check_backend(program, seed, fn, device)
    elif check == "backend-dynamic":
        check_backend(program, seed, fn, device, dynamic=True)
    elif check == "ir":
        check_ir(program, seed, fn, device)
    elif check == "grad":
        check_grad(program, seed, fn, device)
        check_grad(program, seed, fn, device, dynamic=True)
    else:
        raise ValueError(f"unknown check {check!r} (known: {', '.join(CHECKS)})")


# ---------------------------------------------------------------- reproducers


def reproducer_id(check: str, program: Program) -> str:
    return f"{check}-{hashlib.sha256(repr(program).encode()).hexdigest()[:10]}"


def write_reproducer(out: Path, check: str, program: Program, seed: int, error: BaseException, device: str = "cpu") -> Path:
    """``out/<id>/``: program.py (runnable: prints the mismatch), graph.mlir, seed.txt."""
    folder = out / reproducer_id(check, program)
    folder.mkdir(parents=True, exist_ok=True)
    message = "\n".join("# " + line for line in str(error).splitlines()[:40])
    sizes = f"n={program.n1} (and n={program.n2})"
    (folder / "program.py").write_text(f'''"""fusec fuzz reproducer: check {check!r}, inputs' seed {seed}, sizes {sizes}.

Run: python program.py   (prints the mismatch; edit ``program`` below to narrow it down)
"""
import torch

from fusec.tools.fuzz import reproduce
from fusec.tools.fuzz_programs import Input, Op, Program

PROGRAM = {program!r}


{program.source()}

# The mismatch found:
{message}

if __name__ == "__main__":
    reproduce(PROGRAM, {check!r}, {seed}, program, device={device!r})
''')
    try:
        from fusec.pipeline import module_text

        module, _ = import_program(program, seed)
        (folder / "graph.mlir").write_text(module_text(module) + "\n")
    except Exception as e:
        (folder / "graph.mlir").write_text(f"// import failed: {type(e).__name__}: {e}\n")
    (folder / "seed.txt").write_text(f"check={check}\nseed={seed}\nn1={program.n1}\nn2={program.n2}\ndevice={device}\n")
    return folder


def reproduce(program: Program, check: str, seed: int, fn: Callable | None = None, device: str = "cpu") -> None:
    """Run one check and print its mismatch (exit status 1), or say there is none."""
    try:
        run_check(check, program, seed, fn, device)
    except Mismatch as e:
        print(f"MISMATCH ({check}): {e}")
        sys.exit(1)
    print(f"no mismatch ({check})")


# ---------------------------------------------------------------- the long run


@dataclasses.dataclass
class Stats:
    examples: int = 0
    invalid: int = 0
    findings: list[Path] = dataclasses.field(default_factory=list)


def fuzz_round(check: str, seed: int, examples: int, device: str, stats: Stats, out: Path | None) -> None:
    """``examples`` programs through ``check``, hypothesis seeded by ``seed``; a mismatch is shrunk and written."""
    failing: list = []

    @hypothesis_seed(seed)
    @settings(max_examples=examples, deadline=None, database=None, report_multiple_bugs=False, print_blob=False,
              suppress_health_check=list(HealthCheck))
    @given(programs(grad=check == "grad"), st.integers(0, 2**16))
    def one(program, input_seed):
        stats.examples += 1
        try:
            run_check(check, program, input_seed, device=device)
        except InvalidProgram:
            stats.invalid += 1
            reject()
        except Mismatch as e:
            failing[:] = [program, input_seed, e]
            raise

    try:
        one()
    except Exception as e:
        if not failing:  # hypothesis giving up on a round (e.g. too many rejections) is not a finding
            print(f"round {check}/{seed} stopped: {type(e).__name__}: {e}", flush=True)
            return
        # A Mismatch, or hypothesis calling it flaky when the shrunk replay fails in another place.
        program, input_seed, error = failing
        print(f"MISMATCH ({check}): {str(error).splitlines()[0]}\n{program.source()}", flush=True)
        if out is not None:
            stats.findings.append(write_reproducer(out, check, program, input_seed, error, device))


@click.command()
@click.option("--minutes", type=float, default=1.0, show_default=True, help="How long to fuzz.")
@click.option("--seed", type=int, default=0, show_default=True, help="First hypothesis seed (one more per round).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("fuzz-out"), show_default=True,
              help="Where minimized reproducers go, one folder each.")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True)
@click.option("--check", "checks", type=click.Choice(CHECKS), multiple=True,
              help="Which checks to run (repeatable; default: all, in turn).")
@click.option("--examples", type=int, default=10, show_default=True, help="Programs per round.")
def main(minutes: float, seed: int, out: Path, device: str, checks: tuple[str, ...], examples: int) -> None:
    """Fuzz fusec with random programs for MINUTES; write a minimized reproducer for every mismatch."""
    if device == "cuda" and not torch.cuda.is_available():
        raise click.UsageError("--device cuda: no CUDA device here")
    checks = checks or CHECKS
    stats, start, round_no = Stats(), time.monotonic(), 0
    while time.monotonic() - start < minutes * 60:
        check = checks[round_no % len(checks)]
        fuzz_round(check, seed + round_no, examples, device, stats, out)
        round_no += 1
        elapsed = (time.monotonic() - start) / 60
        print(f"[{elapsed:6.1f} min] rounds {round_no}, examples {stats.examples} "
              f"({stats.examples / max(elapsed, 1e-9):.1f}/min), invalid {stats.invalid}, "
              f"mismatches {len(stats.findings)}", flush=True)
    for folder in stats.findings:
        print(f"reproducer: {folder}")
    sys.exit(1 if stats.findings else 0)


__all__ = ["Input", "Op", "Program", "check_backend", "check_grad", "check_ir", "main", "reproduce"]

if __name__ == "__main__":
    main()
