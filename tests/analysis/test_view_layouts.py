"""Views the launcher makes in one call (``_reinterpret``) from layouts it knows: the same tensors as torch's views."""

from __future__ import annotations

import random

import pytest
import torch

from fusec.analysis.view_layouts import _view_strides

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


def test_expanded_strides_are_torchs_size_1_dims_included():
    """``_expand_strides`` is torch's inferExpandGeometry: a new leading dim of size 1 keeps a dense stride."""
    import sympy

    from fusec.analysis.view_layouts import Layout, _expand_strides

    rng = random.Random(1)
    for _ in range(500):
        dims = [rng.choice([1, 2, 3]) for _ in range(rng.randint(0, 3))]
        x = torch.empty(dims).permute(*rng.sample(range(len(dims)), len(dims))) if dims else torch.empty(())
        target = [rng.choice([1, 2]) for _ in range(rng.randint(0, 2))] + [rng.choice([d, 4]) if d == 1 else d for d in x.shape]
        src = Layout(tuple(sympy.Integer(d) for d in x.shape), tuple(sympy.Integer(s) for s in x.stride()), sympy.Integer(0))
        got = _expand_strides(src, tuple(sympy.Integer(d) for d in target))
        assert [int(s) for s in got] == list(x.expand(target).stride()), (list(x.shape), list(x.stride()), target)


@pytest.mark.parametrize("dynamic", [False, True])
def test_views_returned_by_the_graph_are_made_in_one_call_with_eagers_strides(dynamic, tmp_path):
    """A graph output that is a view of a kernel's buffer (a saved activation, a weight gradient's transpose) is made
    by ``_reinterpret`` with the strides torch's own view gives, size-1 dims included, symbolic sizes too."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 6, generator=g)

    def f(x):
        n, m = x.shape
        y = x * 2
        return y.reshape(n, 1, m), y.t().unsqueeze(0), (x + 1).unsqueeze(1).expand(n, 3, m), y[1:3].reshape(1, 2 * m)

    got = torch.compile(f, backend="fusec", dynamic=dynamic, options={"dump_dir": str(tmp_path)})(x)
    for g_, w_ in zip(got, f(x), strict=True):
        torch.testing.assert_close(g_, w_)
        assert g_.stride() == w_.stride(), (g_.shape, g_.stride(), w_.stride())
    if dynamic:  # one compile, for these sizes and others
        x2 = torch.randn(5, 7, generator=g)
        for g_, w_ in zip(torch.compile(f, backend="fusec", dynamic=True)(x2), f(x2), strict=True):
            torch.testing.assert_close(g_, w_)
            assert g_.stride() == w_.stride()
    launchers = "".join(p.read_text() for p in tmp_path.glob("*/launcher.py"))
    assert "_reinterpret(" in launchers and ".reshape(" not in launchers and ".permute(" not in launchers, launchers


def test_size_1_dims_inserted_get_torchs_strides():
    """The symbolic-size rule for a reshape that only inserts size-1 dims, checked on integer sizes against torch's
    view (permuted and narrowed sources), size-1 dims included."""
    import sympy

    from fusec.analysis.view_layouts import Layout, _size_1_dims_inserted

    rng = random.Random(2)
    for _ in range(1000):
        dims = [rng.choice([2, 3, 4]) for _ in range(rng.randint(1, 3))]
        y = torch.empty(dims).permute(*rng.sample(range(len(dims)), len(dims)))
        if rng.random() < 0.5:
            d = rng.randrange(y.dim())
            y = y.narrow(d, 0, y.shape[d] - 1) if y.shape[d] > 2 else y
        new = list(y.shape)
        for _ in range(rng.randint(1, 3)):
            new.insert(rng.randrange(len(new) + 1), 1)
        src = Layout(tuple(sympy.Integer(d) for d in y.shape), tuple(sympy.Integer(s) for s in y.stride()),
                     sympy.Integer(0))
        got = _size_1_dims_inserted(src, tuple(sympy.Integer(d) for d in new))
        assert got is not None and [int(s) for s in got] == list(y.view(new).stride()), (list(y.shape), y.stride(), new)
    assert _size_1_dims_inserted(Layout((sympy.Integer(2),), (sympy.Integer(1),), sympy.Integer(0)),
                                 (sympy.Integer(1), sympy.Integer(3))) is None
