"""A misaligned input whose layout uses symbols no kernel needs (found by the fuzzer: the gradient of a
program returning a strided input beside a reduction raised ``NameError: name 's3' is not defined`` when
the input started at an odd element; the launcher bound only the symbols of its kernels)."""

from __future__ import annotations

import pytest
import torch

from fusec.passes.form_kernels import FormKernels
from fusec.runtime import compile_module
from fusec.testing import apply_passes, parse

GRAPH = """builtin.module {
  fusec.graph @g(%a : !fusec.tensor<[s0], f32, strides [s1]>, %b : !fusec.tensor<[s2, s2], f32, strides [s3, 1]>) -> (!fusec.tensor<[], f32>, !fusec.tensor<[s2, s2], f32, strides [s3, 1]>) symbols(s0 in [1, inf], s1 in [1, inf], s2 in [1, inf], s3 in [1, inf]) {
    %s = fusec.reduce "sum" %a dims [0] : !fusec.tensor<[s0], f32, strides [s1]> -> !fusec.tensor<[], f32>
    fusec.output %s, %b : !fusec.tensor<[], f32>, !fusec.tensor<[s2, s2], f32, strides [s3, 1]>
  }
}"""


@pytest.mark.parametrize("checks", ["all", "layout", "alignment"])
def test_a_misaligned_input_is_copied_into_its_layout_in_every_checking_mode(checks):
    compiled = compile_module(apply_passes(parse(GRAPH), FormKernels()), {"s0": 5, "s2": 3}, input_checks=checks)
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(11, generator=gen)[1::2]  # starts 4 bytes in: misaligned
    b = torch.randn(3 * 7 + 1, generator=gen)[1:].as_strided((3, 3), (7, 1))
    total, same_b = compiled([a, b])
    torch.testing.assert_close(total, a.sum())
    # The kernels read an aligned copy; the output that is the input is the caller's tensor, as in eager (an output
    # aliasing an input must be a view of the caller's tensor: AOTAutograd rebuilds such aliases from it).
    assert same_b.data_ptr() == b.data_ptr() and same_b.stride() == (7, 1)
    torch.testing.assert_close(same_b, b)
