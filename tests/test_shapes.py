import pytest
import sympy

from fusec.base import shapes
from fusec.base.shapes import ExprSyntaxError, parse_expr, print_expr

X = shapes.index_symbol("x")


@pytest.mark.parametrize("text", ["512*s0 + 1", "floordiv(x, 512)", "mod(x, 512) + 512*mod(floordiv(x, 512), s0)",
                                  "max(2, s0) - 3*s1", "-s0 - 2", "s1*pow(s0, 2)", "r + 512*x", "min(s0, s1)"])
def test_text_form_round_trips(text):
    e = parse_expr(text)
    assert print_expr(e) == text
    assert parse_expr(print_expr(e)) == e


def test_parse_errors_name_the_position():
    with pytest.raises(ExprSyntaxError) as err:
        parse_expr("s0 + * 2")
    assert err.value.position == 5
    with pytest.raises(ExprSyntaxError, match="floordiv"):
        parse_expr("floordiv(x)")


def test_floordiv_pulls_out_whole_multiples():
    s0 = shapes.size_symbol("s0")
    assert shapes.FloorDiv(512 * s0 + X, 512) == s0 + shapes.FloorDiv(X, 512)
    assert shapes.FloorDiv(shapes.FloorDiv(X, 4), 8) == shapes.FloorDiv(X, 32)


def test_broadcast_shapes_is_symbolic():
    s0, s1 = shapes.size_symbol("s0"), shapes.size_symbol("s1")
    assert shapes.broadcast_shapes([s0, 1], [512]) == [s0, 512]
    assert shapes.broadcast_shapes([s0], [s1]) is None  # not provably equal: refuse, never guess
    assert shapes.provably_equal(2 * (s0 + 1), 2 * s0 + 2)


def test_flat_to_dims_of_an_empty_shape_is_all_zero():
    """[5, 0] (a transposed [0, 5]) has no elements: no index is computed, and none divides by a zero stride."""
    x = shapes.index_symbol("x")
    assert shapes.flat_to_dims(x, [5, 0]) == [0, 0]
    assert shapes.flat_to_dims(x, [0, 3, 2]) == [0, 0, 0]


def test_mod_is_fusecs_own_with_cheap_rules():
    """shapes.Mod: a sympy.Mod (isinstance holds) whose evaluation never takes a polynomial gcd."""
    import sympy

    x = shapes.index_symbol("x")
    s0, s1 = shapes.size_symbol("s0"), shapes.size_symbol("s1")
    assert isinstance(shapes.Mod(x, s0), sympy.Mod) and type(parse_expr("mod(x, s0)")) is shapes.Mod
    assert shapes.Mod(6 * s0 + x, 3) == shapes.Mod(x, 3)  # (a*q + b) mod q == b mod q
    assert shapes.Mod(x + s0 * s1, s0) == shapes.Mod(x, s0)
    assert shapes.Mod(x, 1) == 0 and shapes.Mod(s0, s0) == 0 and shapes.Mod(17, 5) == 2
    assert shapes.Mod(shapes.Mod(x, s0), s0) == shapes.Mod(x, s0)
    assert print_expr(shapes.Mod(x, s0 + 1)) == "mod(x, s0 + 1)"
    # survives substitution (xreplace rebuilds it with its own class)
    assert shapes.Mod(x, s0).xreplace({x: 2 * s0 + x}) == shapes.Mod(x, s0)


def test_quotient_divides_like_cancel():
    import sympy

    x = shapes.index_symbol("x")
    s0, s1 = shapes.size_symbol("s0"), shapes.size_symbol("s1")
    assert shapes.quotient(6 * s0 * x + 3 * s0, 3 * s0) == 2 * x + 1
    assert shapes.quotient((s0 + 1) * s1, s0 + 1) == s1  # a factor that is a sum cancels as it is formed
    assert shapes.quotient(s0 * s1 + s0, s1 + 1) == s0  # found by cancel (small enough to try)
    assert not shapes.is_integer_poly(shapes.quotient(x + 1, 2))
    assert shapes.quotient(sympy.Integer(12), sympy.Integer(4)) == 3


def test_a_polynomial_difference_is_decided_by_expansion_alone(monkeypatch):
    """Polynomials are equal exactly when their expansions are: no sympy.simplify (slow; its first call
    imports sympy.physics, 0.2 s of every import); it is still asked about floordiv and mod."""
    s0, s1 = shapes.size_symbol("s0"), shapes.size_symbol("s1")
    asked = []
    real = sympy.simplify
    monkeypatch.setattr(sympy, "simplify", lambda e: asked.append(e) or real(e))
    shapes._provably_zero.cache_clear()
    assert shapes.provably_equal((s0 + 1) ** 2 * s1, s0**2 * s1 + 2 * s0 * s1 + s1)
    assert not shapes.provably_equal(64 * s0 * s1, 64 * s0 * s1 + 1)
    assert not shapes.provably_equal(s0**2, s1**2)
    assert asked == []


@pytest.mark.parametrize("text", [
    "197*s0*floordiv(s1 - 16, 16) + 3", "mod(s0 + 5, 4)", "max(s0, s1 - 300)", "3*s0*s0*s1", "7",
    "floordiv(mod(s1, 7)*s0, 3)", "min(s1, 2*s0) + floordiv(s0, max(s1, 1))", "s0*s1 - s1 + 1",
])
def test_evaluate_compiles_an_expression_and_agrees_with_substitution(text):
    """Sizes are evaluated on every call of a dynamic graph: compiled to Python integer arithmetic once (sympy's
    substitution took ~0.7 ms), with the same value as sympy's exact substitution at every binding tried."""
    e = parse_expr(text)
    for s0 in (1, 2, 7, 16, 33, 1000):
        for s1 in (1, 15, 16, 224, 4097):
            env = {"s0": s0, "s1": s1, "s9": 5}  # a symbol the expression does not use is ignored
            got = shapes.evaluate(e, env)
            assert type(got) is int and got == shapes._evaluate_exactly(e, env), (text, env)


def test_evaluate_names_an_unbound_symbol():
    with pytest.raises(KeyError, match=r"unbound size symbols \['s1'\] in s0 \+ s1"):
        shapes.evaluate(parse_expr("s0 + s1"), {"s0": 3})
