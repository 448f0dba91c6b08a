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

import sympy
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from fusec.base import indexing, shapes
from fusec.base.indexing import Upper
from fusec.dialects import fusec as F
from fusec.dialects.attributes import tensor_type_of

# Stands for a run-time index (a gather's loaded value) while views are folded.
GATHERED = sympy.Symbol("gathered_", integer=True)


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
        else:
            return value, idx
        value = op.input


def broadcast_index(value_type: F.TensorType, out_dims: Sequence[sympy.Expr], idx: Sequence[sympy.Expr]) -> list[sympy.Expr]:
    """Indices of a broadcast operand: trailing dims aligned, size-1 dims read at 0."""
    lead = len(out_dims) - value_type.rank
    return [sympy.Integer(0) if d == 1 and out_dims[lead + k] != 1 else idx[lead + k] for k, d in enumerate(value_type.dims)]


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
        if any(sympy.sympify(d) == 0 for d in tensor_type_of(source).dims):
            # A static empty tensor has no element to read and its value is never used, but a reduction over
            # an empty r still runs its x: a load there (at index 0, flat_to_dims' index into an empty shape)
            # would not depend on r, so rmask would not cover it and it would read past the buffer.
            return self.constant(0, tensor_type_of(source).element_type)
        offset = storage_offset(tensor_type_of(source), idx, self.upper)
        gathered = None
        if GATHERED in offset.free_symbols:
            gathered = self._gathered_offset(offset)
            offset = offset.subs(GATHERED, 0)
        key = ("load", source, offset, gathered, mask)
        if key not in self._cache:
            self._cache[key] = self.add(F.LoadOp(self.buffer(source), offset, mask, gathered))
        return self._cache[key]

    def with_gathered(self, index_value: SSAValue):
        """Use ``index_value`` (i64) wherever GATHERED appears in the next ``element`` calls."""
        self._gathered_value = index_value
        return self

    def _gathered_offset(self, offset: sympy.Expr) -> SSAValue:
        # The offset is linear in the gathered index: offset = a + b*g; the load adds b*g at run time.
        coeff = sympy.expand(offset).coeff(GATHERED)
        if GATHERED in coeff.free_symbols or GATHERED in sympy.expand(offset - coeff * GATHERED).free_symbols:
            raise NotImplementedError("a gathered index that views split across dims")
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
