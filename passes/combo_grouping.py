"""combo-grouping: independent kernels launched as one ``fusec.combo`` (horizontal fusion).

In:  graphs whose computing ops are kernels (after form-kernels and the vertical fusion passes).
Out: the same graphs with groups of independent kernels moved into ``fusec.combo`` ops.  A combo
     sits where all its inputs are available and before its first user, so the block stays in
     dominance order; it yields the results the rest of the graph uses.

Kernels are taken in graph order; each joins the first open group that accepts it, else opens a
group of its own.  A group accepts a kernel when, in order of the checks (the remark code names
the first that fails):

* ``dependence``: no dependence path (through kernels, externs, views, groups formed so far) links
  the kernel to a member, and no collective or wait (fusec.analysis.collectives) lies between them:
  a combo stays between the same two collectives as its members;
* ``reduction-length-class``: long reductions (rnumel hint > ``long-reduction-rnumel``) and short
  ones stay apart (``pointwise-reduction-mix`` when ``mix-pointwise-reductions`` is off);
* ``limit-max-subkernels`` / ``limit-max-args``: at most ``max-subkernels`` members and
  ``max-args`` pointer + size arguments in the combined kernel;
* ``placement``: some position lies after every input of the group and before every user;
* ``not-profitable``: the cost model (fusec.analysis.cost_model) says the launch saved outweighs the tail;
* ``peak-memory``: peak memory never grows, for any sizes.  Liveness is by position in the block
  (fusec.analysis.liveness).  At the chosen position every moment of the new order must hold a subset of
  the buffers of a moment of the old order between the moved positions (no buffer's live range
  grew over another op, and the combo's moment holds no more than one old moment did); else its
  byte count, an expression over the size symbols, must be provably at most that of some old
  moment for every size in the symbols' bounds (``liveness.provably_at_most``; exact for static
  shapes).

Pointwise kernels whose xnumel hint exceeds ``large-pointwise-numel`` stay alone (``large-pointwise``).
Every kernel left alone after trying a group gets a remark with the reason of the group it came
closest to joining.  Sizes come from ``size-hints`` ("s0=1024"), else the symbol's declared lower
bound when above 1, else ``cost_model.DEFAULT_SIZE_HINT`` (listed under ``defaulted_size_hints``
in the remarks' data).  ``sm-count`` is the GPU's multiprocessor count.  ``benchmark`` times each
group both ways on the GPU and keeps the faster; without a CUDA device it is skipped (remark
``benchmark-skipped``) and the cost model's decision stands.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, Region
from xdsl.passes import ModulePass

from fusec.analysis import collectives, timing
from fusec.analysis.cost_model import (
    GPU,
    SizeHints,
    combo_arg_count,
    join_gain_us,
    kernel_cost,
    kernel_size_symbols,
    parse_size_hints,
    resolve_size_hints,
)
from fusec.analysis.liveness import moment_bytes, op_step, provably_at_most
from fusec.base import remarks
from fusec.dialects import fusec as F
from fusec.passes.combo_schedule import Node, Schedule, graph_level, operands_of

# Refusal codes, in the order the checks run: a later code means the kernel came closer to joining.
CHECKS = ("dependence", "reduction-length-class", "pointwise-reduction-mix", "limit-max-subkernels",
          "limit-max-args", "placement", "not-profitable", "peak-memory")
# How many of the old order's heaviest moments a new moment is compared with, byte for byte.
BYTE_COMPARISONS = 8


@dataclass(frozen=True)
class Refusal:
    code: str
    message: str
    data: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ComboGrouping(ModulePass):
    """Groups independent kernels into fusec.combo ops, each launched as one kernel."""

    name = "combo-grouping"

    max_subkernels: int = 8
    max_args: int = 64
    large_pointwise_numel: int = 51_200_000
    long_reduction_rnumel: int = 2048
    mix_pointwise_reductions: bool = True
    sm_count: int = 132
    size_hints: tuple[str, ...] = ()
    benchmark: bool = False

    def __post_init__(self) -> None:
        parse_size_hints(self.size_hints)  # a malformed hint is the user's error: one clear message
        if self.max_subkernels < 1 or self.max_args < 1 or self.sm_count < 1:
            raise ValueError("max-subkernels, max-args and sm-count must be positive")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        combos = sum(1 for o in op.walk() if isinstance(o, F.ComboOp))
        for graph in [g for g in op.walk() if isinstance(g, F.GraphOp)]:
            combos = _GraphGrouper(self, graph).run(combos)


class _GraphGrouper:
    def __init__(self, options: ComboGrouping, graph: F.GraphOp):
        self.o = options
        self.graph = graph
        self.hints: SizeHints = resolve_size_hints(graph, parse_size_hints(options.size_hints))
        self.gpu = GPU(sm_count=options.sm_count)
        self.lower_bounds = {name: sym.lower.data for name, sym in graph.declared_symbols.items()}
        self.schedule = Schedule(graph)
        # Def-use reachability of the graph's own ops (grouping never changes it): one bit per op, ancestors
        # as Python ints in topological order, so naming the member a kernel depends on is a bit test.
        self.op_index = dict(self.schedule.node_at)  # frozen: the schedule's own map follows its groups
        self.op_ancestors = list(self.schedule.ancestors)
        self.has_collectives = any(collectives.is_ordered(op) for op in graph.block.ops)
        self.static_sizes = not graph.declared_symbols  # byte counts at the hints are then exact ints
        self._size_symbols = functools.cache(kernel_size_symbols)  # grouping moves kernels, never changes their bodies

    # ------------------------------------------------------------ the greedy loop

    def run(self, combo_count: int) -> int:
        groups: list[Node] = []
        attempts: dict[F.KernelOp, list[tuple[Node, Refusal]]] = {}
        # A matmul kernel's programs are tiles of its product, launched with its own warps: it runs alone.
        kernels = [n for n in self.schedule.nodes if isinstance(n.ops[0], F.KernelOp) and not n.ops[0].is_matmul]
        for node in kernels:
            kernel = node.ops[0]
            assert isinstance(kernel, F.KernelOp)
            node.costs, node.classes = [kernel_cost(kernel, self.hints)], {self._length_class(kernel)}
            if self._is_large_pointwise(kernel):
                self._remark_large(node, kernels)
                continue
            tried = attempts.setdefault(kernel, [])
            for i, group in enumerate(groups):
                joined = self._try_join(group, node)
                if isinstance(joined, Node):
                    groups[i] = joined
                    break
                tried.append((group, joined))
            else:
                node.is_group = True
                groups.append(node)
        groups = [g for g in self.schedule.nodes if g.is_group]
        for group in groups:
            if len(group.ops) > 1 and self._benchmark_verdict(group) is False:
                self._split(group)
        for kernel, tried in attempts.items():
            if tried and not self._in_combo(kernel):
                self._remark_left_out(kernel, tried)
        return self._rewrite(combo_count)

    def _in_combo(self, kernel: F.KernelOp) -> bool:
        node = next(n for n in self.schedule.nodes if kernel in n.ops)
        return len(node.ops) > 1

    # ------------------------------------------------------------ checks

    def _linked(self, a: Operation, b: Operation) -> bool:
        """Whether a def-use path links ``a`` and ``b`` either way (``combo_schedule.depends``, precomputed)."""
        i, j = self.op_index[id(a)], self.op_index[id(b)]
        return bool(self.op_ancestors[i] >> j & 1 or self.op_ancestors[j] >> i & 1)

    def _length_class(self, kernel: F.KernelOp) -> str:
        if not kernel.is_reduction:
            return "pointwise"
        return "long-reduction" if self.hints(kernel.domain_exprs[1]) > self.o.long_reduction_rnumel else "short-reduction"

    def _is_large_pointwise(self, kernel: F.KernelOp) -> bool:
        return not kernel.is_reduction and self.hints(kernel.domain_exprs[0]) > self.o.large_pointwise_numel

    def _try_join(self, group: Node, node: Node) -> Node | Refusal:
        """Moves ``node`` into ``group`` and returns the merged node, or says why not."""
        members = [k.sym_name.data for k in _kernels(group)]
        if self.schedule.related(group, node):
            direct = [k.sym_name.data for k in _kernels(group) if self._linked(k, node.ops[0])]
            why = f"@{direct[0]}" if direct else f"the group {members} (through a dependence of another member)"
            return Refusal("dependence", f"a dependence path links it to {why}")
        if (barrier := self._collective_between(group, node)) is not None:
            return Refusal("dependence", f"the collective {barrier} lies between it and {members}: no combo crosses a collective")
        (cls,) = node.classes
        reductions = {c for c in group.classes | node.classes if c != "pointwise"}
        if len(reductions) > 1:
            return Refusal("reduction-length-class", f"a {cls} does not join a group of {'/'.join(sorted(group.classes))} {members}",
                           {"long_reduction_rnumel": self.o.long_reduction_rnumel})
        if not self.o.mix_pointwise_reductions and len(group.classes | node.classes) > 1:
            return Refusal("pointwise-reduction-mix", f"a {cls} does not join a group of {'/'.join(sorted(group.classes))} {members}")
        if len(group.ops) >= self.o.max_subkernels:
            return Refusal("limit-max-subkernels", f"the group {members} already has max-subkernels={self.o.max_subkernels} kernels")
        args = combo_arg_count(_kernels(group) + _kernels(node), self._size_symbols)
        if args > self.o.max_args:
            return Refusal("limit-max-args", f"the combined kernel would take {args} arguments > max-args={self.o.max_args}",
                           {"args": args})
        merged = Node(group.ops + node.ops, group.step | node.step, group.costs + node.costs, group.classes | node.classes, True)
        window = self._placement_window(group, node, merged)
        if window is None:
            return Refusal("placement", f"no position lies after all inputs and before all users of {members} and it")
        gain = join_gain_us(group.costs, node.costs[0], self.gpu)
        if gain <= 0:
            return Refusal("not-profitable", f"the cost model estimates a loss of {-gain:.2f} us joining {members}",
                           {"gain_us": gain})
        order = self._memory_safe_order(group, node, merged, window)
        if order is None:
            return Refusal("peak-memory", f"grouping with {members} would make some buffer live longer and peak memory grow")
        self.schedule.nodes = order
        self.schedule.refresh()
        return merged

    def _placement_window(self, group: Node, node: Node, merged: Node) -> tuple[list[Node], int, int] | None:
        """The order without the two nodes, and the slots (lo, hi] where the merged node may go."""
        pa, pb = self.schedule.position[id(group)], self.schedule.position[id(node)]
        nodes, (first, second) = self.schedule.nodes, sorted((pa, pb))
        reduced = nodes[:first] + nodes[first + 1:second] + nodes[second + 1:]  # slices: no test of every node
        node_at = self.schedule.node_at

        def slot_of(op: Operation) -> int | None:  # its node's index in ``reduced``, None outside it
            i = node_at.get(id(op))
            return None if i is None or i in (pa, pb) else i - (i > pa) - (i > pb)

        owners = [slot_of(v.owner) for v in operands_of(merged.ops) if isinstance(v.owner, Operation)]
        lo = max((i for i in owners if i is not None), default=-1)
        users = [slot_of(graph_level(u.operation, self.graph)) for op in merged.ops for r in op.results for u in r.uses]
        hi = min((i for i in users if i is not None), default=len(reduced))
        if not self.has_collectives:
            return (reduced, lo, hi) if lo < hi else None
        # The members lie between the same two collectives (see _try_join): so does the combo.
        ordered = [i for i, n in enumerate(reduced) if any(collectives.is_ordered(op) for op in n.ops)]
        before = sum(1 for n in self.schedule.nodes[:pa] if any(collectives.is_ordered(op) for op in n.ops))
        if before:
            lo = max(lo, ordered[before - 1])
        if before < len(ordered):
            hi = min(hi, ordered[before])
        return (reduced, lo, hi) if lo < hi else None

    def _collective_between(self, group: Node, node: Node) -> str | None:
        """The target of a collective or wait between the two nodes' positions, if any."""
        if not self.has_collectives:
            return None
        a, b = sorted((self.schedule.position[id(group)], self.schedule.position[id(node)]))
        for n in self.schedule.nodes[a + 1:b]:
            for op in n.ops:
                if collectives.is_ordered(op):
                    assert isinstance(op, F.ExternOp)
                    return op.target.data
        return None

    def _memory_safe_order(self, group: Node, node: Node, merged: Node, window) -> list[Node] | None:
        """The order with the merged node at a slot where peak memory cannot grow, or None.

        Slots tried: where either node was, right after the inputs, right before the first user;
        one where every moment holds a subset of an old moment's buffers wins over one that needs
        the symbolic byte comparison; ties go to the latest slot.
        """
        reduced, lo, hi = window
        pa, pb = self.schedule.position[id(group)], self.schedule.position[id(node)]
        slots = sorted((s for s in {pa - (pb < pa), pb - (pa < pb), lo + 1, hi} if lo < s <= hi), reverse=True)
        fallback = None
        for s in slots:
            order = reduced[:s] + [merged] + reduced[s:]
            q = self.schedule.old_position(s, pa, pb)
            verdict = self._moments_bounded(order, merged, (pa, pb, q), s)
            if verdict == "contained":
                return order
            if verdict == "bytes" and fallback is None:
                fallback = order
        return fallback

    def _moments_bounded(self, order: list[Node], merged: Node, moved: tuple[int, int, int], slot: int) -> str | None:
        """Whether each changed moment of the new order holds no more than some moment of the old one.

        "contained": every changed moment's live set is a subset of an old live set between the moved
        positions (no live range grew over another op), true for all sizes.  "bytes": some moment needed
        the byte comparison ``liveness.provably_at_most`` against an old moment, for all sizes in the
        symbols' bounds.  None: neither could be shown.
        """
        sched = self.schedule
        old_lo = min(moved)
        old_hi = min(max(moved), len(sched.nodes) - 1) + 1
        old_live = sched.live(old_lo, old_hi)
        new_live = sched.live_after_move(moved[0], moved[1], merged, slot, old_lo, old_hi - 1)
        verdict = "contained"
        for i, live in enumerate(new_live):
            n = order[old_lo + i]
            if n is not merged and live & ~old_live[sched.position[id(n)] - old_lo] == 0:
                continue
            if self.static_sizes:  # a subset of an old moment never outweighs the fullest one: bytes first, the scan only
                if not self._bytes_bounded(live):  # while "contained" is still possible
                    return None
                if verdict == "contained" and not any(live & ~w == 0 for w in old_live):
                    verdict = "bytes"
                continue
            if any(live & ~w == 0 for w in old_live):
                continue
            if not self._bytes_bounded(live):
                return None
            verdict = "bytes"
        return verdict

    def _bytes_bounded(self, live: int) -> bool:
        """Whether the buffers in ``live`` provably take no more bytes than one of the old order's fullest moments."""
        if self.static_sizes:
            return self.schedule.hinted_bytes(live, self.hints) <= self.schedule.heaviest_bytes(self.hints)
        new = moment_bytes(self.schedule.buffers(live))
        for old in self.schedule.heaviest_moments(self.hints, BYTE_COMPARISONS):
            if provably_at_most(new, old, self.lower_bounds):
                return True
        return False

    # ------------------------------------------------------------ benchmark hook

    def _benchmark_verdict(self, group: Node) -> bool | None:
        """True/False: the combo was timed faster/slower than its kernels alone; None: not timed."""
        if not self.o.benchmark:
            return None
        kernels = _kernels(group)
        if not cuda_available():
            remarks.emit(self.o.name, "benchmark-skipped", "no CUDA device: the cost model's grouping stands",
                         *kernels, **self.hints.remark_data())
            return None
        timer = benchmark_timer()
        if timer is None:
            remarks.emit(self.o.name, "benchmark-skipped", "no kernel timer is registered (fusec's runtime is not loaded): "
                         "the cost model's grouping stands", *kernels, **self.hints.remark_data())
            return None
        separate_us, combo_us = timer(kernels, self.hints)
        if combo_us < separate_us:
            return True
        remarks.emit(self.o.name, "benchmark-slower", f"the combo took {combo_us:.2f} us, its kernels alone {separate_us:.2f} us",
                     *kernels, separate_us=separate_us, combo_us=combo_us)
        return False

    def _split(self, group: Node) -> None:
        # Launched one after another at the group's position: each moment holds a subset of the group's.
        i = self.schedule.position[id(group)]
        singles = [Node([k], op_step(k)) for k in group.ops]
        self.schedule.nodes[i:i + 1] = singles
        self.schedule.refresh()

    # ------------------------------------------------------------ remarks

    def _remark_large(self, node: Node, kernels: list[Node]) -> None:
        kernel = node.ops[0]
        assert isinstance(kernel, F.KernelOp)
        # By op (the reachability grouping never changes): the nodes in ``kernels`` may already sit in groups.
        if any(k.ops[0] is not kernel and not self._linked(k.ops[0], kernel) for k in kernels):
            numel = self.hints(kernel.domain_exprs[0])
            remarks.emit(self.o.name, "large-pointwise",
                         f"xnumel hint {numel} > large-pointwise-numel={self.o.large_pointwise_numel}: launched alone",
                         kernel, xnumel=numel, **self.hints.remark_data())

    def _remark_left_out(self, kernel: F.KernelOp, tried: list[tuple[Node, Refusal]]) -> None:
        _, closest = max(tried, key=lambda t: CHECKS.index(t[1].code))
        remarks.emit(self.o.name, closest.code, closest.message, kernel, **closest.data, **self.hints.remark_data())

    # ------------------------------------------------------------ IR

    def _rewrite(self, combo_count: int) -> int:
        block = self.graph.block
        terminator = self.graph.output_op
        for node in self.schedule.nodes:
            for op in node.ops:
                op.detach()
        for node in self.schedule.nodes:
            if len(node.ops) > 1:
                block.insert_op_before(make_combo(f"fusec_combo_{combo_count}", _kernels(node)), terminator)
                combo_count += 1
            else:
                block.insert_op_before(node.ops[0], terminator)
        return combo_count


def _kernels(node: Node) -> list[F.KernelOp]:
    """The ops of a node that groups kernels (the grouper joins kernel nodes only)."""
    kernels = [op for op in node.ops if isinstance(op, F.KernelOp)]
    assert len(kernels) == len(node.ops), "a group holds kernels only"
    return kernels


def make_combo(name: str, kernels: Sequence[F.KernelOp]) -> F.ComboOp:
    """A combo of detached kernels; uses of their results outside it move to the combo's results."""
    yielded = [r for k in kernels for r in k.results if r.uses]
    out = F.OutputOp(yielded)
    body = Block()
    body.add_ops([*kernels, out])
    combo = F.ComboOp(name, [r.type for r in yielded], Region(body))
    for r, new in zip(yielded, combo.outputs, strict=True):
        r.replace_uses_with_if(new, lambda use: use.operation is not out)
    return combo


# ---------------------------------------------------------------- benchmarking, behind two seams

def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def benchmark_timer() -> timing.GroupTimer | None:
    """The function timing kernels alone and as one combo, (separate_us, combo_us): the pipeline driver registers it."""
    return timing.group_timer()
