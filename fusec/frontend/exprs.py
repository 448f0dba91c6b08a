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
    args = e.args
    if isinstance(e, sympy.Add):
        return sympy.Add(*map(int_expr, args))
    if isinstance(e, sympy.Mul):
        if any(a.is_Rational and not a.is_Integer for a in args):
            raise UnsupportedExpr(f"non-integer coefficient in {e}")
        return sympy.Mul(*map(int_expr, args))
    if isinstance(e, sympy.Pow) or _is(e, "PowByNatural"):
        base, exp = args
        if not (exp.is_Integer and exp >= 0):
            raise UnsupportedExpr(f"power with exponent {exp} in {e}")
        return int_expr(base) ** int(exp)
    if _is(e, "FloorDiv", "CleanDiv"):
        return shapes.FloorDiv(int_expr(args[0]), int_expr(args[1]))
    if _is(e, "CeilDiv"):
        a, b = map(int_expr, args)
        return shapes.FloorDiv(a + b - 1, b)
    if _is(e, "ModularIndexing"):
        base, divisor, modulus = map(int_expr, args)
        return sympy.Mod(shapes.FloorDiv(base, divisor), modulus)
    if isinstance(e, sympy.Mod) or _is(e, "Mod", "PythonMod"):
        return sympy.Mod(int_expr(args[0]), int_expr(args[1]))
    if isinstance(e, sympy.Max) or _is(e, "Max"):
        return sympy.Max(*map(int_expr, args))
    if isinstance(e, sympy.Min) or _is(e, "Min"):
        return sympy.Min(*map(int_expr, args))
    if _is(e, "Identity"):
        return int_expr(args[0])
    if _is(e, "CeilToInt", "FloorToInt", "TruncToInt") and _is(args[0], "IntTrueDiv"):
        a, b = map(int_expr, args[0].args)
        return shapes.FloorDiv(a + b - 1, b) if _is(e, "CeilToInt") else shapes.FloorDiv(a, b)
    raise UnsupportedExpr(f"cannot write the size expression {e} ({type(e).__name__}) in fusec's form")


def check_printable(e: sympy.Expr) -> sympy.Expr:
    """``e`` itself, once its text form is known to exist."""
    try:
        shapes.print_expr(e)
    except ValueError as err:
        raise UnsupportedExpr(str(err)) from None
    return e


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
