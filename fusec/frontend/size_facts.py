"""Equalities of sizes that Dynamo guards, as rewrites the importer writes every size through.

A graph break gives tensors that eager relates separate size symbols.  A causal language model's loss graph
receives the logits, ``[s88, s3, V]``, and the labels, ``[s97, s38]``, and flattens both: that their rows agree is
only Dynamo's guard ``Eq(s3*s88, s38*s97)`` (cross-entropy checked it while tracing).  Unknown to fusec, no
broadcast between them is provable, and the loss's backward ran as ten torch calls where the static graph is one
kernel.  Each such guard becomes a fact ``s38*s97 = s3*s88`` on the graph (``fusec.size_fact``): sizes are written
in its right side's form, verifiers apply it, executors check it on the inputs.
"""

from __future__ import annotations

from collections.abc import Iterable

import sympy

from fusec.base import shapes
from fusec.frontend.exprs import UnsupportedExpr, int_expr


def equality_facts(shape_env, bound: Iterable[str]) -> list[tuple[sympy.Expr, sympy.Expr]]:
    """Dynamo's equality guards between sizes, each as a rewrite (old form -> new form) whose new form uses only
    ``bound`` symbols (those the graph's inputs give), in the order Dynamo made them; each is written in the
    terms of those before it, and one that they already decide is left out.  An equality that fixes one symbol's
    value rewrites that symbol (transformers' ``logits_to_keep=0`` under dynamic=True is a SymInt ``s55`` that only
    the guard ``Eq(768*s55 + 768*s70, 768*s70)`` pins to 0; kept, the logits' length ``s55 + s70`` is not ``s70``)."""
    if shape_env is None:
        return []
    bound = set(bound)
    replace = getattr(shape_env, "replace", lambda e: e)  # Dynamo's own symbol -> expression replacements
    facts: list[tuple[sympy.Expr, sympy.Expr]] = []
    for guard in getattr(shape_env, "guards", ()):
        e = getattr(guard, "expr", None)
        if not isinstance(e, sympy.Eq):
            continue
        try:
            a, b = (shapes.apply_facts(int_expr(replace(side)), facts) for side in e.args)
        except (UnsupportedExpr, TypeError):
            continue
        if shapes.provably_equal(a, b):
            continue
        rule = _fixed_value(a - b) or _orient(a, b, bound)
        if rule is not None:
            facts.append(rule)
    return facts


def _fixed_value(difference: sympy.Expr) -> tuple[sympy.Expr, sympy.Expr] | None:
    """(symbol, its integer value) where ``difference == 0`` is linear in one symbol and fixes it."""
    difference = sympy.expand(difference)
    symbols = difference.free_symbols
    if len(symbols) != 1 or not difference.is_polynomial():
        return None
    (symbol,) = symbols
    poly = sympy.Poly(difference, symbol)
    if poly.degree() != 1:
        return None
    slope, offset = poly.all_coeffs()
    value = -offset / slope
    return (symbol, sympy.Integer(value)) if value.is_Integer else None


def _orient(a: sympy.Expr, b: sympy.Expr, bound: set[str]) -> tuple[sympy.Expr, sympy.Expr] | None:
    """The rewrite an equality ``a == b`` makes: never of a lone symbol (an input may be where it comes from), into a
    form over bound symbols; a symbol rather than an expression, else the shorter form, else the one whose symbols
    sort first."""
    candidates = []
    for old, new in ((a, b), (b, a)):
        symbols = shapes.free_size_symbols([new])
        if old.is_Symbol or not shapes.free_size_symbols([old]) or not symbols or not symbols <= bound:
            continue
        key = sorted(symbols, key=shapes.natural_key)
        candidates.append(((not new.is_Symbol, sympy.count_ops(new), [shapes.natural_key(s) for s in key]), old, new))
    if not candidates:
        return None
    _, old, new = min(candidates, key=lambda c: c[0])
    return old, new
