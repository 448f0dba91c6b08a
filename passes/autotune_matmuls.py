"""autotune-matmuls: each matmul kernel's tile, warps and stages chosen by timing candidates on the GPU (opt-in).

In:  a scheduled graph (after schedule-kernels: each matmul kernel carries the closed-form heuristic's
     ``schedule(matmul, tile = [m, n, k], warps = w, stages = s, ...)``).
Out: the same graph, each matmul kernel's schedule the fastest of the heuristic's and the ``candidates``' (each
     ``BMxBNxBKxWARPSxSTAGES``, as schedule-kernels' ``matmul-tile``; the heuristic's group_m, tf32, persistence and
     TMA are kept), timed on the GPU at the graph's size hints.  A candidate that fails to compile or launch (too
     much shared memory), or whose outputs differ from the heuristic's, is never chosen.

The timing is the opt-in compile-time benchmarking Inductor calls max-autotune: off by default (``when=never``),
as every candidate costs a Triton compile and a few hundred launches.  ``when=accelerator`` tunes GPU graphs,
``always`` any graph; either needs a GPU in the process, else a remark says the schedules stay the heuristic's.
The timer lives in the runtime (``fusec.runtime.kernel_timer``), registered by the pipeline driver through
``fusec.analysis.timing`` as combo-grouping's benchmark timer is; tests register their own.

Remarks: ``autotuned`` per kernel (the winner, its time and the heuristic's, with every candidate's time, or why it
was not timed, in the remark's data); ``autotune-skipped`` per graph where no timer or GPU is there;
``autotune-failed`` where the heuristic's own schedule could not be timed (it is kept; the remark says why).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from fusec.analysis import timing
from fusec.analysis.cost_model import SizeHints, parse_size_hints, resolve_size_hints
from fusec.analysis.timing import NoTimer
from fusec.base import remarks
from fusec.dialects import fusec as F
from fusec.passes.pad_matmuls import check_when, graphs_to_change
from fusec.passes.schedule_kernels import parse_matmul_tile

PASS = "autotune-matmuls"

# Tiles that win on some shapes on Hopper and Ampere (Triton's own matmul tutorial configs, bf16/fp16).
DEFAULT_CANDIDATES = ("128x128x64x4x3", "128x256x64x8x3", "256x128x64x8x3", "64x128x64x4x4", "128x64x64x4x4",
                      "64x64x64x4x4", "128x128x32x4x4")


def parse_candidate(text: str) -> F.MatmulTiles:
    """A candidate (``128x64x32x4x3``: block m, n, k, warps, stages); ValueError naming a bad one."""
    tiles = parse_matmul_tile(text, "a candidate")
    if tiles is None:
        raise ValueError("a candidate must be BMxBNxBKxWARPSxSTAGES (e.g. 128x256x64x8x3), got an empty one")
    return tiles


@dataclass(frozen=True)
class AutotuneMatmuls(ModulePass):
    """Chooses each matmul kernel's tile, warps and stages by timing candidates on the GPU (opt-in)."""

    name = PASS

    when: str = "never"
    candidates: tuple[str, ...] = ()  # BMxBNxBKxWARPSxSTAGES each; empty: DEFAULT_CANDIDATES
    size_hints: tuple[str, ...] = ()  # SYMBOL=INTEGER: the sizes symbolic dims are timed at

    def __post_init__(self) -> None:
        check_when(self.when)
        parse_size_hints(self.size_hints)
        for c in self.candidates:
            parse_candidate(c)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.when == "never":
            return
        tiles = [parse_candidate(c) for c in self.candidates or DEFAULT_CANDIDATES]
        for graph in graphs_to_change(op, self.when):
            kernels = [k for k in graph.block.ops if isinstance(k, F.KernelOp) and k.is_matmul
                       and k.schedule is not None and k.schedule.tiles is not None]
            if not kernels:
                continue
            hints = resolve_size_hints(graph, parse_size_hints(self.size_hints))
            try:
                for kernel in kernels:
                    self._tune(graph, kernel, tiles, hints)
            except NoTimer as e:
                remarks.emit(PASS, "autotune-skipped", f"matmul schedules stay the heuristic's: {e}", graph)

    @staticmethod
    def _tune(graph: F.GraphOp, kernel: F.KernelOp, tiles: list[F.MatmulTiles], hints: SizeHints) -> None:
        timer = timing.kernel_timer()
        if timer is None:
            raise NoTimer("no kernel timer is registered (fusec's pipeline driver registers the runtime's)")
        schedule = kernel.schedule
        assert schedule is not None and schedule.tiles is not None, "only scheduled matmul kernels are tuned"
        base = schedule.tiles
        options = [base]
        for c in tiles:
            t = dataclasses.replace(base, block_m=c.block_m, block_n=c.block_n, block_k=c.block_k, warps=c.warps,
                                    stages=c.stages)
            if t not in options:
                options.append(t)
        times = timer(graph, kernel, [dataclasses.replace(schedule, tiles=t) for t in options], dict(hints.values))
        label = [" ".join(t.items()[:3]) for t in options]
        # each candidate's µs, or why it was not timed
        data = {"candidates": {label[i]: (t if isinstance(t, str) else round(t, 2)) for i, t in enumerate(times)},
                **hints.remark_data()}  # the sizes it was timed at
        timed = {i: t for i, t in enumerate(times) if not isinstance(t, str)}
        if 0 not in timed:
            remarks.emit(PASS, "autotune-failed", f"the heuristic's schedule could not be timed: kept ({times[0]})",
                         kernel, **data)
            return
        best = min(timed, key=timed.__getitem__)
        kernel.record_schedule(dataclasses.replace(schedule, tiles=options[best]))
        verdict = "the heuristic's kept" if best == 0 else f"{timed[best]:.1f} us against the heuristic's {timed[0]:.1f}"
        remarks.emit(PASS, "autotuned", f"{label[best]}: {verdict} ({len(timed)} of {len(times)} schedules timed)",
                     kernel, **data)
