"""The fusec dialect's canonicalization patterns keep results: the reference interpreter before and after, eager
through backend="fusec" (Triton's interpreter on the CPU), on values that exercise each pattern's edge cases."""

import math
from pathlib import Path

import pytest
import torch

from fusec.dialects import fusec as F
from fusec.pipeline import run_pipeline
from fusec.registry import make_context
from fusec.runtime.interpreter import run
from fusec.testing import parse, print_ir

SAFE_SOFTMAX = Path(__file__).parent / "filecheck" / "dialects" / "canonicalize-any.mlir"


def piped(text: str, spec: str):
    module = parse(text)
    run_pipeline(make_context(), module, spec)
    return module


def rows_with_edges(cols: int, dtype=torch.float32) -> torch.Tensor:
    """Rows: all -inf, one NaN, -inf but one, +inf, ordinary values, all equal."""
    x = torch.randn(6, cols, generator=torch.Generator().manual_seed(0)).to(dtype)
    x[0] = -math.inf
    x[1, 3] = math.nan
    x[2] = -math.inf
    x[2, 5] = 0.25
    x[3, 7] = math.inf
    x[5] = 1.5
    return x


@pytest.mark.parametrize("graph, cols", [("safe_softmax", 197), ("ne_form", 64)])
def test_any_above_minus_infinity_keeps_every_row(graph, cols):
    """``any(x != -inf)`` -> ``max(x) != -inf`` on the interpreter, -inf, NaN and +inf rows included."""
    text = SAFE_SOFTMAX.read_text()
    fused = piped(text, "form-kernels,vertical-fusion,reduction-fusion")
    canonical = piped(text, "form-kernels,vertical-fusion,reduction-fusion,canonicalize,dce")
    assert '"any"' in print_ir(F.find_graph(fused, graph)) and '"any"' not in print_ir(F.find_graph(canonical, graph))
    x = rows_with_edges(cols, torch.float32 if graph == "safe_softmax" else torch.bfloat16)
    for want, got in zip(run(fused, [x], graph), run(canonical, [x], graph), strict=True):
        torch.testing.assert_close(got, want, equal_nan=True, rtol=0, atol=0)


def test_safe_softmax_through_the_backend_matches_eager():
    """torch's ``_safe_softmax`` (attention's math path) compiled: rows of -inf give zeros, a NaN row NaNs."""
    x = rows_with_edges(197)

    def fn(t):
        return torch.ops.aten._safe_softmax(t, -1)

    torch._dynamo.reset()
    got = torch.compile(fn, backend="fusec")(x)
    torch.testing.assert_close(got, fn(x), equal_nan=True)
    assert torch.equal(got[0], torch.zeros(197)) and got[1].isnan().all()
