"""Merging fusec.kernel ops: build the merged body, put it in the graph, name it, explain refusals.

Shared by vertical-fusion and reduction-fusion; each pass decides *what* to merge,
this module does the mechanics:

* ``BodyBuilder`` clones ops of the kernels being merged into one new body,
  substituting the iteration variables in every index (``fusec.load`` index,
  ``fusec.symbolic`` expression) and optionally masking the cloned loads.
* ``install`` puts the merged kernel into the graph, redirects the old results,
  erases what became dead and restores a topological order.
* ``reaches`` answers "would this merge create a cycle?"; ``Declines`` turns the
  refusals that still stand at the end of a pass into remarks.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import sympy
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.transforms.common_subexpression_elimination import cse
from xdsl.transforms.dead_code_elimination import region_dce

from fusec import remarks
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
    for arg, operand in zip(kernel.input_args, kernel.inputs):
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
        self.sources.update((arg, v) for arg, v in zip(kernel.input_args, kernel.inputs) if v not in skipped)

    def add(self, op: Operation) -> SSAValue:
        self.block.add_op(op)
        return op.results[0]

    def both(self, a: SSAValue | None, b: SSAValue | None) -> SSAValue | None:
        if a is None or b is None:
            return a if b is None else b
        return self.add(F.PointwiseOp("logical_and", [a, b], F.BOOL))

    def clone(self, op: Operation, vm: dict[SSAValue, SSAValue], mapping: dict, mask: SSAValue | None = None) -> None:
        """Clone a non-store body op; ``mapping`` re-indexes it, ``mask`` guards its loads."""
        if isinstance(op, F.LoadOp):
            index = substitute(op.index.data, mapping, self.domain)
            own = vm[op.mask] if op.mask is not None else None
            offset = vm[op.offset] if op.offset is not None else None
            buffer = self.buffer(self.sources[op.buffer])  # inputs in first-load order
            new: Operation = F.LoadOp(buffer, index, self.both(mask, own), offset)
        elif isinstance(op, F.SymbolicOp):
            new = F.SymbolicOp(substitute(op.expr.data, mapping, self.domain), op.result.type)
        else:
            new = op.clone(value_mapper=vm)
        self.block.add_op(new)
        vm.update(zip(op.results, new.results))

    def output(self, out_type: Attribute, replaces: SSAValue | None = None) -> int:
        """A new output buffer; ``replaces`` is the old graph value it stands for."""
        self.outputs.append((out_type, replaces))
        return len(self.outputs) - 1

    def store(self, value: SSAValue, output: int, index: sympy.Expr, mask: SSAValue | None = None) -> None:
        self.stores.append((value, output, index, mask))

    def finish(self, name: str) -> tuple[F.KernelOp, dict[SSAValue, SSAValue]]:
        """The merged kernel (CSE'd, dead ops removed) and old graph value -> new result."""
        outs = [self.block.insert_arg(t, len(self.block.args)) for t, _ in self.outputs]
        self.block.add_ops(F.StoreOp(v, outs[j], index, mask) for v, j, index, mask in self.stores)
        region = Region(self.block)
        cse(region)
        region_dce(region)
        for i in reversed(range(len(self.inputs))):  # buffers whose loads all went away
            if not self.block.args[i].uses:
                self.block.erase_arg(self.block.args[i])
                del self.inputs[i]
        kernel = F.KernelOp(name, self.domain, self.inputs, [t for t, _ in self.outputs], region)
        replaced = {old: new for (_, old), new in zip(self.outputs, kernel.outputs) if old is not None}
        return kernel, replaced


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


class Graph:
    """A graph block and the questions merging asks of it; op positions are cached until a merge."""

    def __init__(self, block: Block):
        self.block = block
        self._pos: dict[Operation, int] | None = None

    @property
    def pos(self) -> dict[Operation, int]:
        if self._pos is None:
            self._pos = {op: i for i, op in enumerate(self.block.ops)}
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
        kernels = [op for op in self.block.ops if isinstance(op, F.KernelOp)]
        kernels += [k for op in self.block.ops if isinstance(op, F.ComboOp) for k in op.kernels]
        return {k.sym_name.data for k in kernels}

    def install(self, kernel: F.KernelOp, replaced: dict[SSAValue, SSAValue], old: Sequence[F.KernelOp],
                anchor: Operation) -> None:
        """Insert ``kernel`` before ``anchor``, redirect ``replaced``, erase dead ``old`` kernels, re-sort if needed."""
        self.block.insert_op_before(kernel, anchor)
        for old_value, new_value in replaced.items():
            old_value.replace_all_uses_with(new_value)
        dead = list(old)
        while dead:  # erase readers before the kernels they read
            k = next((k for k in dead if all(not r.uses for r in k.results)), None)
            if k is None:
                break
            self.block.erase_op(k)
            dead.remove(k)
        self._pos = None
        # Readers of the replaced values that sat before the anchor must move after the kernel.
        if any(self.pos[u] < self.pos[kernel] for r in kernel.results for u in self.readers(r)):
            self._topo_sort()

    def _topo_sort(self) -> None:
        """Reorder the block so every op follows what it reads, keeping the old order where free."""
        ops = list(self.block.ops)
        pos = {op: i for i, op in enumerate(ops)}
        deps = {op: self.producers(op) for op in ops}
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
        self.block.add_ops(order)
        self._pos = None


class Worklist:
    """Kernels to visit, earliest in the block first; a merge re-queues the kernels it affects."""

    def __init__(self, graph: Graph, kernels: Iterable[F.KernelOp]):
        self.graph = graph
        self.queued = set(kernels)

    def add(self, *kernels: Operation) -> None:
        self.queued.update(k for k in kernels if isinstance(k, F.KernelOp))

    def pop(self) -> F.KernelOp | None:
        live = [k for k in self.queued if k.parent is not None]
        self.queued = set(live)
        if not live:
            return None
        first = min(live, key=self.graph.pos.__getitem__)
        self.queued.discard(first)
        return first


# ---------------------------------------------------------------- names


_NAME = re.compile(r"^fusec_(?:poi|red|per)_(.+)_(\d+)$")
MAX_NAME_PARTS = 6


def merged_name(kernels: Sequence[F.KernelOp], domain: Sequence[sympy.Expr], number_from: F.KernelOp, graph: Graph) -> str:
    """``fusec_poi_add_mul_sigmoid_3``: what the merged kernels computed, in dataflow order."""
    parts: list[str] = []
    for k in kernels:
        m = _NAME.match(k.sym_name.data)
        for part in (m.group(1).split("_") if m else [k.sym_name.data]):
            if part not in parts:
                parts.append(part)
    kind = "red" if len(domain) == 2 else "poi"
    taken = graph.names()
    numbers = [int(m.group(2)) for name in taken if (m := _NAME.match(name))]
    m = _NAME.match(number_from.sym_name.data)
    number = int(m.group(2)) if m else max(numbers, default=-1) + 1
    name = f"fusec_{kind}_{'_'.join(parts[:MAX_NAME_PARTS])}_{number}"
    while name in taken and name != number_from.sym_name.data:
        number = max(numbers, default=number) + 1
        numbers.append(number)
        name = f"fusec_{kind}_{'_'.join(parts[:MAX_NAME_PARTS])}_{number}"
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
                remarks.emit(self.pass_name, code, message, a, b)


def describe_user(op: Operation) -> str:
    if isinstance(op, F.ExternOp):
        return op.target.data
    return remarks.describe(op)
