"""Canonicalization patterns of the fusec dialect (run by xDSL's ``canonicalize`` pass).

``pow`` by a constant exponent becomes cheaper arithmetic: RMSNorm's
``x.float().pow(2)`` is one multiply, not a libdevice call per element.
"""

from __future__ import annotations

from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from fusec.dialects import fusec as F

# exponent -> (function, how many times x is an operand).  Only rewrites with the same results to
# the bit: sqrt(-0.0) is -0.0 where pow(-0.0, 0.5) is +0.0, so 0.5 and -0.5 stay pow.
_POW_BY_CONSTANT = {2: ("mul", 2), 1: (None, 1), -1: ("reciprocal", 1)}


class PowByConstant(RewritePattern):
    """``pow(x, c)`` for c in 2, 1, -1 -> ``mul(x, x)``, ``x``, ``reciprocal(x)``.

    Only where ``x`` already has the result's type (no conversion, no broadcast)
    and is a float: the replacements are float functions.
    """

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: F.PointwiseOp, rewriter: PatternRewriter, /) -> None:
        if op.fn.data != "pow" or not isinstance(exponent := op.inputs[1].owner, F.ConstantOp):
            return
        x = op.inputs[0]
        if x.type != op.result.type or F.dtype_name(F.element_of(x.type)) not in ("float16", "bfloat16", "float32", "float64"):
            return
        rule = _POW_BY_CONSTANT.get(exponent.value.data)
        if rule is None:
            return
        fn, uses = rule
        if fn is None:
            rewriter.replace(op, [], [x])
        else:
            rewriter.replace(op, F.PointwiseOp(fn, [x] * uses, op.result.type))
