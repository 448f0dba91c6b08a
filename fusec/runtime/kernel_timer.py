"""Timing one kernel of a graph under other schedules, for ``autotune-matmuls`` (its ``KernelTimer``).

Each schedule's kernel is lowered alone: a graph of the kernel's operands as inputs and its results as outputs,
compiled as any graph is (``compile_module``: the launcher, the compile pool, TMA descriptors where the schedule
asks for them).  All schedules' compiles go to the pool at once; each is then launched on the same random inputs
(laid out as the IR's types say, at the size hints), its outputs checked against the first schedule's, and timed
with ``triton.testing.do_bench`` (median).  The pipeline driver registers ``time_schedules`` as the kernel timer
(``fusec.analysis.timing``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from xdsl.dialects.builtin import ModuleOp

from fusec.analysis.timing import NoTimer
from fusec.base import shapes
from fusec.base.progress import logger
from fusec.dialects import fusec as F
from fusec.dialects.attributes import tensor_type_of
from fusec.runtime.compiled import CompiledGraph, compile_module

_DEVICE_MARKS = (F.DEVICE_MARK, F.DEVICE_CAPABILITY_MARK, F.SM_COUNT_MARK, F.FLOAT32_MATMUL_PRECISION_MARK,
                 F.CUDNN_ALLOW_TF32_MARK)
TOLERANCE = 2e-2  # largest difference over the largest magnitude: another k-order rounds 16-bit outputs by an ulp


def time_schedules(graph: F.GraphOp, kernel: F.KernelOp, schedules: Sequence[F.KernelSchedule],
                   size_hints: Mapping[str, int], device: str | None = None) -> list[float | str]:
    """µs a launch of ``kernel`` takes under each of ``schedules``, or why that one was not timed (it failed to lower
    or launch, or its outputs differ from the first's).  ``device`` None: the GPU, ``NoTimer`` without one;
    ``"cpu"`` runs Triton's interpreter (the checks, for tests: its times say nothing of a GPU's)."""
    if device is None:
        if not torch.cuda.is_available():
            raise NoTimer("no GPU in this process to time kernels on")
        device = "cuda"
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with unset_fake_temporarily():  # under torch.compile the pipeline runs in AOTAutograd's fake-tensor mode
        return _time_schedules(graph, kernel, schedules, dict(size_hints), device)


def _time_schedules(graph: F.GraphOp, kernel: F.KernelOp, schedules: Sequence[F.KernelSchedule],
                    hints: dict[str, int], device: str) -> list[float | str]:
    try:  # normal floats scaled as a matmul's operands are
        inputs = random_buffers([tensor_type_of(v) for v in kernel.operands], hints, device, scale=0.1)
    except Exception as e:  # noqa: BLE001 -- an operand it cannot make (a size with no hint): nothing is timed
        return [f"no inputs at these sizes ({_why(e)})"] * len(schedules)
    compiled: list[CompiledGraph | str] = []
    for schedule in schedules:
        try:
            one = compile_module(_alone(graph, kernel, schedule), hints, input_checks="alignment")
            if device == "cuda":
                one.compile_ahead(inputs)  # every schedule's compile in the pool at once
            compiled.append(one)
        except Exception as e:  # noqa: BLE001 -- a schedule that cannot be lowered is one not to choose
            compiled.append(f"does not lower ({_why(e)})")
    times: list[float | str] = []
    reference: list[torch.Tensor] | None = None  # the first schedule's outputs: the others must match them
    for i, graph_alone in enumerate(compiled):
        if isinstance(graph_alone, str):
            times.append(graph_alone)
            continue
        try:
            outputs = graph_alone(inputs)
            if i == 0:
                reference = outputs
            if reference is None:
                times.append("not checked: the first schedule did not run")
            elif not _matches(outputs, reference):
                times.append("its outputs differ from the first schedule's")
            else:
                times.append(_time(lambda run=graph_alone: run(inputs), device))
        except Exception as e:  # noqa: BLE001 -- out of shared memory, say: not chosen
            times.append(f"failed ({_why(e)})")
    for schedule, t in zip(schedules, times, strict=True):
        if isinstance(t, str):
            logger.debug("autotune: %s under %s: %s", kernel.sym_name.data, schedule, t)
    return times


def _why(e: Exception) -> str:
    """An exception in one line, for a remark: its type and its message's first line."""
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {first[:200]}" if first else type(e).__name__


def _alone(graph: F.GraphOp, kernel: F.KernelOp, schedule: F.KernelSchedule) -> ModuleOp:
    """A module of one graph running ``kernel`` alone under ``schedule``: its operands in, its results out."""
    operands = list(kernel.operands)
    alone = F.GraphOp(f"{kernel.sym_name.data}_alone", [v.type for v in operands], [r.type for r in kernel.results],
                      list(graph.symbols.data), facts=graph.facts.data if graph.facts is not None else ())
    for name in _DEVICE_MARKS:  # what the GPU is and allows; not the marks naming the graph's inputs and outputs
        if name in graph.attributes:
            alone.attributes[name] = graph.attributes[name]
    copy = kernel.clone(value_mapper=dict(zip(operands, alone.block.args, strict=True)))
    copy.record_schedule(schedule)
    alone.block.add_op(copy)
    alone.block.add_op(F.OutputOp(list(copy.results)))
    return ModuleOp([alone])


def random_buffers(types: Sequence[F.TensorType], sizes: Mapping[str, int], device: str, seed: int = 0,
                   scale: float = 1.0) -> list[torch.Tensor]:
    """Random tensors of ``types`` at ``sizes``, laid out with the types' strides (one generator, in order): normal
    floats times ``scale``, booleans, small non-negative integers."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for t in types:
        shape = [shapes.evaluate(d, sizes) for d in t.dims]
        strides = [shapes.evaluate(s, sizes) for s in t.layout]
        dtype = F.torch_dtype(t)
        extent = 1 + sum((n - 1) * s for n, s in zip(shape, strides, strict=True)) if all(shape) else 0
        if dtype.is_floating_point:
            flat = (torch.randn(extent, generator=gen) * scale).to(dtype)
        elif dtype == torch.bool:
            flat = torch.rand(extent, generator=gen) > 0.5
        else:
            flat = torch.randint(0, 4, (extent,), generator=gen).to(dtype)
        out.append(torch.as_strided(flat.to(device), shape, strides))
    return out


def _matches(got: Sequence[torch.Tensor], want: Sequence[torch.Tensor]) -> bool:
    for g, w in zip(got, want, strict=True):
        g64, w64 = g.double(), w.double()
        scale = w64.abs().max().item() if w64.numel() else 0.0
        if g64.numel() and not (g64 - w64).abs().max().item() <= TOLERANCE * (scale or 1.0):
            return False
    return True


def _time(launch, device: str) -> float:
    """Median µs of ``launch``: ``do_bench`` on the GPU; wall time under the interpreter (tests)."""
    if device == "cuda":
        from triton.testing import do_bench

        return float(do_bench(launch, warmup=10, rep=50, return_mode="median")) * 1000
    import time

    start = time.perf_counter()
    launch()
    return (time.perf_counter() - start) * 1e6
