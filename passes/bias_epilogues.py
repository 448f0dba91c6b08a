"""bias-epilogues: a matmul's bias add that no kernel would fuse runs in cuBLAS's epilogue, as ``addmm``.

fusec's decomposition table splits ``addmm`` into ``mm`` and a pointwise add, so that the bias add fuses with
what follows it (a GELU, a residual add, a loss).  Where nothing follows but library calls and the graph's
outputs -- the query, key and value projections that feed attention, a language model's logits -- the add would
be a kernel of its own that reads and writes the whole product once more (BERT's fp32 LM head on an H100: 106 µs,
and three kernels per layer for its projections), while cuBLAS adds a bias in its epilogue almost for free.

In:  a graph before form-kernels, after pad-matmuls (a padded product is sliced, and the add that reads the slice
     is the copy back to eager's layout anyway: left as it is).
Out: ``fusec.pointwise "add"`` of a ``fusec.extern "aten.mm.default"`` result that nothing else reads and a bias
     of its element type broadcast along the rows (``[N]`` or ``[1, N]``), whose sum reaches only graph outputs
     and externs (through views), becomes ``fusec.extern "aten.addmm.default"(%bias, %a, %b)``; a
     ``bias-epilogue`` remark names each.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern, op_type_rewrite_pattern

from fusec.base import remarks
from fusec.base.shapes import provably_equal
from fusec.dialects import fusec as F
from fusec.dialects.attributes import TensorType

PASS = "bias-epilogues"


def _unfused_readers(value: SSAValue) -> list[str] | None:
    """What reads ``value``, through views, where that is only graph outputs and externs; None where a kernel-forming
    op reads it (the add fuses there)."""
    readers: list[str] = []
    for use in value.uses:
        op = use.operation
        if isinstance(op, F.VIEW_OPS):
            inner = _unfused_readers(op.results[0])
            if inner is None:
                return None
            readers += inner
        elif isinstance(op, F.OutputOp):
            readers.append("the graph output")
        elif isinstance(op, F.ExternOp):
            readers.append(op.target.data)
        else:
            return None
    return readers


def _row_bias(bias: SSAValue, product: TensorType) -> bool:
    """``bias`` broadcasts along the product's rows: ``[N]`` or ``[1, N]`` of its element type, contiguous."""
    t = bias.type
    if not isinstance(t, TensorType) or t.element_type != product.element_type or not t.is_contiguous:
        return False
    return t.rank in (1, 2) and all(d == 1 for d in t.dims[:-1]) and provably_equal(t.dims[-1], product.dims[-1])


def biased_product(add: F.PointwiseOp) -> tuple[F.ExternOp, SSAValue, TensorType] | None:
    """(the ``mm`` extern, the bias, the product's type) where ``add`` adds a row bias to a contiguous matmul product
    that nothing else reads; else None."""
    if add.fn.data != "add" or len(add.inputs) != 2:
        return None
    for product, bias in (add.inputs, reversed(add.inputs)):
        mm = product.owner
        if not (isinstance(mm, F.ExternOp) and mm.target.data == "aten.mm.default" and len(mm.outputs) == 1
                and len(mm.inputs) == 2 and product.has_one_use()):
            continue
        t = product.type
        if isinstance(t, TensorType) and t.is_contiguous and add.result.type == t and _row_bias(bias, t):
            return mm, bias, t
    return None


class AddBiasInEpilogue(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: F.PointwiseOp, rewriter: PatternRewriter, /) -> None:
        found = biased_product(op)
        readers = _unfused_readers(op.result) if found is not None else None
        if found is None or not readers:
            return
        mm, bias, t = found
        addmm = F.ExternOp("aten.addmm.default", [bias, *mm.inputs], None, [t])
        rewriter.replace(op, addmm)
        rewriter.erase(mm)
        remarks.emit(PASS, "bias-epilogue", f"aten.mm.default + bias add -> aten.addmm.default: the sum goes only to "
                     f"{', '.join(sorted(set(readers)))}, where no kernel would fuse the add; cuBLAS adds the bias in "
                     "its epilogue", addmm)


@dataclass(frozen=True)
class BiasEpilogues(ModulePass):
    """An mm + row-bias add whose sum only graph outputs and externs read becomes one addmm extern."""

    name = "bias-epilogues"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(AddBiasInEpilogue(), apply_recursively=False).rewrite_module(op)
