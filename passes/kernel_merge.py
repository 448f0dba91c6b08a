"""Merging fusec.kernel ops: build the merged body, put it in the graph, name it, explain refusals.

Shared by vertical-fusion and reduction-fusion; each pass decides *what* to merge,
this module does the mechanics:

* ``BodyBuilder`` clones ops of the kernels being merged into one new body,
  substituting the iteration variables in every index (``fusec.load`` index,
  ``fusec.symbolic`` expression) and optionally masking the cloned loads.
* ``BodyBuilder.finish`` names the kernel (``merged_name``) after the ops its body
  still computes once CSE and dead-op removal have run.
* ``install_within_limits`` puts the merged kernel into the graph (``Graph.install``:
  redirects the old results, erases what became dead, restores a topological order),
  or records a ``limit`` decline when it is past ``max-ops``/``max-inputs``.
* ``reaches`` answers "would this merge create a cycle?"; ``Declines`` turns the
  refusals that still stand at the end of a pass into remarks, and records the
  boundaries with externs (extern-producer, extern-consumer), which never merge.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import sympy
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.traits import IsTerminator, MemoryEffect, NoMemoryEffect, SymbolOpInterface
from xdsl.transforms.common_subexpression_elimination import cse
from xdsl.transforms.dead_code_elimination import region_dce

from fusec.analysis import collectives
from fusec.base import remarks
from fusec.base.remarks import describe
from fusec.dialects import fusec as F
from fusec.passes.kernel_index import substitute

# ---------------------------------------------------------------- kernel bodies


def body_size(kernel: F.KernelOp) -> int:
    """The number of ops in a kernel body (loads, arithmetic, reductions and stores)."""
    return len(kernel.block.ops)


def stores_by_output(kernel: F.KernelOp) -> list[F.StoreOp] | None:
    """The one store into each output buffer, in output order; None when an output has several."""
    found = []
    for arg in kernel.output_args:
        stores = [u.operation for u in arg.uses if isinstance(u.operation, F.StoreOp)]
        if len(stores) != 1:
            return None
        found.append(stores[0])
    return found


def loads_of(kernel: F.KernelOp, values: Iterable[SSAValue]) -> list[tuple[F.LoadOp, SSAValue]]:
    """(load, graph value it reads) for every load in ``kernel`` of one of ``values``."""
    wanted = set(values)
    out = []
    for arg, operand in zip(kernel.input_args, kernel.inputs, strict=True):
        if operand in wanted:
            out += [(u.operation, operand) for u in arg.uses if isinstance(u.operation, F.LoadOp)]
    return sorted(out, key=lambda lv: kernel.block.get_operation_index(lv[0]))


class BodyBuilder:
    """Collects the inputs, ops, outputs and stores of a merged kernel."""

    def __init__(self, domain: Sequence[sympy.Expr]):
        self.domain = list(domain)
        self.block = Block()
        self.inputs: list[SSAValue] = []
        self.outputs: list[tuple[Attribute, SSAValue | None]] = []  # (buffer type, old graph value it replaces)
        self.stores: list[tuple[SSAValue, int, sympy.Expr, SSAValue | None]] = []
        self.sources: dict[SSAValue, SSAValue] = {}  # a merged kernel's body argument -> the graph value it is

    def buffer(self, graph_value: SSAValue) -> SSAValue:
        """The block argument for an input buffer (one per distinct graph value)."""
        if graph_value not in self.inputs:
            self.inputs.append(graph_value)
            self.block.insert_arg(graph_value.type, len(self.inputs) - 1)
        return self.block.args[self.inputs.index(graph_value)]

    def map_inputs(self, kernel: F.KernelOp, skip: Iterable[SSAValue] = ()) -> None:
        """Make ``kernel``'s input buffers (except ``skip``) available to cloned loads."""
        skipped = set(skip)
        self.sources.update((arg, v) for arg, v in zip(kernel.input_args, kernel.inputs, strict=True) if v not in skipped)

    def add(self, op: Operation) -> SSAValue:
        self.block.add_op(op)
        return op.results[0]

    def both(self, a: SSAValue | None, b: SSAValue | None) -> SSAValue | None:
        if a is None or b is None:
            return a if b is None else b
        return self.add(F.PointwiseOp("logical_and", [a, b], F.BOOL))

    def clone(self, op: Operation, vm: dict[SSAValue, SSAValue], mapping: dict, mask: SSAValue | None = None,
              offset: SSAValue | None = None) -> None:
        """Clone a non-store body op; ``mapping`` re-indexes it, ``mask`` guards its loads, ``offset`` (a gather's
        run-time offset) shifts loads that have none of their own."""
        if isinstance(op, F.LoadOp):
            index = substitute(op.index.data, mapping, self.domain)
            own = vm[op.mask] if op.mask is not None else None
            offset = vm[op.offset] if op.offset is not None else offset
            buffer = self.buffer(self.sources[op.buffer])  # inputs in first-load order
            new: Operation = F.LoadOp(buffer, index, self.both(mask, own), offset)
        elif isinstance(op, F.SymbolicOp):
            new = F.SymbolicOp(substitute(op.expr.data, mapping, self.domain), op.result.type)
        else:  # body ops have no regions: the cheaper of xDSL's two clones
            new = op.clone_without_regions(value_mapper=vm)
        self.block.add_op(new)
        vm.update(zip(op.results, new.results, strict=True))

    def output(self, out_type: Attribute, replaces: SSAValue | None = None) -> int:
        """A new output buffer; ``replaces`` is the old graph value it stands for."""
        self.outputs.append((out_type, replaces))
        return len(self.outputs) - 1

    def store(self, value: SSAValue, output: int, index: sympy.Expr, mask: SSAValue | None = None) -> None:
        self.stores.append((value, output, index, mask))

    def kernel(self, name: Callable[[Block], str]) -> F.KernelOp:
        """The kernel built: the stores added, CSE'd, dead ops and unread input buffers removed, named by ``name``
        after its final body."""
        outs = [self.block.insert_arg(t, len(self.block.args)) for t, _ in self.outputs]
        self.block.add_ops(F.StoreOp(v, outs[j], index, mask) for v, j, index, mask in self.stores)
        region = Region(self.block)
        simplify_body(region)
        for i in reversed(range(len(self.inputs))):  # buffers whose loads all went away
            if not self.block.args[i].uses:
                self.block.erase_arg(self.block.args[i])
                del self.inputs[i]
        return F.KernelOp(name(self.block), self.domain, self.inputs, [t for t, _ in self.outputs], region)

    def finish(self, merged: Sequence[F.KernelOp], number_from: F.KernelOp,
               graph: Graph) -> tuple[F.KernelOp, dict[SSAValue, SSAValue]]:
        """The kernel merging ``merged`` (CSE'd, dead ops removed, named after what is left) and old graph value -> new result."""
        kernel = self.kernel(lambda body: merged_name(merged, body, self.domain, number_from, graph))
        replaced: dict[SSAValue, SSAValue] = {old: new for (_, old), new in zip(self.outputs, kernel.outputs, strict=True)
                                              if old is not None}
        return kernel, replaced


def simplify_body(region: Region) -> None:
    """xDSL's ``cse`` then ``region_dce`` on a merged kernel's body, with the same result, op for op.

    Merging (and split-reductions) calls this for every kernel it builds, and xDSL's general drivers (an effects
    query, a structural hash of every attribute and a liveness fixpoint for every op) were about a third of
    vertical-fusion's time on GPT-2's backward graph, five times what this takes.  A body is one block of
    region-free ops, each pure or of unknown effects (a store), which neither driver touches: there CSE is a table
    of ops by what they read, and dead ops go in one backward sweep.
    Any other body (an op that only reads memory, one with regions) takes xDSL's drivers."""
    block = region.blocks[0] if len(region.blocks) == 1 else None
    kinds = [_effect_kind(op) for op in block.ops] if block is not None else [None]
    if block is None or None in kinds:
        cse(region)
        region_dce(region)
        return
    _cse_pure_ops(block, kinds)
    _erase_dead_pure_ops(block)


def _cse_pure_ops(block: Block, kinds: Sequence[str | None]) -> None:
    """xDSL's ``cse`` on one block of pure and opaque ops: in block order, a pure op with no uses goes (and is not
    remembered), one equal to an earlier remembered op (name, operands, result types, attributes, properties) gives
    its uses to that op and goes; opaque ops stay.  Erased at the end, as xDSL does."""
    known: dict[tuple, list[Operation]] = {}
    erase: list[Operation] = []
    for op, kind in zip(block.ops, kinds, strict=True):
        if kind != "pure":
            continue
        if all(r.first_use is None for r in op.results):
            erase.append(op)
            continue
        same = known.setdefault((op.name, tuple(op.operands), op.result_types), [])
        existing = next((e for e in same if e.properties == op.properties and e.attributes == op.attributes), None)
        if existing is None:
            same.append(op)
            continue
        for old, new in zip(op.results, existing.results, strict=True):
            old.replace_all_uses_with(new)
        erase.append(op)
    for op in erase:
        block.erase_op(op)


def _erase_dead_pure_ops(block: Block) -> None:
    """xDSL's ``region_dce`` on one block of pure and opaque ops: last op first, a pure op none of whose results is
    read any more goes (its readers, later in the block, have gone before it if they were dead)."""
    op = block.last_op
    while op is not None:
        prev = op.prev_op
        if _effect_kind(op) == "pure" and all(r.first_use is None for r in op.results):
            block.erase_op(op, safe_erase=False)
        op = prev


def _effect_kind(op: Operation) -> str | None:
    """"pure": what xDSL's CSE may merge and its DCE may erase; "opaque": what both leave alone; None: anything
    else (an op with regions included)."""
    return None if op.regions else _class_effect_kind(type(op))


@functools.cache
def _class_effect_kind(cls: type[Operation]) -> str | None:
    """Per op class, as traits are: "pure" where every memory-effect trait says none (and it is no terminator or
    symbol, which xDSL keeps), "opaque" where it has none at all (unknown effects), None otherwise."""
    effects = [t for t in cls.traits if isinstance(t, MemoryEffect)]
    if not effects:
        return "opaque"
    special = cls.has_trait(IsTerminator) or cls.has_trait(SymbolOpInterface)
    return "pure" if all(isinstance(t, NoMemoryEffect) for t in effects) and not special else None


def discard(kernel: F.KernelOp) -> None:
    """Drop a merged kernel that was built but not used (it holds uses of graph values)."""
    kernel.erase(safe_erase=False)


def limit_problem(kernel: F.KernelOp, max_ops: int, max_inputs: int) -> str | None:
    if body_size(kernel) > max_ops:
        return f"max-ops={max_ops} exceeded ({body_size(kernel)})"
    if len(kernel.inputs) > max_inputs:
        return f"max-inputs={max_inputs} exceeded ({len(kernel.inputs)})"
    return None


# ---------------------------------------------------------------- the graph

VIEWS = F.VIEW_OPS  # run as torch views between kernels and externs


class Graph:
    """A graph block and the questions merging asks of it; op positions and kernel names are kept up to date."""

    def __init__(self, block: Block):
        self.block = block
        self._pos: dict[Operation, float] | None = None
        self._names: set[str] | None = None

    @property
    def pos(self) -> dict[Operation, float]:
        if self._pos is None:
            self._pos = {op: float(i) for i, op in enumerate(self.block.ops)}
        return self._pos

    def top(self, op: Operation) -> Operation | None:
        return self.block.find_ancestor_op_in_block(op)

    def kernels(self) -> list[F.KernelOp]:
        return [op for op in self.block.ops if isinstance(op, F.KernelOp)]

    def producers(self, op: Operation) -> set[Operation]:
        """Ops of the block whose results ``op`` (or anything nested in it) reads."""
        found = set()
        # A kernel is isolated from above: only its own operands read graph values.
        for inner in ([op] if isinstance(op, F.KernelOp) else op.walk()):
            for v in inner.operands:
                if isinstance(v.owner, Operation):
                    top = self.top(v.owner)
                    if top is not None and top is not op:
                        found.add(top)
        return found

    def readers(self, value: SSAValue) -> list[Operation]:
        """Ops of the block that read ``value``, each once."""
        found: list[Operation] = []
        for use in value.uses:
            top = self.top(use.operation)
            if top is not None and top not in found:
                found.append(top)
        return found

    def source(self, value: SSAValue) -> Operation | None:
        """The op of the block whose result ``value`` is, or views: a kernel, combo or extern; None for graph inputs."""
        while isinstance(value.owner, Operation):
            top = self.top(value.owner)
            if not isinstance(top, VIEWS):
                return top
            value = top.input
        return None

    def consumers(self, op: Operation) -> list[Operation]:
        """Like ``users``, but through views: the ops that read ``op``'s results or views of them."""
        found: list[Operation] = []
        frontier = self.users(op)
        while frontier:
            u = frontier.pop(0)
            if isinstance(u, VIEWS):
                frontier += self.users(u)
            elif u not in found:
                found.append(u)
        return found

    def users(self, op: Operation) -> list[Operation]:
        """Ops of the block that read a result of ``op``, in block order, each once."""
        found = {u for r in op.results for u in self.readers(r)}
        return sorted(found, key=self.pos.__getitem__)

    def reaches(self, src: Operation, dst: Operation) -> bool:
        """Whether ``dst`` depends on ``src`` through some other op (merging them would make a cycle)."""
        start = self.pos[src]
        frontier = [p for p in self.producers(dst) if p is not src and self.pos[p] > start]
        seen = set(frontier)
        while frontier:
            for p in self.producers(frontier.pop()):
                if p is src:
                    return True
                if p not in seen and self.pos[p] > start:  # an op before src cannot depend on it
                    seen.add(p)
                    frontier.append(p)
        return False

    def names(self) -> set[str]:
        """The kernel names in the graph (combo members too); kept up to date by ``install``, the one way merging
        adds and removes kernels, rather than collected anew for every merged kernel's name."""
        if self._names is None:
            kernels = [op for op in self.block.ops if isinstance(op, F.KernelOp)]
            kernels += [k for op in self.block.ops if isinstance(op, F.ComboOp) for k in op.kernels]
            self._names = {k.sym_name.data for k in kernels}
        return self._names

    def insert(self, op: Operation, anchor: Operation) -> None:
        """Insert ``op`` (one that reads only what precedes ``anchor``) before ``anchor``."""
        self.block.insert_op_before(op, anchor)
        self._place(op, anchor)

    def erase(self, op: Operation) -> None:
        """Erase ``op``, which nothing reads any more."""
        self.block.erase_op(op)
        if self._pos is not None:
            del self._pos[op]

    def install(self, kernel: F.KernelOp, replaced: dict[SSAValue, SSAValue], old: Sequence[F.KernelOp],
                anchor: Operation) -> None:
        """Insert ``kernel`` before ``anchor``, redirect ``replaced``, erase dead ``old`` kernels, re-sort if needed."""
        self.block.insert_op_before(kernel, anchor)
        self._place(kernel, anchor)
        for old_value, new_value in replaced.items():
            old_value.replace_all_uses_with(new_value)
        dead = list(old)
        while dead:  # erase readers before the kernels they read
            k = next((k for k in dead if all(not r.uses for r in k.results)), None)
            if k is None:
                break
            self.block.erase_op(k)
            dead.remove(k)
            if self._names is not None:
                self._names.discard(k.sym_name.data)
            if self._pos is not None:
                del self._pos[k]
        if self._names is not None:  # after the erased ones: the merged kernel may take the name of one
            self._names.add(kernel.sym_name.data)
        # Readers of the replaced values that sat before the anchor must move after the kernel: only the ops from
        # the first of them to the kernel can be out of order (the rest of the block was sorted), so only they move.
        early = [u for r in kernel.results for u in self.readers(r) if self.pos[u] < self.pos[kernel]]
        if early:
            self._topo_sort(min(early, key=self.pos.__getitem__), kernel)

    def _place(self, kernel: Operation, anchor: Operation) -> None:
        """Give ``kernel``, just inserted before ``anchor``, a position between its neighbours' (positions only
        order ops), so that a merge does not renumber the whole block; renumbered where no number lies between."""
        if self._pos is None:
            return
        prev = kernel.prev_op
        lo, hi = (self._pos.get(prev) if prev is not None else -1.0), self._pos.get(anchor)
        if lo is not None and hi is not None and lo < (lo + hi) / 2 < hi:
            self._pos[kernel] = (lo + hi) / 2
        else:  # an op placed some other way, or no number left between: number the block anew
            self._pos = None

    def _topo_sort(self, first: Operation, last: Operation) -> None:
        """Reorder the ops from ``first`` to ``last`` so every op follows what it reads, keeping the old order where
        free; the ops outside the span are in order already and keep their places."""
        ops = [first]
        while ops[-1] is not last:
            nxt = ops[-1].next_op
            assert nxt is not None, "the span's last op follows its first"
            ops.append(nxt)
        after = last.next_op
        pos = {op: i for i, op in enumerate(ops)}
        deps = {op: {p for p in self.producers(op) if p in pos} for op in ops}
        ordered = [op for op in ops if collectives.is_ordered(op)]
        for earlier, later in itertools.pairwise(ordered):  # collectives keep the graph's order on every rank
            deps[later] = {*deps[later], earlier}
        waiting = {op: len(d) for op, d in deps.items()}
        readers: dict[Operation, list[Operation]] = {op: [] for op in ops}
        for op, d in deps.items():
            for p in d:
                readers[p].append(op)
        ready = [(pos[op], op) for op in ops if waiting[op] == 0]
        heapq.heapify(ready)
        order = []
        while ready:
            _, op = heapq.heappop(ready)
            order.append(op)
            for reader in readers[op]:
                waiting[reader] -= 1
                if waiting[reader] == 0:
                    heapq.heappush(ready, (pos[reader], reader))
        assert len(order) == len(ops), "a merge created a dependence cycle"
        for op in ops:
            self.block.detach_op(op)
        if after is None:
            self.block.add_ops(order)
        else:
            self.block.insert_ops_before(order, after)
        self._pos = None


class Worklist:
    """Kernels to visit, earliest in the block first; a merge re-queues the kernels it affects.

    A heap by ``Graph.pos``, not a scan of every queued kernel at each pop: an op keeps its position until the
    graph renumbers the block (a new dict), and then the heap is built anew.
    """

    def __init__(self, graph: Graph, kernels: Iterable[F.KernelOp]):
        self.graph = graph
        self.queued: set[F.KernelOp] = set()
        self._pending: list[F.KernelOp] = []  # queued since the last pop, not yet in the heap
        self._heap: list[tuple[float, int, F.KernelOp]] = []
        self._numbering: dict[Operation, float] | None = None  # the positions the heap is ordered by
        self._count = itertools.count()  # positions are distinct; this only keeps ops out of the comparison
        self.add(*kernels)

    def add(self, *kernels: Operation) -> None:
        for k in kernels:
            if isinstance(k, F.KernelOp) and k not in self.queued:
                self.queued.add(k)
                self._pending.append(k)

    def pop(self) -> F.KernelOp | None:
        pos = self.graph.pos
        if pos is not self._numbering:
            self._numbering, self._heap, self._pending = pos, [], list(self.queued)
        for k in self._pending:
            if k.parent is not None:
                heapq.heappush(self._heap, (pos[k], next(self._count), k))
        self._pending = []
        while self._heap:
            _, _, first = heapq.heappop(self._heap)
            self.queued.discard(first)
            if first.parent is not None:  # erased kernels (merged away) are dropped
                return first
        self.queued.clear()
        return None


# ---------------------------------------------------------------- names


_NAME = re.compile(r"^fusec_(?:poi|red|per)_(.+)_(\d+)$")
MAX_NAME_PARTS = 6
# Name parts that are no pointwise function or reduction (form-kernels names cat, index, gather kernels after the
# graph op, and materialised constants "full"/"symbolic"): what in a body shows each is still computed there.
_STRUCTURAL_PARTS = {"cat": lambda op: isinstance(op, F.LoadOp) and op.mask is not None,
                     "gather": lambda op: isinstance(op, F.LoadOp) and op.offset is not None,
                     "index": lambda op: isinstance(op, F.LoadOp) and op.offset is not None,
                     "full": lambda op: isinstance(op, F.ConstantOp),
                     "symbolic": lambda op: isinstance(op, F.SymbolicOp)}
_OP_PARTS = set(F.POINTWISE_FUNCTIONS) | set(F.REDUCTIONS) | set(_STRUCTURAL_PARTS)


def name_parts(name: str) -> list[str]:
    """``fusec_poi_logical_and_exp_3`` -> ["logical_and", "exp"]; a name of another form is one part."""
    m = _NAME.match(name)
    if m is None:
        return [name]
    words, parts, i = m.group(1).split("_"), [], 0
    while i < len(words):  # longest known op name first: "logical_and" is one part, not two
        j = next((j for j in range(len(words), i + 1, -1) if "_".join(words[i:j]) in _OP_PARTS), i + 1)
        parts.append("_".join(words[i:j]))
        i = j
    return parts


def computed_parts(body: Block) -> set[str]:
    """The op names a kernel body still computes: functions, reductions, and the structural parts it shows."""
    found: set[str] = set()
    structural = dict(_STRUCTURAL_PARTS)
    for op in body.ops:  # one walk: merging calls this for every merged kernel
        if isinstance(op, F.PointwiseOp):
            found.add(op.fn.data)
        elif isinstance(op, F.ReduceROp):
            found.add(op.kind.data)
        elif structural:
            for part in [part for part, shows in structural.items() if shows(op)]:
                found.add(part)
                del structural[part]
    return found


def merged_name(kernels: Sequence[F.KernelOp], body: Block, domain: Sequence[sympy.Expr], number_from: F.KernelOp,
                graph: Graph) -> str:
    """``fusec_poi_add_mul_sigmoid_3``: the parts of the merged kernels' names, in dataflow order, that ``body``
    still computes (an output dropped in the merge takes the ops only it needed, and their parts, with it)."""
    computed = computed_parts(body)
    parts: list[str] = []
    for k in kernels:
        for part in name_parts(k.sym_name.data):
            if part not in parts and (part in computed or part not in _OP_PARTS):
                parts.append(part)
    if not parts:  # nothing named is left (the body only moves data): say what it does compute
        parts = list(dict.fromkeys(op.fn.data for op in body.ops if isinstance(op, F.PointwiseOp))) or ["copy"]
    kind = "red" if len(domain) == 2 else "poi"
    taken = graph.names()
    stem = f"fusec_{kind}_{'_'.join(parts[:MAX_NAME_PARTS])}_"
    own = _NAME.match(number_from.sym_name.data)
    if own and ((name := stem + own.group(2)) not in taken or name == number_from.sym_name.data):
        return name  # the usual case: the number of the kernel it merges into, free (no scan of every name)
    numbers = [int(found.group(2)) for other in taken if (found := _NAME.match(other))]
    number = int(own.group(2)) if own else max(numbers, default=-1) + 1
    name = stem + str(number)
    while name in taken and name != number_from.sym_name.data:
        number = max(numbers, default=number) + 1
        numbers.append(number)
        name = stem + str(number)
    return name


# ---------------------------------------------------------------- remarks


@dataclass
class Declines:
    """Refused merges; at the end of a pass, those whose kernels both survived become remarks."""

    pass_name: str
    found: dict[tuple[Operation, Operation], tuple[str, str]] = field(default_factory=dict)

    def record(self, code: str, message: str, a: Operation, b: Operation) -> None:
        self.found[(a, b)] = (code, message)

    def __contains__(self, pair: tuple[Operation, Operation]) -> bool:
        return pair in self.found

    def emit(self) -> None:
        for (a, b), (code, message) in self.found.items():
            if a.parent is not None and b.parent is not None:
                remarks.emit(self.pass_name, code, message, describe_user(a), describe_user(b))

    def record_extern_boundaries(self, graph: Graph, readers: Iterable[F.KernelOp], feeders: Iterable[F.KernelOp]) -> None:
        """Externs never merge: a decline for each of ``readers`` that reads an extern's result (extern-producer)
        and each of ``feeders`` that feeds an extern (extern-consumer), views in between or not."""
        for k in readers:
            inputs: dict[F.ExternOp, list[str]] = {}  # extern -> the inputs of k it gives (two matmuls: which is which)
            for i, v in enumerate(k.inputs):
                if isinstance(source := graph.source(v), F.ExternOp):
                    inputs.setdefault(source, []).append(str(i))
            for p, which in inputs.items():
                self.record("extern-producer", f"{describe(k)} reads the result of {p.target.data}, a torch call, "
                                               f"as input {', '.join(which)}", p, k)
        for k in feeders:
            for u in graph.consumers(k):
                if isinstance(u, F.ExternOp):
                    self.record("extern-consumer", f"{describe(k)} feeds {u.target.data}", k, u)


def describe_user(op: Operation) -> str:
    """How a remark names an op: ``@kernel``, or an extern by its torch op (``aten.mm.default``)."""
    if isinstance(op, F.ExternOp):
        return op.target.data
    return describe(op)


def install_within_limits(graph: Graph, declines: Declines, merged: tuple[F.KernelOp, dict[SSAValue, SSAValue]],
                          pair: tuple[F.KernelOp, F.KernelOp], anchor: Operation, max_ops: int,
                          max_inputs: int) -> F.KernelOp | None:
    """Put the kernel merging ``pair`` (producer or reduction first) into the graph before ``anchor``, or, past
    ``max-ops``/``max-inputs``, drop it and record a ``limit`` decline.  Returns the installed kernel."""
    kernel, replaced = merged
    problem = limit_problem(kernel, max_ops, max_inputs)
    if problem:
        discard(kernel)
        declines.record("limit", problem, *pair)
        return None
    graph.install(kernel, replaced, [pair[1], pair[0]], anchor=anchor)
    return kernel
