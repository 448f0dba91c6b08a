"""embedding-gradients: an embedding's weight gradient as an equality matmul and a row write (issue 18, training).

``aten.embedding_dense_backward(grad [.., D], idx [..], V, padding_idx, False)`` adds each token's gradient row into
its word's row of a [V, D] table of zeros.  torch runs it as a fill and a kernel of its own, ~30 µs at 1024 tokens
whatever the table (H200, bf16: Llama's 32000 x 512 30.3 µs, GPT-2's two tables 58.6; BENCHMARKS.md 2026-11-29).
Over T tokens the sums are one matmul: ``S = (idx[:, None] == idx[None, :]) @ grad`` gives every token the sum over
the tokens of its word (fp32 accumulation, one rounding, as torch's kernel does), and writing S's rows at ``idx``
into zeros (``fusec.embedding_rows``: the tokens of one word write the same row) is the gradient -- no atomics, so
deterministic.  It costs 2 T² D multiply-adds on tensor cores, so only where that is small (``max-gflop``), for
16-bit gradients (an fp32 product at torch's default precision runs on CUDA cores), and for a bounded T.

In:  a graph before form-kernels.
Out: in place of the extern, ``eq`` and ``convert`` pointwise ops (the [T, T] 0/1 matrix; with a padding index, a
     ``where`` zeroing its tokens' rows), an ``aten.mm.default`` extern and ``fusec.extern
     "fusec.embedding_rows.default"`` (an index or gradient that is a strided view, BERT's position and token-type
     ids, is copied contiguous first); remark ``equality-matmul``, or a code saying why not (``too-many-tokens``,
     ``not-16-bit``, ``scaled-by-frequency``).

Options:
  when: ``accelerator`` (CUDA graphs; the default), ``always`` (any graph: tests on the CPU), ``never``.
  max-gflop: the largest 2 T² D, in GFLOP, worth the matmul (default 4: ~6 µs of an H200's tensor cores).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern, op_type_rewrite_pattern
from xdsl.rewriter import InsertPoint

from fusec.base import remarks, shapes
from fusec.dialects import fusec as F
from fusec.dialects.attributes import TensorType
from fusec.passes.pad_matmuls import check_when, graphs_to_change

PASS = "embedding-gradients"
SOURCE = "aten.embedding_dense_backward.default"
TARGET = "fusec.embedding_rows.default"


@dataclass
class EqualityMatmul(RewritePattern):
    max_flop: float

    def decline(self, op: F.ExternOp, code: str, why: str) -> None:
        remarks.emit(PASS, code, f"{SOURCE}: {why}; torch's kernel computes it", op)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: F.ExternOp, rewriter: PatternRewriter, /) -> None:
        if op.target.data != SOURCE or len(op.inputs) != 2 or len(op.args.data) != 5:
            return
        grad, idx = op.inputs
        rows_attr, padding, scaled = op.args.data[2:]
        tg, ti, tout = grad.type, idx.type, op.outputs[0].type
        if not (isinstance(tg, TensorType) and isinstance(ti, TensorType) and isinstance(tout, TensorType)
                and isinstance(padding, F.ExprAttr) and padding.data.is_number):
            return
        if not (isinstance(scaled, F.NumberAttr) and scaled.data is False):
            self.decline(op, "scaled-by-frequency", "each row divided by its word's count (scale_grad_by_freq)")
            return
        if tg.element_type not in (F.BF16, F.F16) or tout.element_type != tg.element_type:
            self.decline(op, "not-16-bit", f"a {tg.element_type} gradient (the [T, T] matmul would run in fp32)")
            return
        tokens, width = shapes.numel(ti.dims), tg.dims[-1]
        graph = op.parent_op()
        bounds = graph.symbol_bounds if isinstance(graph, F.GraphOp) else {}
        t_hi, d_hi = (shapes.value_range(e, bounds)[1] for e in (tokens, width))
        flop = 2.0 * t_hi * t_hi * d_hi
        if flop > self.max_flop:
            self.decline(op, "too-many-tokens", f"{shapes.print_expr(tokens)} tokens x {shapes.print_expr(width)}: "
                         f"the equality matmul would take up to {flop / 1e9:.3g} GFLOP (max-gflop "
                         f"{self.max_flop / 1e9:.3g})")
            return
        at = InsertPoint.before(op)
        et = tg.element_type

        def add(new):
            rewriter.insert(new, at)
            return new.results[0]

        # A position or token-type index is often a slice or an expansion (strides [512, 1], [0, 1]): a reshape
        # needs it contiguous, a copy of T indices.
        idx, grad = (v if t.is_contiguous else add(F.PointwiseOp("identity", [v], TensorType(t.dims, t.element_type)))
                     for v, t in ((idx, ti), (grad, tg)))
        flat = add(F.ReshapeOp(idx, TensorType([tokens], ti.element_type)))
        rows = add(F.ReshapeOp(grad, TensorType([tokens, width], et)))
        left = add(F.ReshapeOp(flat, TensorType([tokens, 1], ti.element_type)))
        if int(padding.data) >= 0:  # the padding word's tokens add nothing
            pad = add(F.ConstantOp(int(padding.data), TensorType([], ti.element_type)))
            is_pad = add(F.PointwiseOp("eq", [left, pad], TensorType([tokens, 1], F.BOOL)))
            zero = add(F.ConstantOp(0.0, TensorType([], F.F32)))
            rows = add(F.PointwiseOp("where", [is_pad, zero, rows], TensorType([tokens, width], et)))
        right = add(F.ReshapeOp(flat, TensorType([1, tokens], ti.element_type)))
        same = add(F.PointwiseOp("eq", [left, right], TensorType([tokens, tokens], F.BOOL)))
        ones = add(F.PointwiseOp("convert", [same], TensorType([tokens, tokens], et)))
        sums = add(F.ExternOp("aten.mm.default", [ones, rows], None, [TensorType([tokens, width], et)]))
        slot = op.args.data[0]
        call = F.ExternOp(TARGET, [sums, flat], [slot, slot, rows_attr], [tout])
        rewriter.replace(op, call)
        remarks.emit(PASS, "equality-matmul", f"{SOURCE} over {shapes.print_expr(tokens)} tokens -> (idx == idx.T) @ "
                     f"grad ({flop / 1e9:.3g} GFLOP at most) and {TARGET}: each word's tokens summed by one matmul, "
                     "its rows written into zeros", call)


@dataclass(frozen=True)
class EmbeddingGradients(ModulePass):
    """An embedding's weight gradient over few tokens: an equality matmul and a row write, not torch's kernel."""

    name = PASS

    when: str = "accelerator"
    max_gflop: float = 4.0

    def __post_init__(self):
        check_when(self.when)
        if not self.max_gflop > 0:
            raise ValueError(f"max-gflop must be positive, got {self.max_gflop}")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for graph in graphs_to_change(op, self.when):
            PatternRewriteWalker(EqualityMatmul(self.max_gflop * 1e9), apply_recursively=False).rewrite_region(graph.body)
