"""The importer's op table: how each aten op becomes fusec graph ops.

One entry per aten op packet (``"add"``) or overload (``"div.Tensor_mode"``),
each a small function of the importer and the bound call.  A function raises
``Decline`` when a case has no native form; what it emitted is rolled back and
the op runs as a ``fusec.extern`` with an ``extern-fallback`` remark saying why.
Native ops that the dialect's verifier rejects (a shape equality sympy cannot
prove, say) are rolled back the same way, so the imported IR always verifies;
so is a lowering that fails outright (a bug, named in the remark), so that a
valid graph always imports.

Result types come from the FX node's meta.  Computed values are contiguous
(the passes choose their layout); views carry strides derived from their
input's layout, so that a view of a graph input describes its real memory.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import sympy
import torch
import torch.fx
from xdsl.ir import Attribute, SSAValue
from xdsl.utils.exceptions import VerifyException

from fusec.analysis import collectives
from fusec.base import dtypes, remarks, shapes
from fusec.dialects import fusec as F
from fusec.frontend.builder import GraphBuilder, SymFloat, UnsupportedGraph
from fusec.frontend.decompositions import POOLING


class Decline(Exception):
    """This call has no native form; the message says why (it becomes the remark)."""


@dataclass
class Call:
    """One aten call: its FX node and its arguments bound to the schema's names."""

    node: torch.fx.Node
    args: dict[str, object]  # schema argument name -> imported value

    def __getitem__(self, name: str):
        return self.args[name]

    def get(self, name: str, default=None):
        value = self.args.get(name, default)
        return default if value is None else value

    def input_meta(self, position: int = 0):
        arg = self.node.args[position]
        return arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None


Lowering = Callable[[GraphBuilder, Call], object]
TABLE: dict[str, Lowering] = {}

# Library calls and random numbers run as torch calls by design: no remark.
DESIGNED_EXTERNS = {
    "mm", "bmm", "addmm", "baddbmm", "convolution", "convolution_backward", "_convolution",
    "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu",
    "rand", "rand_like", "randn", "randn_like", "randint", "randint_like", "bernoulli", "normal", "uniform",
    "native_dropout", "embedding_dense_backward",
}


def lower_call(imp: GraphBuilder, node: torch.fx.Node):
    """The imported value of one aten call (an SSA value, a tuple of them, ...)."""
    target = node.target
    assert isinstance(target, torch._ops.OpOverload), "the importer lowers aten calls only"
    key = f"{target._opname}.{target._overloadname}"
    if target.namespace == "aten":  # an overload's own entry first, then its packet's
        lowering = TABLE.get(key) or TABLE.get(target._opname)
    else:
        lowering = TABLE.get(f"{target.namespace}.{key}")
    if collectives.kind_of_target(target.namespace, target._opname) is not None:
        return _collective(imp, node)
    elsewhere = _device_elsewhere(imp, node)
    if elsewhere is not None:
        # Kernels run on the graph's device; eager computes this op elsewhere (a factory op for the CPU,
        # arithmetic on CPU scalars), so torch runs it there and its result stays there.
        value = imp.extern()
        remarks.emit("importer", "extern-device", f"{key} runs as a torch call on {elsewhere}, where eager computes it "
                     f"(kernels run on {imp.device})", node.name)
        return value
    if lowering is None:
        if target.namespace == "aten" and target._opname in DESIGNED_EXTERNS:
            return imp.extern()
        if key in POOLING:  # its native form is a decomposition (fusec.frontend.pooling) the backend chooses per graph
            return imp.extern(reason="native pooling is off for this graph or its window plane has symbolic sizes "
                                     "(pooling is lowered natively in inference graphs by default, in every graph "
                                     "with options={'native_pooling': True})")
        return imp.extern(reason="fusec has no native form for it")
    call = Call(node, _bind(target, imp.value(node.args), {k: imp.value(v) for k, v in node.kwargs.items()}))
    before = imp.block.last_op
    try:
        _check_computable(node)
        value = lowering(imp, call)
        for op in _ops_after(imp, before):
            op.verify()
        _check_matches_meta(imp, value, node.meta.get("val"))
        return value
    except Decline as why:
        reason = str(why)
    except VerifyException as e:
        reason = f"its native form does not verify ({e})"
    except UnsupportedGraph:
        raise
    except Exception as e:  # a bug in a lowering must not stop a valid graph from compiling
        reason = f"the importer failed on it ({type(e).__name__}: {e})"
    for op in reversed(_ops_after(imp, before)):
        op.detach()
        op.erase(safe_erase=False)
    return imp.extern(reason=reason, on_device=computed_on_device(imp, node))


def _collective(imp: GraphBuilder, node: torch.fx.Node):
    """A functional collective or its wait: an extern marked ordered, with a ``collective`` remark at the boundary."""
    target = node.target
    assert isinstance(target, torch._ops.OpOverload)
    kind = collectives.kind_of_target(target.namespace, target._opname)
    assert kind is not None
    value = imp.extern()
    op = imp.block.last_op
    assert isinstance(op, F.ExternOp)
    collectives.mark(op, kind)
    name = f"{target._opname}.{target._overloadname}"
    if kind == collectives.WAIT:
        what = f"{name}: nothing reads the collective's buffer before this wait, and no fusion crosses it"
    else:
        what = f"{name} is issued here, in the graph's order; its buffers stay alive until its wait"
    remarks.emit("importer", "collective", what, node.name)
    return value


def _device_elsewhere(imp: GraphBuilder, node: torch.fx.Node) -> torch.device | None:
    """The device of the op's tensors when it is not the graph's (where its kernels would run), else None.

    A CPU tensor that ``computed_on_device`` finds (computed from numbers and sizes, read only by ops on the
    graph's device) is computed on the graph's device, and its readers read it there.
    """
    if computed_on_device(imp, node):
        return None
    # Lifted constants (get_attr) are exempt: they are passed on whichever device their readers run.
    metas = [node.meta.get("val")] + [a.meta.get("val") for a in node.all_input_nodes
                                      if a.op != "get_attr" and not computed_on_device(imp, a)]
    for m in F.flat_returns(metas):
        if isinstance(m, torch.Tensor) and m.device.type != imp.device.type:
            return m.device
    return None


# Ops of a CPU chain computed from numbers and sizes that are as cheap on the graph's device: factories, views,
# index arithmetic and the functional forms of in-place writes (each has a native form; one that declines runs as a
# torch call on the graph's device).
_HOST_OPS = {
    "scalar_tensor", "_to_copy", "convert_element_type", "clone", "lift_fresh_copy", "copy", "alias",
    "pow", "mul", "div", "add", "sub", "neg", "reciprocal", "sqrt", "rsqrt", "exp", "log", "abs", "remainder",
    "floor_divide", "minimum", "maximum", "clamp", "where", "index", "eq", "ne", "lt", "le", "gt", "ge", "logical_and",
    "logical_or", "logical_not", "bitwise_not", "bitwise_and", "bitwise_or", "sum",
    "arange", "zeros", "ones", "full", "zeros_like", "ones_like", "full_like", "fill",
    "view", "_unsafe_view", "reshape", "expand", "unsqueeze", "squeeze", "permute", "select", "slice", "cat", "stack",
    "view_copy", "permute_copy", "select_copy", "slice_copy", "expand_copy", "unsqueeze_copy", "squeeze_copy",
    "slice_scatter", "select_scatter",
}


def _on_cpu(meta) -> bool:
    tensors = [m for m in F.flat_returns([meta]) if isinstance(m, torch.Tensor)]
    return bool(tensors) and all(m.device.type == "cpu" for m in tensors)


def _cpu_scalar(meta) -> bool:
    return isinstance(meta, torch.Tensor) and meta.device.type == "cpu" and meta.dim() == 0


def computed_on_device(imp: GraphBuilder, node: torch.fx.Node) -> bool:
    """Whether ``node`` computes a CPU tensor from numbers, sizes and other such tensors only, read only by ops whose
    results are on the graph's device (directly or through other such tensors).

    Eager computes it on the CPU, but nothing shows where it was computed but its readers, which run on the device:
    torch 2.11 traces ``q.shape[-1] ** -0.5`` under ``dynamic=True`` as ``scalar_tensor``, ``pow`` and
    ``convert_element_type`` on the CPU, and the attention scores' ``mul`` by it is a GPU op; BEiT builds its
    relative-position index with ``arange``, ``meshgrid`` and in-place writes on the CPU every call (~45 torch calls
    on the CPU a layer, 3x eager's time a call on an H200, before a GPU gather reads it).  Computed on the device,
    the chain folds into the kernels that read it; one a graph output or a CPU op reads stays on the CPU, and so does
    all it reads.  A lifted CPU constant only such ops read moves to the device with them (once); a CPU scalar
    *argument* read that way (an optimizer's step count kept on the CPU) is copied to the device at the start of the
    call (one 4-byte copy, not a synchronisation); a larger CPU argument keeps its chain on the CPU.
    """
    if imp.device.type == "cpu":
        return False
    if imp.values_on_device is None:  # one analysis of the whole graph, at its first question
        imp.values_on_device = _on_device(node.graph, imp.device)
    return node in imp.values_on_device


def _on_device(graph: torch.fx.Graph, device: torch.device) -> set[torch.fx.Node]:
    """``computed_on_device``'s nodes, for a whole graph: the CPU values that could be computed from the device's
    values alone (a forward pass), less those something on the CPU or the graph's output reads (a backward pass),
    until neither pass drops one (dropping a value drops what it feeds, and may drop what feeds it)."""
    nodes = list(graph.nodes)
    chosen: set[torch.fx.Node] = set()
    for n in nodes:
        if _could_move(n, chosen):
            chosen.add(n)
    changed = True
    while changed:
        changed = False
        for n in reversed(nodes):
            if n in chosen and not all(u in chosen or _reads_on(u, device) for u in n.users):
                chosen.discard(n)
                changed = True
        for n in nodes:
            if n in chosen and not _could_move(n, chosen):
                chosen.discard(n)
                changed = True
    return chosen


def _could_move(node: torch.fx.Node, chosen: set[torch.fx.Node]) -> bool:
    """Whether ``node`` is a CPU value that could be computed on the device, given ``chosen`` are."""
    if node.op == "placeholder":  # a CPU scalar argument: copied to the device at the call's start
        return _cpu_scalar(node.meta.get("val"))
    if node.op == "get_attr":  # a lifted CPU constant (torch.tensor(35) in an in-place write): moved once
        owner = node.graph.owning_module
        value = getattr(owner, str(node.target), None) if owner is not None else None
        return isinstance(value, torch.Tensor) and value.device.type == "cpu"
    if node.op == "call_function" and node.target is operator.getitem:  # one result of a moved op
        return isinstance(node.args[0], torch.fx.Node) and node.args[0] in chosen
    return _is_host_op(node) and all(a in chosen for a in node.all_input_nodes
                                     if isinstance(a.meta.get("val"), torch.Tensor) or a.op == "get_attr")


def _is_host_op(node: torch.fx.Node) -> bool:
    return (node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload)
            and node.target._opname in _HOST_OPS and _on_cpu(node.meta.get("val")))


def _reads_on(user: torch.fx.Node, device: torch.device) -> bool:
    """Whether ``user`` is an op whose results are all on ``device`` (it reads a CPU scalar as a number, a CPU
    index as its device copy)."""
    if user.op != "call_function" or user.target is operator.getitem:
        return False
    outs = [m for m in F.flat_returns([user.meta.get("val")]) if isinstance(m, torch.Tensor)]
    return bool(outs) and all(m.device.type == device.type for m in outs)


def _check_computable(node: torch.fx.Node) -> None:
    """Dtypes that torch itself barely computes on (uint16/32/64) only pass through externs."""
    metas = [node.meta.get("val")] + [a.meta.get("val") for a in node.all_input_nodes]
    for m in F.flat_returns(metas):
        if isinstance(m, torch.Tensor) and dtypes.of_torch(m.dtype).name in dtypes.PASS_THROUGH_ONLY:
            raise Decline(f"it computes on {m.dtype}, which fusec only passes between torch calls")


def _check_matches_meta(imp: GraphBuilder, value, meta) -> None:
    """Every tensor a native form gives has the dtype and shape torch gives (``view(dtype)`` must not become a reshape)."""
    values, metas = F.flat_returns(value), F.flat_returns(meta)
    if len(values) != len(metas):
        raise Decline(f"its native form gives {len(values)} values where torch gives {len(metas)}")
    for v, m in zip(values, metas, strict=True):
        if not isinstance(m, torch.Tensor):
            continue
        if not isinstance(v, SSAValue) or not isinstance(v.type, F.TensorType):
            raise Decline(f"its native form gives {v!r} where torch gives a tensor")
        want = F.ELEMENT_TYPES[dtypes.of_torch(m.dtype).name]
        if v.type.element_type != want:
            raise Decline(f"its native form gives {v.type.element_type} where torch gives {m.dtype}")
        dims = [imp.size(d) for d in m.shape]
        if len(dims) != v.type.rank or any(a != b and not shapes.provably_equal(a, b) for a, b in zip(v.type.dims, dims, strict=True)):
            raise Decline(f"its native form gives shape {v.type.dims} where torch gives {dims}")


def _ops_after(imp: GraphBuilder, before) -> list:
    op = imp.block.first_op if before is None else before.next_op
    ops = []
    while op is not None:
        ops.append(op)
        op = op.next_op
    return ops


def _bind(target, args: Sequence, kwargs: dict) -> dict[str, object]:
    bound: dict[str, object] = {}
    for i, a in enumerate(target._schema.arguments):
        if i < len(args) and not a.kwarg_only:
            bound[a.name] = args[i]
        elif a.name in kwargs:
            bound[a.name] = kwargs[a.name]
        elif a.has_default_value():
            bound[a.name] = a.default_value
    return bound


def lowers(*names: str):
    def register(fn: Lowering) -> Lowering:
        for n in names:
            TABLE[n] = fn
        return fn

    return register


def _dims_list(dim, rank: int) -> list[int]:
    """Normalised reduction dims; None or [] means all of them."""
    if dim is None:
        return list(range(rank))
    dims = [dim] if isinstance(dim, int) else list(dim)
    if not dims:
        return list(range(rank))
    return sorted({_dim(d, rank) for d in dims})


def _dim(d, rank: int) -> int:
    if isinstance(d, sympy.Expr):
        d = int(d)
    return d % rank if rank else 0


# ---------------------------------------------------------------- pointwise

UNARY = ["neg", "abs", "exp", "exp2", "expm1", "log", "log2", "log1p", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh",
         "sigmoid", "erf", "erfc", "floor", "ceil", "trunc", "sign", "reciprocal", "relu", "logical_not",
         "bitwise_not", "isnan", "isinf", "asin", "acos", "atan", "sinh", "cosh", "signbit"]
ALIASES = {"fix": "trunc", "round.default": "round", "arcsin": "asin", "arccos": "acos", "arctan": "atan",
           "absolute": "abs", "negative": "neg"}
BINARY = {"add": "add", "sub": "sub", "mul": "mul", "maximum": "maximum", "minimum": "minimum", "atan2": "atan2",
          "remainder": "remainder", "floor_divide": "floordiv", "bitwise_and": "bitwise_and",
          "bitwise_or": "bitwise_or", "bitwise_xor": "bitwise_xor", "logical_and": "logical_and",
          "logical_or": "logical_or", "eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}


def _is_number(v) -> bool:
    return not isinstance(v, SSAValue)


# Arithmetic whose GPU kernels read a Python-number operand at fp32 (``opmath``) on fp16/bf16 tensors: the number is
# never rounded to 16 bits (``x * 0.044715`` in bf16 differs from ``x * bf16(0.044715)`` at 17% of elements).
NUMBERS_AT_FP32 = {"add", "sub", "mul", "div"}


def scalar_type(fn: str, operands: Sequence, out: F.TensorType) -> Attribute:
    """The element type of Python-number operands.

    Arithmetic converts every operand to the result type, so a number takes it,
    except that add, sub, mul and div of an fp16/bf16 result take it as fp32: torch's
    CUDA kernels read a number as a CPU scalar at fp32 (opmath), and
    fusec's rules compute a 16-bit result from an fp32 operand unrounded (see
    ``fusec.dialects.fusec``).  A predicate compares in the operands' promoted
    type: a number takes the tensors' type unless its kind is higher (a float
    against an int tensor compares in the default float type).
    """
    if fn not in F.PREDICATES:
        sixteen = out.element_type in (F.BF16, F.F16)
        return F.F32 if sixteen and fn in NUMBERS_AT_FP32 and any(map(_is_number, operands)) else out.element_type
    tensors = [F.torch_dtype(v.type) for v in operands if isinstance(v, SSAValue)]
    dtype = functools.reduce(torch.promote_types, tensors) if tensors else torch.int64
    numbers = [v for v in operands if _is_number(v)]
    if any(isinstance(v, (float, SymFloat)) for v in numbers) and not dtype.is_floating_point:
        dtype = torch.get_default_dtype()
    elif any(isinstance(v, (int, sympy.Expr)) and not isinstance(v, bool) for v in numbers) and dtype == torch.bool:
        dtype = torch.int64
    return F.ELEMENT_TYPES[str(dtype).removeprefix("torch.")]


def pointwise_call(imp: GraphBuilder, fn: str, operands: Sequence, out: F.TensorType | None = None) -> SSAValue:
    out = out or imp.result_type().contiguous()
    st = scalar_type(fn, operands, out)
    return imp.pointwise(fn, [imp.tensor(v, st) for v in operands], out)


def _unary(fn: str) -> Lowering:
    return lambda imp, c: pointwise_call(imp, fn, [c["self"]])


for _name in UNARY:
    TABLE[_name] = _unary(_name)
for _name, _fn in ALIASES.items():
    TABLE[_name] = _unary(_fn)


def _binary(fn: str) -> Lowering:
    def lower(imp: GraphBuilder, c: Call) -> SSAValue:
        other = c.args.get("other", c.args.get("exponent"))
        alpha = c.args.get("alpha", 1)
        if not (isinstance(alpha, (int, float)) and alpha == 1):
            out = imp.result_type().contiguous()
            o = imp.tensor(other, out.element_type)
            wide = scalar_type("mul", [o, alpha], out)  # f32 for a 16-bit result: alpha * other is not rounded
            other = imp.pointwise("mul", [o, imp.tensor(alpha, wide)], F.TensorType(o.type.dims, wide))
        return pointwise_call(imp, fn, [c["self"], other])

    return lower


for _name, _fn in BINARY.items():
    TABLE[_name] = _binary(_fn)
TABLE["pow"] = _binary("pow")
TABLE["max.other"] = _binary("maximum")
TABLE["min.other"] = _binary("minimum")


@lowers("prims.fma.default")
def _fma(imp: GraphBuilder, c: Call) -> SSAValue:
    """a * b + c (torch's lerp decomposition uses it), rounded twice: no fused multiply-add op in the IR."""
    out = imp.result_type().contiguous()
    product = pointwise_call(imp, "mul", [c["a"], c["b"]], out)
    return pointwise_call(imp, "add", [product, c["c"]], out)


@lowers("div", "true_divide")
def _div(imp: GraphBuilder, c: Call) -> SSAValue:
    mode = c.args.get("rounding_mode")
    a, b = c["self"], c["other"]
    if mode is None:
        return pointwise_call(imp, "div", [a, b])
    if mode == "floor":
        return pointwise_call(imp, "floordiv", [a, b])
    out = imp.result_type().contiguous()
    if not F.is_float(out.element_type):
        raise Decline("rounding_mode='trunc' on integers")
    return imp.pointwise("trunc", [pointwise_call(imp, "div", [a, b])], out)


@lowers("logical_xor")
def _logical_xor(imp: GraphBuilder, c: Call) -> SSAValue:
    a, b = (imp.convert(imp.tensor(v, F.BOOL), F.BOOL) for v in (c["self"], c["other"]))
    return imp.pointwise("ne", [a, b], imp.result_type().contiguous())


@lowers("clamp", "clamp_min", "clamp_max")
def _clamp(imp: GraphBuilder, c: Call) -> SSAValue:
    out = imp.result_type().contiguous()
    lo, hi = c.args.get("min"), c.args.get("max")
    if lo is None and hi is None:
        raise Decline("clamp without bounds")
    value = imp.tensor(c["self"], out.element_type)
    for fn, bound in (("maximum", lo), ("minimum", hi)):
        if bound is not None:
            b = imp.tensor(bound, out.element_type)
            dims = shapes.broadcast_shapes(value.type.dims, b.type.dims)
            if dims is None:
                raise Decline("bounds that do not provably broadcast")
            value = imp.pointwise(fn, [value, b], F.TensorType(dims, out.element_type))
    return value


@lowers("where")
def _where(imp: GraphBuilder, c: Call) -> SSAValue:
    out = imp.result_type().contiguous()
    cond = c["condition"]
    if not isinstance(cond, SSAValue):
        raise Decline("a condition that is not a tensor")
    cond = imp.convert(cond, F.BOOL)
    return imp.pointwise("where", [cond, imp.tensor(c["self"], out.element_type), imp.tensor(c["other"], out.element_type)], out)


@lowers("_to_copy", "prims.convert_element_type.default")
def _to_copy(imp: GraphBuilder, c: Call) -> SSAValue:
    src = c.input_meta()
    if c.args.get("layout") not in (None, torch.strided) or (src is not None and src.device != imp.meta.device):
        raise Decline("it changes the device or the layout")
    out = imp.result_type().contiguous()
    x = c.get("self", c.get("a"))  # aten's schema names it self, prims' a
    if not isinstance(x, SSAValue):
        raise Decline("a non-tensor operand")
    return imp.pointwise("convert" if x.type.element_type != out.element_type else "identity", [x], out)


@lowers("clone", "lift_fresh_copy")
def _clone(imp: GraphBuilder, c: Call) -> SSAValue:
    return imp.pointwise("identity", [c["self"]], imp.result_type().contiguous())


@lowers("alias", "detach", "lift_fresh")
def _alias(imp: GraphBuilder, c: Call):
    return c["self"]  # the same values: the functional IR has no identity to keep


@lowers("copy")
def _copy(imp: GraphBuilder, c: Call) -> SSAValue:
    out = imp.result_type().contiguous()
    src = c["src"]
    if list(src.type.dims) != list(out.dims):
        src = imp.emit_value(F.ExpandOp(src, F.TensorType(out.dims, src.type.element_type)))
    return imp.pointwise("convert" if src.type.element_type != out.element_type else "identity", [src], out)


# ---------------------------------------------------------------- constants


def _filled(imp: GraphBuilder, value) -> SSAValue:
    out = imp.result_type().contiguous()
    if isinstance(value, (bool, int, float)):
        return imp.constant(value, out)
    scalar = imp.convert(imp.tensor(value, out.element_type), out.element_type)  # a size, a 0-d tensor
    if out.rank:
        return imp.emit_value(F.ExpandOp(scalar, out))
    return imp.pointwise("identity", [scalar], out)


@lowers("full", "full_like", "new_full")
def _full(imp: GraphBuilder, c: Call) -> SSAValue:
    return _filled(imp, c["fill_value"])


@lowers("scalar_tensor")
def _scalar_tensor(imp: GraphBuilder, c: Call) -> SSAValue:
    return _filled(imp, c["s"])


@lowers("fill")
def _fill(imp: GraphBuilder, c: Call) -> SSAValue:
    return _filled(imp, c["value"])


@lowers("zeros", "zeros_like", "new_zeros", "empty", "empty_like", "new_empty", "empty_strided", "new_empty_strided")
def _zeros(imp: GraphBuilder, c: Call) -> SSAValue:
    return _filled(imp, 0)  # an empty tensor's contents are unspecified: zeros will do


@lowers("ones", "ones_like", "new_ones")
def _ones(imp: GraphBuilder, c: Call) -> SSAValue:
    return _filled(imp, 1)


@lowers("arange")
def _arange(imp: GraphBuilder, c: Call) -> SSAValue:
    """``start + step * iota``: index arithmetic that folds into the kernels reading it."""
    out = imp.result_type().contiguous()
    start, step = c.get("start", 0), c.get("step", 1)
    compute = out.element_type if F.is_float(out.element_type) else F.I64
    value = imp.convert(imp.pointwise("iota", [], F.TensorType(out.dims, F.I64)), compute)
    if not (isinstance(step, (int, float)) and step == 1):
        value = imp.pointwise("mul", [value, imp.tensor(step, compute)], F.TensorType(out.dims, compute))
    if not (isinstance(start, (int, float)) and start == 0):
        value = imp.pointwise("add", [value, imp.tensor(start, compute)], F.TensorType(out.dims, compute))
    return imp.convert(value, out.element_type)


# ---------------------------------------------------------------- reductions


def reduce(imp: GraphBuilder, kind: str, x: SSAValue[F.TensorType], dims: list[int], keepdim: bool,
           out: F.TensorType) -> SSAValue[F.TensorType]:
    """fusec.reduce with torch's result dtype (sum of ints gives int64, any of uint8 gives uint8...)."""
    natural = F.I64 if kind in ("argmax", "argmin") else F.BOOL if kind in ("any", "all") else out.element_type
    if kind in ("sum", "prod"):
        x = imp.convert(x, out.element_type)
    if x.type.rank == 0:  # nothing to reduce over: the element itself
        if kind in ("argmax", "argmin"):
            return imp.constant(0, out)
        x = imp.convert(x, natural)
        return imp.pointwise("convert" if x.type.element_type != out.element_type else "identity", [x], out)
    value = imp.emit_value(F.ReduceOp(kind, x, dims, keepdim, F.TensorType(out.dims, natural)))
    return imp.convert(value, out.element_type)


def _reduction(kind: str, dim_arg: str | None = "dim") -> Lowering:
    def lower(imp: GraphBuilder, c: Call) -> SSAValue:
        x = c["self"]
        dims = _dims_list(c.args.get(dim_arg) if dim_arg else None, x.type.rank)
        return reduce(imp, kind, x, dims, bool(c.args.get("keepdim", False)), imp.result_type().contiguous())

    return lower


for _kind, _op in [("sum", "sum"), ("prod", "prod"), ("max", "amax"), ("min", "amin"), ("any", "any"), ("all", "all")]:
    TABLE[_op] = _reduction(_kind)
TABLE["max.default"] = _reduction("max", None)
TABLE["min.default"] = _reduction("min", None)


@lowers("max.dim", "min.dim")
def _max_dim(imp: GraphBuilder, c: Call) -> tuple[SSAValue, SSAValue]:
    assert isinstance(c.node.target, torch._ops.OpOverload)
    kind = "max" if c.node.target._opname == "max" else "min"
    x, keepdim = c["self"], bool(c.args.get("keepdim", False))
    dims = _dims_list(c["dim"], x.type.rank)
    values = reduce(imp, kind, x, dims, keepdim, imp.result_type(0).contiguous())
    indices = reduce(imp, "arg" + kind, x, dims, keepdim, imp.result_type(1).contiguous())
    return values, indices


@lowers("argmax", "argmin")
def _argmax(imp: GraphBuilder, c: Call) -> SSAValue:
    assert isinstance(c.node.target, torch._ops.OpOverload)
    kind, x = c.node.target._opname, c["self"]
    out = imp.result_type().contiguous()
    keepdim = bool(c.args.get("keepdim", False))
    if c.args.get("dim") is not None:
        return reduce(imp, kind, x, _dims_list(c["dim"], x.type.rank), keepdim, out)
    # dim=None: the flat index over all elements
    flat = x if x.type.rank <= 1 else imp.emit_value(F.ReshapeOp(x, F.TensorType([shapes.numel(x.type.dims)], x.type.element_type)))
    index = reduce(imp, kind, flat, [0] if flat.type.rank else [], False, F.TensorType([], out.element_type))
    return imp.emit_value(F.ReshapeOp(index, out)) if out.rank else index


@lowers("mean")
def _mean(imp: GraphBuilder, c: Call) -> SSAValue:
    x = c["self"]
    out = imp.result_type().contiguous()
    dims = _dims_list(c.args.get("dim"), x.type.rank)
    keepdim = bool(c.args.get("keepdim", False))
    total = reduce(imp, "sum", x, dims, keepdim, out)
    count = shapes.numel([x.type.dims[d] for d in dims]) if x.type.rank else sympy.Integer(1)
    divisor = imp.constant(float(count), F.TensorType([], out.element_type)) if count.is_Integer else imp.symbolic(count)
    return imp.pointwise("div", [total, divisor], out)


# ---------------------------------------------------------------- views


def _view_type(x: SSAValue[F.TensorType], dims: Sequence[sympy.Expr], strides: Sequence[sympy.Expr] | None) -> F.TensorType:
    return F.TensorType(dims, x.type.element_type, strides)


def reshape(imp: GraphBuilder, x: SSAValue[F.TensorType], dims: Sequence[sympy.Expr],
            meta_layout: F.TensorType | None = None) -> SSAValue[F.TensorType]:
    """A reshape to ``dims``: contiguous in, contiguous out; otherwise torch's strides from the meta."""
    if list(x.type.dims) == list(dims) and x.type.is_contiguous:
        return x
    strides = None if x.type.is_contiguous or meta_layout is None else meta_layout.layout
    return imp.emit_value(F.ReshapeOp(x, _view_type(x, dims, strides)))


@lowers("view", "_unsafe_view", "reshape", "_reshape_alias", "view_copy", "squeeze", "unsqueeze", "flatten",
        "unflatten", "squeeze_copy", "unsqueeze_copy")
def _reshape(imp: GraphBuilder, c: Call) -> SSAValue:
    x = c["self"]
    meta = imp.result_type(layout=True)
    if list(x.type.dims) == list(meta.dims):
        return x
    return reshape(imp, x, meta.dims, meta)


@lowers("permute", "permute_copy")
def _permute(imp: GraphBuilder, c: Call) -> SSAValue:
    x = c["self"]
    return permute(imp, x, [_dim(d, x.type.rank) for d in c["dims"]])


def permute(imp: GraphBuilder, x: SSAValue[F.TensorType], perm: list[int]) -> SSAValue[F.TensorType]:
    if perm == list(range(len(perm))):
        return x
    t = x.type
    return imp.emit_value(F.PermuteOp(x, perm, _view_type(x, [t.dims[p] for p in perm], [t.layout[p] for p in perm])))


@lowers("transpose")
def _transpose(imp: GraphBuilder, c: Call) -> SSAValue:
    x = c["self"]
    rank = x.type.rank
    if rank < 2:
        return x
    a, b = _dim(c["dim0"], rank), _dim(c["dim1"], rank)
    perm = list(range(rank))
    perm[a], perm[b] = perm[b], perm[a]
    return permute(imp, x, perm)


@lowers("t")
def _t(imp: GraphBuilder, c: Call) -> SSAValue:
    x = c["self"]
    return permute(imp, x, [1, 0]) if x.type.rank == 2 else x


@lowers("expand", "expand_copy")
def _expand(imp: GraphBuilder, c: Call) -> SSAValue:
    x = c["self"]
    out_dims = imp.result_type().dims
    if list(out_dims) == list(x.type.dims):
        return x
    lead = len(out_dims) - x.type.rank
    strides = [sympy.Integer(0)] * lead + [
        sympy.Integer(0) if d == 1 and out_dims[lead + k] != 1 else s
        for k, (d, s) in enumerate(zip(x.type.dims, x.type.layout, strict=True))]
    return imp.emit_value(F.ExpandOp(x, _view_type(x, out_dims, strides)))


def slice_view(imp: GraphBuilder, x: SSAValue[F.TensorType], d: int, start: sympy.Expr, step: int,
               length: sympy.Expr) -> SSAValue[F.TensorType]:
    t = x.type
    if start == 0 and step == 1 and length == t.dims[d]:
        return x
    dims = list(t.dims)
    dims[d] = length
    strides = list(t.layout)
    strides[d] = strides[d] * step
    return imp.emit_value(F.SliceOp(x, d, start, step, _view_type(x, dims, strides)))


def _start(value, size: sympy.Expr) -> sympy.Expr:
    """A slice start or select index as torch normalises it: None is 0, negatives count from the end."""
    if value is None:
        return sympy.Integer(0)
    if isinstance(value, int):
        if value >= 0:
            return sympy.Integer(value)
        start = size + value
        return sympy.Max(start, 0) if not size.is_Integer else sympy.Integer(max(int(start), 0))
    if isinstance(value, sympy.Expr):
        return value
    raise Decline(f"a slice bound {value!r}")


@lowers("slice")
def _slice(imp: GraphBuilder, c: Call) -> SSAValue:
    x = c["self"]
    d = _dim(c.get("dim", 0), x.type.rank)
    step = c.get("step", 1)
    if not isinstance(step, int):
        step = int(step) if isinstance(step, sympy.Expr) and step.is_Integer else None
    if step is None:
        raise Decline("a symbolic slice step")
    start = _start(c.args.get("start"), x.type.dims[d])
    return slice_view(imp, x, d, start, step, imp.result_type().dims[d])


@lowers("select")
def _select(imp: GraphBuilder, c: Call) -> SSAValue:
    x = c["self"]
    d = _dim(c["dim"], x.type.rank)
    index = c["index"]
    if isinstance(index, int) and index < 0:
        index = x.type.dims[d] + index
    one = slice_view(imp, x, d, shapes.as_expr(index) if isinstance(index, int) else index, 1, sympy.Integer(1))
    meta = imp.result_type(layout=True)
    return reshape(imp, one, meta.dims, meta)


@lowers("split", "split_with_sizes", "unbind", "split_copy", "split_with_sizes_copy", "unbind_copy")
def _split(imp: GraphBuilder, c: Call) -> list[SSAValue[F.TensorType]]:
    x = c["self"]
    d = _dim(c.get("dim", 0), x.type.rank)
    assert isinstance(c.node.target, torch._ops.OpOverload)
    unbind = c.node.target._opname.startswith("unbind")
    pieces, start = [], sympy.Integer(0)
    for i in range(len(imp.meta)):
        piece_type = imp.result_type(i, layout=True)
        length = sympy.Integer(1) if unbind else piece_type.dims[d]
        piece = slice_view(imp, x, d, start, 1, length)
        pieces.append(reshape(imp, piece, piece_type.dims, piece_type) if unbind else piece)
        start = start + length
    return pieces


@lowers("cat", "concat", "concatenate")
def _cat(imp: GraphBuilder, c: Call) -> SSAValue:
    out = imp.result_type().contiguous()
    d = _dim(c.get("dim", 0), out.rank)
    # torch skips 1-d empty tensors in a cat of higher rank (a legacy rule)
    inputs = [imp.convert(v, out.element_type) for v in c["tensors"] if not (v.type.rank == 1 and v.type.dims[0] == 0 and out.rank > 1)]
    if len(inputs) == 1:
        return imp.pointwise("identity", inputs, out)
    return imp.emit_value(F.CatOp(inputs, d, out))


# ---------------------------------------------------------------- indexing


def _index(imp: GraphBuilder, x: SSAValue[F.TensorType], index: SSAValue[F.TensorType], d: int) -> SSAValue[F.TensorType]:
    if index.type.element_type not in (F.I64, F.I32):
        raise Decline(f"an index of type {index.type.element_type}")
    return imp.emit_value(F.IndexOp(x, index, d, imp.result_type().contiguous()))


@lowers("index_select")
def _index_select(imp: GraphBuilder, c: Call) -> SSAValue:
    x, index = c["self"], c["index"]
    if index.type.rank == 0:
        index = imp.emit_value(F.ReshapeOp(index, F.TensorType([1], index.type.element_type)))
    return _index(imp, x, index, _dim(c["dim"], x.type.rank))


@lowers("embedding")
def _embedding(imp: GraphBuilder, c: Call) -> SSAValue:
    return _index(imp, c["weight"], c["indices"], 0)


@lowers("index.Tensor", "_unsafe_index.Tensor")
def _index_tensor(imp: GraphBuilder, c: Call) -> SSAValue:
    x, indices = c["self"], list(c["indices"])
    present = [i for i, v in enumerate(indices) if v is not None]
    if len(present) != 1:
        raise Decline(f"{len(present)} index tensors (fusec.index takes one)")
    d, index = present[0], indices[present[0]]
    if index.type.element_type not in (F.I64, F.I32):
        raise Decline(f"an index of type {index.type.element_type}")
    return _index(imp, x, _wrap_negative(imp, index, x.type.dims[d]), d)


def _wrap_negative(imp: GraphBuilder, index: SSAValue[F.TensorType], size: sympy.Expr) -> SSAValue[F.TensorType]:
    """``index < 0 ? index + size : index``: advanced indexing counts negative indices from the end."""
    et, dims = index.type.element_type, index.type.dims
    negative = imp.pointwise("lt", [index, imp.constant(0, F.TensorType([], et))], F.TensorType(dims, F.BOOL))
    shifted = imp.pointwise("add", [index, imp.tensor(size, et)], F.TensorType(dims, et))
    return imp.pointwise("where", [negative, shifted, index], F.TensorType(dims, et))


@lowers("gather")
def _gather(imp: GraphBuilder, c: Call) -> SSAValue:
    x, index = c["self"], c["index"]
    if index.type.element_type not in (F.I64, F.I32):
        raise Decline(f"an index of type {index.type.element_type}")
    return imp.emit_value(F.GatherOp(x, index, _dim(c["dim"], x.type.rank), imp.result_type().contiguous()))
