"""autotune-matmuls: the fastest timed schedule is recorded; failures, a missing timer and bad options are reported."""

import contextlib
import re

import pytest

from fusec.analysis import timing
from fusec.analysis.timing import NoTimer
from fusec.base import remarks
from fusec.dialects import fusec as F
from fusec.passes.autotune_matmuls import AutotuneMatmuls
from fusec.pipeline import PipelineError, module_text, parse_module, parse_pipeline_spec, run_pipeline
from fusec.registry import make_context

# A matmul with a bias and tanh epilogue, fused into one matmul kernel and scheduled (s0 rows: symbolic).
IR = """
builtin.module {
  fusec.graph @linear(%x : !fusec.tensor<[s0, 32], f32>, %w : !fusec.tensor<[48, 32], f32>, %b : !fusec.tensor<[48], f32>) -> (!fusec.tensor<[s0, 48], f32>) symbols(s0 in [1, inf] hint 40) attributes {fusec.device = "cuda"} {
    %wt = fusec.permute %w [1, 0] : !fusec.tensor<[48, 32], f32> -> !fusec.tensor<[32, 48], f32, strides [1, 32]>
    %p = fusec.extern "aten.mm.default"(%x, %wt) : (!fusec.tensor<[s0, 32], f32>, !fusec.tensor<[32, 48], f32, strides [1, 32]>) -> !fusec.tensor<[s0, 48], f32>
    %h = fusec.pointwise "add" %p, %b : (!fusec.tensor<[s0, 48], f32>, !fusec.tensor<[48], f32>) -> !fusec.tensor<[s0, 48], f32>
    %g = fusec.pointwise "tanh" %h : (!fusec.tensor<[s0, 48], f32>) -> !fusec.tensor<[s0, 48], f32>
    fusec.output %g : !fusec.tensor<[s0, 48], f32>
  }
}
"""
SCHEDULED = "form-kernels,dce,vertical-fusion,matmul-epilogues{when=always cost-rule=false},dce,schedule-kernels"


@contextlib.contextmanager
def timing_with(timer):
    """``timer`` registered as the kernel timer (None: none registered) while the block runs."""
    previous = timing.register_kernel_timer(None if timer is None else lambda: timer)
    try:
        yield
    finally:
        timing.register_kernel_timer(previous)


def scheduled():
    ctx = make_context()
    module = parse_module(ctx, IR)
    run_pipeline(ctx, module, SCHEDULED)
    return ctx, module


def matmul_kernel(module) -> F.KernelOp:
    (kernel,) = [k for k in module.walk() if isinstance(k, F.KernelOp) and k.is_matmul]
    return kernel


def tune(module, ctx, timer, **options) -> remarks.RemarkLog:
    with timing_with(timer), remarks.collect() as log:
        AutotuneMatmuls(**{"when": "always", **options}).apply(ctx, module)
    return log


def test_the_fastest_schedule_that_ran_is_recorded_with_a_remark():
    ctx, module = scheduled()
    heuristic = matmul_kernel(module).schedule.tiles
    asked = []

    def timer(graph, kernel, schedules, hints):
        asked.append(([s.tiles for s in schedules], dict(hints)))
        return [10.0, 4.0, "failed (OutOfResources: shared memory)"]  # the second candidate fails

    log = tune(module, ctx, timer, candidates=("32x64x32x2x2", "64x128x64x8x5"))
    (schedules, hints), = asked
    assert schedules[0] == heuristic and hints == {"s0": 40}  # the heuristic's first, timed at the traced size
    tiles = matmul_kernel(module).schedule.tiles
    assert (tiles.block_m, tiles.block_n, tiles.block_k, tiles.warps, tiles.stages) == (32, 64, 32, 2, 2)
    assert tiles.group_m == heuristic.group_m  # what the candidates do not name stays the heuristic's
    assert "tile = [32, 64, 32], warps = 2, stages = 2" in module_text(module)
    (remark,) = [r for r in log.remarks if r.pass_name == "autotune-matmuls"]
    assert remark.code == "autotuned" and "4.0 us against the heuristic's 10.0" in remark.message
    assert remark.data["size_hints"] == {"s0": 40}
    assert remark.data["candidates"] == {"tile = [32, 64, 32] warps = 2 stages = 2": 4.0,
                                         "tile = [64, 128, 64] warps = 8 stages = 5": "failed (OutOfResources: shared memory)",
                                         " ".join(heuristic.items()[:3]): 10.0}


def test_a_heuristic_that_cannot_be_timed_is_kept():
    ctx, module = scheduled()
    before = module_text(module)
    log = tune(module, ctx, lambda graph, kernel, schedules, hints: ["does not lower (KeyError: 'x')", 3.0])
    assert module_text(module) == before
    (remark,) = [r for r in log.remarks if r.pass_name == "autotune-matmuls"]
    assert remark.code == "autotune-failed" and "does not lower (KeyError: 'x')" in remark.message  # says why


def test_without_a_timer_or_a_gpu_the_schedules_stay_and_a_remark_says_why():
    ctx, module = scheduled()
    before = module_text(module)
    log = tune(module, ctx, None)

    def no_gpu(graph, kernel, schedules, hints):
        raise NoTimer("no GPU in this process to time kernels on")

    log.remarks.extend(tune(module, ctx, no_gpu).remarks)
    assert module_text(module) == before
    messages = [r.message for r in log.remarks if r.code == "autotune-skipped"]
    assert len(messages) == 2 and "no kernel timer" in messages[0] and "no GPU" in messages[1]


def test_off_by_default_and_on_cpu_graphs_under_accelerator():
    ctx, module = scheduled()
    before = module_text(module)

    def timer(graph, kernel, schedules, hints):
        raise AssertionError("nothing may be timed")

    with timing_with(timer), remarks.collect() as log:
        AutotuneMatmuls().apply(ctx, module)  # when=never
        cpu = parse_module(ctx, IR.replace('fusec.device = "cuda"', 'fusec.device = "cpu"'))
        run_pipeline(ctx, cpu, SCHEDULED)
        AutotuneMatmuls(when="accelerator").apply(ctx, cpu)
    assert module_text(module) == before and not [r for r in log.remarks if r.pass_name == "autotune-matmuls"]


@pytest.mark.parametrize("candidate, problem", [("128x128", "BMxBNxBKxWARPSxSTAGES"), ("100x64x32x4x3", "powers of 2"),
                                                ("64x64x32x3x3", "warps"), ("16x16x8x4x2", "at least 16")])
def test_a_bad_candidate_is_a_bad_option(candidate, problem):
    with pytest.raises(PipelineError, match=problem):
        parse_pipeline_spec(f"autotune-matmuls{{candidates={candidate}}}")


def test_the_runtime_timer_runs_and_checks_each_schedule(monkeypatch):
    """The GPU timer's path under Triton's interpreter: each schedule's kernel lowered alone, run on the same
    random inputs and checked against the first's (its times mean nothing here)."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    from fusec.runtime import kernel_timer

    ctx, module = scheduled()
    graph, kernel = F.find_graph(module), matmul_kernel(module)
    schedule = kernel.schedule
    import dataclasses

    schedules = [schedule, dataclasses.replace(schedule, tiles=dataclasses.replace(schedule.tiles, block_m=16, block_n=16,
                                                                                   block_k=16, warps=1, stages=1))]
    times = kernel_timer.time_schedules(graph, kernel, schedules, {"s0": 40}, device="cpu")
    assert len(times) == 2 and all(isinstance(t, float) and t > 0 for t in times), times

    monkeypatch.setattr(kernel_timer, "_matches", lambda got, want: got is want)  # only the first matches itself
    times = kernel_timer.time_schedules(graph, kernel, schedules, {"s0": 40}, device="cpu")
    assert isinstance(times[0], float) and times[1] == "its outputs differ from the first schedule's"

    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():  # as under torch.compile: the timer makes and launches real tensors all the same
        times = kernel_timer.time_schedules(graph, kernel, schedules, {"s0": 40}, device="cpu")
    assert isinstance(times[0], float), times

    times = kernel_timer.time_schedules(graph, kernel, schedules, {}, device="cpu")  # s0 has no size to run at
    assert all(isinstance(t, str) and t.startswith("no inputs at these sizes") for t in times), times


def test_the_runtime_timer_needs_a_gpu_by_default(monkeypatch):
    import torch

    from fusec.runtime import kernel_timer

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    ctx, module = scheduled()
    with pytest.raises(NoTimer, match="no GPU"):
        kernel_timer.time_schedules(F.find_graph(module), matmul_kernel(module), [matmul_kernel(module).schedule], {"s0": 40})
    import fusec.pipeline  # noqa: F401  (the driver registers the runtime's timer)

    assert timing.kernel_timer() is kernel_timer.time_schedules


GPU_IR = """
builtin.module {
  fusec.graph @linear(%x : !fusec.tensor<[1024, 512], bf16>, %w : !fusec.tensor<[768, 512], bf16>, %b : !fusec.tensor<[768], bf16>) -> (!fusec.tensor<[1024, 768], bf16>) attributes {fusec.device = "cuda"} {
    %wt = fusec.permute %w [1, 0] : !fusec.tensor<[768, 512], bf16> -> !fusec.tensor<[512, 768], bf16, strides [1, 512]>
    %p = fusec.extern "aten.mm.default"(%x, %wt) : (!fusec.tensor<[1024, 512], bf16>, !fusec.tensor<[512, 768], bf16, strides [1, 512]>) -> !fusec.tensor<[1024, 768], bf16>
    %h = fusec.pointwise "add" %p, %b : (!fusec.tensor<[1024, 768], bf16>, !fusec.tensor<[768], bf16>) -> !fusec.tensor<[1024, 768], bf16>
    %g = fusec.pointwise "relu" %h : (!fusec.tensor<[1024, 768], bf16>) -> !fusec.tensor<[1024, 768], bf16>
    fusec.output %g : !fusec.tensor<[1024, 768], bf16>
  }
}
"""


@pytest.mark.gpu
def test_on_a_gpu_the_fastest_schedule_is_chosen_and_computes_what_torch_does():
    """The whole path on a GPU: every candidate compiled in the pool, checked and timed; the graph compiled with the
    chosen schedule gives torch's result."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from fusec.runtime import compile_module

    ctx = make_context()
    module = parse_module(ctx, GPU_IR)
    log = run_pipeline(ctx, module, SCHEDULED + ",autotune-matmuls{when=always candidates=64x64x64x4x3,256x256x64x8x4}")
    (remark,) = [r for r in log.remarks if r.pass_name == "autotune-matmuls"]
    assert remark.code == "autotuned", remark.message
    times = remark.data["candidates"]
    assert len(times) == 3 and all(isinstance(t, str) or t > 0 for t in times.values())
    assert not isinstance(list(times.values())[0], str)  # the heuristic's own schedule ran
    chosen = matmul_kernel(module).schedule.tiles
    assert " ".join(chosen.items()[:3]) == min((k for k, t in times.items() if not isinstance(t, str)), key=lambda k: times[k])
    gen = torch.Generator().manual_seed(0)
    x, w, b = (torch.randn(*shape, generator=gen).to("cuda", torch.bfloat16) * 0.1 for shape in ([1024, 512], [768, 512], [768]))
    (out,) = compile_module(module)([x, w, b])
    want = torch.relu(x.float() @ w.float().t() + b.float())
    assert (out.float() - want).abs().max().item() <= 2e-2 * want.abs().max().item()


def test_a_kernel_timed_alone_keeps_the_device_marks_not_the_graphs_input_marks():
    """The one-kernel graph is compiled for the same GPU (capability, SMs, fp32 precision); marks that name the
    graph's inputs or outputs by position (input mutations, aligned inputs, saved outputs) would name others there."""
    from xdsl.dialects.builtin import IntegerAttr, i64

    from fusec.runtime.kernel_timer import _alone

    ctx, module = scheduled()
    graph, kernel = F.find_graph(module), matmul_kernel(module)
    graph.attributes[F.SAVED_OUTPUTS] = IntegerAttr(0, i64)
    graph.set_input_mutations([(2, 0, False)])
    (alone,) = [g for g in _alone(graph, kernel, kernel.schedule).walk() if isinstance(g, F.GraphOp)]
    assert alone.mark(F.DEVICE_MARK) == "cuda"
    assert alone.saved_outputs_from is None and alone.input_mutations == []
    assert [tensor for tensor in alone.function_type.inputs.data] == [v.type for v in kernel.operands]


@pytest.mark.gpu
def test_under_torch_compile_a_persistent_tma_matmul_is_timed():
    """Through the backend, whose pipeline runs inside AOTAutograd's fake-tensor mode (the timer once made fake
    tensors there: every schedule failed), at a size where the heuristic picks a persistent TMA schedule."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from fusec.pipeline import default_pipeline_spec

    spec = default_pipeline_spec()
    for name, override in [("activation-epilogues", "activation-epilogues{when=never}"),
                           ("matmul-epilogues", "matmul-epilogues{cost-rule=false}"),
                           ("autotune-matmuls", "autotune-matmuls{when=accelerator candidates=128x128x64x4x3}")]:
        spec = re.sub(rf"(?<![\w-]){name}(\{{[^}}]*\}})?(?![\w-])", override, spec)
    gen = torch.Generator().manual_seed(0)
    x, w, b = (torch.randn(*shape, generator=gen).to("cuda", torch.bfloat16) * 0.1
               for shape in ([8192, 1024], [4096, 1024], [4096]))

    def fn(x, w, b):
        return torch.nn.functional.gelu(x @ w.t() + b, approximate="tanh")

    torch._dynamo.reset()
    with remarks.collect() as log:
        out = torch.compile(fn, backend="fusec", options={"pipeline": spec})(x, w, b)
    (remark,) = [r for r in log.remarks if r.pass_name == "autotune-matmuls"]
    assert remark.code == "autotuned", remark.message
    assert all(not isinstance(t, str) for t in remark.data["candidates"].values()), remark.data
    want = fn(x.float(), w.float(), b.float())
    assert (out.float() - want).abs().max().item() <= 2e-2 * want.abs().max().item()
