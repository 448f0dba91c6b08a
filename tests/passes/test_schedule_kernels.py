"""schedule-kernels: what it records, that the lowering obeys it, and that it is the lowering's own decision."""

import pytest
from xdsl.utils.exceptions import VerifyException

from fusec.analysis import heuristics
from fusec.base import remarks
from fusec.dialects import fusec as F
from fusec.lowering.triton_kernel import LoweringOptions, lower_kernel
from fusec.passes.combo_grouping import ComboGrouping
from fusec.passes.form_kernels import FormKernels
from fusec.passes.schedule_kernels import ScheduleKernels
from fusec.testing import apply_passes, parse, print_ir, run_passes_checked, seed_graph

ROWS = """builtin.module {
  fusec.graph @g(%x : !fusec.tensor<[8, 512], f32>, %y : !fusec.tensor<[8, s0], f32>) -> (!fusec.tensor<[8], f32>, !fusec.tensor<[8], f32>) symbols(s0 in [1, inf]) {
    %a = fusec.reduce "sum" %x dims [1] : !fusec.tensor<[8, 512], f32> -> !fusec.tensor<[8], f32>
    %b = fusec.reduce "max" %y dims [1] : !fusec.tensor<[8, s0], f32> -> !fusec.tensor<[8], f32>
    fusec.output %a, %b : !fusec.tensor<[8], f32>, !fusec.tensor<[8], f32>
  }
}"""


def all_kernels(module) -> list[F.KernelOp]:
    return [op for op in module.walk() if isinstance(op, F.KernelOp)]


def test_records_kind_index_and_final_name():
    module, _ = run_passes_checked(ROWS, FormKernels(), ScheduleKernels())
    a, b = all_kernels(module)
    assert (a.sym_name.data, a.schedule) == ("fusec_per_sum_0", F.KernelSchedule("persistent", "int32"))
    # s0 is unbounded: looped, and a call whose rows fit in 4096 runs the persistent form
    assert (b.sym_name.data, b.schedule) == ("fusec_red_max_1", F.KernelSchedule("looped", "int64", False, 4096, 4096))


def test_symbolic_rows_get_a_persistent_form_unless_asked_not_to():
    module = apply_passes(parse(ROWS), FormKernels(), ScheduleKernels(runtime_persistent=False))
    assert all_kernels(module)[1].schedule == F.KernelSchedule("looped", "int64", False, 4096)
    module = apply_passes(parse(ROWS), FormKernels(), ScheduleKernels())
    looped = lower_kernel(all_kernels(module)[1])
    assert (looped.kind, looped.persistent_up_to, looped.persistent_form.kind) == ("looped", 4096, "persistent")
    assert looped.persistent_form.name == "fusec_per_max_1"
    # rows whose bounds keep them longer than the threshold have no persistent form
    longer = apply_passes(parse(ROWS.replace("s0 in [1, inf]", "s0 in [5000, inf]")), FormKernels(), ScheduleKernels())
    assert all_kernels(longer)[1].schedule.persistent_up_to is None


def test_options_choose_the_looped_form():
    module = apply_passes(parse(ROWS), FormKernels(), ScheduleKernels(persistent_threshold=0, max_rblock=32))
    assert [k.schedule.kind for k in all_kernels(module)] == ["looped", "looped"]
    assert {k.schedule.max_rblock for k in all_kernels(module)} == {32}


@pytest.mark.parametrize("options", [dict(persistent_threshold=-1), dict(max_rblock=48), dict(max_rblock=1)])
def test_bad_options_are_refused(options):
    with pytest.raises(ValueError, match="must be"):
        ScheduleKernels(**options)


def test_running_it_twice_changes_nothing():
    once = apply_passes(parse(ROWS), FormKernels(), ScheduleKernels())
    assert print_ir(apply_passes(parse(print_ir(once)), ScheduleKernels())) == print_ir(once)


def test_a_later_run_with_other_options_renames_back():
    module = apply_passes(parse(ROWS), FormKernels(), ScheduleKernels(), ScheduleKernels(persistent_threshold=0))
    assert [k.sym_name.data for k in all_kernels(module)] == ["fusec_red_sum_0", "fusec_red_max_1"]


@pytest.mark.parametrize("options", [LoweringOptions(), LoweringOptions(persistent_threshold=0, max_rblock=16)])
def test_the_lowering_decides_as_the_pass_does(options):
    """One decision procedure: lowering unscheduled IR gives the source the pass's schedule gives."""
    plain = apply_passes(parse(ROWS), FormKernels())
    scheduled = apply_passes(parse(ROWS), FormKernels(), ScheduleKernels(options.persistent_threshold, options.max_rblock))
    for k, s in zip(all_kernels(plain), all_kernels(scheduled), strict=True):
        assert lower_kernel(k, options=options) == lower_kernel(s)


def test_the_lowering_obeys_a_recorded_schedule_over_its_options():
    module = apply_passes(parse(ROWS), FormKernels(), ScheduleKernels())
    a = all_kernels(module)[0]
    lowered = lower_kernel(a, options=LoweringOptions(persistent_threshold=0))
    assert (lowered.name, lowered.kind, lowered.index_dtype) == ("fusec_per_sum_0", "persistent", "int32")


GRADIENT = """builtin.module {
  fusec.graph @g(%dy : !fusec.tensor<[s0, 1024], DT>, %x : !fusec.tensor<[s0, 1024], DT>) -> (!fusec.tensor<[1024], DT>, !fusec.tensor<[s0, 1024], DT>) symbols(s0 in [1, inf]) {
    %p = fusec.pointwise "mul" %dy, %x : (!fusec.tensor<[s0, 1024], DT>, !fusec.tensor<[s0, 1024], DT>) -> !fusec.tensor<[s0, 1024], DT>
    %s = fusec.reduce "sum" %p dims [0] : !fusec.tensor<[s0, 1024], DT> -> !fusec.tensor<[1024], DT>
    fusec.output %s, %p : !fusec.tensor<[1024], DT>, !fusec.tensor<[s0, 1024], DT>
  }
}"""


@pytest.mark.parametrize("dtype, warps", [("bf16", 2), ("f16", 2), ("f32", 4)])
def test_a_column_sum_storing_16_bit_elements_launches_the_warps_it_records(dtype, warps):
    """A looped column reduction that stores 16-bit values per element records 2 warps; the launcher, which sizes
    its blocks per call (s0 rows), launches that many; an fp32 one records none and takes the heuristic's 4."""
    from fusec.passes.reduction_fusion import ReductionFusion
    from fusec.passes.vertical_fusion import VerticalFusion

    module, _ = run_passes_checked(GRADIENT.replace("DT", dtype), FormKernels(), VerticalFusion(), ReductionFusion(),
                                   ScheduleKernels())
    (kernel,) = all_kernels(module)
    assert kernel.schedule.outer and kernel.schedule.kind == "looped"
    assert kernel.schedule.warps == (warps if warps != 4 else None)
    lowered = lower_kernel(kernel)
    helpers = {"_looped_config": heuristics.looped_config}
    for rows in (8192, 100000):
        code = lowered.config_code("xnumel", "rnumel")  # what the launcher runs per call
        assert eval(code, helpers, {"xnumel": 1024, "rnumel": rows}).num_warps == warps
        assert lowered.config(1024, rows).num_warps == warps
    assert print_ir(parse(print_ir(module))) == print_ir(module)  # the recorded warps print and parse back


def test_combo_members_keep_their_schedule():
    module = apply_passes(parse(seed_graph()), FormKernels(), ComboGrouping(), ScheduleKernels(persistent_threshold=0))
    combos = [op for op in module.walk() if isinstance(op, F.ComboOp)]
    assert combos and all(k.schedule is not None for c in combos for k in c.kernels)
    assert {k.schedule.kind for c in combos for k in c.kernels if k.is_reduction} == {"looped"}
    assert all(k.schedule.persistent_up_to is None for c in combos for k in c.kernels)  # the combo launches them


def test_remarks_follow_the_renamed_kernels():
    module = apply_passes(parse(ROWS), FormKernels())
    with remarks.collect() as log:
        remarks.emit("vertical-fusion", "example", "about a kernel", all_kernels(module)[0])
        apply_passes(module, ScheduleKernels())
    assert log.remarks[0].subjects == ("@fusec_per_sum_0",)


def test_a_schedule_that_does_not_fit_its_kernel_does_not_verify():
    module = apply_passes(parse(ROWS), FormKernels(), ScheduleKernels())
    a = all_kernels(module)[0]
    a.record_schedule(F.KernelSchedule("tiled", "int32"))
    with pytest.raises(VerifyException, match="the tiled schedule needs a tiled kernel"):
        module.verify()
