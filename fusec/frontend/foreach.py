"""``aten._foreach_*`` ops (optimizers' ``foreach=True`` path) as one per-tensor op per list element.

``_foreach_add.List(xs, ys)`` is ``[add(x, y) for x, y in zip(xs, ys)]``: each
element becomes the pointwise op it stands for, which the importer lowers
natively and the fusion passes group (combo kernels), where the foreach op
itself would run as one opaque torch call.  List arguments are taken element by
element, the others passed to every call.  Decomposed: the functional overloads
whose per-tensor op is pointwise and takes the same arguments in the same order;
``addcmul``/``addcdiv`` take their ``value`` by keyword.  Not decomposed: in-place
and ``out`` overloads (functionalization removes them before fusec sees a graph),
and ``Tensor scalars`` overloads (one 1-D tensor of per-element scalars).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

aten = torch.ops.aten

# Pointwise per-tensor ops that have a foreach form: their overloads decompose.
POINTWISE = [
    "abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "erfc", "exp", "expm1", "floor", "frac", "lgamma",
    "log", "log10", "log1p", "log2", "neg", "reciprocal", "round", "rsqrt", "sigmoid", "sign", "sin", "sinh", "sqrt",
    "tan", "tanh", "trunc", "add", "sub", "mul", "div", "maximum", "minimum", "clamp_min", "clamp_max", "pow", "lerp",
    "addcmul", "addcdiv",
]

_VALUE_BY_KEYWORD = {"addcmul", "addcdiv"}  # foreach passes `value` by position, the per-tensor op takes it by name
_WITH_A_NUMBER = {"maximum": "clamp_min", "minimum": "clamp_max"}  # maximum(x, 0.5) is spelled clamp_min(x, 0.5)


def _is_list(arg) -> bool:
    return isinstance(arg.type, torch.ListType)


def _per_element(name: str, overload) -> Callable | None:
    """The decomposition of one ``_foreach_<name>`` overload, or None where it does not apply."""
    schema = overload._schema
    if schema.is_mutable or overload._overloadname.endswith("out") or not any(_is_list(a) for a in schema.arguments):
        return None
    if any(a.name == "scalars" and not _is_list(a) for a in schema.arguments):
        return None
    takes_number = len(schema.arguments) > 1 and "Tensor" not in str(schema.arguments[1].type)
    per_tensor = getattr(aten, _WITH_A_NUMBER.get(name, name) if takes_number else name)
    arguments = schema.arguments

    def decompose(*args, **kwargs):
        values = {a.name: (args[i] if i < len(args) else kwargs.get(a.name, a.default_value))
                  for i, a in enumerate(arguments)}
        count = len(next(values[a.name] for a in arguments if _is_list(a)))
        results = []
        for i in range(count):
            positional, keywords = [], {}
            for a in arguments:
                v = values[a.name][i] if _is_list(a) else values[a.name]
                if a.kwarg_only:
                    keywords[a.name] = v
                elif name in _VALUE_BY_KEYWORD and a.name in ("value", "scalars"):
                    keywords["value"] = v
                else:
                    positional.append(v)
            results.append(per_tensor(*positional, **keywords))
        return results

    return decompose


def foreach_decompositions() -> dict:
    """``_foreach_*`` overload -> its per-element decomposition, for the ops in ``POINTWISE`` this torch has."""
    table = {}
    for name in POINTWISE:
        packet = getattr(aten, f"_foreach_{name}", None)
        if packet is None:
            continue
        for overload_name in packet.overloads():
            overload = getattr(packet, overload_name)
            fn = _per_element(name, overload)
            if fn is not None:
                table[overload] = fn
    return table
