"""A looped reduction over a symbolic row length also has a persistent form, which a call whose rows fit runs.

``schedule-kernels`` records ``persistent_up_to``; the lowering emits both forms and the launcher picks one per
call from the row length (as Inductor picks a persistent reduction only for rows it can prove short, fusec
decides per call: a dynamic layer norm over short rows reads each row once instead of once a loop).
"""

import pytest
import torch

from fusec.dialects import fusec as F
from fusec.lowering.launcher import lower_graph
from fusec.passes.form_kernels import FormKernels
from fusec.passes.reduction_fusion import ReductionFusion
from fusec.passes.schedule_kernels import ScheduleKernels
from fusec.passes.vertical_fusion import VerticalFusion
from fusec.runtime import compile_module, interpreter
from fusec.testing import apply_passes, assert_same_results, parse, random_inputs

T = "!fusec.tensor<[s0, s1], f32>"
R = "!fusec.tensor<[s0, 1], f32>"
SOFTMAX = f"""builtin.module {{
  fusec.graph @g(%x : {T}) -> ({T}) symbols(s0 in [1, inf], s1 in [1, inf]) {{
    %m = fusec.reduce "max" %x dims [1] keepdim : {T} -> {R}
    %d = fusec.pointwise "sub" %x, %m : ({T}, {R}) -> {T}
    %e = fusec.pointwise "exp" %d : ({T}) -> {T}
    %s = fusec.reduce "sum" %e dims [1] keepdim : {T} -> {R}
    %y = fusec.pointwise "div" %e, %s : ({T}, {R}) -> {T}
    fusec.output %y : {T}
  }}
}}"""
SIZES = [(3, 1), (5, 100), (4, 4096), (3, 4097), (2, 9000)]  # both sides of the threshold (4096)


def scheduled(**options):
    return apply_passes(parse(SOFTMAX), FormKernels(), VerticalFusion(), ReductionFusion(), ScheduleKernels(**options))


def test_the_launcher_picks_the_form_by_the_row_length():
    launcher = lower_graph(F.find_graph(scheduled()))
    names = sorted(k.name for k in launcher.kernels)
    assert [n.split("_")[1] for n in names] == ["per", "red"]  # fusec_per_* and fusec_red_* of one kernel
    assert "if s1 <= 4096:  # whole rows fit: the persistent form" in launcher.source
    assert len(lower_graph(F.find_graph(scheduled(runtime_persistent=False))).kernels) == 1


def _check(device: str) -> None:
    reference = parse(SOFTMAX)
    compiled = compile_module(scheduled(), {"s0": 4, "s1": 512})
    for rows, cols in SIZES:
        inputs = random_inputs(reference, {"s0": rows, "s1": cols}, seed=cols)
        got = [t.cpu() for t in compiled([t.to(device) for t in inputs])]
        assert_same_results(interpreter.run(reference, inputs), got, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(got[0], torch.softmax(inputs[0], 1))


def test_both_forms_match_the_interpreter_on_the_cpu():
    _check("cpu")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_both_forms_match_the_interpreter_on_the_gpu():
    _check("cuda")


def _seed(t1, t2, t3, t4):
    return t1.sum(1), t2.amax(1), t3.amin(1), t4.sum(1)


def _check_combo(device: str, sizes) -> None:
    """Four row reductions over symbolic rows, one combo: its persistent form for short rows, looped past 4096."""
    torch._dynamo.reset()
    compiled = torch.compile(_seed, backend="fusec", dynamic=True)
    for rows, cols in sizes:
        torch.manual_seed(cols)
        inputs = [torch.randn(rows, cols, device=device) for _ in range(4)]
        for got, want in zip(compiled(*inputs), _seed(*inputs), strict=True):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)


def test_a_combo_of_symbolic_rows_picks_its_form_per_call_on_the_cpu():
    _check_combo("cpu", [(4, 64), (3, 100), (2, 4500)])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_combo_of_symbolic_rows_picks_its_form_per_call_on_the_gpu():
    _check_combo("cuda", [(1024, 512), (300, 100), (64, 4096), (64, 4097), (16, 9000)])
