"""Timing kernels on a device, for a pass that asks for measurements (``combo-grouping{benchmark=true}``).

Passes sit below the lowering and the runtime and never import them.  The
pipeline driver (the top layer) registers the runtime's timer here; a pass asks
for it and, where none is registered, keeps its cost model's decision.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

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
