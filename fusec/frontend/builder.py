"""Building the fusec graph IR from FX nodes: the value table, types, locations and the op emitters.

``GraphBuilder`` holds what both the import driver (``fusec.frontend.importer``)
and the aten op table (``fusec.frontend.aten_ops``) use while they walk an FX
graph: the block being built, the imported value of each FX node, the current
node (its location goes on every op emitted for it), and small emitters
(constants, conversions, pointwise ops, size expressions, externs).
"""

from __future__ import annotations

import linecache
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sympy
import torch
import torch.fx
from xdsl.dialects.builtin import ArrayAttr, FileLineColLoc, IntAttr, LocationAttr, NameLoc, NoneAttr, StringAttr, UnknownLoc
from xdsl.ir import Attribute, Block, Operation, SSAValue

from fusec.base import dtypes, remarks, shapes
from fusec.dialects import fusec as F
from fusec.frontend.exprs import UnsupportedExpr, check_printable, int_expr


class UnsupportedGraph(Exception):
    """The graph uses something the fusec IR cannot express; the message says what and where."""


@dataclass(frozen=True)
class SymFloat:
    """A SymFloat value (Dynamo's sympy expression, e.g. ``2.0/(ToFloat(s0) - 1.0)``), emitted where used."""

    expr: sympy.Expr


# ---------------------------------------------------------------- dtypes and locations


def extern_argument(v, operands: list[SSAValue], device: torch.device, refusal: str) -> Attribute:
    """An imported FX argument as ``fusec.extern`` data; a tensor operand is appended to ``operands``."""
    if isinstance(v, SSAValue):
        operands.append(v)
        return F.OperandSlotAttr()
    if isinstance(v, (list, tuple)):
        return ArrayAttr([extern_argument(x, operands, device, refusal) for x in v])
    if isinstance(v, torch.device):
        return F.TorchConstAttr(F.GRAPH_DEVICE if v.type == device.type else str(v))
    if isinstance(v, torch._ops.OpOverload):  # the op a higher-order op runs
        return F.TorchOpAttr(target_name(v))
    for kinds, make in _EXTERN_LEAVES:
        if isinstance(v, kinds):
            return make(v)
    raise UnsupportedGraph(f"{refusal} at run time")


def target_name(target: torch._ops.OpOverload | torch._ops.HigherOrderOperator) -> str:
    """An extern's target as the IR names it: ``aten.mm.default``, ``higher_order.run_with_rng_state``."""
    if isinstance(target, torch._ops.HigherOrderOperator):
        return f"higher_order.{target.name()}"
    return f"{target.namespace}.{target._opname}.{target._overloadname}"


# Leaf values of extern arguments, in the order they are tried (a bool is an int: it comes first).
_EXTERN_LEAVES: tuple[tuple[type | tuple[type, ...], Callable[[Any], Attribute]], ...] = (
    (bool, F.NumberAttr),
    ((int, sympy.Expr), lambda v: F.ExprAttr(shapes.as_expr(v))),
    (float, F.NumberAttr),
    (type(None), lambda v: NoneAttr()),
    (str, StringAttr),
    (torch.dtype, lambda v: element_type(v)),
    ((torch.layout, torch.memory_format), lambda v: F.TorchConstAttr(str(v).removeprefix("torch."))),
)


def element_type(dtype: torch.dtype) -> Attribute:
    """The IR's element type of a torch dtype; a dtype fusec has no type for makes the graph unsupported."""
    try:
        return dtypes.of_torch(dtype).ir
    except dtypes.UnknownDType as e:
        raise UnsupportedGraph(str(e)) from None


_FRAME = re.compile(r'File "([^"]+)", line (\d+)')


def node_location(node: torch.fx.Node) -> NameLoc:
    """``"node_name"("file":line:col)``: the FX node and the user's line that created it."""
    trace = node.meta.get("stack_trace") or ""
    frames = list(_FRAME.finditer(trace))
    where: Attribute = NoneAttr()
    if frames:
        last = frames[-1]
        file, line = last.group(1), int(last.group(2))
        where = FileLineColLoc(StringAttr(file), IntAttr(line), IntAttr(_column(trace[last.end():], file, line)))
    return NameLoc(StringAttr(node.name), where)


def _column(after_frame: str, file: str, line: int) -> int:
    """1-based column of the caret under the source line, or 0 when the trace has none."""
    lines = after_frame.split("\n")[1:3]
    if len(lines) < 2 or "^" not in lines[1]:
        return 0
    shown, carets = lines
    offset = carets.index("^") - (len(shown) - len(shown.lstrip()))
    original = linecache.getline(file, line)
    return (len(original) - len(original.lstrip())) + offset + 1


class GraphBuilder:
    """The block under construction and the FX node being imported (``at``)."""

    def __init__(self, gm: torch.fx.GraphModule):
        self.gm = gm
        self.block = Block()
        self.values: dict[torch.fx.Node, object] = {}
        self.node: torch.fx.Node | None = None
        self._location: LocationAttr = UnknownLoc()
        self.externs: list[str] = []
        self.shape_env = None
        self.device = torch.device("cpu")
        self.derived: Callable[[sympy.Expr], sympy.Expr] | None = None  # names compound sizes (derived_sizes)
        self.values_on_device: set[torch.fx.Node] | None = None  # CPU values computed on the device (aten_ops)

    def at(self, node: torch.fx.Node) -> None:
        self.node = node
        self._location = node_location(node)

    @property
    def meta(self):
        assert self.node is not None, "at() sets the node"
        return self.node.meta.get("val")

    def size(self, value) -> sympy.Expr:
        """A size (int, SymInt, or a sympy expression in torch's or fusec's terms) as a fusec expression."""
        if isinstance(value, torch.SymInt):
            value = value.node.expr
        try:
            expr = check_printable(int_expr(value))
        except UnsupportedExpr as e:
            assert self.node is not None, "at() sets the node"
            raise UnsupportedGraph(f"FX node {self.node.name}: {e}") from None
        return self.derived(expr) if self.derived is not None else expr

    def scalar_of(self, val):
        """A non-tensor meta value: int/SymInt -> size expression, SymFloat -> SymFloat, else itself."""
        if isinstance(val, torch.SymInt) or (isinstance(val, int) and not isinstance(val, bool)):
            return self.size(val)
        if isinstance(val, torch.SymFloat):
            return SymFloat(val.node.expr)
        if isinstance(val, torch.SymBool):
            return None  # only guards and asserts use these
        return val

    def type_of(self, fake: torch.Tensor, layout: bool = False, strides: Sequence | None = None) -> F.TensorType:
        """The fusec type of a (fake) tensor; strides only where ``layout`` asks for the real ones."""
        dims = [self.size(d) for d in fake.shape]
        if strides is None and layout:
            contiguous = shapes.contiguous_strides(dims)  # a size-1 dim's stride is never used: ignore it
            strides = [c if d == 1 else self.size(s) for d, s, c in zip(dims, fake.stride(), contiguous, strict=True)]
            if all(shapes.provably_equal(s, c) for s, c in zip(strides, contiguous, strict=True)):
                strides = None  # contiguous: spares TensorType its own (uncached) proof of it
        return F.TensorType(dims, element_type(fake.dtype), strides)

    def result_type(self, index: int | None = None, layout: bool = False) -> F.TensorType:
        val = self.meta if index is None else self.meta[index]
        return self.type_of(val, layout)

    def value(self, arg):
        """The imported value of an FX argument (nodes resolved, lists element-wise)."""
        if isinstance(arg, torch.fx.Node):
            if arg not in self.values:
                assert self.node is not None, "at() sets the node"
                raise UnsupportedGraph(f"FX node {self.node.name}: uses {arg.name}, which has no value")
            return self.values[arg]
        if isinstance(arg, (list, tuple)):
            return type(arg)(self.value(a) for a in arg)
        if isinstance(arg, torch.SymInt | torch.SymFloat):
            return self.scalar_of(arg)
        return arg

    def emit(self, op: Operation) -> Operation:
        op.location = self._location
        self.block.add_op(op)
        return op

    def emit_value(self, op: Operation) -> SSAValue[F.TensorType]:
        return SSAValue.get(self.emit(op).results[0], type=F.TensorType)  # graph values are tensors

    def constant(self, number, t: Attribute) -> SSAValue[F.TensorType]:
        if isinstance(number, float) and not F.is_float(F.element_of(t)):
            number = int(number) if F.element_of(t) != F.BOOL else bool(number)
        if F.is_float(F.element_of(t)) and isinstance(number, int) and not isinstance(number, bool):
            number = float(number)
        return self.emit_value(F.ConstantOp(number, t))

    def symbolic(self, expr: sympy.Expr) -> SSAValue[F.TensorType]:
        return self.emit_value(F.SymbolicOp(expr, F.TensorType([], F.I64)))

    def tensor(self, value, scalar_type: Attribute) -> SSAValue[F.TensorType]:
        """An operand as a tensor: Python scalars become 0-d constants of ``scalar_type``."""
        if isinstance(value, SSAValue):
            return value
        if isinstance(value, sympy.Expr):
            if value.is_Integer:
                return self.constant(int(value), F.TensorType([], scalar_type))
            return self.symbolic(self.size(value))  # torch's FloorDiv & co. in fusec's terms (a conv's output size)
        if isinstance(value, SymFloat):
            return self.sym_float(value.expr, scalar_type if F.is_float(scalar_type) else F.F32)
        if isinstance(value, (bool, int, float)):
            return self.constant(value, F.TensorType([], scalar_type))
        assert self.node is not None, "at() sets the node"
        raise UnsupportedGraph(f"FX node {self.node.name}: operand {value!r} is not a tensor or a number")

    def convert(self, v: SSAValue[F.TensorType], et: Attribute) -> SSAValue[F.TensorType]:
        if v.type.element_type == et:
            return v
        return self.emit_value(F.PointwiseOp("convert", [v], F.TensorType(v.type.dims, et)))

    def pointwise(self, fn: str, operands: Sequence[SSAValue], out: F.TensorType) -> SSAValue[F.TensorType]:
        return self.emit_value(F.PointwiseOp(fn, list(operands), out))

    def sym_float(self, e: sympy.Expr, et: Attribute) -> SSAValue[F.TensorType]:
        """A SymFloat expression computed with 0-d pointwise ops in ``et``."""
        import torch.utils._sympy.functions as TF

        scalar = F.TensorType([], et)
        args = e.args
        if e.is_Number:
            return self.constant(float(e), scalar)
        if type(e).__name__ == "ToFloat":
            return self.convert(self.tensor(self.size(args[0]), F.I64), et)
        if isinstance(e, (sympy.Add, sympy.Mul)):
            fn = "add" if isinstance(e, sympy.Add) else "mul"
            acc = self.sym_float(args[0], et)
            for a in args[1:]:
                acc = self.pointwise(fn, [acc, self.sym_float(a, et)], scalar)
            return acc
        if isinstance(e, sympy.Pow) and args[1] == -1:
            return self.pointwise("reciprocal", [self.sym_float(args[0], et)], scalar)
        if isinstance(e, sympy.Pow) or type(e).__name__ == "FloatPow":
            return self.pointwise("pow", [self.sym_float(args[0], et), self.sym_float(args[1], et)], scalar)
        if type(e).__name__ in ("FloatTrueDiv", "IntTrueDiv"):
            return self.pointwise("div", [self.sym_float(args[0], et), self.sym_float(args[1], et)], scalar)
        fn = type(e).__name__.removeprefix("OpaqueUnaryFn_")
        if type(e).__name__.startswith("OpaqueUnaryFn_") and F.POINTWISE_FUNCTIONS.get(fn) == 1:
            return self.pointwise(fn, [self.sym_float(args[0], et)], scalar)
        if e.is_integer or any(isinstance(e, getattr(TF, n, ())) for n in ("FloorDiv", "ModularIndexing")):
            return self.convert(self.tensor(self.size(e), F.I64), et)
        assert self.node is not None, "at() sets the node"
        raise UnsupportedGraph(f"FX node {self.node.name}: cannot compute the float size expression {e}")

    # ---- the fallback

    def extern(self, reason: str | None = None, on_device: bool = False):
        """The current node as a torch call at run time; ``reason`` (when given) becomes a remark.  ``on_device``:
        a CPU op computed on the graph's device (``aten_ops.computed_on_device``): a ``device`` argument names it.

        Its arguments become data (``fusec.extern``'s syntax): tensors operands,
        sizes expressions, the rest literals.  Its return value may mix tensors
        with sizes, numbers and None, in tuples and lists: the tensors become the
        op's results (with their positions in the flattened return value), the
        other values are known now (a SymInt is a size expression) and stand in
        the importer's value table where the tensors' SSA values stand.
        """
        node = self.node
        assert node is not None, "at() sets the node"
        target = node.target
        assert isinstance(target, (torch._ops.OpOverload, torch._ops.HigherOrderOperator)), "aten calls and RNG replays only"
        operands: list[SSAValue] = []

        def arg(v) -> Attribute:
            return extern_argument(v, operands, self.device, f"FX node {node.name}: cannot pass {v!r} ({type(v).__name__}) to {target}")

        args = [arg(self.value(a)) for a in node.args]
        kwargs = {k: arg(self.device if on_device and k == "device" else self.value(v)) for k, v in node.kwargs.items()}
        types: list[F.TensorType] = []
        positions: list[int] = []
        for i, e in enumerate(F.flat_returns(self.meta)):
            if isinstance(e, torch.Tensor):
                types.append(self.type_of(e, layout=True))
                positions.append(i)
        name = target_name(target)
        op = self.emit(F.ExternOp(name, operands, args, types, kwargs, positions))
        elsewhere = {e.device.type for e in F.flat_returns(self.meta) if isinstance(e, torch.Tensor)} - {self.device.type}
        if elsewhere and not on_device:  # a CPU factory op beside GPU kernels: its results' storage is no kernel's to take
            op.attributes[F.DEVICE_MARK] = StringAttr(",".join(sorted(elsewhere)))
        if reason is not None:
            self.externs.append(name)
            remarks.emit("importer", "extern-fallback", f"{name} runs as a torch call: {reason}", f"{node.name}")
        results = iter(op.results)

        def rebuild(e):
            if isinstance(e, (tuple, list)):
                return type(e)(rebuild(x) for x in e)
            if isinstance(e, torch.Tensor):
                return next(results)
            return self.scalar_of(e)

        return rebuild(self.meta)


