"""Timing kernels on a device, for a pass that asks for measurements (``combo-grouping{benchmark=true}``,
``autotune-matmuls``).

Passes sit below the lowering and the runtime and never import them.  The
pipeline driver (the top layer) registers the runtime's timer here; a pass asks
for it and, where none is registered, keeps its cost model's decision.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from fusec.analysis.cost_model import SizeHints
from fusec.dialects import fusec as F

GroupTimer = Callable[[Sequence[F.KernelOp], SizeHints], tuple[float, float]]
"""(kernels, size hints) -> (microseconds launching them one by one, microseconds as one combo kernel)."""

_group_timer: Callable[[], GroupTimer] | None = None


def register_group_timer(factory: Callable[[], GroupTimer] | None) -> None:
    """Install (or, with None, remove) a factory for the group timer; called lazily, on first use."""
    global _group_timer
    _group_timer = factory


def group_timer() -> GroupTimer | None:
    return _group_timer() if _group_timer is not None else None


class NoTimer(Exception):
    """The process cannot time kernels (no GPU): a pass keeps its heuristic's decision."""


KernelTimer = Callable[[F.GraphOp, F.KernelOp, Sequence[F.KernelSchedule], Mapping[str, int]], list[float | str]]
"""(graph, kernel, schedules, size hints) -> for each schedule, the microseconds a launch of the kernel takes, or why it
was not timed (it failed to lower or launch, or its outputs differ from the first schedule's); raises ``NoTimer`` where
it cannot time at all."""

_kernel_timer: Callable[[], KernelTimer] | None = None


def register_kernel_timer(factory: Callable[[], KernelTimer] | None) -> Callable[[], KernelTimer] | None:
    """Install (or, with None, remove) a factory for the kernel timer, called lazily on first use; returns the one
    it replaces."""
    global _kernel_timer
    previous, _kernel_timer = _kernel_timer, factory
    return previous


def kernel_timer() -> KernelTimer | None:
    return _kernel_timer() if _kernel_timer is not None else None
