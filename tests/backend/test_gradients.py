"""Gradients through backend="fusec" match eager's, where the backward graph calls externs.

The attention backward (and convolution's, and pooling's) is a multi-output
extern that consumes tensors the forward saved.  A wrong saved tensor, a wrong
argument or a result taken from the wrong position of the op's return value
gives silently wrong gradients, so each case compares every input's gradient
with eager's (values, dtype, shape, strides), static and ``dynamic=True``.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as Fn
from torch.nn.attention import SDPBackend, sdpa_kernel

# A graph that fell back to eager would match eager trivially: fail instead.
pytestmark = [pytest.mark.usefixtures("fresh_dynamo"),  # tests/conftest.py
              pytest.mark.filterwarnings("error:fusec. graph .* runs with torch")]


def _leaves(tensors):
    return [t.detach().clone().requires_grad_(t.requires_grad) for t in tensors]


def _grads_match(fn, inputs, *, dynamic=False, context=None, atol=1e-5, rtol=1e-4):
    """fn's outputs and the gradients of every input that requires one, compiled vs eager."""
    eager_in, compiled_in = _leaves(inputs), _leaves(inputs)
    with context() if context else _nothing():
        expected = fn(*eager_in)
        (expected.float().square().sum() + expected.float().sum()).backward()
        compiled = torch.compile(fn, backend="fusec", dynamic=dynamic)
        got = compiled(*compiled_in)
        (got.float().square().sum() + got.float().sum()).backward()
    torch.testing.assert_close(got, expected, atol=atol, rtol=rtol)
    for i, (e, c) in enumerate(zip(eager_in, compiled_in, strict=True)):
        if not e.requires_grad:
            assert c.grad is None
            continue
        assert c.grad is not None, f"input {i} got no gradient"
        assert (c.grad.dtype, c.grad.shape) == (e.grad.dtype, e.grad.shape), f"input {i}"
        assert c.grad.stride() == e.grad.stride(), f"input {i}: strides {c.grad.stride()}, eager {e.grad.stride()}"
        torch.testing.assert_close(c.grad, e.grad, atol=atol, rtol=rtol, msg=lambda m, i=i: f"gradient of input {i}: {m}")


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _qkv(b=2, h=4, length=24, s=24, e=12, h_kv=None, g=None):
    g = g or torch.Generator().manual_seed(0)
    q = torch.randn(b, h, length, e, generator=g, requires_grad=True)
    k = torch.randn(b, h_kv or h, s, e, generator=g, requires_grad=True)
    v = torch.randn(b, h_kv or h, s, e, generator=g, requires_grad=True)
    return q, k, v


BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "math": SDPBackend.MATH}


def _sdpa(**kw):
    return lambda q, k, v: Fn.scaled_dot_product_attention(q, k, v, **kw)


@pytest.mark.parametrize("backend", sorted(BACKENDS))
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("case", ["plain", "causal", "scale"])
def test_attention_gradients(case, dynamic, backend):
    kw = {"plain": {}, "causal": {"is_causal": True}, "scale": {"scale": 0.3}}[case]
    _grads_match(_sdpa(**kw), _qkv(), dynamic=dynamic, context=lambda: sdpa_kernel([BACKENDS[backend]]))


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_attention_gradients_through_transposed_views(dynamic):
    """q, k, v as [B, L, H, E] transposed to [B, H, L, E], as every transformer passes them."""
    g = torch.Generator().manual_seed(1)
    x = [torch.randn(2, 24, 4, 12, generator=g, requires_grad=True) for _ in range(3)]

    def fn(q, k, v):
        out = Fn.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        return out.transpose(1, 2).reshape(2, 24, 48)

    _grads_match(fn, x, dynamic=dynamic)


@pytest.mark.parametrize("mask", ["bool", "float", "float-grad"])
def test_attention_gradients_with_a_mask(mask):
    g = torch.Generator().manual_seed(2)
    q, k, v = _qkv(g=g)
    if mask == "bool":
        m = torch.rand(24, 24, generator=g) > 0.3
        m.fill_diagonal_(True)
    else:
        m = torch.randn(2, 1, 24, 24, generator=g).requires_grad_(mask == "float-grad")
    _grads_match(lambda q, k, v, m: Fn.scaled_dot_product_attention(q, k, v, attn_mask=m), [q, k, v, m])


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_attention_gradients_grouped_query(dynamic):
    """GQA: 4 query heads share 2 key/value heads."""
    _grads_match(_sdpa(enable_gqa=True, is_causal=True), _qkv(h=4, h_kv=2, length=16, s=16, e=8), dynamic=dynamic)


def test_attention_gradients_cross_lengths():
    _grads_match(_sdpa(), _qkv(length=10, s=17, e=8))


@pytest.mark.parametrize("needs", ["weight-only", "input-only", "all"])
def test_convolution_gradients_with_partial_output_mask(needs):
    """convolution_backward returns (None, grad_weight, grad_bias) when the input needs no gradient:
    the results must be taken from their positions, not packed to the front."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 3, 9, 9, generator=g, requires_grad=needs != "weight-only")
    w = torch.randn(5, 3, 3, 3, generator=g, requires_grad=needs != "input-only")
    b = torch.randn(5, generator=g, requires_grad=needs != "input-only")
    _grads_match(lambda x, w, b: Fn.conv2d(x, w, b, padding=1).relu(), [x, w, b])


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_pooling_gradients(dynamic):
    """max_pool2d_with_indices: its indices (a second output) feed its backward."""
    g = torch.Generator().manual_seed(4)
    x = torch.randn(2, 3, 10, 10, generator=g, requires_grad=True)
    _grads_match(lambda x: Fn.max_pool2d(x, 3, 2, 1) + Fn.avg_pool2d(x, 3, 2, 1) + Fn.adaptive_avg_pool2d(x, 5), [x],
                 dynamic=dynamic)


def test_norm_gradients():
    """layer_norm and batch_norm (decomposed: their saved statistics must be eager's)."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(4, 6, 5, 5, generator=g, requires_grad=True)
    w, b = torch.randn(6, generator=g, requires_grad=True), torch.randn(6, generator=g, requires_grad=True)
    lw, lb = torch.randn(5, generator=g, requires_grad=True), torch.randn(5, generator=g, requires_grad=True)

    def fn(x, w, b, lw, lb):
        y = Fn.batch_norm(x, None, None, w, b, training=True)
        return Fn.layer_norm(y, (5,), lw, lb) + Fn.group_norm(x, 3, w, b)

    _grads_match(fn, [x, w, b, lw, lb], atol=1e-4)  # fp32 sums over 100 elements, in another order


GRADCHECK_CASES = {
    "attention": (lambda q, k, v: Fn.scaled_dot_product_attention(q, k, v, is_causal=True), [(1, 2, 5, 3)] * 3),
    "convolution": (lambda x, w: Fn.conv2d(x, w, padding=1), [(1, 2, 4, 4), (2, 2, 3, 3)]),
    "max_pool": (lambda x: Fn.max_pool2d(x, 2), [(1, 2, 4, 4)]),
    "layer_norm": (lambda x, w: Fn.layer_norm(x, (4,), w), [(3, 4), (4,)]),
}


@pytest.mark.parametrize("name", sorted(GRADCHECK_CASES))
def test_gradcheck_float64(name):
    """torch.autograd.gradcheck (analytical vs finite-difference gradients) in float64, through fusec."""
    fn, shapes = GRADCHECK_CASES[name]
    g = torch.Generator().manual_seed(6)
    inputs = [torch.randn(*s, generator=g, dtype=torch.float64, requires_grad=True) for s in shapes]
    assert torch.autograd.gradcheck(torch.compile(fn, backend="fusec"), inputs, eps=1e-6, atol=1e-5, rtol=1e-4)


ON_GPU = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
GPU_BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
                "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}


@pytest.mark.parametrize("backend", sorted(GPU_BACKENDS))
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("_", [pytest.param(None, marks=ON_GPU)], ids=["cuda"])
def test_attention_gradients_on_gpu(_, causal, dynamic, dtype, backend):
    """Each fused attention eager can pick on a GPU: the backward extern gets the forward's saved outputs
    (log-sum-exp, RNG state, sequence lengths: tensors mixed with sizes) exactly as eager gives them."""
    g = torch.Generator().manual_seed(7)
    q, k, v = (t.detach().to("cuda", dtype).requires_grad_() for t in _qkv(length=64, s=64, e=32, g=g))
    _grads_match(_sdpa(is_causal=causal), [q, k, v], dynamic=dynamic, context=lambda: sdpa_kernel([GPU_BACKENDS[backend]]),
                 atol=2e-2, rtol=2e-2)
