"""sink-gathers: a gather of a pointwise result gathers the operands instead, so the full result is never stored.

In:  a graph before form-kernels.  ``fusec.gather %p[%idx] dim d`` where ``%p`` is a
     ``fusec.pointwise`` over a larger domain: cross-entropy reads the log-softmax of
     [tokens, vocabulary] logits at one target per row, and as written the whole
     log-softmax (``logits - max - log(sum(exp))``, 206 MB in fp32 for GPT-2's 1024
     tokens) is computed, stored and read back for 1024 elements of it.
Out: the pointwise op over the gathered elements of its operands:
     ``gather(sub(a, b)) -> sub(gather(a), gather(b))``, walked to a fixed point, so the
     gather reaches the logits and the per-row statistics; the full-size op is left to
     its other users (dead code when there are none).  Each operand is either of the
     pointwise result's shape (gathered), size 1 along ``d`` and the result's size
     elsewhere (a per-row value: expanded to the gather's shape, no gather needed) or a
     scalar.

A view between the gather and the pointwise op (HuggingFace's loss reshapes the upcast logits to
[tokens, vocabulary] before the log-softmax) moves above the op first: ``gather(view(convert(a)))``
becomes ``gather(convert(view(a)))``, the view applied to each operand, when every tensor operand has
the op's shape and layout (no broadcast for the view to split), so the gather reaches the bf16 logits
and the fp32 copy of them is never stored.

Along the other dims an index may be shorter than the input (torch.gather's contract: never longer): the
gather reads the input's first rows only, and so, sliced to them, do the gathered operands.  (Labels that a
graph break gave symbols of their own are not such a case any more: the importer's size facts write their rows
as the logits'.)

Declined, with a ``gather-kept`` remark saying why: an operand that broadcasts along
another dim (a gather of it would need its expansion first), or an index that is not
provably shorter than the input along ``d`` (then the gather would recompute the op more
often than the op runs).
``iota`` (a value that is its own position) never moves through a gather; nothing is
said about gathers of other ops.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint

from fusec.base import remarks
from fusec.base.shapes import print_expr, provably_equal
from fusec.dialects import fusec as F
from fusec.dialects.attributes import tensor_type_of
from fusec.passes.split_reductions import size_range

PASS = "sink-gathers"
POSITIONAL = frozenset({"iota"})  # the value is the element's position: gathering it is not iota of the gather


def _provably_shorter(index_len: sympy.Expr, input_len: sympy.Expr, op: Operation) -> bool:
    """index_len < input_len for every size the graph's symbol bounds admit (``op`` is a graph-level op)."""
    graph = op.parent_op()
    assert isinstance(graph, F.GraphOp), "gathers live at graph level"
    return size_range(sympy.sympify(input_len - index_len), graph.symbol_bounds)[0] >= 1


HOISTED_VIEWS = (F.ReshapeOp, F.PermuteOp, F.SliceOp)  # one operand, elements only relabelled


def _view_like(view: Operation, x: SSAValue, result_type: F.TensorType) -> Operation:
    if isinstance(view, F.PermuteOp):
        return F.PermuteOp(x, view.perm_list, result_type)
    if isinstance(view, F.SliceOp):
        return F.SliceOp(x, view.dim.data, view.start.data, view.step.data, result_type)
    return F.ReshapeOp(x, result_type)


class HoistViewAboveGatheredPointwise(RewritePattern):
    """``gather(view(p(a, b)))`` -> ``gather(p(view(a), view(b)))`` for the gather's view alone (the walker then
    sinks the gather through ``p``)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: F.GatherOp, rewriter: PatternRewriter, /) -> None:
        view = op.input.owner
        if not isinstance(view, HOISTED_VIEWS):
            return
        producer = view.input.owner
        if not isinstance(producer, F.PointwiseOp) or producer.fn.data in POSITIONAL:
            return
        full = tensor_type_of(producer.result)
        # Rank-0 operands of a larger op are scalars it broadcasts; those of a rank-0 op are its whole operands.
        tensors = {x: x.type for x in producer.inputs if isinstance(x.type, F.TensorType) and (x.type.rank > 0 or full.rank == 0)}
        if any(t.rank != full.rank or t.layout != full.layout
               or not all(provably_equal(a, b) for a, b in zip(t.dims, full.dims, strict=True)) for t in tensors.values()):
            return
        viewed_type = tensor_type_of(view.result)
        new_ops: list[Operation] = []
        operands: list[SSAValue] = []
        for x in producer.inputs:
            if x not in tensors:
                operands.append(x)
                continue
            new_ops.append(_view_like(view, x, F.TensorType(viewed_type.dims, tensors[x].element_type, viewed_type.layout)))
            operands.append(new_ops[-1].results[0])
        new_ops.append(F.PointwiseOp(producer.fn.data, operands, viewed_type.contiguous()))
        rewriter.insert(new_ops, InsertPoint.before(op))
        rewriter.replace_uses_with_if(view.result, new_ops[-1].results[0], lambda use: use.operation is op)
        if not view.result.uses:
            rewriter.erase_op(view)


class SinkGather(RewritePattern):
    """One gather moved through the pointwise op it reads (the walker repeats it down the chain)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: F.GatherOp, rewriter: PatternRewriter, /) -> None:
        producer = op.input.owner
        rows = None  # a slice of the producer's first rows, which an earlier step made for a shorter index
        if isinstance(producer, F.SliceOp) and _first_rows(producer, op.dim.data):
            rows, producer = producer, producer.input.owner
        if not isinstance(producer, F.PointwiseOp) or producer.fn.data in POSITIONAL:
            return
        why = self.obstacle(op, producer)
        if why is not None:
            remarks.emit(PASS, "gather-kept", f"{producer.fn.data} stays whole for {op.name}: {why}", producer, op)
            return
        dim, index = op.dim.data, op.index
        dims = tensor_type_of(op.result).dims
        full_dims = tensor_type_of(producer.result).dims
        new_ops: list[Operation] = []
        operands: list[SSAValue] = []
        for x in producer.inputs:
            t = x.type
            if not isinstance(t, F.TensorType) or t.rank == 0:
                operands.append(x)
                continue
            for d, (want, have) in enumerate(zip(dims, t.dims, strict=True)):
                if d != dim and have != 1 and not provably_equal(want, have):  # the index's first rows only
                    t = F.TensorType([want if e == d else h for e, h in enumerate(t.dims)], t.element_type, t.layout)
                    new_ops.append(F.SliceOp(x, d, 0, 1, t))
                    x = new_ops[-1].results[0]
            gathered = F.TensorType(dims, t.element_type)
            if t.dims[dim] != 1 or full_dims[dim] == 1:
                new: Operation = F.GatherOp(x, index, dim, gathered)
            elif gathered == t:  # a per-row value read at one position per row: itself
                operands.append(x)
                continue
            else:
                new = F.ExpandOp(x, gathered)
            new_ops.append(new)
            operands.append(new.results[0])
        new_ops.append(F.PointwiseOp(producer.fn.data, operands, op.result.type))
        remarks.emit(PASS, "sunk-gather", f"{producer.fn.data} computed for the {print_expr(sympy.prod(dims))} "
                     f"gathered elements, not for all {print_expr(sympy.prod(full_dims))}", producer, op)
        rewriter.replace(op, new_ops)
        if rows is not None and not rows.result.uses:
            rewriter.erase(rows)
        if not producer.result.uses:
            rewriter.erase(producer)

    @staticmethod
    def obstacle(op: F.GatherOp, producer: F.PointwiseOp) -> str | None:
        """Why ``op`` cannot move through ``producer``, or None."""
        dim, full = op.dim.data, tensor_type_of(producer.result)
        index_dims = tensor_type_of(op.index).dims
        if not _provably_shorter(index_dims[dim], full.dims[dim], op):
            return (f"the index's {print_expr(index_dims[dim])} along dim {dim} is not provably fewer than the "
                    f"{print_expr(full.dims[dim])} elements it gathers from")
        for x in producer.inputs:
            t = x.type
            if not isinstance(t, F.TensorType) or t.rank == 0:
                continue
            if t.rank != full.rank or any(d != dim and not provably_equal(a, b)
                                          for d, (a, b) in enumerate(zip(t.dims, full.dims, strict=True))):
                return f"an operand of shape [{', '.join(print_expr(e) for e in t.dims)}] broadcasts along another dim"
        return None


def _first_rows(op: F.SliceOp, gather_dim: int) -> bool:
    """``op`` keeps the first elements of a dim other than the gather's (start 0, step 1)."""
    return op.dim.data != gather_dim and op.step.data == 1 and op.start.data == 0


@dataclass(frozen=True)
class SinkGathers(ModulePass):
    """Gathers of pointwise results gather the pointwise ops' operands instead (no options)."""

    name = PASS

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        patterns = GreedyRewritePatternApplier([HoistViewAboveGatheredPointwise(), SinkGather()])
        PatternRewriteWalker(patterns, apply_recursively=True).rewrite_module(op)
