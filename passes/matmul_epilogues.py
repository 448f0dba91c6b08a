"""matmul-epilogues: a matmul and the pointwise kernel that reads its product run as one kernel.

In:  a graph after ``vertical-fusion``: a ``fusec.extern "aten.mm.default"`` (or ``aten.bmm.default``) whose
     product one pointwise kernel reads element by element (a bias, an activation, a residual, a cast), over the
     whole product or over its first columns (a padded product read through its slice: pad-matmuls' LM head).
Out: a matmul kernel ``fusec.kernel @k [B*M*N, K] matmul [B, M, N]`` that computes the product as the
     reduction it is (``sum over r`` of A at (b, m, r) times B at (b, r, n), in fp32) and runs the pointwise
     kernel's body on it as its epilogue: the product is never written to memory and read back (for a
     [8192, 4096] bf16 product, 128 MiB of traffic) and the epilogue's launch is gone.  Where something else
     reads the product too (the pre-activation a backward saves), the kernel stores it as well.  A padded product
     read through its slice (pad-matmuls' rows for cuBLAS) is computed over the block the epilogue reads, its first
     columns or rows, and where B is the transposed zero-padded copy of a weight that only this matmul reads (an LM
     head's weight), the kernel reads the weight itself: the copy is not made (GPT-2's LM head: 77 MB a call), and
     the operands stay plain 2-D tiles (a tensor descriptor's, on Hopper).  The lowering
     runs the reduction as ``tl.dot`` over tiles that ``schedule-kernels`` chooses and records.

The cost rule (``cost-rule``, on by default) compares the Triton main loop with cuBLAS: the fused kernel
must save more memory time than its main loop loses, taking that main loop to run at ``efficiency`` of
cuBLAS's speed in whole waves of [128, 128] tiles (``GPU``'s matmul rate plus a call's fixed latency, sizes at
``size-hints`` where symbolic; 0.83 measured: 117 us against cuBLAS's 97.7 for 8192x1024 @ 1024x4096 in bf16
on an H200).  It saves the product's write and read-back and the epilogue kernel's own fixed time, less the
epilogue's loads of other product-sized operands (an ``up`` projection beside SwiGLU's gate): after the main loop
they are exposed, not streamed as a kernel of their own streams them (H200 sweep, 12 shapes from 1024x768x768
to 16384x1024x1024: ``silu(x @ w.t()) * u`` fused was never more than 1.2 us faster, up to 12 us slower, while
``gelu(x @ w.t() + b)`` fused won up to 30 us).  A long-K product with a small output (a down projection)
saves little and stays cuBLAS.  An epilogue that
calls libdevice's exact routines (erf, an exact tanh: ``SLOW_FUNCTIONS``) stays a kernel of its own, where
memory traffic hides them; a tanh whose kernel stores only 16-bit floats runs as ``tanh.approx.f32``
(``approx_tanh``) and fuses.  fp32 matmuls at
``float32_matmul_precision`` 'highest' (torch's default: exact fp32, no TF32) stay cuBLAS: its SGEMM is the
yardstick there.

Declines (remarks): ``no-epilogue`` (no kernel reads the product), ``several-epilogues`` (more than one
does), ``not-elementwise`` (the kernel reads the product other than element for element, or under a mask
or an offset), ``main-loop-cost``, ``epilogue-cost``, ``fp32-exact``, ``limit`` (``max-ops``/``max-inputs``),
``dependence-cycle`` (the kernel also reads the product through another op), ``unsupported-matmul`` (an
element type or layout the lowering does not take); ``epilogues-skipped`` once per graph not marked as running on an accelerator (``when``).

Options:
  when: ``accelerator`` (graphs marked as running on one), ``always`` (any graph: tests on the CPU run the
      kernels in Triton's interpreter), ``never``.
  cost-rule: false fuses every legal epilogue, whatever the estimate says.
  efficiency: the Triton main loop's speed as a fraction of cuBLAS's, for the cost rule.
  size-hints: SYMBOL=INTEGER, the sizes the cost rule assumes for symbolic dims.
  max-ops, max-inputs: the matmul kernel's body ops and input buffers at most (a limit remark past them).
  siblings: where the epilogue also reads, element for element, the product of another matmul of the same A and
      sizes (SwiGLU's up projection beside its gate), both products come from one kernel of two accumulators, A's
      tile loaded once a step, neither product written (unless something else reads it), the cost rule weighing
      both main loops against both products' traffic.  Off by default: on an H200 (bf16, `bench/epilogue_sweep.py
      --patterns gateup`) it lost to two cuBLAS calls and the epilogue kernel on 11 of 12 shapes (Llama's 2048x5632x2048:
      172.0 against 135.6 us; won 10.9 against 12.5 at 1024x1376x512), and the cost rule declines a Llama-sized pair.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import sympy
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from fusec.analysis.cost_model import GPU, SizeHints, buffer_bytes, parse_size_hints, resolve_size_hints
from fusec.base import dtypes, indexing, remarks, shapes
from fusec.base.remarks import describe
from fusec.dialects import fusec as F
from fusec.dialects.attributes import TensorType, tensor_type_of
from fusec.passes.kernel_builder import KernelBuilder
from fusec.passes.kernel_index import MATMUL_M, MATMUL_N, R, X, equal, same_index, simplify_in_domain
from fusec.passes.kernel_merge import Graph, describe_user, discard, limit_problem, loads_of
from fusec.passes.pad_matmuls import MATMULS, check_when, exact_fp32, skipped_here
from fusec.passes.reduction_fusion import join
from fusec.passes.schedule_kernels import only_16_bit_floats

PASS = "matmul-epilogues"
FLOATS = (F.BF16, F.F16, F.F32)
_GPU = GPU()
# Functions the lowering computes through libdevice's exact routines: tens of instructions an element, run after
# the main loop while the tensor cores idle (an exact tanh epilogue: 197 us against 121 for a bias alone,
# 8192x1024x4096 bf16 on an H200).  tanh is exempt where every float stored is 16-bit (``approx_tanh``).
SLOW_FUNCTIONS = frozenset({"tanh", "erf", "erfc", "expm1", "log1p", "tan", "asin", "acos", "atan", "sinh", "cosh",
                            "pow", "atan2"})


@dataclass(frozen=True)
class MatmulEpilogues(ModulePass):
    """A matmul whose product one pointwise kernel reads element by element becomes one kernel with it."""

    name = PASS

    when: str = "accelerator"
    cost_rule: bool = True
    efficiency: float = 0.83
    size_hints: tuple[str, ...] = ()
    max_ops: int = 128
    max_inputs: int = 16
    # Sibling products (SwiGLU's gate and up projections of one input, read together by one epilogue) as one kernel
    # of two accumulators: off, as it lost to two cuBLAS calls and the epilogue kernel on an H200 (the docstring).
    siblings: bool = False

    def __post_init__(self) -> None:
        parse_size_hints(self.size_hints)
        check_when(self.when)
        if not 0 < self.efficiency <= 2:
            raise ValueError(f"efficiency must be in (0, 2], got {self.efficiency}")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.when == "never":
            return
        for graph_op in [g for g in op.walk() if isinstance(g, F.GraphOp)]:
            matmuls = [x for x in graph_op.block.ops if isinstance(x, F.ExternOp) and x.target.data in MATMULS]
            if not matmuls:
                continue
            if skipped_here(graph_op, self.when):
                remarks.emit(PASS, "epilogues-skipped", "matmuls stay library calls: the IR marks no accelerator for "
                             "this graph (when=always fuses anyway)", graph_op)
                continue
            fuser = _Fuser(self, graph_op, Graph(graph_op.block))
            for extern in matmuls:
                if extern not in fuser.done:  # not already weighed as another's sibling
                    fuser.fuse(extern)


@dataclass
class _Matmul:
    """An mm / bmm extern's operands and sizes: product [B, M, N] = A [B, M, K] @ B [B, K, N] (B = 1 for mm)."""

    a: SSAValue
    b: SSAValue
    product: SSAValue
    dims: tuple[sympy.Expr, sympy.Expr, sympy.Expr, sympy.Expr]  # B, M, N, K

    @property
    def product_type(self) -> TensorType:
        t = self.product.type
        assert isinstance(t, TensorType)
        return t

    @property
    def domain(self) -> list[sympy.Expr]:
        batch, m, n, k = self.dims
        return [batch * m * n, k]


@dataclass(frozen=True)
class _Placement:
    """Which of the product's elements the epilogue's points are, one for one and in order: its first ``rows``
    rows and first ``columns`` columns (the whole product, or a padded product read through its slice: GPT-2's
    LM head, [M, 50264] padded, [M, 50257] wanted; its weight gradient, [50264, 768] padded, [50257, 768] wanted).
    The matmul kernel computes that block only."""

    rows: sympy.Expr
    columns: sympy.Expr
    whole: bool  # the block is the whole product


def _matmul(extern: F.ExternOp) -> _Matmul | str:
    """The matmul an extern computes, or why the lowering cannot take it."""
    if len(extern.inputs) != 2 or len(extern.outputs) != 1:
        return "not two operands and one result"
    a, b = extern.inputs
    p = extern.outputs[0]
    ta, tb, tp = a.type, b.type, p.type
    if not all(isinstance(t, TensorType) for t in (ta, tb, tp)):
        return "operands that are not tensors"
    assert isinstance(ta, TensorType) and isinstance(tb, TensorType) and isinstance(tp, TensorType)
    if tp.element_type not in FLOATS or ta.element_type != tp.element_type or tb.element_type != tp.element_type:
        return f"element types {ta.element_type}, {tb.element_type} -> {tp.element_type} (bf16, f16 or f32 throughout)"
    if not tp.is_contiguous:
        return "a product that is not contiguous"
    if extern.target.data == "aten.mm.default" and ta.rank == tb.rank == tp.rank == 2:
        return _Matmul(a, b, p, (sympy.Integer(1), tp.dims[0], tp.dims[1], ta.dims[1]))
    if extern.target.data == "aten.bmm.default" and ta.rank == tb.rank == tp.rank == 3:
        return _Matmul(a, b, p, (tp.dims[0], tp.dims[1], tp.dims[2], ta.dims[2]))
    return f"ranks {ta.rank}, {tb.rank} -> {tp.rank}"


def matmul_kernel(mm: _Matmul, name: str, weight: SSAValue | None = None, siblings: tuple[_Matmul, ...] = ()) -> F.KernelOp:
    """The product as a reduction kernel over [B*M*N, K]: fp32 products of A's and B's elements summed over r, then
    rounded to the product's element type (cuBLAS's rounding, which the epilogue then reads).  ``mm.dims`` may be a
    leading block of the product (its first M rows and N columns, of a padded product).  ``weight``: a [N, K] weight
    read as B (its row n is B's column n).  ``siblings``: matmuls of the same A and sizes, each product summed and
    stored beside the first (outputs in order)."""
    batch, m, n, k = mm.dims
    et = mm.product_type.element_type
    whole = all(equal(d, e) for d, e in zip(mm.product_type.dims[-2:], (m, n), strict=True))
    kb = KernelBuilder({X: batch * m * n, R: k})
    b_of_x = shapes.FloorDiv(X, m * n) if batch != 1 else sympy.Integer(0)
    m_of_x = sympy.Mod(shapes.FloorDiv(X, n), m) if batch != 1 else shapes.FloorDiv(X, n)
    n_of_x = sympy.Mod(X, n)
    lead = [b_of_x] if batch != 1 else []
    a = kb.element(mm.a, [*lead, m_of_x, R])
    bs = [kb.element(weight, [n_of_x, R]) if weight is not None and i == 0
          else kb.element(each.b, [*lead, R, n_of_x]) for i, each in enumerate((mm, *siblings))]
    if et != F.F32:
        a = kb.add(F.PointwiseOp("convert", [a], F.F32))
    for b, each in zip(bs, (mm, *siblings), strict=True):
        if et != F.F32:
            b = kb.add(F.PointwiseOp("convert", [b], F.F32))
        total = kb.add(F.ReduceROp("sum", kb.add(F.PointwiseOp("mul", [a, b], F.F32)), F.F32))
        value = total if et == F.F32 else kb.add(F.PointwiseOp("convert", [total], et))
        kb.store(value, each.product_type if whole else TensorType([m, n], et), X)
    kernel = kb.finish(name, [batch * m * n, k])
    kernel.mark_matmul([batch, m, n])
    return kernel


@dataclass
class _Fuser:
    options: MatmulEpilogues
    graph_op: F.GraphOp
    graph: Graph
    done: set = field(default_factory=set)  # externs merged or declined as a sibling of an earlier one

    def __post_init__(self) -> None:
        self.hints: SizeHints = resolve_size_hints(self.graph_op, parse_size_hints(self.options.size_hints))
        self.exact_fp32 = exact_fp32(self.graph_op)

    def decline(self, code: str, message: str, *subjects) -> None:
        remarks.emit(PASS, code, message, *subjects)

    def fuse(self, extern: F.ExternOp) -> None:
        what = extern.target.data
        mm = _matmul(extern)
        if isinstance(mm, str):
            self.decline("unsupported-matmul", f"{what}: {mm}", extern)
            return
        readers = self.graph.readers(mm.product)
        kernels = sorted((u for u in readers if isinstance(u, F.KernelOp)), key=self.graph.pos.__getitem__)
        if not kernels:
            self.decline("no-epilogue", f"{what}: no kernel reads its product (only {_readers(self.graph.consumers(extern))})",
                         extern)
            return
        if len(kernels) > 1:
            self.decline("several-epilogues", f"{what}: {len(kernels)} kernels read its product "
                         f"({', '.join(describe(k) for k in kernels)})", extern, *kernels)
            return
        epilogue = kernels[0]
        placement = self._placement(mm, epilogue)
        if isinstance(placement, str):
            self.decline("not-elementwise", f"{what} -> {describe(epilogue)}: {placement}", extern, epilogue)
            return
        if self.graph.reaches(extern, epilogue):
            self.decline("dependence-cycle", f"{describe(epilogue)} also reads {what}'s product through another op",
                         extern, epilogue)
            return
        others = [u for u in readers if u is not epilogue]
        padding = None if others else _zero_padded_weight(mm, placement)
        if not placement.whole and others:
            self.decline("not-elementwise", f"{what} -> {describe(epilogue)}: it reads the product's first "
                         f"{shapes.print_expr(placement.rows)} x {shapes.print_expr(placement.columns)} elements, and "
                         f"{_readers(others)} all of it", extern, epilogue)
            return
        found = self._sibling(extern, mm, epilogue) if self.options.siblings and placement.whole else None
        sibling = None
        if found is not None:  # one kernel of two accumulators (over the whole product: padding is None too)
            self.done.add(found[0])  # weighed here, fused or not: one remark for the pair
            sibling = (*found, [u for u in self.graph.readers(found[1].product) if u is not epilogue])
        subjects: tuple[Operation, ...] = (extern, epilogue)
        named = what
        if sibling is not None:
            subjects, named = (extern, sibling[0], epilogue), f"{what} x2"
        if self.options.cost_rule and (slow := _slow_functions(epilogue, mm)):
            self.decline("epilogue-cost", f"{named} -> {describe(epilogue)}: its {', '.join(slow)} would run exactly "
                         "(libdevice) after the main loop, where a kernel of its own hides it under memory traffic",
                         *subjects)
            return
        if self.options.cost_rule:
            copy_bytes = buffer_bytes(tensor_type_of(padding[2].outputs[0]), self.hints) * 2 if padding else 0
            siblings = ((sibling[1], bool(sibling[2])),) if sibling is not None else ()
            refusal = self._cost_refusal(mm, epilogue, stored_too=bool(others), copy_bytes=copy_bytes, siblings=siblings)
            if refusal is not None:
                self.decline(*refusal, *subjects)
                return
        self._merge(extern, mm, epilogue, others, placement, padding, sibling)

    def _sibling(self, extern: F.ExternOp, mm: _Matmul, epilogue: F.KernelOp) -> tuple[F.ExternOp, _Matmul] | None:
        """Another matmul of the same A and sizes whose product ``epilogue`` also reads element for element (SwiGLU's
        up projection beside its gate), with nothing between them: both products can come from one main loop."""
        for value in epilogue.inputs:
            other = value.owner
            if value is mm.product or not (isinstance(other, F.ExternOp) and other.target.data == extern.target.data):
                continue
            sib = _matmul(other)
            if isinstance(sib, str) or not _same_view(sib.a, mm.a) or sib.product_type.element_type != mm.product_type.element_type:
                continue
            if not all(equal(d, e) for d, e in zip(sib.dims, mm.dims, strict=True)):
                continue
            if not all(u is epilogue or not isinstance(u, F.KernelOp) for u in self.graph.readers(sib.product)):
                continue  # another kernel reads the sibling's product: it has an epilogue of its own to weigh
            placement = self._placement(sib, epilogue)
            if isinstance(placement, str) or not placement.whole or self.graph.reaches(other, epilogue):
                continue
            return other, sib
        return None

    def _placement(self, mm: _Matmul, epilogue: F.KernelOp) -> _Placement | str:
        """Which block of the product ``epilogue``'s points are (``_Placement``), or why they are none: element for
        element over the whole product, or over its first rows or first columns (a padded product read through
        its slice), its point x' = m * columns + n reading the product's element (m, n) = m * N + n."""
        if epilogue.is_matmul or not isinstance(epilogue.parent_op(), F.GraphOp):
            return "it is a matmul kernel, or a combo member, already"
        if epilogue.is_tiled:
            return "it is a tiled (2-D) pointwise kernel: run matmul-epilogues before tile-pointwise"
        if epilogue.is_outer_reduction:
            return ("it sums the product's columns (a bias's gradient, with what it fuses: an activation's backward): "
                    "a matmul program holds a tile of the product, not whole columns, and column partial sums in a "
                    "matmul's epilogue are not built")
        if epilogue.is_reduction:
            return ("it reduces over rows of the product (a LayerNorm, a LayerNorm's backward): a matmul program holds "
                    "a tile of the product, not whole rows")
        loads = loads_of(epilogue, [mm.product])
        if any(load.offset is not None or load.mask is not None for load, _ in loads):
            return "it reads the product at a run-time offset or under a mask"
        batch, m, n, _ = mm.dims
        numel, points = mm.domain[0], epilogue.domain_exprs[0]
        if equal(points, numel):
            for load, _ in loads:
                if not same_index(simplify_in_domain(load.index.data, epilogue.domain_exprs),
                                  simplify_in_domain(X, epilogue.domain_exprs)):  # x is 0 over a one-element domain
                    return f"it reads the product at [{shapes.print_expr(load.index.data)}], not at [x]"
            return _Placement(m, n, True)
        blocks = [(m, sympy.cancel(points / m)), (sympy.cancel(points / n), n)] if batch == 1 else []
        for rows, columns in blocks:
            if not (rows.is_integer and columns.is_integer and indexing.proves_below(rows, m + 1)
                    and indexing.proves_below(columns, n + 1)):
                continue
            upper = {MATMUL_M: rows, MATMUL_N: columns}
            if all(same_index(indexing.simplify(load.index.data.xreplace({X: MATMUL_M * columns + MATMUL_N}), upper),
                              MATMUL_M * n + MATMUL_N) for load, _ in loads):
                return _Placement(rows, columns, False)
        return (f"its domain [{shapes.print_expr(points)}] is not the product's {shapes.print_expr(numel)} elements, "
                "nor its first rows or columns element for element")

    def _cost_refusal(self, mm: _Matmul, epilogue: F.KernelOp, stored_too: bool,
                      copy_bytes: float = 0, siblings: tuple[tuple[_Matmul, bool], ...] = ()) -> tuple[str, str] | None:
        """Why the cost rule keeps cuBLAS, or None.  ``copy_bytes``: the traffic of a weight's zero-padded copy that
        fusing makes unneeded (its read and write), saved with its kernel's fixed time.  ``siblings``: matmuls of the
        same sizes computed in the same main loop (each with whether its product is stored too): each loses its
        main loop's share and saves its product's traffic and a cuBLAS call."""
        et = mm.product_type.element_type
        if et == F.F32 and self.exact_fp32:
            return "fp32-exact", ("an fp32 matmul at float32_matmul_precision 'highest' (exact fp32, no TF32) stays "
                                  "cuBLAS's SGEMM")
        batch, m, n, k = (self.hints(d) for d in mm.dims)
        size = dtypes.of_ir(et).bytes
        flops = 2.0 * batch * m * n * k
        cublas_us = flops / (_GPU.matmul_ops_per_us * 2 / size) + _GPU.matmul_latency_us
        tiles = batch * math.ceil(m / 128) * math.ceil(n / 128)
        count = 1 + len(siblings)
        lost_us = count * (cublas_us * _occupancy_penalty(tiles) / self.options.efficiency - cublas_us)
        product = batch * m * n * size
        # Each product's write (unless kept) and read-back
        traffic = product * (1 if stored_too else 2) + sum(product * (1 if kept else 2) for _, kept in siblings)
        computed = {mm.product, *(s.product for s, _ in siblings)}
        exposed = sum(b for b in (buffer_bytes(tensor_type_of(v), self.hints) for v in epilogue.inputs
                                  if v not in computed) if b >= product)
        saved_us = (traffic - exposed) / _GPU.bandwidth_bytes_per_us + _GPU.kernel_latency_us
        saved_us += len(siblings) * _GPU.matmul_latency_us  # a cuBLAS call fewer each
        if copy_bytes:
            saved_us += copy_bytes / _GPU.bandwidth_bytes_per_us + _GPU.kernel_latency_us
        if lost_us >= saved_us:
            loads = f" (its loads of product-sized operands, {exposed / 1e6:.1f} MB, exposed after the main loop)" if exposed else ""
            times = f"{count} x " if count > 1 else ""
            return "main-loop-cost", (f"[{batch}x{m}x{n}, K={k}]: the Triton main loop at {self.options.efficiency:.0%} "
                                      f"of cuBLAS in {tiles} tiles would lose {lost_us:.1f} us of {times}{cublas_us:.1f}, "
                                      f"fusing saves {saved_us:.1f} us{loads}")
        return None

    def _merge(self, extern: F.ExternOp, mm: _Matmul, epilogue: F.KernelOp, others: list, placement: _Placement,
               padding: tuple[SSAValue, F.PermuteOp, F.KernelOp] | None,
               sibling: tuple[F.ExternOp, _Matmul, list] | None = None) -> None:
        what = extern.target.data
        weight = padding[0] if padding is not None else None  # B read from the weight itself
        block = dataclasses.replace(mm, dims=(mm.dims[0], placement.rows, placement.columns, mm.dims[3]))
        externs, mms = [extern], [block]
        if sibling is not None:
            externs.append(sibling[0])
            mms.append(sibling[1])
        kernel = matmul_kernel(block, "fusec_mm_" + epilogue.sym_name.data.removeprefix("fusec_poi_"), weight,
                               tuple(mms[1:]))
        self.graph.insert(kernel, max(externs, key=self.graph.pos.__getitem__))  # after every operand
        for each, out in zip(mms, kernel.outputs, strict=True):
            each.product.replace_all_uses_with(out)
        merged, replaced = join(kernel, epilogue, {}, self.graph)  # the kernel's points are the epilogue's
        problem = limit_problem(merged, self.options.max_ops, self.options.max_inputs)
        if problem is not None:  # the products go back to cuBLAS
            discard(merged)
            for each, out in zip(mms, kernel.outputs, strict=True):
                out.replace_all_uses_with(each.product)
            self.graph.erase(kernel)
            self.decline("limit", f"{what} -> {describe(epilogue)}: {problem}", *externs, epilogue)
            return
        merged.mark_matmul(block.dims[:3])
        merged.properties["sym_name"] = kernel.sym_name
        self.graph.install(merged, replaced, [epilogue, kernel], anchor=epilogue)
        for gone in externs:
            self.graph.erase(gone)
        kept = f"; the product is also stored for {_readers(others)}" if others else ""
        if sibling is not None:
            kept += (f"; with {what} of the same A, [{', '.join(shapes.print_expr(d) for d in sibling[1].dims)}], in "
                     "the same main loop (two accumulators)")
            if sibling[2]:
                kept += f", its product also stored for {_readers(sibling[2])}"
        if not placement.whole:
            kept += (f"; computed over the {shapes.print_expr(placement.rows)} x {shapes.print_expr(placement.columns)} "
                     "elements the epilogue reads (a padded product's slice)")
        if padding is not None:  # nothing reads the zero-padded copy now: it is not made
            weight, view, copy = padding
            self.graph.erase(view)
            self.graph.erase(copy)
            kept += (f"; B is read from {describe_user(weight.owner) if isinstance(weight.owner, Operation) else 'a graph input'} "
                     "itself, not its zero-padded copy (pad-matmuls' rows for cuBLAS), which is no longer made")
        remarks.emit(PASS, "matmul-epilogue", f"{what} [{', '.join(shapes.print_expr(d) for d in mm.dims)}] and "
                     f"{describe(epilogue)} run as one kernel: its epilogue reads the product from registers{kept}",
                     merged)


def _same_view(a: SSAValue, b: SSAValue) -> bool:
    """Whether ``a`` and ``b`` are one value, or the same views of one value (AOTAutograd gives each linear layer its
    own ``view`` of the hidden states: Llama's gate and up projections read two reshapes of one tensor)."""
    if a is b:
        return True
    oa, ob = a.owner, b.owner
    return (isinstance(oa, F.VIEW_OPS) and type(oa) is type(ob) and a.type == b.type and isinstance(ob, Operation)
            and oa.properties == ob.properties and oa.attributes == ob.attributes
            and len(oa.operands) == len(ob.operands)
            and all(_same_view(x, y) for x, y in zip(oa.operands, ob.operands, strict=True)))


def _zero_padded_weight(mm: _Matmul, placement: _Placement) -> tuple[SSAValue, F.PermuteOp, F.KernelOp] | None:
    """(W, the transposed view, the copy) where B is the transposed view of a kernel that copies a weight W [N', K]
    and appends zero rows (pad-matmuls' padding of a weight read as ``w.t()``, as form-kernels makes it), the
    epilogue reads only the product's first N' columns, and nothing else reads the copy.  A Triton main loop needs no
    aligned rows: it reads W itself, wrapping the padding's columns (masked off at the store) onto W's rows."""
    if placement.whole or mm.dims[0] != 1:
        return None
    view = mm.b.owner
    if not (isinstance(view, F.PermuteOp) and view.perm_list == [1, 0]) or sum(1 for _ in view.result.uses) != 1:
        return None
    copy = view.input.owner
    if not (isinstance(copy, F.KernelOp) and isinstance(copy.parent_op(), F.GraphOp) and len(copy.inputs) == 1
            and len(copy.outputs) == 1 and set(u.operation for u in copy.outputs[0].uses) == {view}):
        return None
    weight = copy.inputs[0]
    tw, tp = tensor_type_of(weight), tensor_type_of(copy.outputs[0])
    if not (tw.rank == tp.rank == 2 and tw.is_contiguous and tp.is_contiguous and tw.dims[1] == tp.dims[1]
            and tw.element_type == tp.element_type and equal(tw.dims[0], placement.columns)):
        return None
    return (weight, view, copy) if _copies_rows_then_zeros(copy, shapes.numel(tw.dims)) else None


def _copies_rows_then_zeros(copy: F.KernelOp, numel: sympy.Expr) -> bool:
    """Whether the kernel's one store is ``where(c, load(W[x], mask c), 0)`` at [x] with c true for every x below
    W's ``numel``: its first ``numel`` elements are W's (what form-kernels makes of a ``fusec.cat`` of W and zeros)."""
    stores = [op for op in copy.block.ops if isinstance(op, F.StoreOp)]
    if len(stores) != 1 or stores[0].mask is not None or not same_index(stores[0].index.data, X):
        return False
    select = stores[0].value.owner
    if not (isinstance(select, F.PointwiseOp) and select.fn.data == "where"):
        return False
    cond, loaded, zero = select.inputs
    load = loaded.owner
    if not (isinstance(load, F.LoadOp) and load.buffer is copy.block.args[0] and load.offset is None
            and load.mask is cond and same_index(load.index.data, X)):
        return False
    if not (isinstance(zero.owner, F.ConstantOp) and zero.owner.value.data == 0):
        return False
    return _true_below(cond, numel)


def _true_below(v: SSAValue, numel: sympy.Expr) -> bool:
    """Whether the kernel's boolean ``v`` is proved true at every x below ``numel``: a conjunction of ``e >= lo`` and
    ``e < hi`` for index expressions e and constant bounds."""
    op = v.owner
    if isinstance(op, F.PointwiseOp) and op.fn.data == "logical_and":
        return all(_true_below(x, numel) for x in op.inputs)
    if not (isinstance(op, F.PointwiseOp) and op.fn.data in ("lt", "ge") and len(op.inputs) == 2):
        return False
    e, bound = (_index_value(x) for x in op.inputs)
    if e is None or bound is None:
        return False
    if op.fn.data == "lt":
        return indexing.proves_below(e, bound, {X: numel})
    return indexing.nonnegative(sympy.expand(indexing.bounds(e, {X: numel})[0] - bound))


def _index_value(v: SSAValue) -> sympy.Expr | None:
    op = v.owner
    if isinstance(op, F.SymbolicOp):
        return op.expr.data
    if isinstance(op, F.ConstantOp) and isinstance(op.value.data, int) and not isinstance(op.value.data, bool):
        return sympy.Integer(op.value.data)
    return None


def _occupancy_penalty(tiles: int) -> float:
    """How much longer [128, 128] programs, two an SM, take than a machine kept full: whole waves where there are more
    tiles than slots (704 tiles run as 3 waves of 264, the last two thirds full: 1.125), idle SMs where there are
    fewer tiles than SMs (cuBLAS splits K over them; a tile's program runs its whole K alone)."""
    slots = 2 * _GPU.sm_count
    if tiles >= slots:
        return math.ceil(tiles / slots) * slots / tiles
    return max(1.0, _GPU.sm_count / tiles)


def _slow_functions(epilogue: F.KernelOp, mm: _Matmul) -> list[str]:
    """The epilogue's functions that would be slow after the main loop (``SLOW_FUNCTIONS``), in body order."""
    stored = [mm.product_type.element_type] + [tensor_type_of(st.buffer).element_type for st in epilogue.block.ops
                                               if isinstance(st, F.StoreOp)]
    approx_tanh = only_16_bit_floats(stored)  # as schedule-kernels will decide it for the joined kernel
    slow = [op.fn.data for op in epilogue.block.ops if isinstance(op, F.PointwiseOp) and op.fn.data in SLOW_FUNCTIONS
            and not (op.fn.data == "tanh" and approx_tanh)]
    return list(dict.fromkeys(slow))


def _readers(readers) -> str:
    """What reads a product, for a remark: kernels by name, externs by their torch op, the graph output."""
    return ", ".join(dict.fromkeys("the graph output" if isinstance(u, F.OutputOp) else describe_user(u) for u in readers)) \
        or "nothing"

