"""View ops of the fusec dialect: one tensor in, the same elements seen with another shape or layout out.

A view computes nothing: ``form-kernels`` folds it into the load indices of its
consumers, and one that reaches an extern or the graph's output runs as a torch
view (the rules are in the module docstring of ``fusec.dialects.fusec``).
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy
from xdsl.dialects.builtin import ArrayAttr, IntAttr
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, prop_def, result_def, traits_def
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from fusec.base import shapes
from fusec.base.shapes import print_expr
from fusec.dialects.attributes import ExprAttr, TensorType, check_same_dims, checked_tensor_type, sizes_equal
from fusec.dialects.directives import Expr, Int, IntList

__all__ = ["ExpandOp", "PermuteOp", "ReshapeOp", "SliceOp"]


class _ViewOp(IRDLOperation):
    """Base of the view ops: one tensor in, one tensor out with the same element type."""

    input = operand_def()
    result = result_def()

    def verify_(self) -> None:
        t = checked_tensor_type(self, self.input, "input")
        out = checked_tensor_type(self, self.result, "result")
        if t.element_type != out.element_type:
            raise VerifyException(f"{self.name}: element type changes from {t.element_type} to {out.element_type}")
        self.verify_view(t, out)

    def verify_view(self, t: TensorType, out: TensorType) -> None:
        pass


@irdl_op_definition
class ReshapeOp(_ViewOp):
    """A view with a new shape and the same elements in row-major order (also squeeze/unsqueeze/flatten)."""

    name = "fusec.reshape"
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue, result_type: Attribute):
        super().__init__(operands=[input], result_types=[result_type])

    def verify_view(self, t: TensorType, out: TensorType) -> None:
        if not sizes_equal(self, shapes.numel(t.dims), shapes.numel(out.dims)):
            before, after = print_expr(shapes.numel(t.dims)), print_expr(shapes.numel(out.dims))
            raise VerifyException(f"fusec.reshape: element count {before} != {after}")


@irdl_op_definition
class PermuteOp(_ViewOp):
    """A view with its dims reordered: result dim i is input dim perm[i]."""

    name = "fusec.permute"
    perm = prop_def(ArrayAttr[IntAttr])
    traits = traits_def(Pure())
    custom_directives = (IntList,)
    assembly_format = "$input custom<IntList>($perm) attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue, perm: Sequence[int], result_type: Attribute):
        super().__init__(operands=[input], result_types=[result_type], properties={"perm": ArrayAttr([IntAttr(p) for p in perm])})

    @property
    def perm_list(self) -> list[int]:
        return [p.data for p in self.perm.data]

    def verify_view(self, t: TensorType, out: TensorType) -> None:
        perm = self.perm_list
        if sorted(perm) != list(range(t.rank)):
            raise VerifyException(f"fusec.permute: {perm} is not a permutation of {t.rank} dims")
        check_same_dims(self, out.dims, [t.dims[p] for p in perm], "result")


@irdl_op_definition
class ExpandOp(_ViewOp):
    """A broadcasting view: size-1 dims (and new leading dims) grow to the result's shape."""

    name = "fusec.expand"
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue, result_type: Attribute):
        super().__init__(operands=[input], result_types=[result_type])

    def verify_view(self, t: TensorType, out: TensorType) -> None:
        if out.rank < t.rank:
            raise VerifyException("fusec.expand: result has fewer dims than input")
        for d_in, d_out in zip(t.dims, out.dims[out.rank - t.rank:], strict=True):
            if d_in != 1 and not sizes_equal(self, d_in, d_out):
                raise VerifyException(f"fusec.expand: dim {print_expr(d_in)} cannot expand to {print_expr(d_out)}")


@irdl_op_definition
class SliceOp(_ViewOp):
    """A strided window of one dim: elements start, start+step, ... below end."""

    name = "fusec.slice"
    dim = prop_def(IntAttr)
    start = prop_def(ExprAttr)
    step = prop_def(IntAttr)
    traits = traits_def(Pure())
    custom_directives = (Int, Expr)
    assembly_format = ("$input `dim` custom<Int>($dim) `start` custom<Expr>($start) `step` custom<Int>($step) attr-dict "
                       "`:` type($input) `->` type($result)")

    def __init__(self, input: SSAValue, dim: int, start: int | sympy.Basic, step: int, result_type: Attribute):
        super().__init__(operands=[input], result_types=[result_type],
                         properties={"dim": IntAttr(dim), "start": ExprAttr.of(start), "step": IntAttr(step)})

    def verify_view(self, t: TensorType, out: TensorType) -> None:
        d = self.dim.data
        if d >= t.rank or out.rank != t.rank:
            raise VerifyException(f"fusec.slice: dim {d} invalid for rank {t.rank} -> {out.rank}")
        if self.step.data < 1:
            raise VerifyException("fusec.slice: step must be positive")
        others = [e for i, e in enumerate(t.dims) if i != d]
        check_same_dims(self, [e for i, e in enumerate(out.dims) if i != d], others, "dims other than the sliced one")


VIEW_OPS = (ReshapeOp, PermuteOp, ExpandOp, SliceOp)  # every view op: index arithmetic over its input, no data
