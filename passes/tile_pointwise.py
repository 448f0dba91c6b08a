"""tile-pointwise: pointwise kernels whose flat loads would be uncoalesced become 2-D tiles.

In:  a graph after the fusion passes and combo-grouping.
Out: some pointwise kernels ``[xnumel]``, combo members included (a combo gives a tiled
     member a program per tile), rewritten as ``tiled`` kernels over
     ``[xnumel/W, W]``, with ``x := W*x + r`` in every index (the new ``x`` runs over
     rows, ``r`` over the W columns of a row).  Same name, same buffers, same results.

Candidate inner extents W are the divisors of ``x`` in the kernel's indices
(``floordiv(x, W)``, ``mod(x, W)``: the dims that view folding split ``x`` into), kept
only where sympy proves that W divides xnumel (symbolic sizes included).  An access
(a load or store index) is judged by its *stride*: how far its address moves when an
iteration variable grows by one, away from the points where a floordiv/mod wraps.

* A flat access is *strided* when its stride along x is neither 0 nor 1 (a
  transposed read: neighbouring lanes hit different 32-byte sectors).  W *fixes* it
  when, after the split, its stride along the new x or along r is 1 (a 2-D tile loads
  it coalesced along that axis), or a constant below the flat stride (a transpose of
  a slice with a step: fewer sectors a row of the tile).
* W *saves* the floordiv/mod of a broadcast: ``b[floordiv(x, W)]`` reads ``b[x]``
  once per tile row, ``w[mod(x, W)]`` reads ``w[r]`` once per tile column.

The W fixing most strided accesses is chosen, then the one saving most div/mods; a
W that leaves a contiguous access contiguous along neither axis is never chosen.
A kernel is tiled when its W fixes an access, or when it has no strided access and
(``broadcasts``) its W saves a div/mod without leaving more than 1/8 of the tile's
lanes idle (a static W of 3 fills 3 of 4 columns; 40 fills 40 of 64) and without rows
that do not provably start a multiple of 4 bytes apart (``misaligned_rows``: 6x slower than
the flat kernel on a padding copy of 50257-wide bf16 rows).
A strided access left strided gets a ``tile-declined`` remark saying why (no
extent to split by, an extent that does not provably divide xnumel, or one that
leaves the access strided along both axes).

Options:
  broadcasts: also tile kernels whose only gain is dropping the div/mod of a
      broadcast operand (default true; false tiles transposes only).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import sympy
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern, op_type_rewrite_pattern

from fusec.analysis import cost_model, heuristics
from fusec.base import remarks
from fusec.base.shapes import FloorDiv, Mod, print_expr
from fusec.dialects import fusec as F
from fusec.passes.kernel_index import R, X, equal, simplify_in_domain

PASS = "tile-pointwise"
MAX_IDLE_LANES = 1 / 8  # a broadcast alone is not worth a tile with more idle lanes than this
_INDEXED = (F.LoadOp, F.StoreOp, F.SymbolicOp)


# ---------------------------------------------------------------- index algebra


def divides(d: sympy.Expr, n: sympy.Expr) -> bool:
    """sympy proves that d divides n for every value of the size symbols."""
    return bool(sympy.cancel(n / d).is_integer)


@functools.lru_cache(maxsize=8192)  # pure; asked of every access for each candidate tiling, and recursively
def stride(e: sympy.Expr, v: sympy.Symbol) -> sympy.Expr | None:
    """How far ``e`` moves when ``v`` grows by one, away from wrap points of its floordiv/mod; None: not affine in v.

    ``mod(a, m)`` moves like ``a`` between wraps; ``floordiv(a, d)`` stays put unless ``a``
    moves by whole multiples of ``d``.
    """
    if v not in e.free_symbols:
        return sympy.Integer(0)
    if e == v:
        return sympy.Integer(1)
    if isinstance(e, sympy.Add):
        parts = [stride(a, v) for a in e.args]
        return None if any(p is None for p in parts) else sympy.Add(*parts)
    if isinstance(e, sympy.Mul):
        moving = [f for f in e.args if v in f.free_symbols]
        inner = stride(moving[0], v) if len(moving) == 1 else None
        return None if inner is None else sympy.Mul(*[f for f in e.args if f is not moving[0]]) * inner
    if isinstance(e, (sympy.Mod, FloorDiv)) and v not in e.args[1].free_symbols:
        inner = stride(e.args[0], v)
        if inner is None or isinstance(e, sympy.Mod):
            return inner
        whole = sympy.cancel(inner / e.args[1])
        return whole if whole.is_integer else sympy.Integer(0)
    return None


def div_mods(e: sympy.Expr) -> int:
    """The floordiv/mod of iteration variables an index computes per element."""
    return sum(1 for a in e.atoms(FloorDiv, sympy.Mod) if a.free_symbols & {X, R})


def split_x(e: sympy.Expr, w: sympy.Expr, domain: Sequence[sympy.Expr]) -> sympy.Expr:
    """``e`` with ``x := w*x + r`` (0 <= r < w), simplified in the tiled ``domain``.

    The floordiv/mod of x by a multiple or a divisor of w are rewritten first, so that
    ``floordiv(x, w*k)`` reads ``floordiv(x, k)`` and ``mod(x, d)`` with d | w reads ``mod(r, d)``.
    """
    return _split_x(sympy.sympify(e), sympy.sympify(w), tuple(domain))


@functools.lru_cache(maxsize=8192)  # pure; each candidate width asks again for every load of a kernel
def _split_x(e: sympy.Expr, w: sympy.Expr, domain: tuple[sympy.Expr, ...]) -> sympy.Expr:

    def walk(t: sympy.Expr) -> sympy.Expr:
        if t == X:
            return w * X + R
        if isinstance(t, (FloorDiv, sympy.Mod)) and t.args[0] == X:
            d = t.args[1]
            if divides(w, d):  # d = w*k: the column never carries into it
                k = sympy.cancel(d / w)
                return FloorDiv(X, k) if isinstance(t, FloorDiv) else w * Mod(X, k) + R
            if divides(d, w):  # w = d*k: whole rows are multiples of d
                k = sympy.cancel(w / d)
                return k * X + FloorDiv(R, d) if isinstance(t, FloorDiv) else Mod(R, d)
        if X not in t.free_symbols:  # rebuilding re-evaluates each floordiv/mod: only what holds x is rebuilt
            return t
        return t.func(*[walk(a) for a in t.args])

    return simplify_in_domain(walk(e), domain)


# ---------------------------------------------------------------- the decision


def _index(op: Operation) -> sympy.Expr:
    if isinstance(op, F.SymbolicOp):
        return op.expr.data
    assert isinstance(op, (F.LoadOp, F.StoreOp)), "only accesses and size expressions have an index"
    return op.index.data


def _what(op: Operation) -> str:
    kind = "load" if isinstance(op, F.LoadOp) else "store" if isinstance(op, F.StoreOp) else "symbolic"
    return f"{kind} [{print_expr(_index(op))}]"


def strided_accesses(kernel: F.KernelOp) -> list[F.LoadOp | F.StoreOp]:
    """Loads and stores whose flat index moves by neither 0 nor 1 as x grows (run-time offsets aside)."""
    found = []
    for op in kernel.block.ops:
        if isinstance(op, (F.LoadOp, F.StoreOp)) and getattr(op, "offset", None) is None:
            s = stride(op.index.data, X)
            if s is not None and s not in (0, 1):
                found.append(op)
    return found


def candidate_extents(kernel: F.KernelOp) -> list[sympy.Expr]:
    """The W of ``floordiv(x, W)``/``mod(x, W)`` in the kernel's indices, in a stable order."""
    out: list[sympy.Expr] = []
    for op in kernel.block.ops:
        if isinstance(op, _INDEXED):
            atoms = _index(op).atoms(FloorDiv, sympy.Mod)
            for a in sorted(atoms, key=sympy.default_sort_key):
                if a.args[0] == X and a.args[1] != 1 and not any(equal(a.args[1], w) for w in out):
                    out.append(a.args[1])
    return out


@dataclass(frozen=True)
class Tiling:
    """A split ``x := w*x + r`` and what it buys."""

    w: sympy.Expr
    domain: tuple[sympy.Expr, sympy.Expr]
    before: dict[int, sympy.Expr]  # id(op) -> its flat index
    indices: dict[int, sympy.Expr]  # id(op) -> its index after the split
    fixed: int  # strided accesses the tile reads contiguously (or with a smaller step)
    saved: int  # floordiv/mod per element removed

    @property
    def score(self) -> tuple[int, int]:
        return self.fixed, self.saved

    def fixes(self, access: Operation) -> bool:
        return _narrows(self.before[id(access)], self.indices[id(access)])


def _narrows(flat: sympy.Expr, tiled: sympy.Expr) -> bool:
    """A tile steps through ``tiled`` by 1 along an axis, or by a constant below the flat stride of ``flat``."""
    before = stride(flat, X)
    steps = [s for s in (stride(tiled, X), stride(tiled, R)) if s is not None and s != 0]
    return any(s == 1 or (s.is_Integer and (before is None or not before.is_Integer or abs(s) < abs(before)))
               for s in steps)


def _fine_in_tile(e: sympy.Expr) -> bool:
    """A flat-contiguous access stays so in a tile: contiguous along a tile axis, or one element for the whole tile."""
    return 1 in (stride(e, X), stride(e, R)) or (stride(e, X) == 0 and stride(e, R) == 0)


def plan_tiling(kernel: F.KernelOp, w: sympy.Expr, strided: Sequence[Operation]) -> Tiling | str:
    """The split of ``kernel`` by ``w``, or why it does not work (a remark's words)."""
    xnumel = kernel.domain_exprs[0]
    if not divides(w, xnumel):
        return f"{print_expr(w)} does not provably divide xnumel = {print_expr(xnumel)}"
    domain = (sympy.cancel(xnumel / w), w)
    ops = [op for op in kernel.block.ops if isinstance(op, _INDEXED)]
    before = {id(op): _index(op) for op in ops}
    indices = {id(op): split_x(before[id(op)], w, domain) for op in ops}
    for op in ops:
        plain = not isinstance(op, F.SymbolicOp) and getattr(op, "offset", None) is None
        contiguous = plain and stride(before[id(op)], X) in (0, 1)
        if contiguous and not _fine_in_tile(indices[id(op)]):
            return f"splitting by {print_expr(w)} makes the {_what(op)} strided along both tile axes"
    fixed = sum(_narrows(before[id(op)], indices[id(op)]) for op in strided)
    saved = sum(div_mods(before[id(op)]) for op in ops) - sum(div_mods(indices[id(op)]) for op in ops)
    return Tiling(w, domain, before, indices, fixed, saved)


def idle_lanes(domain: Sequence[sympy.Expr]) -> float:
    """The share of a tile row's lanes past the end of a row, for a static row length (symbolic: taken as long)."""
    rows, w = domain
    if not w.is_Integer:
        return 0.0
    rblock = heuristics.tiled_config(int(rows) if rows.is_Integer else heuristics.MAX_TILE_SIDE, int(w)).rblock
    width = -(-int(w) // rblock) * rblock
    return (width - int(w)) / width


def misaligned_rows(kernel: F.KernelOp, plan: Tiling) -> list[F.LoadOp | F.StoreOp]:
    """Accesses whose tile rows do not provably start a multiple of 4 bytes apart (16-bit elements at an odd
    row stride).  A tile only to drop a broadcast's div/mod then runs far slower than the flat kernel:
    zero-padding [1024, 50257] bf16 rows to 50264 took 295 us tiled at every tile shape from 64x64 to
    1x4096, 51 us flat (bench/tile_sweep.py, H200); at 30522 (rows 4-byte aligned) 31.5 tiled, 30.1 flat."""
    found = []
    for op in kernel.block.ops:
        if isinstance(op, (F.LoadOp, F.StoreOp)) and getattr(op, "offset", None) is None:
            index = plan.indices[id(op)]
            row = stride(index, X)
            if stride(index, R) == 1 and row not in (None, 0):
                elements = 4 // cost_model.element_bytes(op.buffer.type)
                if elements > 1 and not divides(sympy.Integer(elements), row):
                    found.append(op)
    return found


def choose_tiling(kernel: F.KernelOp, broadcasts: bool) -> tuple[Tiling | None, list[str]]:
    """The best worthwhile split of ``kernel`` (or None), and why each other extent was passed over."""
    strided = strided_accesses(kernel)
    best, why = None, []
    for w in candidate_extents(kernel):
        if equal(w, kernel.domain_exprs[0]):
            continue  # a single row: nothing to tile
        plan = plan_tiling(kernel, w, strided)
        if isinstance(plan, str):
            why.append(plan)
        elif plan.fixed == 0 and strided:
            why.append(f"splitting by {print_expr(w)} leaves it strided along both tile axes")
        elif plan.fixed or (broadcasts and plan.saved > 0 and idle_lanes(plan.domain) <= MAX_IDLE_LANES
                            and not misaligned_rows(kernel, plan)):
            if best is None or plan.score > best.score:
                best = plan
    return best, why


# ---------------------------------------------------------------- the rewrite


def tiled_kernel(kernel: F.KernelOp, plan: Tiling) -> F.KernelOp:
    """``kernel`` over ``plan.domain``, its body moved over with the split indices."""
    for op in kernel.block.ops:
        if isinstance(op, F.SymbolicOp):
            op.properties["expr"] = F.ExprAttr(plan.indices[id(op)])
        elif isinstance(op, (F.LoadOp, F.StoreOp)):
            op.properties["index"] = F.ExprAttr(plan.indices[id(op)])
    body = kernel.detach_region(kernel.body)
    new = F.KernelOp(kernel.sym_name.data, plan.domain, kernel.inputs, [r.type for r in kernel.outputs], body, tiled=True)
    new.attributes.update(kernel.attributes)
    return new


@dataclass
class TileKernel(RewritePattern):
    broadcasts: bool

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: F.KernelOp, rewriter: PatternRewriter, /) -> None:
        if op.is_reduction or not isinstance(op.parent_op(), (F.GraphOp, F.ComboOp)) or op.domain_exprs[0] == 0:
            return
        plan, why = choose_tiling(op, self.broadcasts)
        left = strided_accesses(op)
        if plan is not None:
            left = [a for a in left if not plan.fixes(a)]
            why = [f"the split by {print_expr(plan.w)} chosen for the other accesses leaves it strided"]
        if left:
            reasons = "; ".join(why) or "no floordiv/mod of x in the indices gives an inner extent to split x by"
            remarks.emit(PASS, "tile-declined", f"{_what(left[0])} is strided along x: {reasons}", op)
        if plan is not None:
            rewriter.replace(op, tiled_kernel(op, plan))


@dataclass(frozen=True)
class TilePointwise(ModulePass):
    """Rewrites pointwise kernels with transposed (or broadcast) loads into 2-D tiled kernels over [xnumel/W, W]."""

    name = PASS

    broadcasts: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(TileKernel(self.broadcasts), apply_recursively=False).rewrite_module(op)
