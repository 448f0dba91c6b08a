"""The order of a graph's ops while combo-grouping forms groups: dependences and liveness.

Each node of a ``Schedule`` is a graph-level op or the kernels of a forming group,
contracted into one node (so a later group can never close a dependence cycle
through an earlier one).  Dependences are ancestor bit sets; liveness is by
position (fusec.analysis.liveness) as bit masks over the graph's buffers, with an
incremental form for "move two nodes into one at another slot".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import sympy
from xdsl.ir import Operation, SSAValue

from fusec.analysis.cost_model import KernelCost, SizeHints, buffer_bytes
from fusec.analysis.liveness import Step, live_intervals, live_masks, moment_bytes, op_step, storage_root
from fusec.dialects import fusec as F
from fusec.dialects.attributes import tensor_type_of


@dataclass(eq=False)
class Node:
    """One moment of the schedule: a graph op, or the kernels of a forming group."""

    ops: list[Operation]
    step: Step
    costs: list[KernelCost] = field(default_factory=list)
    classes: set[str] = field(default_factory=set)
    is_group: bool = False
    operands: list[SSAValue] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.operands = operands_of(self.ops)


class Schedule:
    """The graph's ops in order, groups contracted into one node each, with their dependences."""

    def __init__(self, graph: F.GraphOp):
        self.graph = graph
        self.nodes = [Node([op], op_step(op)) for op in graph.block.ops if not isinstance(op, F.OutputOp)]
        self.outputs = frozenset(storage_root(v) for v in graph.output_op.operands)
        values = sorted({v for n in self.nodes for v in n.step.allocates | n.step.reads}, key=_value_order(self.nodes))
        self.values = values
        self.index = {v: i for i, v in enumerate(values)}
        self._bit_bytes: list[int] | None = None
        self._mask_bytes: dict[int, int] = {}  # many moments of many tried orders hold the same buffers
        self.refresh()

    def refresh(self) -> None:
        self.position = {id(n): i for i, n in enumerate(self.nodes)}
        self.node_at = {id(op): i for i, n in enumerate(self.nodes) for op in n.ops}  # a graph op -> its node's index
        self.defined_by: dict[SSAValue, int] = {v: i for i, n in enumerate(self.nodes) for op in n.ops for v in op.results}
        self.ancestors: list[int] = []
        for n in self.nodes:
            anc = 0
            for j in self._producers(n):
                anc |= self.ancestors[j] | (1 << j)
            self.ancestors.append(anc)
        self.intervals = live_intervals([n.step for n in self.nodes], self.outputs)
        self.masks = live_masks(self.intervals, self.index, 0, len(self.nodes))
        self.outputs_mask = self._mask(v for v in self.outputs if v in self.intervals)
        self.readers: dict[SSAValue, list[int]] = {}
        for i, n in enumerate(self.nodes):
            for v in n.step.reads:
                self.readers.setdefault(v, []).append(i)
        self._heaviest: list[sympy.Expr] | None = None
        self._heaviest_bytes: int | None = None

    def _producers(self, node: Node) -> set[int]:
        return {self.defined_by[v] for v in node.operands if v in self.defined_by} - {self.position[id(node)]}

    def related(self, a: Node, b: Node) -> bool:
        i, j = self.position[id(a)], self.position[id(b)]
        return bool(self.ancestors[i] >> j & 1 or self.ancestors[j] >> i & 1)

    def live(self, lo: int, hi: int, nodes: Sequence[Node] | None = None) -> list[int]:
        """Live buffers (bit masks over ``values``) at the moments [lo, hi) of this order or of ``nodes``."""
        if nodes is None:
            return self.masks[lo:hi]
        return live_masks(live_intervals([n.step for n in nodes], self.outputs), self.index, lo, hi)

    def live_after_move(self, pa: int, pb: int, merged: Node, s: int, lo: int, hi: int) -> list[int]:
        """``live(lo, hi, order)`` for the order with nodes ``pa`` and ``pb`` merged into ``merged`` at slot
        ``s`` of the remaining ones, without recomputing every interval: buffers the moved nodes do not
        touch are live at a node exactly where they were, and at the merged node exactly where they were
        live across its slot."""
        n_old = len(self.nodes)

        def new_pos(p: int) -> int:
            r = p - (p > pa) - (p > pb)
            return r + (r >= s)

        q = self.old_position(s, pa, pb)
        touched, ranges = 0, {}
        for v in merged.step.allocates | merged.step.reads:
            if v not in self.intervals:
                continue  # a graph input: live throughout
            touched |= 1 << self.index[v]
            first = s if v in merged.step.allocates else new_pos(self.intervals[v][0])
            if v in self.outputs:
                last = n_old - 1
            else:
                last = max([new_pos(p) for p in self.readers.get(v, ()) if p not in (pa, pb)]
                           + [s if v in merged.step.reads else first, first])
            ranges[v] = (first, last)
        keep = ~touched
        if q < n_old:
            across = self.masks[q] & keep & ~self._mask(self.nodes[q].step.allocates)
        else:
            across = self.outputs_mask & keep
        moved = live_masks(ranges, self.index, lo, hi)  # the touched buffers, moment by moment, in one sweep
        out = []
        for i, touched_live in zip(range(lo, hi), moved, strict=True):
            mask = across if i == s else self.masks[self.old_position(i - (i > s), pa, pb)] & keep
            out.append(mask | touched_live)
        return out

    def old_position(self, r: int, pa: int, pb: int) -> int:
        """The position before the move of the node at index ``r`` of the order without ``pa`` and ``pb``."""
        lo, hi = min(pa, pb), max(pa, pb)
        p = r + (r >= lo)
        return p + (p >= hi)

    def _mask(self, values) -> int:
        m = 0
        for v in values:
            m |= 1 << self.index[v]
        return m

    def buffers(self, mask: int) -> list[SSAValue]:
        return [self.values[i] for i in _bits(mask)]

    def hinted_bytes(self, mask: int, hints: SizeHints) -> int:
        """Bytes of the buffers in ``mask`` at the size hints (exact where the graph has no size symbols)."""
        if self._bit_bytes is None:  # the values and their bits never change; the hints are the pass's
            self._bit_bytes = [buffer_bytes(tensor_type_of(v), hints) for v in self.values]
        total = self._mask_bytes.get(mask)
        if total is None:
            per_bit = self._bit_bytes
            total = self._mask_bytes[mask] = sum(per_bit[i] for i in _bits(mask))
        return total

    def heaviest_moments(self, hints: SizeHints, count: int) -> list[sympy.Expr]:
        """The byte counts (over the size symbols) of the ``count`` fullest moments under the size hints."""
        if self._heaviest is None:
            weight = self._moment_weights(hints)
            fullest = sorted(weight, key=lambda m: -weight[m])[:count]
            self._heaviest = [moment_bytes(self.buffers(m)) for m in fullest]
        return self._heaviest

    def heaviest_bytes(self, hints: SizeHints) -> int:
        """The bytes of the fullest moment under the size hints (an int: no symbolic sum of its buffers)."""
        if self._heaviest_bytes is None:
            self._heaviest_bytes = max(self._moment_weights(hints).values(), default=0)
        return self._heaviest_bytes

    def _moment_weights(self, hints: SizeHints) -> dict[int, int]:
        """Each distinct moment of the order (its live mask) -> its bytes under the size hints."""
        return {m: self.hinted_bytes(m, hints) for m in set(self.live(0, len(self.nodes)))}


def _bits(mask: int):
    """The positions of the set bits of ``mask``, lowest first (a walk over set bits, not over all buffers)."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def _value_order(nodes: list[Node]):
    """Buffers numbered in the order they appear (a stable bit order for live masks)."""
    first: dict[SSAValue, int] = {}
    for i, n in enumerate(nodes):
        for op in n.ops:
            for v in op.results:
                first.setdefault(v, i)
    return lambda v: (first.get(v, -1), getattr(v, "index", 0))


def operands_of(ops: Sequence[Operation]) -> list[SSAValue]:
    """Operands the ops take from outside themselves (for a combo: its kernels' operands)."""
    inner = {r for op in ops for r in op.results}
    out = []
    for op in ops:
        for v in (op.operands if not isinstance(op, F.ComboOp) else [v for k in op.kernels for v in k.operands]):
            if v not in inner:
                out.append(v)
    return out


def depends(later: Operation, earlier: Operation) -> bool:
    """Whether a path of def-use edges (through any graph-level op) leads from ``earlier`` to ``later``."""
    graph = earlier.parent_op()
    assert isinstance(graph, F.GraphOp), "graph-level ops"
    seen: set[int] = set()
    work = [earlier]
    while work:
        op = work.pop()
        for r in op.results:
            for use in r.uses:
                user = graph_level(use.operation, graph)
                if user is later:
                    return True
                if id(user) not in seen:
                    seen.add(id(user))
                    work.append(user)
    return False


def graph_level(op: Operation, graph: F.GraphOp) -> Operation:
    while (parent := op.parent_op()) is not graph:
        assert parent is not None, "op lies inside graph"
        op = parent
    return op
