"""reduction-fusion: epilogues and siblings merge into reduction kernels.

In:  a graph after ``form-kernels`` (and usually ``vertical-fusion``, which has
     already inlined pointwise *prologues* into reductions — this pass does not).
Out: for a reduction kernel K over ``[xnumel, rnumel]`` (x a row, r a column):

* epilogues — a kernel E reading K's outputs joins K, its body appended after
  K's ``reduce_r`` and re-indexed into K's domain; E's loads of K's outputs
  become the values K computes in registers.  E may be
    - pointwise over ``[xnumel]``: per-row work (``mean = sum / n``, ``rsqrt(var + eps)``);
    - pointwise over ``[xnumel*rnumel]``: per-element work; its flat index ``x``
      becomes a flat map ``f(x, r)`` of K's domain (``rnumel*x + r`` for a last-dim
      reduction, ``x + xnumel*r`` for a first-dim one, see ``kernel_index.flat_maps``);
    - a reduction over the same ``[xnumel, rnumel]`` (softmax: the sum after the max).
  A one-row reduction (a full sum, ``[1, rnumel]``) stores its value at ``x = 0``: its scalar
  epilogue (``mean = sum / n``) joins it; a per-element one does not (serial-epilogue: the
  one program of K would run all of E), nor one into a reduction that split-reductions would split (few
  long rows: a batch norm's gradient sums per channel) when its per-element stores would need K's finished
  rows and so keep the joined kernel from being split (split-worthy).
  Legal only when, after re-indexing, every load of an output of K reads the
  index K stores it at (``x`` for a per-row value), proved with sympy
  (index-mismatch), with no run-time offset or mask (indirect-load, masked-load).
* siblings (option ``siblings``) — a kernel that reads one of K's inputs in full
  (an input of ``xnumel*rnumel`` elements; a shared weight vector does not count)
  while neither depends on the other: a reduction over the same domain or a
  pointwise kernel over ``[xnumel]`` as it is, a pointwise kernel over
  ``[xnumel*rnumel]`` under a flat map that makes one of its loads of the shared
  input coincide with K's.  One kernel then reads the shared input once
  (var_mean: sum and sum of squares; logsumexp and the gather of cross-entropy).
  Siblings are speculative: only a ``limit`` refusal of one becomes a remark.

Softmax becomes one kernel: load, max, exp(v - max), sum, divide, store per (x, r).
Every merge keeps K's outputs that something else still reads; a merge that would
close a dependence cycle is declined (dependence-cycle), as is one past the
``max-ops``/``max-inputs`` limits (limit) or across unequal domains (domain-mismatch).
A reduction feeding an extern gets an extern-consumer remark; a kernel this pass made
that reads an extern's result, an extern-producer remark under its new name.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass

from fusec.base import shapes
from fusec.base.remarks import describe
from fusec.base.shapes import print_expr
from fusec.dialects import fusec as F
from fusec.passes.kernel_index import X, equal, flat_maps, same_index, simplify_in_domain, substitute
from fusec.passes.kernel_merge import BodyBuilder, Declines, Graph, Worklist, discard, install_within_limits, loads_of, stores_by_output
from fusec.passes.split_reductions import Shape, kernel_shape, worth_splitting

PASS = "reduction-fusion"
Decline = tuple[str, str]  # (remark code, message)
Mapping = dict  # iteration variable of the joining kernel -> expression over the reduction's x, r


def _dom(k: F.KernelOp) -> str:
    return "[" + ", ".join(print_expr(d) for d in k.domain_exprs) + "]"


def joining_maps(k: F.KernelOp, e: F.KernelOp) -> list[Mapping] | Decline:
    """How E's iteration space sits in reduction K's: the candidate index substitutions for E."""
    xnumel, rnumel = k.domain_exprs
    if e.is_reduction:
        if equal(e.domain_exprs[0], xnumel) and equal(e.domain_exprs[1], rnumel):
            return [{}]
    elif equal(e.domain_exprs[0], xnumel):
        return [{}]
    elif equal(e.domain_exprs[0], xnumel * rnumel):
        if xnumel == 1:  # one program would run all of E's elements after the sum: keep E parallel
            return "serial-epilogue", f"{describe(e)} {_dom(e)} would run in the one program of {describe(k)} {_dom(k)}"
        hints = [ld.index.data for ld in k.block.ops if isinstance(ld, F.LoadOp)]
        return [{X: f} for f in flat_maps(k.domain_exprs, hints)]
    return "domain-mismatch", f"{_dom(k)} vs {_dom(e)}"


def epilogue_mapping(k: F.KernelOp, e: F.KernelOp) -> Mapping | Decline:
    """The substitution under which every load E makes of K's outputs reads what K stores there."""
    k_stores = stores_by_output(k)
    if k_stores is None:
        return "unsupported-producer", f"{describe(k)} stores an output more than once"
    results: list[SSAValue] = list(k.results)
    loads = loads_of(e, results)
    if any(ld.offset is not None for ld, _ in loads):
        return "indirect-load", f"{describe(e)} reads {describe(k)} at a run-time offset"
    if any(ld.mask is not None or k_stores[results.index(v)].mask is not None for ld, v in loads):
        return "masked-load", f"{describe(e)} reads {describe(k)} under a mask"
    maps = joining_maps(k, e)
    if isinstance(maps, tuple):
        return maps
    # Both sides in K's domain: a one-element reduction (a full sum) stores its value at x = 0.
    stored_at = {v: simplify_in_domain(k_stores[results.index(v)].index.data, k.domain_exprs) for _, v in loads}
    for mapping in maps:
        if all(same_index(simplify_in_domain(substitute(ld.index.data, mapping, k.domain_exprs), k.domain_exprs),
                          stored_at[v]) for ld, v in loads):
            return mapping
    reads = ", ".join(sorted({print_expr(ld.index.data) for ld, _ in loads}))
    stored = ", ".join(sorted({print_expr(k_stores[results.index(v)].index.data) for _, v in loads}))
    return "index-mismatch", f"{describe(e)} reads [{reads}] of {describe(k)} {_dom(k)}, which stores at [{stored}]"


def sibling_mapping(k: F.KernelOp, s: F.KernelOp) -> Mapping | Decline:
    """Siblings share an input: per row as they are, per element where a shared load lines up with K's."""
    maps = joining_maps(k, s)
    if isinstance(maps, tuple) or maps == [{}]:
        return maps[0] if isinstance(maps, list) else maps
    shared = set(k.inputs) & set(s.inputs)
    k_loads = [(v, ld.index.data) for ld, v in loads_of(k, shared)]
    for mapping in maps:
        for ld, v in loads_of(s, shared):
            index = simplify_in_domain(substitute(ld.index.data, mapping, k.domain_exprs), k.domain_exprs)
            if any(v == kv and same_index(index, ki) for kv, ki in k_loads):
                return mapping
    return "index-mismatch", f"{describe(s)} reads no shared input where {describe(k)} does"


def join(k: F.KernelOp, e: F.KernelOp, mapping: Mapping, graph: Graph) -> tuple[F.KernelOp, dict[SSAValue, SSAValue]]:
    """K's body, then E's re-indexed by ``mapping``, E's loads of K's outputs taking K's values."""
    bb = BodyBuilder(k.domain_exprs)
    results = list(k.results)
    bb.map_inputs(k)
    bb.map_inputs(e, skip=results)
    vm: dict[SSAValue, SSAValue] = {}
    for op in k.block.ops:
        if not isinstance(op, F.StoreOp):
            bb.clone(op, vm, {})
    k_outs = {}
    for arg, r in zip(k.output_args, results, strict=True):
        if any(u is not e for u in graph.readers(r)):  # still read elsewhere: keep storing it
            k_outs[arg] = bb.output(arg.type, r)
    stored: dict[SSAValue, SSAValue] = {}
    for op in k.block.ops:
        if isinstance(op, F.StoreOp):
            stored[results[list(k.output_args).index(op.buffer)]] = vm[op.value]
            if op.buffer in k_outs:
                bb.store(vm[op.value], k_outs[op.buffer], op.index.data, vm[op.mask] if op.mask is not None else None)
    reads = {arg: v for arg, v in zip(e.input_args, e.inputs, strict=True) if v in stored}
    e_outs = {arg: bb.output(arg.type, r) for arg, r in zip(e.output_args, e.results, strict=True)}
    for op in e.block.ops:
        if isinstance(op, F.LoadOp) and op.buffer in reads:
            vm[op.result] = stored[reads[op.buffer]]
        elif isinstance(op, F.StoreOp):
            index = substitute(op.index.data, mapping, k.domain_exprs)
            bb.store(vm[op.value], e_outs[op.buffer], index, vm[op.mask] if op.mask is not None else None)
        else:
            bb.clone(op, vm, mapping)
    return bb.finish([k, e], number_from=e, graph=graph)


def _keeps_whole(k: F.KernelOp, merged: F.KernelOp) -> bool:
    """split-reductions would split K (few long rows) but not K joined with a per-element epilogue that needs K's
    finished rows (``x - mean``): its few programs would each loop over whole rows twice, so the epilogue stays a
    kernel of its own.  A second reduction phase (softmax's sum, a variance after its mean) and per-row epilogues
    join: split-reductions splits such a kernel phase by phase."""
    graph = k.parent_op()
    return isinstance(graph, F.GraphOp) and worth_splitting(k, graph) and not isinstance(kernel_shape(merged, phases=True), Shape)


@dataclass
class ReductionFuser:
    """The worklist over one graph: each reduction kernel tries its readers, then its siblings."""

    options: ReductionFusion
    graph: Graph

    def __post_init__(self):
        self.declines = Declines(PASS)
        self.tried: set[tuple] = set()
        self.made: set[F.KernelOp] = set()  # merged kernels this pass installed

    def run(self) -> None:
        # A matmul kernel keeps the one epilogue matmul-epilogues gave it: its body is a tl.dot and what follows.
        work = Worklist(self.graph, [k for k in self.graph.kernels() if k.is_reduction and not k.is_matmul])
        while (k := work.pop()) is not None:
            merged = self._merge_one(k)
            if merged is not None:  # reductions feeding the merged kernel have a new reader
                self.made.add(merged)
                work.add(merged, *[p for p in self.graph.producers(merged)
                                   if isinstance(p, F.KernelOp) and p.is_reduction and not p.is_matmul])
        # Reductions feeding externs are this pass's boundaries; a kernel it made reports its extern inputs anew.
        kernels = self.graph.kernels()
        self.declines.record_extern_boundaries(self.graph, [k for k in kernels if k in self.made],
                                               [k for k in kernels if k.is_reduction])
        self.declines.emit()

    def _candidates(self, k: F.KernelOp) -> list[tuple[F.KernelOp, bool]]:
        """(kernel, is an epilogue): readers first — same-domain reductions, per-row, then per-element — then siblings."""
        readers = self.graph.users(k)
        kernels = [u for u in readers if isinstance(u, F.KernelOp)]
        kernels.sort(key=lambda u: 0 if u.is_reduction else 1 if equal(u.domain_exprs[0], k.domain_exprs[0]) else 2)
        return [(u, True) for u in kernels] + [(s, False) for s in self._siblings(k, readers)]

    def _siblings(self, k: F.KernelOp, readers: list) -> list[F.KernelOp]:
        """Kernels that read one of K's inputs in full (a shared weight vector is no reason to merge)."""
        if not self.options.siblings:
            return []
        found: list[F.KernelOp] = []
        points = shapes.numel(k.domain_exprs)
        producers = self.graph.producers(k)
        for v in k.inputs:
            if isinstance(v.type, F.TensorType) and equal(shapes.numel(v.type.dims), points):
                found += [s for s in self.graph.readers(v) if isinstance(s, F.KernelOp) and s is not k
                          and s not in readers and s not in producers and s not in found]
        return found

    def _merge_one(self, k: F.KernelOp) -> F.KernelOp | None:
        readers = tuple(self.graph.users(k))
        for other, is_epilogue in self._candidates(k):
            key = (k, other, readers)
            if key not in self.tried:
                self.tried.add(key)
                merged = self._try(k, other, is_epilogue)
                if merged is not None:
                    return merged
        return None

    def _try(self, k: F.KernelOp, other: F.KernelOp, is_epilogue: bool) -> F.KernelOp | None:
        if other.is_matmul:
            return None
        mapping = epilogue_mapping(k, other) if is_epilogue else sibling_mapping(k, other)
        first, second = sorted([k, other], key=self.graph.pos.__getitem__)
        if not isinstance(mapping, tuple) and self.graph.reaches(first, second):
            mapping = "dependence-cycle", f"{describe(second)} also depends on {describe(first)} through another kernel"
        if isinstance(mapping, tuple):
            if is_epilogue:  # siblings are speculative: only a limit on a real candidate is worth a remark
                self.declines.record(*mapping, k, other)
            return None
        merged = join(k, other, mapping, self.graph)
        if is_epilogue and not other.is_reduction and self.options.keep_splittable and _keeps_whole(k, merged[0]):
            self.declines.record("split-worthy", f"{describe(other)} {_dom(other)} needs the finished rows of "
                                 f"{describe(k)} {_dom(k)}: joined, its few long rows could not be split into "
                                 "partial reductions", k, other)
            discard(merged[0])  # built but not installed: it still reads graph values
            return None
        return install_within_limits(self.graph, self.declines, merged, (k, other),
                                     anchor=second, max_ops=self.options.max_ops, max_inputs=self.options.max_inputs)


@dataclass(frozen=True)
class ReductionFusion(ModulePass):
    """Merges epilogues (per-row and per-element) and sibling kernels into reduction kernels.

    Options: max-ops (body ops of a merged kernel), max-inputs (its input buffers),
    siblings (also merge kernels that share an input with a reduction and its rows),
    keep-splittable (leave out an epilogue that would keep a reduction over few long rows from splitting).
    """

    name = PASS

    max_ops: int = 128
    max_inputs: int = 16
    siblings: bool = True
    keep_splittable: bool = True  # false: join epilogues even where that keeps split-reductions from splitting

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for graph in [g for g in op.walk() if isinstance(g, F.GraphOp)]:
            ReductionFuser(self, Graph(graph.block)).run()
