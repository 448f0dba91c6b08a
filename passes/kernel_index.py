"""Index algebra for merging kernels: substitute, simplify within a domain, recognise flat maps.

Shared by vertical-fusion and reduction-fusion.  A kernel's domain is ``[xnumel]``
or ``[xnumel, rnumel]``; inside it ``0 <= x < xnumel`` and ``0 <= r < rnumel``.
Those bounds let ``floordiv(r, 512)`` become 0 and ``mod(r, 512)`` become ``r``
when ``rnumel`` is 512 — the step that makes a re-indexed load read ``x`` again.
Everything here is proved with sympy on symbolic sizes; a fact sympy cannot
prove is treated as false, so callers decline the merge.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence

import sympy

from fusec.base import shapes
from fusec.base.shapes import FloorDiv

X, R = shapes.index_symbol("x"), shapes.index_symbol("r")


def _upper(e: sympy.Expr, top: dict[sympy.Symbol, sympy.Expr]) -> sympy.Expr | None:
    """An upper bound of a non-negative index expression (size symbols stand for themselves)."""
    if e.is_Integer or (e.is_Symbol and e not in top):
        return e
    if e.is_Symbol:
        return top[e]
    if isinstance(e, sympy.Add):
        bounds = [_upper(t, top) for t in e.args]
        return None if any(b is None for b in bounds) else sympy.Add(*bounds)
    if isinstance(e, sympy.Mul):
        coeff, rest = e.as_coeff_Mul()
        if coeff < 0:  # a non-negative factor times a negative number is at most 0
            return sympy.Integer(0) if rest.is_nonnegative else None
        bounds = [_upper(f, top) for f in sympy.Mul.make_args(rest)]
        return None if any(b is None for b in bounds) else coeff * sympy.Mul(*bounds)
    if isinstance(e, sympy.Mod) and e.args[1].is_positive:
        return e.args[1] - 1
    if isinstance(e, FloorDiv):
        inner = _upper(e.args[0], top)
        return None if inner is None else inner / e.args[1]
    if isinstance(e, sympy.Pow) and e.exp.is_Integer and e.exp > 0:
        base = _upper(e.base, top)
        return None if base is None else base**e.exp
    return None


def _below(a: sympy.Expr, b: sympy.Expr, top: dict[sympy.Symbol, sympy.Expr]) -> bool:
    """Proves 0 <= a < b everywhere in the domain."""
    if not a.is_nonnegative:
        return False
    bound = _upper(a, top)
    return bound is not None and bool(sympy.simplify(b - bound).is_positive)


def domain_bounds(domain: Sequence[sympy.Expr]) -> dict[sympy.Symbol, sympy.Expr]:
    top = {X: domain[0] - 1}
    if len(domain) == 2:
        top[R] = domain[1] - 1
    return top


def simplify_in_domain(e: sympy.Expr, domain: Sequence[sympy.Expr]) -> sympy.Expr:
    """``shapes.simplify_index`` plus the facts the domain gives: floordiv(a, b) = 0 and mod(a, b) = a for 0 <= a < b."""
    return _simplify_in_domain(e, tuple(domain))


@functools.lru_cache(maxsize=8192)  # pure in (expression, domain); identical layers repeat them
def _simplify_in_domain(e: sympy.Expr, domain: tuple[sympy.Expr, ...]) -> sympy.Expr:
    top = domain_bounds(domain)

    def fold(t: sympy.Expr) -> sympy.Expr:
        if not t.args:
            return t
        t = t.func(*[fold(a) for a in t.args])
        if isinstance(t, FloorDiv) and _below(t.args[0], t.args[1], top):
            return sympy.Integer(0)
        if isinstance(t, sympy.Mod) and _below(t.args[0], t.args[1], top):
            return t.args[0]
        return t

    for _ in range(4):  # each round can expose another fold; a few suffice
        new = shapes.simplify_index(fold(shapes.simplify_index(e)))
        if new == e:
            break
        e = new
    return e


def substitute(e: sympy.Expr, mapping: dict[sympy.Symbol, sympy.Expr], domain: Sequence[sympy.Expr]) -> sympy.Expr:
    """``e`` with the iteration variables replaced (all at once), simplified in the new domain."""
    return simplify_in_domain(sympy.sympify(e).xreplace(mapping), domain) if mapping else e


@functools.lru_cache(maxsize=4096)
def equal(a: sympy.Expr, b: sympy.Expr) -> bool:
    """``shapes.provably_equal``, with a cheap structural test first and the answers cached."""
    return a == b or sympy.expand(a - b) == 0 or shapes.provably_equal(a, b)


def same_index(a: sympy.Expr, b: sympy.Expr) -> bool:
    return sympy.expand(a - b) == 0


def flat_maps(domain: Sequence[sympy.Expr], hints: Iterable[sympy.Expr] = ()) -> list[sympy.Expr]:
    """Flat positions ``f(x, r)`` that visit ``[0, xnumel*rnumel)`` exactly once over a reduction domain.

    Each is ``rnumel*B*floordiv(x, B) + B*r + mod(x, B)`` with B dividing xnumel:
    the digits (x // B, r, x % B) of a mixed-radix number, hence a bijection.
    B = 1 is a reduction over the last dim (``rnumel*x + r``), B = xnumel one over
    the first (``x + xnumel*r``); other B come from ``mod(x, B)``/``floordiv(x, B)`` in ``hints``.
    """
    xnumel, rnumel = domain
    candidates: list[sympy.Expr] = [sympy.Integer(1)]
    for h in hints:
        for atom in sympy.sympify(h).atoms(sympy.Mod, FloorDiv):
            if atom.args[0] == X and atom.args[1] not in candidates:
                candidates.append(atom.args[1])
    if xnumel not in candidates:
        candidates.append(xnumel)
    maps = []
    for b in candidates:
        if not sympy.cancel(xnumel / b).is_integer:
            continue
        f = simplify_in_domain(rnumel * b * FloorDiv(X, b) + b * R + sympy.Mod(X, b), domain)
        if not any(same_index(f, m) for m in maps):
            maps.append(f)
    return maps


def covers_domain(index: sympy.Expr, domain: Sequence[sympy.Expr]) -> bool:
    """True when ``index`` takes every value of [0, numel(domain)) exactly once over the domain."""
    if len(domain) == 1:
        return same_index(index, X)
    return any(same_index(index, f) for f in flat_maps(domain, [index]))
