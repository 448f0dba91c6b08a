"""attention-layouts: a cuDNN attention's query is stored in its declared result's order (filecheck tests in
tests/filecheck/attention_layouts); on the GPU the result then needs no copy before the output projection."""

import pytest
import torch
import torch.nn.functional as F

from fusec.passes.attention_layouts import AttentionLayouts

on_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
pytestmark = pytest.mark.usefixtures("fresh_dynamo")  # tests/conftest.py

B, T, H, D = 2, 128, 8, 64


def test_a_bad_when_is_refused():
    with pytest.raises(ValueError, match="when must be one of"):
        AttentionLayouts(when="sometimes")


def rotary_attention(x, w_q, w_kv, cos, sin, mask, w_o):
    """Llama's shape: the query a rotary embedding computes (contiguous in fusec, [B, L, H, E] order in eager)."""
    q = (x @ w_q).view(B, T, H, D).transpose(1, 2)
    k, v = (x @ w_kv).view(B, T, 2, H, D).permute(2, 0, 3, 1, 4)
    half = torch.cat([-q[..., D // 2:], q[..., :D // 2]], dim=-1)
    q = q * cos + half * sin
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.125)
    return o.transpose(1, 2).reshape(B, T, H * D) @ w_o


def _inputs(dtype, grad):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(B, T, H * D, generator=g)
    w_q, w_o = (torch.randn(H * D, H * D, generator=g) / 16 for _ in range(2))
    w_kv = torch.randn(H * D, 2 * H * D, generator=g) / 16
    angle = torch.rand(T, D, generator=g) * 6
    causal = torch.full((T, T), float("-inf")).triu(1).expand(B, 1, T, T).contiguous()
    tensors = [x, w_q, w_kv, angle.cos(), angle.sin(), causal, w_o]
    out = [t.to("cuda", dtype) for t in tensors]
    for t in (out[1], out[2], out[6]):
        t.requires_grad_(grad)
    return out


@on_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("train", [False, True])
def test_no_copy_of_the_attention_result(train, tmp_path):
    from torch.profiler import ProfilerActivity, profile

    args = _inputs(torch.bfloat16, train)
    fn = torch.compile(rotary_attention, backend="fusec", options={"dump_dir": str(tmp_path)})
    got = fn(*args)
    graph = "".join(p.read_text() for p in tmp_path.glob("*/fx_graph.py"))
    if "_scaled_dot_product_cudnn_attention" not in graph:
        pytest.skip("torch chose another attention kernel than cuDNN's here")
    remarks = "".join(p.read_text() for p in tmp_path.glob("*/remarks.txt"))
    assert "attention-layouts: attention-layout: aten._scaled_dot_product_cudnn_attention" in remarks, remarks
    want = rotary_attention(*args)
    torch.testing.assert_close(got, want, atol=3e-2, rtol=3e-2)
    if train:
        got_grads = torch.autograd.grad(got.float().square().sum(), [args[1], args[2], args[6]])
        want_grads = torch.autograd.grad(want.float().square().sum(), [args[1], args[2], args[6]])
        for a, b in zip(got_grads, want_grads, strict=True):
            assert ((a.float() - b.float()).norm() / b.float().norm()).item() < 3e-2
    with profile(activities=[ProfilerActivity.CUDA], acc_events=True) as prof:
        fn(*args)
        torch.cuda.synchronize()
    copies = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
              and e.name.startswith("void at::native::elementwise_kernel")]
    assert not copies, copies
