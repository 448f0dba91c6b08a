"""Building kernel bodies from graph values: views fold into load indices.

Shared by the passes that create kernels.  ``KernelBuilder.element(value, idx)``
gives the element value of a graph tensor at per-dim indices: through views it
rewrites the indices (reshape: flatten then split; permute: reorder; expand: 0 on
broadcast dims; slice: start + step*i), constants and symbolic values become
element ops, and anything materialised (a graph input, a kernel or extern
result) becomes a ``fusec.load`` at ``sum(idx_k * stride_k)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeGuard

import sympy
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from fusec.base import indexing, shapes
from fusec.base.indexing import Upper
from fusec.dialects import fusec as F
from fusec.dialects.attributes import tensor_type_of

# Stands for a run-time index (a gather's loaded value) while views are folded.
GATHERED = sympy.Symbol("gathered_", integer=True)
# Stands for a cat piece's own coordinate along the cat dim while views are folded: under the piece's mask
# it lies in [0, the piece's extent), a bound the coordinate written in x (``mod(x, 50264)``) does not show.
PIECE = sympy.Symbol("piece_", integer=True)


class GatherThroughViewError(NotImplementedError):
    """A gather or index op reads its input through views that mix the gathered dim with others (a reshape of a
    permute): the element's offset is not the index times a stride.  form-kernels copies that input first."""


def view_source(value: SSAValue, idx: Sequence[sympy.Expr], upper: Upper | None = None) -> tuple[SSAValue, list[sympy.Expr]]:
    """Follow views back to a non-view value, rewriting the per-dim indices on the way.

    ``upper`` bounds the iteration variables (``indexing.simplify``): each reshape's flat
    index is simplified under it, so a split that a contiguous access undoes never nests.
    """
    idx = list(idx)
    while True:
        op = value.owner
        if isinstance(op, F.ReshapeOp):
            out_t, in_t = tensor_type_of(op.result), tensor_type_of(op.input)
            strides = shapes.contiguous_strides(out_t.dims)
            flat = indexing.simplify(sum((i * s for i, s in zip(idx, strides, strict=True)), sympy.Integer(0)), upper)
            idx = shapes.flat_to_dims(flat, in_t.dims)
        elif isinstance(op, F.PermuteOp):
            new = [sympy.Integer(0)] * len(idx)
            for i, p in enumerate(op.perm_list):
                new[p] = idx[i]
            idx = new
        elif isinstance(op, F.ExpandOp):
            in_t, out_t = tensor_type_of(op.input), tensor_type_of(op.result)
            lead = out_t.rank - in_t.rank
            idx = [sympy.Integer(0) if d == 1 and out_t.dims[lead + k] != 1 else idx[lead + k] for k, d in enumerate(in_t.dims)]
        elif isinstance(op, F.SliceOp):
            d = op.dim.data
            idx[d] = op.start.data + op.step.data * idx[d]
        elif isinstance(op, F.IndexOp) and (e := folded_index(op, idx[op.dim.data])) is not None:
            idx[op.dim.data] = e
        else:
            return value, idx
        value = op.input


# Index arithmetic a load index can say: the pointwise functions over integers that sympy spells.
_INDEX_FUNCTIONS = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "maximum": sympy.Max, "minimum": sympy.Min, "convert": lambda a: a, "identity": lambda a: a,
}
_NONNEGATIVE_FUNCTIONS = {"floordiv": shapes.FloorDiv, "remainder": sympy.Mod}  # sympy's forms assume these


def index_expr(value: SSAValue, idx: Sequence[sympy.Expr]) -> sympy.Expr | None:
    """Element ``idx`` of an integer index-arithmetic tensor (see ``is_iota``) as a sympy expression, or None."""
    source, idx = view_source(value, idx)
    owner = source.owner
    if isinstance(owner, F.SymbolicOp):
        return owner.expr.data
    if isinstance(owner, F.ConstantOp):
        v = owner.value.data
        return sympy.Integer(v) if isinstance(v, int) and not isinstance(v, bool) else None
    if not is_iota(owner) or tensor_type_of(owner.result).element_type not in (F.I64, F.I32):
        return None
    fn = owner.fn.data
    if fn == "iota":
        return idx[0]
    spell = _INDEX_FUNCTIONS.get(fn) or _NONNEGATIVE_FUNCTIONS.get(fn)
    if spell is None:
        return None
    args = [index_expr(v, broadcast_index(tensor_type_of(v), tensor_type_of(owner.result).dims, idx)) for v in owner.inputs]
    if any(a is None for a in args) or (fn in _NONNEGATIVE_FUNCTIONS and not all(a is not None and a.is_nonnegative for a in args)):
        return None
    return spell(*args)


_PROBE = sympy.Symbol("probe_", integer=True, nonnegative=True)


def folded_index(op: F.IndexOp, i: sympy.Expr) -> sympy.Expr | None:
    """``input[index[i]]`` as a view when the index is index arithmetic provably >= 0 (no wrap-around)."""
    if tensor_type_of(op.index).rank != 1:
        return None
    e = index_expr(op.index, [_PROBE])
    return e.subs(_PROBE, i) if e is not None and e.is_nonnegative else None


def folds_as_view(op) -> TypeGuard[F.IndexOp]:
    """An index op that readers fold into their load indices, like a view."""
    return isinstance(op, F.IndexOp) and folded_index(op, _PROBE) is not None


def broadcast_index(value_type: F.TensorType, out_dims: Sequence[sympy.Expr], idx: Sequence[sympy.Expr]) -> list[sympy.Expr]:
    """Indices of a broadcast operand: trailing dims aligned, size-1 dims read at 0."""
    lead = len(out_dims) - value_type.rank
    return [sympy.Integer(0) if d == 1 and out_dims[lead + k] != 1 else idx[lead + k] for k, d in enumerate(value_type.dims)]


def is_iota(op) -> TypeGuard[F.PointwiseOp]:
    """Index arithmetic: a graph-level ``fusec.pointwise "iota"``, or pointwise ops over iotas, constants
    and symbolic values only (``arange``'s ``start + step * iota``).  Like a constant it moves no memory,
    so it folds into each reader, recomputed there, and never becomes a kernel of its own."""
    if not isinstance(op, F.PointwiseOp) or not isinstance(op.result.type, F.TensorType):
        return False
    if op.fn.data == "iota":
        return True
    sources = [view_source(v, [sympy.Integer(0)] * tensor_type_of(v).rank)[0].owner for v in op.inputs]
    return any(is_iota(s) for s in sources) and all(isinstance(s, (F.ConstantOp, F.SymbolicOp)) or is_iota(s) for s in sources)


def storage_offset(t: F.TensorType, idx: Sequence[sympy.Expr], upper: Upper | None = None) -> sympy.Expr:
    return indexing.simplify(sum((i * s for i, s in zip(idx, t.layout, strict=True)), sympy.Integer(0)), upper)


class KernelBuilder:
    """Collects a kernel's buffers and body ops, then makes the ``fusec.kernel``.

    ``upper`` bounds the iteration variables of the kernel's domain (``0 <= x < xnumel``):
    load indices are simplified under it.
    """

    def __init__(self, upper: Upper | None = None) -> None:
        self.upper = dict(upper or {})
        self.block = Block()
        self.inputs: list[SSAValue] = []
        self.ops: list[Operation] = []
        self.stores: list[tuple[SSAValue, F.TensorType, sympy.Expr]] = []
        self._cache: dict[tuple, SSAValue] = {}
        self._piece: dict[sympy.Symbol, sympy.Expr] = {}

    def add(self, op: Operation) -> SSAValue:
        self.ops.append(op)
        return op.results[0]

    def buffer(self, value: SSAValue) -> SSAValue:
        if value not in self.inputs:
            self.inputs.append(value)
            self.block.insert_arg(value.type, len(self.inputs) - 1)
        return self.block.args[self.inputs.index(value)]

    def constant(self, number, element_type: Attribute) -> SSAValue:
        key = ("const", number, element_type)
        if key not in self._cache:
            self._cache[key] = self.add(F.ConstantOp(number, element_type))
        return self._cache[key]

    def symbolic(self, expr: sympy.Expr, element_type: Attribute = F.I64) -> SSAValue:
        expr = self._unpiece(expr)
        key = ("sym", expr, element_type)
        if key not in self._cache:
            self._cache[key] = self.add(F.SymbolicOp(expr, element_type))
        return self._cache[key]

    def element(self, value: SSAValue, idx: Sequence[sympy.Expr], mask: SSAValue | None = None) -> SSAValue:
        """The element of graph value ``value`` at per-dim indices ``idx``."""
        source, idx = view_source(value, idx, self.upper)
        owner = source.owner
        if isinstance(owner, F.ConstantOp):
            return self.constant(owner.value.data, tensor_type_of(owner.result).element_type)
        if isinstance(owner, F.SymbolicOp):
            return self.symbolic(owner.expr.data, tensor_type_of(owner.result).element_type)
        if is_iota(owner):
            if owner.fn.data == "iota":  # element i is i: the index itself
                return self.symbolic(idx[0], tensor_type_of(owner.result).element_type)
            et = tensor_type_of(owner.result).element_type
            e = index_expr(source, idx)
            if e is not None:  # integer arithmetic on the index: one expression
                return self.symbolic(e, et)
            dims = tensor_type_of(owner.result).dims
            args = [self.element(v, broadcast_index(tensor_type_of(v), dims, idx)) for v in owner.inputs]
            key: tuple = ("pointwise", owner.fn.data, tuple(args), et)  # windows recompute the same masks
            if key not in self._cache:
                self._cache[key] = self.add(F.PointwiseOp(owner.fn.data, args, et))
            return self._cache[key]
        if any(sympy.sympify(d) == 0 for d in tensor_type_of(source).dims):
            # A static empty tensor has no element to read and its value is never used, but a reduction over
            # an empty r still runs its x: a load there (at index 0, flat_to_dims' index into an empty shape)
            # would not depend on r, so rmask would not cover it and it would read past the buffer.
            return self.constant(0, tensor_type_of(source).element_type)
        offset = self._unpiece(storage_offset(tensor_type_of(source), idx, self.upper))
        gathered = None
        if GATHERED in offset.free_symbols:
            gathered = self._gathered_offset(offset)
            offset = offset.subs(GATHERED, 0)
        key = ("load", source, offset, gathered, mask)
        if key not in self._cache:
            self._cache[key] = self.add(F.LoadOp(self.buffer(source), offset, mask, gathered))
        return self._cache[key]

    def piece_element(self, value: SSAValue, idx: Sequence[sympy.Expr], d: int, extent: sympy.Expr,
                      mask: SSAValue) -> SSAValue:
        """The element at ``idx`` where ``mask`` holds only for ``0 <= idx[d] < extent`` (a cat's piece).

        Views are folded with that bound known, then ``idx[d]`` is put back: a padded ``[64, 50257]`` input
        read through a reshape loads at ``50257*floordiv(x, 50264) + mod(x, 50264)``, not at the nest of
        floordivs and mods the unbounded coordinate leaves (``mod(x, 50264)`` may be 50263, past the piece).
        """
        self.upper[PIECE], self._piece = extent, {PIECE: idx[d]}
        try:
            return self.element(value, [*idx[:d], PIECE, *idx[d + 1:]], mask)
        finally:
            del self.upper[PIECE]
            self._piece = {}

    def _unpiece(self, e: sympy.Expr) -> sympy.Expr:
        if not self._piece or PIECE not in e.free_symbols:
            return e
        return indexing.simplify(e.xreplace(self._piece), {s: u for s, u in self.upper.items() if s != PIECE})

    def with_gathered(self, index_value: SSAValue):
        """Use ``index_value`` (i64) wherever GATHERED appears in the next ``element`` calls."""
        self._gathered_value = index_value
        return self

    def _gathered_offset(self, offset: sympy.Expr) -> SSAValue:
        # The offset is linear in the gathered index: offset = a + b*g; the load adds b*g at run time.
        coeff = sympy.expand(offset).coeff(GATHERED)
        if GATHERED in coeff.free_symbols or GATHERED in sympy.expand(offset - coeff * GATHERED).free_symbols:
            raise GatherThroughViewError("a gathered index that views split across dims")
        if coeff == 1:
            return self._gathered_value
        return self.add(F.PointwiseOp("mul", [self._gathered_value, self.symbolic(coeff)], F.I64))

    def store(self, value: SSAValue, out_type: F.TensorType, index: sympy.Expr) -> None:
        self.stores.append((value, out_type, index))

    def finish(self, name: str, domain: Sequence[sympy.Expr]) -> F.KernelOp:
        out_types = [t for _, t, _ in self.stores]
        for t in out_types:
            self.block.insert_arg(t, len(self.block.args))
        outs = self.block.args[len(self.inputs):]
        self.block.add_ops(self.ops)
        self.block.add_ops(F.StoreOp(v, buf, index) for (v, _, index), buf in zip(self.stores, outs, strict=True))
        return F.KernelOp(name, domain, self.inputs, out_types, Region(self.block))
