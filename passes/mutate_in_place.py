"""mutate-in-place: a kernel stores an input's new value straight into the input.

In:  a scheduled graph (after schedule-kernels: the launch order is final) whose ``fusec.input_mutations``
     say which outputs are written into which inputs after a call (a batch norm's running mean and variance,
     ``copy_`` nodes AOTAutograd keeps in the graph).
Out: the same graph, with ``in_place`` set to 1 on each mutation the launcher may do in place: the output's
     buffer *is* the input, so its kernel's store is the write and no copy follows the call.

A write is in place only when nothing can observe the input's old value after the kernel stores into it:

* the output is a kernel's result (in a combo or not) of exactly the input's type (shape, layout, element
  type), and the graph returns it only for this write;
* every other reader of the input, and of views of it, launches before that kernel (or combo);
* inside that launch only the kernel itself reads the input, directly and only at the index it stores the
  output at, so each element is read before the program that owns it overwrites it.

Each mutation left to a copy gets a ``copied-mutation`` remark naming the reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import BlockArgument, Operation, OpResult, SSAValue
from xdsl.passes import ModulePass

from fusec.base import remarks
from fusec.base.remarks import describe
from fusec.dialects import fusec as F
from fusec.passes.kernel_index import R, X, same_index

PASS = "mutate-in-place"


def _launch_of(op: Operation, graph: F.GraphOp) -> Operation:
    """The graph-level op that launches ``op`` (a combo member's combo)."""
    while op.parent_op() is not graph:
        parent = op.parent_op()
        assert parent is not None, "an op inside the graph"
        op = parent
    return op


def _readers(value: SSAValue, graph: F.GraphOp) -> list[tuple[Operation, SSAValue]]:
    """(graph-level op, the value it reads) for every read of ``value`` or of a view of it."""
    found: list[tuple[Operation, SSAValue]] = []
    todo = [value]
    while todo:
        v = todo.pop()
        for use in v.uses:
            user = use.operation
            if isinstance(user, F.VIEW_OPS):
                todo.append(user.result)
            elif not isinstance(user, F.OutputOp):
                found.append((user, v))
    return [(_launch_of(user, graph), v) for user, v in found]


def why_copied(graph: F.GraphOp, written: BlockArgument, output: int) -> str | None:
    """Why output ``output`` cannot be stored into input ``written`` in place, or None when it can."""
    value = graph.output_op.operands[output]
    if not isinstance(value, OpResult):
        return "its value is a graph input"
    kernel = value.op
    if isinstance(kernel, F.ComboOp):  # the combo yields a member's result
        value = kernel.member_result(value.index)
        assert isinstance(value, OpResult), "a combo yields its kernels' results"
        kernel = value.op
    if not isinstance(kernel, F.KernelOp):
        return f"its value is not a kernel's result (it comes from {describe(kernel)})"
    if value.type != written.type:
        return "its type differs from the input's"
    if sum(1 for v in graph.output_op.operands if v is graph.output_op.operands[output]) > 1:
        return "the graph also returns the value"
    launch = _launch_of(kernel, graph)
    order = {op: i for i, op in enumerate(graph.block.ops)}
    for reader, through in _readers(written, graph):
        if order[reader] > order[launch]:
            return f"{describe(reader)} reads the input after the kernel writes it"
        if reader is not launch:
            continue
        combo = kernel.parent_op()
        members = combo.kernels if isinstance(combo, F.ComboOp) else [kernel]
        for member in members:
            if written not in member.inputs and through not in member.inputs:
                continue
            if member is not kernel or through is not written:
                return "another kernel of the same launch, or a view, reads the input"
    return _reads_where_it_stores(kernel, written, value)


def _reads_where_it_stores(kernel: F.KernelOp, written: BlockArgument, value: OpResult) -> str | None:
    """None when ``kernel`` reads ``written`` only at the index it stores ``value`` at."""
    arg_of = dict(zip(kernel.inputs, kernel.input_args, strict=True))
    out = kernel.output_args[list(kernel.outputs).index(value)]
    stores = [op for op in kernel.block.ops if isinstance(op, F.StoreOp) and op.buffer is out]
    if written not in arg_of:
        return None
    loads = [op for op in kernel.block.ops if isinstance(op, F.LoadOp) and op.buffer is arg_of[written]]
    if not loads:
        return None
    # over a domain of one element (a step counter's add) x and r are 0
    fixed = {v: 0 for v, n in zip((X, R), kernel.domain_exprs, strict=False) if n == 1}
    if len(stores) != 1 or any(op.offset is not None
                               or not same_index(op.index.data.subs(fixed), stores[0].index.data.subs(fixed))
                               for op in loads):
        return "the kernel reads the input at other elements than it writes"
    return None


@dataclass(frozen=True)
class MutateInPlace(ModulePass):
    """Marks the input writes a kernel can store in place (``fusec.input_mutations``' in_place flag)."""

    name = PASS

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for graph in [g for g in op.walk() if isinstance(g, F.GraphOp)]:
            decided = []
            for i, o, _ in graph.input_mutations:
                why = why_copied(graph, graph.block.args[i], o)
                if why is not None:
                    remarks.emit(PASS, "copied-mutation", f"input {i} takes output {o} by a copy after the call: {why}",
                                 graph.output_op)
                decided.append((i, o, why is None))
            graph.set_input_mutations(decided)
