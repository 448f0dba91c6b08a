"""liveness.provably_at_most: proofs that one byte count never exceeds another, for every size the bounds allow."""

import itertools

import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from fusec.analysis.liveness import provably_at_most
from fusec.base import shapes

S, B, D = (shapes.symbol(n) for n in ("s100", "s99", "d0"))
LOWER = {"s100": 33, "s99": 2, "d0": 17}


def test_comparisons_over_the_symbols_bounds():
    assert provably_at_most(sympy.Integer(3), sympy.Integer(4), {}) and not provably_at_most(sympy.Integer(5), sympy.Integer(4), {})
    assert provably_at_most(S, 2 * S, {}) and not provably_at_most(2 * S, S, {})
    assert provably_at_most(S + 5, 2 * S, {"s100": 5}) and not provably_at_most(S + 5, 2 * S, {"s100": 4})
    # ResNet-18 under dynamic=True: a [s99, 64, d0, d0] feature map outweighs 292 KiB of weights from d0 >= 17 on
    assert provably_at_most(128 * D**2 * B - 36 * D * B + 73728, 256 * D**2 * B, LOWER)
    assert not provably_at_most(128 * D**2 * B + 294912, 256 * D**2 * B, LOWER)  # false at d0 = 17, s99 = 2
    assert not provably_at_most(shapes.FloorDiv(S, 2), S, {})  # not a polynomial: not proved, though true


_monomials = [B * S**2, B * D**2, B * S * D, S, D, sympy.Integer(1)]
_polynomial = st.lists(st.integers(min_value=-50, max_value=700), min_size=len(_monomials), max_size=len(_monomials)).map(
    lambda cs: sympy.Add(*[c * m for c, m in zip(cs, _monomials, strict=True)]))


@settings(max_examples=200, deadline=None)
@given(small=_polynomial, large=_polynomial)
def test_every_proof_holds_at_every_size(small, large):
    """Sound: whatever it proves holds at the bounds, near them and far above."""
    if not provably_at_most(small, large, LOWER):
        return
    for s100, s99, d0 in itertools.product((33, 34, 40, 224, 1001), (2, 3, 17), (17, 18, 30, 112, 500)):
        env = {"s100": s100, "s99": s99, "d0": d0}
        assert shapes.evaluate(small, env) <= shapes.evaluate(large, env), (small, large, env)
