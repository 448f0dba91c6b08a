"""Combo kernels under Triton's interpreter: one launch per combo, results as eager torch computes them."""

import re

import pytest

from fusec.dialects import fusec as F
from fusec.lowering.combo_kernel import lower_combo
from fusec.lowering.triton_kernel import LoweringOptions
from fusec.passes.combo_grouping import ComboGrouping
from fusec.passes.form_kernels import FormKernels
from fusec.passes.schedule_kernels import ScheduleKernels
from fusec.runtime import compile_module, interpreter
from fusec.testing import apply_passes, assert_same_results, kernels, parse, random_inputs, seed_graph, sgd_graph, sgd_kernels

TOL = dict(atol=1e-4, rtol=1e-4)  # reductions sum in another order than torch

MIXED = ["64", "s0", "1000", "4*s1", "3", "s0*s1", "257", "4096", "s1", "16", "2*s0", "100", "31", "s0 + 7", "512", "5"]


def launches(compiled) -> list[str]:
    """The kernels one call launches, in order (one launch per line of the launcher)."""
    return re.findall(r"^\s+(\w+)\.launch\(", compiled.source, re.M)


def grouped(text: str, **options):
    module = parse(text)
    apply_passes(module, FormKernels(), ComboGrouping(**options))
    return module


def eager_sgd(inputs):
    return [p - 0.01 * (g + 0.1 * p) for p, g in zip(inputs[0::2], inputs[1::2], strict=True)]


# ---------------------------------------------------------------- the seed talk's example


@pytest.mark.slow  # Triton's interpreter runs tl.reduce with a @jit combine element by element: 64 rows, not 1024
def test_seed_reductions_one_launch_matching_eager():
    module = grouped(seed_graph("64"))
    compiled = compile_module(module)
    assert launches(compiled) == ["fusec_combo_0"]
    inputs = random_inputs(module, {}, seed=1)
    out = compiled(inputs)
    t1, t2, t3, t4 = inputs
    assert_same_results([t1.sum(1), t2.amax(1), t3.amin(1), t4.sum(1)], out, **TOL)


def test_combo_source_routes_programs_to_sub_kernels():
    module = grouped(seed_graph("s0", "s0 in [1, 100000]"))
    (combo,) = [op for op in module.walk() if isinstance(op, F.ComboOp)]
    tc = lower_combo(combo, {"s0": 1024})
    src = tc.source
    assert len(re.findall(r"^def fusec_combo_0\(", src, re.M)) == 1
    assert "pid = tl.program_id(0)" in src and src.count("tl.program_id") == 1
    for i in range(4):
        assert f"XBLOCK_{i}: tl.constexpr" in src and f"RBLOCK_{i}: tl.constexpr" in src
        assert f"xnumel_{i}, rnumel_{i}" in src
    assert re.search(r"^    if pid < num_blocks_0:$", src, re.M)
    assert [int(n) for n in re.findall(r"^    elif pid < num_blocks_(\d+):$", src, re.M)] == [1, 2, 3]
    assert "xoffset_0 = pid * XBLOCK_0" in src  # int32 indexing: s0 is bounded
    assert "xoffset_2 = (pid - num_blocks_1) * XBLOCK_2" in src
    assert [m.kernel.kind for m in tc.members] == ["persistent"] * 4
    assert [n for n, _ in tc.size_args] == [f"{w}numel_{i}" for i in range(4) for w in "xr"]


def test_symbolic_rows_one_artifact_two_sizes():
    module = grouped(seed_graph("s0", "s0 in [2, inf]"))
    compiled = compile_module(module, {"s0": 1024})
    assert launches(compiled) == ["fusec_combo_0"]
    for s0 in (3, 20):
        inputs = random_inputs(module, {"s0": s0}, seed=s0)
        t1, t2, t3, t4 = inputs
        assert_same_results([t1.sum(1), t2.amax(1), t3.amin(1), t4.sum(1)], compiled(inputs), **TOL)


def test_persistent_reduction_with_symbolic_rnumel():
    text = """
builtin.module {
  fusec.graph @g(%a : !fusec.tensor<[s0, s1], f32>, %b : !fusec.tensor<[s0, s1], f32>) -> (!fusec.tensor<[s0], f32>, !fusec.tensor<[s0], i64>) symbols(s0 in [1, inf], s1 in [1, 1024]) {
    %x = fusec.reduce "sum" %a dims [1] : !fusec.tensor<[s0, s1], f32> -> !fusec.tensor<[s0], f32>
    %y = fusec.reduce "argmax" %b dims [1] : !fusec.tensor<[s0, s1], f32> -> !fusec.tensor<[s0], i64>
    fusec.output %x, %y : !fusec.tensor<[s0], f32>, !fusec.tensor<[s0], i64>
  }
}"""
    module = grouped(text)
    compiled = compile_module(module, {"s0": 64, "s1": 128})
    (name,) = launches(compiled)
    (tc,) = compiled.kernels
    assert [m.kernel.kind for m in tc.members] == ["persistent", "persistent"]
    for s0, s1 in ((5, 7), (9, 300)):  # RBLOCK follows each call's rnumel
        inputs = random_inputs(module, {"s0": s0, "s1": s1}, seed=s1)
        a, b = inputs
        assert_same_results([a.sum(1), b.argmax(1)], compiled(inputs), **TOL)


# ---------------------------------------------------------------- an optimizer step


def test_optimizer_update_kernels_at_most_two_launches():
    module = parse(sgd_kernels(MIXED))
    apply_passes(module, ComboGrouping())
    compiled = compile_module(module, {"s0": 512, "s1": 64})
    assert len(launches(compiled)) <= 2 and all(n.startswith("fusec_combo_") for n in launches(compiled))
    for sizes in ({"s0": 3, "s1": 2}, {"s0": 40, "s1": 9}):  # one artifact, two sizes
        inputs = random_inputs(module, sizes, seed=sizes["s0"])
        assert_same_results(eager_sgd(inputs), compiled(inputs))


def test_optimizer_update_from_graph_ops_keeps_results():
    # Without vertical fusion each update is four dependent kernels: combos group them level by level
    # only where peak memory allows; whatever the grouping, the results stay eager's.
    module = grouped(sgd_graph(["64", "s0", "s1", "4*s1", "3", "s0*s1"]))
    compiled = compile_module(module, {"s0": 64, "s1": 8})
    assert any(n.startswith("fusec_combo_") for n in launches(compiled))
    inputs = random_inputs(module, {"s0": 6, "s1": 3}, seed=4)
    assert_same_results(eager_sgd(inputs), compiled(inputs))


def test_optimizer_step_through_vertical_fusion_two_launches():
    from fusec.registry import PASSES

    if "vertical-fusion" not in PASSES:
        pytest.skip("vertical-fusion is not written yet")
    module = parse(sgd_graph(MIXED))
    apply_passes(module, FormKernels(), PASSES["vertical-fusion"]()(), ComboGrouping())
    compiled = compile_module(module, {"s0": 512, "s1": 64})
    assert launches(compiled) == ["fusec_combo_0", "fusec_combo_1"]  # 16 updates, 8 a combo
    for sizes in ({"s0": 2, "s1": 5}, {"s0": 33, "s1": 4}):
        inputs = random_inputs(module, sizes, seed=sizes["s1"])
        assert_same_results(eager_sgd(inputs), compiled(inputs))


# ---------------------------------------------------------------- mixed kinds, shared inputs


def test_pointwise_and_looped_reduction_in_one_combo_sharing_an_input():
    text = """
builtin.module {
  fusec.graph @g(%a : !fusec.tensor<[s0, s1], f32>) -> (!fusec.tensor<[s0, s1], f32>, !fusec.tensor<[s0], f32>, !fusec.tensor<[s0], f32>) symbols(s0 in [1, inf], s1 in [1, inf]) {
    %e = fusec.pointwise "exp" %a : (!fusec.tensor<[s0, s1], f32>) -> !fusec.tensor<[s0, s1], f32>
    %m = fusec.reduce "max" %a dims [1] : !fusec.tensor<[s0, s1], f32> -> !fusec.tensor<[s0], f32>
    %s = fusec.reduce "sum" %a dims [1] : !fusec.tensor<[s0, s1], f32> -> !fusec.tensor<[s0], f32>
    fusec.output %e, %m, %s : !fusec.tensor<[s0, s1], f32>, !fusec.tensor<[s0], f32>, !fusec.tensor<[s0], f32>
  }
}"""
    module = grouped(text, size_hints=("s0=64", "s1=64"))
    compiled = compile_module(module, {"s0": 64, "s1": 64}, options=LoweringOptions(max_rblock=16, runtime_persistent=False))
    (tc,) = compiled.kernels
    assert [m.kernel.kind for m in tc.members] == ["pointwise", "looped", "looped"]  # s1 unbounded: looped
    assert len(tc.pointers) == 4  # %a passed once, three outputs
    assert "for roffset_1 in range(0, rnumel_1_v, RBLOCK_1)" in tc.source or "for roffset_1 in range(0, rnumel_1, RBLOCK_1)" in tc.source
    for s0, s1 in ((3, 40), (17, 5)):
        inputs = random_inputs(module, {"s0": s0, "s1": s1}, seed=s0)
        (a,) = inputs
        assert_same_results([a.exp(), a.amax(1), a.sum(1)], compiled(inputs), **TOL)


def test_combo_of_symbolic_rows_runs_its_members_persistent_forms_when_every_row_fits():
    """Members over a symbolic rnumel share the launch: one combo of their persistent forms runs when each member's
    rows fit (``persistent_up_to``), the looped combo otherwise; both give eager's results."""
    text = """
builtin.module {
  fusec.graph @g(%a : !fusec.tensor<[s0, s1], f32>, %b : !fusec.tensor<[s0, s2], f32>) -> (!fusec.tensor<[s0], f32>, !fusec.tensor<[s0], f32>, !fusec.tensor<[s0, s1], f32>) symbols(s0 in [1, inf], s1 in [1, inf], s2 in [1, inf]) {
    %m = fusec.reduce "max" %a dims [1] : !fusec.tensor<[s0, s1], f32> -> !fusec.tensor<[s0], f32>
    %s = fusec.reduce "sum" %b dims [1] : !fusec.tensor<[s0, s2], f32> -> !fusec.tensor<[s0], f32>
    %e = fusec.pointwise "exp" %a : (!fusec.tensor<[s0, s1], f32>) -> !fusec.tensor<[s0, s1], f32>
    fusec.output %m, %s, %e : !fusec.tensor<[s0], f32>, !fusec.tensor<[s0], f32>, !fusec.tensor<[s0, s1], f32>
  }
}"""
    module = grouped(text, size_hints=("s0=64", "s1=64", "s2=64"))
    apply_passes(module, ScheduleKernels(persistent_threshold=32, max_rblock=16))
    compiled = compile_module(module, {"s0": 64, "s1": 64, "s2": 64})
    looped, persistent = compiled.kernels
    assert [m.kernel.kind for m in looped.members] == ["looped", "looped", "pointwise"]
    assert persistent.name == f"{looped.name}_persistent"
    assert [m.kernel.kind for m in persistent.members] == ["persistent", "persistent", "pointwise"]
    assert "if s1 <= 32 and s2 <= 32:" in compiled.source
    for s0, s1, s2 in ((5, 7, 32), (3, 40, 9), (4, 33, 50)):  # both fit; one does not; neither
        inputs = random_inputs(module, {"s0": s0, "s1": s1, "s2": s2}, seed=s1)
        a, b = inputs
        assert_same_results([a.amax(1), b.sum(1), a.exp()], compiled(inputs), **TOL)

def test_combo_with_views_and_extern_around_it():
    text = """
builtin.module {
  fusec.graph @g(%a : !fusec.tensor<[8, 6], f32>, %b : !fusec.tensor<[6, 8], f32>) -> (!fusec.tensor<[8, 8], f32>, !fusec.tensor<[6], f32>) {
    %t = fusec.permute %b [1, 0] : !fusec.tensor<[6, 8], f32> -> !fusec.tensor<[8, 6], f32>
    %s = fusec.pointwise "sigmoid" %t : (!fusec.tensor<[8, 6], f32>) -> !fusec.tensor<[8, 6], f32>
    %n = fusec.pointwise "neg" %a : (!fusec.tensor<[8, 6], f32>) -> !fusec.tensor<[8, 6], f32>
    %c = fusec.reduce "sum" %a dims [0] : !fusec.tensor<[8, 6], f32> -> !fusec.tensor<[6], f32>
    %st = fusec.permute %s [1, 0] : !fusec.tensor<[8, 6], f32> -> !fusec.tensor<[6, 8], f32>
    %m:1 = fusec.extern "aten.mm.default"(%n, %st) : (!fusec.tensor<[8, 6], f32>, !fusec.tensor<[6, 8], f32>) -> (!fusec.tensor<[8, 8], f32>)
    fusec.output %m, %c : !fusec.tensor<[8, 8], f32>, !fusec.tensor<[6], f32>
  }
}"""
    module = grouped(text)
    compiled = compile_module(module)
    assert launches(compiled)[0].startswith("fusec_combo_")
    inputs = random_inputs(module, {}, seed=2)
    before = interpreter.run(parse(text), inputs)
    assert_same_results(before, compiled(inputs), **TOL)


@pytest.mark.parametrize("dtype", ["f16", "f64"])
def test_other_dtypes(dtype):
    module = grouped(seed_graph("s0", "s0 in [1, inf]").replace("f32", dtype))
    compiled = compile_module(module, {"s0": 16})
    inputs = random_inputs(module, {"s0": 6}, seed=3)
    t1, t2, t3, t4 = inputs
    want = [t1.float().sum(1).to(t1.dtype), t2.amax(1), t3.amin(1), t4.float().sum(1).to(t4.dtype)]
    assert_same_results(want, compiled(inputs), atol=1e-2, rtol=1e-2)


def test_benchmark_launches_compute_the_same_both_ways():
    from fusec.analysis.cost_model import SizeHints
    from fusec.runtime.combo_benchmark import benchmark_launches, time_separate_and_combo

    module = parse(seed_graph("s0", "s0 in [1, inf]"))
    apply_passes(module, FormKernels())
    members = kernels(module)
    hints = SizeHints({"s0": 5})
    separate, together, buffers = benchmark_launches(members, hints, device="cpu", interpret=True)
    outputs = [buffers[k.results[0]] for k in members]
    separate()
    first = [o.clone() for o in outputs]
    for o in outputs:
        o.fill_(float("nan"))
    together()
    assert_same_results(first, outputs)
    calls = []
    us = time_separate_and_combo(members, hints, device="cpu", interpret=True, timer=lambda fn: calls.append(fn()) or 0.5)
    assert us == (500.0, 500.0) and len(calls) == 2


def test_benchmark_timing_works_inside_a_fake_tensor_mode():
    """combo-grouping{benchmark=true} runs inside torch.compile, under AOTAutograd's fake-tensor mode:
    the timing must still allocate real buffers and launch (found on the H100: data_ptr of a FakeTensor)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from fusec.analysis.cost_model import SizeHints
    from fusec.runtime.combo_benchmark import time_separate_and_combo

    module = parse(seed_graph("4"))
    apply_passes(module, FormKernels())
    launched = []
    with FakeTensorMode():
        us = time_separate_and_combo(kernels(module), SizeHints({}), device="cpu", interpret=True,
                                     timer=lambda fn: launched.append(fn()) or 0.25)
    assert us == (250.0, 250.0) and len(launched) == 2
