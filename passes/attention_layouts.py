"""attention-layouts: lay an attention's query out as its result will be, so reading the result costs no copy.

In:  a graph before form-kernels.  Out: the contiguous query of each cuDNN attention
(``aten._scaled_dot_product_cudnn_attention``) whose declared result is in another dense order gets the result's
strides, where the compiler makes the query (a pointwise op: a rotary embedding's add) and every reader takes any
layout.

Why: torch's cuDNN attention returns its result in its query's stride order (``alloc_with_matching_layout``; its
meta function agrees: H100, torch 2.11, a contiguous [B, H, L, E] query gives strides ``(131072, 16384, 64, 1)``,
one in [B, L, H, E] order ``(131072, 64, 512, 1)``).  The IR's types come from eager's trace, where a query computed
from a projection's view (Llama's rotary embedding) is in [B, L, H, E] order, and so is the declared result; fusec
stores that query contiguously, so the real result was contiguous and the transpose and view that feed the output
projection, free over the declared strides, copied it (the launcher checks a view's strides where a kernel reads it):
Llama bf16 inference on an H100, four aten copies a call, 293 -> 280 us and 61 -> 57 kernels with this pass.  A
query laid out in the declared order already (GPT-2's and BERT's, views of the projection) is left alone; one the
compiler does not make (a graph input, a view) or cannot move (a graph output, whose strides are eager's) is named
in an ``attention-layout-declined`` remark: it still runs, its result copied where a view needs it.  The importer's
copy of the query into eager's strides (a training forward saves it for its backward) copies nothing afterwards and
is dropped.

``when``: ``accelerator`` (graphs marked as running on one: the CPU's attention is another op), ``always`` (tests),
``never``.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from fusec.base import remarks, shapes
from fusec.dialects import fusec as F
from fusec.dialects.attributes import TensorType
from fusec.passes.channels_last import fixed_layout
from fusec.passes.pad_matmuls import check_when, graphs_to_change

PASS = "attention-layouts"
# Attentions whose result takes its query's stride order at run time.
QUERY_ORDERED = frozenset({"aten._scaled_dot_product_cudnn_attention.default"})


@dataclass(frozen=True)
class AttentionLayouts(ModulePass):
    """A cuDNN attention's query laid out as its declared result, so the result is what the IR says."""

    name = PASS

    when: str = "accelerator"

    def __post_init__(self) -> None:
        check_when(self.when)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for graph in graphs_to_change(op, self.when):
            for extern in [x for x in graph.block.ops if isinstance(x, F.ExternOp) and x.target.data in QUERY_ORDERED]:
                _relayout_query(extern)


def _relayout_query(extern: F.ExternOp) -> None:
    if 0 not in extern.result_positions or not extern.inputs:
        return
    query, result = extern.inputs[0], extern.outputs[extern.result_positions.index(0)]
    q, out = query.type, result.type
    # A contiguous query gives a contiguous result; the declared one is another dense order (a query sliced from a
    # projection is laid out in that order already, whatever its strides).
    if not (isinstance(q, TensorType) and isinstance(out, TensorType)) or q.dims != out.dims or not q.is_contiguous \
            or out.is_contiguous or shapes.dense_dim_order(out.dims, out.layout) is None:
        return
    why = fixed_layout(query)
    what = extern.target.data
    if why is not None:
        remarks.emit(PASS, "attention-layout-declined", f"{what}: its query keeps its layout, {why}; its result comes "
                     "in that order, not the declared one: a view of it that a kernel reads is copied", extern)
        return
    query = Rewriter.replace_value_with_new_type(query, TensorType(q.dims, q.element_type, out.layout))
    for copy in [u.operation for u in query.uses if isinstance(u.operation, F.PointwiseOp)]:
        # The importer's copy of the query into eager's strides (a training graph saves it for its backward) now
        # copies nothing: its readers read the query.
        if copy.fn.data == "identity" and copy.result.type == query.type:
            copy.result.replace_all_uses_with(query)
            Rewriter.erase_op(copy)
    remarks.emit(PASS, "attention-layout", f"{what}: its query is stored with strides [{', '.join(map(str, out.layout))}], "
                 "the declared result's, which cuDNN then gives its result (no copy where a view reads it)", extern)
