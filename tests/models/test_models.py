"""Inference of real models from ``transformers`` through backend="fusec", whole graphs only, as eager computes it.

fp32 compares with eager at fp32's tolerances.  bf16 compares with eager's fp32
result, allowing a few times the error eager's own bf16 run makes: rounding
differs between any two bf16 implementations, eager's included.  ``dynamic=True``
runs a second batch size (and sequence length or image size) through the same
compiled graph: the backend compiles once.
"""

from __future__ import annotations

import copy

import pytest
import torch
from compile_watch import watch_compiles
from model_zoo import MODELS, main_output

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def _eager(model, inputs, dtype):
    with torch.no_grad():
        return main_output(model.to(dtype)(**_cast(inputs, dtype))).float()


def _cast(inputs, dtype):
    return {k: v.to(dtype) if v.is_floating_point() else v for k, v in inputs.items()}


def _check(case, compiled, model, inputs, dtype, want):
    """``compiled`` (of ``model``, in ``dtype``) against ``want``, eager's fp32 output."""
    with torch.no_grad():
        got = main_output(compiled(**_cast(inputs, dtype))).float()
    if dtype == torch.float32:
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        return
    eager_error = (_eager(model, inputs, dtype) - want).abs().max().item()
    error = (got - want).abs().max().item()
    assert error <= 4 * eager_error + 1e-3, f"{case.name} bf16: off by {error:.3g}, eager bf16 by {eager_error:.3g}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_inference_matches_eager(name, dtype):
    case = MODELS[name]
    torch.manual_seed(0)
    model = case.build().eval()
    inputs = case.inference_inputs(torch.Generator().manual_seed(1), *case.sizes[0])
    reference = _eager(model, inputs, torch.float32)
    model.to(dtype)
    compiled = torch.compile(model, backend="fusec")
    with watch_compiles() as log:
        _check(case, compiled, model, inputs, dtype, reference)
    log.assert_whole()
    assert log.count("inference") == 1


# Every model, about 5 s each for ResNet and ViT (both were left to the GPU when their dynamic compiles took minutes
# here; sizes such as an unpadded convolution's s - 2 now get derived names: fusec/frontend/derived_sizes.py).
DYNAMIC_ON_CPU = ["bert", "gpt2", "resnet", "vit"]


@pytest.mark.slow
@pytest.mark.parametrize("name", DYNAMIC_ON_CPU)
def test_dynamic_inference_compiles_once_for_two_sizes(name):
    case = MODELS[name]
    torch.manual_seed(0)
    model = case.build().eval()
    compiled = torch.compile(model, backend="fusec", dynamic=True)
    with watch_compiles() as log:
        for seed, size in enumerate(case.sizes):
            inputs = case.inference_inputs(torch.Generator().manual_seed(seed), *size)
            _check(case, compiled, model, inputs, torch.float32, _eager(model, inputs, torch.float32))
    log.assert_whole()
    assert log.count() == 1, f"{name}: {dict(log.graphs)} graphs compiled for two sizes"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_inference_at_real_sizes_on_gpu(name, dtype, dynamic):
    """Real sizes (GPT-2 6x768, BERT 4x768, ViT-tiny 224², ResNet-18), where eager picks cuDNN/flash attention."""
    case = MODELS[name]
    torch.manual_seed(0)
    reference_model = case.build(real=True).eval().to("cuda")
    model = copy.deepcopy(reference_model).to(dtype)
    compiled = torch.compile(model, backend="fusec", dynamic=dynamic)
    sizes = case.real_sizes if dynamic else case.real_sizes[:1]
    # cuDNN's fp32 convolutions default to TF32: inputs rounded to 10 mantissa bits, so a last-bit difference in
    # a fused batch norm before a convolution grows to 1e-2 over ResNet-18.  Both sides in full fp32 instead.
    with watch_compiles() as log, torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        for seed, size in enumerate(sizes):
            inputs = {k: v.cuda() for k, v in case.inference_inputs(torch.Generator().manual_seed(seed), *size).items()}
            _check(case, compiled, model, inputs, dtype, _eager(reference_model, inputs, torch.float32))
    log.assert_whole()
    assert log.count() == 1
