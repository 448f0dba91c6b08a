"""Canonicalization patterns of the fusec dialect (run by xDSL's ``canonicalize`` pass).

``pow`` by a constant exponent becomes the multiplications torch itself uses for
it (``fusec.base.powers``): RMSNorm's ``x.float().pow(2)`` is one multiply, not a
libdevice call per element.
"""

from __future__ import annotations

from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

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
