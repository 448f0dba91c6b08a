"""Compound sizes get a size symbol of their own: ``d0 = floordiv(s0 - 1, 2) + 1``.

A convolution or pooling with a stride makes dims like ``floordiv(s0 - 1, 2) + 1``.
Strides are products of dims, and sympy writes ``(q + 1)**2`` as ``q**2 + 2*q + 1``:
no longer a monomial, so index arithmetic cannot cancel ``floordiv(x, h**2)``
against ``mod(floordiv(x, h), h)`` and every fused view nests the expression
further (a dynamic ResNet-18 did not get through vertical fusion in 15 minutes).
Named, the dim is a symbol like any other and its strides are monomials again.
A polynomial dim that only the guards keep positive (``s0 - 2``: a convolution
without padding) is named for the same reason: index arithmetic knows size
symbols are >= 1, not that ``s0 >= 3``.

The graph declares each derived symbol with its definition (``symbols(s0 in [2,
inf], d0 = floordiv(s0 - 1, 2) + 1 in [1, inf])``); executors compute it from the
symbols it is defined by (``fusec.analysis.bind_plan``), or read it from an input
whose dim it is (a backward graph's saved activations).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import sympy

from fusec.base import indexing, shapes

_COMPOUND = (shapes.FloorDiv, shapes.Mod, sympy.Max, sympy.Min)


def is_compound(e: sympy.Expr) -> bool:
    """A size that is not a polynomial in size symbols: it holds a floordiv, mod, max or min of them."""
    return bool(shapes.free_size_symbols([e])) and e.has(*_COMPOUND)


class DerivedSizes:
    """Names compound sizes as the importer meets them, and rewrites later sizes in those names."""

    def __init__(self, taken: Iterable[str] = (), facts: Sequence[tuple[sympy.Expr, sympy.Expr]] = (),
                 bounds: Mapping[str, tuple[float, float]] | None = None):
        self.taken = set(taken)
        self.facts = list(facts)  # equalities every size is first written through (fusec.frontend.size_facts)
        self.bounds = dict(bounds or {})  # the traced symbols' guarded ranges: they settle max/min
        self.definitions: dict[str, sympy.Expr] = {}  # derived symbol -> its definition over the traced symbols
        self._rules: list[tuple[sympy.Expr, sympy.Expr]] = []  # applied in order: each in the terms of those before
        self._seen: dict[sympy.Expr, tuple[int, sympy.Expr]] = {}  # size -> (rules then, its form then)

    def __call__(self, e: sympy.Expr) -> sympy.Expr:
        """``e`` in derived symbols: earlier names substituted; a size still compound gets a new name."""
        rules, known = self._seen.get(e, (-1, e))
        if rules == len(self._rules):  # no name made since: the same answer
            return known
        out = shapes.settle_extrema(e, self.bounds) if self.bounds else e
        out = shapes.apply_facts(out, self.facts) if self.facts else out
        for old, new in self._rules:
            if out.has(old):  # expanded: an expanded stride (64*q**2 + 128*q + 64) must become 64*d0**2 too
                out = sympy.expand(out.xreplace({old: new}))
        if not is_compound(out) and isinstance(out, (sympy.Mul, sympy.Pow)) and self._positive_only_by_bounds(out):
            out = self._factors_named(out)  # 8*s0*(s1 - 2)**2 is 8*s0*d0**2: name s1 - 2, not the product
        if is_compound(out) or self._positive_only_by_bounds(out):
            out = self._name(out)
        self._seen[e] = (len(self._rules), out)
        return out

    def _factors_named(self, e: sympy.Expr) -> sympy.Expr:
        if isinstance(e, sympy.Pow) and e.exp.is_Integer and e.exp > 0:
            return self(e.base) ** e.exp
        if isinstance(e, sympy.Mul):
            return sympy.Mul(*[self(f) for f in e.args])
        return e

    def _positive_only_by_bounds(self, e: sympy.Expr) -> bool:
        """A polynomial size like ``s - 2`` (a convolution without padding, a slice ``x[1:]``): the guards keep
        it >= 1 but sympy, which knows only that symbols are >= 1, cannot prove it; index arithmetic treats a size
        it cannot prove positive as no size at all, so such a size gets a name (with its bounds) too."""
        if not self.bounds or not shapes.free_size_symbols([e]) or e.is_Symbol or indexing.nonnegative(e - 1):
            return False
        low, _ = shapes.value_range(e, self.bounds, (1, math.inf))
        return low >= 1

    def _name(self, e: sympy.Expr) -> sympy.Symbol:
        n = len(self.definitions)
        while f"d{n}" in self.taken:
            n += 1
        name = f"d{n}"
        self.taken.add(name)
        symbol = shapes.size_symbol(name)
        self.definitions[name] = shapes.expand_definitions(e, self.definitions)  # in the traced symbols: no chains
        # Also name its one compound atom, so that sums and products of it (strides) rewrite too:
        # floordiv(s0 - 1, 2) -> d0 - 1 turns 64*(floordiv(s0 - 1, 2) + 1)**2 into 64*d0**2.
        atoms = [a for a in e.atoms(*_COMPOUND) if not any(a != b and b.has(a) for b in e.atoms(*_COMPOUND))]
        rest = e - atoms[0] if len(atoms) == 1 else None
        if rest is not None and not rest.has(*_COMPOUND) and sympy.expand(e - rest - atoms[0]) == 0:
            self._rules.append((atoms[0], symbol - rest))
        else:
            self._rules.append((e, symbol))
        return symbol


def bounds(definition: sympy.Expr, symbol_bounds: Mapping[str, tuple[int, int | None]]) -> tuple[int, int | None]:
    """(lower, upper or None) of a derived size from its symbols' bounds: exact where the definition grows
    with each symbol (sums and products with positive coefficients, floordiv by a positive integer, max,
    min: every conv and pool size), else (0, None)."""
    if not _grows(definition):
        return 0, None
    names = shapes.free_size_symbols([definition])
    lows = {s: symbol_bounds.get(s, (1, None))[0] for s in names}
    low = max(shapes.evaluate(definition, lows), 0)
    highs = {s: symbol_bounds.get(s, (1, None))[1] for s in names}
    finite = {s: v for s, v in highs.items() if v is not None}
    if len(finite) < len(highs):
        return low, None
    return low, shapes.evaluate(definition, finite)


def _grows(e: sympy.Expr) -> bool:
    """Non-decreasing in every symbol, by the shape of the expression."""
    if e.is_Integer or e.is_Symbol:
        return True
    if isinstance(e, sympy.Add):
        return all(a.is_Integer or _grows(a) for a in e.args)
    if isinstance(e, sympy.Mul):
        coeff, rest = e.as_coeff_Mul()
        return coeff > 0 and all(_grows(a) for a in sympy.Mul.make_args(rest))
    if isinstance(e, sympy.Pow):
        return e.exp.is_Integer and e.exp > 0 and _grows(e.base)
    if isinstance(e, shapes.FloorDiv):
        return e.args[1].is_Integer and e.args[1] > 0 and _grows(e.args[0])
    if isinstance(e, (sympy.Max, sympy.Min)):
        return all(_grows(a) for a in e.args)
    return False

