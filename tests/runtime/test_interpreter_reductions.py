"""The interpreter's argmax/argmin of bools (found by the fuzzer: ``torch.max(bools, dim)`` decomposes into amax
and an argmax that the interpreter handed to torch.argmax, which refuses bools), at both IR levels."""

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
