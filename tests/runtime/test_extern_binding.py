"""Extern targets bound in a launcher through the cheapest callable that runs the same operator."""

from __future__ import annotations

import torch

from fusec.runtime.compiled import _direct

aten = torch.ops.aten


def test_hot_targets_bind_torch_functions_and_compute_the_same():
    g = torch.Generator().manual_seed(0)
    a, b, c = torch.randn(3, 4, generator=g), torch.randn(4, 5, generator=g), torch.randn(5, generator=g)
    assert _direct(aten.mm.default) is torch._C._VariableFunctions.mm
    torch.testing.assert_close(_direct(aten.mm.default)(a, b), aten.mm.default(a, b), rtol=0, atol=0)
    torch.testing.assert_close(_direct(aten.addmm.default)(c, a, b, beta=0.5, alpha=2),
                               aten.addmm.default(c, a, b, beta=0.5, alpha=2), rtol=0, atol=0)


def test_other_targets_bind_the_overload_itself():
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(1))
    summed = _direct(aten.sum.dim_IntList)
    assert summed is aten.sum.dim_IntList._op  # the overload the graph named, never a Python overload resolution
    torch.testing.assert_close(summed(x, [1], True), aten.sum.dim_IntList(x, [1], True), rtol=0, atol=0)
    assert _direct(len) is len  # not an aten overload: left as it is
