"""tile-pointwise keeps the program's meaning: the reference interpreter before and after, random inputs;
the index algebra it rests on, checked point by point."""

import itertools
import random
from pathlib import Path

import pytest
import sympy

from fusec.base import remarks, shapes
from fusec.base.shapes import FloorDiv
from fusec.dialects import fusec as F
from fusec.passes.form_kernels import FormKernels
from fusec.passes.kernel_index import R, X
from fusec.passes.tile_pointwise import TilePointwise, divides, split_x, stride
from fusec.runtime import interpreter
from fusec.testing import apply_passes, assert_same_results, parse, print_ir, random_inputs

FILECHECK = Path(__file__).parents[1] / "filecheck" / "passes" / "tile-pointwise.mlir"
S0, S1 = shapes.size_symbol("s0"), shapes.size_symbol("s1")


def _graph(args: str, results: str, body: str, symbols: str = "s0 in [1, inf], s1 in [1, inf]") -> str:
    lines = "\n".join("    " + line for line in body.strip().splitlines())
    return f"""builtin.module {{
  fusec.graph @g({args}) -> ({results}) symbols({symbols}) {{
{lines}
  }}
}}"""


T = "!fusec.tensor<[{}], {}>"
GRAPHS = {
    # a transpose of an fp16 tensor plus an int64 one, into fp32
    "transpose-mixed-dtypes": _graph(
        "%x : !fusec.tensor<[s0, s1], f16>, %y : !fusec.tensor<[s1, s0], i64>", "!fusec.tensor<[s1, s0], f32>", """
%t = fusec.permute %x [1, 0] : !fusec.tensor<[s0, s1], f16> -> !fusec.tensor<[s1, s0], f16, strides [1, s1]>
%a = fusec.pointwise "add" %t, %y : (!fusec.tensor<[s1, s0], f16, strides [1, s1]>, !fusec.tensor<[s1, s0], i64>) -> !fusec.tensor<[s1, s0], f32>
fusec.output %a : !fusec.tensor<[s1, s0], f32>"""),
    # cat along the last dim: the position in the row is a symbolic value of x
    "cat-last-dim": _graph(
        "%x : !fusec.tensor<[s0, 3], f32>, %y : !fusec.tensor<[s0, 5], f32>",
        "!fusec.tensor<[s0, 8], f32>, !fusec.tensor<[8, s0], f32>", """
%c = fusec.cat %x, %y dim 1 : (!fusec.tensor<[s0, 3], f32>, !fusec.tensor<[s0, 5], f32>) -> !fusec.tensor<[s0, 8], f32>
%t = fusec.permute %c [1, 0] : !fusec.tensor<[s0, 8], f32> -> !fusec.tensor<[8, s0], f32, strides [1, 8]>
%n = fusec.pointwise "neg" %t : (!fusec.tensor<[8, s0], f32, strides [1, 8]>) -> !fusec.tensor<[8, s0], f32>
fusec.output %c, %n : !fusec.tensor<[s0, 8], f32>, !fusec.tensor<[8, s0], f32>"""),
    # an embedding lookup (a load at a run-time offset) added to a transposed tensor
    "embedding-plus-transpose": _graph(
        "%w : !fusec.tensor<[10, s1], f32>, %i : !fusec.tensor<[s0], i64>, %b : !fusec.tensor<[s1, s0], f32>",
        "!fusec.tensor<[s0, s1], f32>", """
%e = fusec.index %w[%i] dim 0 : !fusec.tensor<[10, s1], f32>, !fusec.tensor<[s0], i64> -> !fusec.tensor<[s0, s1], f32>
%bt = fusec.permute %b [1, 0] : !fusec.tensor<[s1, s0], f32> -> !fusec.tensor<[s0, s1], f32, strides [1, s0]>
%s = fusec.pointwise "add" %e, %bt : (!fusec.tensor<[s0, s1], f32>, !fusec.tensor<[s0, s1], f32, strides [1, s0]>) -> !fusec.tensor<[s0, s1], f32>
fusec.output %s : !fusec.tensor<[s0, s1], f32>"""),
    # a sliced (offset, strided rows) transposed input, broadcast against a column
    "slice-transpose-broadcast": _graph(
        "%x : !fusec.tensor<[s0, 12], f32>, %c : !fusec.tensor<[5, 1], f32>", "!fusec.tensor<[5, s0], f32>", """
%s = fusec.slice %x dim 1 start 2 step 2 : !fusec.tensor<[s0, 12], f32> -> !fusec.tensor<[s0, 5], f32>
%t = fusec.permute %s [1, 0] : !fusec.tensor<[s0, 5], f32> -> !fusec.tensor<[5, s0], f32>
%m = fusec.pointwise "mul" %t, %c : (!fusec.tensor<[5, s0], f32>, !fusec.tensor<[5, 1], f32>) -> !fusec.tensor<[5, s0], f32>
fusec.output %m : !fusec.tensor<[5, s0], f32>"""),
}
# graphs of tile-pointwise.mlir that the pass tiles (the rest stay flat)
TILED_IN_FILECHECK = {"transpose_add", "batched_transpose", "broadcasts", "rotate"}


def _graphs(module) -> list[F.GraphOp]:
    return [op for op in module.walk() if isinstance(op, F.GraphOp)]


def _kernels(graph: F.GraphOp) -> list[F.KernelOp]:
    return [op for op in graph.block.ops if isinstance(op, F.KernelOp)]


def _check_same_meaning(text: str, sizes: list[dict[str, int]]) -> dict[str, list[F.KernelOp]]:
    """Run form-kernels, then tile-pointwise; every graph gives the same results before and after."""
    before = apply_passes(parse(text), FormKernels())
    after = apply_passes(parse(print_ir(before)), TilePointwise())
    for g_before, g_after in zip(_graphs(before), _graphs(after), strict=True):
        if not set(g_before.declared_symbols) <= shapes.free_size_symbols(d for a in g_before.block.args for d in a.type.dims):
            continue  # a size only a hand-written kernel knows: nothing binds it
        for seed, env in enumerate(sizes):
            used = {s: v for s, v in env.items() if s in g_before.declared_symbols}
            inputs = random_inputs(g_before, used, seed=seed)
            assert_same_results(interpreter.run(g_before, inputs), interpreter.run(g_after, inputs))
    return {g.sym_name.data: _kernels(g) for g in _graphs(after)}


@pytest.mark.parametrize("name", list(GRAPHS))
def test_tiling_keeps_the_results(name):
    kernels = _check_same_meaning(GRAPHS[name], [{"s0": 1, "s1": 1}, {"s0": 7, "s1": 3}, {"s0": 17, "s1": 33}])
    assert any(k.is_tiled for k in kernels["g"]), print_ir(kernels["g"][0])


def test_the_filecheck_graphs_keep_their_results():
    kernels = _check_same_meaning(FILECHECK.read_text(), [{"s0": 3, "s1": 5, "s2": 7}, {"s0": 16, "s1": 9, "s2": 144}])
    tiled = {name for name, ks in kernels.items() if any(k.is_tiled for k in ks)}
    assert tiled == TILED_IN_FILECHECK


def test_a_tiled_kernel_reads_as_before_and_the_pass_is_idempotent():
    module = apply_passes(parse(FILECHECK.read_text()), FormKernels(), TilePointwise())
    text = print_ir(module)
    assert "[s1, s0] tiled (%x, %y)" in text
    assert print_ir(parse(text)) == text
    assert print_ir(apply_passes(parse(text), TilePointwise())) == text


def test_remarks_name_the_strided_load_and_why():
    module = apply_passes(parse(FILECHECK.read_text()), FormKernels())
    with remarks.collect() as log:
        apply_passes(module, TilePointwise())
    assert [(r.code, r.subjects) for r in log.remarks] == [("tile-declined", ("@fusec_poi_neg_7",)),
                                                           ("tile-declined", ("@hand_strided",))]
    assert "s0 does not provably divide xnumel = s2" in log.remarks[1].message


# ---------------------------------------------------------------- the index algebra


def test_stride_between_wrap_points():
    assert stride(S1 * shapes.Mod(X, S0) + FloorDiv(X, S0), X) == S1
    assert stride(shapes.Mod(FloorDiv(X, 4), 3) + 12 * FloorDiv(X, 12), X) == 0
    assert stride(2 * X + 1, X) == 2
    assert stride(X * X, X) is None
    assert stride(S0 * R + X, R) == S0


def test_divides_on_symbolic_sizes():
    assert divides(S0, 4 * S0 * S1) and divides(4, 12 * S0) and divides(S0 * S1, S0 * S1)
    assert not divides(S1, S0 * S1 + 1) and not divides(8, 4 * S0)


def _random_index(rnd: random.Random) -> tuple[sympy.Expr, list[int]]:
    """A view's index over a flat x: a random permute (and sometimes a step) of a random 3-d shape."""
    dims = [rnd.randint(1, 4) for _ in range(3)]
    perm = rnd.sample(range(3), 3)
    out = [dims[p] for p in perm]
    strides = shapes.contiguous_strides(dims)
    step = rnd.choice([1, 1, 2])
    idx = shapes.flat_to_dims(X, out)
    return sympy.Add(*[i * strides[p] * step for i, p in zip(idx, perm, strict=True)]), out


@pytest.mark.parametrize("seed", range(40))
def test_split_x_is_the_same_index_at_every_point(seed):
    rnd = random.Random(seed)
    e, out = _random_index(rnd)
    n = shapes.numel(out)
    for w in {out[-1], out[-1] * out[-2], out[0], 1, n}:
        if not divides(sympy.Integer(w), n):
            continue
        split = split_x(e, sympy.Integer(w), [sympy.Integer(n // w), sympy.Integer(w)])
        for y, c in itertools.product(range(n // w), range(w)):
            want = interpreter.evaluate_index(e, {"x": w * y + c})
            assert interpreter.evaluate_index(split, {"x": y, "r": c}) == want, (e, w, split)


def test_a_broadcast_alone_is_not_worth_a_tile_of_mostly_idle_lanes():
    rgb = _graph("%x : !fusec.tensor<[s0, 3], f32>, %m : !fusec.tensor<[3], f32>", "!fusec.tensor<[s0, 3], f32>", """
%y = fusec.pointwise "sub" %x, %m : (!fusec.tensor<[s0, 3], f32>, !fusec.tensor<[3], f32>) -> !fusec.tensor<[s0, 3], f32>
fusec.output %y : !fusec.tensor<[s0, 3], f32>""", "s0 in [1, inf]")
    with remarks.collect() as log:
        (kernel,) = _check_same_meaning(rgb, [{"s0": 5}])["g"]
    assert not kernel.is_tiled and not log.remarks
    # a transpose of the same shape is worth it: its loads coalesce
    transposed = rgb.replace("%x : !fusec.tensor<[s0, 3], f32>", "%x : !fusec.tensor<[3, s0], f32>").replace(
        '%y = fusec.pointwise "sub" %x,', '%t = fusec.permute %x [1, 0] : !fusec.tensor<[3, s0], f32> -> !fusec.tensor<[s0, 3], f32, strides [1, s0]>\n'
        '    %y = fusec.pointwise "sub" %t,').replace('(!fusec.tensor<[s0, 3], f32>, !fusec.tensor<[3], f32>)',
                                                 '(!fusec.tensor<[s0, 3], f32, strides [1, s0]>, !fusec.tensor<[3], f32>)')
    (kernel,) = _check_same_meaning(transposed, [{"s0": 5}])["g"]
    assert kernel.is_tiled and kernel.domain_exprs == [S0, 3]


@pytest.mark.parametrize("width, tiled", [(50257, False), (30522, True)])
def test_a_broadcast_alone_is_not_worth_a_tile_whose_16_bit_rows_are_misaligned(width, tiled):
    """Zero-padding bf16 rows (pad-matmuls' copy of logit gradients): tiling only saves the mod of the column, and a
    tile over rows that start at odd elements ran 6x slower than the flat kernel (bench/tile_sweep.py)."""
    t, p = f"!fusec.tensor<[4, {width}], bf16>", f"!fusec.tensor<[4, {width + 8}], bf16>"
    text = _graph(f"%x : {t}", p, f"""
%z = fusec.constant 0 : !fusec.tensor<[4, 8], bf16>
%c = fusec.cat %x, %z dim 1 : ({t}, !fusec.tensor<[4, 8], bf16>) -> {p}
fusec.output %c : {p}""", "")
    (kernel,) = _check_same_meaning(text, [{}])["g"]
    assert kernel.is_tiled == tiled
