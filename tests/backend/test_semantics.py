"""Eager PyTorch's semantic rules that fusec must follow, one class per test group, through backend="fusec"."""

from __future__ import annotations

import warnings

import pytest
import torch

from fusec.base import remarks

pytestmark = [pytest.mark.usefixtures("fresh_dynamo"),  # tests/conftest.py
              pytest.mark.filterwarnings("error:fusec. graph .* runs with torch")]


def compile_and_compare(fn, *inputs, dynamic=False):
    """fn compiled with fusec equals eager (values, dtype, shape); no graph fell back to eager."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = torch.compile(fn, backend="fusec", dynamic=dynamic)(*inputs)
    assert not [w for w in caught if "runs with torch" in str(w.message)], [str(w.message) for w in caught]
    want = fn(*inputs)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,), strict=True):
        assert (g.dtype, g.shape, g.device) == (w.dtype, w.shape, w.device)
        torch.testing.assert_close(g, w, equal_nan=True, rtol=0, atol=0)


# ---------------------------------------------------------------- dtype-reinterpreting views


@pytest.mark.parametrize("to", [torch.int32, torch.uint8, torch.int16, torch.float16, torch.int64, torch.uint64],
                         ids=lambda d: str(d).removeprefix("torch."))
def test_a_dtype_view_gives_eager_bits(to):
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(0))
    compile_and_compare(lambda x: (x * 2).view(to), x)
    if to != torch.uint64:  # torch computes little on uint64
        compile_and_compare(lambda x: (x * 2).view(to) + 1, x)


def test_a_native_form_that_disagrees_with_torch_runs_as_torch_with_a_remark():
    """The importer checks each native form's dtypes and shapes against torch's: view(dtype) is no reshape."""
    from torch._dynamo.backends.common import aot_autograd

    from fusec.frontend.decompositions import fusec_decompositions
    from fusec.frontend.importer import import_graph

    log = None

    def keep(gm, example):
        nonlocal log
        with remarks.collect() as log:
            import_graph(gm, example)
        return gm.forward

    backend = aot_autograd(fw_compiler=keep, decompositions=fusec_decompositions())
    torch.compile(lambda x: x.view(torch.int32) + 1, backend=backend)(torch.randn(3, 4))
    messages = [r.message for r in log.remarks if r.code == "extern-fallback"]
    assert any("aten.view.dtype" in m and "gives f32 where torch gives torch.int32" in m for m in messages), messages
