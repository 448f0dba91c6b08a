"""How a kernel artifact is launched: the one launch-configuration switch, and what a launcher offers.

Block sizes and warps come from ``fusec.analysis.heuristics``, picked by the kernel's
schedule kind.  ``config_call`` is the only place that maps a kind to its heuristic:
``launch_config`` calls it at compile time (static sizes), ``config_code`` writes the
same call into the launcher (symbolic sizes, chosen per call).

A kernel artifact (``TritonKernel``, ``TritonCombo``) writes its own launch lines through
``launch_lines(site, pointers)``; the launcher is the ``LaunchSite``: it prints size
expressions, holds int variables and writes the launch call.
"""

from __future__ import annotations

from typing import Protocol

import sympy

from fusec.analysis import heuristics

CONFIG_HELPERS = ("pointwise_config", "tiled_config", "persistent_config", "looped_config")  # the launcher's _<name>


def config_call(kind: str, outer: bool, max_rblock: int, xnumel, rnumel, per_thread: int = 0,
                warps: int = 0) -> tuple[str, tuple]:
    """The heuristic (its name in ``fusec.analysis.heuristics``) sizing a kernel of this kind, and its arguments
    (``per_thread``, the schedule's limit, and a looped schedule's ``warps``, only where there are some)."""
    limit = (per_thread,) if per_thread else ()
    if kind == "pointwise":
        return "pointwise_config", (xnumel, *limit)
    if kind == "tiled":
        return "tiled_config", (xnumel, rnumel, *limit)
    if kind == "persistent":
        return "persistent_config", (xnumel, rnumel, outer, *limit)
    if kind == "looped":
        return "looped_config", (xnumel, rnumel, outer, max_rblock, *((per_thread, warps) if warps else limit))
    raise ValueError(f"unknown kernel kind '{kind}'")


def launch_config(kind: str, outer: bool, max_rblock: int, xnumel: int, rnumel: int = 1,
                  per_thread: int = 0, warps: int = 0) -> heuristics.LaunchConfig:
    """Block sizes and warps for actual sizes."""
    name, args = config_call(kind, outer, max_rblock, xnumel, rnumel, per_thread, warps)
    return getattr(heuristics, name)(*args)


def config_code(kind: str, outer: bool, max_rblock: int, xnumel: str, rnumel: str, per_thread: int = 0,
                warps: int = 0) -> str:
    """Host code computing ``launch_config`` for the sizes held in variables ``xnumel`` and ``rnumel``."""
    name, args = config_call(kind, outer, max_rblock, xnumel, rnumel, per_thread, warps)
    return f"_{name}({', '.join(str(a) for a in args)})"


class LaunchSite(Protocol):
    """What a launcher offers an artifact writing its launch lines."""

    def py(self, e: sympy.Expr) -> str:
        """Host code for a size expression."""
        ...

    def int_variable(self, name: str, e: sympy.Expr) -> str:
        """The line ``name = <e>``; the launcher remembers which size ``name`` holds."""
        ...

    def launch(self, kernel: str, grid: str, warps: str, args: list[str], num_pointers: int,
               constexprs: list[tuple[str, str]]) -> str:
        """The launch call of ``kernel``."""
        ...

    def is_aligned(self, pointer: str) -> bool:
        """Whether the buffer in variable ``pointer`` is known to start 16-byte aligned (an allocation or an input the
        prologue aligned), so a kernel needs no check of it per call."""
        ...
