"""Register pressure of kernel bodies, and the launch heuristics' limit on elements a thread holds."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fusec.analysis import heuristics
from fusec.analysis.register_pressure import per_thread_limit, registers_per_element
from fusec.passes.form_kernels import FormKernels
from fusec.passes.tile_pointwise import TilePointwise
from fusec.passes.vertical_fusion import VerticalFusion
from fusec.testing import apply_passes, kernels, parse

ROTARY = """
builtin.module {
  fusec.graph @rotary(%q : !fusec.tensor<[64, 256], f32>, %f : !fusec.tensor<[64], f32>) -> (!fusec.tensor<[256, 64], f32>) {
    %t = fusec.permute %q [1, 0] : !fusec.tensor<[64, 256], f32> -> !fusec.tensor<[256, 64], f32, strides [1, 256]>
    %fe = fusec.expand %f : !fusec.tensor<[64], f32> -> !fusec.tensor<[256, 64], f32, strides [0, 1]>
    %a = fusec.pointwise "mul" %t, %fe : (!fusec.tensor<[256, 64], f32, strides [1, 256]>, !fusec.tensor<[256, 64], f32, strides [0, 1]>) -> !fusec.tensor<[256, 64], f32>
    %c = fusec.pointwise "cos" %a : (!fusec.tensor<[256, 64], f32>) -> !fusec.tensor<[256, 64], f32>
    %s = fusec.pointwise "sin" %a : (!fusec.tensor<[256, 64], f32>) -> !fusec.tensor<[256, 64], f32>
    %qc = fusec.pointwise "mul" %t, %c : (!fusec.tensor<[256, 64], f32, strides [1, 256]>, !fusec.tensor<[256, 64], f32>) -> !fusec.tensor<[256, 64], f32>
    %qs = fusec.pointwise "mul" %a, %s : (!fusec.tensor<[256, 64], f32>, !fusec.tensor<[256, 64], f32>) -> !fusec.tensor<[256, 64], f32>
    %r = fusec.pointwise "add" %qc, %qs : (!fusec.tensor<[256, 64], f32>, !fusec.tensor<[256, 64], f32>) -> !fusec.tensor<[256, 64], f32>
    %o = fusec.pointwise "mul" %r, %t : (!fusec.tensor<[256, 64], f32>, !fusec.tensor<[256, 64], f32, strides [1, 256]>) -> !fusec.tensor<[256, 64], f32>
    fusec.output %o : !fusec.tensor<[256, 64], f32>
  }
}
"""


def negation(dtype: str):
    return parse(f"""
builtin.module {{
  fusec.graph @neg(%x : !fusec.tensor<[4096], {dtype}>) -> (!fusec.tensor<[4096], {dtype}>) {{
    %n = fusec.pointwise "neg" %x : (!fusec.tensor<[4096], {dtype}>) -> !fusec.tensor<[4096], {dtype}>
    fusec.output %n : !fusec.tensor<[4096], {dtype}>
  }}
}}""")


def only_kernel(module):
    (kernel,) = kernels(module)
    return kernel


def test_a_light_kernel_holds_a_value_and_an_address_an_element_and_gets_no_limit():
    kernel = only_kernel(apply_passes(negation("f32"), FormKernels()))
    assert registers_per_element(kernel) == 2
    assert per_thread_limit(kernel, "pointwise", budget=64) is None


def test_a_64_bit_value_takes_two_registers_an_element():
    kernel = only_kernel(apply_passes(negation("i64"), FormKernels()))
    assert registers_per_element(kernel) == 4  # the loaded value and its negation, live at once: twice f32's


def test_a_heavy_tiled_body_gets_a_power_of_2_limit_within_the_budget():
    kernel = only_kernel(apply_passes(parse(ROTARY), FormKernels(), VerticalFusion(), TilePointwise()))
    assert kernel.is_tiled
    per_element = registers_per_element(kernel)
    assert per_element >= 5  # the transposed load, the angle, cos and sin live at once
    limit = per_thread_limit(kernel, "tiled", budget=64)
    assert limit is not None and limit & (limit - 1) == 0
    assert per_element * limit <= 64 < per_element * limit * 2
    assert per_thread_limit(kernel, "tiled", budget=64 * 32) is None  # a budget that fits every tile binds nothing
    assert per_thread_limit(kernel, "tiled", budget=0) is None  # register-budget=0: no limit
    assert per_thread_limit(kernel, "tiled", outer=True, budget=64) == 2 * limit  # column sums get twice the budget


KINDS = ["pointwise", "tiled", "persistent", "looped"]


def config(kind: str, xnumel: int, rnumel: int, outer: bool, per_thread: int) -> heuristics.LaunchConfig:
    if kind == "pointwise":
        return heuristics.pointwise_config(xnumel, per_thread)
    if kind == "tiled":
        return heuristics.tiled_config(xnumel, rnumel, per_thread)
    if kind == "persistent":
        return heuristics.persistent_config(xnumel, min(rnumel, heuristics.PERSISTENT_THRESHOLD), outer, per_thread)
    return heuristics.looped_config(xnumel, rnumel, outer, 4096, per_thread)


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from(KINDS), xnumel=st.integers(1, 1 << 22), rnumel=st.integers(1, 1 << 16), outer=st.booleans(),
       per_thread=st.sampled_from([0, 1, 2, 4, 8, 16, 32]))
def test_configs_keep_to_the_limit_and_without_one_to_most_per_thread(kind, xnumel, rnumel, outer, per_thread):
    outer = outer and kind in ("persistent", "looped")
    cfg = config(kind, xnumel, rnumel, outer, per_thread)
    held = cfg.xblock * max(cfg.rblock, 1) // (32 * cfg.num_warps)
    for v in (cfg.xblock, max(cfg.rblock, 1), cfg.num_warps):
        assert v >= 1 and v & (v - 1) == 0
    assert cfg.num_warps <= 16
    if per_thread == 0:
        assert held <= heuristics.most_per_thread(kind, outer)
    elif kind == "persistent" and cfg.xblock == 1 and cfg.num_warps == 16:
        pass  # a whole row of up to 4096 elements stays in one program: 8 a thread at most
    else:
        assert held <= per_thread, cfg
    if per_thread >= heuristics.most_per_thread(kind, outer):  # a limit that does not bind changes nothing
        assert cfg == config(kind, xnumel, rnumel, outer, 0)


def rotary(q, freqs):
    angle = q.transpose(0, 1) * freqs
    return (q.transpose(0, 1) * angle.cos() + angle * angle.sin()) * q.transpose(0, 1)


@pytest.mark.usefixtures("fresh_dynamo")
def test_a_limited_kernel_gives_eagers_results(tmp_path):
    q = torch.randn(64, 200, generator=torch.Generator().manual_seed(0))
    freqs = torch.rand(64, generator=torch.Generator().manual_seed(1))
    got = torch.compile(rotary, backend="fusec", options={"dump_dir": str(tmp_path)})(q, freqs)
    torch.testing.assert_close(got, rotary(q, freqs))
    (final,) = tmp_path.glob("*/final.mlir")
    assert "per_thread = " in final.read_text()  # the launch ran under the limit
