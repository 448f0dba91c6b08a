"""Dynamo's size expressions become fusec.base.shapes expressions with the ShapeEnv's symbol names."""

import pytest
import sympy
import torch.utils._sympy.functions as TF
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.value_ranges import ValueRanges

from fusec.base import shapes
from fusec.frontend.exprs import UnsupportedExpr, int_expr, symbol_bounds

# Dynamo's symbols: integer and positive, named as the ShapeEnv names them.
s0, s27, s53 = (sympy.Symbol(n, integer=True, positive=True) for n in ("s0", "s27", "s53"))


@pytest.mark.parametrize("dynamo, text", [
    (s27, "s27"),
    (s27 * s53 + 3, "s27*s53 + 3"),
    (TF.FloorDiv(s27, 2), "floordiv(s27, 2)"),
    (TF.CleanDiv(s27 * 4, 4), "s27"),
    (TF.ModularIndexing(s27, 4, 8), "mod(floordiv(s27, 4), 8)"),
    (TF.PythonMod(s27, s53), "mod(s27, s53)"),
    (TF.Mod(s27, 3), "mod(s27, 3)"),
    (TF.Max(s27, s53), "max(s27, s53)"),
    (TF.Min(s27, 4), "min(4, s27)"),
    (TF.CeilDiv(s27, 8) if hasattr(TF, "CeilDiv") else TF.FloorDiv(s27 + 7, 8), "floordiv(s27 + 7, 8)"),
    (TF.PowByNatural(s0, 2), "pow(s0, 2)"),
    (TF.FloorDiv(s27 * s53, TF.FloorDiv(s27 * s53, 2)), "floordiv(s27*s53, floordiv(s27*s53, 2))"),
])
def test_dynamo_expression_prints_in_fusec_form(dynamo, text):
    converted = int_expr(dynamo)
    assert shapes.print_expr(converted) == text
    assert shapes.parse_expr(text) == converted  # the symbols are fusec's own after the round trip


def test_float_expression_is_refused_with_its_text():
    with pytest.raises(UnsupportedExpr, match="ToFloat"):
        int_expr(TF.ToFloat(s27))


@pytest.mark.parametrize("vr, bounds", [
    (ValueRanges(2, int_oo), (2, None)),
    (ValueRanges(0, 64), (0, 64)),
    (ValueRanges(-3, 9223372036854775806), (0, None)),
])
def test_symbol_bounds(vr, bounds):
    assert symbol_bounds(vr) == bounds



def test_sizes_given_as_sympy_expressions_are_converted_too():
    """A convolution's symbolic output size can reach the builder as a sympy expression in torch's functions
    (``(s0 - 1)//2``), not as a SymInt; it must come out in fusec's form (a dynamic ResNet failed to import)."""
    import torch

    from fusec.dialects import fusec as F
    from fusec.frontend.builder import GraphBuilder

    builder = GraphBuilder(torch.fx.GraphModule(torch.nn.Module(), torch.fx.Graph()))
    assert shapes.print_expr(builder.size(TF.FloorDiv(s0 - 1, 2) + 1)) == "floordiv(s0 - 1, 2) + 1"
    value = builder.tensor(TF.FloorDiv(s0 - 1, 2), F.I64)
    assert shapes.print_expr(value.owner.expr.data) == "floordiv(s0 - 1, 2)"
    assert shapes.print_expr(builder.size(shapes.FloorDiv(s0, 3))) == "floordiv(s0, 3)"  # fusec's own: unchanged
