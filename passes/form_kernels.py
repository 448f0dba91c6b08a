"""form-kernels: every computing graph op becomes its own ``fusec.kernel``.

In:  a graph-level ``fusec.graph`` (pointwise, reduce, cat, index, gather, views,
     constants, symbolic values, externs).
Out: one kernel per pointwise/reduce/cat/index/gather op.  Views fold into the
     index expressions of the loads that read them; constants and symbolic values
     fold into the kernels that use them.  What is left at graph level: kernels,
     externs, views whose results reach an extern or the output, and the output.

This is the correctness baseline: the pipeline is complete with no fusion pass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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

from fusec.base import remarks, shapes
from fusec.dialects import fusec as F
from fusec.dialects.attributes import tensor_type_of
from fusec.passes.kernel_builder import (
    GATHERED,
    GatherThroughViewError,
    KernelBuilder,
    broadcast_index,
    folds_as_view,
    is_iota,
)
from fusec.passes.kernel_index import domain_upper

X, R = shapes.index_symbol("x"), shapes.index_symbol("r")


class KernelNamer:
    """Inductor-style names, numbered per module: fusec_poi_add_0, fusec_red_sum_1, ..."""

    def __init__(self, module: ModuleOp):
        self.count = sum(1 for op in module.walk() if isinstance(op, F.KernelOp))

    def __call__(self, kind: str, what: str) -> str:
        name = f"fusec_{kind}_{what}_{self.count}"
        self.count += 1
        return name


def pointwise_kernel(op: F.PointwiseOp, name: str) -> F.KernelOp:
    out = tensor_type_of(op.result)
    order = None if out.is_contiguous else shapes.dense_dim_order(out.dims, out.layout)
    if order is None:  # row-major; a layout that is not dense is eager's business (the backend's outputs)
        out = out.contiguous()
        idx = shapes.flat_to_dims(X, out.dims)
    else:  # a dense permuted layout a pass chose (channels-last): x walks memory, each dim's index follows
        inner = shapes.flat_to_dims(X, [out.dims[d] for d in order])
        idx = [inner[order.index(d)] for d in range(out.rank)]
    kb = KernelBuilder(domain_upper([shapes.numel(out.dims)]))
    args = [kb.element(v, broadcast_index(tensor_type_of(v), out.dims, idx)) for v in op.inputs]
    kb.store(kb.add(F.PointwiseOp(op.fn.data, args, out.element_type)), out, X)
    return kb.finish(name, [shapes.numel(out.dims)])


def reduce_kernel(op: F.ReduceOp, name: str) -> F.KernelOp:
    in_t, out = tensor_type_of(op.input), tensor_type_of(op.result).contiguous()
    reduced = op.dim_list
    kept_dims = [d for i, d in enumerate(in_t.dims) if i not in reduced]
    red_dims = [in_t.dims[i] for i in reduced]
    x_idx = iter(shapes.flat_to_dims(X, kept_dims))
    r_idx = dict(zip(reduced, shapes.flat_to_dims(R, red_dims), strict=True))
    idx = [r_idx[i] if i in r_idx else next(x_idx) for i in range(in_t.rank)]
    kb = KernelBuilder(domain_upper([shapes.numel(kept_dims), shapes.numel(red_dims)]))
    value = kb.element(op.input, idx)
    kb.store(kb.add(F.ReduceROp(op.kind.data, value, out.element_type)), out, X)
    return kb.finish(name, [shapes.numel(kept_dims), shapes.numel(red_dims)])


def cat_kernel(op: F.CatOp, name: str) -> F.KernelOp:
    out, d = tensor_type_of(op.result).contiguous(), op.dim.data
    idx = shapes.flat_to_dims(X, out.dims)
    kb = KernelBuilder(domain_upper([shapes.numel(out.dims)]))
    position = kb.symbolic(idx[d])
    start, pieces = sympy.Integer(0), []
    for v in op.inputs:
        end = start + tensor_type_of(v).dims[d]
        inside = kb.add(F.PointwiseOp("logical_and", [
            kb.add(F.PointwiseOp("ge", [position, kb.symbolic(start)], F.BOOL)),
            kb.add(F.PointwiseOp("lt", [position, kb.symbolic(end)], F.BOOL))], F.BOOL))
        extent = tensor_type_of(v).dims[d]
        pieces.append((inside, kb.piece_element(v, idx[:d] + [idx[d] - start] + idx[d + 1:], d, extent, inside)))
        start = end
    value = pieces[-1][1]
    for inside, piece in reversed(pieces[:-1]):
        value = kb.add(F.PointwiseOp("where", [inside, piece, value], out.element_type))
    kb.store(value, out, X)
    return kb.finish(name, [shapes.numel(out.dims)])


def _gather_index(kb: KernelBuilder, index_value, idx, extent: sympy.Expr):
    """The i64 index read from an index tensor, negative indices wrapped like torch."""
    j = kb.element(index_value, idx)
    if index_value.type.element_type != F.I64:
        j = kb.add(F.PointwiseOp("convert", [j], F.I64))
    negative = kb.add(F.PointwiseOp("lt", [j, kb.constant(0, F.I64)], F.BOOL))
    wrapped = kb.add(F.PointwiseOp("add", [j, kb.symbolic(extent)], F.I64))
    return kb.add(F.PointwiseOp("where", [negative, wrapped, j], F.I64))


def index_kernel(op: F.IndexOp, name: str) -> F.KernelOp:
    out, d = tensor_type_of(op.result).contiguous(), op.dim.data
    k = tensor_type_of(op.index).rank
    idx = shapes.flat_to_dims(X, out.dims)
    extent = tensor_type_of(op.input).dims[d]
    kb = KernelBuilder(domain_upper([shapes.numel(out.dims)]) | {GATHERED: extent})  # 0 <= gathered < extent
    j = _gather_index(kb, op.index, idx[d:d + k], extent)
    value = kb.with_gathered(j).element(op.input, idx[:d] + [GATHERED] + idx[d + k:])
    kb.store(value, out, X)
    return kb.finish(name, [shapes.numel(out.dims)])


def gather_kernel(op: F.GatherOp, name: str) -> F.KernelOp:
    out, d = tensor_type_of(op.result).contiguous(), op.dim.data
    idx = shapes.flat_to_dims(X, out.dims)
    extent = tensor_type_of(op.input).dims[d]
    kb = KernelBuilder(domain_upper([shapes.numel(out.dims)]) | {GATHERED: extent})  # 0 <= gathered < extent
    j = _gather_index(kb, op.index, idx, extent)
    value = kb.with_gathered(j).element(op.input, idx[:d] + [GATHERED] + idx[d + 1:])
    kb.store(value, out, X)
    return kb.finish(name, [shapes.numel(out.dims)])


def materialize_kernel(op: F.ConstantOp | F.SymbolicOp | F.PointwiseOp, name: str) -> F.KernelOp:
    """A constant, symbolic value or iota that an extern or the output needs as a real tensor."""
    out = tensor_type_of(op.result).contiguous()
    kb = KernelBuilder(domain_upper([shapes.numel(out.dims)]))
    kb.store(kb.element(op.result, shapes.flat_to_dims(X, out.dims)), out, X)
    return kb.finish(name, [shapes.numel(out.dims)])


def _fn_name(op: Operation) -> tuple[str, str]:
    if isinstance(op, F.PointwiseOp):
        return "poi", op.fn.data
    if isinstance(op, F.ReduceOp):
        return "red", op.kind.data
    return "poi", op.name.removeprefix("fusec.")


BUILDERS: dict[type[Operation], Callable[[Any, str], F.KernelOp]] = {
    F.PointwiseOp: pointwise_kernel, F.ReduceOp: reduce_kernel, F.CatOp: cat_kernel,
    F.IndexOp: index_kernel, F.GatherOp: gather_kernel}


@dataclass
class WrapInKernel(RewritePattern):
    """Replaces one computing graph op by a kernel that computes it."""

    namer: KernelNamer
    fold: bool = True  # leave index ops with index-arithmetic indices to their readers (they fold like views)

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        if not self.fold and not folds_as_view(op):
            return
        build = BUILDERS.get(type(op))
        if build is None or isinstance(op.parent_op(), F.KernelOp) or is_iota(op) or (folds_as_view(op) and self.fold):
            return
        try:
            kernel = self.wrapped(op)
        except GatherThroughViewError:
            assert isinstance(op, (F.GatherOp, F.IndexOp)), "only gathered loads raise it"
            self.copy_input(op, rewriter)
            kernel = self.wrapped(op)
        rewriter.replace(op, kernel)

    def copy_input(self, op: F.GatherOp | F.IndexOp, rewriter: PatternRewriter) -> None:
        """Give ``op`` a contiguous copy of its input (a kernel of its own) to gather from."""
        t = tensor_type_of(op.input)
        copy = F.PointwiseOp("identity", [op.input], F.TensorType(t.dims, t.element_type))
        copy.location = op.location
        rewriter.insert(copy, InsertPoint.before(op))
        op.operands = [copy.result, *op.operands[1:]]
        remarks.emit(FormKernels.name, "gather-copy", f"{op.name} reads its input through views that mix the gathered dim with "
                     "others: the input is copied to a contiguous tensor first", op)
        rewriter.replace(copy, self.wrapped(copy))

    def wrapped(self, op: Operation) -> F.KernelOp:
        kernel = BUILDERS[type(op)](op, self.namer(*_fn_name(op)))
        for element_op in kernel.body.walk():  # the FX node and source line each element op computes (fusec-report)
            element_op.location = op.location
        return kernel


@dataclass
class MaterializeConstant(RewritePattern):
    """Constants and symbolic values still used at graph level (by externs, views, the output)."""

    namer: KernelNamer

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        if not (isinstance(op, (F.ConstantOp, F.SymbolicOp)) or is_iota(op)) or not isinstance(op.parent_op(), F.GraphOp) \
                or all(is_iota(reader) for reader in _readers_past_views(op.result)):  # unused, or folds into index arithmetic
            return
        what = "full" if isinstance(op, F.ConstantOp) else "symbolic" if isinstance(op, F.SymbolicOp) else "iota"
        kernel = materialize_kernel(op, self.namer("poi", what))
        rewriter.replace(op, kernel)


def _readers_past_views(value: SSAValue) -> list[Operation]:
    """The ops that read ``value``, through any views of it (index arithmetic reads an iota through a reshape:
    materialising the iota for the view would leave that arithmetic with a source that is no longer an iota)."""
    readers: list[Operation] = []
    for use in value.uses:
        reader = use.operation
        readers += _readers_past_views(reader.results[0]) if isinstance(reader, F.VIEW_OPS) else [reader]
    return readers


@dataclass
class EraseDeadView(RewritePattern):
    """Views, constants and symbolic values nothing reads any more (their uses were folded into kernels)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: F.ReshapeOp | F.PermuteOp | F.ExpandOp | F.SliceOp | F.ConstantOp | F.SymbolicOp,
                          rewriter: PatternRewriter, /) -> None:
        if not op.result.uses and isinstance(op.parent_op(), F.GraphOp):
            rewriter.erase(op)


@dataclass
class EraseDeadIota(RewritePattern):
    """Index arithmetic (an iota, an index op by one) whose readers all folded it into their load indices."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        if (is_iota(op) or folds_as_view(op)) and not op.result.uses and isinstance(op.parent_op(), F.GraphOp):
            rewriter.erase(op)


@dataclass(frozen=True)
class FormKernels(ModulePass):
    """Wraps every pointwise, reduce, cat, index and gather op into its own fusec.kernel (no options)."""

    name = "form-kernels"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        namer = KernelNamer(op)
        PatternRewriteWalker(WrapInKernel(namer), apply_recursively=False).rewrite_module(op)
        PatternRewriteWalker(GreedyRewritePatternApplier([EraseDeadView(), EraseDeadIota()]), walk_reverse=True,
                             apply_recursively=False).rewrite_module(op)
        # Index ops folded like views where read by kernels; those an extern or the output reads become kernels.
        PatternRewriteWalker(WrapInKernel(namer, fold=False), apply_recursively=False).rewrite_module(op)
        PatternRewriteWalker(MaterializeConstant(namer), apply_recursively=False).rewrite_module(op)
        # Index arithmetic (and its constants) that fed only what was materialised just now.
        PatternRewriteWalker(GreedyRewritePatternApplier([EraseDeadView(), EraseDeadIota()]), walk_reverse=True,
                             apply_recursively=False).rewrite_module(op)
        # Arithmetic that was index arithmetic until its iota was materialised (a kernel now): a kernel of its own.
        PatternRewriteWalker(WrapInKernel(namer), apply_recursively=False).rewrite_module(op)
