"""The reference interpreter: runs any fusec module, graph level and kernel level, with torch ops.

It defines what the IR means.  Tests run a module before and after a pass on the
same random inputs and compare.  Kernels are interpreted vectorised: ``x`` is a
column ``[X, 1]`` and ``r`` a row ``[1, R]``, so element values are torch tensors
that broadcast exactly like Triton blocks do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import sympy
import torch
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute, Operation, SSAValue

from fusec.analysis.bind_plan import InputMismatch, UnboundSymbol, bind_plan
from fusec.base import shapes
from fusec.dialects import fusec as F
from fusec.dialects.attributes import tensor_type_of
from fusec.dialects.extern_calls import call_extern


def _floordiv(a, b):
    return torch.div(a, b, rounding_mode="floor")


TORCH_FUNCTIONS: dict[str, Callable[..., torch.Tensor] | None] = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "floordiv": _floordiv,
    "remainder": torch.remainder, "pow": torch.pow, "maximum": torch.maximum, "minimum": torch.minimum,
    "atan2": torch.atan2, "bitwise_and": torch.bitwise_and, "bitwise_or": torch.bitwise_or,
    "bitwise_xor": torch.bitwise_xor, "logical_and": torch.logical_and, "logical_or": torch.logical_or,
    "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
    "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "exp2": torch.exp2, "expm1": torch.expm1, "log": torch.log,
    "log2": torch.log2, "log1p": torch.log1p, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "sin": torch.sin,
    "cos": torch.cos, "tan": torch.tan, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "erf": torch.erf,
    "erfc": torch.erfc, "floor": torch.floor, "ceil": torch.ceil, "round": torch.round, "trunc": torch.trunc,
    "sign": torch.sign, "reciprocal": torch.reciprocal, "relu": torch.relu, "logical_not": torch.logical_not,
    "bitwise_not": torch.bitwise_not, "isnan": torch.isnan, "isinf": torch.isinf, "signbit": torch.signbit,
    "asin": torch.asin, "acos": torch.acos, "atan": torch.atan, "sinh": torch.sinh, "cosh": torch.cosh,
    "convert": lambda a: a, "identity": lambda a: a.clone(), "where": torch.where,
    "iota": None,  # needs the result's shape: _pointwise
}
assert set(TORCH_FUNCTIONS) == set(F.POINTWISE_FUNCTIONS), "every pointwise function needs a torch meaning"


def apply_pointwise(fn: str, args: Sequence[torch.Tensor], result: torch.dtype) -> torch.Tensor:
    """One pointwise function with fusec's conversion rules (see dialects/fusec.py)."""
    if fn in F.PREDICATES:
        compute = args[0].dtype
        for a in args[1:]:
            compute = torch.promote_types(compute, a.dtype)
        args = [a.to(compute) for a in args]
    elif fn == "where":
        args = [args[0].to(torch.bool), args[1].to(result), args[2].to(result)]
    elif result in (torch.float16, torch.bfloat16) and any(a.dtype == torch.float32 for a in args):
        # A 16-bit result computes in fp32: an fp32 operand (a Python number, as torch's GPU kernels read one)
        # is not rounded first; 16-bit operands widen exactly.
        args = [a.to(torch.float32) for a in args]
    else:
        args = [a.to(result) for a in args]
    function = TORCH_FUNCTIONS[fn]
    assert function is not None, f"{fn} is evaluated by _pointwise"
    return function(*args).to(result)


REDUCE_FUNCTIONS = {
    "sum": lambda v, d, k: torch.sum(v, d, keepdim=k),
    "prod": lambda v, d, k: _multi(torch.prod, v, d, k),
    "max": lambda v, d, k: torch.amax(v, d, keepdim=k),
    "min": lambda v, d, k: torch.amin(v, d, keepdim=k),
    "argmax": lambda v, d, k: torch.argmax(_ordered(v), d[0], keepdim=k),
    "argmin": lambda v, d, k: torch.argmin(_ordered(v), d[0], keepdim=k),
    "any": lambda v, d, k: torch.any(v.to(torch.bool), d, keepdim=k),
    "all": lambda v, d, k: torch.all(v.to(torch.bool), d, keepdim=k),
}


def _ordered(v: torch.Tensor) -> torch.Tensor:
    """torch's argmax/argmin refuse bools (max.dim on bools decomposes into one): False < True as uint8."""
    return v.to(torch.uint8) if v.dtype == torch.bool else v


def _multi(fn, v: torch.Tensor, dims: Sequence[int], keepdim: bool) -> torch.Tensor:
    for d in sorted(dims, reverse=True):
        v = fn(v, d, keepdim=keepdim)
    return v


class InterpreterError(RuntimeError):
    pass


def bind_symbols(graph: F.GraphOp, inputs: Sequence[torch.Tensor]) -> dict[str, int]:
    """Size symbols from the inputs' dims and strides (``fusec.analysis.bind_plan``); every other dim is checked."""
    plan = bind_plan(graph)
    try:
        plan.require(name for op in graph.walk() for name, _ in F.op_symbol_uses(op))
        return plan.bind(inputs)
    except (UnboundSymbol, InputMismatch) as e:
        raise InterpreterError(str(e)) from None


def run(module: ModuleOp | F.GraphOp, inputs: Sequence[torch.Tensor], graph_name: str | None = None) -> list[torch.Tensor]:
    graph = F.find_graph(module, graph_name)
    env = bind_symbols(graph, inputs)
    device = inputs[0].device if inputs else torch.device("cpu")
    values: dict[SSAValue, torch.Tensor] = dict(zip(graph.block.args, inputs, strict=True))
    for op in graph.block.ops:
        if isinstance(op, F.OutputOp):
            return [values[v] for v in op.values]
        _run_graph_op(op, values, env, device)
    raise InterpreterError("graph has no fusec.output")


def _shape(t: Attribute, env: dict[str, int]) -> list[int]:
    assert isinstance(t, F.TensorType), "values are tensors"
    return [shapes.evaluate(d, env) for d in t.dims]


def _slice(op: F.SliceOp, x: torch.Tensor, env: dict[str, int]) -> torch.Tensor:
    d, step = op.dim.data, op.step.data
    start = shapes.evaluate(op.start.data, env)
    length = _shape(op.result.type, env)[d]
    if not length:  # eager clamps the start of an empty slice (x[2:] of one row): it may lie past the end
        return x.narrow(d, 0, 0)
    return x.narrow(d, start, (length - 1) * step + 1)[(slice(None),) * d + (slice(None, None, step),)]


def _index(op: F.IndexOp, src: torch.Tensor, idx: torch.Tensor, env: dict[str, int]) -> torch.Tensor:
    d, idx = op.dim.data, idx.to(torch.int64)
    idx = torch.where(idx < 0, idx + src.shape[d], idx)
    return src.index_select(d, idx.reshape(-1)).reshape(_shape(op.result.type, env))


def _combo(op: F.ComboOp, values: dict, env: dict[str, int], device: torch.device) -> list[torch.Tensor]:
    inner = dict(values)
    for k in op.kernels:
        inner.update(zip(k.outputs, run_kernel(k, [inner[v] for v in k.inputs], env, device), strict=True))
    return [inner[v] for v in op.output_op.operands]


def _pointwise(op: F.PointwiseOp, args: list[torch.Tensor], env: dict[str, int], device: torch.device) -> torch.Tensor:
    if op.fn.data == "iota":
        return torch.arange(_shape(op.result.type, env)[0], device=device).to(F.torch_dtype(op.result.type))
    return apply_pointwise(op.fn.data, args, F.torch_dtype(op.result.type))


def _extern(op: F.ExternOp, inputs: list[torch.Tensor], env: dict[str, int], device: torch.device) -> list:
    """The op's results, each laid out as its type says (kernels index them by it: a padded matmul result)."""
    outs = call_extern(op, inputs, env, device)
    for i, (t, r) in enumerate(zip(outs, op.outputs, strict=True)):
        ty = r.type
        if isinstance(t, torch.Tensor) and isinstance(ty, F.TensorType) and not ty.is_contiguous:
            strides = [shapes.evaluate(s, env) for s in ty.layout]
            if list(t.stride()) != strides:
                outs[i] = torch.empty_strided(t.shape, strides, dtype=t.dtype, device=t.device).copy_(t)
    return outs


# Each graph-level op: (op, its operands' values, symbol values, device, all values so far) -> its results' values.
_GRAPH_OPS: dict[type, Callable[..., list[torch.Tensor]]] = {
    F.PointwiseOp: lambda op, a, env, dev, _: [_pointwise(op, a, env, dev)],
    F.ConstantOp: lambda op, a, env, dev, _: [
        torch.full(_shape(op.result.type, env), op.value.data, dtype=F.torch_dtype(op.result.type), device=dev)],
    F.SymbolicOp: lambda op, a, env, dev, _: [
        torch.tensor(shapes.evaluate(op.expr.data, env), dtype=F.torch_dtype(op.result.type), device=dev)],
    F.ReduceOp: lambda op, a, env, dev, _: [REDUCE_FUNCTIONS[op.kind.data](a[0], op.dim_list, bool(op.keepdim))],
    F.ReshapeOp: lambda op, a, env, dev, _: [a[0].reshape(_shape(op.result.type, env))],
    F.PermuteOp: lambda op, a, env, dev, _: [a[0].permute(op.perm_list)],
    F.ExpandOp: lambda op, a, env, dev, _: [a[0].expand(_shape(op.result.type, env))],
    F.SliceOp: lambda op, a, env, dev, _: [_slice(op, a[0], env)],
    F.CatOp: lambda op, a, env, dev, _: [torch.cat(a, op.dim.data)],
    F.IndexOp: lambda op, a, env, dev, _: [_index(op, a[0], a[1], env)],
    F.GatherOp: lambda op, a, env, dev, _: [torch.gather(a[0], op.dim.data, a[1].to(torch.int64))],
    F.ExternOp: lambda op, a, env, dev, _: _extern(op, a, env, dev),
    F.KernelOp: lambda op, a, env, dev, _: run_kernel(op, a, env, dev),
    F.ComboOp: lambda op, a, env, dev, values: _combo(op, values, env, dev),
}


def _run_graph_op(op: Operation, values: dict[SSAValue, torch.Tensor], env: dict[str, int], device: torch.device) -> None:
    run = _GRAPH_OPS.get(type(op))
    if run is None:
        raise InterpreterError(f"the interpreter does not know {op.name}")
    outs = run(op, [values[v] for v in op.operands], env, device, values)
    values.update(zip(op.results, outs, strict=True))


# ---------------------------------------------------------------- kernels


def evaluate_index(e: sympy.Basic, env: dict[str, object]):
    """An index expression over ints and index tensors (x, r) with Python/torch arithmetic."""
    if e.is_Integer:
        return int(e)
    if e.is_Symbol:
        return env[e.name]
    args = [evaluate_index(a, env) for a in e.args]
    if isinstance(e, sympy.Add):
        out = args[0]
        for a in args[1:]:
            out = out + a
        return out
    if isinstance(e, sympy.Mul):
        out = args[0]
        for a in args[1:]:
            out = out * a
        return out
    if isinstance(e, shapes.FloorDiv):
        return args[0] // args[1]
    if isinstance(e, sympy.Mod):
        return args[0] % args[1]
    if isinstance(e, sympy.Pow):
        return args[0] ** args[1]
    if isinstance(e, (sympy.Max, sympy.Min)):
        pick = torch.maximum if isinstance(e, sympy.Max) else torch.minimum
        out = torch.as_tensor(args[0])
        for a in args[1:]:
            out = pick(out, torch.as_tensor(a))
        return out
    raise InterpreterError(f"cannot evaluate {e}")


def _flat_storage(t: torch.Tensor) -> torch.Tensor:
    """A 1-D view of every element from the tensor's first one to the end of its storage."""
    n = t.untyped_storage().nbytes() // t.element_size() - t.storage_offset()
    return torch.as_strided(t, (n,), (1,), t.storage_offset())


def run_kernel(kernel: F.KernelOp, inputs: Sequence[torch.Tensor], env: dict[str, int], device: torch.device) -> list[torch.Tensor]:
    domain = [shapes.evaluate(d, env) for d in kernel.domain_exprs]
    xnumel, rnumel = domain[0], (domain[1] if len(domain) == 2 else 1)
    index_env: dict[str, object] = dict(env)
    index_env["x"] = torch.arange(xnumel, device=device).reshape(-1, 1)
    index_env["r"] = torch.arange(rnumel, device=device).reshape(1, -1)
    full = (xnumel, rnumel)
    outputs = [
        torch.empty_strided(_shape(t, env), [shapes.evaluate(s, env) for s in t.layout], dtype=F.torch_dtype(t), device=device)
        for t in (tensor_type_of(r) for r in kernel.outputs)
    ]
    if xnumel == 0:  # no program runs (a Triton grid of none): loads are never made, even at constant indices
        return outputs
    vals: dict[SSAValue, torch.Tensor] = {}
    flats: dict[SSAValue, torch.Tensor] = {a: _flat_storage(t) for a, t in zip(kernel.block.args, list(inputs) + outputs, strict=True)}

    def index_of(op) -> torch.Tensor:
        idx = torch.as_tensor(evaluate_index(op.index.data, index_env), device=device)
        if getattr(op, "offset", None) is not None:
            idx = idx + vals[op.offset]
        return idx

    for op in kernel.block.ops:
        if isinstance(op, F.LoadOp):
            idx = index_of(op)
            if op.mask is not None:
                mask = vals[op.mask]
                idx, mask = torch.broadcast_tensors(idx, mask)
                picked = flats[op.buffer][torch.where(mask, idx, 0)]
                out = torch.where(mask, picked, torch.zeros((), dtype=picked.dtype, device=device))
            else:
                out = flats[op.buffer][idx]
        elif isinstance(op, F.StoreOp):
            idx = index_of(op)
            value = vals[op.value]
            idx, value = torch.broadcast_tensors(idx, value)
            if op.mask is not None:
                mask = torch.broadcast_to(vals[op.mask], idx.shape)
                idx, value = idx[mask], value[mask]
            flats[op.buffer][idx.reshape(-1)] = value.reshape(-1).to(flats[op.buffer].dtype)
            continue
        elif isinstance(op, F.PointwiseOp):
            out = apply_pointwise(op.fn.data, [vals[v] for v in op.inputs], F.torch_dtype(op.result.type))
        elif isinstance(op, F.ConstantOp):
            out = torch.full((1, 1), op.value.data, dtype=F.torch_dtype(op.result.type), device=device)
        elif isinstance(op, F.SymbolicOp):
            out = torch.as_tensor(evaluate_index(op.expr.data, index_env), device=device).to(F.torch_dtype(op.result.type))
            out = out.reshape(out.shape if out.dim() == 2 else (1, 1))
        elif isinstance(op, F.ReduceROp):
            value = torch.broadcast_to(vals[op.input], full)
            out = REDUCE_FUNCTIONS[op.kind.data](value, [1], True).to(F.torch_dtype(op.result.type))
        else:
            raise InterpreterError(f"the interpreter does not know {op.name} in a kernel")
        vals[op.results[0]] = out
    return outputs
