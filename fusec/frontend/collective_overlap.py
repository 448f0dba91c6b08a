"""Overlap of collectives with compute, by PyTorch's own scheduler, before import.

With ``options={"overlap_collectives": True}`` a graph holding functional
collectives (tensor parallelism's all-gathers and reduce-scatters, a
``python_reducer`` backward's all-reduces) first goes through
``torch._inductor.fx_passes.overlap_scheduling.schedule_overlap_bucketing``, the
pass TorchTitan runs under ``aot_eager``: it buckets collectives of one group
into one launch and moves each collective early and its wait late, so that
independent compute runs while data moves.  fusec then imports the rescheduled
graph; its passes keep the collectives' order (``fusec.analysis.collectives``),
so the overlap survives fusion.

Two adaptations, both here so the rest of fusec sees an ordinary functional graph:

* Torch's all-gather bucket writes into a buffer it allocates
  (``all_gather_into_tensor_out(x, ..., out=empty)``, the input first copied into
  this rank's slot of that buffer).  ``functional_all_gathers`` rewrites that back
  into ``all_gather_into_tensor(x, ...)``: the same values, no mutation.
* Torch's scheduler estimates compute by a roofline of the GPU it runs on; where
  no GPU is visible it cannot run, and the graph is imported as it came, with a
  remark saying so.

Runtimes are estimated analytically (no benchmarking at compile time, so every
rank schedules from the same numbers).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import torch
import torch.fx

from fusec.base import remarks

PASS = "overlap-collectives"
_c10d = torch.ops._c10d_functional
_EMPTY = (torch.ops.aten.empty.memory_format, torch.ops.aten.empty_strided.default, torch.ops.aten.new_empty.default)
_SLOT_VIEWS = (torch.ops.aten.slice.Tensor, torch.ops.aten.narrow.default, torch.ops.aten.view.default,
               torch.ops.aten.reshape.default)


def waits(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target == _c10d.wait_tensor.default]


def runtime_estimates_available() -> bool:
    """Whether torch's scheduler can estimate runtimes here: its roofline reads the GPU's bandwidth."""
    return torch.cuda.is_available()


def schedule_collective_overlap(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm`` bucketed and rescheduled by torch's overlap scheduler (a graph without collectives as it is)."""
    before = len(waits(gm))
    if not before:
        return gm
    if not runtime_estimates_available():
        remarks.emit(PASS, "declined", f"{before} collective(s) kept in the traced order: torch's overlap scheduler "
                                       "estimates runtimes on a GPU and none is visible")
        return gm
    from torch._inductor.fx_passes.overlap_scheduling import schedule_overlap_bucketing

    order_before = _collective_order(gm)
    gm = schedule_overlap_bucketing(gm, **_supported_kwargs(schedule_overlap_bucketing, {
        "collective_bucketing": True, "compute_estimator": "analytical", "collective_estimator": "analytical"}))
    rewritten = functional_all_gathers(gm)
    gm.recompile()
    remarks.emit(PASS, "scheduled",
                 f"torch's overlap scheduler: {before} collective(s) -> {len(waits(gm))} after bucketing "
                 f"({rewritten} all-gather bucket(s) made functional); order before: {', '.join(order_before)}; "
                 f"after: {', '.join(_collective_order(gm))}")
    return gm


def _supported_kwargs(fn: Callable, wanted: dict) -> dict:
    """The keyword arguments of ``wanted`` that this torch's ``fn`` takes (its signature changes between releases)."""
    params = inspect.signature(fn).parameters
    return {k: v for k, v in wanted.items() if k in params}


def _collective_order(gm: torch.fx.GraphModule) -> list[str]:
    return [n.name for n in gm.graph.nodes
            if n.op == "call_function" and getattr(n.target, "namespace", None) == "_c10d_functional"
            and n.target != _c10d.wait_tensor.default]


def functional_all_gathers(gm: torch.fx.GraphModule) -> int:
    """Rewrite ``all_gather_into_tensor_out(x, size, group, out=E)``, ``E`` a fresh buffer read by nothing else
    (``x`` maybe ``copy_(slot of E, src)``), as ``all_gather_into_tensor(src or x, size, group)``.  Returns how many."""
    graph = gm.graph
    count = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target != _c10d.all_gather_into_tensor_out.default:
            continue
        out = node.kwargs.get("out")
        source, size, group = node.args
        if not _fresh_buffer(out):
            continue
        copy = source if _is_copy_into(source, out) else None
        value = copy.args[1] if copy is not None else source
        slot_views = _views_down(copy.args[0])[0] if copy is not None else []
        if copy is None and _views_down(source)[1] is out:
            continue  # x is a view of E written some other way: leave it (the import says why it cannot take it)
        if not _same_slot(copy, value) or not _read_only_by(out, node, copy, slot_views):
            continue
        with graph.inserting_before(node):
            gathered = graph.call_function(_c10d.all_gather_into_tensor.default, (value, size, group))
        gathered.meta = dict(node.meta)
        node.replace_all_uses_with(gathered)
        graph.erase_node(node)
        for dead in _erasable([copy, *slot_views] if copy is not None and not copy.users else [], out):
            graph.erase_node(dead)
        count += 1
    if count:
        graph.lint()
    return count


def _fresh_buffer(node) -> bool:
    return isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target in _EMPTY


def _views_down(node) -> tuple[list[torch.fx.Node], object]:
    """The slot views ``node`` is made of, outermost first, and the value under them."""
    views = []
    while isinstance(node, torch.fx.Node) and node.target in _SLOT_VIEWS:
        views.append(node)
        node = node.args[0]
    return views, node


def _is_copy_into(node, buffer: torch.fx.Node) -> bool:
    """``node`` is ``copy_(a view of buffer, value)``."""
    return (isinstance(node, torch.fx.Node) and node.target == torch.ops.aten.copy_.default
            and _views_down(node.args[0])[1] is buffer)


def _read_only_by(buffer: torch.fx.Node, gather: torch.fx.Node, copy: torch.fx.Node | None,
                  slot_views: list[torch.fx.Node]) -> bool:
    """Nothing but the gather (and the views leading to the copy into its slot) reads the buffer: else a reader
    would see the gathered values, which the functional gather puts in a buffer of its own."""
    chain = {gather, *slot_views}
    return all(set(view.users) <= {copy, *slot_views} for view in slot_views) and set(buffer.users) <= chain


def _same_slot(copy: torch.fx.Node | None, value) -> bool:
    """The copied value fills the slot exactly (same shape and dtype): then gathering it gathers the slot."""
    if copy is None:
        return True
    slot, src = (getattr(n, "meta", {}).get("val") for n in (copy.args[0], value))
    return (isinstance(slot, torch.Tensor) and isinstance(src, torch.Tensor) and slot.dtype == src.dtype
            and tuple(slot.shape) == tuple(src.shape))


def _erasable(chain: list[torch.fx.Node], buffer: torch.fx.Node) -> list[torch.fx.Node]:
    """Of the copy and the views it wrote through (``chain``, readers first) and the buffer, those nothing else
    reads once the earlier ones are gone, in an order they can be erased."""
    erasable, gone = [], set()
    for n in [*chain, buffer]:
        if all(u in gone for u in n.users):
            erasable.append(n)
            gone.add(n)
    return erasable
