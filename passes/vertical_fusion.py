"""vertical-fusion: pointwise producer kernels merge into the kernels that read them.

In:  a graph after ``form-kernels`` (one kernel per op).
Out: each pointwise kernel P inlined into its kernel consumers C — pointwise
     consumers and reductions alike (a pointwise producer of a reduction is its
     *prologue*: this pass fuses prologues; reduction-fusion does epilogues and
     siblings).

Inlining: P stores its value at ``x`` over ``[n]``, so a load ``buf[e]`` in C
reads "P at x = e": the load is replaced by a copy of P's body with ``x := e``
in every index (then simplified within C's domain).  A masked load masks the
copied loads and yields 0 where the mask is off, as the load did.  A gather's load
(``buf[offset + e]``, a run-time offset) goes in when every index of P is ``x`` plus a
constant: the copied loads take the gather's offset.

Legality (else a remark): P stores each output once at ``x`` (unsupported-producer);
C reads P at a run-time offset only if P shifts with x (indirect-load), and under a mask only if P divides
no integers (masked-load: masked-off lanes see zeros).

Cost rule when C iterates as many points as P (proved with sympy), where ``cost(P)`` =
P's body ops other than stores (loads count: they are traffic):
  * P read only by C, at one index: always fuse; P disappears ("move").
  * P also read elsewhere (another kernel, an extern, the graph output) and C
    reads it at an index covering P's whole domain once (``x``, or ``rnumel*x + r``
    in a reduction): C also stores P ("materialise"), P disappears.  With ``keep-narrow``,
    not into a C that only widens P (an upcast its readers each recompute): P waits
    ("materialise-later") and is stored, narrow, by one of C's readers.
  * first, where every reader recomputing P moves fewer bytes than C storing it for the others
    and the ops fit in the time saved (``recompute_pays``: a one-hot from an iota, an upcast), or
    else if ``cost(P) <= recompute-max-ops``: C recomputes P; P stays for its other readers
    ("recompute").  Several load indices in C each recompute.
  * otherwise decline: graph-output / extern-consumer / recompute-too-expensive.
Across domains (P read through a broadcast, a slice, a cat/pad or a reshape of another
size): C recomputes P at each point that reads it when ``cost_model.recompute`` finds the
time it adds to C (beyond what C's memory traffic hides) at most ``max-recompute`` times
what it saves (P's store, C's load, P's launch, or a share of it when P has other kernel
readers); else a recompute-cost remark with the numbers.  Ops count as the instructions they
take (``cost_model.FUNCTION_INSTRUCTIONS``: a cos is ~120 adds): Llama's rotary cos and sin,
computed once over [T, D], were recomputed for every element of q and k in every layer.  P goes once its last reader
inlined it; it stays while an extern or the graph output reads it.
``cross-domain``: ``per-reader`` (the default) decides reader by reader as above, crediting each a share of P's
launch; ``per-producer`` decides once for all of P's readers whether every reader recomputes it (their added time against
P's store, all their loads and P's launch); where not, or where P must stay anyway (an extern or the graph output
reads it, or a reader may not inline it), P stays and a reader recomputes it only where its own load pays for that.  Off by default until
measured on a GPU (fp32 Llama: each of the rotary cos's 8 readers recomputes it under per-reader).
Limits on the merged kernel: ``max-ops`` body ops, ``max-inputs`` input buffers (limit).
Externs never merge: at the end, every kernel reading an extern's result gets an
extern-producer remark, every pointwise kernel feeding one an extern-consumer remark.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass

from fusec.analysis import cost_model
from fusec.analysis.cost_model import SizeHints
from fusec.base import indexing, shapes
from fusec.base.remarks import describe
from fusec.base.shapes import print_expr
from fusec.dialects import fusec as F
from fusec.dialects.attributes import tensor_type_of
from fusec.passes.kernel_index import X, covers_domain, equal
from fusec.passes.kernel_merge import (
    BodyBuilder,
    Declines,
    Graph,
    Worklist,
    body_size,
    describe_user,
    install_within_limits,
    loads_of,
    stores_by_output,
)

PASS = "vertical-fusion"
GPU_MODEL = cost_model.GPU()


@dataclass(frozen=True)
class Plan:
    mode: str  # "move" | "materialise" | "recompute"
    keep: tuple[int, ...] = ()  # producer outputs the merged kernel also stores (materialise)
    cover: sympy.Expr | None = None  # the consumer's load index that visits P's domain once


Decline = tuple[str, str]  # (remark code, message)


def _domain_text(k: F.KernelOp) -> str:
    return "[" + ", ".join(print_expr(d) for d in k.domain_exprs) + "]"


def producer_problem(p: F.KernelOp) -> Decline | None:
    """Whether P can be inlined anywhere: a pointwise kernel storing each output once at x."""
    stores = stores_by_output(p)
    if stores is None:
        return "unsupported-producer", f"{describe(p)} stores an output more than once"
    for s in stores:
        if s.mask is not None or not sympy.expand(s.index.data - X) == 0:
            where = f"[{print_expr(s.index.data)}]{' masked' if s.mask else ''}"
            return "unsupported-producer", f"{describe(p)} stores at {where}, not at [x]"
    return None


def producer_cost(p: F.KernelOp) -> int:
    """What recomputing P costs per element: its body ops other than stores."""
    return body_size(p) - len(p.outputs)


def traps_on_zero(p: F.KernelOp) -> bool:
    """Integer floordiv/remainder: a masked-off lane (all loads 0) must not run them."""
    return any(isinstance(op, F.PointwiseOp) and op.fn.data in ("floordiv", "remainder") and not F.is_float(op.result.type)
               for op in p.block.ops)


def _shifts_with_x(p: F.KernelOp) -> bool:
    """Every index in P is ``x`` plus a constant, so P at ``e + offset`` reads its inputs at ``index(e) + offset``:
    a gather of P (a run-time offset) can recompute it."""
    for op in p.block.ops:
        if isinstance(op, F.LoadOp) and (op.offset is not None or X in (op.index.data - X).free_symbols):
            return False
        if isinstance(op, F.SymbolicOp) and X in op.expr.data.free_symbols:
            return False
    return True


def legality(p: F.KernelOp, c: F.KernelOp) -> Decline | None:
    """Whether inlining P into C keeps the results: plain loads, and no integer division on masked-off lanes."""
    if c.is_matmul:
        return "matmul-consumer", f"{describe(c)} is a matmul kernel, whose operands are loaded as tiles for tl.dot"
    problem = producer_problem(p)
    if problem:
        return problem
    loads = [load for load, _ in loads_of(c, p.results)]
    if any(load.offset is not None for load in loads) and not _shifts_with_x(p):
        return "indirect-load", (f"{describe(c)} reads {describe(p)} at a run-time offset, and {describe(p)} "
                                 f"reads its inputs other than at x + a constant")
    if any(load.mask is not None for load in loads) and traps_on_zero(p):
        return "masked-load", f"{describe(c)} reads {describe(p)} under a mask, and {describe(p)} divides integers"
    return None


def same_domain(p: F.KernelOp, c: F.KernelOp) -> bool:
    """C iterates exactly as many points as P (proved with sympy): C reads P elementwise, or through a view."""
    return equal(shapes.numel(c.domain_exprs), p.domain_exprs[0])


def _recompute_ops(p: F.KernelOp, c: F.KernelOp) -> int:
    """The instructions C adds at each of its points to recompute P: P's body (a sin or an erf is many instructions)
    at each distinct index C reads it at."""
    sites = len({(load.index.data, load.mask, load.offset) for load, _ in loads_of(c, p.results)})
    return (cost_model.body_instructions(p) - len(p.outputs)) * sites


def plan_across_domains(p: F.KernelOp, c: F.KernelOp, graph: Graph, hints: SizeHints, max_recompute: float,
                        decided: dict[F.KernelOp, bool] | None = None) -> Plan | Decline:
    """P read through a broadcast, a slice or a gather: C recomputes P at each point that reads it, if
    the recomputed work costs at most ``max_recompute`` times what it saves (cost_model.recompute).
    ``decided``: the per-producer decisions (``cross-domain=per-producer``), made at P's first reader and kept."""
    users = graph.users(p)
    erased = users == [c]
    readers = len(users) if all(isinstance(u, F.KernelOp) for u in users) else 0
    ops = _recompute_ops(p, c)
    if decided is not None:
        if p not in decided and readers and all(isinstance(u, F.KernelOp) and legality(p, u) is None for u in users):
            decided[p] = _all_readers_pay(p, users, hints, max_recompute)
        if decided.get(p):  # all its readers take it in, the last one too
            return Plan("move" if erased else "recompute")
        # P stays (its readers together would not pay for it, or one cannot take it in): C recomputes it only where
        # C's own load of it pays, with no share of P's store or launch.
        erased, readers = False, 0
        stays = (" (it stays stored: its readers together would not pay for it)" if p in decided
                 else " (it stays stored for a reader that cannot take it in)")
    else:
        stays = ""
    estimate = cost_model.recompute(c, p, ops, hints, erased, readers)
    cost, gain = estimate.cost_us(GPU_MODEL), estimate.gain_us(GPU_MODEL)
    if cost <= max_recompute * gain:
        return Plan("move" if erased else "recompute")
    launch = ("a launch" if erased else f"1/{readers} of a launch" if readers else "no launch") + stays
    return "recompute-cost", (
        f"{describe(c)} over {_domain_text(c)} would recompute {describe(p)} over {_domain_text(p)} ({ops} instructions a point): "
        f"{estimate.ops} instructions more on top of its {estimate.consumer_ops} and {estimate.consumer_bytes} B, "
        f"{cost:.3g} us > max-recompute={max_recompute:g} x saving {estimate.bytes_saved} B and {launch} ({gain:.3g} us)")


def _all_readers_pay(p: F.KernelOp, users: list, hints: SizeHints, max_recompute: float) -> bool:
    """Whether every reader recomputing P costs at most ``max_recompute`` times what it saves: each reader's added
    time (``cost_model.recompute``, P kept), against P's store, every reader's load of it and P's launch."""
    estimates = [cost_model.recompute(u, p, _recompute_ops(p, u), hints, False, len(users)) for u in users]
    cost = sum(e.cost_us(GPU_MODEL) for e in estimates)
    stored = hints(p.domain_exprs[0]) * sum(cost_model.element_bytes(r.type) for r in p.results)
    gain = (sum(e.bytes_saved for e in estimates) + stored) / GPU_MODEL.bandwidth_bytes_per_us + GPU_MODEL.launch_overhead_us
    return cost <= max_recompute * gain


def plan_merge(p: F.KernelOp, c: F.KernelOp, graph: Graph, recompute_max_ops: int, keep_narrow: bool = False) -> Plan | Decline:
    """The cost rule over equal domains (see the module docstring)."""
    loads = [load for load, _ in loads_of(c, p.results)]
    sites = {(load.index.data, load.mask) for load in loads}
    others = [u for u in graph.users(p) if u is not c]
    cost = producer_cost(p)
    cheap = cost <= recompute_max_ops
    if not others:
        if len(sites) == 1 or cheap:
            return Plan("move")
        return "recompute-too-expensive", (f"{describe(c)} reads {describe(p)} at {len(sites)} indices: {cost} ops "
                                           f"each > recompute-max-ops={recompute_max_ops}")
    if recompute_pays(p, others, len(sites)):
        return Plan("recompute")
    cover = next((ld.index.data for ld in loads if ld.mask is None and covers_domain(ld.index.data, c.domain_exprs)), None)
    cycle = cover is not None and graph.reaches(p, c)
    if keep_narrow and cover is not None and not cycle and (len(sites) == 1 or cheap) and only_widens(c, graph):
        return WAIT, (f"{describe(c)} only widens what it reads and its readers will each take it in: stored there, "
                      f"{describe(p)} would be recomputed with it; it waits to be stored, narrow, by one of them")
    if cover is not None and not cycle and (len(sites) == 1 or cheap):
        keep = tuple(j for j, r in enumerate(p.results) if any(u is not c for u in graph.readers(r)))
        return Plan("materialise", keep, cover)
    if cheap:
        return Plan("recompute")
    return _must_stay(p, c, others, cover, cycle, len(sites), recompute_max_ops)


WAIT = "materialise-later"
CROSS_DOMAIN = ("per-reader", "per-producer")


def only_widens(c: F.KernelOp, graph: Graph) -> bool:
    """Whether C only loads a value, converts it to a wider float and stores it (a norm's upcast of the residual
    stream), and every reader may take it in: they will each recompute it (``recompute_pays``), and a producer
    stored by C would go with it into each, which for a sum of earlier layers' outputs means summing the residual
    stream again from the first layer in every norm (GPT-2's and Llama's inference graphs)."""
    ops = list(c.block.ops)
    if c.is_reduction or len(ops) != 3 or not isinstance(ops[0], F.LoadOp) or not isinstance(ops[2], F.StoreOp):
        return False
    widen = ops[1]
    if not (isinstance(widen, F.PointwiseOp) and widen.fn.data == "convert" and F.is_float(widen.result.type)
            and cost_model.element_bytes(ops[0].result.type) < cost_model.element_bytes(widen.result.type)):
        return False
    readers = graph.users(c)
    return bool(readers) and all(isinstance(u, F.KernelOp) and legality(c, u) is None and same_domain(c, u)
                                 for u in readers)


def recompute_pays(p: F.KernelOp, others: list, sites: int) -> bool:
    """Whether C (reading P at ``sites`` indices) and P's k other readers all recomputing P beats C storing it
    for them (``materialise``).

    Per element, storing costs P's output bytes ``b_out`` once plus k loads of them; recomputing costs the
    other readers P's own full-size loads ``b_in`` again (loads of smaller buffers, per-row statistics, stay in
    cache) and ``cost(P)`` ops in each further place it runs.  Recompute when it moves fewer bytes and its ops
    take no longer than the bytes it saves (``GPU_MODEL``'s ops per byte): a one-hot from an iota and a per-row
    target (``b_in`` 0), an upcast of bf16 to fp32 (2 < 4 bytes).  Only where every other reader is a kernel that
    may inline P (an extern or the graph output needs P stored anyway).
    """
    if not others or not all(isinstance(u, F.KernelOp) and legality(p, u) is None for u in others):
        return False
    n, k = p.domain_exprs[0], len(others)
    b_in = sum(cost_model.element_bytes(ld.buffer.type) for ld in p.block.ops
               if isinstance(ld, F.LoadOp) and not indexing.positive(n - shapes.numel(tensor_type_of(ld.buffer).dims)))
    b_out = sum(cost_model.element_bytes(r.type) for r in p.results)
    saved = b_out + k * (b_out - b_in)
    ops_per_byte = GPU_MODEL.ops_per_us / GPU_MODEL.bandwidth_bytes_per_us
    return saved > 0 and producer_cost(p) * (k + sites - 1) <= ops_per_byte * saved


def _must_stay(p: F.KernelOp, c: F.KernelOp, others: list, cover, cycle: bool, sites: int, recompute_max_ops: int) -> Decline:
    """Why P cannot go into C: what keeps P materialised, and why C can neither store nor recompute it."""
    blocker = next((u for u in others if isinstance(u, F.OutputOp)), None) or \
        next((u for u in others if isinstance(u, F.ExternOp)), others[0])
    code = ("graph-output" if isinstance(blocker, F.OutputOp) else
            "extern-consumer" if isinstance(blocker, F.ExternOp) else "recompute-too-expensive")
    why = ("depends on it through another op" if cycle else
           "reads it at an index that does not cover its domain" if cover is None else f"reads it at {sites} indices")
    return code, (f"{describe(p)} stays materialised for {describe_user(blocker)}; {describe(c)} {why}; recomputing "
                  f"costs {producer_cost(p)} ops > recompute-max-ops={recompute_max_ops}")


def _zero(t) -> float | int | bool:
    return False if t == F.BOOL else 0.0 if F.is_float(t) else 0


def inline_producer(p: F.KernelOp, c: F.KernelOp, plan: Plan, graph: Graph) -> tuple[F.KernelOp, dict[SSAValue, SSAValue]]:
    """C's body with every load of P's outputs replaced by P's body re-indexed at the load's index."""
    bb = BodyBuilder(c.domain_exprs)
    p_stores = stores_by_output(p)
    assert p_stores is not None, "the plan declined a producer that stores an output twice"
    results: list[SSAValue] = list(p.results)
    reads = {arg: results.index(v) for arg, v in zip(c.input_args, c.inputs, strict=True) if v in results}
    copies: dict[tuple, list[SSAValue]] = {}

    def producer_at(index: sympy.Expr, mask: SSAValue | None, offset: SSAValue | None = None) -> list[SSAValue]:
        if (index, mask, offset) not in copies:
            pvm: dict[SSAValue, SSAValue] = {}
            for op in p.block.ops:
                if not isinstance(op, F.StoreOp):
                    bb.clone(op, pvm, {X: index}, mask, offset)
            values = [pvm[s.value] for s in p_stores]
            if mask is not None:  # the load gave 0 where masked off
                values = [bb.add(F.PointwiseOp("where", [mask, v, bb.add(F.ConstantOp(_zero(v.type), v.type))], v.type))
                          for v in values]
            copies[(index, mask, offset)] = values
        return copies[(index, mask, offset)]

    bb.map_inputs(p)
    bb.map_inputs(c, skip=results)
    vm: dict[SSAValue, SSAValue] = {}
    outs = {arg: bb.output(arg.type, r) for arg, r in zip(c.output_args, c.results, strict=True)}
    for op in c.block.ops:
        if isinstance(op, F.LoadOp) and op.buffer in reads:
            mask, offset = (vm[v] if v is not None else None for v in (op.mask, op.offset))
            vm[op.result] = producer_at(op.index.data, mask, offset)[reads[op.buffer]]
        elif isinstance(op, F.StoreOp):
            bb.store(vm[op.value], outs[op.buffer], op.index.data, vm[op.mask] if op.mask is not None else None)
        else:
            bb.clone(op, vm, {})
    for j in plan.keep:
        bb.store(producer_at(plan.cover, None)[j], bb.output(results[j].type, results[j]), plan.cover)
    return bb.finish([p, c], number_from=c, graph=graph)


@dataclass
class VerticalFuser:
    """The worklist over one graph: each pointwise kernel tries its readers; a merge re-queues what it touched."""

    options: VerticalFusion
    graph: Graph
    hints: SizeHints

    def __post_init__(self):
        self.declines = Declines(PASS)
        self.tried: set[tuple] = set()
        self.decided: dict[F.KernelOp, bool] | None = {} if self.options.cross_domain == "per-producer" else None

    def run(self) -> None:
        work = Worklist(self.graph, [k for k in self.graph.kernels() if not k.is_reduction])
        while (p := work.pop()) is not None:
            merged = self._fuse_into_a_reader(p)
            if merged is not None:  # P (if it stays) and the producers of the merged kernel have new readers
                producers = [k for k in self.graph.producers(merged) if isinstance(k, F.KernelOp) and not k.is_reduction]
                work.add(p, merged, *producers)
        # This pass merges producers into any kernel and pointwise kernels into their consumers: those are the
        # extern boundaries it reports (reduction-fusion reports the reductions feeding externs).
        kernels = self.graph.kernels()
        self.declines.record_extern_boundaries(self.graph, kernels, [k for k in kernels if not k.is_reduction])
        self.declines.emit()

    def _fuse_into_a_reader(self, p: F.KernelOp) -> F.KernelOp | None:
        if p.is_reduction:
            return None
        readers = self.graph.users(p)
        for c in readers:
            key = (p, c, tuple(readers))  # a refusal may depend on P's other readers
            if isinstance(c, F.KernelOp) and key not in self.tried:
                self.tried.add(key)
                decision = self._decide(p, c)
                if not isinstance(decision, Plan):
                    self.declines.record(*decision, p, c)
                    if decision[0] == WAIT:  # tried again once C has gone into its readers (P's readers change)
                        return None
                    continue
                merged = install_within_limits(self.graph, self.declines, inline_producer(p, c, decision, self.graph),
                                               (p, c), anchor=c, max_ops=self.options.max_ops,
                                               max_inputs=self.options.max_inputs)
                if merged is not None:
                    return merged
        return None

    def _decide(self, p: F.KernelOp, c: F.KernelOp) -> Plan | Decline:
        return legality(p, c) or (
            plan_merge(p, c, self.graph, self.options.recompute_max_ops, self.options.keep_narrow) if same_domain(p, c)
            else plan_across_domains(p, c, self.graph, self.hints, self.options.max_recompute, self.decided))


@dataclass(frozen=True)
class VerticalFusion(ModulePass):
    """Inlines pointwise kernels into the kernels that read them (pointwise consumers and reduction prologues).

    Options: max-ops (body ops of a merged kernel), max-inputs (its input buffers),
    recompute-max-ops (the largest producer recomputed rather than kept materialised, over equal domains),
    max-recompute (over different domains: the most recomputed work may cost, as a multiple of what it saves),
    keep-narrow (a value read through an upcast that its readers recompute is stored narrow by one of them
    rather than by the upcast: ``only_widens``; off until measured on a GPU),
    cross-domain (``per-reader`` or ``per-producer``: see the module docstring).
    """

    name = PASS

    max_ops: int = 128
    max_inputs: int = 16
    recompute_max_ops: int = 8
    max_recompute: float = 1.0
    keep_narrow: bool = False
    cross_domain: str = "per-reader"

    def __post_init__(self) -> None:
        if self.cross_domain not in CROSS_DOMAIN:
            raise ValueError(f"cross-domain must be one of {', '.join(CROSS_DOMAIN)}, got {self.cross_domain!r}")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for graph in [g for g in op.walk() if isinstance(g, F.GraphOp)]:
            VerticalFuser(self, Graph(graph.block), cost_model.resolve_size_hints(graph)).run()
