"""Views the launcher makes in one call (``_reinterpret``) from layouts it knows: the same tensors as torch's views."""

from __future__ import annotations

import random

import pytest
import torch

from fusec.lowering.view_layouts import _view_strides

pytestmark = pytest.mark.usefixtures("fresh_dynamo")  # tests/conftest.py


def test_view_strides_are_torchs():
    """torch's computeStride, ported: the strides of ``view`` on permuted and narrowed tensors, None where torch
    refuses the view (reshape would copy); size-1 dims may differ (their strides address nothing)."""
    rng = random.Random(0)
    for _ in range(2000):
        dims = [rng.choice([1, 2, 3, 4]) for _ in range(rng.randint(1, 4))]
        perm = list(range(len(dims)))
        rng.shuffle(perm)
        y = torch.empty(dims).permute(perm)
        if rng.random() < 0.3:
            d = rng.randrange(y.dim())
            y = y.narrow(d, 0, max(1, y.shape[d] - 1))
        new, rest = [], y.numel()
        for p in (2, 3, 2, 2, 3):
            if rest % p == 0 and rng.random() < 0.6:
                new.append(p)
                rest //= p
        new.append(rest)
        if rng.random() < 0.3:
            new.insert(rng.randrange(len(new) + 1), 1)
        try:
            want = list(y.view(new).stride())
        except RuntimeError:
            want = None
        got = _view_strides(list(y.shape), list(y.stride()), new)
        assert (got is None) == (want is None), (list(y.shape), list(y.stride()), new)
        if got is not None:
            assert all(a == b or n == 1 for a, b, n in zip(got, want, new, strict=True)), (list(y.shape), new, got, want)


@pytest.mark.parametrize("dynamic", [False, True])
def test_chained_views_of_buffers_feed_externs_as_torch_views_would(dynamic, tmp_path):
    """A slice (a storage offset) then a transpose then a reshape, of an input and of a kernel's output, read by
    matmuls: each view made by ``_reinterpret``, offsets counted once, results equal to eager."""
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(3, 17, 8, generator=g), torch.randn(16, 5, generator=g)

    def f(x, w):
        a = x[:, 1:, :].transpose(1, 2)  # [3, 8, 16], offset 8
        b = (x * 2)[:, 1:, :].transpose(1, 2).reshape(24, 16)
        return a @ w, b @ w

    got = torch.compile(f, backend="fusec", dynamic=dynamic, options={"dump_dir": str(tmp_path)})(x, w)
    for g_, w_ in zip(got, f(x, w), strict=True):
        torch.testing.assert_close(g_, w_)
    launchers = "".join(p.read_text() for p in tmp_path.glob("*/launcher.py"))
    assert "_reinterpret(" in launchers, launchers
