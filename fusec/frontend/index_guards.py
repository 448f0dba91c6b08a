"""Upper bounds for size symbols, guarded, so that kernels under ``dynamic=True`` can index in int32.

Dynamo's size symbols are unbounded above (``[2, int_oo]``), so ``schedule-kernels`` cannot prove an index
that grows with one stays inside int32 and makes it int64: a full sum over ``s0`` elements ran 1.13x its static
time, and four row reductions 1.27x (H200).  Inductor guards each kernel's element count below int32's maximum.
fusec instead bounds every symbol a tensor's extent depends on by its hint times one factor, the largest power of
two that keeps every tensor's extent (at those bounds) within half of int32's range, and asks Dynamo to guard
``s <= bound``: the ShapeEnv then narrows the symbol's range, the graph declares it, and the pass's own interval
analysis (which counts masked tail lanes) decides int32 or int64 as for static sizes.  A larger size fails the
guard and Dynamo recompiles for it.

Only a graph Dynamo compiles before building its guards (a forward or an inference graph) may add one; a
backward graph reads the ranges its forward narrowed.  A warm start that takes the graph from the cache without
importing it applies the same guards again (``apply``).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import sympy
import torch

from fusec.base import remarks
from fusec.frontend.exprs import backed_hints, symbol_bounds

EXTENT_LIMIT = 2**30  # half of int32's range: room for masked tail lanes and index arithmetic past the end
MIN_FACTOR = 4  # a tighter window would recompile for sizes a little past the first call's: keep int64 then
MAX_FACTOR = 2**16


def plan(gm: torch.fx.GraphModule, shape_env) -> tuple[tuple[str, int], ...]:
    """(symbol, upper bound) for each backed symbol some tensor's extent grows with and whose range has no upper
    end; empty when the window would be under ``MIN_FACTOR`` times the hints (int64 then, as before)."""
    if shape_env is None:
        return ()
    hints = {str(k): int(v) for k, v in backed_hints(shape_env).items()}
    if not hints:  # static sizes
        return ()
    extents = _extents(gm)
    symbols = sorted({str(s) for e in extents for s in e.free_symbols} & hints.keys())
    if not symbols:
        return ()
    factor = 1
    while factor < MAX_FACTOR and _fits(extents, {s: hints[s] * factor * 2 for s in symbols}):
        factor *= 2
    if factor < MIN_FACTOR:
        return ()
    ranges = {str(k): symbol_bounds(v) for k, v in shape_env.var_to_range.items()}
    # A range with an upper end stays as it is: the user's (mark_dynamic(..., max=N), which a narrower guard would
    # violate) or one Dynamo already narrowed; the pass's analysis reads it either way.
    return tuple((s, hints[s] * factor) for s in symbols if s in ranges and ranges[s][1] is None)


def apply(gm: torch.fx.GraphModule, example_inputs: Sequence, guards: tuple[tuple[str, int], ...]) -> bool:
    """Guard ``symbol <= bound`` for each of ``guards`` through a SymInt of the graph's inputs that is the bare
    symbol; False (nothing guarded past the first failure) if one is missing or its hint is past its bound."""
    return _guard_through(_bare_symints(gm, example_inputs), guards)


def _guard_through(symints: dict[str, torch.SymInt], guards: tuple[tuple[str, int], ...]) -> bool:
    for name, bound in guards:
        s = symints.get(name)
        if s is None or not bool(s <= bound):  # bool() of a SymBool is a guard
            return False
    return True


def guard(gm: torch.fx.GraphModule, example_inputs: Sequence, shape_env) -> tuple[tuple[str, int], ...]:
    """``plan`` then ``apply``, for the symbols an input gives bare (a guard is made through one); the guards
    applied, with a remark naming them.  Exactly these narrow the ranges the graph declares, so a warm start that
    applies them again reproduces what the cached code assumes."""
    bare = _bare_symints(gm, example_inputs)
    guards = tuple((s, bound) for s, bound in plan(gm, shape_env) if s in bare)
    if not guards or not _guard_through(bare, guards):  # cannot fail here: each bound is past its hint
        return ()
    remarks.emit("importer", "size-guard", "sizes guarded so that indices fit int32 (a larger size recompiles): "
                 + ", ".join(f"{s} <= {bound}" for s, bound in guards))
    return guards


def _extents(gm: torch.fx.GraphModule) -> list[sympy.Expr]:
    """Each traced tensor's element count and the extent of storage its strides reach, where symbolic."""
    out: list[sympy.Expr] = []
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        for t in (val if isinstance(val, list | tuple) else (val,)):
            if not isinstance(t, torch.Tensor):
                continue
            maybe_sizes, maybe_strides = [_expr(n) for n in t.shape], [_expr(n) for n in t.stride()]
            sizes = [e for e in maybe_sizes if e is not None]
            strides = [e for e in maybe_strides if e is not None]
            if len(sizes) != len(maybe_sizes) or len(strides) != len(maybe_strides):
                continue
            reach = sympy.Integer(1) + sympy.Add(*((n - 1) * st for n, st in zip(sizes, strides, strict=True)))
            for e in (sympy.Mul(*sizes), reach):
                if isinstance(e, sympy.Expr) and e.free_symbols:
                    out.append(e)
    return out


def _expr(n) -> sympy.Expr | None:
    if isinstance(n, int):
        return sympy.Integer(n)
    if isinstance(n, torch.SymInt):
        return n.node.expr
    return None


def _fits(extents: list[sympy.Expr], values: dict[str, int]) -> bool:
    for e in extents:
        value = e.xreplace({s: sympy.Integer(values[s.name]) for s in e.free_symbols if s.name in values})
        if not value.is_number or value > EXTENT_LIMIT:
            return False
    return True


def _bare_symints(gm: torch.fx.GraphModule, example_inputs: Sequence) -> dict[str, torch.SymInt]:
    """symbol name -> a SymInt of the inputs whose expression is just that symbol."""
    out: dict[str, torch.SymInt] = {}
    placeholders = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
    for v in itertools.chain(placeholders, example_inputs):
        for n in (v.shape if isinstance(v, torch.Tensor) else (v,)):
            if isinstance(n, torch.SymInt) and isinstance(n.node.expr, sympy.Symbol):
                out.setdefault(n.node.expr.name, n)
    return out
