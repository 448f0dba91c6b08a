"""expect-fused: fail when a graph still launches more kernels than expected.

In:  any module.  Out: the same module, or an ``ExpectFusedError`` naming the
kernels and carrying the remarks collected so far (the reasons fusion stopped).
A graph-level ``fusec.kernel`` and a ``fusec.combo`` each count as one launch.
Put it after the fusion passes: ``form-kernels,vertical-fusion,reduction-fusion,expect-fused{max-kernels=1}``.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from fusec.base import remarks
from fusec.dialects import fusec as F


class ExpectFusedError(DiagnosticException):
    """A graph launches more kernels than ``expect-fused`` allows (the message says which, and why)."""


def _remarks_so_far() -> str:
    log = remarks.current()
    return log.text() if log is not None else ""


def launches(graph: F.GraphOp) -> list[str]:
    """The names of the kernels and combos a graph launches, in order."""
    return [f"@{op.sym_name.data}" for op in graph.block.ops if isinstance(op, (F.KernelOp, F.ComboOp))]


@dataclass(frozen=True)
class ExpectFused(ModulePass):
    """Fails when a graph launches more than max-kernels kernels (a combo counts once); the error lists the remarks."""

    name = "expect-fused"

    max_kernels: int

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for graph in [g for g in op.walk() if isinstance(g, F.GraphOp)]:
            found = launches(graph)
            if len(found) > self.max_kernels:
                why = _remarks_so_far()
                raise ExpectFusedError(
                    f"@{graph.sym_name.data}: expected at most {self.max_kernels} kernel launch"
                    f"{'es' if self.max_kernels != 1 else ''}, found {len(found)}: {', '.join(found)}"
                    + (f"\n{why.rstrip()}" if why else "\n(no remarks: nothing declined a merge)"))
