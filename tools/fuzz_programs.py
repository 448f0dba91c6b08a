"""Random tensor programs for differential fuzzing: data that prints itself as a Python function.

A ``Program`` is a list of inputs (shape, dtype, layout) and a list of ops, each
op a line of torch code over earlier values (``v3 = torch.amax(v1, dim=(0,),
keepdim=True)``).  Its ``source()`` is the reproducer: a plain function any
reader can run.  Shapes hold one size symbol ``n`` besides constants, so a
program is valid at two sizes (``n1`` and ``n2 > n1``): ``dynamic=True`` runs
the second size through the artifact compiled for the first.

``programs()`` is the hypothesis strategy.  Each candidate op is tried on small
constant tensors at both sizes (meta tensors accept ops CPU kernels refuse);
torch's own shape and dtype rules decide the result's type, and a candidate
torch refuses is dropped (no type rules written again here).
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch
from hypothesis import strategies as st

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
          "i32": torch.int32, "i64": torch.int64, "bool": torch.bool}
FLOATS = ("f32", "f16", "bf16")
CONSTANT_DIMS = (1, 2, 3, 4, 5, 7, 8, 16, 0)  # 1, primes, powers of two, zero-size
# Sizes of the symbol n: never equal to a constant dim, so dynamic=True's duck sizing keeps n its own symbol.
FIRST_N = (6, 9, 10)
SECOND_N = (11, 12, 17)
LAYOUTS = ("contiguous", "permuted", "sliced", "expanded")

UNARY = ("neg", "abs", "sin", "cos", "exp", "log", "sqrt", "tanh", "sigmoid", "relu", "floor", "ceil",
         "reciprocal", "square", "rsqrt", "erf", "logical_not", "bitwise_not", "sign")
BINARY = ("add", "sub", "mul", "div", "maximum", "minimum", "remainder", "atan2", "eq", "ne", "lt", "le", "gt", "ge",
          "logical_and", "logical_or", "bitwise_and", "bitwise_xor")
REDUCTIONS = ("sum", "mean", "amax", "amin", "argmax", "prod", "var", "max")
# Functions with a derivative almost everywhere: the only ones gradient programs use.
SMOOTH_UNARY = ("neg", "abs", "sin", "cos", "exp", "tanh", "sigmoid", "relu", "square", "erf")
SMOOTH_BINARY = ("add", "sub", "mul", "div", "maximum", "minimum")
SMOOTH_REDUCTIONS = ("sum", "mean", "amax", "amin", "prod", "var", "max")

Dim = int | str  # a constant, or "n"


@dataclasses.dataclass(frozen=True)
class Input:
    """A program input: ``shape`` (constants and "n"), a dtype key of DTYPES, a layout of LAYOUTS.

    ``high``: an index input's values lie in [0, high) (``None``: an ordinary random tensor)."""

    shape: tuple[Dim, ...]
    dtype: str
    layout: str = "contiguous"
    high: int | None = None

    def sizes(self, n: int) -> tuple[int, ...]:
        return tuple(n if d == "n" else int(d) for d in self.shape)


@dataclasses.dataclass(frozen=True)
class Op:
    """One line of the program: ``v<k> = <code>``, ``{i}`` in ``code`` naming the program's value i."""

    code: str
    args: tuple[int, ...]

    def text(self, names: Sequence[str]) -> str:
        return self.code.format(*(names[a] for a in self.args))


@dataclasses.dataclass(frozen=True)
class Program:
    """Inputs, ops and the values returned; sizes ``n1`` (every mode) and ``n2`` (dynamic=True's second call)."""

    inputs: tuple[Input, ...]
    ops: tuple[Op, ...]
    outputs: tuple[int, ...]
    n1: int = FIRST_N[0]
    n2: int = SECOND_N[0]

    def names(self) -> list[str]:
        return [f"x{i}" for i in range(len(self.inputs))] + [f"v{i}" for i in range(len(self.inputs), self.size())]

    def size(self) -> int:
        return len(self.inputs) + len(self.ops)

    def source(self, name: str = "program") -> str:
        """The program as a Python function of its inputs (``import torch`` is all it needs)."""
        names = self.names()
        lines = [f"def {name}({', '.join(names[:len(self.inputs)])}):"]
        for k, op in enumerate(self.ops, start=len(self.inputs)):
            lines.append(f"    {names[k]} = {op.text(names)}")
        outs = ", ".join(names[i] for i in self.outputs)
        lines.append(f"    return ({outs},)")
        return "\n".join(lines) + "\n"

    def function(self) -> Callable:
        """The program compiled from its source (a fresh code object each call: Dynamo caches by code)."""
        return _compiled(self.source(), f"<fuzz program {id(self):x}>")

    def function_in_float64(self) -> Callable:
        """The program with every float dtype it names made float64 (run on float64 inputs: the program as exactly
        as it can be computed, to judge which of two 16-bit results is the nearer)."""
        source = re.sub(r"torch\.(bfloat16|float16|float32|half|float)\b", "torch.float64", self.source())
        return _compiled(source, f"<fuzz program {id(self):x} in float64>")

    def lowest_precision(self) -> torch.dtype:
        """The least precise float dtype the program computes in: kernels keep such intermediates in fp32
        where eager rounds each op's result, so results (fp32 ones too) agree only to that precision."""
        used = {DTYPES[i.dtype] for i in self.inputs} | {d for d in DTYPES.values() if any(str(d) in op.code for op in self.ops)}
        return next((d for d in (torch.bfloat16, torch.float16) if d in used), torch.float32)


def _compiled(source: str, filename: str) -> Callable:
    """The function ``program`` that ``source`` defines (``import torch`` is all it needs)."""
    namespace: dict[str, Any] = {"torch": torch}
    exec(compile(source, filename, "exec"), namespace)
    return namespace["program"]


# ---------------------------------------------------------------- inputs


def make_input(spec: Input, n: int, gen: torch.Generator, device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """(base, value): random ``base`` storage and the input ``value`` in ``spec.layout`` (a view of base)."""
    shape = spec.sizes(n)
    dtype = DTYPES[spec.dtype]
    layout = spec.layout if len(shape) >= 1 else "contiguous"
    if layout == "permuted":
        base_shape = shape[::-1]
    elif layout == "sliced":
        base_shape = (*shape[:-1], 2 * shape[-1] + 1)
    elif layout == "expanded":
        base_shape = tuple(1 if i == 0 else d for i, d in enumerate(shape))
    else:
        base_shape = shape
    base = _random(base_shape, dtype, spec.high, gen).to(device)
    return base, view_as_layout(base, shape, layout)


def view_as_layout(base: torch.Tensor, shape: Sequence[int], layout: str) -> torch.Tensor:
    if layout == "permuted":
        return base.permute(*reversed(range(base.dim())))
    if layout == "sliced":
        return base[..., 1::2]
    if layout == "expanded":
        return base.expand(*shape)
    return base


def _random(shape, dtype: torch.dtype, high: int | None, gen: torch.Generator) -> torch.Tensor:
    if high is not None:
        return torch.randint(0, high, shape, generator=gen, dtype=dtype)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=gen).to(dtype)
    if dtype == torch.bool:
        return torch.rand(shape, generator=gen) > 0.5
    return torch.randint(-6, 7, shape, generator=gen).to(dtype)  # negatives, zeros (division), ties (argmax)


def make_inputs(program: Program, n: int, seed: int, device: str = "cpu") -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(base, value) of every input at size ``n``; the same ``seed`` gives the same tensors."""
    gen = torch.Generator().manual_seed(seed)
    return [make_input(spec, n, gen, device) for spec in program.inputs]


# ---------------------------------------------------------------- generation


@dataclasses.dataclass
class _Value:
    dtype: torch.dtype
    at_n1: tuple[int, ...]  # the shape at n1 and at n2: equal entries are constant dims
    at_n2: tuple[int, ...]
    fill: int = 1  # what the value holds when a candidate op is tried on it (0 for indices: always in range)

    def constant(self, d: int) -> bool:
        return self.at_n1[d] == self.at_n2[d]

    def symbolic_dim(self, d: int, n1: int, n2: int) -> Dim | None:
        """The dim as an input shape entry ("n" or its constant), None when it is an expression like 2n."""
        if self.constant(d):
            return self.at_n1[d]
        return "n" if (self.at_n1[d], self.at_n2[d]) == (n1, n2) else None


class _Builder:
    """The program being drawn: its inputs, ops and the type of every value (from meta tensors at n1 and n2)."""

    def __init__(self, draw, grad: bool, n1: int, n2: int):
        self.draw, self.grad, self.n1, self.n2 = draw, grad, n1, n2
        self.inputs: list[Input] = []
        self.ops: list[Op] = []
        self.values: list[_Value] = []
        self.is_input: list[bool] = []  # per value: an input (index inputs come in between ops)

    def add_input(self, spec: Input) -> int:
        dtype = DTYPES[spec.dtype]
        self.inputs.append(spec)
        self.is_input.append(True)
        self.values.append(_Value(dtype, spec.sizes(self.n1), spec.sizes(self.n2), 0 if spec.high else 1))
        return len(self.values) - 1

    def try_op(self, code: str, args: tuple[int, ...]) -> int | None:
        """Append ``code`` if torch accepts it at both sizes (and it has a gradient in gradient programs)."""
        results = []
        for shape_of in (lambda v: v.at_n1, lambda v: v.at_n2):
            tried = [torch.full(shape_of(self.values[a]), self.values[a].fill, dtype=self.values[a].dtype) for a in args]
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # var() of one element warns: the program stays valid
                    out = eval(code.format(*(f"_a[{i}]" for i in range(len(args)))), {"torch": torch, "_a": tried})
            except Exception:
                return None
            # Integer remainder by a random divisor may divide by zero, which eager raises on.
            if not isinstance(out, torch.Tensor) or ("remainder" in code and not out.dtype.is_floating_point):
                return None
            results.append(out)
        if self.grad and not results[0].dtype.is_floating_point:
            return None
        self.ops.append(Op(code.format(*(f"{{{i}}}" for i in range(len(args)))), args))
        self.is_input.append(False)
        self.values.append(_Value(results[0].dtype, tuple(results[0].shape), tuple(results[1].shape)))
        return len(self.values) - 1


def _shape(draw, rank: int) -> tuple[Dim, ...]:
    return tuple(draw(st.sampled_from(("n", *CONSTANT_DIMS)) if draw(st.booleans()) else st.sampled_from(CONSTANT_DIMS[:8]))
                 for _ in range(rank))


@st.composite
def inputs(draw, grad: bool = False) -> Input:
    rank = draw(st.integers(0, 3))
    dtype = draw(st.sampled_from(("f32",) if grad else tuple(DTYPES)))
    layout = draw(st.sampled_from(LAYOUTS)) if rank else "contiguous"
    return Input(_shape(draw, rank), dtype, layout)


def _pick(draw, b: _Builder, ok: Callable[[_Value], bool] = lambda v: True) -> int:
    """A value ``ok`` admits; the callers' filters always admit one (a program has inputs, and a filter admits
    the value it pairs with: x broadcasts with x, x fits a cat with x)."""
    picked = _pick_if_any(draw, b, ok)
    assert picked is not None, "no value to pick"
    return picked


def _pick_if_any(draw, b: _Builder, ok: Callable[[_Value], bool]) -> int | None:
    choices = [i for i, v in enumerate(b.values) if ok(v)]
    return draw(st.sampled_from(choices)) if choices else None


def _unary(draw, b: _Builder) -> int | None:
    x = _pick(draw, b)
    fn = draw(st.sampled_from(SMOOTH_UNARY if b.grad else UNARY))
    return b.try_op(f"torch.{fn}({{}})", (x,))


def _binary(draw, b: _Builder) -> int | None:
    x = _pick(draw, b)
    fn = draw(st.sampled_from(SMOOTH_BINARY if b.grad else BINARY))
    if draw(st.integers(0, 4)) == 0:  # a Python scalar operand
        scalar = draw(st.sampled_from((2, -1, 0.5, 3.0, True) if not b.grad else (2, 0.5, -1.5)))
        return b.try_op(f"torch.{fn}({{}}, {scalar!r})", (x,))
    y = _pick(draw, b, lambda v: _broadcasts(b.values[x], v))
    return b.try_op(f"torch.{fn}({{}}, {{}})", (x, y))


def _broadcasts(a: _Value, b: _Value) -> bool:
    return all(p == q or 1 in (p, q) for p, q in zip(a.at_n1[::-1], b.at_n1[::-1], strict=False)) and \
        all(p == q or 1 in (p, q) for p, q in zip(a.at_n2[::-1], b.at_n2[::-1], strict=False))


def _where(draw, b: _Builder) -> int | None:
    x = _pick(draw, b)
    y = _pick(draw, b, lambda v: _broadcasts(b.values[x], v))
    cond = draw(st.sampled_from(("{0} > 0", "{0} < {1}", "{0} != {1}")))
    return b.try_op(f"torch.where({cond}, {{0}}, {{1}})", (x, y))


def _cast(draw, b: _Builder) -> int | None:
    x = _pick(draw, b)
    to = draw(st.sampled_from(FLOATS if b.grad else tuple(DTYPES)))
    return b.try_op(f"{{}}.to({DTYPES[to]})", (x,))


def _reduction(draw, b: _Builder) -> int | None:
    x = _pick(draw, b)
    rank = len(b.values[x].at_n1)
    fn = draw(st.sampled_from(SMOOTH_REDUCTIONS if b.grad else REDUCTIONS))
    keep = draw(st.booleans())
    if rank == 0 or (fn in ("sum", "mean", "amax", "amin") and draw(st.integers(0, 5)) == 0):
        return b.try_op(f"torch.{fn}({{}})", (x,)) if fn in ("sum", "mean", "amax", "amin", "prod", "argmax") else None
    if fn in ("argmax", "prod", "max"):
        dim = draw(st.integers(-rank, rank - 1))
        code = {"argmax": "torch.argmax({{}}, dim={d}, keepdim={k})", "prod": "torch.prod({{}}, dim={d}, keepdim={k})",
                "max": "torch.max({{}}, dim={d}, keepdim={k}).values"}[fn]
        return b.try_op(code.format(d=dim, k=keep), (x,))
    dims = tuple(sorted(draw(st.sets(st.integers(0, rank - 1), min_size=1, max_size=rank))))
    extra = ", correction=0" if fn == "var" and draw(st.booleans()) else ""
    return b.try_op(f"torch.{fn}({{}}, dim={dims}, keepdim={keep}{extra})", (x,))


def _view(draw, b: _Builder) -> int | None:
    x = _pick(draw, b)
    v = b.values[x]
    rank = len(v.at_n1)
    kind = draw(st.sampled_from(("reshape", "flatten", "unflatten", "permute", "transpose", "expand", "slice",
                                 "squeeze", "unsqueeze")))
    if kind == "unsqueeze":
        return b.try_op(f"{{}}.unsqueeze({draw(st.integers(0, rank))})", (x,))
    if kind == "reshape":
        return b.try_op("{}.reshape(-1)", (x,))
    if rank == 0:
        return None
    dim = draw(st.integers(0, rank - 1))
    if kind == "flatten":
        end = draw(st.integers(dim, rank - 1))
        return b.try_op(f"{{}}.flatten({dim}, {end})", (x,))
    if kind == "unflatten":
        size = v.at_n1[dim]
        if not v.constant(dim) or size < 1:
            return None
        factor = draw(st.sampled_from([f for f in range(1, size + 1) if size % f == 0]))
        return b.try_op(f"{{}}.unflatten({dim}, ({factor}, -1))", (x,))
    if kind == "permute":
        perm = draw(st.permutations(range(rank)))
        return b.try_op(f"{{}}.permute({', '.join(map(str, perm))})", (x,))
    if kind == "transpose":
        return b.try_op(f"{{}}.transpose({dim}, {draw(st.integers(0, rank - 1))})", (x,))
    if kind == "expand":
        lead = draw(st.sampled_from((0, 0, 1)))
        sizes = [str(draw(st.sampled_from((2, 3)))) for _ in range(lead)]
        sizes += [str(draw(st.sampled_from((1, 3, 4)))) if v.at_n1[d] == 1 and v.constant(d) else "-1" for d in range(rank)]
        return b.try_op(f"{{}}.expand({', '.join(sizes)})", (x,))
    if kind == "squeeze":
        return b.try_op(f"{{}}.squeeze({dim})", (x,)) if v.constant(dim) and v.at_n1[dim] == 1 else None
    start, stop = draw(st.integers(0, 3)), draw(st.sampled_from((None, 2, 5, 9, -1)))
    step = draw(st.sampled_from((1, 2, 3)))
    index = ":, " * dim + f"{start}:{'' if stop is None else stop}:{step}"
    return b.try_op(f"{{}}[{index}]", (x,))


def _cat(draw, b: _Builder) -> int | None:
    x = _pick(draw, b)
    v = b.values[x]
    rank = len(v.at_n1)
    if rank == 0:
        return None
    dim = draw(st.integers(0, rank - 1))

    def fits(w: _Value) -> bool:
        return len(w.at_n1) == rank and all(w.at_n1[d] == v.at_n1[d] and w.at_n2[d] == v.at_n2[d]
                                            for d in range(rank) if d != dim)

    y = _pick(draw, b, fits)
    return b.try_op(f"torch.cat([{{}}, {{}}], dim={dim})", (x, y))


def _index(draw, b: _Builder) -> int | None:
    """gather, index_select, x[idx] or scatter, the indices a new int64 input within the dim's size at n1 (n2 > n1)."""
    x = _pick_if_any(draw, b, lambda v: len(v.at_n1) >= 1)  # every value may be 0-d
    if x is None:
        return None
    v = b.values[x]
    rank = len(v.at_n1)
    dim = draw(st.integers(0, rank - 1))
    if v.at_n1[dim] < 1:
        return None
    kind = draw(st.sampled_from(("gather", "index_select", "getitem", "scatter")))
    # scatter: one position per line (nll_loss's backward); more could repeat a position, whose winner eager leaves undefined
    length = 1 if kind == "scatter" else draw(st.sampled_from((1, 3, 5)))
    if kind in ("gather", "scatter"):
        shape = [v.symbolic_dim(d, b.n1, b.n2) if d != dim else length for d in range(rank)]
        if None in shape:
            return None
        idx = b.add_input(Input(tuple(d for d in shape if d is not None), "i64", high=v.at_n1[dim]))
        if kind == "scatter":
            return b.try_op(f"torch.scatter({{}}, {dim}, {{}}, {draw(st.sampled_from((-1.0, 2.5)))})", (x, idx))
        return b.try_op(f"torch.gather({{}}, {dim}, {{}})", (x, idx))
    idx = b.add_input(Input((length,), "i64", high=v.at_n1[dim]))
    if kind == "index_select":
        return b.try_op(f"torch.index_select({{}}, {dim}, {{}})", (x, idx))
    return b.try_op("{}[" + ":, " * dim + "{}]", (x, idx))


OP_KINDS = {"unary": _unary, "binary": _binary, "where": _where, "cast": _cast, "reduction": _reduction,
            "view": _view, "cat": _cat, "index": _index}


@st.composite
def programs(draw, grad: bool = False, max_ops: int = 8) -> Program:
    """A random program (``grad``: float inputs and differentiable ops only, for gradient checks)."""
    n1, n2 = draw(st.sampled_from(FIRST_N)), draw(st.sampled_from(SECOND_N))
    b = _Builder(draw, grad, n1, n2)
    for _ in range(draw(st.integers(1, 3))):
        b.add_input(draw(inputs(grad)))
    kinds = tuple(k for k in OP_KINDS if not (grad and k in ("where", "index")))
    wanted = draw(st.integers(1, max_ops))
    for _ in range(4 * wanted):
        if len(b.ops) >= wanted:
            break
        OP_KINDS[draw(st.sampled_from(kinds))](draw, b)
    if not b.ops and b.try_op("torch.neg({})", (0,)) is None:
        b.try_op("{}.to(torch.float32)", (0,))
    computed = [i for i, is_input in enumerate(b.is_input) if not is_input]
    extra = draw(st.lists(st.sampled_from(computed), max_size=2, unique=True))
    outputs = tuple(dict.fromkeys([computed[-1], *extra]))
    return _numbered(b, outputs)


def _numbered(b: _Builder, outputs: Sequence[int]) -> Program:
    """The program without ops no output needs (shrinking then works on what matters), numbered inputs
    first, then ops (index inputs were added between ops)."""
    live, op_of = set(outputs), {}
    ops_seen = iter(b.ops)
    for i, is_input in enumerate(b.is_input):
        if not is_input:
            op_of[i] = next(ops_seen)
    for i in sorted(op_of, reverse=True):
        if i in live:
            live.update(op_of[i].args)
    kept = [i for i in range(len(b.values)) if i in live and b.is_input[i]] + sorted(i for i in op_of if i in live)
    order = {old: new for new, old in enumerate(kept)}
    inputs = tuple(spec for i, spec in zip((i for i, x in enumerate(b.is_input) if x), b.inputs, strict=True) if i in live)
    ops = tuple(Op(op_of[i].code, tuple(order[a] for a in op_of[i].args)) for i in kept if i in op_of)
    return Program(inputs, ops, tuple(order[o] for o in outputs), b.n1, b.n2)
