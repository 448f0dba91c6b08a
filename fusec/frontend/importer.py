"""fusec's way in from PyTorch: an aten FX graph (after AOTAutograd) -> a module holding one ``fusec.graph``.

    module, info = import_graph(gm, example_inputs, name="forward_0")

Tensor placeholders become the graph's inputs, typed from ``node.meta["val"]``
(FakeTensors): dims are integers or, under ``dynamic=True``, expressions over
the ShapeEnv's size symbols (s0, s27, ...), never the example's values.  SymInt
placeholders are not graph inputs: ``ImportInfo`` says what each placeholder
is, binds the symbols from the actual arguments and rebuilds the output
structure AOTAutograd expects.  Each aten op becomes fusec ops (the table is in
``fusec.frontend.aten_ops``); an op without a mapping becomes a ``fusec.extern``
with an ``extern-fallback`` remark, so importing a valid graph does not fail.
Only what the IR cannot express at all (a complex dtype, a data-dependent
size, an in-place op) raises ``UnsupportedGraph``.

Every op carries the FX node's name and the user's source line as its MLIR
location: ``loc("mul_3"("model.py":12:9))`` (printed with ``print_debuginfo``).
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import sympy
import torch
import torch.fx
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, StringAttr
from xdsl.ir import Operation, Region, SSAValue

from fusec.analysis.bind_plan import BindPlan, UnboundSymbol, make_plan
from fusec.base import shapes
from fusec.dialects import fusec as F
from fusec.dialects.attributes import stating_size_facts, tensor_type_of
from fusec.frontend import index_guards
from fusec.frontend.aten_ops import computed_on_device, lower_call
from fusec.frontend.builder import GraphBuilder, SymFloat, UnsupportedGraph, element_type, node_location
from fusec.frontend.derived_sizes import DerivedSizes
from fusec.frontend.derived_sizes import bounds as derived_bounds
from fusec.frontend.exprs import backed_hints, symbol_bounds
from fusec.frontend.size_facts import equality_facts

__all__ = ["ImportInfo", "InputSlot", "OutputSlot", "SymFloat", "UnsupportedGraph", "element_type", "import_graph",
           "node_location"]


# ---------------------------------------------------------------- what the backend needs


@dataclass(frozen=True)
class InputSlot:
    """One FX placeholder: a tensor input of the graph, the value of a size expression, or unused."""

    kind: str  # "tensor" | "symint" | "unused"
    index: int = -1  # tensor: its position among the graph's inputs
    expr: sympy.Expr | None = None  # symint: the size expression it holds


@dataclass(frozen=True)
class OutputSlot:
    """One element of the FX graph's output: a graph output, a size expression or a Python value."""

    kind: str  # "tensor" | "symint" | "value" | "input"
    index: int = -1  # tensor: its position among fusec.output's operands; input: the FX argument's position
    expr: sympy.Expr | None = None
    value: object = None
    dim_order: tuple[int, ...] | None = None  # tensor: eager's layout (outermost dim first) where dense, not row-major
    # tensor: eager's strides of an output that is a strided view (not dense in any order) of a value the graph
    # computes: fusec lays that value out itself, so the view's strides may differ (``strided_like_eager``)
    strides: tuple[sympy.Expr, ...] | None = None


@dataclass
class ImportInfo:
    """How the FX graph's calling convention maps onto the fusec.graph's.

    The graph's inputs are the placeholders' tensors, then the constants, then
    one *size carrier* per symbol that no tensor input gives (by its bind plan,
    ``fusec.analysis.bind_plan``; a backward graph may get a size only as a
    SymInt): an expanded one-element int8 tensor ``!fusec.tensor<[s0], i8,
    strides [0]>``, so that an executor binds every symbol from tensor shapes
    alone.  ``plan`` binds the symbols from the FX arguments themselves (the
    tensors and the SymInts), which the carriers are made from.
    """

    graph_name: str
    inputs: tuple[InputSlot, ...]
    input_types: tuple[F.TensorType, ...]  # of every graph input: placeholders' tensors, constants, carriers
    constants: tuple[torch.Tensor, ...]  # get_attr tensors, passed after the placeholders' tensors
    outputs: tuple[OutputSlot, ...]
    symbols: dict[str, tuple[int, int | None]]  # name -> (lower, upper or None)
    size_hints: dict[str, int] = field(default_factory=dict)  # example values: for block sizes, never for code
    externs: tuple[str, ...] = ()  # targets that fell back to extern
    carriers: tuple[str, ...] = ()  # symbols passed as size-carrier inputs, in order
    device: torch.device = torch.device("cpu")  # where the FX graph's tensors live
    constants_stay: tuple[bool, ...] = ()  # per constant: read only by torch calls on its own device (eager's CPU math)
    definitions: dict[str, sympy.Expr] = field(default_factory=dict)  # derived size symbols (derived_sizes)
    # (FX argument, graph output): after a call the argument holds the output's value (AOTAutograd's input mutations)
    mutations: tuple[tuple[int, int], ...] = ()
    # (symbol, upper bound) the import had Dynamo guard (index_guards): a warm start that skips the import guards them
    size_guards: tuple[tuple[str, int], ...] = ()
    _moved: dict = field(default_factory=dict, repr=False, compare=False)

    def tensor_inputs(self, args: Sequence, symbols: dict[str, int] | None = None) -> list[torch.Tensor]:
        """The graph's inputs, in order, from the FX graph's arguments (``symbols`` for the carriers)."""
        tensors = [args[i] for i, slot in enumerate(self.inputs) if slot.kind == "tensor"]
        device = tensors[0].device if tensors else self.device
        tensors += self.constants_on(device)
        if self.carriers:
            symbols = self.bind_symbols(args) if symbols is None else symbols
            one = self._carrier_base(device)
            tensors += [one.expand(symbols[s]) for s in self.carriers]
        return tensors

    def _carrier_base(self, device: torch.device) -> torch.Tensor:
        """The one-element tensor every size carrier expands (made once per device: a fill per call is a launch)."""
        key = ("carrier", device)
        if key not in self._moved:
            self._moved[key] = torch.zeros(1, dtype=torch.int8, device=device)
        return self._moved[key]

    def constants_on(self, device: torch.device) -> list[torch.Tensor]:
        # A lifted constant (torch.tensor(2.0) in the user's code) lives on the CPU; kernels need it beside the inputs.
        if device not in self._moved:
            stay = self.constants_stay or (False,) * len(self.constants)
            self._moved[device] = [c if kept else c.to(device) for c, kept in zip(self.constants, stay, strict=True)]
        return self._moved[device]

    @functools.cached_property
    def plan(self) -> BindPlan:
        """How the arguments give every symbol: the tensors' dims and strides (before the carriers), the SymInts."""
        types = self.input_types[:len(self.input_types) - len(self.carriers)]
        return make_plan(self.graph_name, types, self.symbols, [s.expr for s in self.inputs if s.kind == "symint"],
                         self.definitions)

    def bind_symbols(self, args: Sequence) -> dict[str, int]:
        """Every declared symbol's value from the FX graph's arguments (the importer made sure the plan finds all)."""
        if not self.symbols:  # static sizes: nothing to read (a backward's 288 arguments cost 22 µs to walk)
            return {}
        tensors = [args[i] for i, slot in enumerate(self.inputs) if slot.kind == "tensor"] + list(self.constants)
        scalars = [args[i] for i, slot in enumerate(self.inputs) if slot.kind == "symint"]
        return self.plan.bind(tensors, scalars, check=False)  # the executor checks the tensors (or Dynamo's guards do)

    @property
    def passed_inputs(self) -> tuple[int, ...]:
        """Positions of FX arguments returned as they are (an opaque object: a process group saved for the backward)."""
        return tuple(slot.index for slot in self.outputs if slot.kind == "input")

    def assemble_outputs(self, tensors: Sequence[torch.Tensor], env: dict[str, int], passed: dict[int, object] | None = None) -> list:
        """The FX graph's outputs from the graph's output tensors (and the symbol values, the ``passed_inputs``)."""
        out: list = []
        for slot in self.outputs:
            if slot.kind == "tensor":
                t = tensors[slot.index]
                if slot.dim_order:
                    t = in_dim_order(t, slot.dim_order)
                elif slot.strides is not None:
                    t = strided_like_eager(t, [shapes.evaluate(e, env) for e in slot.strides])
                out.append(t)
            elif slot.kind == "symint":
                out.append(shapes.evaluate(slot.expr, env))
            elif slot.kind == "input":
                out.append((passed or {})[slot.index])
            else:
                out.append(slot.value)
        return out


def eager_dim_order(val, row_major_too: bool = False) -> tuple[int, ...] | None:
    """The order of dims (outermost first) of eager's layout for an output, where it is dense and not
    row-major (a pointwise op on a transposed input keeps its layout), or row-major with ``row_major_too``
    (fusec's value is a permuted view, which eager's is not); None otherwise.  From the example
    values' hints: a layout is the same for every size Dynamo's guards admit."""
    if not isinstance(val, torch.Tensor) or val.dim() < 2:
        return None
    hinted_sizes, hinted_strides = [size_hint(d) for d in val.shape], [size_hint(s) for s in val.stride()]
    if None in hinted_sizes or None in hinted_strides or 0 in hinted_sizes:  # unbacked: no hint, leave the layout be
        return None
    sizes, strides = cast(list[int], hinted_sizes), cast(list[int], hinted_strides)
    # An expanded dim (stride 0) is no part of the layout: the dense buffer under the expand is.
    broadcast = [d for d in range(val.dim()) if strides[d] == 0 and sizes[d] > 1]
    under = [1 if d in broadcast else n for d, n in enumerate(sizes)]
    laid_out = sorted((d for d in range(val.dim()) if d not in broadcast), key=lambda d: (-strides[d], d))
    if (laid_out == sorted(laid_out) and not row_major_too) \
            or _dense_strides(under, laid_out) != [s for s, d in zip(strides, under, strict=True) if d > 1]:
        return None
    return (*broadcast, *laid_out)


def _computed_here(value: SSAValue) -> bool:
    """Computed by one of the graph's own ops: neither an input nor a view (eager's output aliases what it views)
    nor a torch call's result (torch gives it eager's layout)."""
    owner = value.owner
    return isinstance(owner, Operation) and not isinstance(owner, (*F.VIEW_OPS, F.ExternOp))


def _expanded(val) -> bool:
    return isinstance(val, torch.Tensor) and any(s == 0 and n != 1 for s, n in zip(val.stride(), val.shape, strict=True))


def _view_base(value: SSAValue) -> SSAValue:
    """The value under ``value``'s chain of views (itself when it is no view)."""
    while isinstance(value.owner, F.VIEW_OPS):
        value = value.owner.input
    return value


def _through_a_permute(value: SSAValue) -> bool:
    """Whether ``value`` is a view whose chain of views holds a permute (at run time, maybe not row-major)."""
    owner = value.owner
    while isinstance(owner, F.VIEW_OPS):
        if isinstance(owner, F.PermuteOp):
            return True
        owner = owner.input.owner
    return False


def size_hint(n) -> int | None:
    """A size's example value: an int's own, a SymInt's hint (None for a data-dependent one)."""
    return int(n) if isinstance(n, int) else n.node.hint


def _dense_strides(sizes: Sequence[int], order: Sequence[int]) -> list[int]:
    """The strides, of dims of size > 1 in dim order, of a dense tensor laid out in ``order``."""
    return [s for s, d in zip(shapes.dense_strides(sizes, order), sizes, strict=True) if d > 1]


def in_dim_order(t: torch.Tensor, order: tuple[int, ...]) -> torch.Tensor:
    """``t`` laid out in ``order`` (itself when it is already, else a copy); an expanded ``t`` stays expanded
    over its dims of stride 0, the buffer under it laid out in ``order``."""
    broadcast = [d for d in range(t.dim()) if t.stride(d) == 0 and t.shape[d] > 1]
    if broadcast:
        under = t[tuple(slice(0, 1) if d in broadcast else slice(None) for d in range(t.dim()))]
        return in_dim_order(under, order).expand(t.shape)
    if [s for s, d in zip(t.stride(), t.shape, strict=True) if d > 1] == _dense_strides(t.shape, order):
        return t
    return torch.empty_permuted(t.shape, order, dtype=t.dtype, device=t.device).copy_(t)


def strided_like_eager(t: torch.Tensor, strides: Sequence[int]) -> torch.Tensor:
    """``t`` with eager's ``strides`` (itself when it has them already, else a copy): an output that eager returns
    as a strided view of an intermediate (a slice of a pointwise result on a transposed input) gets eager's
    strides, though no tensor aliases it."""
    if tuple(t.stride()) == tuple(strides):
        return t
    if all(a == b for a, b, n in zip(t.stride(), strides, t.shape, strict=True) if n > 1):
        return t.as_strided(t.shape, tuple(strides), t.storage_offset())  # a size-1 dim's stride: no copy
    return torch.empty_strided(t.shape, tuple(strides), dtype=t.dtype, device=t.device).copy_(t)


# Higher-order ops that run a random op with a saved RNG state (torch._prims.rng_prims): torch calls, in order.
RNG_REPLAYS = frozenset({"run_and_save_rng_state", "run_with_rng_state"})


def _is_opaque(value) -> bool:
    """A TorchScript object (real or fake): a process group a collective names, passed through untouched."""
    from torch._library.fake_class_registry import FakeScriptObject

    return isinstance(value, (torch.ScriptObject, FakeScriptObject))


def import_graph(gm: torch.fx.GraphModule, example_inputs: Sequence, name: str = "graph",
                 guard_sizes: bool = False) -> tuple[ModuleOp, ImportInfo]:
    """Import an aten FX graph; raises UnsupportedGraph only for what the IR cannot express.

    ``guard_sizes``: the graph is compiled before Dynamo builds its guards (a forward or an inference graph), so
    the import may bound its size symbols by guards (``index_guards``: int32 indexing under symbolic sizes)."""
    return GraphImporter(gm, example_inputs, name, guard_sizes).run()


def _skipped(target) -> bool:
    """Runtime checks and annotations with no value: nothing to compute."""
    name = getattr(target, "__name__", "") if not isinstance(target, torch._ops.OpOverload) else target._opname
    return name in {"_assert_scalar", "_assert_tensor_metadata", "_assert_async", "sym_constrain_range",
                    "sym_constrain_range_for_size", "_check", "_check_is_size", "_print", "record_stream"}


# ---------------------------------------------------------------- the importer


class GraphImporter(GraphBuilder):
    """Walks the FX graph once, in order, building the fusec.graph's block."""

    def __init__(self, gm: torch.fx.GraphModule, example_inputs: Sequence, name: str, guard_sizes: bool = False):
        super().__init__(gm)
        self.name = name
        self.guard_sizes = guard_sizes
        self.example_inputs = list(example_inputs)
        self.slots: list[InputSlot] = []
        self._placeholders: list[torch.fx.Node] = []
        self.constants: list[torch.Tensor] = []
        self.constants_stay: list[bool] = []
        self._constants_kept_off_device: set[SSAValue] = set()  # their graph arguments (_check_devices)
        self._laid_out_outputs: dict[tuple[SSAValue, tuple[int, ...]], SSAValue] = {}
        self._copies: list[tuple[torch.fx.Node, object]] = []  # (input written, value): ``copy_`` nodes

    # ---- driving

    def run(self) -> tuple[ModuleOp, ImportInfo]:
        _ensure_meta(self.gm, self.example_inputs)
        self.device = _graph_device(self.gm)
        self.shape_env = find_shape_env(self.gm, self.example_inputs)
        size_guards = index_guards.guard(self.gm, self.example_inputs, self.shape_env) if self.guard_sizes else ()
        placeholders = self._placeholders = [n for n in self.gm.graph.nodes if n.op == "placeholder"]
        facts = equality_facts(self.shape_env, _input_symbols(placeholders, self.example_inputs))
        self.derived = self.derived_sizes = DerivedSizes(taken=self._backed_values(), facts=facts, bounds=self._symbol_ranges())
        for i, node in enumerate(placeholders):
            self.at(node)
            self._placeholder(node, self.example_inputs[i] if i < len(self.example_inputs) else None)
        output_slots: list[OutputSlot] = []
        outputs: list[SSAValue] = []
        mutations: list[tuple[int, int]] = []
        with stating_size_facts(facts):  # each op's verifier sees them before the graph that states them exists
            for node in self.gm.graph.nodes:
                self.at(node)
                if node.op == "get_attr":
                    self._get_attr(node)
                elif node.op == "call_function":
                    self._call(node)
                elif node.op == "output":
                    output_slots = self._output(node, outputs)
                    mutations = self._mutations(outputs)
                elif node.op != "placeholder":
                    raise UnsupportedGraph(f"FX node {node.name}: '{node.op}' nodes are not aten graphs (run AOTAutograd first)")
        self._check_devices()
        output_op = F.OutputOp(outputs)
        output_op.location = self._location
        self.block.add_op(output_op)
        symbols = self._declared_symbols()
        definitions = {s: d for s, d in self.derived_sizes.definitions.items() if s in symbols}
        carriers = self._add_size_carriers(symbols, definitions)
        hints = self._size_hints(symbols, definitions)
        graph = F.GraphOp(self.name, [a.type for a in self.block.args], [v.type for v in outputs],
                          [F.SymbolAttr(s, *bounds, definitions.get(s), hints.get(s)) for s, bounds in symbols.items()],
                          Region(self.block),
                          [F.SizeFactAttr(*f) for f in facts if shapes.free_size_symbols(f) <= symbols.keys()])
        graph.set_input_mutations([(self.slots[j].index, k, False) for j, k in mutations])
        # Passes see no Python objects: the device type (what pad-matmuls decides by) rides on the graph.
        graph.attributes[F.DEVICE_MARK] = StringAttr(self.device.type)
        if self.device.type != "cpu":  # whether fp32 matmuls and convolutions may use TF32 tensor cores
            graph.attributes[F.FLOAT32_MATMUL_PRECISION_MARK] = StringAttr(torch.get_float32_matmul_precision())
            graph.attributes[F.CUDNN_ALLOW_TF32_MARK] = IntegerAttr.from_bool(torch.backends.cudnn.allow_tf32)
        if self.device.type == "cuda" and torch.cuda.is_available():  # the GPU that schedules are chosen for
            props = torch.cuda.get_device_properties(self.device)
            graph.attributes[F.DEVICE_CAPABILITY_MARK] = IntegerAttr(props.major * 10 + props.minor, 64)
            graph.attributes[F.SM_COUNT_MARK] = IntegerAttr(props.multi_processor_count, 64)
        info = ImportInfo(self.name, tuple(self.slots), tuple(tensor_type_of(a) for a in self.block.args), tuple(self.constants),
                          tuple(output_slots), symbols, hints, tuple(self.externs), carriers,
                          self.device, tuple(self.constants_stay), definitions, tuple(mutations), size_guards)
        try:
            info.plan.require(symbols)
        except UnboundSymbol as e:
            raise UnsupportedGraph(str(e)) from None
        return ModuleOp([graph]), info

    def _add_size_carriers(self, symbols: dict, definitions: dict[str, sympy.Expr]) -> tuple[str, ...]:
        """One carrier input per symbol that the tensor inputs do not give (a backward graph's sizes)."""
        missing = set(make_plan(self.name, [a.type for a in self.block.args], symbols, (), definitions).missing)
        carriers = tuple(s for s in symbols if s in missing)
        for s in carriers:
            carrier = F.TensorType([shapes.symbol(s)], F.I8, [0])
            self.block.insert_arg(carrier, len(self.block.args))
        return carriers

    def _placeholder(self, node: torch.fx.Node, example) -> None:
        val = node.meta.get("val", example)
        if _restrided(val, example):  # AOTAutograd gives a backward the layouts its forward reported (channels-last)
            val = example
        if isinstance(val, torch.Tensor):
            arg = self.block.insert_arg(self.type_of(val, layout=True), len(self.block.args))
            self.slots.append(InputSlot("tensor", len(self.block.args) - 1))
            self.values[node] = arg
            if computed_on_device(self, node):  # a CPU scalar (an optimizer's step) only device ops read: copied there
                self.values[node] = self.emit_value(F.ExternOp(
                    "aten._to_copy.default", [arg], None, [arg.type],
                    {"device": F.TorchConstAttr(F.GRAPH_DEVICE), "non_blocking": F.NumberAttr(True)}))
        elif isinstance(val, (torch.SymInt, int)) and not isinstance(val, bool):
            expr = self.size(val)
            self.slots.append(InputSlot("symint", expr=expr))
            self.values[node] = expr
        else:
            self.slots.append(InputSlot("unused"))
            self.values[node] = val

    def _check_devices(self) -> None:
        """No native op reads a value that stays off the graph's device (a CPU torch call's result, a CPU constant
        kept there): its kernel would be handed a CPU pointer.  Such a graph runs with torch instead (a warning
        says so) -- a placement bug, not a crash at the first call."""
        elsewhere: set[SSAValue] = {r for op in self.block.ops if isinstance(op, F.ExternOp)
                                    and F.DEVICE_MARK in op.attributes for r in op.results}
        elsewhere |= self._constants_kept_off_device
        for op in self.block.ops:
            if not isinstance(op, F.ExternOp) and any(v in elsewhere for v in op.operands):
                raise UnsupportedGraph(f"{op.name} would read a value that stays off {self.device} (a CPU torch call's "
                                       f"result or constant): fusec's device placement has no form for this graph")

    def _get_attr(self, node: torch.fx.Node) -> None:
        assert isinstance(node.target, str), "a get_attr node's target is the attribute's name"
        obj = getattr(self.gm, node.target)
        if not isinstance(obj, torch.Tensor):
            raise UnsupportedGraph(f"FX node {node.name}: attribute {node.target} is a {type(obj).__name__}, not a tensor")
        # A constant tensor (a lifted torch.tensor([...])) becomes one more graph input.
        self.constants.append(obj)
        # A CPU constant read only by ops eager computes on the CPU stays there (they run as torch calls), unless
        # those ops are computed on the device (aten_ops.computed_on_device): then it is moved there once.
        users = [u.meta.get("val") for u in node.users]
        stay = obj.device.type != self.device.type and bool(users) and all(
            isinstance(u, torch.Tensor) and u.device == obj.device for u in users) and not computed_on_device(self, node)
        self.constants_stay.append(stay)
        arg = self.block.insert_arg(self.type_of(obj, layout=True), len(self.block.args))
        self.values[node] = arg
        if stay:
            self._constants_kept_off_device.add(arg)

    def _call(self, node: torch.fx.Node) -> None:
        target = node.target
        if _skipped(target):
            return
        val = node.meta.get("val")
        if target is operator.getitem:
            self.values[node] = self.value(node.args[0])[node.args[1]]
            return
        if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool, int, float, bool)) and not isinstance(val, torch.Tensor):
            self.values[node] = self.scalar_of(val)  # size arithmetic: its expression is in the meta
            return
        if isinstance(target, torch._ops.HigherOrderOperator) and target.name() in RNG_REPLAYS:
            # Activation checkpointing's random ops: the forward saves the RNG state, the recomputation replays it.
            self.values[node] = self.extern()
            return
        if not isinstance(target, torch._ops.OpOverload):
            raise UnsupportedGraph(f"FX node {node.name}: {target} is not an aten op")
        written = node.args[0] if node.args else None
        if (target is torch.ops.aten.copy_.default and not node.users and isinstance(written, torch.fx.Node)
                and written.op == "placeholder" and isinstance(self.values.get(written), SSAValue)):
            self._copies.append((written, node.args[1]))  # AOTAutograd's input mutation: written after the call
            return
        if target._schema.is_mutable:
            raise UnsupportedGraph(f"FX node {node.name}: {target} mutates its inputs (fusec imports functional graphs)")
        self.values[node] = lower_call(self, node)

    def _output(self, node: torch.fx.Node, outputs: list[SSAValue]) -> list[OutputSlot]:
        results = node.args[0]
        results = results if isinstance(results, (list, tuple)) else [results]
        slots = []
        for r in results:
            v = self.value(r) if isinstance(r, torch.fx.Node) else r
            if isinstance(v, SSAValue):
                val = r.meta.get("val") if isinstance(r, torch.fx.Node) else None
                order = eager_dim_order(val, _through_a_permute(v)) if isinstance(r, torch.fx.Node) else None
                if order is not None and _computed_here(v) and not _expanded(val):
                    v = self._laid_out(v, order)
                if v not in outputs:
                    outputs.append(v)
                strides = self._eager_strides(r, v, val) if order is None else None
                slots.append(OutputSlot("tensor", outputs.index(v), dim_order=order, strides=strides))
            elif isinstance(v, sympy.Expr):  # a size the backward needs: bound from the traced symbols, per call
                slots.append(OutputSlot("symint", expr=self._over_traced_symbols(v)))
            elif v is None or isinstance(v, (bool, int, float)):
                slots.append(OutputSlot("value", value=v))
            elif isinstance(r, torch.fx.Node) and r.op == "placeholder" and _is_opaque(v):
                slots.append(OutputSlot("input", index=self._placeholders.index(r)))
            else:
                raise UnsupportedGraph(f"graph output {r} is a {type(v).__name__}")
        return slots

    def _eager_strides(self, node, v: SSAValue, val) -> tuple[sympy.Expr, ...] | None:
        """Eager's strides for an output that is a view, not dense in any order, of a value computed here (whose
        layout fusec chooses, so the view's strides may differ from eager's); None otherwise."""
        if not isinstance(node, torch.fx.Node) or not isinstance(val, torch.Tensor) or val.dim() == 0 or _expanded(val) \
                or any(size_hint(n) in (0, None) for n in val.shape):  # empty: no element to lay out
            return None
        if eager_dim_order(val, row_major_too=True) is not None or (val.dim() == 1 and val.stride(0) == 1):
            return None  # dense: dim_order's business
        if not _computed_here(_view_base(v)):  # a view of an input or of a torch call's result: eager's layout
            return None
        self.at(node)
        return tuple(self._over_traced_symbols(self.size(s)) for s in val.stride())

    def _over_traced_symbols(self, e: sympy.Expr) -> sympy.Expr:
        """``e`` with each derived size symbol (``d0 = floordiv(s1 - 1, 2) + 1``) written out: what a call binds
        from its arguments (ImportInfo.bind_symbols) holds the traced symbols only."""
        return shapes.expand_definitions(e, self.derived_sizes.definitions)

    def _mutations(self, outputs: list[SSAValue]) -> list[tuple[int, int]]:
        """(FX argument, graph output) for each input the graph writes (``copy_(input, value)`` at its end, from
        AOTAutograd's ``keep_inference_input_mutations``).  A value of the input's shape and element type becomes an
        output of its own in the input's layout (an identity the fusion passes fold into the kernel computing it,
        which mutate-in-place may then have store into the input itself); any other is handed to ``copy_``."""
        found = []
        for written, value_node in self._copies:
            value = self.value(value_node) if isinstance(value_node, torch.fx.Node) else value_node
            if not isinstance(value, SSAValue):
                raise UnsupportedGraph(f"copy_ into {written.name}: its value is a {type(value).__name__}, not a tensor")
            written_value = self.values[written]
            assert isinstance(written_value, SSAValue), "_call records copies into tensor inputs only"
            target, given = tensor_type_of(written_value), tensor_type_of(value)
            if (list(target.dims) == list(given.dims) and target.element_type == given.element_type
                    and shapes.dense_dim_order(target.dims, target.layout) is not None):
                value = self.emit_value(F.PointwiseOp("identity", [value], target))
            outputs.append(value)
            found.append((self._placeholders.index(written), len(outputs) - 1))
        return found

    def _laid_out(self, v: SSAValue, order: tuple[int, ...]) -> SSAValue:
        """``v`` copied into eager's layout (dims ``order``, outermost first): an identity the fusion passes fold
        into the kernel that computes ``v``, which then stores in that layout (a pointwise op on a transposed input
        returns a transposed result in eager), where a copy after the graph would read and write it again."""
        key = (v, order)
        if key not in self._laid_out_outputs:
            t = tensor_type_of(v)
            laid_out = F.TensorType(t.dims, t.element_type, shapes.dense_strides(t.dims, order))
            self._laid_out_outputs[key] = self.emit_value(F.PointwiseOp("identity", [v], laid_out))
        return self._laid_out_outputs[key]

    # ---- symbols

    def _declared_symbols(self) -> dict[str, tuple[int, int | None]]:
        used: list[str] = []
        for slot in self.slots:
            if slot.kind == "symint":
                used += sorted(shapes.free_size_symbols([slot.expr]))
        for arg in self.block.args:
            used += sorted(shapes.free_size_symbols(tensor_type_of(arg).dims + tensor_type_of(arg).layout))
        for op in self.block.walk():
            used += sorted({name for name, _ in F.op_symbol_uses(op)})
        definitions = self.derived_sizes.definitions
        for name in list(dict.fromkeys(used)):  # a definition's symbols (traced ones, never derived) are declared too
            if name in definitions:
                used += sorted(shapes.free_size_symbols([definitions[name]]))
        ranges = {str(k): v for k, v in getattr(self.shape_env, "var_to_range", {}).items()}
        backed = self._backed_values()
        declared: dict[str, tuple[int, int | None]] = {}
        for name in dict.fromkeys(used):
            if name in definitions:
                continue
            if self.shape_env is not None and name not in backed:
                raise UnsupportedGraph(f"size symbol {name} is data-dependent (unbacked): fusec cannot bind it from the inputs")
            declared[name] = symbol_bounds(ranges[name]) if name in ranges else (0, None)
        for name in definitions:  # in the order they were named: each in terms of those before it
            if name in used:
                declared[name] = derived_bounds(definitions[name], declared)
        return declared

    def _symbol_ranges(self) -> dict[str, tuple[float, float]]:
        """Each traced size symbol's range as the graph's guards keep it (ShapeEnv's var_to_range)."""
        out: dict[str, tuple[float, float]] = {}
        for name, value_range in getattr(self.shape_env, "var_to_range", {}).items():
            low, high = symbol_bounds(value_range)
            out[str(name)] = (low, math.inf if high is None else high)
        return out

    def _backed_values(self) -> dict[str, int]:
        if self.shape_env is None:
            return {}
        return {str(k): int(v) for k, v in backed_hints(self.shape_env).items()}

    def _size_hints(self, symbols, definitions: dict[str, sympy.Expr]) -> dict[str, int]:
        backed = self._backed_values()
        hints = {s: backed[s] for s in symbols if s in backed}
        for name, definition in definitions.items():  # over traced symbols, which are declared (_declared_symbols)
            if shapes.free_size_symbols([definition]) <= hints.keys():
                hints[name] = shapes.evaluate(definition, hints)
        return hints


def _input_symbols(placeholders: Sequence[torch.fx.Node], example_inputs: Sequence) -> set[str]:
    """The size symbols the graph's inputs give as they are: a tensor's dim, a SymInt argument."""
    names: set[str] = set()
    for i, node in enumerate(placeholders):
        val = node.meta.get("val", example_inputs[i] if i < len(example_inputs) else None)
        for size in (val.shape if isinstance(val, torch.Tensor) else [val]):
            if isinstance(size, torch.SymInt) and isinstance(size.node.expr, sympy.Symbol):
                names.add(size.node.expr.name)
    return names


def _restrided(val, example) -> bool:
    """``example`` is ``val`` with other static strides: a saved tensor the forward returned in another layout."""
    if not (isinstance(val, torch.Tensor) and isinstance(example, torch.Tensor)) or val.dim() != example.dim():
        return False
    static = all(type(x) is int for x in (*val.shape, *val.stride(), *example.shape, *example.stride()))
    return static and tuple(val.shape) == tuple(example.shape) and tuple(val.stride()) != tuple(example.stride())


def _ensure_meta(gm: torch.fx.GraphModule, example_inputs: Sequence) -> None:
    """Fill node.meta["val"] by fake propagation where a graph came without it (a hand-made graph)."""
    # A getitem's value is its tuple's element: make_fx gives none to an element that is None.
    nodes = [n for n in gm.graph.nodes if n.op in ("placeholder", "call_function") and n.target is not operator.getitem]
    if all("val" in n.meta for n in nodes):
        return
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    mode = torch._guards.detect_fake_mode(example_inputs) or FakeTensorMode(allow_non_fake_inputs=True)
    FakeTensorProp(gm, mode).propagate(*example_inputs)


def _graph_device(gm: torch.fx.GraphModule) -> torch.device:
    """The device the graph computes on: an accelerator if any tensor is on one."""
    devices = [n.meta["val"].device for n in gm.graph.nodes if isinstance(n.meta.get("val"), torch.Tensor)]
    return next((d for d in devices if d.type != "cpu"), torch.device("cpu"))


def find_shape_env(gm: torch.fx.GraphModule, example_inputs: Sequence):
    """The ShapeEnv behind the graph's size symbols (from a traced value, or the example inputs' fake mode), or None."""
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        if isinstance(val, torch.SymInt | torch.SymFloat):
            return val.node.shape_env
        mode = getattr(val, "fake_mode", None)
        if mode is not None and mode.shape_env is not None:
            return mode.shape_env
    mode = torch._guards.detect_fake_mode(list(example_inputs))
    return mode.shape_env if mode is not None else None
