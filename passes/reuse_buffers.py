"""reuse-buffers: a kernel result is written into the storage of a buffer no longer read, instead of a new one.

In:  a scheduled graph (after schedule-kernels and mutate-in-place: the launch order and the in-place writes are
     final).
Out: the same graph, each kernel (combo members included) marked ``fusec.storage = array<i64: ...>``: the storage
     of each result; so is each extern whose results are new tensors (``aten.mm``'s), whose storage a later
     kernel result may take.  Results with the same storage share one allocation; the launcher allocates a
     storage once and hands it on (``bufN = bufK``, or a reinterpretation where the shapes differ), as Inductor's
     wrapper reuses a freed buffer.  Fewer allocations a call, and a smaller footprint.

A result takes a storage whose last holder is dead: neither it nor any alias of it (a view, a combo's yield, an
extern's result that may alias it) is read at or after the result's launch (``fusec.analysis.buffer_lifetimes``),
and the graph does not return it.  The two must also have the same element type and either the same type or
dense layouts with the same number of elements (so the storage is exactly as large).  Among such storages the one
of the same type comes first, then the one freed last.  A remark per graph counts what it reused and why the
rest got new storage.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass

from fusec.analysis.buffer_lifetimes import Allocation, allocations, fits_storage
from fusec.base import remarks
from fusec.dialects import fusec as F

PASS = "reuse-buffers"


def plan(allocated: list[Allocation]) -> tuple[dict[SSAValue, int], int]:
    """Each allocated result's storage, and how many results took a dead one's."""
    storage: dict[SSAValue, int] = {}
    holder: dict[int, Allocation] = {}  # storage -> the last result written into it
    reused = 0
    for a in allocated:
        taker = isinstance(a.value.op, F.KernelOp)  # an extern's result is torch's new tensor: it only hands on
        free = [s for s, h in holder.items() if taker and h.dies is not None and h.dies < a.born
                and fits_storage(h.value, a.value)]
        if free:
            same = [s for s in free if holder[s].value.type == a.value.type]
            slot = max(same or free, key=lambda s: holder[s].dies or 0)
            reused += 1
        else:
            slot = len(holder)
        storage[a.value] = slot
        holder[slot] = a
    return storage, reused


@dataclass(frozen=True)
class ReuseBuffers(ModulePass):
    """Writes kernel results into the storage of dead buffers (``fusec.storage``), instead of new allocations."""

    name = PASS

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for graph in [g for g in op.walk() if isinstance(g, F.GraphOp)]:
            allocated = allocations(graph)
            storage, reused = plan(allocated)
            for kernel in [k for k in graph.walk() if isinstance(k, F.KernelOp)]:
                F.mark_storage(kernel, [storage.get(r, -1) for r in kernel.results])
            for extern in [e for e in graph.block.ops if isinstance(e, F.ExternOp) and e.results[0] in storage]:
                F.mark_storage(extern, [storage[r] for r in extern.results])
            taken = [a for a in allocated if isinstance(a.value.op, F.KernelOp)]
            if taken:
                returned = sum(1 for a in taken if a.dies is None)
                remarks.emit(PASS, "storages", f"@{graph.sym_name.data}: {len(taken)} kernel results, {reused} "
                             "written into the storage of a dead buffer (a kernel's or an extern's), the others "
                             f"into new storage (none dead of their element type and size); {returned} returned by "
                             "the graph", graph)
