"""The pointwise functions and reductions of the fusec dialect, and the element types they give.

The conversion rules (operands converted to the result's element type, except
the predicates, ``where``'s condition, and an fp32 operand of a 16-bit result,
which computes in fp32) are stated in the module docstring
of ``fusec.dialects.fusec``; the reference interpreter and the lowering apply
them to the tables below.
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy
from xdsl.ir import Attribute

from fusec.base import shapes
from fusec.dialects.attributes import BOOL, I64, TensorType

__all__ = ["POINTWISE_FUNCTIONS", "PREDICATES", "REDUCTIONS", "broadcast_types", "reduction_result_type"]

# name -> arity.  Comparisons and predicates give bool; every other function gives
# the result type, its operands converted to it first ("where" converts its 2nd and 3rd).
POINTWISE_FUNCTIONS: dict[str, int] = {
    **dict.fromkeys(["add", "sub", "mul", "div", "floordiv", "remainder", "pow", "maximum", "minimum",
                     "atan2", "bitwise_and", "bitwise_or", "bitwise_xor", "logical_and", "logical_or",
                     "eq", "ne", "lt", "le", "gt", "ge"], 2),
    **dict.fromkeys(["neg", "abs", "exp", "exp2", "expm1", "log", "log2", "log1p", "sqrt", "rsqrt", "sin", "cos",
                     "tan", "tanh", "sigmoid", "erf", "floor", "ceil", "round", "trunc", "sign", "reciprocal",
                     "relu", "logical_not", "bitwise_not", "isnan", "isinf", "convert", "identity",
                     "asin", "acos", "atan", "sinh", "cosh", "erfc", "signbit"], 1),
    "where": 3,
    # iota: element i of a 1-D result is i (``arange``'s core).  It exists at graph level only:
    # form-kernels folds it into its readers as the index expression itself (a fusec.symbolic over x).
    "iota": 0,
}
PREDICATES = {"eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "logical_and", "logical_or", "logical_not", "signbit"}
REDUCTIONS = ("sum", "prod", "max", "min", "argmax", "argmin", "any", "all")


def reduction_result_type(kind: str, element_type: Attribute) -> Attribute:
    """The element type a reduction gives: i64 for argmax/argmin, i1 for any/all, else its input's."""
    if kind in ("argmax", "argmin"):
        return I64
    return BOOL if kind in ("any", "all") else element_type


def broadcast_types(types: Sequence[TensorType]) -> list[sympy.Expr] | None:
    """The shape the operands broadcast to, or None when it cannot be proved legal."""
    return shapes.broadcast_shapes(*[t.dims for t in types])
