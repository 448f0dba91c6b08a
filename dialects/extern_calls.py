"""What a ``fusec.extern`` op means as a torch call: its target, arguments and results as Python values.

The op holds its arguments as data (``fusec.dialects.fusec.ExternOp``); this
module turns them into Python values the same way for both executors: the
reference interpreter calls the op with tensors and evaluated sizes, the
launcher writes the call as source with buffer names and host size code
(``Code`` leaves).  Nothing is evaluated from text.  Kept apart from the
dialect's own module because it imports torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sympy
import torch
from xdsl.dialects.builtin import ArrayAttr, NoneAttr, StringAttr
from xdsl.ir import Attribute

from fusec.base import shapes
from fusec.dialects import fusec as F
from fusec.dialects import torch_ops  # noqa: F401  (registers torch.ops.fusec.*, which externs may name)


def resolve_target(target: str) -> Callable:
    """``aten.mm.default`` -> ``torch.ops.aten.mm.default``; raises LookupError when unknown."""
    obj: Any = torch.ops
    try:
        for part in target.split("."):
            obj = getattr(obj, part)
    except (AttributeError, RuntimeError) as e:
        raise LookupError(f"unknown extern target '{target}'") from e
    return obj


# Ops whose result is always a new row-major tensor (their kernels allocate it so, whatever the operands' layouts):
# a launcher knows its layout without asking it for its strides on every call, and that it starts where torch's
# allocator puts a new tensor (16-byte aligned, as the launcher's own allocations).
ROW_MAJOR_RESULTS = frozenset({"aten.mm.default", "aten.bmm.default", "aten.addmm.default",
                               "aten._addmm_activation.default"})


@dataclass(frozen=True)
class Code:
    """Host source text standing for a value (a buffer name, a size computed on the host)."""

    text: str

    def __repr__(self) -> str:
        return self.text


def extern_arguments(op: F.ExternOp, operands: Sequence, size: Callable[[sympy.Expr], object],
                     device: object, torch_op: Callable[[str], object] = resolve_target) -> tuple[list, dict]:
    """The op's (args, kwargs) as Python values.

    ``operands``: what stands for each tensor operand, in order; ``size``: the
    value of a size expression; ``device``: the graph's device (a device the IR
    names, ``device "cpu"``, is that device); ``torch_op``: what stands for an
    op passed as an argument (``op "aten.rand_like.default"``).
    """
    pending = iter(operands)

    def value(a: Attribute):
        if isinstance(a, F.OperandSlotAttr):
            return next(pending)
        if isinstance(a, ArrayAttr):
            return [value(x) for x in a.data]
        if isinstance(a, F.ExprAttr):
            return size(a.data)
        if isinstance(a, F.NumberAttr):
            return a.data
        if isinstance(a, NoneAttr):
            return None
        if isinstance(a, StringAttr):
            return a.data
        if isinstance(a, F.TorchOpAttr):
            return torch_op(a.data)
        if isinstance(a, F.TorchConstAttr):
            if a.data == F.GRAPH_DEVICE:
                return device
            if a.data in F.TORCH_ENUMS:
                return getattr(torch, a.data)
            return torch.device(a.data)
        return getattr(torch, F.dtype_name(a))

    args = [value(a) for a in op.args.data]
    kwargs = {name: value(a) for name, a in op.kwargs.data.items()}
    return args, kwargs


def pick_results(value, positions: Sequence[int]) -> list:
    """The elements of an op's return value that an extern's results name."""
    flat = F.flat_returns(value)
    return [flat[i] for i in positions]


def call_extern(op: F.ExternOp, inputs: Sequence[torch.Tensor], env: dict[str, int], device: torch.device) -> list:
    """Run the op's torch function (the interpreter's way): its results, in order."""
    args, kwargs = extern_arguments(op, inputs, lambda e: shapes.evaluate(e, env), device)
    return pick_results(resolve_target(op.target.data)(*args, **kwargs), op.result_positions)


def source_of(value) -> str:
    """Python source for a value ``extern_arguments`` built (``Code`` leaves stand for themselves)."""
    if isinstance(value, list):
        return "[" + ", ".join(source_of(v) for v in value) + "]"
    if isinstance(value, float) and (math.isinf(value) or math.isnan(value)):
        return f'float("{value}")'
    if isinstance(value, torch.device):
        return f"torch.device({str(value)!r})"
    return repr(value)
