"""split-reductions: a reduction over few long rows becomes two kernels, so that it fills the GPU.

In:  a graph after the fusion passes.  ``x.sum()`` over 1M elements is a kernel over
     ``[1, 1048576]``: one Triton program loops over the whole row on one SM.
Out: for a top-level reduction kernel over ``[xnumel, rnumel]`` whose rows are long
     (``rnumel >= min-rnumel``) and few (``xnumel <= max-xnumel``, or ``max-outer-xnumel``
     for a column reduction, whose programs take 64 columns each), both proved from the
     symbols' declared bounds, with ``S`` (option ``splits``, or chosen from the
     sizes' bounds for about a thousand programs) and ``C = ceil(rnumel / S)``:

* kernel A ``<name>_split`` over ``[S*xnumel, C]``: its ``x`` is ``s*xnumel + x`` and
  the original ``r`` becomes ``s*C + r``; loads along r are masked where that is past
  rnumel, and each ``reduce_r`` sees its identity there.  It stores one partial
  reduction per (s, x) into a new ``[S, xnumel]`` buffer per reduction (fp16/bf16
  partials in fp32).
  Values stored per (x, r) (the gradient a bias-gradient sum also hands on) are
  stored by A too, at the substituted index: A visits every (x, r) exactly once.
* kernel B ``<name>`` over ``[xnumel, S]``: loads the partials, combines them
  (sum, prod, max, min, any, all combine with themselves), then runs the original
  per-x epilogue and stores.

The partial buffers are ordinary kernel results between A and B: the launcher
allocates them like any other.  Only kernels of the form loads -> per-(x, r)
prologue (and its stores) -> independent ``reduce_r`` -> per-x epilogue -> per-x stores
are split; a kernel worth splitting by size but not of that form stays as it is, with a
``split-declined`` remark whose message starts with the reason: ``argmax`` /
``argmin`` (partial results would need their positions), ``dependent store`` (a value
per (x, r) that needs a reduction, like ``x - mean``), ``mixed store`` (one buffer
stored both per (x, r) and per x), ``dependent reductions`` (a reduction's input needs
another reduction: softmax-like phases), ``unproven size`` (symbolic sizes whose
bounds do not prove long and few rows, nor the sizes the graph was traced with: where the
graph's symbols carry those, ``s0 in [2, inf] hint 16``, a split they make worth it is made, with a
``split-on-example`` remark, and its number of chunks is chosen for them too).

A variance after its mean (two phases whose second reduction is ``sum((v - m)^2)`` of a per-(x, r) value
``v`` and a per-x value ``m``: batch norm's and layer norm's statistics) splits as chunk-local moments
(option ``moments``, remark ``split-moments``): A stores each chunk's ``sum(v)`` and ``sum((v - mean_c)^2)``
around the chunk's own mean, B combines them by Chan's formula,
``sum((v - m)^2) = sum_c [M2_c + n_c (mean_c - m)^2]``, exact for any ``m``: two kernels, not the four
of a kernel per phase, and no ``sum(v^2) - n m^2`` cancellation.

Column reductions (``x.sum(0)``: neighbouring x are neighbouring addresses) have their
own thresholds: each of their programs takes 64 columns, so ``[1024, 3072]`` (a bias
gradient of 1024 tokens) is 48 programs on a GPU of 132 SMs unless it is split.  Their chunks
keep at least 64 rows, or 32 where 64 would leave fewer programs than ``MIN_PROGRAMS`` (a narrow
model's layer-norm gradients, ``[3152, 192]``: 64 chunks, 192 programs, not 32 and 96).  Kernels provably too short or too many
rows are left alone silently.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import sympy
from xdsl.context import Context
from xdsl.dialects.builtin import IntegerType, ModuleOp, Signedness
from xdsl.ir import Attribute, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern, op_type_rewrite_pattern

from fusec.analysis.heuristics import MIN_PROGRAMS
from fusec.base import remarks
from fusec.base.remarks import describe
from fusec.base.shapes import FloorDiv, Mod, evaluate, free_size_symbols, print_expr, value_range
from fusec.dialects import fusec as F
from fusec.passes.kernel_index import R, X, equal, substitute
from fusec.passes.kernel_merge import BodyBuilder

PASS = "split-reductions"
COMBINABLE = ("sum", "prod", "max", "min", "any", "all")  # partials combine with the same reduction
# Choosing S: about this many programs for kernel A (an H100 has 132 SMs; several programs each keep
# loads in flight), chunks no shorter than these (a row reduction's program loops over its chunk; a
# column reduction's program takes OUTER_COLUMNS columns at once), and at most MAX_SPLITS partials.
TARGET_PROGRAMS = 1024
MIN_CHUNK = 2048
MIN_CHUNK_OUTER = 64
OUTER_COLUMNS = 64
MAX_SPLITS = 1024
# A column reduction's program steps through its chunk 8 rows at a time at 4 warps, and unlike a row loop it cannot
# widen its step: where its chunks of MIN_CHUNK_OUTER rows leave fewer programs than MIN_PROGRAMS (ViT's [3152, 192]
# layer-norm gradients: 96 programs of 13 steps, 20.8 us), chunks shrink to MIN_CHUNK_FEW rows until each SM has one.
MIN_CHUNK_FEW = 32


# ---------------------------------------------------------------- sizes


def example_sizes(graph: F.GraphOp, exprs: tuple[sympy.Expr, ...]) -> tuple[int, ...] | None:
    """The values of ``exprs`` at the sizes the graph was traced with (its symbols' hints), None where a
    symbol has none (hand-written IR; an option or a bound is then all there is)."""
    symbols = graph.declared_symbols
    examples: dict[str, int] = {}
    for name in sorted(free_size_symbols(exprs)):
        value = symbols[name].example if name in symbols else None
        if value is None:
            return None
        examples[name] = value
    return tuple(evaluate(e, examples) for e in exprs)


def size_range(e: sympy.Expr, bounds: Mapping[str, tuple[float, float]]) -> tuple[float, float]:
    """Interval arithmetic over the declared bounds: sound, not tight (an undeclared symbol is [1, inf])."""
    return value_range(e, bounds, (1, math.inf))


def worth_splitting(kernel: F.KernelOp, graph: F.GraphOp, options: SplitReductions | None = None) -> bool:
    """Whether this pass would split ``kernel`` by its sizes (few long rows, by the symbols' bounds or at the
    sizes the graph was traced with) and its form: what other passes ask before making it unsplittable."""
    o = options or SplitReductions()
    outer = kernel.is_outer_reduction
    max_x, min_r = (o.max_outer_xnumel, o.min_outer_rnumel) if outer else (o.max_xnumel, o.min_rnumel)
    xnumel, rnumel = kernel.domain_exprs
    bounds = graph.symbol_bounds
    (_, xhi), (rlo, _) = size_range(xnumel, bounds), size_range(rnumel, bounds)
    if xhi > max_x or rlo < min_r:
        examples = example_sizes(graph, (xnumel, rnumel))
        if examples is None or examples[0] > max_x or examples[1] < min_r:
            return False
    return isinstance(kernel_shape(kernel, o.split_phases), Shape)


# ---------------------------------------------------------------- the kernel's shape


@dataclass
class Shape:
    """What each body value depends on: r (per element) and reductions (after a reduce_r)."""

    per_r: set[SSAValue] = field(default_factory=set)
    after: set[SSAValue] = field(default_factory=set)
    element_stores: set[F.StoreOp] = field(default_factory=set)  # stored per (x, r): kernel A's
    # The reductions each value needs, counted along the longest chain: a mean's reduction is phase 1, a
    # variance's (which reads the mean) phase 2.  More than one phase: one kernel per phase (separate_phases).
    phase: dict[SSAValue, int] = field(default_factory=dict)

    @property
    def phases(self) -> int:
        return max(self.phase.values(), default=0)

    @property
    def element_buffers(self) -> set[SSAValue]:
        return {op.buffer for op in self.element_stores}


Decline = tuple[str, str]  # (reason, message): the remark reads "split-declined: <reason>: <message>"


def kernel_shape(kernel: F.KernelOp, phases: bool = False) -> Shape | Decline:
    """The dependences of the body, or why the kernel is not of the splittable form (``phases``: reductions
    that need others' results are of it, to be split phase by phase)."""
    shape = Shape()
    for op in kernel.block.ops:
        per_r = any(v in shape.per_r for v in op.operands)
        after = any(v in shape.after for v in op.operands)
        level = max((shape.phase.get(v, 0) for v in op.operands), default=0)
        if isinstance(op, F.ReduceROp):
            kind = op.kind.data
            if kind not in COMBINABLE:
                return kind, f"{describe(kernel)} reduces with {kind}; partial results would need their positions"
            if after and not phases:
                return "dependent reductions", (f"{describe(kernel)} reduces a value that needs another of its "
                                                "reductions (softmax-like phases)")
            shape.after.add(op.result)
            shape.phase[op.result] = level + 1
            continue
        shape.phase.update((r, level) for r in op.results)
        if isinstance(op, F.StoreOp):
            if per_r or R in op.index.data.free_symbols:
                if after:
                    return "dependent store", (f"{describe(kernel)} stores a value per (x, r) that needs one of its "
                                               "reductions")
                shape.element_stores.add(op)
            continue
        if isinstance(op, F.LoadOp):
            per_r = per_r or R in op.index.data.free_symbols
        if isinstance(op, F.SymbolicOp):
            per_r = R in op.expr.data.free_symbols
        if per_r:
            shape.per_r.update(op.results)
        if after:
            shape.after.update(op.results)
    element_buffers = shape.element_buffers
    if any(isinstance(op, F.StoreOp) and op not in shape.element_stores and op.buffer in element_buffers
           for op in kernel.block.ops):
        return "mixed store", f"{describe(kernel)} stores one buffer both per (x, r) and per x"
    return shape


def centered_squares(kernel: F.KernelOp, shape: Shape) -> dict[SSAValue, tuple[SSAValue, SSAValue]] | None:
    """For a two-phase kernel whose every second-phase reduction is ``sum((v - m)^2)`` (``v`` per (x, r) and
    needing no reduction, ``m`` per x, all one float type): reduction result -> (v, m).  None otherwise."""
    if shape.phases != 2:
        return None
    found: dict[SSAValue, tuple[SSAValue, SSAValue]] = {}
    for op in kernel.block.ops:
        if not isinstance(op, F.ReduceROp) or shape.phase[op.result] != 2:
            continue
        square, t = op.input.owner, op.result.type
        if (op.kind.data != "sum" or not F.is_float(t) or not isinstance(square, F.PointwiseOp)
                or square.fn.data != "mul" or square.operands[0] is not square.operands[1]):
            return None
        diff = square.operands[0].owner
        if not isinstance(diff, F.PointwiseOp) or diff.fn.data != "sub":
            return None
        a, b = diff.operands
        v, m = (a, b) if a in shape.per_r else (b, a)
        if (v not in shape.per_r or v in shape.after or m in shape.per_r
                or any(x.type != t for x in (v, m, diff.result, square.result))):
            return None
        found[op.result] = (v, m)
    return found


# ---------------------------------------------------------------- building A and B


def partial_type(t: Attribute) -> Attribute:
    """Partials of fp16/bf16 are kept in fp32: S roundings would cost precision."""
    return F.F32 if t in (F.F16, F.BF16) else t


def identity(kind: str, t: Attribute) -> float | int | bool:
    """The value that leaves ``kind`` unchanged, in element type ``t``."""
    if kind in ("sum", "any"):
        return False if t == F.BOOL else 0.0 if F.is_float(t) else 0
    if kind in ("prod", "all"):
        return True if t == F.BOOL else 1.0 if F.is_float(t) else 1
    if t == F.BOOL:
        return kind == "min"
    if F.is_float(t):
        return -math.inf if kind == "max" else math.inf
    assert isinstance(t, IntegerType)
    width, unsigned = t.width.data, t.signedness.data == Signedness.UNSIGNED
    lo, hi = (0, 2**width - 1) if unsigned else (-(2 ** (width - 1)), 2 ** (width - 1) - 1)
    return lo if kind == "max" else hi


def finish(bb: BodyBuilder, name: str) -> F.KernelOp:
    """The kernel ``bb`` built, CSE'd, with dead ops and unread input buffers removed."""
    return bb.kernel(lambda body: name)


def chunk_count(rnumel: sympy.Expr, chunk: sympy.Expr, s: sympy.Expr, exact: bool) -> sympy.Expr:
    """How many of chunk ``s``'s positions lie inside a row (the last chunks of a row may be short or empty)."""
    return chunk if exact else sympy.Min(chunk, sympy.Max(rnumel - s * chunk, 0))


def partials_kernel(kernel: F.KernelOp, shape: Shape, splits: int,
                    moments: Mapping[SSAValue, tuple[SSAValue, SSAValue]]
                    ) -> tuple[F.KernelOp, dict[SSAValue, list[SSAValue]], dict[SSAValue, SSAValue]]:
    """Kernel A: the prologue and each reduction over one S-th of every row; a [S, xnumel] buffer per reduction
    (two for a centered-squares reduction in ``moments``: the chunk's ``sum(v)`` and its ``sum((v - mean_c)^2)``).

    Returns A, each reduction's partial buffers, and the kernel's results A now computes
    (those stored per (x, r)) -> A's results.

    Split-major (A's x is ``s*xnumel + x``): neighbouring programs read neighbouring
    columns of one chunk, so a column reduction's loads stay coalesced along x.
    """
    xnumel, rnumel = kernel.domain_exprs
    chunk = FloorDiv(rnumel + splits - 1, splits)
    exact = equal(chunk * splits, rnumel)
    bb = BodyBuilder([xnumel * splits, chunk])
    bb.map_inputs(kernel)
    mapping = {X: Mod(X, xnumel), R: FloorDiv(X, xnumel) * chunk + R}
    valid = None
    if not exact:  # the last chunk of a row runs past its end
        position = bb.add(F.SymbolicOp(substitute(R, mapping, bb.domain), F.I64))
        valid = bb.add(F.PointwiseOp("lt", [position, bb.add(F.SymbolicOp(rnumel, F.I64))], F.BOOL))
    vm: dict[SSAValue, SSAValue] = {}
    masked: set[SSAValue] = set()
    outputs: dict[SSAValue, int] = {}  # the original kernel's output buffer -> A's, for per-(x, r) stores
    partial_outputs: dict[SSAValue, list[int]] = {}  # each reduction -> A's outputs holding its partials
    sums: dict[SSAValue, tuple[SSAValue, int]] = {}  # a value's chunk sum in A, and its output, where made

    def reduce(kind: str, value: SSAValue, t: Attribute) -> tuple[SSAValue, int]:
        padded_with_zero = value in masked and kind in ("sum", "any")  # a masked load gives 0 there
        if t != value.type:
            value = bb.add(F.PointwiseOp("convert", [value], t))
        if valid is not None and not padded_with_zero:
            value = bb.add(F.PointwiseOp("where", [valid, value, bb.add(F.ConstantOp(identity(kind, t), t))], t))
        result_type = F.BOOL if kind in ("any", "all") else t
        out = bb.output(F.TensorType([splits, xnumel], result_type))
        reduced = bb.add(F.ReduceROp(kind, value, result_type))
        bb.store(reduced, out, X)  # partial (s, x) at s*xnumel + x: A's x
        return reduced, out

    def chunk_sum(v: SSAValue, t: Attribute) -> tuple[SSAValue, int]:
        if v not in sums:
            sums[v] = reduce("sum", vm[v], t)
        return sums[v]

    for op in kernel.block.ops:
        if op in shape.element_stores:
            assert isinstance(op, F.StoreOp)
            result = kernel.outputs[kernel.output_args.index(op.buffer)]
            out = outputs.setdefault(op.buffer, bb.output(op.buffer.type, result))
            own = vm[op.mask] if op.mask is not None else None
            bb.store(vm[op.value], out, substitute(op.index.data, mapping, bb.domain), bb.both(valid, own))
            continue
        if isinstance(op, F.StoreOp) or (op.results[0] in shape.after and not isinstance(op, F.ReduceROp)):
            continue  # the epilogue: kernel B's
        if isinstance(op, F.ReduceROp) and op.result in moments:
            v, t = moments[op.result][0], partial_type(op.result.type)
            total, total_out = chunk_sum(v, t)
            count = bb.add(F.SymbolicOp(chunk_count(rnumel, chunk, FloorDiv(X, xnumel), exact), F.I64))
            count = bb.add(F.PointwiseOp("maximum", [bb.add(F.PointwiseOp("convert", [count], t)),
                                                     bb.add(F.ConstantOp(1.0, t))], t))
            centered = bb.add(F.PointwiseOp("sub", [vm[v], bb.add(F.PointwiseOp("div", [total, count], t))], t))
            _, squares_out = reduce("sum", bb.add(F.PointwiseOp("mul", [centered, centered], t)), t)
            partial_outputs[op.result] = [total_out, squares_out]
            continue
        if isinstance(op, F.ReduceROp):
            kind, t = op.kind.data, partial_type(op.input.type)
            made = chunk_sum(op.input, t) if kind == "sum" else reduce(kind, vm[op.input], t)
            partial_outputs[op.result] = [made[1]]
            continue
        along_r = isinstance(op, F.LoadOp) and op.result in shape.per_r
        bb.clone(op, vm, mapping, valid if along_r else None)
        if along_r and valid is not None:
            masked.add(vm[op.result])
    partials = finish(bb, f"{kernel.sym_name.data}_split")
    return (partials, {r: [partials.outputs[i] for i in outs] for r, outs in partial_outputs.items()},
            {old: new for (_, old), new in zip(bb.outputs, partials.outputs, strict=True) if old is not None})


def combine_kernel(kernel: F.KernelOp, shape: Shape, partials: Mapping[SSAValue, list[SSAValue]], splits: int,
                   moments: Mapping[SSAValue, tuple[SSAValue, SSAValue]]) -> F.KernelOp:
    """Kernel B: each reduction combines its S partials (a centered-squares one by Chan's formula around the
    row's ``m``), then the original per-x epilogue and stores."""
    xnumel, rnumel = kernel.domain_exprs
    chunk = FloorDiv(rnumel + splits - 1, splits)
    bb = BodyBuilder([xnumel, splits])
    bb.map_inputs(kernel)
    outputs = {arg: bb.output(arg.type, result) for arg, result in zip(kernel.output_args, kernel.outputs, strict=True)
               if arg not in shape.element_buffers}
    vm: dict[SSAValue, SSAValue] = {}
    for op in kernel.block.ops:
        if isinstance(op, F.ReduceROp):
            loaded = [bb.add(F.LoadOp(bb.buffer(p), xnumel * R + X)) for p in partials[op.result]]
            if op.result in moments:
                total, squares = loaded
                t = partial_type(op.result.type)
                count = bb.add(F.PointwiseOp("convert", [bb.add(F.SymbolicOp(
                    chunk_count(rnumel, chunk, R, equal(chunk * splits, rnumel)), F.I64))], t))
                mean = bb.add(F.PointwiseOp("div", [total, bb.add(F.PointwiseOp(
                    "maximum", [count, bb.add(F.ConstantOp(1.0, t))], t))], t))
                delta = bb.add(F.PointwiseOp("sub", [mean, vm[moments[op.result][1]]], t))
                spread = bb.add(F.PointwiseOp("mul", [count, bb.add(F.PointwiseOp("mul", [delta, delta], t))], t))
                value = bb.add(F.ReduceROp("sum", bb.add(F.PointwiseOp("add", [squares, spread], t)), t))
            else:
                value = bb.add(F.ReduceROp(op.kind.data, loaded[0], loaded[0].type))
            if value.type != op.result.type:
                value = bb.add(F.PointwiseOp("convert", [value], op.result.type))
            vm[op.result] = value
        elif isinstance(op, F.StoreOp):
            if op not in shape.element_stores:  # those are kernel A's
                bb.store(vm[op.value], outputs[op.buffer], op.index.data, vm[op.mask] if op.mask is not None else None)
        elif not any(r in shape.per_r for r in op.results):
            bb.clone(op, vm, {})
    return finish(bb, kernel.sym_name.data)


def separate_phases(kernel: F.KernelOp, shape: Shape) -> tuple[list[F.KernelOp], list[SSAValue]]:
    """One kernel per reduction phase, each over the kernel's own domain: phase p's kernel reads the rows
    again, takes the earlier phases' reductions as per-row values (a [xnumel] buffer each, stored by the
    phase that reduced it) and reduces its own.  Values stored per (x, r) go to the first kernel, every other
    store and the epilogue to the last.  Each is of the one-phase form the split takes.

    Returns the kernels in order and, for each of the kernel's results, the new kernel result that holds it.
    """
    xnumel, _ = kernel.domain_exprs
    last = shape.phases
    reduced: dict[SSAValue, SSAValue] = {}  # a reduction of an earlier phase -> the kernel result holding it
    made: list[F.KernelOp] = []
    holds: dict[SSAValue, SSAValue] = {}
    for p in range(1, last + 1):
        bb = BodyBuilder(kernel.domain_exprs)
        bb.map_inputs(kernel)
        vm: dict[SSAValue, SSAValue] = {}
        outputs: dict[SSAValue, int] = {}  # the kernel's output buffer -> this phase's
        handed_on: list[SSAValue] = []  # this phase's reductions, in output order after the kernel's own
        for op in kernel.block.ops:
            if isinstance(op, F.ReduceROp) and shape.phase[op.result] < p:
                vm[op.result] = bb.add(F.LoadOp(bb.buffer(reduced[op.result]), X))
            elif isinstance(op, F.StoreOp):
                if p == (1 if op in shape.element_stores else last):
                    result = kernel.outputs[kernel.output_args.index(op.buffer)]
                    out = outputs.setdefault(op.buffer, bb.output(op.buffer.type, result))
                    bb.store(vm[op.value], out, op.index.data, vm[op.mask] if op.mask is not None else None)
            elif all(shape.phase[r] <= p for r in op.results):
                bb.clone(op, vm, {})
                if isinstance(op, F.ReduceROp) and shape.phase[op.result] == p < last:
                    bb.store(vm[op.result], bb.output(F.TensorType([xnumel], op.result.type)), X)
                    handed_on.append(op.result)
        new = finish(bb, f"{kernel.sym_name.data}_phase{p}" if p < last else kernel.sym_name.data)
        pairs = list(zip(bb.outputs, new.outputs, strict=True))
        holds.update((old, value) for (_, old), value in pairs if old is not None)
        reduced.update(zip(handed_on, [value for (_, old), value in pairs if old is None], strict=True))
        made.append(new)
    return made, [holds[v] for v in kernel.outputs]


# ---------------------------------------------------------------- the rewrite


@dataclass
class SplitReduction(RewritePattern):
    """Splits one top-level reduction kernel in two when its rows are provably long and few."""

    options: SplitReductions
    # Kernels already decided, and those this pass wrote: the walker may revisit a kernel whose
    # operands changed, and neither a second remark nor a split of a split is wanted.
    decided: set[F.KernelOp] = field(default_factory=set)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: F.KernelOp, rewriter: PatternRewriter, /) -> None:
        if op in self.decided or not isinstance(op.parent_op(), F.GraphOp) or not op.is_reduction or op.is_tiled \
                or op.is_matmul:
            return
        if not any(isinstance(o, F.ReduceROp) for o in op.block.ops):
            return
        self.decided.add(op)
        outer = op.is_outer_reduction  # a column reduction: its programs take OUTER_COLUMNS columns each
        why = self.size_problem(op, outer)
        if why == "":
            return  # provably not worth it: too short or too many rows
        shape = kernel_shape(op, self.options.split_phases) if why is None else why
        if isinstance(shape, tuple):
            reason, message = shape
            remarks.emit(PASS, "split-declined", f"{reason}: {message}", op, reason=reason)
            return
        assert isinstance(shape, Shape), "size_problem's other answer, \"\", returned above"
        splits = self.options.splits or self.auto_splits(op, outer)
        moments = centered_squares(op, shape) if self.options.moments else None
        if shape.phases <= 1 or moments:
            if moments:
                remarks.emit(PASS, "split-moments", f"{describe(op)}: its {len(moments)} sum(s) of squares around a "
                             "per-row value, after the reductions that value needs, split as chunk-local sums and "
                             "centered squares combined by Chan's formula: two kernels, not one per phase", op)
            self.split(op, shape, splits, rewriter, moments or {})
            return
        phases, results = separate_phases(op, shape)
        remarks.emit(PASS, "split-phases", f"{describe(op)}: {shape.phases} reduction phases, each needing the one "
                     "before (a variance after its mean), become a kernel each, reading the rows again, and each "
                     "is split", op, *phases, phases=shape.phases)
        rewriter.replace(op, phases, results)
        for kernel in phases:
            one_phase = kernel_shape(kernel)
            assert isinstance(one_phase, Shape) and one_phase.phases == 1, "separate_phases leaves one phase each"
            self.split(kernel, one_phase, splits, rewriter, {})

    def split(self, op: F.KernelOp, shape: Shape, splits: int, rewriter: PatternRewriter,
              moments: Mapping[SSAValue, tuple[SSAValue, SSAValue]]) -> None:
        """``op`` -> its partials kernel and its combining kernel."""
        partials, buffers, from_partials = partials_kernel(op, shape, splits, moments)
        combined = combine_kernel(op, shape, buffers, splits, moments)
        self.decided |= {partials, combined}
        (x, r), (px, pr) = op.domain_exprs, partials.domain_exprs
        remarks.emit(PASS, "split", f"[{print_expr(x)}, {print_expr(r)}] -> [{print_expr(px)}, {print_expr(pr)}] "
                     f"partial rows, then [{print_expr(x)}, {splits}] combined", partials, combined, splits=splits)
        from_combined = iter(combined.outputs)
        rewriter.replace(op, [partials, combined], [from_partials.get(v) or next(from_combined) for v in op.outputs])

    def auto_splits(self, op: F.KernelOp, outer: bool) -> int:
        """S for about TARGET_PROGRAMS programs, each chunk at least MIN_CHUNK long (from the sizes' bounds:
        the fewest elements a row may have, the most rows), a power of two in [2, MAX_SPLITS]."""
        graph = op.parent_op()
        assert isinstance(graph, F.GraphOp), "a top-level kernel: its parent is the graph"
        bounds = graph.symbol_bounds
        xnumel, rnumel = op.domain_exprs
        rows, length = size_range(xnumel, bounds)[1], size_range(rnumel, bounds)[0]
        examples = example_sizes(graph, (xnumel, rnumel))
        if examples is not None:  # chosen for the sizes the graph was traced with; correct at every size
            rows, length = examples
        programs = max(1, math.ceil(min(rows, 2**40) / (OUTER_COLUMNS if outer else 1)))
        splits = MAX_SPLITS
        while splits > 2 and (programs * splits > 2 * TARGET_PROGRAMS
                              or length / splits < (MIN_CHUNK_OUTER if outer else MIN_CHUNK)):
            splits //= 2
        while outer and splits < MAX_SPLITS and programs * splits < MIN_PROGRAMS and length / (2 * splits) >= MIN_CHUNK_FEW:
            splits *= 2
        return splits

    def size_problem(self, op: F.KernelOp, outer: bool) -> Decline | str | None:
        """None when the rows are provably long and few, "" when provably not, else why it is unproven."""
        o = self.options
        graph = op.parent_op()
        assert isinstance(graph, F.GraphOp), "a top-level kernel: its parent is the graph"
        bounds = graph.symbol_bounds
        xnumel, rnumel = op.domain_exprs
        (xlo, xhi), (rlo, rhi) = size_range(xnumel, bounds), size_range(rnumel, bounds)
        max_xnumel = o.max_outer_xnumel if outer else o.max_xnumel
        min_rnumel = o.min_outer_rnumel if outer else o.min_rnumel
        if rhi < min_rnumel or xlo > max_xnumel:
            return ""
        if rlo < min_rnumel or xhi > max_xnumel:
            # Unproven for every size: decide for the sizes the graph was traced with (a split is correct at
            # any size; only its speed depends on the sizes), and say so.
            examples = example_sizes(graph, (xnumel, rnumel))
            if examples is not None:
                rows, length = examples
                if length >= min_rnumel and rows <= max_xnumel:
                    remarks.emit(PASS, "split-on-example", f"{describe(op)}: [{print_expr(xnumel)}, {print_expr(rnumel)}] "
                                 f"is [{rows}, {length}] at the sizes the graph was traced with; not provably worth "
                                 "splitting at every size", op)
                    return None
        if rlo < min_rnumel:
            option = "min-outer-rnumel" if outer else "min-rnumel"
            return "unproven size", (f"{describe(op)} has rnumel {print_expr(rnumel)}, as small as {rlo} by the "
                                     f"symbols' bounds: not provably >= {option}={min_rnumel}")
        if xhi > max_xnumel:
            option = "max-outer-xnumel" if outer else "max-xnumel"
            return "unproven size", (f"{describe(op)} has xnumel {print_expr(xnumel)}, as large as {xhi} by the "
                                     f"symbols' bounds: not provably <= {option}={max_xnumel}")
        return None


@dataclass(frozen=True)
class SplitReductions(ModulePass):
    """Splits reductions over few long rows into partial reductions and a combining kernel.

    Options: min-rnumel (rows at least this long are split), max-xnumel (only kernels
    with at most this many rows), min-outer-rnumel and max-outer-xnumel (the same for
    column reductions, whose programs each take 64 columns: 8192 columns are 128
    programs, fewer than an H100's 132 SMs, and 512 rows leave chunks of 64 rows for 8
    splits), splits (S, a power of two: the chunks each row is cut into; 0 chooses it
    from the sizes), split-phases (a kernel whose reductions need each other's results,
    a variance after its mean, becomes one kernel per phase first, each then split).
    """

    name = PASS

    min_rnumel: int = 4096
    max_xnumel: int = 64
    min_outer_rnumel: int = 512
    max_outer_xnumel: int = 8192
    splits: int = 0
    split_phases: bool = True  # false: reductions that need another's result (softmax, a variance) stay whole
    moments: bool = True

    def __post_init__(self) -> None:
        if self.splits != 0 and (self.splits < 2 or self.splits & (self.splits - 1)):
            raise ValueError(f"splits must be 0 (chosen from the sizes) or a power of two of at least 2, got {self.splits}")
        if min(self.min_rnumel, self.max_xnumel, self.min_outer_rnumel, self.max_outer_xnumel) < 1:
            raise ValueError("min-rnumel, max-xnumel, min-outer-rnumel and max-outer-xnumel must be positive")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(SplitReduction(self), apply_recursively=False).rewrite_module(op)
