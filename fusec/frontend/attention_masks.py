"""Attention masks that torch's fused attention kernels accept, before AOTAutograd chooses the kernel.

``scaled_dot_product_attention`` picks its kernel (cuDNN, flash, memory-efficient or the
math decomposition) from its arguments' dtypes, sizes and layouts when AOTAutograd traces
it, and the graph fusec receives holds whatever it picked.  Under ``torch.compile``,
transformers cannot test a padding mask for all-true, so BERT and ViT pass sdpa a bool
mask made by broadcasting (``[B, 1, T, T]``, strides ``(0, T, 1, 0)``) where eager passes
none.  The fused kernels need a mask dense along the keys: with that one the trace picks
the math decomposition (two bmms in fp32 around a softmax), 10x the fused kernel's time
(H200, BERT's attention in bf16: 315 us against 29; BENCHMARKS.md).

``dense_attention_masks`` rewrites Dynamo's graph before AOTAutograd traces it: where the
mask's layout is the only reason the fused kernels decline (torch's own choice, asked of
the traced arguments and of the same arguments with a dense mask), sdpa gets a dense
additive mask in the query's dtype, 0 where a position is attended and -inf where not:
the values torch's composite makes from a bool mask itself before it calls a fused kernel
(``convert_boolean_attn_mask``), computed here by a fusec kernel from the mask's own
producer.  Each rewrite is a remark; so is an attention that stays the math decomposition
for another reason, so that the report says why.

Only 16-bit attention is rewritten by default: the fused kernels' gain comes from tensor cores, and in fp32
torch's one fused kernel (memory-efficient attention) runs without them.  Measured on an H100, ViT's fp32
training step (12 layers, 197 tokens, head size 64) spent 1593 µs in that kernel's forward and backward,
against about 850 µs for the math decomposition's cuBLAS bmms and softmax kernels; BERT's fp32 inference was
2.6% slower whole.  The math decomposition holds ``[B, H, Tq, Tk]`` fp32 scores for the backward (the remark
gives their size): ``include_fp32`` (backend option ``dense_attention_masks="all"``) rewrites fp32 too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import sympy
import torch
import torch.fx
from torch._dynamo.source import ConstantSource
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, is_concrete_int

from fusec.base import remarks

PASS = "dense-attention-masks"
_SDPA = (torch._C._nn.scaled_dot_product_attention, torch.nn.functional.scaled_dot_product_attention)
_NAMES = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal")

Chooser = Callable[..., "bool | FixesSizes | None"]
_FUSED = ("_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
          "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu",
          "_scaled_dot_product_fused_attention_overrideable")


@dataclass(frozen=True)
class FixesSizes:
    """torch fuses the call only by reading size symbols as numbers: AOTAutograd's trace would fix them, and under
    dynamic shapes every new size would compile again."""

    guards: str  # what it would guard, e.g. "Eq(s52, 8), Eq(s27, 128)"


def torch_fuses(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                enable_gqa=False) -> bool | FixesSizes | None:
    """Whether torch runs this sdpa call, traced, as one of its fused kernels (None: the call fails to trace).

    Asked by tracing the call as AOTAutograd will (``make_fx`` over the same fake tensors): torch's composite
    picks the kernel in C++ from the tensors' metadata, while the ``_fused_sdp_choice`` op called on fake
    tensors answers from its meta kernel (always math).  Symbolic sizes are traced apart (``_apart``): CUDA's
    choice reads some sizes as numbers, and in Dynamo's own shape environment that would fix them for the whole
    graph (a guard ``Eq(s, 8)`` each: a recompile for every new size).  Tests replace this function to play
    another machine's rules.
    """
    from torch.fx.experimental.proxy_tensor import make_fx

    def call(q, k, v, m):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m, dropout_p=dropout_p, is_causal=is_causal,
                                                                scale=scale, enable_gqa=enable_gqa)

    tensors = (query, key, value, attn_mask)
    try:
        mode, renamed, copies = _apart(tensors)
        with mode or getattr(query, "fake_mode", None) or contextlib.nullcontext():
            traced = make_fx(call)(*copies)
    except Exception:  # noqa: BLE001 -- the user's call is wrong (torch says so when it runs), or a size has no hint
        return None
    fused = any(getattr(n.target, "_opname", None) in _FUSED for n in traced.graph.nodes)
    env = mode.shape_env if mode else None
    fixed = [f"{renamed.get(s, s)} == {v}" for s, v in env.replacements.items() if v.is_number] if env else []
    return FixesSizes(", ".join(sorted(fixed))) if fused and fixed else fused


def _apart(tensors) -> tuple[FakeTensorMode | None, dict[sympy.Symbol, sympy.Symbol], list]:
    """``tensors`` again, in a fake mode of their own whose shape environment has a new symbol (same hint) for
    each of theirs, so that tracing over them guards nothing of Dynamo's; also each new symbol's old one.
    Unchanged (and no mode) when every size is static."""
    if not any(isinstance(t, torch.Tensor) and _has_symbols(t) for t in tensors):
        return None, {}, list(tensors)
    env = ShapeEnv()
    fresh: dict[sympy.Symbol, sympy.Expr] = {}

    def again(size):
        if not isinstance(size, torch.SymInt):
            return size
        node = size.node
        hints = getattr(node.shape_env, "backed_var_to_val", None) or node.shape_env.var_to_val  # renamed in torch 2.13
        for symbol in node.expr.free_symbols:
            if symbol not in fresh:  # an unbacked symbol has no hint: KeyError, and torch_fuses answers None
                fresh[symbol] = env.create_symbol(int(hints[symbol]), ConstantSource(f"fusec_probe_{symbol}"),
                                                  dynamic_dim=DimDynamic.DYNAMIC)
        return env.create_symintnode(node.expr.xreplace(fresh), hint=node.hint)

    mode = FakeTensorMode(shape_env=env)
    copies = []
    with mode:
        for t in tensors:
            if not isinstance(t, torch.Tensor):
                copies.append(t)
                continue
            sizes, strides = [again(s) for s in t.shape], [again(s) for s in t.stride()]
            offset = again(t.storage_offset())
            if isinstance(offset, int) and offset == 0:
                copies.append(torch.empty_strided(sizes, strides, dtype=t.dtype, device=t.device))
            else:
                extent = offset + 1 + sum((n - 1) * s for n, s in zip(sizes, strides, strict=True))
                copies.append(torch.empty(extent, dtype=t.dtype, device=t.device).as_strided(sizes, strides, offset))
    return mode, {new: old for old, new in fresh.items()}, copies


def _has_symbols(t: torch.Tensor) -> bool:
    return any(isinstance(s, torch.SymInt) for s in (*t.shape, *t.stride(), t.storage_offset()))


def dense_attention_masks(gm: torch.fx.GraphModule, choose: Chooser | None = None,
                          include_fp32: bool = False) -> torch.fx.GraphModule:
    """Give every 16-bit sdpa call (every one with ``include_fp32``) whose mask layout alone keeps it off the fused
    kernels a dense additive mask.

    ``choose``: whether torch fuses a call with these arguments (default ``torch_fuses``).
    """
    fuses = _remembered(choose or torch_fuses)  # every layer asks alike: one trace (5 ms) per distinct call
    dense_of: dict[tuple[torch.fx.Node, torch.dtype], torch.fx.Node] = {}  # one dense mask per mask and dtype
    changed = False
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target not in _SDPA:
            continue
        args = _bound(node)
        mask = args.get("attn_mask")
        values = {name: _value(arg) for name, arg in args.items()}
        query, mask_value = values.get("query"), values.get("attn_mask")
        if not isinstance(query, torch.Tensor) or not isinstance(mask, torch.fx.Node) or not isinstance(mask_value, torch.Tensor):
            continue
        where = _where(node)
        if _fused(fuses, values) is not False:
            continue
        dense = _dense_like(mask_value, query.dtype)
        answer = None if dense is None else _fused(fuses, {**values, "attn_mask": dense})
        if isinstance(answer, FixesSizes):
            remarks.emit(PASS, "math-attention", f"attention{where} stays the math decomposition (bmm, softmax, bmm): "
                         f"with a dense mask torch's fused kernel choice reads its sizes as numbers ({answer.guards}), "
                         "and the graph would compile again for every new size")
            continue
        if answer is not True:
            remarks.emit(PASS, "math-attention", f"attention{where} runs as the math decomposition (bmm, softmax, "
                         "bmm) with a dense mask too: torch's fused kernels decline its dtypes, sizes or options")
            continue
        if query.dtype == torch.float32 and not include_fp32:
            remarks.emit(PASS, "math-attention", f"attention{where} stays the math decomposition (bmm, softmax, bmm): "
                         "in fp32 torch's one fused kernel, memory-efficient attention, has no tensor-core path and "
                         "runs slower than cuBLAS's bmms (ViT's fp32 training step on an H100: 1593 against ~850 "
                         f"µs); its scores take {_scores_bytes(query, values.get('key'))} "
                         "(dense_attention_masks='all' rewrites fp32 too)")
            continue
        key = (mask, query.dtype)
        if key not in dense_of:
            with gm.graph.inserting_before(node):  # before its first user, in order
                dense_of[key] = _additive_mask(gm.graph, mask, mask_value, query.dtype)
        _set_mask(node, dense_of[key])
        changed = True
        remarks.emit(PASS, "dense-mask", f"attention{where}: its {_layout(mask_value)} mask keeps it off torch's "
                     f"fused kernels (math decomposition); given a dense {_short(query.dtype)} additive mask instead")
    if changed:
        gm.graph.lint()
        gm.recompile()
    return gm


def _remembered(fuses: Chooser) -> Chooser:
    answers: dict[tuple, bool | FixesSizes | None] = {}

    def asked(*args, **kwargs):
        key = tuple(_signature(a) for a in args) + tuple((k, _signature(v)) for k, v in sorted(kwargs.items()))
        if key not in answers:
            answers[key] = fuses(*args, **kwargs)
        return answers[key]

    return asked


def _signature(value) -> object:
    """What torch's kernel choice can depend on: a tensor's sizes, strides, dtype, device and offset (sizes as their
    symbols under symbolic shapes), or the value itself."""
    if isinstance(value, torch.Tensor):
        return (str(tuple(value.shape)), str(value.stride()), value.dtype, str(value.device), str(value.storage_offset()))
    return value


def _bound(node: torch.fx.Node) -> dict:
    args = dict(zip(_NAMES, node.args, strict=False))
    args.update(node.kwargs)
    return args


def _value(arg):
    return arg.meta.get("example_value") if isinstance(arg, torch.fx.Node) else arg


def _fused(fuses: Chooser, values: dict) -> bool | FixesSizes | None:
    return fuses(values["query"], values["key"], values["value"], values.get("attn_mask"), values.get("dropout_p", 0.0),
                 values.get("is_causal", False), scale=values.get("scale"), enable_gqa=values.get("enable_gqa", False))


def _dense_like(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor | None:
    """A contiguous tensor of the additive mask's size and dtype, in the mask's fake mode."""
    mode = getattr(mask, "fake_mode", None)
    if mode is None:
        return None
    with mode:
        return torch.empty(mask.shape, dtype=dtype if mask.dtype == torch.bool else mask.dtype, device=mask.device)


def _additive_mask(graph: torch.fx.Graph, mask: torch.fx.Node, value: torch.Tensor, dtype: torch.dtype) -> torch.fx.Node:
    """``where(mask, 0, -inf)`` in ``dtype`` (a float mask: itself), made contiguous."""
    if value.dtype == torch.bool:
        additive = graph.call_function(torch.where, (mask, 0.0, float("-inf")))
        additive = graph.call_method("to", (additive, dtype))
    else:
        additive = mask
    return graph.call_method("contiguous", (additive,))


def _set_mask(node: torch.fx.Node, dense: torch.fx.Node) -> None:
    if "attn_mask" in node.kwargs:
        node.update_kwarg("attn_mask", dense)
    else:
        node.update_arg(_NAMES.index("attn_mask"), dense)


def _where(node: torch.fx.Node) -> str:
    stack = node.meta.get("stack_trace") or ""
    lines = [line.strip() for line in stack.splitlines() if line.strip().startswith("File ")]
    return f" ({lines[-1]})" if lines else f" ({node.name})"


def _scores_bytes(query: torch.Tensor, key) -> str:
    """The fp32 ``[B, H, Tq, Tk]`` scores' size, in MiB at static sizes, else as an expression of the size symbols."""
    tk = key.shape[-2] if isinstance(key, torch.Tensor) else query.shape[-2]
    size = 4 * query.shape[:-1].numel() * tk
    if not is_concrete_int(size):
        return f"{size} bytes"
    size = int(size)
    return f"{size / 2**20:.1f} MiB" if size >= 2**20 else f"{size / 2**10:.1f} KiB"


def _layout(mask: torch.Tensor) -> str:
    return f"{_short(mask.dtype)} {list(mask.shape)} strides {list(mask.stride())}"


def _short(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
