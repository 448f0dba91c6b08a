"""What importing an aten graph depends on, as text: the warm start's key, computed before the import.

The importer reads the FX graph's code (ops, targets, arguments), each node's traced value (``meta["val"]``: a
tensor's shape, strides, storage offset, dtype, layout and device; a size's expression), the example inputs, the
constants' types, the size symbols' ranges and hints and Dynamo's equality guards between sizes (``size_facts``),
and two global switches it marks on the graph (TF32 for matmuls and for cuDNN).  Two graphs alike in all of these
import to the same IR and ``ImportInfo``, so a second process can take both from the cache without importing
(GPT-2's training graphs: 0.8 s of a 2 s warm start on an H200 host).  A graph whose nodes hold anything else (an
opaque object, a node without a traced value) has no signature: it is imported and keyed by its IR, as before.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence

import sympy
import torch

from fusec.frontend.exprs import backed_hints
from fusec.frontend.importer import find_shape_env


class _Unsigned(Exception):
    """A value the signature cannot spell (its import might depend on more than its text shows)."""


def fx_signature(gm: torch.fx.GraphModule, example_inputs: Sequence) -> str | None:
    """The text that decides ``gm``'s import, or None where some value has no faithful spelling."""
    try:
        parts = [gm.code]
        for node in gm.graph.nodes:
            if node.op == "get_attr":
                parts.append(f"{node.name}={_value(getattr(gm, str(node.target)))}")
            elif "val" in node.meta:
                parts.append(f"{node.name}:{_value(node.meta['val'])}")
            elif node.op in ("placeholder", "call_function") and node.target is not operator.getitem:
                return None  # the importer would propagate fake tensors itself: not what the code shows
        parts.append("inputs:" + ",".join(_value(x) for x in example_inputs))
        parts.append(_shape_env(find_shape_env(gm, example_inputs)))
    except _Unsigned:
        return None
    parts.append(f"tf32:{torch.get_float32_matmul_precision()},{torch.backends.cudnn.allow_tf32}")
    return "\n".join(parts)


def _value(v) -> str:
    if isinstance(v, torch.Tensor):
        return (f"T({','.join(map(_size, v.shape))};{','.join(map(_size, v.stride()))};{_size(v.storage_offset())};"
                f"{v.dtype};{v.layout};{v.device})")
    if isinstance(v, torch.SymInt | torch.SymFloat | torch.SymBool):
        return f"S({_text(v.node.expr)})"
    if v is None or isinstance(v, bool | int | float | str | torch.dtype | torch.device | torch.memory_format):
        return repr(v)
    if isinstance(v, list | tuple):
        return "(" + ",".join(_value(x) for x in v) + ")"
    raise _Unsigned(type(v).__name__)


def _size(n) -> str:
    return _text(n.node.expr) if isinstance(n, torch.SymInt) else str(n)


@functools.lru_cache(maxsize=4096)
def _text(e: sympy.Basic) -> str:
    """``str`` of a size expression, once per expression: a graph's tensors repeat a few sizes and strides, and
    printing a large one takes milliseconds (Swin's window-padding sizes under dynamic=True: 4.6 s of signatures)."""
    return str(e)


def _shape_env(env) -> str:
    """The symbols' ranges, hints and Dynamo's replacements and equality guards (all of them: cheap, and the
    same in a second process that traces the same model)."""
    if env is None:
        return "no shape env"
    return "\n".join([
        "ranges:" + repr(sorted((str(k), str(v)) for k, v in env.var_to_range.items())),
        "hints:" + repr(sorted((str(k), str(v)) for k, v in backed_hints(env).items())),
        "replacements:" + repr(sorted((str(k), _text(v)) for k, v in getattr(env, "replacements", {}).items())),
        "equalities:" + repr([_text(g.expr) for g in getattr(env, "guards", ()) if isinstance(getattr(g, "expr", None), sympy.Eq)]),
    ])
