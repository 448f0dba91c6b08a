"""dense-attention-masks: an sdpa mask laid out so that torch's fused kernels decline it becomes a dense one.

On the CPU torch's flash kernel takes any mask layout, so these tests play the CUDA kernels' rule (a mask must be
dense along the keys) through ``attention_masks.torch_fuses``; the GPU test at the end asks torch itself.
Values and gradients are compared with eager on random inputs, including query rows whose keys are all masked.
"""

import pytest
import torch
import torch.nn.functional as F

from fusec.backend import BackendOptionError, BackendOptions
from fusec.frontend import attention_masks

on_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
pytestmark = pytest.mark.usefixtures("fresh_dynamo")  # tests/conftest.py


def cuda_rule(query, key, value, mask, *args, **kwargs) -> bool:
    """CUDA's fused kernels, as far as masks go: dense along the keys, else the math decomposition."""
    return mask is None or mask.stride(-1) == 1


def never_fused(*args, **kwargs) -> bool:
    return False


def attention(q, k, v, keep):
    # transformers' shape under torch.compile: a bool [B, 1, T, T] broadcast from one value per query
    b, _, t, _ = q.shape
    mask = keep[None, None, :, None].expand(b, 1, t, t)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.125) * 2


def inputs(dtype=torch.float32, grad=False, t=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(2, t, 3, 8, generator=g).to(dtype).transpose(1, 2).requires_grad_(grad) for _ in range(3))
    keep = torch.rand(t, generator=g) > 0.3
    keep[0] = False  # a query row with every key masked
    return q, k, v, keep


def _dump_text(tmp_path, name: str) -> str:
    return "".join(p.read_text() for p in sorted(tmp_path.glob(f"*/{name}")))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_broadcast_mask_becomes_a_dense_additive_one(dtype, tmp_path, monkeypatch):
    monkeypatch.setattr(attention_masks, "torch_fuses", cuda_rule)
    args = inputs(dtype)
    # fp32 attention is rewritten only when asked ("all"): the next test shows the default
    fn = torch.compile(attention, backend="fusec", options={"dump_dir": str(tmp_path), "dense_attention_masks": "all"})
    tol = {"atol": 2e-2, "rtol": 2e-2} if dtype == torch.bfloat16 else {}
    torch.testing.assert_close(fn(*args), attention(*args), **tol)
    remarks = _dump_text(tmp_path, "remarks.txt")
    short = str(dtype).removeprefix("torch.")
    assert "dense-attention-masks: dense-mask: attention (File" in remarks and f"dense {short} additive mask" in remarks, remarks
    assert "strides [0, 16, 1, 0]" in remarks
    assert "aten.where" in _dump_text(tmp_path, "fx_graph.py")  # the additive mask, computed in the graph


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_fp32_attention_stays_math_by_default(dynamic, tmp_path, monkeypatch):
    monkeypatch.setattr(attention_masks, "torch_fuses", cuda_rule)
    args = inputs(torch.float32)
    fn = torch.compile(attention, backend="fusec", dynamic=dynamic, options={"dump_dir": str(tmp_path)})
    torch.testing.assert_close(fn(*args), attention(*args))
    remarks = _dump_text(tmp_path, "remarks.txt")
    assert "dense-attention-masks: math-attention: attention (File" in remarks, remarks
    assert "in fp32 torch's one fused kernel" in remarks and "dense-mask" not in remarks
    assert "its scores take 6.0 KiB (dense_attention_masks='all'" in remarks, remarks  # [2, 3, 16, 16] fp32


def test_gradients_match_eager_with_the_dense_mask(monkeypatch):
    monkeypatch.setattr(attention_masks, "torch_fuses", cuda_rule)
    args = inputs(grad=True)
    fn = torch.compile(attention, backend="fusec", options={"dense_attention_masks": "all"})
    got = torch.autograd.grad(fn(*args).square().sum(), args[:3])
    want = torch.autograd.grad(attention(*args).square().sum(), args[:3])
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)


def test_one_dense_mask_serves_every_attention_that_reads_it(monkeypatch):
    monkeypatch.setattr(attention_masks, "torch_fuses", cuda_rule)

    def two_layers(q, k, v, keep):
        mask = keep[None, None, :, None].expand(q.shape[0], 1, q.shape[2], q.shape[2])
        h = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return F.scaled_dot_product_attention(h, k, v, mask)  # positional mask

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(attention_masks.dense_attention_masks(gm, include_fp32=True))
        return gm.forward

    args = inputs()
    torch.testing.assert_close(torch.compile(two_layers, backend=backend)(*args), two_layers(*args))
    targets = [str(n.target) for n in graphs[0].graph.nodes]
    assert sum("where" in t for t in targets) == 1, targets


@pytest.mark.parametrize("dynamic", [False, True])
def test_symbolic_sizes(dynamic, monkeypatch):
    monkeypatch.setattr(attention_masks, "torch_fuses", cuda_rule)
    fn = torch.compile(attention, backend="fusec", dynamic=dynamic, options={"dense_attention_masks": "all"})
    for t in (16, 24):
        args = inputs(t=t, seed=t)
        torch.testing.assert_close(fn(*args), attention(*args))


def test_declined_remark_and_option_off(tmp_path, monkeypatch):
    args = inputs()
    monkeypatch.setattr(attention_masks, "torch_fuses", never_fused)
    fn = torch.compile(attention, backend="fusec", options={"dump_dir": str(tmp_path / "never")})
    torch.testing.assert_close(fn(*args), attention(*args))
    assert "dense-attention-masks: math-attention: attention (File" in _dump_text(tmp_path / "never", "remarks.txt")

    torch._dynamo.reset()
    monkeypatch.setattr(attention_masks, "torch_fuses", cuda_rule)
    fn = torch.compile(attention, backend="fusec", options={"dump_dir": str(tmp_path / "off"), "dense_attention_masks": False})
    torch.testing.assert_close(fn(*args), attention(*args))
    assert "dense-attention-masks" not in _dump_text(tmp_path / "off", "remarks.txt")


def test_the_option_takes_a_bool_or_all():
    assert BackendOptions.from_dict({}).dense_attention_masks is True
    assert BackendOptions.from_dict({"dense_attention_masks": False}).dense_attention_masks is False
    assert BackendOptions.from_dict({"dense_attention_masks": "all"}).dense_attention_masks == "all"
    for bad in ("yes", 1):
        with pytest.raises(BackendOptionError, match=f"'dense_attention_masks' must be True, False or 'all', got {bad!r}"):
            BackendOptions.from_dict({"dense_attention_masks": bad})


@on_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_on_the_gpu_16_bit_attention_is_fused_fp32_stays_math(dtype, tmp_path):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(8, 128, 12, 64, generator=g).to("cuda", dtype).transpose(1, 2) for _ in range(3))
    keep = (torch.rand(128, generator=g) > 0.3).cuda()
    keep[0] = False
    fn = torch.compile(attention, backend="fusec", options={"dump_dir": str(tmp_path)})
    tol = {"atol": 2e-2, "rtol": 2e-2} if dtype == torch.bfloat16 else {"atol": 1e-4, "rtol": 1e-4}
    torch.testing.assert_close(fn(q, k, v, keep), attention(q, k, v, keep), **tol)
    graph = _dump_text(tmp_path, "fx_graph.py")
    if dtype == torch.float32:  # stays the math decomposition unless asked (dense_attention_masks="all")
        assert "aten.bmm" in graph and "_scaled_dot_product_" not in graph, graph
    else:
        assert "_scaled_dot_product_" in graph and "aten.bmm" not in graph, graph


@pytest.mark.parametrize("dynamic", [False, True])
def test_torch_is_asked_as_aotautograd_traces(dynamic):
    """torch_fuses traces the call over Dynamo's fake tensors: on the CPU, flash takes any mask (no rewrite)."""
    answers = []

    def backend(gm, example_inputs):
        node = next(n for n in gm.graph.nodes if n.target is F.scaled_dot_product_attention)
        q, k, v = (a.meta["example_value"] for a in node.args[:3])
        mask = node.kwargs["attn_mask"].meta["example_value"]
        answers.append(attention_masks.torch_fuses(q, k, v, mask, scale=0.125))
        answers.append(attention_masks.torch_fuses(q, k, v, mask, 0.1, scale=0.125))  # dropout: math on the CPU
        answers.append(attention_masks.torch_fuses(q.to(torch.float16), k, v, mask))  # torch refuses mixed dtypes
        return gm.forward

    torch.compile(attention, backend=backend, dynamic=dynamic)(*inputs())
    assert answers == [True, False, None]


def test_asking_torch_guards_nothing_of_dynamos(monkeypatch):
    """CUDA's kernel choice reads some sizes as numbers (BERT at real sizes on an H200: ``Eq(s52, 8)``); asked over
    Dynamo's own fake tensors that fixed every size of the graph, and a second batch size compiled again.  Played
    here by an sdpa that reads the batch size as a number while torch_fuses traces it."""
    real_sdpa = F.scaled_dot_product_attention

    def reads_the_batch(q, *args, **kwargs):
        torch._check(int(q.shape[0]) > 0)
        return real_sdpa(q, *args, **kwargs)

    answers, added = [], []

    def backend(gm, example_inputs):
        node = next(n for n in gm.graph.nodes if n.target is F.scaled_dot_product_attention)
        q, k, v = (a.meta["example_value"] for a in node.args[:3])
        mask = node.kwargs["attn_mask"].meta["example_value"]
        env = q.fake_mode.shape_env
        before = (len(env.guards), dict(env.replacements))
        with monkeypatch.context() as patch:
            patch.setattr(F, "scaled_dot_product_attention", reads_the_batch)
            answers.append(attention_masks.torch_fuses(q, k, v, mask, scale=0.125))
        answers.append(attention_masks.torch_fuses(q, k, v, mask, scale=0.125))
        added.append((len(env.guards), dict(env.replacements)) != before)
        return gm.forward

    fn = torch.compile(attention, backend=backend, dynamic=True)
    for t in (16, 24):
        fn(*inputs(t=t, seed=t))
    fixed, plain = answers
    assert isinstance(fixed, attention_masks.FixesSizes) and fixed.guards.endswith(" == 2"), fixed  # batch 2
    assert plain is True
    assert added == [False], added  # one compile for both sizes, and Dynamo's shapes untouched


def test_a_dense_mask_that_would_fix_sizes_is_declined(tmp_path, monkeypatch):
    def fixes_sizes_when_dense(*args, **kwargs):
        return attention_masks.FixesSizes("Eq(s0, 2)") if cuda_rule(*args, **kwargs) else False

    monkeypatch.setattr(attention_masks, "torch_fuses", fixes_sizes_when_dense)
    fn = torch.compile(attention, backend="fusec", dynamic=True, options={"dump_dir": str(tmp_path)})
    for t in (16, 24):
        args = inputs(torch.bfloat16, t=t, seed=t)
        torch.testing.assert_close(fn(*args), attention(*args), atol=2e-2, rtol=2e-2)
    remarks = _dump_text(tmp_path, "remarks.txt")
    assert "math-attention" in remarks and "reads its sizes as numbers (Eq(s0, 2))" in remarks, remarks
    assert "dense-mask" not in remarks


def test_torch_is_asked_once_per_distinct_call(monkeypatch):
    asked = []

    def counting(*args, **kwargs):
        asked.append(args[3].stride())
        return cuda_rule(*args, **kwargs)

    monkeypatch.setattr(attention_masks, "torch_fuses", counting)

    def layers(q, k, v, keep):
        mask = keep[None, None, :, None].expand(q.shape[0], 1, q.shape[2], q.shape[2])
        for _ in range(4):
            q = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return q

    args = inputs()
    torch.testing.assert_close(torch.compile(layers, backend="fusec")(*args), layers(*args))
    assert len(asked) == 2, asked  # the traced mask, then the dense one: not once per layer
