"""``x ** c`` for the constant exponents that torch itself computes by multiplication.

torch's pow kernels (CPU and CUDA) special-case these exponents: ``x*x``,
``x*x*x``, ``1/x``, ``1/(x*x)``; computing them the same way gives eager's bits
and no ``libdevice.pow`` call per element (GPT-2's tanh-GELU cubes its input).
For integers only the positive ones apply: multiplication wraps around exactly
as torch's integer pow does, and torch refuses negative integer powers.
The decomposition table (aten level) and the dialect's canonicalization (IR
level) both read this table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

V = TypeVar("V")

# exponent -> how to build x ** exponent from x, a multiply and a reciprocal
PRODUCTS: dict[int, Callable[[V, Callable[[V, V], V], Callable[[V], V]], V]] = {
    1: lambda x, mul, reciprocal: x,
    2: lambda x, mul, reciprocal: mul(x, x),
    3: lambda x, mul, reciprocal: mul(mul(x, x), x),
    -1: lambda x, mul, reciprocal: reciprocal(x),
    -2: lambda x, mul, reciprocal: reciprocal(mul(x, x)),
}


def as_products(exponent: object, is_float: bool) -> Callable | None:
    """The rule for ``x ** exponent``, or None when pow must stay (other exponents, bool exponents,
    negative or float exponents of integers)."""
    if isinstance(exponent, bool) or not isinstance(exponent, (int, float)) or exponent != int(exponent):
        return None
    rule = PRODUCTS.get(int(exponent))
    if rule is None or (not is_float and (exponent < 0 or isinstance(exponent, float))):
        return None  # an integer tensor to a float power is a float tensor
    return rule
