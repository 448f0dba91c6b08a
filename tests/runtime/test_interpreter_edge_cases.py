"""Edge cases of the reference interpreter the fuzzer found: argmax/argmin of bools (``torch.max(bools, dim)``
decomposes into amax and an argmax the interpreter handed to torch.argmax, which refuses bools), and an empty
slice whose start lies past the end (``x[2:-1:3]`` of one row: eager clamps it, ``narrow`` raised)."""

from __future__ import annotations

import pytest
import torch

from fusec.passes.form_kernels import FormKernels
from fusec.runtime import interpreter
from fusec.testing import apply_passes, graph_text, parse, tensor_type


@pytest.mark.parametrize("kind", ["argmax", "argmin"])
@pytest.mark.parametrize("kernels", [False, True], ids=["graph", "kernel"])
def test_argmax_and_argmin_of_bools_give_the_first_extreme(kind, kernels):
    t, r = tensor_type("s0, 7", "i1"), tensor_type("s0", "i64")
    body = f"""    %a = fusec.reduce "{kind}" %x dims [1] : {t} -> {r}
    fusec.output %a : {r}"""
    module = parse(graph_text(f"%x : {t}", r, body))
    if kernels:
        apply_passes(module, FormKernels())
    x = torch.rand(5, 7, generator=torch.Generator().manual_seed(0)) > 0.6
    x[1], x[2] = False, True  # ties everywhere: the first index
    (got,) = interpreter.run(module, [x])
    assert torch.equal(got, getattr(torch, kind)(x.to(torch.uint8), 1))


@pytest.mark.parametrize("kernels", [False, True], ids=["graph", "kernel"])
def test_an_empty_slice_starting_past_the_end(kernels):
    t = tensor_type("s0")
    body = f"""    %r = fusec.reduce "sum" %x dims [0] keepdim : {t} -> !fusec.tensor<[1], f32>
    %s = fusec.slice %r dim 0 start 2 step 3 : !fusec.tensor<[1], f32> -> !fusec.tensor<[0], f32, strides [3]>
    fusec.output %s : !fusec.tensor<[0], f32, strides [3]>"""
    module = parse(graph_text(f"%x : {t}", "!fusec.tensor<[0], f32, strides [3]>", body))
    if kernels:
        apply_passes(module, FormKernels())
    x = torch.randn(6, generator=torch.Generator().manual_seed(0))
    (got,) = interpreter.run(module, [x])
    want = x.sum(0, keepdim=True)[2:-1:3]
    assert got.shape == want.shape == (0,) and got.dtype == want.dtype


def test_a_kernel_over_no_elements_makes_no_loads():
    """``x[3:2].to(f16)`` of one element: the kernel's load index folds to the constant 3 (its domain is empty),
    which lies past the buffer's end; a Triton grid of no programs never reads it, nor may the interpreter."""
    body = """    %s = fusec.slice %x dim 0 start 3 step 1 : !fusec.tensor<[1], f32> -> !fusec.tensor<[0], f32>
    %h = fusec.pointwise "convert" %s : (!fusec.tensor<[0], f32>) -> !fusec.tensor<[0], f16>
    fusec.output %h : !fusec.tensor<[0], f16>"""
    module = parse(graph_text("%x : !fusec.tensor<[1], f32>", "!fusec.tensor<[0], f16>", body))
    apply_passes(module, FormKernels())
    assert "[3] : !fusec.tensor<[1], f32>" in str(module), "the load's index folded to a constant"
    (got,) = interpreter.run(module, [torch.randn(1, generator=torch.Generator().manual_seed(0))])
    assert got.shape == (0,) and got.dtype == torch.float16
