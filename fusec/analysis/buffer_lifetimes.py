"""When each storage a call makes is written first and read last, counting every alias of it.

A graph after form-kernels launches its top-level ops in order; the launcher allocates a fresh buffer for
each kernel result (a combo member's included), except a result stored straight into an input in place, and
torch allocates the results of externs (those its schemas declare new tensors are storages too).
A buffer's storage is still in use while any value that may share it is: views of it (fusec views, and
torch views an extern returns), a combo's yield of it, and, conservatively, the results of an extern whose
schema does not promise fresh tensors (``aten.mm`` does; an unknown target does not).  A storage that the
graph returns, through any alias, outlives the call.

``reuse-buffers`` plans storages from these lifetimes; the launcher checks the plan against them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import sympy
from xdsl.ir import Operation, OpResult, SSAValue

from fusec.analysis import collectives
from fusec.base import shapes
from fusec.dialects import fusec as F
from fusec.dialects.attributes import TensorType, tensor_type_of


@dataclass(frozen=True)
class Allocation:
    """A storage a call makes: a kernel result the launcher allocates, or a new tensor an extern returns (torch
    allocates it; a later kernel result may take it over).  ``born`` is the index of the top-level op that writes
    it (its kernel, combo or extern), ``dies`` that of the last one reading it or an alias of its storage; None
    when the graph returns it or an alias (the storage outlives the call)."""

    value: OpResult
    born: int
    dies: int | None


def graph_operands(op: Operation) -> list[SSAValue]:
    """The graph values a top-level op reads: for a combo, what its kernels read (it has no operands itself);
    a collective's wait also holds the collective's inputs, which must live until it."""
    if isinstance(op, F.ComboOp):
        return [v for k in op.kernels for v in k.operands]
    return list(op.operands) + collectives.held_until(op)


def graph_results(op: Operation) -> list[SSAValue]:
    """The buffers a top-level op makes: for a combo, every kernel output (those it does not yield die at once)."""
    if isinstance(op, F.ComboOp):
        yielded = set(op.output_op.operands)
        return [*op.results, *(r for k in op.kernels for r in k.results if r not in yielded)]
    return list(op.results)


def stored_in_place(graph: F.GraphOp) -> dict[SSAValue, int]:
    """Kernel results that are an input's own storage (``mutate-in-place``; a combo's member result, which the
    launcher allocates), each with the input's index: not allocated."""
    found: dict[SSAValue, int] = {}
    for i, o, in_place in graph.input_mutations:
        if in_place:
            v = graph.output_op.operands[o]
            found[v.op.member_result(v.index) if isinstance(v, OpResult) and isinstance(v.op, F.ComboOp) else v] = i
    return found


def allocations(graph: F.GraphOp) -> list[Allocation]:
    """Every storage a call makes, in launch order, with its lifetime."""
    in_place = stored_in_place(graph)
    shares: dict[SSAValue, frozenset[OpResult]] = {}  # value -> the storages it may alias
    born: dict[OpResult, int] = {}
    last: dict[OpResult, int | None] = {}
    for i, op in enumerate(graph.block.ops):
        returned = isinstance(op, F.OutputOp)
        for a in {a for v in graph_operands(op) for a in shares.get(v, ())}:
            if (dies := last[a]) is not None:
                last[a] = None if returned else max(dies, i)
        if returned:
            break
        for r in _new_storages(op, in_place):
            born[r], last[r] = i, i
            shares[r] = frozenset((r,))
        if isinstance(op, F.ComboOp):
            for r in op.results:
                shares[r] = shares.get(op.member_result(r.index), frozenset())
        elif isinstance(op, F.VIEW_OPS) or (isinstance(op, F.ExternOp) and _may_alias(op)):
            operands = frozenset(a for v in op.operands for a in shares.get(v, ()))
            for r in op.results:
                shares[r] = operands
    return [Allocation(r, born[r], last[r]) for r in born]


def _new_storages(op: Operation, in_place: dict[SSAValue, int]) -> list[OpResult]:
    """The storages a top-level op makes: its kernels' results (but those stored into inputs), or an extern's
    new tensors -- on the graph's device: an extern the importer marked as computing elsewhere (``fusec.device``:
    a CPU factory op beside GPU kernels) makes storage no kernel can write."""
    if isinstance(op, F.ExternOp):
        return list(op.results) if F.DEVICE_MARK not in op.attributes and _fresh_tensors(op) else []
    kernels = op.kernels if isinstance(op, F.ComboOp) else [op] if isinstance(op, F.KernelOp) else []
    return [r for k in kernels for r in k.results if r not in in_place]


def fits_storage(old: SSAValue, new: SSAValue) -> bool:
    """Whether ``new`` can be written into the storage allocated for ``old``: the same element type, and the same
    type or dense layouts of as many elements (the storage exactly as large)."""
    return _types_fit(tensor_type_of(old), tensor_type_of(new))


@functools.lru_cache(maxsize=4096)
def _types_fit(a: TensorType, b: TensorType) -> bool:
    """``fits_storage`` by the two types, which is all it reads: reuse-buffers asks it of every dead buffer for
    every kernel result, 4,059 times on GPT-2's backward graph, of a few dozen types, and each answer proves
    layouts dense with sympy (0.15 s of that graph's pipeline before it was cached)."""
    if a == b:
        return True
    if a.element_type != b.element_type:
        return False
    if shapes.dense_dim_order(a.dims, a.layout) is None or shapes.dense_dim_order(b.dims, b.layout) is None:
        return False
    return sympy.expand(shapes.numel(a.dims) - shapes.numel(b.dims)) == 0


def _fresh_tensors(op: F.ExternOp) -> bool:
    """Whether each of an extern's results is a new tensor of its own (never None, never sharing storage): its
    storage can be handed on once it is dead, as a kernel result's."""
    if _may_alias(op):
        return False
    schema = _schema(op.target.data)  # _may_alias found it
    return schema is not None and bool(schema.returns) and all(str(r.type) == "Tensor" for r in schema.returns)


# Ops whose schemas declare new tensors but which return views of their input (functionalization's exceptions).
_UNDECLARED_VIEWS = frozenset({"aten._unsafe_view.default", "aten.unsafe_split.Tensor", "aten.unsafe_split_with_sizes.default",
                               "aten.unsafe_chunk.default"})


def _may_alias(op: F.ExternOp) -> bool:
    """Whether an extern's results may share storage with its operands: unless torch's schema says each result
    is a fresh tensor (a collective's wait, ``_unsafe_view`` and the ``unsafe_`` splits return their input or views
    of it though their schemas say otherwise)."""
    if collectives.kind(op) is not None or op.target.data in _UNDECLARED_VIEWS:
        return True
    try:
        schema = _schema(op.target.data)
    except LookupError:
        return True
    return schema is None or any(r.alias_info is not None for r in schema.returns)


def _schema(target: str):
    """torch's schema of an extern's target, or None; LookupError for an unknown target.  torch is imported here, on
    the first extern, not with this module: fusec-opt then runs IR without externs without it (~1.8 s a process)."""
    from fusec.dialects import extern_calls

    return getattr(extern_calls.resolve_target(target), "_schema", None)
