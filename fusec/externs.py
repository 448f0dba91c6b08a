"""Calling a ``fusec.extern`` op's torch function at run time.

The op's ``call`` is the text between a call's parentheses, for example
``T(0), T(1), dim=S("s0 - 1"), dtype=torch.float16, device=DEVICE``: ``T(i)`` is
its i-th tensor operand, ``S(expr)`` a size expression, ``DEVICE`` the device
the graph runs on.  It is evaluated once per call with nothing else in scope.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from fusec import shapes


def resolve_target(target: str) -> Callable:
    """``aten.mm.default`` -> ``torch.ops.aten.mm.default``; raises LookupError when unknown."""
    obj = torch.ops
    try:
        for part in target.split("."):
            obj = getattr(obj, part)
    except (AttributeError, RuntimeError) as e:
        raise LookupError(f"unknown extern target '{target}'") from e
    return obj


def compile_call(call: str) -> Callable:
    """Compile the call text once; the result takes (inputs, env, device) -> (args, kwargs)."""
    code = compile(f"_collect({call})", "<fusec.extern call>", "eval")

    def build(inputs: Sequence[torch.Tensor], env: dict[str, int], device: torch.device):
        scope = {
            "_collect": lambda *a, **k: (a, k),
            "T": lambda i: inputs[i],
            "S": lambda text: shapes.evaluate(shapes.parse_expr(text), env),
            "torch": torch,
            "DEVICE": device,
            "inf": math.inf,
            "nan": math.nan,
        }
        return eval(code, {"__builtins__": {}}, scope)

    return build


def call_extern(target: str, call: str, inputs: Sequence[torch.Tensor], env: dict[str, int], device: torch.device) -> tuple[torch.Tensor, ...]:
    fn = resolve_target(target)
    args, kwargs = compile_call(call)(inputs, env, device)
    out = fn(*args, **kwargs)
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)
