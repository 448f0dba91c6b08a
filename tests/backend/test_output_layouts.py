"""Outputs keep eager's layout (found by the fuzzer: a pointwise op on a transposed input gave row-major
strides where eager keeps the input's layout), static and dynamic=True, forward and gradient."""

from __future__ import annotations

import pytest
import torch

pytestmark = [pytest.mark.usefixtures("fresh_dynamo"),  # tests/conftest.py
              pytest.mark.filterwarnings("error:fusec. graph .* runs with torch")]


def _same(got, want):
    assert (got.dtype, got.shape, got.stride()) == (want.dtype, want.shape, want.stride())
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("fn", [lambda x: torch.neg(x), lambda x: torch.sin(x) * 2 + x,
                                lambda x: (x.exp(), x.amax(0))], ids=["neg", "chain", "two-outputs"])
def test_a_pointwise_op_on_a_transposed_input_keeps_its_layout(fn, dynamic):
    compiled = torch.compile(fn, backend="fusec", dynamic=dynamic)
    for rows in (6, 11):
        x = torch.randn(rows, 5, generator=torch.Generator().manual_seed(rows)).t()
        got, want = compiled(x), fn(x)
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,), strict=True):
            _same(g, w)


def _same_with_gradient(fn, sizes, dims):
    """``fn`` of a permuted leaf, compiled and eager: the same output (strides included) and the same gradient."""
    base = torch.randn(*sizes, generator=torch.Generator().manual_seed(0))
    eager_base, compiled_base = base.clone().requires_grad_(), base.clone().requires_grad_()
    want = fn(eager_base.permute(*dims))
    got = torch.compile(fn, backend="fusec")(compiled_base.permute(*dims))
    _same(got, want)
    weights = torch.randn(want.shape, generator=torch.Generator().manual_seed(1))
    (want * weights).sum().backward()
    (got * weights).sum().backward()
    _same(compiled_base.grad, eager_base.grad)


def test_a_three_dim_permuted_layout_and_its_gradient():
    _same_with_gradient(lambda x: torch.tanh(x) + 1, (4, 6, 3), (2, 0, 1))


def test_row_major_outputs_are_not_copied():
    x = torch.randn(6, 5)
    fn = torch.compile(lambda x: x * 2, backend="fusec")
    assert fn(x).is_contiguous()


@pytest.mark.parametrize("dynamic", [False, True])
def test_an_output_aliasing_a_misaligned_input_with_gradients(dynamic):
    """Found by the fuzzer: the launcher copies a misaligned input for its kernels, and AOTAutograd rebuilds an output
    that aliases an input from that output's strides and storage offset: the output must be a view of the caller's
    tensor, not of the copy."""
    def fn(x0):
        return (x0.reshape(-1),)

    base = torch.randn(5, generator=torch.Generator().manual_seed(0))
    eager_base, compiled_base = base.clone().requires_grad_(), base.clone().requires_grad_()
    want = fn(eager_base[1::2])[0]  # starts 4 bytes in: misaligned
    got = torch.compile(fn, backend="fusec", dynamic=dynamic)(compiled_base[1::2])[0]
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("dynamic", [False, True])
def test_an_output_aliasing_a_misaligned_input_through_a_torch_view(dynamic):
    """Found by the fuzzer: under dynamic=True, ``unflatten`` by a symbolic size runs as ``aten.view`` (a torch
    call), and its output, a view of a misaligned input, came back as a view of the launcher's aligned copy: wrong
    values (AOTAutograd rebuilt it with the caller's storage offset).  Torch view calls join the alias chain."""
    def fn(x):
        return (x.unflatten(1, (2, -1)),)

    base = torch.randn(3, 12, generator=torch.Generator().manual_seed(0))
    x = base[1:2, 1::3]  # [1, 4], strides (12, 3), storage offset 13: misaligned
    got, want = torch.compile(fn, backend="fusec", dynamic=dynamic)(x)[0], fn(x)[0]
    torch.testing.assert_close(got, want)
    assert (got.stride(), got.storage_offset()) == (want.stride(), want.storage_offset())


@pytest.mark.parametrize("dynamic", [False, True])
def test_a_transposed_view_of_a_result_that_eager_returns_row_major(dynamic):
    """Fuzzer (seed 9300): neg of a [1, n, n] input laid out column-major keeps that layout in eager, so its
    transpose(0, 2) is row-major; fusec computed neg row-major and returned the transposed view of it."""
    def fn(x):
        return torch.neg(x).transpose(0, 2)

    compiled = torch.compile(fn, backend="fusec", dynamic=dynamic)
    for n in (6, 11):
        x = torch.randn(n, n, 1, generator=torch.Generator().manual_seed(n)).permute(2, 1, 0)
        _same(compiled(x), fn(x))


@pytest.mark.parametrize("dynamic", [False, True])
def test_an_expanded_result_keeps_eager_layout_under_the_expand(dynamic):
    """Fuzzer (seed 10000): neg of a [2, 2, n] input laid out dims-reversed keeps that layout in eager, and its
    expand(2, ...) has strides (0, 1, 2, 4); fusec returned the expand of a row-major neg (0, 12, 6, 1)."""
    def fn(x):
        return torch.neg(x).expand(2, -1, -1, -1), torch.neg(x)

    compiled = torch.compile(fn, backend="fusec", dynamic=dynamic)
    for n in (6, 11):
        x = torch.randn(n, 2, 2, generator=torch.Generator().manual_seed(n)).permute(2, 1, 0)
        for got, want in zip(compiled(x), fn(x), strict=True):
            _same(got, want)


def _output_slots(monkeypatch, fn, *args, dynamic=False):
    """The output slots of the boxed function fusec's backend hands Dynamo for ``fn``, and its result."""
    import fusec.backend as backend

    seen = []
    original = backend.boxed_runner
    monkeypatch.setattr(backend, "boxed_runner", lambda info, execute: seen.append(info) or original(info, execute))
    result = torch.compile(fn, backend="fusec", dynamic=dynamic)(*args)
    return [s for info in seen for s in info.outputs], result


@pytest.mark.parametrize("dynamic", [False, True])
def test_a_permuted_view_the_launcher_lays_out_is_not_checked_per_call(monkeypatch, dynamic):
    """A permuted view of a computed buffer (attention's q/k/v saved for the backward) has eager's layout by
    construction: no per-call check of its layout is left (~8 us of Python each, ~100 per ViT step)."""
    def fn(x):
        y = torch.sin(x) * 2
        return y.permute(2, 0, 1), y.transpose(0, 1)

    x = torch.randn(4, 6, 3, generator=torch.Generator().manual_seed(0))
    slots, got = _output_slots(monkeypatch, fn, x, dynamic=dynamic)
    assert [s.dim_order for s in slots if s.kind == "tensor"] == [None, None]
    for g, w in zip(got, fn(x), strict=True):
        _same(g, w)


def test_an_expanded_output_keeps_its_per_call_check(monkeypatch):
    """An expanded output is not dense: the launcher promises no dim order for it, and the runtime still lays
    out the buffer under the expand in eager's order."""
    def fn(x):
        return torch.neg(x).expand(2, -1, -1, -1)

    x = torch.randn(6, 2, 2, generator=torch.Generator().manual_seed(6)).permute(2, 1, 0)
    slots, got = _output_slots(monkeypatch, fn, x)
    assert any(s.dim_order for s in slots)
    _same(got, fn(x))


@pytest.mark.parametrize("dynamic", [False, True])
def test_a_strided_view_of_a_result_gets_eager_strides(dynamic):
    """Found by the fuzzer: eager's ``neg(x)[0::2]`` on a transposed ``x`` is a view with strides (2, n) of a
    result laid out like ``x``; fusec's result was row-major, so the view came back (2n, 1).  Outputs that are
    strided views (dense in no order) of the graph's values get eager's strides; values equal either way."""
    def fn(x):
        y = torch.sin(x)
        return torch.neg(x)[0::2], y[:, 1::3], y.t()[::2], (x + 1)[::2]

    compiled = torch.compile(fn, backend="fusec", dynamic=dynamic)
    for n in (6, 11):
        x = torch.randn(n, n, generator=torch.Generator().manual_seed(n)).t()
        for g, w in zip(compiled(x), fn(x), strict=True):
            _same(g, w)


def test_a_strided_view_of_a_result_with_gradients():
    """The fuzzer's second finding, the same with ``requires_grad``: a 3-d permuted input, ``neg(x)[:, 0::2]``.
    (The fuzzer's input had a dim of size 1, whose stride AOTAutograd's view regeneration sets otherwise; the
    fuzzer ignores such strides, as addressing does.)"""
    _same_with_gradient(lambda x: torch.neg(x)[:, 0::2], (8, 2, 5), (1, 2, 0))


def test_an_empty_strided_view_under_symbolic_sizes():
    """The fuzzer's third finding (raised an unbound-symbol error after the strides fix): ``neg(x[:, 1:-1])`` of an
    empty ``x`` under ``dynamic=True``: an empty output has no element to lay out, and strides in derived sizes are
    evaluated through their definitions."""
    def fn(x):
        return torch.neg(x[:, 1:-1]), torch.sin(x.transpose(0, 2))[::2]

    compiled = torch.compile(fn, backend="fusec", dynamic=True)
    for shape in ((0, 2, 1), (6, 8, 3), (11, 9, 3)):
        x = torch.randn(shape, generator=torch.Generator().manual_seed(len(shape)))
        for g, w in zip(compiled(x), fn(x), strict=True):
            assert g.shape == w.shape
            if g.numel():
                _same(g, w)


def test_a_backward_returning_none_for_an_input_gives_eagers_gradients(monkeypatch):
    """A backward's outputs hold None for an input that needs no gradient (a Python value slot): the runtime's
    few-list-operations path returns it beside the gradients."""
    import fusec.backend as backend

    seen = []
    original = backend.boxed_runner
    monkeypatch.setattr(backend, "boxed_runner", lambda info, execute: seen.append(info) or original(info, execute))

    def fn(x, w, b):
        return torch.relu(x @ w + b).square().sum()

    g = torch.Generator().manual_seed(0)
    x, w, b = torch.randn(8, 4, generator=g), torch.randn(4, 3, generator=g), torch.randn(3, generator=g)
    got = [t.clone().requires_grad_(i > 0) for i, t in enumerate((x, w, b))]
    want = [t.clone().requires_grad_(i > 0) for i, t in enumerate((x, w, b))]
    torch.compile(fn, backend="fusec")(*got).backward()
    fn(*want).backward()
    assert any(s.kind == "value" for info in seen for s in info.outputs), [info.outputs for info in seen]
    for a, e in zip(got[1:], want[1:], strict=True):
        torch.testing.assert_close(a.grad, e.grad)
    assert got[0].grad is None
