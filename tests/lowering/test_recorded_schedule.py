"""The lowering obeys a schedule recorded on the kernel (by schedule-kernels or by hand)."""

import pytest
import torch
from kernel_cases import ROW_SUM_TEXT, compile_text, only_kernel, randn

from fusec.dialects import fusec as F
from fusec.lowering.combo_kernel import lower_kernels_as_combo
from fusec.lowering.triton_kernel import LoweringError, lower_kernel
from fusec.testing import parse

LOOPED_INT64 = ROW_SUM_TEXT.replace("[s0, 37] (", "[s0, 37] schedule(looped, int64, max_rblock = 8) (")


def _kernel(text: str) -> F.KernelOp:
    return next(op for op in parse(text).walk() if isinstance(op, F.KernelOp))


def test_a_hand_written_schedule_runs_as_written():
    """37-wide rows would be persistent with int32 indices; written looped by 8 with int64, they run so."""
    _, compiled = compile_text(LOOPED_INT64, {"s0": 5})
    kernel = only_kernel(compiled)
    assert (kernel.name, kernel.kind, kernel.index_dtype, kernel.max_rblock) == ("fusec_red_sum_0", "looped", "int64", 8)
    assert "for roffset in range(0, rnumel, RBLOCK):" in kernel.source and "tl.int64" in kernel.source
    for rows in (1, 5):
        a = randn(rows, 37, seed=rows)
        (out,) = compiled([a])
        torch.testing.assert_close(out, a.sum(1))


def test_the_recorded_name_is_the_kernel_name():
    text = LOOPED_INT64.replace("@fusec_red_sum_0", "@row_total")
    assert lower_kernel(_kernel(text)).name == "row_total"


def test_a_scheduled_name_must_be_an_identifier():
    text = LOOPED_INT64.replace("@fusec_red_sum_0", '@"row total"')
    with pytest.raises(LoweringError, match="must be a Python identifier"):
        lower_kernel(_kernel(text))


def test_a_tiled_kernel_keeps_its_tiles_in_a_combo():
    text = ROW_SUM_TEXT.replace("[s0, 37] (", "[s0, 37] tiled schedule(tiled, int32) (").replace(
        """      %s = fusec.reduce_r "sum" %v : f32 -> f32
      fusec.store %s, %out0[x]""", """      fusec.store %v, %out0[x]""")
    combo = lower_kernels_as_combo("c", [_kernel(text)])
    assert [m.kernel.kind for m in combo.members] == ["tiled"]
    assert combo.launch_plan({"s0": 100})[0] == combo.members[0].kernel.programs(100, 37)
