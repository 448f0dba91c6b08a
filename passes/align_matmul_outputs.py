"""align-matmul-outputs: give matmul results whose rows are misaligned a padded row stride.

In:  a graph before form-kernels.  Out: each ``fusec.extern`` matmul (mm, addmm, bmm, baddbmm)
whose result row is not a multiple of ``alignment-bytes`` long gets a result type with the row
stride rounded up (``[1024, 50257]`` bf16 -> ``strides [50264, 1]``): cuBLAS picks its fast
kernels only for 16-byte aligned leading dimensions (a 50257-wide bf16 LM head runs ~8x slower
unpadded).  Where such a value is a graph output or the input of a view, a ``fusec.pointwise
"identity"`` copies it to the contiguous layout eager returns (views' types were derived from that
layout); every other user keeps reading the padded buffer (kernels read any layout).  The
launcher obeys the type: it calls the op's ``out=`` overload on a padded buffer, so the padding
itself costs no copy.

The device mark lives only in memory (the graph's printed form has no place for it): IR parsed
from text, as ``fusec-opt`` replays a dump, counts as unmarked, so use ``when=always`` there.

``when``: ``accelerator`` pads only graphs the importer marked as running on an accelerator
(``fusec.device`` on the graph; CPU BLAS gains little from padding), ``always`` pads anyway
(tests on CPU), ``never`` leaves the graph as it is.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from fusec.base import dtypes, remarks
from fusec.dialects import fusec as F
from fusec.dialects.attributes import TensorType

MATMULS = frozenset({"aten.mm.default", "aten.addmm.default", "aten.bmm.default", "aten.baddbmm.default"})
DEVICE_ATTR = "fusec.device"  # set by the importer: the device type the graph computes on ("cuda", "cpu", ...)
WHEN = ("accelerator", "always", "never")
VIEWS = (F.ReshapeOp, F.PermuteOp, F.ExpandOp, F.SliceOp)


def graph_device(graph: F.GraphOp) -> str | None:
    attr = graph.attributes.get(DEVICE_ATTR)
    return attr.data if isinstance(attr, StringAttr) else None


def padded_strides(t: TensorType, alignment: int) -> list[int] | None:
    """Row-major strides with the row stride rounded up to ``alignment`` bytes, or None when the rows are aligned."""
    n = t.dims[-1]
    size = dtypes.of_ir(t.element_type).bytes
    if alignment % size:
        return None  # an element wider than the alignment's granule: nothing a round-up could fix
    granule = alignment // size
    if int(n) % granule == 0:
        return None
    row = -(-int(n) // granule) * granule
    strides: list[sympy.Expr] = [sympy.Integer(1), sympy.Integer(row)]
    step = strides[-1] * t.dims[-2]  # a batch is its padded rows
    for d in reversed(t.dims[:-2]):
        strides.append(step)
        step = step * d
    return list(reversed(strides))


def _show(exprs) -> str:
    return ", ".join(str(e) for e in exprs)


@dataclass(frozen=True)
class AlignMatmulOutputs(ModulePass):
    """Pads the row stride of matmul results to alignment-bytes (cuBLAS's fast kernels); graph outputs get a contiguous copy."""

    name = "align-matmul-outputs"

    alignment_bytes: int = 16
    when: str = "accelerator"

    def __post_init__(self) -> None:
        if self.when not in WHEN:
            raise ValueError(f"when must be one of {', '.join(WHEN)}, got {self.when!r}")
        if self.alignment_bytes <= 0:
            raise ValueError(f"alignment-bytes must be positive, got {self.alignment_bytes}")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.when == "never":
            return
        for graph in [g for g in op.walk() if isinstance(g, F.GraphOp)]:
            device = graph_device(graph)
            if self.when == "accelerator" and device in (None, "cpu"):
                if any(isinstance(x, F.ExternOp) and x.target.data in MATMULS for x in graph.block.ops):
                    # One text for "cpu" and for no mark (IR parsed from text): replays print the same remarks.
                    remarks.emit(self.name, "padding-skipped", "matmul outputs keep eager's strides: the IR marks no "
                                 "accelerator for this graph (when=always pads anyway)", graph)
                continue
            for extern in [x for x in graph.block.ops if isinstance(x, F.ExternOp) and x.target.data in MATMULS]:
                self.pad(graph, extern)

    def pad(self, graph: F.GraphOp, extern: F.ExternOp) -> None:
        result: SSAValue = extern.outputs[0]
        t = result.type
        if not isinstance(t, TensorType) or not t.is_contiguous:
            return
        if not t.dims[-1].is_number:
            remarks.emit(self.name, "padding-symbolic", f"last dim {t.dims[-1]} is symbolic: its alignment is unknown "
                         "until run time, the result keeps eager's strides", extern)
            return
        strides = padded_strides(t, self.alignment_bytes)
        if strides is None:
            return
        padded = TensorType(t.dims, t.element_type, strides)
        result = Rewriter.replace_value_with_new_type(result, padded)
        # The graph's output must have eager's strides, and views' types were derived from a contiguous input:
        # both read a contiguous copy.  Kernels and other externs read the padded buffer as it is.
        copied = [use for use in result.uses if isinstance(use.operation, (F.OutputOp, *VIEWS))]
        if copied:
            copy = F.PointwiseOp("identity", [result], t)
            Rewriter.insert_op(copy, InsertPoint.after(extern))
            for use in copied:
                use.operation.operands[use.index] = copy.result
        readers = sorted({"the graph output" if isinstance(u.operation, F.OutputOp) else u.operation.name for u in copied})
        remarks.emit(self.name, "padded-matmul",
                     f"{extern.target.data} result [{_show(t.dims)}] gets strides [{_show(strides)}] "
                     f"(rows aligned to {self.alignment_bytes} bytes)"
                     + (f"; a contiguous copy feeds {' and '.join(readers)}" if copied else ""), extern)
