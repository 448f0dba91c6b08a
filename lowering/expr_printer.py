"""Printing sympy index and size expressions as Triton and as host Python code.

Both printers take a ``names`` map from a symbol's name to the identifier the
generated code uses for it (``x`` -> ``xindex``, ``r`` -> ``rindex``, size
symbols -> kernel arguments or launcher locals).  Index expressions are
non-negative, so ``floordiv``/``mod`` print as ``//``/``%`` in both languages
(Triton's integer ``//`` truncates, which equals flooring there).
"""

from __future__ import annotations

from collections.abc import Mapping

import sympy

from fusec.base import shapes


class _Printer:
    """Shared structure; subclasses say how max/min are written."""

    def __init__(self, names: Mapping[str, str]):
        self.names = names

    def expr(self, e: sympy.Basic) -> str:
        e = sympy.sympify(e)
        if e.is_Integer:
            return str(int(e))
        if e.is_Symbol:
            if e.name not in self.names:
                raise KeyError(f"no generated name for size symbol '{e.name}'")
            return self.names[e.name]
        if isinstance(e, sympy.Add):
            terms = e.as_ordered_terms()
            # A positive term first reads better: "s0 - 3", not "-3 + s0" (as fusec.base.shapes prints).
            terms = [t for t in terms if t.as_coeff_Mul()[0] > 0] + [t for t in terms if t.as_coeff_Mul()[0] < 0]
            out = self._factor(terms[0], in_sum=True)
            for t in terms[1:]:
                coeff, rest = t.as_coeff_Mul()
                if coeff < 0:
                    out += " - " + self._term(-t)
                else:
                    out += " + " + self._term(t)
            return out
        if isinstance(e, sympy.Mul):
            return self._term(e)
        if isinstance(e, sympy.Pow) and e.exp.is_Integer and e.exp > 0:
            return "*".join([self._factor(e.base)] * int(e.exp))
        if isinstance(e, shapes.FloorDiv):
            return f"{self._operand(e.args[0])} // {self._operand(e.args[1])}"
        if isinstance(e, sympy.Mod):
            return f"{self._operand(e.args[0])} % {self._operand(e.args[1])}"
        if isinstance(e, (sympy.Max, sympy.Min)):
            return self.extremum(isinstance(e, sympy.Max), [self.expr(a) for a in sorted(e.args, key=sympy.default_sort_key)])
        raise ValueError(f"cannot print {e!r} as generated code")

    def extremum(self, is_max: bool, args: list[str]) -> str:
        raise NotImplementedError

    def _operand(self, f: sympy.Expr) -> str:
        """An operand of ``//`` or ``%``: parenthesised unless a name or a non-negative integer."""
        s = self.expr(f)
        return s if f.is_Symbol or (f.is_Integer and f >= 0) else f"({s})"

    def _term(self, t: sympy.Expr) -> str:
        if not isinstance(t, sympy.Mul):
            return self._factor(t)
        coeff, rest = t.as_coeff_Mul()
        if not coeff.is_Integer:
            raise ValueError(f"non-integer coefficient in {t}")
        parts = [self._factor(f) for f in sympy.Mul.make_args(rest)]
        if coeff == -1:
            return "-" + "*".join(parts)
        if coeff != 1:
            parts.insert(0, str(int(coeff)))
        return "*".join(parts)

    def _factor(self, f: sympy.Expr, in_sum: bool = False) -> str:
        if in_sum:
            coeff = f.as_coeff_Mul()[0]
            if coeff < 0:
                return "-" + self._term(-f)
            return self._term(f)
        s = self.expr(f)
        if isinstance(f, (sympy.Add, shapes.FloorDiv, sympy.Mod)) or (f.is_Integer and f < 0):
            return f"({s})"
        return s


class TritonPrinter(_Printer):
    """Triton code: ``max``/``min`` of index values become ``tl.maximum``/``tl.minimum``."""

    def extremum(self, is_max: bool, args: list[str]) -> str:
        fn = "tl.maximum" if is_max else "tl.minimum"
        out = args[0]
        for a in args[1:]:
            out = f"{fn}({out}, {a})"
        return out


class PythonPrinter(_Printer):
    """Host Python code over int locals."""

    def extremum(self, is_max: bool, args: list[str]) -> str:
        return f"{'max' if is_max else 'min'}({', '.join(args)})"


def triton_expr(e: sympy.Basic, names: Mapping[str, str]) -> str:
    return TritonPrinter(names).expr(e)


def python_expr(e: sympy.Basic, names: Mapping[str, str] | None = None) -> str:
    """Host code for a size expression; size symbols keep their names unless ``names`` maps them."""
    e = sympy.sympify(e)
    mapping = {s.name: s.name for s in e.free_symbols}
    mapping.update(names or {})
    return PythonPrinter(mapping).expr(e)


# ---------------------------------------------------------------- bounds


