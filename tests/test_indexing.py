"""fusec.base.indexing: the canonical forms it promises, and a property test of view folding against torch."""

import math

import numpy as np
import pytest
import sympy
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from xdsl.ir import Block

from fusec.base import indexing, shapes
from fusec.base.shapes import parse_expr, print_expr
from fusec.dialects import fusec as F
from fusec.passes.kernel_builder import storage_offset, view_source

X, R = shapes.index_symbol("x"), shapes.index_symbol("r")
S0, S1, S2 = (shapes.size_symbol(f"s{i}") for i in range(3))


@pytest.mark.parametrize(("text", "upper", "want"), [
    ("256*floordiv(x, 196608) + mod(floordiv(x, 768), 256)", {X: 786432}, "floordiv(x, 768)"),
    ("1536*floordiv(r + 128*x, 196608) + mod(x, 128) + 128*mod(floordiv(r + 128*x, 16384), 12)", {R: 128}, "x"),
    ("a*floordiv(x, a) + mod(x, a)", {}, "x"),
    ("s1*floordiv(x, s1) + mod(x, s1)", {}, "x"),
    ("floordiv(floordiv(x, 4), 8)", {}, "floordiv(x, 32)"),
    ("floordiv(floordiv(x, s0), s1)", {}, "floordiv(x, s0*s1)"),
    ("floordiv(mod(x, 64), 8)", {}, "mod(floordiv(x, 8), 8)"),
    ("mod(mod(x, 64), 8)", {}, "mod(x, 8)"),
    ("floordiv(7*x + 3, 7)", {}, "x"),
    ("mod(7*x + 3, 7)", {}, "3"),
    ("floordiv(r + s1*x, s1)", {R: S1}, "x"),
    ("mod(r + s1*x, s1)", {R: S1}, "r"),
    ("mod(x, 512)", {X: 512}, "x"),
    ("floordiv(x, 512)", {X: 512}, "0"),
    ("mod(floordiv(x, s1), s0)", {X: S0 * S1}, "floordiv(x, s1)"),
    ("s1*mod(floordiv(x, s1), s0) + mod(x, s1)", {X: S0 * S1}, "x"),
    ("s0*s1*floordiv(x, s0*s1) + s1*mod(floordiv(x, s1), s0) + mod(x, s1)", {}, "x"),
    ("mod(floordiv(x, 4), 8)", {}, "mod(floordiv(x, 4), 8)"),  # already canonical: a middle digit stays
    # digits of a base that is a sum: expansion splits (2*s0 - 1)*d into 2*s0*d - d (BEiT's relative positions)
    ("(2*s0 - 1)*(2*s0 - 1)*floordiv(x, (2*s0 - 1)*(2*s0 - 1)) + (2*s0 - 1)*mod(floordiv(x, 2*s0 - 1), 2*s0 - 1)"
     " + mod(x, 2*s0 - 1)", {}, "x"),
    ("(2*s0 - 1)*mod(floordiv(x, 2*s0 - 1), 2*s0 - 1) + mod(x, 2*s0 - 1)", {}, "mod(x, 4*pow(s0, 2) + 1 - 4*s0)"),
    ("mod((s0 + 1)*floordiv(x, s0 + 1) + mod(x, s0 + 1), 8)", {}, "mod(x, 8)"),  # merged inside a mod too
])
def test_canonical_forms(text, upper, want):
    a = shapes.size_symbol("a")
    e = parse_expr(text).subs(shapes.symbol("a"), a)
    assert print_expr(indexing.simplify(e, upper)) == want


def test_composed_views_of_a_symbolic_base_stay_small():
    """Each view of a chain folds its reader's index into its own: an index left unmerged is nested whole in the next
    one's digits, and BEiT's relative-position gathers under dynamic=True grew six-fold per view (400,000 operations
    after five, minutes of sympy); merged, every step is x again."""
    base = 2 * S0 - 1
    index = X
    for _ in range(6):  # a [base, base] view of the flat index, read back flat
        index = indexing.simplify(base * indexing.simplify(shapes.FloorDiv(index, base), {X: base * base * 4})
                                  + shapes.Mod(index, base), {X: base * base * 4})
        assert index == X


def test_unproved_facts_keep_the_expression():
    """Without a bound on x, or with a divisor sympy cannot prove positive, nothing is dropped."""
    assert print_expr(indexing.simplify(parse_expr("mod(x, 512)"))) == "mod(x, 512)"
    assert print_expr(indexing.simplify(parse_expr("floordiv(x, s0 - 1)"), {X: S0})) == "floordiv(x, s0 - 1)"
    assert print_expr(indexing.simplify(parse_expr("mod(r + 128*x, 128)"), {R: 129})) == "mod(r, 128)"


def test_size_symbols_are_never_replaced_by_values():
    e = indexing.simplify(parse_expr("s0*floordiv(x, s0) + mod(x, s0)"), {X: 4 * S0})
    assert e == X
    assert indexing.simplify(parse_expr("mod(x, s0)"), {X: S0}) == X


def test_bounds_are_symbolic():
    lo, hi = indexing.bounds(parse_expr("floordiv(x, s1)"), {X: S0 * S1})
    assert lo == 0 and sympy.simplify(hi - (S0 * S1 - 1) / S1) == 0
    assert indexing.proves_below(parse_expr("floordiv(x, s1)"), S0, {X: S0 * S1})
    assert not indexing.proves_below(parse_expr("floordiv(x, s1)"), S0 - 1, {X: S0 * S1})


# ---------------------------------------------------------------- property: view chains against torch

# A tensor is a list of dims, each a list of atoms (a prime, a size symbol or a sliced extent); reshapes regroup atoms.
ATOMS = [2, 3, 5, S0, S1]
SYMBOL_VALUES = [{S0: 2, S1: 3, S2: 2}, {S0: 3, S1: 2, S2: 4}]


def _extent(dim) -> sympy.Expr:
    return sympy.Mul(*dim) if dim else sympy.Integer(1)


def _tensor_type(dims) -> F.TensorType:
    return F.TensorType([_extent(d) for d in dims], F.F32)


@st.composite
def view_chains(draw, symbolic: bool, ops=("reshape", "permute", "expand", "slice")):
    atoms = ATOMS if symbolic else ATOMS[:3]
    flat = draw(st.lists(st.sampled_from(atoms), min_size=1, max_size=4))
    dims = [[a] for a in flat]
    steps = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(ops))
        if kind == "reshape":
            dims = _regroup(draw, [a for d in dims for a in d])
            steps.append(("reshape", dims))
        elif kind == "permute" and len(dims) > 1:
            perm = draw(st.permutations(range(len(dims))))
            dims = [dims[p] for p in perm]
            steps.append(("permute", list(perm), dims))
        elif kind == "expand":
            at = draw(st.integers(0, len(dims)))
            size = draw(st.sampled_from([2, 3, S2] if symbolic else [2, 3]))
            dims = dims[:at] + [[]] + dims[at:]
            steps.append(("reshape", dims))
            dims = dims[:at] + [[size]] + dims[at + 1:]
            steps.append(("expand", dims))
        elif kind == "slice":
            d = draw(st.integers(0, len(dims) - 1))
            extent = _extent(dims[d])
            if extent.is_Integer:
                if extent < 2:
                    continue
                start = draw(st.integers(0, int(extent) - 1))
                step = draw(st.integers(1, 3))
                size = sympy.Integer(math.ceil((int(extent) - start) / step))
            else:  # a symbolic extent drops its first element (all symbol values are >= 2)
                start, step, size = 1, 1, extent - 1
            dims = dims[:d] + [[size]] + dims[d + 1:]
            steps.append(("slice", d, start, step, dims))
    return flat, steps, dims


def _regroup(draw, flat) -> list[list]:
    """Contiguous runs of atoms as dims, with size-1 dims sprinkled in."""
    cuts = sorted(draw(st.sets(st.integers(1, len(flat) - 1), max_size=len(flat) - 1))) if len(flat) > 1 else []
    bounds = [0, *cuts, len(flat)]
    dims = [flat[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    if draw(st.booleans()):
        dims.insert(draw(st.integers(0, len(dims))), [])
    return dims


def _fold(flat, steps, kept: int | None = None):
    """The load offset form-kernels builds for the chain's result (x over it, or x over ``kept`` dims and r over the rest)."""
    block = Block(arg_types=[_tensor_type([[a] for a in flat])])
    value = block.args[0]
    for step in steps:
        out = _tensor_type(step[-1])
        if step[0] == "reshape":
            op = F.ReshapeOp(value, out)
        elif step[0] == "permute":
            op = F.PermuteOp(value, step[1], out)
        elif step[0] == "expand":
            op = F.ExpandOp(value, out)
        else:
            op = F.SliceOp(value, step[1], step[2], step[3], out)
        block.add_op(op)
        value = op.result
    dims = value.type.dims
    if kept is None:
        upper = {X: shapes.numel(dims)}
        idx = shapes.flat_to_dims(X, dims)
    else:
        upper = {X: shapes.numel(dims[:kept]), R: shapes.numel(dims[kept:])}
        idx = shapes.flat_to_dims(X, dims[:kept]) + shapes.flat_to_dims(R, dims[kept:])
    source, idx = view_source(value, idx, upper)
    assert source is block.args[0]
    return storage_offset(source.type, idx, upper), dims


def _torch_chain(flat, steps, env) -> torch.Tensor:
    values = [int(sympy.sympify(a).subs(env)) for a in flat]
    t = torch.arange(math.prod(values)).reshape(values)
    for step in steps:
        sizes = [int(_extent(d).subs(env)) for d in step[-1]]
        if step[0] == "reshape":
            t = t.reshape(sizes)
        elif step[0] == "permute":
            t = t.permute(step[1])
        elif step[0] == "expand":
            t = t.expand(sizes)
        else:
            t = t[(slice(None),) * step[1] + (slice(step[2], None, step[3]),)]
    return t


def _evaluate(offset: sympy.Expr, env, n: int, rnumel: int | None = None) -> np.ndarray:
    fn = sympy.lambdify([X, R], offset.subs(env), modules=[{"FloorDiv": np.floor_divide, "Mod": np.mod}, "numpy"])
    if rnumel is None:
        xs, rs = np.arange(n), np.zeros(n, dtype=np.int64)
    else:
        xs, rs = np.arange(n) // rnumel, np.arange(n) % rnumel
    return np.broadcast_to(np.asarray(fn(xs, rs), dtype=np.int64), (n,))


PROPERTY = settings(derandomize=True, max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.slow
@PROPERTY
@given(chain=view_chains(symbolic=False))
def test_folded_views_read_what_torch_reads_static(chain):
    flat, steps, final = chain
    offset, _ = _fold(flat, steps)
    want = _torch_chain(flat, steps, {}).reshape(-1).numpy()
    assert np.array_equal(_evaluate(offset, {}, want.size), want), print_expr(offset)


@pytest.mark.slow
@PROPERTY
@given(chain=view_chains(symbolic=True))
def test_folded_views_read_what_torch_reads_symbolic(chain):
    flat, steps, final = chain
    offset, _ = _fold(flat, steps)
    for env in SYMBOL_VALUES:
        want = _torch_chain(flat, steps, env).reshape(-1).numpy()
        assert np.array_equal(_evaluate(offset, env, want.size), want), print_expr(offset)


@pytest.mark.slow
@PROPERTY
@given(chain=view_chains(symbolic=True, ops=("reshape",)))
def test_a_contiguous_access_is_exactly_x(chain):
    flat, steps, final = chain
    offset, _ = _fold(flat, steps)
    assert offset == X, print_expr(offset)


@pytest.mark.slow
@PROPERTY
@given(chain=view_chains(symbolic=True, ops=("reshape",)), data=st.data())
def test_a_contiguous_reduction_access_is_r_plus_n_x(chain, data):
    flat, steps, final = chain
    rank = len(final)
    kept = data.draw(st.integers(0, rank))
    offset, dims = _fold(flat, steps, kept)
    xnumel, rnumel = shapes.numel(dims[:kept]), shapes.numel(dims[kept:])
    # r + rnumel*x, or what it is when a domain has one point (x or r is then 0)
    assert offset == indexing.simplify(R + rnumel * X, {X: xnumel, R: rnumel}), print_expr(offset)


@pytest.mark.slow
@PROPERTY
@given(chain=view_chains(symbolic=True), data=st.data())
def test_folded_reduction_views_read_what_torch_reads(chain, data):
    flat, steps, final = chain
    rank = len(final)
    kept = data.draw(st.integers(0, rank))
    offset, dims = _fold(flat, steps, kept)
    for env in SYMBOL_VALUES[:1]:
        want = _torch_chain(flat, steps, env).reshape(-1).numpy()
        rnumel = int(shapes.numel(dims[kept:]).subs(env))
        assert np.array_equal(_evaluate(offset, env, want.size, rnumel), want), print_expr(offset)


# ---------------------------------------------------------------- property: random expressions keep their values

XN, RN = 12, 6  # the bounds of x and r in the expression property


@st.composite
def index_exprs(draw, depth: int = 3, symbolic: bool = False):
    """Sums of products of x, r, constants, floordiv and mod by positive divisors (what view folding builds)."""
    sizes = [2, 3, 4, 6, 8, 12, 36] + ([S0, 2 * S0, 3 * S0] if symbolic else [])
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from([X, R, X, R, sympy.Integer(draw(st.integers(0, 5)))] + ([S0] if symbolic else [])))
    kind = draw(st.sampled_from(["add", "scale", "floordiv", "mod"]))
    if kind == "add":
        return draw(index_exprs(depth - 1, symbolic)) + draw(index_exprs(depth - 1, symbolic))
    if kind == "scale":
        return draw(st.sampled_from([1, 2, 3, 6] + ([S0] if symbolic else []))) * draw(index_exprs(depth - 1, symbolic))
    divisor = draw(st.sampled_from(sizes))
    inner = draw(index_exprs(depth - 1, symbolic))
    return shapes.FloorDiv(inner, divisor) if kind == "floordiv" else shapes.Mod(inner, divisor)


def _values(e: sympy.Expr, s0: int, xn: int, rn: int) -> np.ndarray:
    xs, rs = np.meshgrid(np.arange(xn), np.arange(rn), indexing="ij")
    fn = sympy.lambdify([X, R], e.subs(S0, s0), modules=[{"FloorDiv": np.floor_divide, "Mod": np.mod}, "numpy"])
    return np.broadcast_to(fn(xs, rs), xs.shape)


@pytest.mark.slow
@settings(derandomize=True, max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(e=index_exprs())
def test_simplified_expressions_keep_their_values(e):
    simple = indexing.simplify(e, {X: XN, R: RN})
    assert np.array_equal(_values(e, 1, XN, RN), _values(simple, 1, XN, RN)), f"{print_expr(e)} -> {print_expr(simple)}"


@pytest.mark.slow
@settings(derandomize=True, max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(e=index_exprs(symbolic=True))
def test_simplified_symbolic_expressions_keep_their_values(e):
    """Divisors, coefficients and the bound of x over a size symbol: checked for several of its values."""
    simple = indexing.simplify(e, {X: 3 * S0, R: RN})
    for s0 in (1, 2, 5):
        assert np.array_equal(_values(e, s0, 3 * s0, RN), _values(simple, s0, 3 * s0, RN)), \
            f"{print_expr(e)} -> {print_expr(simple)} at s0 = {s0}"


_SIZES = [shapes.symbol("s0"), shapes.symbol("s1")]
_X = shapes.symbol("x")


@st.composite
def _signed_polynomials(draw):
    """A small polynomial, or a ratio by a size symbol, over two size symbols and an iteration variable."""
    terms = draw(st.lists(st.tuples(st.integers(-3, 3), st.integers(0, 2), st.integers(0, 2), st.integers(0, 1)),
                          min_size=1, max_size=4))
    e = sum((c * _SIZES[0] ** a * _SIZES[1] ** b * _X ** k for c, a, b, k in terms), sympy.Integer(0))
    return e / _SIZES[1] if draw(st.booleans()) else e


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_signed_polynomials(), st.booleans())
def test_a_sign_proof_holds_at_every_point(e, strict):
    """What the shifted-coefficient proof claims (sizes >= 1, x >= 0) holds at each point of a grid; it never
    answers where the expression is not a polynomial or a ratio of polynomials in signed-known symbols."""
    claimed = indexing._shifted_sign(e, strict)
    if claimed:
        for s0 in range(1, 5):
            for s1 in range(1, 5):
                for x in range(0, 4):
                    v = e.subs({_SIZES[0]: s0, _SIZES[1]: s1, _X: x})
                    assert (v > 0) if strict else (v >= 0), (e, strict, s0, s1, x, v)


def test_sign_proofs_that_shift_the_sizes():
    s0, s1 = _SIZES
    assert indexing.nonnegative(s0 * s1 - s0 - s1 + 1)  # (s0 - 1)(s1 - 1)
    assert indexing.positive(s0 * s1 - s0 + 1)
    assert indexing.nonnegative((s0 * s1 - 1) / s1)
    assert not indexing.positive(s0 - 1) and not indexing.nonnegative(s0 - s1)
    assert indexing._shifted_sign(shapes.FloorDiv(s0, 2) - 1, False) is None  # sympy's assumptions decide those
