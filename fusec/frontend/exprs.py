"""Dynamo's size expressions (sympy with torch's own functions) -> fusec.base.shapes expressions.

Dynamo's ShapeEnv writes sizes with ``torch.utils._sympy.functions``
(FloorDiv, ModularIndexing, CleanDiv, PythonMod, Max, ...); fusec's text form
knows ``floordiv``, ``mod``, ``max``, ``min`` and ``pow``.  Symbols keep the
ShapeEnv's names (s0, s27, ...); they are rebuilt with fusec's assumptions so
that an expression equals the one parsed back from the printed IR.
"""

from __future__ import annotations

import sys

import sympy
import torch.utils._sympy.functions as TF

from fusec.base import shapes


class UnsupportedExpr(ValueError):
    """A size expression fusec's text form cannot write (the message names it)."""


def _fn(name: str) -> type | None:
    """A class of torch.utils._sympy.functions, or None where this torch lacks it."""
    return getattr(TF, name, None)


def _is(e: sympy.Basic, *names: str) -> bool:
    classes = tuple(c for c in map(_fn, names) if c is not None)
    return bool(classes) and isinstance(e, classes)


def int_expr(e: sympy.Basic) -> sympy.Expr:
    """An integer size expression in fusec's terms; raises UnsupportedExpr."""
    if isinstance(e, bool) or e in (sympy.true, sympy.false):
        raise UnsupportedExpr(f"boolean {e} where a size was expected")
    if isinstance(e, int):
        return sympy.Integer(e)
    if e.is_Integer:
        return sympy.Integer(int(e))
    if e.is_Symbol:
        return shapes.symbol(e.name)
    for matches, convert in _CONVERTERS:
        if matches(e):
            return convert(e, *e.args)
    raise UnsupportedExpr(f"cannot write the size expression {e} ({type(e).__name__}) in fusec's form")


def _mul(e, *args):
    if any(a.is_Rational and not a.is_Integer for a in args):
        raise UnsupportedExpr(f"non-integer coefficient in {e}")
    return sympy.Mul(*map(int_expr, args))


def _pow(e, base, exp):
    if not (exp.is_Integer and exp >= 0):
        raise UnsupportedExpr(f"power with exponent {exp} in {e}")
    return int_expr(base) ** int(exp)


def _rounded_division(e, quotient):
    a, b = map(int_expr, quotient.args)
    return shapes.FloorDiv(a + b - 1, b) if _is(e, "CeilToInt") else shapes.FloorDiv(a, b)


# (is it this kind of expression, its fusec form from (e, *e.args)), tried in order.
_CONVERTERS = (
    (lambda e: isinstance(e, sympy.Add), lambda e, *a: sympy.Add(*map(int_expr, a))),
    (lambda e: isinstance(e, sympy.Mul), _mul),
    (lambda e: isinstance(e, sympy.Pow) or _is(e, "PowByNatural"), _pow),
    (lambda e: _is(e, "FloorDiv", "CleanDiv") or isinstance(e, shapes.FloorDiv),  # torch's, or already fusec's
     lambda e, a, b: shapes.FloorDiv(int_expr(a), int_expr(b))),
    (lambda e: _is(e, "CeilDiv"), lambda e, a, b: shapes.FloorDiv(int_expr(a) + int_expr(b) - 1, int_expr(b))),
    (lambda e: _is(e, "ModularIndexing"),
     lambda e, base, div, mod: shapes.Mod(shapes.FloorDiv(int_expr(base), int_expr(div)), int_expr(mod))),
    (lambda e: isinstance(e, sympy.Mod) or _is(e, "Mod", "PythonMod"), lambda e, a, b: shapes.Mod(int_expr(a), int_expr(b))),
    (lambda e: isinstance(e, sympy.Max) or _is(e, "Max"), lambda e, *a: sympy.Max(*map(int_expr, a))),
    (lambda e: isinstance(e, sympy.Min) or _is(e, "Min"), lambda e, *a: sympy.Min(*map(int_expr, a))),
    (lambda e: _is(e, "Identity"), lambda e, a: int_expr(a)),
    (lambda e: _is(e, "CeilToInt", "FloorToInt", "TruncToInt") and _is(e.args[0], "IntTrueDiv"),
     lambda e, q: _rounded_division(e, q)),
)


def check_printable(e: sympy.Expr) -> sympy.Expr:
    """``e`` itself, once its text form is known to exist."""
    try:
        shapes.print_expr(e)
    except ValueError as err:
        raise UnsupportedExpr(str(err)) from None
    return e


def backed_hints(shape_env) -> dict:
    """The ShapeEnv's example value of each backed symbol (``backed_var_to_val``; ``var_to_val`` in a torch
    without it, which in a newer torch is a deprecated alias)."""
    table = getattr(shape_env, "backed_var_to_val", None)
    return shape_env.var_to_val if table is None else table


def symbol_bounds(value_range) -> tuple[int, int | None]:
    """(lower, upper or None) from a ShapeEnv ValueRanges; sizes are never negative."""
    lower, upper = value_range.lower, value_range.upper
    low = int(lower) if _finite(lower) else 0
    high = int(upper) if _finite(upper) else None
    if high is not None and high >= sys.maxsize - 1:  # torch's stand-in for "no bound"
        high = None
    return max(low, 0), high


def _finite(v) -> bool:
    try:
        return bool(sympy.sympify(v).is_finite) and sympy.sympify(v).is_Integer
    except (TypeError, sympy.SympifyError):
        return False
