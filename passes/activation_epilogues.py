"""activation-epilogues: a linear layer's bias and ReLU or tanh-GELU run in cuBLASLt's epilogue (issue 18's vendor route).

cuBLASLt adds a bias and applies ReLU or GELU (its tanh approximation) to a matmul's tile before storing it, at
about the cost of the matmul alone; torch exposes it as ``aten._addmm_activation(bias, a, b, use_gelu=...)``.
Measured on an H200 (bf16, ``x @ w.t() + b`` then tanh-GELU, device µs; BENCHMARKS.md, 2026-11-29): 8192x1024 ->
4096 cuBLASLt 105.8 against fusec's fused Triton matmul 114.1 and cuBLAS + a GELU kernel 135.1; 1024x768 -> 3072
(GPT-2's MLP) 10.6 against 13.2 and 13.8; 8192x1024 -> 1024 28.4 against 31.9 and 35.7.  So where a graph's
``mm`` + row-bias add + activation is exactly that, it becomes the one call, before kernels form (and before
``matmul-epilogues`` would fuse the chain into a Triton matmul).

The activation is recognised by what it computes, not how it is spelled: the pointwise ops that read only the
biased product and each other (and scalar constants) form a function of one variable, which must agree with
``relu(h)`` or ``0.5 * h * (1 + tanh(sqrt(2/pi) * (h + 0.044715 * h**3)))`` at seven probes (to 1e-9, in double
precision, the roundings of ``convert`` ops aside), whatever the order of its operations
(``F.gelu(approximate="tanh")``'s decomposition, GPT-2's ``gelu_new``).  Its intermediate roundings are then not
made (cuBLASLt computes the epilogue in fp32 and rounds once), as in a fused kernel.

Only on CUDA graphs: torch's CPU ``_addmm_activation`` computes GELU exactly (erf), its CUDA one the tanh
approximation, so a tanh-GELU moves to it only where the graph runs on CUDA.  Not an fp32 GELU at
``float32_matmul_precision`` 'highest' (exact fp32): cuBLASLt's GELU there is off by 1.7e-6 relative, eager's by
1.8e-7 (in TF32, bf16 and fp16 its error is at or below eager's).  Not where the pre-activation is
read elsewhere (a training forward saves it for the backward: torch exposes no auxiliary output).

In:  a graph before form-kernels.
Out: ``fusec.extern "aten._addmm_activation.default"(%bias, %a, %b) {use_gelu}`` in place of the ``mm`` extern,
     the add and the activation's ops (and a reshape of the sum to [batch, seq, features] between them: then the
     call's result is reshaped); an ``activation-epilogue`` remark names each.

Options:
  when: ``accelerator`` (CUDA graphs; the default), ``always`` (ReLU on any graph too: a test on the CPU), ``never``.
"""

from __future__ import annotations

import cmath
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern, op_type_rewrite_pattern
from xdsl.rewriter import InsertPoint

from fusec.base import remarks
from fusec.dialects import fusec as F
from fusec.dialects.attributes import TensorType
from fusec.passes.bias_epilogues import biased_product
from fusec.passes.pad_matmuls import check_when, exact_fp32, graph_device, graphs_to_change

PASS = "activation-epilogues"
TARGET = "aten._addmm_activation.default"
# What the activation's ops may compute, on Python numbers (a convert's rounding aside): complex where a power of a
# negative number leaves the reals, so that such a function is told apart from GELU rather than raising.
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv, "neg": operator.neg,
    "pow": operator.pow, "tanh": lambda a: cmath.tanh(a) if isinstance(a, complex) else math.tanh(a),
    "relu": lambda a: max(a.real, 0.0), "maximum": lambda a, b: max(a.real, b.real), "convert": lambda a: a,
    "identity": lambda a: a,
}


def _gelu_tanh(h: float) -> float:
    return 0.5 * h * (1 + math.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h**3)))


_PROBES = (-4.1, -1.3, -0.37, 0.05, 0.61, 1.7, 3.3)  # a tanh-GELU in other words agrees to 1e-9 at each


def _activation_ops(h: SSAValue) -> tuple[list[F.PointwiseOp], SSAValue] | None:
    """The pointwise ops that read only ``h``, each other and scalar constants, and the one value of theirs that
    anything else reads (the activation's result); None where ``h`` or another of their values escapes."""
    ops: list[F.PointwiseOp] = []
    inside: set[SSAValue] = {h}
    grew = True
    while grew:
        grew = False
        for value in list(inside):
            for use in value.uses:
                op = use.operation
                if op in ops or not (isinstance(op, F.PointwiseOp) and op.fn.data in _FUNCTIONS):
                    continue
                if all(v in inside or _scalar_constant(v) is not None for v in op.inputs):
                    ops.append(op)
                    inside.add(op.result)
                    grew = True
    if not ops:
        return None
    block = ops[0].parent_block()
    assert block is not None
    order = {op: i for i, op in enumerate(block.ops)}
    ops.sort(key=order.__getitem__)  # body order, for evaluation
    escaping = [op.result for op in ops if any(u.operation not in ops for u in op.result.uses)]
    if len(escaping) != 1 or any(u.operation not in ops for u in h.uses) or escaping[0] is not ops[-1].result:
        return None
    return ops, escaping[0]


def _scalar_constant(value: SSAValue) -> float | None:
    op = value.owner
    if isinstance(op, F.ConstantOp) and isinstance(value.type, TensorType) and value.type.rank == 0:
        return float(op.value.data)
    return None


def _value_at(h: SSAValue, ops: list[F.PointwiseOp], at: float) -> complex:
    """What ``ops`` compute from ``h = at`` (in double precision: the probes compare to 1e-9)."""
    values: dict[SSAValue, complex | float] = {h: at}
    for op in ops:
        args = [values[v] if v in values else _scalar_constant(v) for v in op.inputs]
        value = values[op.result] = _FUNCTIONS[op.fn.data](*args)
        # Out of the reals (a fractional power of a negative number): no activation; relu's and maximum's max()
        # would drop the imaginary part, so the caller sees it now.
        if isinstance(value, complex) and abs(value.imag) > 1e-12:
            return value
    return complex(values[ops[-1].result])


def activation_of(h: SSAValue, ops: list[F.PointwiseOp]) -> str | None:
    """``relu`` or ``gelu`` (tanh) where ``ops`` compute that of ``h``, else None."""
    if len(ops) == 1 and ops[0].fn.data == "relu":
        return "relu"
    if sum(op.fn.data == "tanh" for op in ops) != 1:
        return None
    for v in _PROBES:
        try:
            got = _value_at(h, ops, v)
        except (ZeroDivisionError, OverflowError):
            return None
        if not math.isclose(got.real, _gelu_tanh(v), rel_tol=1e-9, abs_tol=1e-12) or abs(got.imag) > 1e-12:
            return None
    return "gelu"


class ActivationInEpilogue(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: F.PointwiseOp, rewriter: PatternRewriter, /) -> None:
        found = biased_product(op)
        if found is None:
            return
        mm, bias, t = found
        # A linear layer on flattened rows is often viewed back to [batch, seq, features] before its activation:
        # an elementwise function commutes with a row-major reshape of a contiguous tensor.
        h, view = op.result, None
        if h.has_one_use() and isinstance(user := next(iter(h.uses)).operation, F.ReshapeOp) \
                and isinstance(user.result.type, TensorType) and user.result.type.is_contiguous:
            h, view = user.result, user
        chain = _activation_ops(h)
        if chain is None or chain[1].type != h.type:
            return
        ops, result = chain
        kind = activation_of(h, ops)
        graph = op.parent_op()
        if kind is None or not isinstance(graph, F.GraphOp) or (kind == "gelu" and graph_device(graph) != "cuda"):
            return  # CPU's GELU there is erf's
        if kind == "gelu" and t.element_type == F.F32 and exact_fp32(graph):
            remarks.emit(PASS, "fp32-exact", "aten.mm.default + bias add + tanh-GELU in fp32 at float32_matmul_precision "
                         "'highest': cuBLASLt's GELU is ~10x less exact than eager's (relative error 1.7e-6 against "
                         "1.8e-7 on an H200), so it stays a matmul and a kernel", mm, op)
            return
        call = F.ExternOp(TARGET, [bias, *mm.inputs], None, [t], kwargs={"use_gelu": F.NumberAttr(kind == "gelu")})
        rewriter.insert(call, InsertPoint.before(ops[-1]))
        new = call.outputs[0]
        if view is not None:
            new = rewriter.insert(F.ReshapeOp(new, view.result.type), InsertPoint.before(ops[-1])).result
        rewriter.replace_all_uses_with(result, new)
        for dead in [*reversed(ops), *([view] if view is not None else []), op, mm]:
            rewriter.erase(dead)
        what = "tanh-GELU" if kind == "gelu" else "ReLU"
        count = f"{len(ops)} op" + ("s" if len(ops) > 1 else "")
        remarks.emit(PASS, "activation-epilogue", f"aten.mm.default + bias add + {what} ({count}) -> {TARGET}: cuBLASLt "
                     "adds the bias and applies the activation in its epilogue", call)


@dataclass(frozen=True)
class ActivationEpilogues(ModulePass):
    """mm + row-bias add + ReLU or tanh-GELU, nothing else reading the product or the pre-activation: one
    ``_addmm_activation`` extern (cuBLASLt's epilogue)."""

    name = PASS

    when: str = "accelerator"

    def __post_init__(self):
        check_when(self.when)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for graph in graphs_to_change(op, self.when):
            PatternRewriteWalker(ActivationInEpilogue(), apply_recursively=False).rewrite_region(graph.body)
