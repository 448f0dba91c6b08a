"""max_pool2d and avg_pool2d, forward and backward, lowered natively (``fusec/frontend/pooling.py``).

Values, indices and gradients against eager over kernel/stride/padding/dilation/ceil_mode
combinations, static and ``dynamic=True``; each pooling is one kernel with no extern.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as Fn

# A graph that fell back to eager would match eager trivially: fail instead.
pytestmark = [pytest.mark.usefixtures("fresh_dynamo"),  # tests/conftest.py
              pytest.mark.filterwarnings("error:fusec. graph .* runs with torch")]

# (kernel, stride, padding, dilation, ceil_mode) on a 9x8 plane
MAX_CASES = [(3, 2, 1, 1, False), (2, 2, 0, 1, False), (3, 2, 1, 1, True), (3, 1, 1, 2, False),
             ((3, 2), (2, 1), (1, 0), 1, True), (2, 3, 1, (2, 1), True)]
AVG_CASES = [(3, 2, 1, False, True, None), (3, 2, 1, True, False, None), (2, 2, 0, False, True, None),
             ((3, 2), (2, 1), (1, 1), True, True, None), (3, 2, 1, False, True, 5)]


def _x(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _compile(fn, dynamic, dump):
    return torch.compile(fn, backend="fusec", dynamic=dynamic, options={"dump_dir": str(dump), "native_pooling": True})


def _remarks(dump) -> str:
    """Every compiled graph's remarks (forward and backward), from the dump folder."""
    return "".join(p.read_text() for p in sorted(dump.glob("*/remarks.txt")))


def _no_extern(dump, dynamic=False):
    if dynamic:  # symbolic plane sizes still run pooling as a torch call (fusec/frontend/pooling.py: _symbolic)
        assert "extern-fallback: aten." in _remarks(dump) and "pool" in _remarks(dump)
        return
    text = _remarks(dump)
    assert "fusec.extern" not in "".join(p.read_text() for p in dump.glob("*/imported.mlir")), text
    assert "importer:" not in text, text


def _combos(cases, dynamic_cases):
    """Every case static; the first ``dynamic_cases`` of them also dynamic.  Each compile costs 5-15 s under
    the Triton interpreter, so all but the first static case are marked slow."""
    slow = pytest.mark.slow
    return [pytest.param(c, False, id=f"static-{c}", marks=() if i == 0 else slow) for i, c in enumerate(cases)] + [
        pytest.param(c, True, id=f"dynamic-{c}", marks=slow) for c in cases[:dynamic_cases]]


@pytest.mark.parametrize(("case", "dynamic"), _combos(MAX_CASES, 2))
def test_max_pool_values_and_indices(case, dynamic, tmp_path):
    k, s, p, d, c = case
    fn = lambda x: Fn.max_pool2d(x, k, s, p, d, ceil_mode=c, return_indices=True)  # noqa: E731
    run = _compile(fn, dynamic, tmp_path)
    x = _x(2, 3, 9, 8)
    x[0, 0, 2, 3] = float("nan")  # NaN wins its windows, like eager
    x[1, 2, :3, :3] = float("-inf")  # a window of -inf points at its first element inside the input
    x[1, 1, 4, :] = x[1, 1, 5, :]  # ties: the first maximum in window order
    values, indices = run(x)
    expected, expected_indices = fn(x)
    torch.testing.assert_close(values, expected, equal_nan=True)
    assert torch.equal(indices, expected_indices)
    _no_extern(tmp_path, dynamic)
    if dynamic:  # another size through the same compiled graph
        y = _x(1, 2, 11, 7, seed=1)
        values, indices = run(y)
        torch.testing.assert_close(values, fn(y)[0])
        assert torch.equal(indices, fn(y)[1])


@pytest.mark.parametrize(("case", "dynamic"), _combos(AVG_CASES, 1))
def test_avg_pool_values(case, dynamic, tmp_path):
    k, s, p, c, include_pad, divisor = case
    fn = lambda x: Fn.avg_pool2d(x, k, s, p, c, include_pad, divisor)  # noqa: E731
    x = _x(2, 3, 9, 8)
    torch.testing.assert_close(_compile(fn, dynamic, tmp_path)(x), fn(x))
    _no_extern(tmp_path, dynamic)


def _grads(fn, x, dynamic, dump):
    eager, compiled = x.clone().requires_grad_(), x.clone().requires_grad_()
    weight = _x(*fn(x).shape, seed=3)  # a gradient that is not all ones
    (fn(eager) * weight).sum().backward()
    (_compile(fn, dynamic, dump)(compiled) * weight).sum().backward()
    torch.testing.assert_close(compiled.grad, eager.grad)
    assert len(list(dump.glob("*/imported.mlir"))) == 2  # forward and backward graphs
    _no_extern(dump, dynamic)


@pytest.mark.parametrize(("case", "dynamic"), _combos(MAX_CASES[:4], 1))
def test_max_pool_gradients(case, dynamic, tmp_path):
    k, s, p, d, c = case
    x = _x(2, 2, 9, 8)
    x[0, 1, 3:5, 2:4] = 0.5  # ties: the gradient goes to the first maximum only
    _grads(lambda x: Fn.max_pool2d(x, k, s, p, d, ceil_mode=c), x, dynamic, tmp_path)


@pytest.mark.parametrize(("case", "dynamic"), _combos(AVG_CASES[:2] + AVG_CASES[4:], 1))
def test_avg_pool_gradients(case, dynamic, tmp_path):
    k, s, p, c, include_pad, divisor = case
    _grads(lambda x: Fn.avg_pool2d(x, k, s, p, c, include_pad, divisor), _x(2, 2, 9, 8), dynamic, tmp_path)


def test_max_pool_is_one_kernel_fused_with_its_consumer(tmp_path):
    """max_pool then relu: one pointwise kernel, reading the input through clamped window indices."""
    fn = lambda x: Fn.max_pool2d(x, 3, 2, 1).relu() * 2  # noqa: E731
    compiled = torch.compile(fn, backend="fusec", options={"dump_dir": str(tmp_path), "native_pooling": True})
    x = _x(2, 3, 9, 8)
    torch.testing.assert_close(compiled(x), fn(x))
    (graph,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    final = sorted(graph.glob("*schedule-kernels.mlir"))[-1].read_text()
    assert final.count("fusec.kernel @") == 1, final
    assert "fusec.extern" not in final and "gather" not in final
    assert "max(" in final or "Max(" in final or "min(" in final, final  # the clamped window read is a load index


def test_arange_folds_into_its_reader(tmp_path):
    fn = lambda x: x * torch.arange(x.shape[-1], dtype=x.dtype) + torch.arange(2, 2 + 3 * x.shape[0], 3)[:, None]  # noqa: E731
    compiled = torch.compile(fn, backend="fusec", dynamic=True, options={"dump_dir": str(tmp_path)})
    x = _x(3, 5)
    torch.testing.assert_close(compiled(x), fn(x))
    y = _x(4, 6, seed=2)
    torch.testing.assert_close(compiled(y), fn(y))
    (graph,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    final = sorted(graph.glob("*schedule-kernels.mlir"))[-1].read_text()
    assert final.count("fusec.kernel @") == 1 and "fusec.extern" not in final, final


def test_integer_max_pool_is_native_and_integer_avg_pool_declines(tmp_path):
    """max_pool2d on int64 starts windows at the dtype's lowest value; avg_pool2d on integers stays a torch
    call (eager's integer division), with a remark naming it."""
    x = torch.randint(-50, 50, (2, 3, 7, 6), generator=torch.Generator().manual_seed(5))
    fn = lambda x: (*Fn.max_pool2d(x, 3, 2, 1, return_indices=True), Fn.avg_pool2d(x, 2))  # noqa: E731
    got = _compile(fn, False, tmp_path)(x)
    for g, e in zip(got, fn(x), strict=True):
        assert g.dtype == e.dtype and torch.equal(g, e)
    declined = [line for line in _remarks(tmp_path).splitlines() if "importer:" in line]
    assert len(declined) == 1 and "extern-fallback: aten.avg_pool2d" in declined[0], declined


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_pooling_on_gpu(dynamic, tmp_path):
    """ResNet's stem pooling (3, 2, 1) and an avg pool, values, indices and gradients, compiled Triton."""
    x = _x(4, 64, 56, 57).cuda()

    def fn(x):
        values, indices = Fn.max_pool2d(x, 3, 2, 1, return_indices=True)
        return values + Fn.avg_pool2d(x, 3, 2, 1, ceil_mode=True)[..., :28, :], indices

    eager, compiled = x.clone().requires_grad_(), x.clone().requires_grad_()
    (e_values, e_indices), (c_values, c_indices) = fn(eager), _compile(fn, dynamic, tmp_path)(compiled)
    torch.testing.assert_close(c_values, e_values)
    assert torch.equal(c_indices, e_indices)
    weight = torch.randn_like(e_values)
    (e_values * weight).sum().backward()
    (c_values * weight).sum().backward()
    torch.testing.assert_close(compiled.grad, eager.grad)
    _no_extern(tmp_path, dynamic)


def test_default_lowers_pooling_natively_in_inference_graphs_only(tmp_path):
    """The default (native_pooling="inference"): a graph that needs no gradient pools natively; a training graph
    calls torch's pooling, and the remark says why and how to turn it on."""
    conv = torch.nn.Conv2d(3, 4, 3, padding=1)
    fn = lambda x: Fn.max_pool2d(conv(x).relu(), 3, 2, 1) * 2  # noqa: E731
    x = _x(2, 3, 9, 8)
    with torch.no_grad():
        compiled = torch.compile(fn, backend="fusec", options={"dump_dir": str(tmp_path / "infer")})
        torch.testing.assert_close(compiled(x), fn(x))
    imported = "".join(p.read_text() for p in (tmp_path / "infer").glob("*/imported.mlir"))
    assert 'fusec.extern "aten.convolution' in imported and 'fusec.extern "aten.max_pool' not in imported, imported
    assert "importer:" not in _remarks(tmp_path / "infer")

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="fusec", options={"dump_dir": str(tmp_path / "train")})
    got, want = compiled(x), fn(x)
    torch.testing.assert_close(got, want)
    got.square().sum().backward()
    grad = conv.weight.grad.clone()
    conv.weight.grad = None
    want.square().sum().backward()
    torch.testing.assert_close(grad, conv.weight.grad)
    text = _remarks(tmp_path / "train")
    assert "aten.max_pool2d_with_indices.default runs as a torch call: native pooling is off for this graph" in text
    assert "options={'native_pooling': True}" in text


def test_native_pooling_option_is_checked():
    from fusec.backend import BackendOptionError, BackendOptions

    assert BackendOptions.from_dict({}).native_pooling == "inference"
    with pytest.raises(BackendOptionError, match="'native_pooling' must be True, False or 'inference', got 'yes'"):
        BackendOptions.from_dict({"native_pooling": "yes"})
