"""Registers a kernel's body holds per element of its tile, and how many elements a thread may hold.

A Triton program holds its tile in registers, ``tile / threads`` elements a thread.  Each body value that varies
over the whole tile (x and r in a 2-D kernel, x in a 1-D one) takes a register per element a thread holds (two
for 64-bit values) from its definition to its last use, and a load holds a 64-bit address per element while it
issues.  Values over x alone or r alone in a 2-D tile are held once per row or column and are not counted.  The
peak of that count over the body, in body order, is ``registers_per_element``; times the elements a thread holds,
it estimates the registers a thread needs.

Past 255 registers a thread, ptxas spills to local memory, and well before that the SM holds few warps: Llama's
rotary embedding (a 64x64 tiled kernel, 32 elements a thread, 5 registers an element by the estimate) compiled to 255 registers
and 144 bytes of spills on sm_90 and ran at 42 us a layer where Inductor's took 7; at 16 elements a thread (149
registers, no spills) 21 us, at 8 (87 registers) 9.6 us (H200, 2026-11-27).  Across the whole-model kernels of
GPT-2, BERT, ViT and Llama (ptxas for sm_90) the estimate was within a factor of two of ptxas's count.  A budget of
64 took Llama's bf16 inference from 433 to 299 us and left GPT-2, BERT and ViT within 1%.  Column sums (outer
reductions) get twice the budget: their tiles of 64 elements a thread ran 7-34% faster than at 32 (8 warps).
"""

from __future__ import annotations

from xdsl.ir import SSAValue

from fusec.analysis import heuristics
from fusec.dialects import fusec as F

REGISTER_BUDGET = 64  # estimated registers a thread may hold its elements in (ptxas's count runs up to twice that)
WIDE_TYPES = ("i64", "f64")
ADDRESS_REGISTERS = 1  # a load's address per element while it issues (64-bit, but often folded into the load)


def _axes(expr) -> frozenset[str]:
    return frozenset(s.name for s in expr.free_symbols if s.name in ("x", "r"))


def registers_per_element(kernel: F.KernelOp) -> int:
    """Peak registers the body's tile-wide values hold per element (see the module docstring)."""
    full = frozenset({"x", "r"}) if kernel.is_reduction else frozenset({"x"})
    ops = list(kernel.block.ops)
    last_use: dict[SSAValue, int] = {}
    for i, op in enumerate(ops):
        for operand in op.operands:
            last_use[operand] = i
    axes: dict[SSAValue, frozenset[str]] = {}
    live: dict[SSAValue, int] = {}
    peak = 0
    for i, op in enumerate(ops):
        transient = 0
        if isinstance(op, F.LoadOp):
            over = _axes(op.index.data).union(*(axes.get(o, frozenset()) for o in op.operands[1:]))
            over = full if over else over  # the lowering broadcasts a load to the tile it is masked by
            transient = ADDRESS_REGISTERS if over == full else 0  # its addresses
        elif isinstance(op, F.SymbolicOp):
            over = _axes(op.expr.data)
        elif isinstance(op, F.ReduceROp):
            over = frozenset({"x"})
        else:
            over = frozenset().union(*(axes.get(o, frozenset()) for o in op.operands))
        for result in op.results:
            axes[result] = over
            if over == full and result in last_use:
                live[result] = 2 if str(result.type) in WIDE_TYPES else 1
        peak = max(peak, sum(live.values()) + transient)
        for operand in op.operands:
            if last_use.get(operand) == i:
                live.pop(operand, None)
    return peak


def per_thread_limit(kernel: F.KernelOp, kind: str, outer: bool = False, budget: int = REGISTER_BUDGET,
                     persistent_form: bool = False) -> int | None:
    """The most elements a thread of ``kernel``, scheduled as ``kind``, should hold (a power of 2) so that its
    estimated registers stay within ``budget`` (twice that for a column sum: ``outer``); None when the budget is 0 or
    when even the most the kind's heuristic gives a thread fits (``heuristics.most_per_thread``; with
    ``persistent_form``, a looped kernel's persistent form too, which the limit also serves)."""
    if not budget:
        return None
    most = heuristics.most_per_thread(kind, outer)
    if persistent_form:
        most = max(most, heuristics.most_per_thread("persistent", outer))
    per_element = registers_per_element(kernel)
    if outer:
        budget *= 2
    if per_element * most <= budget:
        return None
    limit = 1
    while per_element * limit * 2 <= budget:
        limit *= 2
    return limit
