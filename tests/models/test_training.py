"""One training step of real models from ``transformers`` through backend="fusec": loss and every gradient as eager's."""

from __future__ import annotations

import copy

import pytest
import torch
from compile_watch import watch_compiles
from model_zoo import MODELS, transformers

from fusec.pipeline import default_pipeline_spec

# A graph that fell back to eager would match eager trivially: fail instead.
pytestmark = [pytest.mark.usefixtures("fresh_dynamo"), pytest.mark.slow,
              pytest.mark.filterwarnings("error:fusec. graph .* runs with torch")]


def _step(model, case, inputs):
    model.zero_grad(set_to_none=True)
    loss = case.loss(model(**inputs))
    loss.backward()
    return loss.detach(), {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


def _assert_gradients_close(name, got, want, tolerance):
    """Each gradient within ``tolerance`` of its size, a size of at least 1e-4 of the model's largest gradient: a
    gradient that is zero in exact arithmetic (attention's key bias: softmax ignores a constant added to a row,
    1e-20 in an fp64 step) is rounding noise in eager and in fusec alike, and only its size against the others
    can be judged (tiny ViT, bf16, H100: 6e-8 in both, against gradients up to 5e-2)."""
    assert sorted(got) == sorted(want)
    floor = 1e-4 * max(g.abs().max().item() for g in want.values())
    for n in want:
        scale = max(want[n].abs().max().item(), floor)
        error = (got[n] - want[n]).abs().max().item() / scale
        assert error < tolerance, f"{name}: gradient of {n} off by {error:.2e} of its size"


@pytest.mark.parametrize("name", sorted(MODELS))
def test_training_step_matches_eager(name):
    case = MODELS[name]
    torch.manual_seed(0)
    eager = case.build().train()
    compiled = copy.deepcopy(eager)
    inputs = case.inputs(torch.Generator().manual_seed(1), *case.sizes[0])
    want_loss, want = _step(eager, case, inputs)
    compiled.compile(backend="fusec")  # in place: parameter names stay the model's own
    with watch_compiles() as log:
        got_loss, got = _step(compiled, case, inputs)
    log.assert_whole()
    assert (log.count("forward"), log.count("backward")) == (1, 1), dict(log.graphs)
    torch.testing.assert_close(got_loss, want_loss, rtol=1e-4, atol=1e-5)
    _assert_gradients_close(name, got, want, 1e-3)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_training_step_matches_eager_on_gpu(name, dtype, dynamic):
    """The same step on the GPU, where eager picks fused attention kernels (flash, cuDNN, memory-efficient)."""
    case = MODELS[name]
    torch.manual_seed(0)
    eager = case.build().train().to("cuda", dtype)
    compiled = copy.deepcopy(eager)
    inputs = {k: v.to("cuda", dtype) if v.is_floating_point() else v.to("cuda")
              for k, v in case.inputs(torch.Generator().manual_seed(1), *case.sizes[0]).items()}
    # fp32 in full fp32 on both sides (cuDNN's default TF32 rounds convolution inputs to 10 mantissa bits, and
    # eager's NCHW and fusec's channels-last kernels round differently): the TF32 test below checks that path.
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        want_loss, want = _step(eager, case, inputs)
        compiled.compile(backend="fusec", dynamic=dynamic)
        with watch_compiles() as log:
            got_loss, got = _step(compiled, case, inputs)
    log.assert_whole()
    tol = 1e-4 if dtype == torch.float32 else 3e-2
    torch.testing.assert_close(got_loss, want_loss, rtol=tol, atol=tol)
    _assert_gradients_close(name, got, want, 1e-3 if dtype == torch.float32 else 6e-2)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_fp32_training_with_tf32_convolutions_is_as_accurate_as_eager():
    """fp32 convolutions with cuDNN's default TF32 (fusec lays them out channels-last, as cuDNN computes them): every
    gradient as close to an fp64 step as eager's TF32 step on channels-last tensors (the same cuDNN kernels).  TF32
    is coarse here: a convolution before a batch norm has a weight gradient of cancelling terms (the norm's
    gradient is orthogonal to its input's mean), 4% of its size off in both -- where eager's NCHW kernels for these
    tiny sizes happen to stay in full fp32."""
    case = MODELS["resnet"]
    torch.manual_seed(0)
    reference = case.build().train().to("cuda", torch.float64)
    compiled = copy.deepcopy(reference).to(torch.float32)
    eager = copy.deepcopy(compiled).to(memory_format=torch.channels_last)
    inputs = case.inputs(torch.Generator().manual_seed(1), *case.sizes[0])
    on = {k: v.to("cuda", torch.float32) if v.is_floating_point() else v.to("cuda") for k, v in inputs.items()}
    _, exact = _step(reference, case, {k: v.double() if v.is_floating_point() else v for k, v in on.items()})
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=True):
        _, want = _step(eager, case, {k: v.contiguous(memory_format=torch.channels_last) if v.dim() == 4 else v
                                      for k, v in on.items()})
        compiled.compile(backend="fusec")
        with watch_compiles() as log:
            _, got = _step(compiled, case, on)
    log.assert_whole()
    for n in exact:
        scale = exact[n].abs().max().item() + 1e-6
        eager_error = (want[n].double() - exact[n]).abs().max().item() / scale
        error = (got[n].double() - exact[n]).abs().max().item() / scale
        assert error < 2 * eager_error + 1e-4, f"gradient of {n}: {error:.2e} of its size off, eager's TF32 {eager_error:.2e}"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype,passes", [(torch.float32, ""), (torch.bfloat16, ""),
                                          (torch.bfloat16, "embedding-gradients{when=never}")],
                         ids=["fp32", "bf16", "bf16-torch-embedding-gradients"])
def test_a_gpt2_step_with_its_real_vocabulary_on_gpu(dtype, passes):
    """GPT-2's 50257-word vocabulary (rows of 50257 bf16: misaligned, so pad-matmuls pads the LM head and its
    gradients, and matmul-epilogues computes the logits and the tied weight's gradient, plus the embedding's, as
    blocks of padded products: persistent TMA kernels on Hopper at 4 x 256 tokens), two 768-wide layers: the loss
    and every gradient as close to eager's fp32 step as eager's own step in ``dtype`` is, a few times over.
    ``passes``: a pass of the default pipeline given other options (embedding-gradients off: torch's kernel)."""
    config = transformers.GPT2Config(vocab_size=50257, n_layer=2, n_embd=768, n_head=12, n_positions=1024,
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    torch.manual_seed(0)
    reference = transformers.GPT2LMHeadModel(config).train().to("cuda")
    reference.loss_type = "ForCausalLM"
    eager = copy.deepcopy(reference).to(dtype)
    compiled = copy.deepcopy(eager)
    ids = torch.randint(0, 50257, (4, 256), generator=torch.Generator().manual_seed(1)).cuda()
    inputs = {"input_ids": ids, "labels": ids}
    case = MODELS["gpt2"]
    exact_loss, exact = _step(reference, case, inputs)
    eager_loss, own = _step(eager, case, inputs)
    spec = default_pipeline_spec()
    if passes:
        spec = spec.replace(passes.split("{")[0] + ",", passes + ",")
        assert passes in spec
    compiled.compile(backend="fusec", options={"pipeline": spec})
    with watch_compiles() as log:
        got_loss, got = _step(compiled, case, inputs)
    log.assert_whole()
    assert sorted(got) == sorted(exact)
    floor = 1e-4 * max(g.abs().max().item() for g in exact.values())
    for n in exact:
        scale = max(exact[n].abs().max().item(), floor)
        own_error = (own[n].float() - exact[n]).abs().max().item() / scale
        error = (got[n].float() - exact[n]).abs().max().item() / scale
        assert error <= 4 * own_error + (1e-3 if dtype == torch.float32 else 1e-2), \
            f"gradient of {n} off by {error:.2e} of its size, eager's own {dtype} step by {own_error:.2e}"
    assert abs(got_loss.float() - exact_loss) <= 4 * abs(eager_loss.float() - exact_loss) + 1e-3
