"""Compound sizes named by derived symbols (fusec/frontend/derived_sizes.py): the naming, the IR's text form and
verifier, and a dynamic conv net whose strided sizes used to nest without end in index arithmetic."""

from __future__ import annotations

import math
import re

import pytest
import sympy
import torch
from xdsl.utils.exceptions import VerifyException

from fusec.base import shapes
from fusec.frontend.derived_sizes import DerivedSizes, bounds, is_compound
from fusec.testing import parse

s0, s1 = shapes.size_symbol("s0"), shapes.size_symbol("s1")
d0, d1 = shapes.size_symbol("d0"), shapes.size_symbol("d1")
half = shapes.FloorDiv(s0 - 1, 2) + 1  # a stride-2 conv's output size


def test_a_compound_size_gets_a_name_and_its_strides_become_monomials():
    derived = DerivedSizes()
    assert derived(half) == d0
    assert derived.definitions == {"d0": half}
    assert derived(64 * half**2) == 64 * d0**2  # the stride of a [n, 64, h, h] tensor
    assert derived(sympy.expand(64 * half**2)) == 64 * d0**2  # already expanded: still a monomial
    assert derived(s0 * half) == s0 * d0
    assert derived(s0 + 1) == s0 + 1  # polynomials stay as they are
    assert derived(half) == d0  # the same size, the same name


def test_a_size_of_a_derived_size_is_named_in_its_terms():
    derived = DerivedSizes()
    derived(half)
    quarter = shapes.FloorDiv(half - 1, 2) + 1  # a second strided conv: written in terms of d0
    assert derived(quarter) == d1
    assert derived.definitions["d1"] == shapes.FloorDiv(s0 - 1, 4) + 1  # sympy folds the nested floordiv
    assert derived(half * quarter) == d0 * d1


def test_a_compound_size_met_first_keeps_its_name_when_its_atom_is_named_later():
    derived = DerivedSizes()
    start = 2 * shapes.FloorDiv(s0 - 1, 2)  # a slice start, met before any dim: named as a whole
    assert derived(start) == d0
    assert derived(half) == d1 and derived(start) == d0


def test_a_name_met_inside_a_later_size_is_defined_over_the_traced_symbols():
    """floordiv(h + 1, 3) of a named h is written floordiv(d0 + 1, 3) in the IR, but its definition holds only
    traced symbols: executors compute each derived size from the inputs' sizes, never from another name."""
    derived = DerivedSizes()
    derived(half)
    assert derived(shapes.FloorDiv(half + 1, 3)) == d1
    assert shapes.free_size_symbols([derived.definitions["d1"]]) == {"s0"}
    assert shapes.provably_equal(derived.definitions["d1"], shapes.FloorDiv(half + 1, 3))


def test_names_the_shape_environment_uses_are_skipped():
    assert DerivedSizes(taken={"d0"})(half) == d1


def test_a_polynomial_size_only_the_guards_keep_positive_gets_a_name():
    """``s0 - 2`` (a convolution without padding) is >= 1 only because the guards keep s0 >= 3: named, index
    arithmetic treats it as a size; its products are written in the name, not named whole."""
    derived = DerivedSizes(bounds={"s0": (3, math.inf), "s1": (2, math.inf)})
    assert derived(s1) == s1 and derived(2 * s0 - 1) == 2 * s0 - 1  # provably >= 1: no name
    assert derived(8 * s1 * (s0 - 2) ** 2) == 8 * s1 * d0**2
    assert derived.definitions == {"d0": s0 - 2}
    assert derived(s0 - 2) == d0
    assert derived(s1 - s0) == s1 - s0  # the bounds do not keep it positive: left alone
    assert DerivedSizes(bounds={"s0": (2, math.inf)})(s0 - 2) == s0 - 2  # may be 0: no name claims a size


def test_max_and_min_the_bounds_decide_are_settled_before_naming():
    """torch writes a convolution's strides with ``max(1, s0 - 2)``; under s0 >= 3 that is s0 - 2."""
    derived = DerivedSizes(bounds={"s0": (3, math.inf)})
    assert derived(8 * sympy.Max(1, s0 - 2) ** 2) == 8 * d0**2 and derived.definitions == {"d0": s0 - 2}
    assert shapes.settle_extrema(sympy.Max(1, s0 - 2), {"s0": (2, math.inf)}) == sympy.Max(1, s0 - 2)
    assert shapes.settle_extrema(sympy.Min(s0, s1 + 9), {"s0": (1, 8), "s1": (0, 3)}) == s0


def test_bounds_follow_the_symbols_where_the_size_grows_with_them():
    assert bounds(half, {"s0": (2, None)}) == (1, None)
    assert bounds(half, {"s0": (3, 11)}) == (2, 6)
    assert bounds(sympy.Max(s0, s1), {"s0": (2, 4), "s1": (5, 9)}) == (5, 9)
    assert bounds(shapes.Mod(s0, 4) + 1, {"s0": (2, 9)}) == (0, None)  # not monotone: nothing claimed
    assert is_compound(half) and not is_compound(s0 * s1 + 3) and not is_compound(shapes.FloorDiv(sympy.Integer(7), 2))


def _graph(symbols: str, dims: str = "d0") -> str:
    return f"""builtin.module {{
  fusec.graph @g(%a : !fusec.tensor<[s0], f32>) -> (!fusec.tensor<[{dims}], f32, strides [2]>) symbols({symbols}) {{
    %h = fusec.slice %a dim 0 start 0 step 2 : !fusec.tensor<[s0], f32> -> !fusec.tensor<[{dims}], f32, strides [2]>
    fusec.output %h : !fusec.tensor<[{dims}], f32, strides [2]>
  }}
}}"""


def test_the_text_form_round_trips_and_the_slice_verifier_sees_through_the_name():
    text = _graph("s0 in [1, inf], d0 = floordiv(s0 - 1, 2) + 1 in [1, inf]")
    module = parse(text)
    module.verify()
    assert "d0 = floordiv(s0 - 1, 2) + 1 in [1, inf]" in str(module)
    assert str(parse(str(module))) == str(module)


@pytest.mark.parametrize("symbols, message", [
    ("s0 in [1, inf], d0 = floordiv(s1 - 1, 2) + 1 in [1, inf]", r"uses s1 \(not declared\)"),
    ("s0 in [1, inf], d0 = floordiv(d0 - 1, 2) + 1 in [1, inf]", "uses itself"),
])
def test_a_bad_definition_is_a_verify_error(symbols, message):
    with pytest.raises(VerifyException, match=message):
        parse(_graph(symbols)).verify()


def test_definitions_that_refer_to_each_other_are_a_cycle():
    symbols = "s0 in [1, inf], d0 = d1 + 1 in [1, inf], d1 = d0 + 1 in [1, inf]"
    with pytest.raises(VerifyException, match="cycle"):
        parse(_graph(symbols, dims="floordiv(s0 - 1, 2) + 1")).verify()


class _StridedNet(torch.nn.Module):
    """Two stride-2 convolutions, a pool and pointwise ops between: the sizes a ResNet's stages make."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.b = torch.nn.Conv2d(8, 8, 3, stride=2, padding=1)

    def forward(self, x):
        h = torch.relu(self.a(x)) * 2 + 1
        h = torch.nn.functional.max_pool2d(h, 3, stride=2, padding=1)
        h = torch.relu(self.b(h)).flatten(2).transpose(1, 2)
        return h.softmax(-1), h.mean((1, 2))


def test_a_dynamic_strided_conv_net_names_its_sizes_and_matches_eager(tmp_path, monkeypatch, fresh_dynamo):
    monkeypatch.setenv("FUSEC_DUMP_DIR", str(tmp_path))
    torch.manual_seed(0)
    net = _StridedNet().eval()
    compiled = torch.compile(net, backend="fusec", dynamic=True)
    with torch.no_grad():
        for n, side in ((2, 17), (3, 30)):
            x = torch.randn(n, 3, side, side, generator=torch.Generator().manual_seed(side))
            for got, want in zip(compiled(x), net(x), strict=True):
                torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    (imported,) = tmp_path.glob("*/imported.mlir")
    _, header, body = imported.read_text().split("\n", 2)
    assert "d0 = floordiv(s" in header and "d1 = " in header  # the graph declares what each name stands for
    assert "floordiv" not in body  # every type is written in the names


def test_an_unpadded_conv_net_names_its_size_and_its_indices_stay_short(tmp_path, monkeypatch, fresh_dynamo):
    """An unpadded convolution's output side is ``s - 2`` and its strides ``max(1, s - 2)``: unnamed, no view of it
    folded and one load index of a batch-normed training step grew to 745,000 characters (minutes to compile)."""
    monkeypatch.setenv("FUSEC_DUMP_DIR", str(tmp_path))
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 4, 3).requires_grad_(False)
    fn = lambda x: (lambda h: ((h - h.mean((0, 2, 3), keepdim=True)) * 2).relu())(conv(x))  # noqa: E731
    compiled = torch.compile(fn, backend="fusec", dynamic=True)
    for n, side in ((2, 9), (3, 12)):
        x = torch.randn(n, 3, side, side, generator=torch.Generator().manual_seed(side))
        torch.testing.assert_close(compiled(x), fn(x), rtol=1e-4, atol=1e-5)
    (imported,) = tmp_path.glob("*/imported.mlir")
    # its upper bound is the side's size guard (int32 indexing, fusec.frontend.index_guards) less 2
    assert re.search(r"d0 = s\d+ - 2 in \[1, \d+\]", imported.read_text().split("\n", 2)[1])
    (final,) = tmp_path.glob("*/final.mlir")
    assert max(len(line) for line in final.read_text().splitlines()) < 1500
