"""Live ranges of a graph's buffers by position in its block, and a peak-memory estimate.

A graph runs its ops in block order, one *moment* per op.  A buffer is live from
the moment the op that allocates it (a kernel, an extern, a combo) runs to the
last moment an op reads it; a view aliases its source, so reading the view reads
the source.  Graph outputs stay live to the end; graph inputs belong to the
caller and are live throughout.  Every buffer an op reads or allocates is live
during that op (a combo's members all run at its one moment).  A collective's wait
returns the collective's buffer (an alias) and holds the collective's inputs alive
until it runs (fusec.analysis.collectives).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import sympy
from xdsl.ir import Operation, OpResult, SSAValue

from fusec.analysis import collectives
from fusec.analysis.cost_model import SizeHints, buffer_bytes, element_bytes, resolve_size_hints, storage_numel
from fusec.base import shapes
from fusec.dialects import fusec as F
from fusec.dialects.attributes import tensor_type_of

VIEW_OPS = (F.ReshapeOp, F.PermuteOp, F.ExpandOp, F.SliceOp)


def storage_root(value: SSAValue) -> SSAValue:
    """The value that owns ``value``'s storage: through views, and from a combo result to its kernel's."""
    while True:
        op = value.owner
        if isinstance(op, VIEW_OPS):
            value = op.input
        elif isinstance(op, F.ComboOp):
            assert isinstance(value, OpResult)
            value = op.member_result(value.index)
        elif (waited := collectives.aliased_input(value)) is not None:
            value = waited
        else:
            return value


@dataclass(frozen=True)
class Step:
    """One moment of a schedule: the buffers it allocates and the buffers it reads (storage roots)."""

    allocates: frozenset[SSAValue]
    reads: frozenset[SSAValue]

    def __or__(self, other: Step) -> Step:
        return Step(self.allocates | other.allocates, self.reads | other.reads)


def op_step(op: Operation) -> Step:
    """What a graph-level op allocates and reads."""
    if isinstance(op, F.ComboOp):
        kernels = op.kernels
        allocates = frozenset(r for k in kernels for r in k.results)
        reads = frozenset(storage_root(v) for k in kernels for v in k.operands) - allocates
        return Step(allocates, reads)
    reads = frozenset(storage_root(v) for v in [*op.operands, *collectives.held_until(op)])
    if isinstance(op, VIEW_OPS) or isinstance(op, F.OutputOp) or collectives.kind(op) == collectives.WAIT:
        return Step(frozenset(), reads)
    return Step(frozenset(op.results), reads)


def live_intervals(steps: Sequence[Step], outputs: frozenset[SSAValue] | set[SSAValue]) -> dict[SSAValue, tuple[int, int]]:
    """Buffer -> (first, last) moment it is live; graph outputs live to ``len(steps)``; inputs omitted."""
    start: dict[SSAValue, int] = {}
    end: dict[SSAValue, int] = {}
    for i, step in enumerate(steps):
        for v in step.allocates:
            start[v] = i
            end[v] = max(end.get(v, i), i)
        for v in step.reads:
            if v in start:
                end[v] = i
    for v in outputs:
        if v in start:
            end[v] = len(steps)
    return {v: (start[v], end[v]) for v in start}


def live_sets(steps: Sequence[Step], outputs, lo: int = 0, hi: int | None = None) -> list[frozenset[SSAValue]]:
    """The buffers live at each moment in [lo, hi) (graph inputs left out)."""
    hi = len(steps) if hi is None else hi
    sets: list[set[SSAValue]] = [set() for _ in range(max(0, hi - lo))]
    for v, (first, last) in live_intervals(steps, outputs).items():
        for i in range(max(first, lo), min(last, hi - 1) + 1):
            sets[i - lo].add(v)
    return [frozenset(s) for s in sets]


def live_masks(intervals: Mapping[SSAValue, tuple[int, int]], index: Mapping[SSAValue, int], lo: int, hi: int) -> list[int]:
    """Live sets at the moments [lo, hi) as bit masks (bit ``index[v]`` for buffer v), from ``live_intervals``."""
    adds: dict[int, int] = {}
    drops: dict[int, int] = {}
    for v, (first, last) in intervals.items():
        first, last = max(first, lo), min(last, hi - 1)
        if first <= last:
            adds[first] = adds.get(first, 0) | 1 << index[v]
            drops[last + 1] = drops.get(last + 1, 0) | 1 << index[v]
    masks, mask = [], 0
    for i in range(lo, hi):
        mask = (mask & ~drops.get(i, 0)) | adds.get(i, 0)
        masks.append(mask)
    return masks


def graph_steps(graph: F.GraphOp) -> tuple[list[Step], frozenset[SSAValue]]:
    """The graph's moments (its ops but the terminator) and the roots of its outputs."""
    ops = [op for op in graph.block.ops if not isinstance(op, F.OutputOp)]
    outputs = frozenset(storage_root(v) for v in graph.output_op.operands)
    return [op_step(op) for op in ops], outputs


def peak_memory_estimate(graph: F.GraphOp, size_hints: SizeHints | Mapping[str, int] | None = None) -> int:
    """Bytes held at the graph's fullest moment (inputs included), sizes from ``size_hints``.

    ``size_hints`` is a ``SizeHints`` or a symbol -> value mapping (missing symbols
    resolved as ``cost_model.resolve_size_hints`` does).
    """
    hints = size_hints if isinstance(size_hints, SizeHints) else resolve_size_hints(graph, size_hints)
    steps, outputs = graph_steps(graph)
    inputs = sum(buffer_bytes(tensor_type_of(a), hints) for a in graph.block.args)
    peak = 0
    for live in live_sets(steps, outputs):
        peak = max(peak, sum(buffer_bytes(tensor_type_of(v), hints) for v in live))
    return inputs + peak


# ---------------------------------------------------------------- symbolic comparison of moments


def moment_bytes(live: Iterable[SSAValue]) -> sympy.Expr:
    """Bytes held by a live set, as an expression over the size symbols."""
    return sympy.Add(*(_type_bytes(tensor_type_of(v)) for v in live))


@functools.lru_cache(maxsize=4096)
def _type_bytes(t: F.TensorType) -> sympy.Expr:
    return storage_numel(t) * element_bytes(t)


def provably_at_most(small: sympy.Expr, large: sympy.Expr, lower_bounds: Mapping[str, int]) -> bool:
    """True only when ``small <= large`` for every value of the symbols at or above their lower bounds.

    Each symbol s becomes lower(s) + t with t >= 0; a polynomial in the t's whose coefficients are all
    non-negative is non-negative.  Anything that is not a polynomial (floordiv, max) is not proved.  The shift is
    linear, so each side is shifted once (cached: combo-grouping compares many new moments with the same few
    heaviest old ones) in sympy's sparse polynomial rings, and only the shifted sides are subtracted.
    """
    small, large = sympy.sympify(small), sympy.sympify(large)
    names = sorted(shapes.free_size_symbols([small, large]))
    if not names:
        return bool(large - small >= 0)
    shift = tuple((n, max(lower_bounds.get(n, 1), 1)) for n in names)
    low, high = _shifted(small, shift), _shifted(large, shift)
    if low is None or high is None:
        return False
    return all(c >= 0 for c in (high - low).coeffs())


@functools.lru_cache(maxsize=8192)
def _shifted(expr: sympy.Expr, shift: tuple[tuple[str, int], ...]):
    """``expr`` with each symbol s of ``shift`` replaced by its lower bound + s, as an element of the rational
    polynomial ring over those symbols; None where ``expr`` is no polynomial in them."""
    from sympy.polys.domains import QQ
    from sympy.polys.rings import ring

    ring_, *gens = ring([shapes.symbol(n) for n, _ in shift], QQ)
    try:
        poly = ring_.from_expr(expr)
    except (ValueError, TypeError, sympy.polys.polyerrors.PolynomialError):
        return None
    return poly.compose([(g, g + lower) for g, (_, lower) in zip(gens, shift, strict=True)])
