"""Each ``_foreach_*`` decomposition computes what the foreach op computes, element by element, on random inputs."""

from __future__ import annotations

import pytest
import torch

from fusec.frontend.decompositions import fusec_decompositions
from fusec.frontend.foreach import foreach_decompositions

DECOMPOSED = foreach_decompositions()


def _argument(arg, g: torch.Generator):
    """A random value for one schema argument: values in (0.1, 0.9) suit every op here (log, acos, pow)."""
    kind = str(arg.type)
    if kind == "List[Tensor]":
        return [0.1 + 0.8 * torch.rand(shape, generator=g) for shape in ((3,), (2, 4))]
    if kind == "Tensor":  # one tensor for every element (a 0-d tensor: a learning rate, a step)
        return 0.1 + 0.8 * torch.rand((), generator=g)
    if kind == "List[number]":
        return [0.3, 0.7]
    if kind == "number":
        return 0.6
    raise AssertionError(f"no random value for a {kind} argument ({arg.name})")


@pytest.mark.parametrize("overload", sorted(DECOMPOSED, key=str), ids=str)
def test_decomposition_matches_the_foreach_op(overload):
    g = torch.Generator().manual_seed(0)
    args = [_argument(a, g) for a in overload._schema.arguments if not a.kwarg_only]
    want, got = overload(*args), DECOMPOSED[overload](*args)
    assert len(got) == len(want)
    for w, r in zip(want, got, strict=True):
        torch.testing.assert_close(r, w, equal_nan=True)


def test_the_table_holds_optimizer_ops_and_no_in_place_ones():
    table = fusec_decompositions()
    for name in ("_foreach_addcdiv.Scalar", "_foreach_lerp.Scalar", "_foreach_mul.Tensor", "_foreach_sqrt.default",
                 "_foreach_pow.ScalarAndTensor"):
        packet, overload = name.split(".")
        assert getattr(getattr(torch.ops.aten, packet), overload) in table, name
    assert not [op for op in DECOMPOSED if op._schema.is_mutable]
