"""Index algebra for merging kernels: substitute, simplify within a domain, recognise flat maps.

Shared by vertical-fusion and reduction-fusion.  A kernel's domain is ``[xnumel]``
or ``[xnumel, rnumel]``; inside it ``0 <= x < xnumel`` and ``0 <= r < rnumel``.
Those bounds let ``floordiv(r, 512)`` become 0 and ``mod(r, 512)`` become ``r``
when ``rnumel`` is 512 — the step that makes a re-indexed load read ``x`` again.
The simplifier is ``fusec.base.indexing`` (canonical forms, so equal accesses compare
equal); a fact sympy cannot prove is treated as false, so callers decline the merge.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import sympy
from xdsl.ir import Operation

from fusec.base import dtypes, indexing, shapes
from fusec.base.shapes import FloorDiv
from fusec.dialects import fusec as F

X, R = shapes.index_symbol("x"), shapes.index_symbol("r")
# A matmul kernel's product coordinates (``fusec.kernel ... matmul [B, M, N]``): x = (b*M + m)*N + n.
MATMUL_B, MATMUL_M, MATMUL_N = (sympy.Symbol(n, integer=True, nonnegative=True) for n in ("mm_b", "mm_m", "mm_n"))


@dataclass(frozen=True)
class MatmulProduct:
    """What a matmul kernel's body sums over r (the IR's rule, ``fusec.KernelOp``): ``reduce`` (the one ``reduce_r
    "sum"`` in f32), ``ops`` (the product and its operands' f32 conversions) and ``loads`` (A's, then B's)."""

    reduce: F.ReduceROp
    ops: tuple[Operation, ...]
    loads: tuple[F.LoadOp, F.LoadOp]


def matmul_product(kernel: F.KernelOp) -> MatmulProduct | None:
    """The product a matmul kernel's body sums over r, or None where the body holds no such sum or several
    (``matmul_products``)."""
    products = matmul_products(kernel)
    return products[0] if products is not None and len(products) == 1 else None


def matmul_products(kernel: F.KernelOp) -> list[MatmulProduct] | None:
    """The products a matmul kernel's body sums over r, in body order, or None where it holds none or another
    reduction: each a ``reduce_r "sum"`` in f32 of a ``mul`` of two plain loads (no mask, no offset), each maybe
    converted to f32, A's first; several products read one A load (gate and up projections of one input)."""
    reduces = [op for op in kernel.block.ops if isinstance(op, F.ReduceROp)]
    found: list[MatmulProduct] = []
    for op in reduces:
        product = _product(op)
        if product is None:
            return None
        found.append(product)
    return found if found and len({p.loads[0] for p in found}) == 1 else None


def _product(reduce: F.ReduceROp) -> MatmulProduct | None:
    if reduce.kind.data != "sum" or F.dtype_name(reduce.result.type) != "float32":
        return None
    mul = reduce.input.owner
    if not (isinstance(mul, F.PointwiseOp) and mul.fn.data == "mul" and len(mul.inputs) == 2):
        return None
    ops: list[Operation] = [mul]
    loads: list[F.LoadOp] = []
    for v in mul.inputs:
        op = v.owner
        if isinstance(op, F.PointwiseOp) and op.fn.data == "convert" and F.dtype_name(op.result.type) == "float32":
            ops.append(op)
            op = op.inputs[0].owner
        if not (isinstance(op, F.LoadOp) and op.offset is None and op.mask is None):
            return None
        loads.append(op)
    return MatmulProduct(reduce, tuple(ops), (loads[0], loads[1]))


def matmul_coordinates(e: sympy.Expr, dims: Sequence[sympy.Expr], k: sympy.Expr) -> sympy.Expr:
    """An index over a matmul kernel's x and r, over the product's coordinates (b, m, n) and r instead: simplified
    under 0 <= b < B, 0 <= m < M, 0 <= n < N, 0 <= r < K, A's index then uses no n and B's no m."""
    batch, m, n = dims
    x = (MATMUL_B * m + MATMUL_M) * n + MATMUL_N if batch != 1 else MATMUL_M * n + MATMUL_N
    upper = {MATMUL_M: m, MATMUL_N: n, R: k} | ({MATMUL_B: batch} if batch != 1 else {})
    return indexing.simplify(sympy.sympify(e).xreplace({X: x}), upper)


@dataclass(frozen=True)
class TileOperand:
    """A matmul operand whose elements lie at ``offset + outer * stride + r`` (``k_inner``: a row of the operand is
    contiguous along k, x @ w.t()'s w) or ``offset + r * stride + outer`` (contiguous along m or n): a 2-D tensor
    a tensor descriptor (Hopper's TMA unit) can load tiles of.  ``outer`` is m for A, n for B."""

    offset: sympy.Expr
    stride: sympy.Expr
    k_inner: bool


def tile_operands(kernel: F.KernelOp) -> list[TileOperand] | None:
    """A's and each B's layout as ``TileOperand``s, or None where any operand has another (a batched product, an
    index that is not affine in its coordinate and r with one of them contiguous, a start or row stride not
    provably 16-byte aligned: what a tensor descriptor needs)."""
    products = matmul_products(kernel)
    dims = kernel.matmul_dims
    if products is None or dims is None or dims[0] != 1:
        return None
    loads = [products[0].loads[0]] + [p.loads[1] for p in products]
    found = []
    for load, outer in zip(loads, [MATMUL_M] + [MATMUL_N] * len(products), strict=True):
        operand = _tile_operand(matmul_coordinates(load.index.data, dims, kernel.domain_exprs[1]), outer,
                                dtypes.of_ir(load.result.type).bytes)
        if operand is None:
            return None
        found.append(operand)
    return found


def _tile_operand(e: sympy.Expr, outer: sympy.Symbol, element_bytes: int) -> TileOperand | None:
    e = sympy.expand(sympy.sympify(e))
    offset = e.xreplace({outer: 0, R: 0})
    outer_stride, k_stride = e.coeff(outer, 1), e.coeff(R, 1)
    if sympy.expand(offset + outer_stride * outer + k_stride * R - e) != 0:
        return None
    index_symbols = {outer, R, MATMUL_B, MATMUL_M, MATMUL_N}
    if any(t.free_symbols & index_symbols for t in (offset, outer_stride, k_stride)):
        return None
    if k_stride == 1:
        operand = TileOperand(offset, outer_stride, True)
    elif outer_stride == 1:
        operand = TileOperand(offset, k_stride, False)
    else:
        return None
    aligned = all(sympy.Mod(v * element_bytes, 16) == 0 for v in (operand.offset, operand.stride))
    return operand if aligned and operand.stride != 0 else None


def domain_upper(domain: Sequence[sympy.Expr]) -> dict[sympy.Symbol, sympy.Expr]:
    """The iteration variables' exclusive bounds in a kernel domain: ``0 <= x < xnumel``, ``0 <= r < rnumel``."""
    upper = {X: sympy.sympify(domain[0])}
    if len(domain) == 2:
        upper[R] = sympy.sympify(domain[1])
    return upper


def simplify_in_domain(e: sympy.Expr, domain: Sequence[sympy.Expr]) -> sympy.Expr:
    """``indexing.simplify`` under the bounds the domain gives its iteration variables."""
    return _simplify_in_domain(e, tuple(domain))


@functools.lru_cache(maxsize=8192)  # pure in (expression, domain); identical layers repeat them
def _simplify_in_domain(e: sympy.Expr, domain: tuple[sympy.Expr, ...]) -> sympy.Expr:
    return indexing.simplify(e, domain_upper(domain))


def substitute(e: sympy.Expr, mapping: dict[sympy.Symbol, sympy.Expr], domain: Sequence[sympy.Expr]) -> sympy.Expr:
    """``e`` with the iteration variables replaced (all at once), simplified in the new domain."""
    if not mapping:
        return e
    e = sympy.sympify(e)
    # xreplace rebuilds every node above a replaced symbol, even one replaced by itself, and rebuilding
    # re-evaluates each floordiv/mod (~0.5 ms an index): identity entries are dropped first
    moved = {k: v for k, v in mapping.items() if k != v and k in e.free_symbols}
    return simplify_in_domain(e.xreplace(moved) if moved else e, domain)


@functools.lru_cache(maxsize=4096)
def equal(a: sympy.Expr, b: sympy.Expr) -> bool:
    """``shapes.provably_equal``, with a cheap structural test first and the answers cached."""
    return a == b or sympy.expand(a - b) == 0 or shapes.provably_equal(a, b)


def same_index(a: sympy.Expr, b: sympy.Expr) -> bool:
    return sympy.expand(a - b) == 0


def flat_maps(domain: Sequence[sympy.Expr], hints: Iterable[sympy.Expr] = ()) -> list[sympy.Expr]:
    """Flat positions ``f(x, r)`` that visit ``[0, xnumel*rnumel)`` exactly once over a reduction domain.

    Each is ``rnumel*B*floordiv(x, B) + B*r + mod(x, B)`` with B dividing xnumel:
    the digits (x // B, r, x % B) of a mixed-radix number, hence a bijection.
    B = 1 is a reduction over the last dim (``rnumel*x + r``), B = xnumel one over
    the first (``x + xnumel*r``); other B come from ``mod(x, B)``/``floordiv(x, B)`` in ``hints``.
    """
    xnumel, rnumel = domain
    candidates: list[sympy.Expr] = [sympy.Integer(1)]
    for h in hints:
        for atom in sympy.sympify(h).atoms(sympy.Mod, FloorDiv):
            if atom.args[0] == X and atom.args[1] not in candidates:
                candidates.append(atom.args[1])
    if xnumel not in candidates:
        candidates.append(xnumel)
    maps: list[sympy.Expr] = []
    for b in candidates:
        if not sympy.cancel(xnumel / b).is_integer:
            continue
        f = simplify_in_domain(rnumel * b * FloorDiv(X, b) + b * R + shapes.Mod(X, b), domain)
        if not any(same_index(f, m) for m in maps):
            maps.append(f)
    return maps


def covers_domain(index: sympy.Expr, domain: Sequence[sympy.Expr]) -> bool:
    """True when ``index`` takes every value of [0, numel(domain)) exactly once over the domain."""
    if len(domain) == 1:
        return same_index(index, simplify_in_domain(X, domain))  # x, or 0 in a one-point domain
    return any(same_index(index, f) for f in flat_maps(domain, [index]))
