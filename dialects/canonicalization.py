"""Canonicalization patterns of the fusec dialect (run by xDSL's ``canonicalize`` pass).

``pow`` by a constant exponent becomes the multiplications torch itself uses for
it (``fusec.base.powers``): RMSNorm's ``x.float().pow(2)`` is one multiply, not a
libdevice call per element.

In a kernel body, ``any`` over r of ``x != -inf`` where the body also takes the ``max`` of
``x`` over r becomes ``max(x) != -inf``: one reduction fewer (``AnyAboveMinusInfinity``).
"""

from __future__ import annotations

import math

from xdsl.ir import SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern
from xdsl.rewriter import InsertPoint

from fusec.base import powers
from fusec.dialects import fusec as F


class PowByConstant(RewritePattern):
    """``pow(x, c)`` for the exponents of ``fusec.base.powers`` -> ``mul``/``reciprocal`` of ``x``.

    Only where ``x`` already has the result's type (no conversion, no broadcast).
    0.5 and -0.5 stay pow: sqrt(-0.0) is -0.0 where pow(-0.0, 0.5) is +0.0.
    """

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: F.PointwiseOp, rewriter: PatternRewriter, /) -> None:
        if op.fn.data != "pow" or not isinstance(exponent := op.inputs[1].owner, F.ConstantOp):
            return
        x = op.inputs[0]
        if x.type != op.result.type or F.dtype_name(F.element_of(x.type)) == "bool":
            return
        rule = powers.as_products(exponent.value.data, F.is_float(F.element_of(x.type)))
        if rule is None:
            return
        new_ops: list[F.PointwiseOp] = []

        def build(fn: str, *args):
            new_ops.append(F.PointwiseOp(fn, list(args), op.result.type))
            return new_ops[-1].result

        result = rule(x, lambda a, b: build("mul", a, b), lambda a: build("reciprocal", a))
        rewriter.replace(op, new_ops, [result])


class AnyAboveMinusInfinity(RewritePattern):
    """``reduce_r "any"`` of ``x != -inf`` (or ``not (x == -inf)``) -> ``max(x) != -inf`` where the same body
    reduces ``max`` of ``x`` over r anyway.

    torch's ``_safe_softmax`` (attention's math path: a row of scores that is all -inf gives zeros, not NaN)
    asks every row both whether any score is above -inf and the row's maximum: the maximum answers both.
    Exact, NaN included: a NaN makes ``x != -inf`` true and the maximum NaN (``max`` propagates it), which is not
    -inf; an empty row gives false and -inf.  The ``max`` moves above the ``any`` if it came after it (both read
    ``x``, which is defined before the ``any``'s input).
    """

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: F.ReduceROp, rewriter: PatternRewriter, /) -> None:
        if op.kind.data != "any":
            return
        x = _above_minus_infinity(op.input)
        block = op.parent_block()
        if x is None or block is None:
            return
        maximum = next((u.operation for u in x.uses if isinstance(u.operation, F.ReduceROp)
                        and u.operation.kind.data == "max" and u.operation.parent_block() is block), None)
        if maximum is None:
            return
        if block.get_operation_index(maximum) > block.get_operation_index(op):
            maximum.detach()
            rewriter.insert(maximum, InsertPoint.before(op))
        minus_infinity = F.ConstantOp(float("-inf"), x.type)
        above = F.PointwiseOp("ne", [maximum.result, minus_infinity.result], op.result.type)
        rewriter.replace(op, [minus_infinity, above], [above.result])


def _minus_infinity(v: SSAValue) -> bool:
    c = v.owner
    return isinstance(c, F.ConstantOp) and isinstance(c.value.data, float) and math.isinf(c.value.data) and c.value.data < 0


def _above_minus_infinity(v: SSAValue) -> SSAValue | None:
    """``x`` where ``v`` is ``x != -inf`` or ``not (x == -inf)`` of a float ``x``, else None."""
    op = v.owner
    if isinstance(op, F.PointwiseOp) and op.fn.data == "logical_not":
        inner = op.inputs[0].owner
        if not (isinstance(inner, F.PointwiseOp) and inner.fn.data == "eq"):
            return None
        op = inner
    elif not (isinstance(op, F.PointwiseOp) and op.fn.data == "ne"):
        return None
    a, b = op.inputs
    x = a if _minus_infinity(b) else b if _minus_infinity(a) else None
    return x if x is not None and F.is_float(x.type) else None

