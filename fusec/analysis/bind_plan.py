"""A graph's calling convention: where each size symbol's value comes from at run time.

Size symbols are not arguments of a ``fusec.graph``: every executor recovers them
from what it is called with, the dims and strides of the input tensors (and, for
the backend's boxed calls, the SymInt arguments AOTAutograd passes beside them).
``bind_plan`` works out once, from the input types alone, how:

* a ``Binding`` solves one symbol from one ``Place`` (an input's dim or stride, or a
  scalar argument) whose expression is linear in it, ``a*s + b``, where ``a`` and
  ``b`` use only symbols bound by earlier bindings: ``s = (value - b) // a``;
* every place that is not simply ``s`` is a check, to hold once all symbols are
  bound (for a binding's own place that is the check that the division was
  exact).  A dim or a scalar that disagrees is a wrong input; a stride that
  disagrees is a layout: the launcher copies the input into the declared one,
  the interpreter computes on logical tensors and needs none.
* each of the graph's size facts (``s38*s97 = s3*s88``) is a check too.

Places are tried in a fixed order (each input's dims, then each input's strides,
then the scalars; a place equal to the symbol before one that must be solved), so
every executor binds the same symbol from the same place.  A declared symbol that
no place gives is ``missing``: an error only where an executor needs its value
(``require``).  The reference interpreter evaluates the plan (``bind``), the
launcher prints it as host code, the backend's ``ImportInfo`` evaluates it over
the FX arguments.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import sympy
from xdsl.ir import Attribute

from fusec.base import shapes
from fusec.dialects import fusec as F


class UnboundSymbol(ValueError):
    """A size symbol an executor needs that no input gives."""


class InputMismatch(ValueError):
    """Inputs (tensors, scalars) that the graph's types do not admit."""


@dataclass(frozen=True)
class Place:
    """An integer known at run time: dim ``index`` of input ``input``, its stride ``index``, or scalar ``input``."""

    kind: str  # "dim" | "stride" | "scalar"
    input: int
    index: int
    expr: sympy.Expr  # what the types say it is

    def read(self, tensors: Sequence, scalars: Sequence[int]) -> int:
        if self.kind == "dim":
            return int(tensors[self.input].shape[self.index])
        if self.kind == "stride":
            return int(tensors[self.input].stride(self.index))
        return int(scalars[self.input])

    def describe(self) -> str:
        return f"scalar argument {self.input}" if self.kind == "scalar" else f"input {self.input} {self.kind} {self.index}"


@dataclass(frozen=True)
class Binding:
    """``symbol = (value of place - offset) // coeff``: the place's expression is ``coeff*symbol + offset``;
    or, for a derived symbol no place gives, ``symbol = definition`` over symbols bound before it."""

    symbol: str
    place: Place | None
    coeff: sympy.Expr
    offset: sympy.Expr
    definition: sympy.Expr | None = None

    @property
    def is_direct(self) -> bool:
        """The place is the symbol itself: nothing to solve, nothing to check."""
        return self.place is not None and self.coeff == 1 and self.offset == 0

    @property
    def uses(self) -> set[str]:
        """The symbols this binding computes with."""
        return shapes.free_size_symbols([self.coeff, self.offset] + ([self.definition] if self.definition is not None else []))

    def evaluate(self, tensors: Sequence, scalars: Sequence[int], env: dict[str, int]) -> int:
        if self.place is None:
            assert self.definition is not None, "a binding without a place has a definition"
            return shapes.evaluate(self.definition, env)
        return self.solve(self.place.read(tensors, scalars), env)

    def solve(self, value: int, env: dict[str, int]) -> int:
        if self.is_direct:
            return value
        a, b = (shapes.evaluate(e, env) if e.free_symbols else int(e) for e in (self.coeff, self.offset))
        return (value - b) // a


@dataclass(frozen=True)
class BindPlan:
    """How to bind a graph's size symbols from its arguments (module docstring)."""

    graph: str  # its name, for messages
    ranks: tuple[int, ...]  # of the tensors a call passes
    scalars: int  # how many scalar (SymInt) arguments
    bindings: tuple[Binding, ...]  # in an order where each uses only symbols bound before it
    checks: tuple[Place, ...]  # every place but the direct bindings'
    missing: tuple[str, ...]  # declared symbols no place gives
    facts: tuple[tuple[sympy.Expr, sympy.Expr], ...] = ()  # the graph's size facts: checked like the places

    def require(self, symbols: Iterable[str]) -> None:
        """The one error for a needed symbol with no place: raised here, whoever needs it."""
        lacking = sorted(set(symbols) & set(self.missing), key=shapes.natural_key)
        if lacking:
            names = ", ".join(f"'{s}'" for s in lacking)
            scalar = ", nor a scalar argument" if self.scalars else ""
            raise UnboundSymbol(f"@{self.graph}: size symbol {names} is neither a dim nor a stride of any input{scalar} "
                                "(nor solvable from one), so its value cannot be known at run time")

    def bindings_for(self, symbols: Iterable[str]) -> tuple[Binding, ...]:
        """The bindings that give ``symbols``, and those they solve with, in the plan's order."""
        wanted = set(symbols)
        self.require(wanted)
        needed: set[str] = set()
        for b in reversed(self.bindings):
            if b.symbol in wanted or b.symbol in needed:
                needed.add(b.symbol)
                needed |= b.uses
        return tuple(b for b in self.bindings if b.symbol in needed)

    def bind(self, tensors: Sequence, scalars: Sequence[int] = (), check: bool = True) -> dict[str, int]:
        """Every symbol's value from the arguments (objects with ``.shape`` and ``.stride(d)``, and ints).

        With ``check``, also each tensor's rank and every dim and scalar check (strides
        are layouts, see the module docstring); a failure raises ``InputMismatch``
        naming the place and both values.
        """
        if len(tensors) != len(self.ranks) or len(scalars) != self.scalars:
            scalar = f" and {self.scalars} scalars" if self.scalars else ""
            got = f" and {len(scalars)} scalars" if self.scalars or scalars else ""
            raise InputMismatch(f"@{self.graph} takes {len(self.ranks)} tensors{scalar}, got {len(tensors)}{got}")
        if check:
            for i, (t, rank) in enumerate(zip(tensors, self.ranks, strict=True)):
                if len(t.shape) != rank:
                    raise InputMismatch(f"@{self.graph}: input {i} has {len(t.shape)} dims {list(t.shape)}, its type has {rank}")
        env: dict[str, int] = {}
        for b in self.bindings:
            env[b.symbol] = b.evaluate(tensors, scalars, env)
        if check:
            for place in self.checks:
                if place.kind != "stride":
                    self._check(place, place.read(tensors, scalars), env)
            for lhs, rhs in self.facts:
                self._check_fact(lhs, rhs, env)
        return env

    def _check_fact(self, lhs: sympy.Expr, rhs: sympy.Expr, env: dict[str, int]) -> None:
        self.require(shapes.free_size_symbols([lhs, rhs]))
        left, right = shapes.evaluate(lhs, env), shapes.evaluate(rhs, env)
        if left != right:
            used = sorted(shapes.free_size_symbols([lhs, rhs]), key=shapes.natural_key)
            raise InputMismatch(f"@{self.graph}: the inputs break the graph's size fact {shapes.print_fact(lhs, rhs)}: "
                                f"{left} != {right} ({', '.join(f'{s} = {env[s]}' for s in used)})")

    def _check(self, place: Place, actual: int, env: dict[str, int]) -> None:
        self.require(shapes.free_size_symbols([place.expr]))
        want = shapes.evaluate(place.expr, env)
        if actual != want:
            sources = {b.symbol: b.place.describe() if b.place else shapes.print_expr(b.definition) for b in self.bindings}
            used = sorted(shapes.free_size_symbols([place.expr]), key=shapes.natural_key)
            where = f" ({', '.join(f'{s} = {env[s]} from {sources[s]}' for s in used)})" if used else ""
            raise InputMismatch(f"@{self.graph}: {place.describe()} is {actual}, but its type says "
                                f"{shapes.print_expr(place.expr)} = {want}{where}")


def bind_plan(graph: F.GraphOp, scalars: Sequence[sympy.Expr] = ()) -> BindPlan:
    """The plan for a graph's block arguments (and ``scalars``: the expressions of extra SymInt arguments)."""
    return make_plan(graph.sym_name.data, [a.type for a in graph.block.args], graph.declared_symbols, scalars,
                     graph.symbol_definitions, graph.size_facts)


def make_plan(name: str, input_types: Sequence[Attribute], symbols: Iterable[str],
              scalars: Sequence[sympy.Expr] = (), definitions: Mapping[str, sympy.Expr] | None = None,
              facts: Sequence[tuple[sympy.Expr, sympy.Expr]] = ()) -> BindPlan:
    """The plan for inputs of ``input_types`` and scalar arguments holding ``scalars``, binding ``symbols``
    (a derived symbol, one of ``definitions``, from a place where one gives it, else from its definition) and
    checking ``facts`` (equalities of sizes)."""
    definitions = definitions or {}
    tensor_types = [t for t in input_types if isinstance(t, F.TensorType)]
    if len(tensor_types) != len(input_types):
        raise TypeError(f"@{name}: every input must be a !fusec.tensor, got {', '.join(map(str, input_types))}")
    places = ([Place("dim", i, d, e) for i, t in enumerate(tensor_types) for d, e in enumerate(t.dims)]
              + [Place("stride", i, d, e) for i, t in enumerate(tensor_types) for d, e in enumerate(t.layout)]
              + [Place("scalar", i, 0, sympy.sympify(e)) for i, e in enumerate(scalars)])
    pending = sorted(symbols, key=shapes.natural_key)
    bindings: list[Binding] = []
    while pending:
        bound = {b.symbol for b in bindings}
        found = _direct(pending, places) or _linear(pending, bound, places) or _derived(pending, bound, definitions)
        if found is None:
            break
        bindings.append(found)
        pending.remove(found.symbol)
    direct = {b.place for b in bindings if b.is_direct}
    checks = tuple(p for p in places if p not in direct)
    return BindPlan(name, tuple(t.rank for t in tensor_types), len(scalars), tuple(bindings), checks, tuple(pending),
                    tuple(facts))


def _derived(pending: list[str], bound: set[str], definitions: Mapping[str, sympy.Expr]) -> Binding | None:
    """The first pending derived symbol whose definition uses only bound symbols."""
    for sym in pending:
        if sym in definitions and shapes.free_size_symbols([definitions[sym]]) <= bound:
            return Binding(sym, None, sympy.Integer(1), sympy.Integer(0), definitions[sym])
    return None


def _direct(pending: list[str], places: list[Place]) -> Binding | None:
    """The first pending symbol that some place simply is."""
    for sym in pending:
        s = shapes.size_symbol(sym)
        for p in places:
            if p.expr == s:
                return Binding(sym, p, sympy.Integer(1), sympy.Integer(0))
    return None


def _linear(pending: list[str], bound: set[str], places: list[Place]) -> Binding | None:
    """The first pending symbol that a place is linear in, with every other symbol there bound.

    The coefficient must be provably non-zero (``4``, ``s0``; not ``s0 - 1``), so that
    the symbol is determined by the place whatever the other symbols' values.
    """
    for sym in pending:
        s = shapes.size_symbol(sym)
        for p in places:
            if s not in p.expr.free_symbols or not shapes.free_size_symbols([p.expr]) - {sym} <= bound:
                continue
            try:
                poly = sympy.Poly(p.expr, s)
            except sympy.PolynomialError:
                continue
            if poly.degree() != 1:
                continue
            a, b = poly.all_coeffs()
            if a.is_zero is False:
                return Binding(sym, p, a, b)
    return None
