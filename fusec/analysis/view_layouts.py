"""The layout a view op gives a buffer of known layout, so the launcher can make the view in one call
(and a pass that changes a value's layout can retype the views that read it: merge-matmuls).

A launcher knows the strides of most of its buffers when it is written: kernel outputs are
allocated with their type's layout, extern results and inputs are brought to theirs.  A view
of such a buffer then has sizes, strides and a storage offset (relative to the buffer's) that
follow from the view op alone, and ``torch._C._dynamo.guards._reinterpret_tensor`` (what
Inductor's wrappers call) makes it without ``permute``/``reshape``/``expand``'s argument
parsing and checks.  ``view_layout`` is None where a view's layout is not known statically:
a reshape of a non-contiguous buffer under symbolic sizes (it may even need a copy).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import sympy

from fusec.base import shapes
from fusec.dialects import fusec as F
from fusec.dialects.attributes import tensor_type_of


class Layout(NamedTuple):
    dims: tuple[sympy.Expr, ...]
    strides: tuple[sympy.Expr, ...]
    offset: sympy.Expr  # elements past the storage offset of the buffer the chain of views started from
    # the strides torch's own view ops would give, size-1 dims included (a graph output's view must have those:
    # AOTAutograd and the user see them); False where only the strides of dims of size other than 1 are known
    exact: bool = True


def same_strides(dims: Sequence[sympy.Expr], a: Sequence[sympy.Expr], b: Sequence[sympy.Expr]) -> bool:
    """Equal strides wherever a dim has more than one element (a size-1 dim's stride addresses nothing)."""
    return all(d == 1 or sympy.expand(x - y) == 0 for d, x, y in zip(dims, a, b, strict=True))


def is_contiguous(dims: Sequence[sympy.Expr], strides: Sequence[sympy.Expr]) -> bool:
    """Row-major, size-1 dims aside."""
    return same_strides(dims, strides, shapes.contiguous_strides(list(dims)))


def is_row_major(dims: Sequence[sympy.Expr], strides: Sequence[sympy.Expr]) -> bool:
    """Row-major, size-1 dims included: the strides torch gives a new tensor of these dims (the rule by which a
    ``TensorType`` drops its strides: ``TensorType.is_contiguous``)."""
    return all(shapes.provably_equal(s, c) for s, c in zip(strides, shapes.contiguous_strides(list(dims)), strict=True))


def dim_order(dims: Sequence[sympy.Expr], strides: Sequence[sympy.Expr]) -> tuple[int, ...] | None:
    """The order of a dense layout's dims, outermost first (channels-last NCHW: ``(0, 2, 3, 1)``), where it is not
    row-major; None where it is row-major (size-1 dims aside) or not dense."""
    if is_contiguous(dims, strides):
        return None
    return shapes.dense_dim_order(dims, strides)


def _view_strides(old_dims: Sequence[int], old_strides: Sequence[int], new_dims: Sequence[int]) -> list[int] | None:
    """torch's ``computeStride`` (ATen's TensorUtils.cpp): the strides of ``view(new_dims)``, None where a
    view cannot exist (``reshape`` would copy)."""
    new_strides = [0] * len(new_dims)
    view_d = len(new_dims) - 1
    chunk_base_stride = old_strides[-1]
    tensor_numel = view_numel = 1
    for tensor_d in reversed(range(len(old_dims))):
        tensor_numel *= old_dims[tensor_d]
        if tensor_d == 0 or (old_dims[tensor_d - 1] != 1 and old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride):
            while view_d >= 0 and (view_numel < tensor_numel or new_dims[view_d] == 1):
                new_strides[view_d] = view_numel * chunk_base_stride
                view_numel *= new_dims[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base_stride = old_strides[tensor_d - 1]
                tensor_numel = view_numel = 1
    return new_strides if view_d == -1 else None


def _reshape_strides(src: Layout, dims: tuple[sympy.Expr, ...]) -> tuple[tuple[sympy.Expr, ...], bool] | None:
    """The strides of ``src.reshape(dims)`` where it is a view, and whether they are torch's own (``Layout.exact``)."""
    # (torch gives an empty tensor's view other strides: not this rule's)
    if src.exact and not any(d == 0 for d in (*src.dims, *dims)) and is_row_major(src.dims, src.strides):
        return tuple(shapes.contiguous_strides(list(dims))), True  # one chunk: computeStride's strides are these
    numbers = [*src.dims, *src.strides, *dims]
    if src.dims and all(n.is_Integer for n in numbers) and not any(d == 0 for d in src.dims):
        strides = _view_strides([int(d) for d in src.dims], [int(s) for s in src.strides], [int(d) for d in dims])
        return None if strides is None else (tuple(sympy.Integer(s) for s in strides), src.exact)
    inserted = _size_1_dims_inserted(src, dims)
    if inserted is not None:
        return inserted, src.exact
    if is_contiguous(src.dims, src.strides):  # right where a dim has more than one element
        return tuple(shapes.contiguous_strides(list(dims))), False
    return None


def _size_1_dims_inserted(src: Layout, dims: tuple[sympy.Expr, ...]) -> tuple[sympy.Expr, ...] | None:
    """The strides computeStride gives a reshape that only inserts dims of size 1 into a source with none (an
    unsqueeze, symbolic sizes included): the source's dims keep theirs, an inserted dim gets the extent (size times
    stride) of the first source dim to its right, or the last dim's stride where none is; None for any other reshape."""
    if not src.dims or any(d == 1 or d == 0 for d in src.dims):
        return None
    strides: list[sympy.Expr] = []
    k = len(src.dims)
    for d in reversed(dims):
        if k > 0 and d == src.dims[k - 1]:
            k -= 1
            strides.append(src.strides[k])
        elif d == 1:
            strides.append(src.dims[k] * src.strides[k] if k < len(src.dims) else src.strides[-1])
        else:
            return None
    return tuple(reversed(strides)) if k == 0 else None


def _expand_strides(src: Layout, dims: tuple[sympy.Expr, ...]) -> tuple[sympy.Expr, ...]:
    """torch's ``inferExpandGeometry``: an expanded dim's stride is 0; a new leading dim of size 1 gets the
    stride of a dense dim above the next one."""
    lead = len(dims) - len(src.dims)
    strides: list[sympy.Expr] = [sympy.Integer(0)] * len(dims)
    if not src.dims:  # a scalar's expansion: every stride 0, size-1 dims too
        return tuple(strides)
    for i in reversed(range(len(dims))):
        if i >= lead:
            size, stride = src.dims[i - lead], src.strides[i - lead]
        else:
            size, stride = sympy.Integer(1), dims[i + 1] * strides[i + 1]  # i + 1 exists: src has dims
        strides[i] = sympy.Integer(0) if size != dims[i] else stride
    return tuple(strides)


def view_layout(op: F.ReshapeOp | F.PermuteOp | F.ExpandOp | F.SliceOp, src: Layout) -> Layout | None:
    """The layout of ``op``'s result viewing a buffer laid out as ``src``; None where unknown."""
    dims = tuple(tensor_type_of(op.result).dims)
    if isinstance(op, F.PermuteOp):
        perm = op.perm_list
        return Layout(tuple(src.dims[p] for p in perm), tuple(src.strides[p] for p in perm), src.offset, src.exact)
    if isinstance(op, F.ExpandOp):
        return Layout(dims, _expand_strides(src, dims), src.offset, src.exact)
    if isinstance(op, F.SliceOp):
        d = op.dim.data
        sliced = list(src.strides)
        offset = src.offset + op.start.data * sliced[d]
        sliced[d] = sliced[d] * op.step.data
        return Layout(dims, tuple(sliced), offset, src.exact)
    reshaped = _reshape_strides(src, dims)
    return None if reshaped is None else Layout(dims, reshaped[0], src.offset, reshaped[1])
