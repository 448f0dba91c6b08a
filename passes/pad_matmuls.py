"""pad-matmuls: zero-pad the dims of a matmul whose rows are misaligned, so cuBLAS runs its fast kernels.

In:  a graph before form-kernels.  Out: each ``fusec.extern`` mm / bmm whose operands or result have a
leading dimension that is not a multiple of ``alignment-bytes`` computes on zero-padded operands instead,
and a ``fusec.slice`` of the padded product stands for the result.  cuBLAS picks its fast (TMA) kernels
only when every matrix's rows are 16-byte aligned *and* the sizes allow it: GPT-2's LM head
``[1024, 768] @ [768, 50257]`` in bf16 runs 834 µs on an H100 as it is, 834 µs with only the result's
row stride padded, 125 µs with N padded to 50264 (bench/matmul_alignment.py).  Inductor pads the same
way (``pad_mm``).  Which dims:

- N (the result's rows, and B's when B is row-major): B gets zero columns, the result ``[M, N']`` is
  sliced back to ``[M, N]`` -- a view with row stride N';
- K, when it is A's or B's contiguous dim: both operands get zeros along K (they add nothing);
- M, when A is column-major (a transposed operand: a weight gradient's ``grad.t() @ x``): A gets zero
  rows, and the first M rows of the product are the result.

A padded operand that is a permuted view (a weight read as ``w.t()``) is padded before the permute, so
the copy keeps the weight's own layout.  The copies are ``fusec.cat`` ops with a zero constant, which
form-kernels makes kernels and vertical-fusion fuses into their producers where it can.  Where the
sliced result is a graph output or the input of a view, a ``fusec.pointwise "identity"`` copies it to
the contiguous layout eager returns; kernels read the padded product as it is.

The device mark prints with the graph (``attributes {fusec.device = "cuda"}``), so ``fusec-opt`` replaying
a dump pads as the backend did; hand-written IR without it counts as unmarked (``when=always`` pads it).

``when``: ``accelerator`` pads only graphs the importer marked as running on an accelerator
(``fusec.device`` on the graph; CPU BLAS gains little), ``always`` pads anyway (tests on CPU),
``never`` leaves the graph as it is.  ``cost-rule`` (on by default) pads only where the aligned kernel
saves more than the copies cost (``GPU``'s matmul rates and bandwidth, symbolic sizes at ``size-hints``);
``padding-unprofitable`` remarks say which it left alone and why.  fp32 matmuls on a graph whose
``fusec.float32_matmul_precision`` is ``highest`` (torch's default: no TF32) run on CUDA cores, whose
kernels do not care for aligned rows (GPT-2's fp32 LM head: 1599 µs padded, 1597 µs as it is, on an H100),
so they keep their sizes.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from fusec.analysis.cost_model import GPU, SizeHints, parse_size_hints, resolve_size_hints
from fusec.base import dtypes, remarks
from fusec.dialects import fusec as F
from fusec.dialects.attributes import TensorType, tensor_type_of

MATMULS = frozenset({"aten.mm.default", "aten.bmm.default"})  # addmm/baddbmm reach the IR as mm/bmm + epilogue
WHEN = ("accelerator", "always", "never")
_GPU = GPU()  # the machine the cost rule's rates are for


def graph_device(graph: F.GraphOp) -> str | None:
    device = graph.mark(F.DEVICE_MARK)
    return device if isinstance(device, str) else None


def exact_fp32(graph: F.GraphOp) -> bool:
    """Whether the graph's fp32 matmuls run exact (torch's ``float32_matmul_precision`` 'highest', its default: no
    TF32), as the importer marked it."""
    return graph.mark(F.FLOAT32_MATMUL_PRECISION_MARK) == "highest"


def check_when(when: str) -> None:
    """A bad ``when`` option (of the passes that act on accelerator graphs only by default) is a bad option now."""
    if when not in WHEN:
        raise ValueError(f"when must be one of {', '.join(WHEN)}, got {when!r}")


def skipped_here(graph: F.GraphOp, when: str) -> bool:
    """Whether ``when`` leaves ``graph`` as it is: ``never``, or ``accelerator`` on a graph the IR marks as running on
    none (IR parsed from text without the mark counts as unmarked)."""
    return when == "never" or (when == "accelerator" and graph_device(graph) in (None, "cpu"))


def graphs_to_change(module: Operation, when: str) -> list[F.GraphOp]:
    """The graphs in ``module`` that ``when`` lets a pass change (see ``skipped_here``)."""
    return [g for g in module.walk() if isinstance(g, F.GraphOp) and not skipped_here(g, when)]


def _element_type(extern: F.ExternOp):
    t = extern.outputs[0].type if len(extern.outputs) == 1 else None
    return t.element_type if isinstance(t, TensorType) else None


def _contiguous_dim(t: TensorType) -> int | None:
    """Which of the last two dims has stride 1 (-1 row-major, -2 column-major), or None."""
    layout = t.layout
    if layout[-1] == 1:
        return -1
    if layout[-2] == 1:
        return -2
    return None


def show_dims(exprs) -> str:
    return ", ".join(str(e) for e in exprs)


@dataclass(frozen=True)
class PadMatmuls(ModulePass):
    """Zero-pads matmul dims whose rows are not alignment-bytes aligned (cuBLAS's fast kernels); the result is a slice."""

    name = "pad-matmuls"

    alignment_bytes: int = 16
    when: str = "accelerator"
    size_hints: tuple[str, ...] = ()  # SYMBOL=INTEGER: the sizes the cost rule assumes for symbolic dims
    cost_rule: bool = True  # false: pad every misaligned matmul, whatever the copies cost (tests, experiments)

    def __post_init__(self) -> None:
        parse_size_hints(self.size_hints)  # a malformed hint is a bad option now, not a crash later
        check_when(self.when)
        if self.alignment_bytes <= 0:
            raise ValueError(f"alignment-bytes must be positive, got {self.alignment_bytes}")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.when == "never":
            return
        for graph in [g for g in op.walk() if isinstance(g, F.GraphOp)]:
            matmuls = [x for x in graph.block.ops if isinstance(x, F.ExternOp) and x.target.data in MATMULS]
            if skipped_here(graph, self.when):
                if matmuls:
                    # One text for "cpu" and for no mark (IR parsed from text): replays print the same remarks.
                    remarks.emit(self.name, "padding-skipped", "matmuls keep their sizes: the IR marks no accelerator "
                                 "for this graph (when=always pads anyway)", graph)
                continue
            hints = resolve_size_hints(graph, parse_size_hints(self.size_hints))
            padded: dict = {}  # (value, sizes) -> its padded copy: a gradient read by two matmuls is padded once
            ieee = exact_fp32(graph)
            for extern in matmuls:
                if ieee and self.cost_rule and _element_type(extern) == F.F32:
                    remarks.emit(self.name, "padding-unprofitable", f"{extern.target.data}: an fp32 matmul at "
                                 "float32_matmul_precision 'highest' (no TF32) runs on CUDA cores, where aligned rows "
                                 "gain nothing: it keeps its sizes", extern)
                    continue
                self.pad(extern, hints, padded)

    def _granule(self, t: TensorType) -> int | None:
        size = dtypes.of_ir(t.element_type).bytes
        return None if self.alignment_bytes % size else self.alignment_bytes // size

    def pad(self, extern: F.ExternOp, hints: SizeHints, done: dict) -> None:
        a, b = extern.inputs
        result = extern.outputs[0]
        ta, tb, t = a.type, b.type, result.type
        if not (isinstance(ta, TensorType) and isinstance(tb, TensorType) and isinstance(t, TensorType)) \
                or len(extern.outputs) != 1:
            return
        granule = self._granule(t)
        a_major, b_major = _contiguous_dim(ta), _contiguous_dim(tb)
        if granule is None or a_major is None or b_major is None or not t.is_contiguous:
            return  # a wide element, or operands cuBLAS copies anyway
        m, k, n = ta.dims[-2], ta.dims[-1], tb.dims[-1]
        wanted = {"M": a_major == -2, "K": a_major == -1 or b_major == -2, "N": True}
        sizes = {"M": m, "K": k, "N": n}
        symbolic = [d for d, w in wanted.items() if w and not sizes[d].is_number]
        if symbolic:
            remarks.emit(self.name, "padding-symbolic", f"{extern.target.data}: {', '.join(f'{d} = {sizes[d]}' for d in symbolic)} "
                         "symbolic: its alignment is unknown until run time, the matmul keeps its sizes", extern)
        padded = {d: -(-int(s) // granule) * granule for d, s in sizes.items()
                  if wanted[d] and s.is_number and int(s) % granule}
        if not padded:
            return
        m2, k2, n2 = (sympy.Integer(padded[d]) if d in padded else sizes[d] for d in ("M", "K", "N"))
        copies = ([ta] if "M" in padded or "K" in padded else []) + ([tb] if "K" in padded or "N" in padded else [])
        # The graph's output must have eager's strides, and views' types were derived from a contiguous input:
        # both read a contiguous copy of a slice with padded rows.  Kernels and other externs read it as it is.
        copied = [use for use in result.uses if isinstance(use.operation, (F.OutputOp, *F.VIEW_OPS))]
        saved, cost = _padding_gain_us(hints, t, [*t.dims[:-2], m, k, n], copies, "N" in padded and bool(copied))
        if self.cost_rule and saved <= cost:
            remarks.emit(self.name, "padding-unprofitable", f"{extern.target.data} [{show_dims(ta.dims)}] @ [{show_dims(tb.dims)}]: "
                         f"aligned rows would save ~{saved:.1f} µs, the padded copies cost ~{cost:.1f} µs",
                         extern, saved_us=round(saved, 2), cost_us=round(cost, 2), **hints.remark_data())
            return
        new_a = self._zero_pad(a, {-2: m2, -1: k2}, extern, done)
        new_b = self._zero_pad(b, {-2: k2, -1: n2}, extern, done)
        product_type = TensorType([*t.dims[:-2], m2, n2], t.element_type)
        product = F.ExternOp(extern.target.data, [new_a, new_b], list(extern.args.data), [product_type],
                             kwargs=dict(extern.kwargs.data))
        Rewriter.insert_op(product, InsertPoint.before(extern))
        value: SSAValue = product.outputs[0]
        for d, size in ((-2, m), (-1, n)):
            if size != product_type.dims[d]:
                vt = tensor_type_of(value)
                value = self._insert(F.SliceOp(value, vt.rank + d, 0, 1, _narrowed(vt, d, size)), extern)
        sliced = value
        copy = None
        if copied and not tensor_type_of(sliced).is_contiguous:
            copy = self._insert(F.PointwiseOp("identity", [sliced], t), extern)
            for use in copied:
                use.operation.operands[use.index] = copy
        result.replace_all_uses_with(sliced)
        Rewriter.erase_op(extern)
        readers = sorted({"the graph output" if isinstance(u.operation, F.OutputOp) else u.operation.name for u in copied})
        remarks.emit(self.name, "padded-matmul",
                     f"{extern.target.data} [{show_dims(ta.dims)}] @ [{show_dims(tb.dims)}] computes as "
                     f"[{show_dims(product_type.dims[:-2] + [m2, k2])}] @ [{show_dims(product_type.dims[:-2] + [k2, n2])}] "
                     f"({', '.join(f'{d} {sizes[d]} -> {p}' for d, p in padded.items())}: rows aligned to "
                     f"{self.alignment_bytes} bytes)" + (f"; a contiguous copy feeds {' and '.join(readers)}" if copy else ""),
                     product)

    def _zero_pad(self, x: SSAValue, sizes: dict[int, sympy.Expr], at: Operation, done: dict) -> SSAValue:
        """``x`` with zeros appended along the last two dims up to ``sizes``; a permuted view is padded before
        its permute, so the copy keeps the source's layout (a weight read as ``w.t()`` stays a row-major weight)."""
        t = x.type
        assert isinstance(t, TensorType)
        grow = {d % t.rank: s for d, s in sizes.items() if s != t.dims[d]}
        if not grow:
            return x
        key = (x, tuple(sorted(grow.items())))
        if key in done:
            return done[key]
        done[key] = value = self._padded_copy(x, t, grow, at, done)
        return value

    def _padded_copy(self, x: SSAValue, t: TensorType, grow: dict[int, sympy.Expr], at: Operation, done: dict) -> SSAValue:
        owner = x.owner
        if isinstance(owner, F.PermuteOp):
            perm = owner.perm_list
            source = self._zero_pad(owner.input, {perm[d]: s for d, s in grow.items()}, at, done)
            src_t = source.type
            assert isinstance(src_t, TensorType)
            dims = [src_t.dims[p] for p in perm]
            strides = [src_t.layout[p] for p in perm]
            return self._insert(F.PermuteOp(source, perm, TensorType(dims, t.element_type, strides)), at)
        value = x
        for d, size in sorted(grow.items()):
            vt = value.type
            assert isinstance(vt, TensorType)
            zeros_dims = list(vt.dims)
            zeros_dims[d] = size - vt.dims[d]
            zeros = self._insert(F.ConstantOp(0, TensorType(zeros_dims, vt.element_type)), at)
            out_dims = list(vt.dims)
            out_dims[d] = size
            value = self._insert(F.CatOp([value, zeros], d, TensorType(out_dims, vt.element_type)), at)
        return value

    @staticmethod
    def _insert(op: Operation, before: Operation) -> SSAValue:
        Rewriter.insert_op(op, InsertPoint.before(before))
        return op.results[0]


def _padding_gain_us(hints: SizeHints, t: TensorType, bmkn: list, copies: list[TensorType], out_copy: bool,
                     gpu: GPU = _GPU) -> tuple[float, float]:
    """(µs the aligned kernel saves, µs the copies cost): the matmul's flops at cuBLAS's aligned and misaligned
    rates (scaled by the element size: 4-byte types run at half the 2-byte rates), each copy a read and a write."""
    batch = 1
    for d in bmkn[:-3]:
        batch *= hints(d)
    m, k, n = (hints(d) for d in bmkn[-3:])
    flops = 2.0 * batch * m * k * n
    scale = 2 / dtypes.of_ir(t.element_type).bytes
    saved = flops / (gpu.misaligned_matmul_ops_per_us * scale) - flops / (gpu.matmul_ops_per_us * scale)
    moved = [hints(sympy.Mul(*c.dims)) * dtypes.of_ir(c.element_type).bytes for c in copies]
    if out_copy:
        moved.append(batch * m * n * dtypes.of_ir(t.element_type).bytes)
    cost = sum(2 * b / gpu.bandwidth_bytes_per_us + gpu.launch_overhead_us for b in moved)
    return saved, cost


def _narrowed(t: TensorType, d: int, size: sympy.Expr) -> TensorType:
    """The type of ``t``'s first ``size`` elements along ``d``: a view, so the strides stay ``t``'s."""
    dims = list(t.dims)
    dims[d] = size
    return TensorType(dims, t.element_type, t.layout)
