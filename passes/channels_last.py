"""channels-last: lay convolutions' activations out as NHWC, where the convolution library computes.

In:  a graph before form-kernels.  Out: the 4-D activations around each ``aten.convolution`` (its input and
result) and ``aten.convolution_backward`` (grad_output, input, grad_input) have channels-last strides
``[C*H*W, 1, W*C, C]``, and so have the pointwise chains between them (batch norm, ReLU, residual adds, their
gradients), so that every kernel reads and writes them in that order.  cuDNN runs 16-bit convolutions in
NHWC only: given NCHW tensors it converts each input and result, two copies a convolution (ResNet-18's
training step in bf16 on an H200: 814 µs of ``nchwToNhwc``/``nhwcToNchw`` in 2627 µs).  Torch returns a
convolution's result channels-last when its input is (``cudnn_conv_suggest_memory_format``), so only the
types change; the launcher copies an extern's result to its declared layout wherever torch chose otherwise,
so a wrong guess costs a copy, never a wrong answer.

A value changes layout only when the op making it lets the compiler choose (a pointwise op, a convolution,
a max pool of a channels-last input) and every reader reads any layout (kernels, externs, or a permute whose
readers do: its result is retyped, as ConvNeXt's NCHW -> NHWC view then reads a dense tensor): never another
view's input, never a graph input, and never a graph output, except those from ``fusec.saved_outputs`` on (set by
the backend on a forward graph: tensors saved for its backward, whose strides it reports to AOTAutograd, which
compiles the backward for them; under static sizes only).  A convolution input that cannot change (the images, a view) is copied
into channels-last by a ``fusec.pointwise "identity"``, as cuDNN would copy it; a convolution whose result
cannot change (a ViT's patch embedding, flattened by a view) is left as it is (channels-last-declined): torch
would return its result channels-last and the launcher would copy it back.

A convolution's weight is copied channels-last too (torch would copy it on every call), and a weight's gradient
is computed channels-last and copied back to the parameter's layout: as graph ops, kernels that combo-grouping
launches together.

``when``: ``auto`` relayouts graphs marked as running on an accelerator (``fusec.device``) whose
convolutions compute in 16-bit floats, or in fp32 where cuDNN may use TF32 (``fusec.cudnn_allow_tf32``, torch's
default: its TF32 kernels are NHWC too; ResNet-18's fp32 inference on an H100 spent 281 of 944 µs converting),
except training graphs with symbolic sizes (a forward with saved
outputs, a backward), whose forward cannot hand its saved tensors on channels-last;
``always`` every graph with convolutions (tests on CPU), ``never`` none.
``channels-last`` remarks name each convolution changed and each value left as it was, with the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import sympy
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from fusec.analysis.view_layouts import Layout, view_layout
from fusec.base import dtypes, remarks
from fusec.dialects import fusec as F
from fusec.dialects.attributes import TensorType
from fusec.passes.pad_matmuls import graph_device

CONVOLUTION = "aten.convolution.default"
CONVOLUTION_BACKWARD = "aten.convolution_backward.default"
# Externs whose torch kernels return channels-last results for channels-last inputs (their first operand).
FOLLOWERS = frozenset({"aten.max_pool2d_with_indices.default", "aten.max_pool2d_with_indices_backward.default",
                       "aten.avg_pool2d.default", "aten.avg_pool2d_backward.default"})
WHEN = ("auto", "always", "never")
_ANY_LAYOUT_READERS = (F.PointwiseOp, F.ReduceOp, F.ExternOp)  # kernels-to-be and torch calls: strides are theirs to read


def channels_last(t: TensorType) -> TensorType:
    n, c, h, w = t.dims
    return TensorType(t.dims, t.element_type, [c * h * w, 1, w * c, c])


@dataclass(frozen=True)
class ChannelsLast(ModulePass):
    """Channels-last strides for convolutions' activations and the pointwise chains between them."""

    name = "channels-last"

    when: str = "auto"

    def __post_init__(self) -> None:
        if self.when not in WHEN:
            raise ValueError(f"when must be one of {', '.join(WHEN)}, got {self.when!r}")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.when == "never":
            return
        for graph in [g for g in op.walk() if isinstance(g, F.GraphOp)]:
            convs = [x for x in graph.block.ops if isinstance(x, F.ExternOp)
                     and x.target.data in (CONVOLUTION, CONVOLUTION_BACKWARD) and _is_4d(x.inputs[0])]
            if not convs or (self.when == "auto" and not _auto(graph, convs, self.name)):
                continue
            _Relayout(graph, self.name).run(convs)


def _auto(graph: F.GraphOp, convs: list[F.ExternOp], pass_name: str) -> bool:
    """16-bit convolutions on an accelerator (what cuDNN computes only in NHWC).

    Training graphs too, where their sizes are static: over NHWC a batch norm's statistics and gradient sums
    are column reductions of [C, N*H*W], which split-reductions splits (phase by phase for a variance after its
    mean).  ResNet-18's bf16 training step on an H100: NCHW 2627 µs, channels-last 2329 µs before its weights
    were copied as graph ops (Inductor with combo kernels: 2237 µs).  Under symbolic sizes a forward cannot hand
    its saved tensors on channels-last (AOTAutograd restrides a backward's inputs to static strides only), so
    training graphs with size symbols keep eager's layouts."""
    t = convs[0].inputs[0].type
    if graph_device(graph) in (None, "cpu") or not isinstance(t, TensorType):
        return False
    dtype = dtypes.of_ir(t.element_type)
    tf32 = t.element_type == F.F32 and graph.mark(F.CUDNN_ALLOW_TF32_MARK) is True
    if not dtype.is_float or (dtype.bytes != 2 and not tf32):
        return False
    training = graph.saved_outputs_from is not None or any(c.target.data == CONVOLUTION_BACKWARD for c in convs)
    if training and graph.declared_symbols:
        remarks.emit(pass_name, "channels-last-skipped", "a training graph with symbolic sizes keeps its layouts "
                     "(when=always relayouts it): its forward cannot hand its saved tensors on channels-last", graph)
        return False
    return True


def fixed_layout(v: SSAValue, chooses: Callable[[Operation], bool] = lambda op: False,
                 saved_from: int | None = None, permutes: bool = False) -> str | None:
    """Why the compiler may not change the layout of ``v``, or None: it must be made by a pointwise op (or an op
    ``chooses`` says lets the compiler choose) and read only by ops that read any layout -- kernels-to-be and
    externs, never a view, and never the graph output but for outputs from ``saved_from`` on (saved tensors whose
    strides the backend reports).  With ``permutes``, a permute whose result only such ops read may read it too
    (the caller then retypes that result: ``permuted_type``)."""
    if isinstance(v, BlockArgument):
        return "a graph input (its layout is the caller's)"
    owner = v.owner
    assert isinstance(owner, Operation)
    if not (isinstance(owner, F.PointwiseOp) or chooses(owner)):
        return f"made by {owner.name} (its layout is not the compiler's to choose)"
    for use in v.uses:
        reader = use.operation
        if isinstance(reader, F.OutputOp):
            if saved_from is None or use.index < saved_from:
                return "a graph output (eager's strides)"
        elif permutes and isinstance(reader, F.PermuteOp):
            if not all(isinstance(u.operation, _ANY_LAYOUT_READERS) for u in reader.result.uses):
                return f"read by {reader.name}, whose result a view or the graph output reads"
        elif not isinstance(reader, _ANY_LAYOUT_READERS):
            return f"read by {reader.name}"
    return None


def permuted_type(permute: F.PermuteOp, input_type: TensorType) -> TensorType:
    """The type of ``permute``'s result over an input of ``input_type`` (``view_layout``'s strides)."""
    result = permute.result.type
    assert isinstance(result, TensorType)
    layout = view_layout(permute, Layout(tuple(input_type.dims), tuple(input_type.layout), sympy.Integer(0)))
    assert layout is not None, "a permute's layout is always known"
    return TensorType(result.dims, result.element_type, layout.strides)


def _is_4d(v: SSAValue) -> bool:
    return isinstance(v.type, TensorType) and v.type.rank == 4


class _Relayout:
    def __init__(self, graph: F.GraphOp, pass_name: str):
        self.graph = graph
        self.pass_name = pass_name
        # Saved outputs move only under static sizes: AOTAutograd restrides a backward's inputs to static strides.
        self.saved_from = graph.saved_outputs_from if not graph.declared_symbols else None
        self.declined: dict[F.ExternOp, str] = {}  # convolutions left as they are, and why

    def movable(self, v: SSAValue) -> str | None:
        """Why ``v`` keeps its layout, or None when it may become channels-last."""
        t = v.type
        if not isinstance(t, TensorType) or t.rank != 4:
            return "not a 4-D tensor"
        if not t.is_contiguous:
            return "already laid out otherwise"
        return fixed_layout(v, lambda op: isinstance(op, F.ExternOp) and op.target.data in
                            (CONVOLUTION, CONVOLUTION_BACKWARD, *FOLLOWERS), self.saved_from, permutes=True)

    def run(self, convs: list[F.ExternOp]) -> None:
        chosen, copies, copied_back = self.choose(convs)
        for v in chosen:
            t = v.type
            assert isinstance(t, TensorType)
            readers = [u.operation for u in v.uses if isinstance(u.operation, F.PermuteOp)]
            Rewriter.replace_value_with_new_type(v, channels_last(t))
            for permute in readers:  # a ConvNeXt block's NCHW -> NHWC view: dense over channels-last
                Rewriter.replace_value_with_new_type(permute.result, permuted_type(permute, channels_last(t)))
        if self.saved_from is not None:  # saved outputs may have moved: the graph declares what it returns
            self.graph.declare_returned_types()
        made: dict[SSAValue, SSAValue] = {}  # one copy of a value for every convolution reading it
        for conv, i in copies:
            v = conv.inputs[i]
            t = v.type
            assert isinstance(t, TensorType)
            if v not in made:
                copy = F.PointwiseOp("identity", [v], channels_last(t))
                Rewriter.insert_op(copy, InsertPoint.before(conv))
                made[v] = copy.result
                remarks.emit(self.pass_name, "channels-last-copy", f"{conv.target.data}: operand {i} is copied to "
                             f"channels-last: it is {self.movable(v)}", conv)
            conv.operands[i] = made[v]
        for conv, v in copied_back:  # a weight's gradient: computed channels-last, handed on as eager's
            t = v.type
            assert isinstance(t, TensorType)
            why = self.movable(v)
            copy = F.PointwiseOp("identity", [v], t)
            Rewriter.insert_op(copy, InsertPoint.after(conv))
            for use in [u for u in v.uses if u.operation is not copy]:  # every reader but the copy reads it
                use.operation.operands[use.index] = copy.result
            Rewriter.replace_value_with_new_type(v, channels_last(t))
            remarks.emit(self.pass_name, "channels-last-copy", f"{conv.target.data}: the weight's gradient is computed "
                         f"channels-last, as the library does, and copied back: it is {why}", conv)
        for conv in convs:
            if conv in self.declined:
                remarks.emit(self.pass_name, "channels-last-declined", f"{conv.target.data} keeps eager's layouts: "
                             f"{self.declined[conv]}", conv)
            else:
                remarks.emit(self.pass_name, "channels-last", f"{conv.target.data}: activations channels-last "
                             f"({len(chosen)} values in this graph)", conv)

    def choose(self, convs: list[F.ExternOp]) -> tuple[set[SSAValue], list[tuple[F.ExternOp, int]],
                                                         list[tuple[F.ExternOp, SSAValue]]]:
        """The values to lay out channels-last, the convolution operands to copy into it, and the results
        (weights' gradients) to compute in it and copy back.

        A convolution's weight goes channels-last with its activations: given channels-last activations and a
        contiguous weight, torch copies the weight on every call, and returns the weight's gradient channels-last
        for autograd to copy back (ResNet-18's bf16 training step on an H100: 50 such copies, 189 µs).  As graph
        ops those copies are kernels the fusion passes see (and combo-grouping launches together)."""
        chosen: set[SSAValue] = set()
        work: list[SSAValue] = []

        def want(v: SSAValue) -> bool:
            if v not in chosen and self.movable(v) is None:
                chosen.add(v)
                work.append(v)
            return v in chosen

        copies: list[tuple[F.ExternOp, int]] = []
        copied_back: list[tuple[F.ExternOp, SSAValue]] = []
        for conv in convs:
            if 0 in conv.result_positions:  # its result (a backward's grad_input, where it computes one)
                result = conv.outputs[conv.result_positions.index(0)]
                if not want(result):  # channels-last operands would give torch's result another layout: a copy
                    self.declined[conv] = f"its result is {self.movable(result)}"
                    continue
            backward = conv.target.data == CONVOLUTION_BACKWARD
            for i in ([0, 1, 2] if backward else [0, 1]):  # the activations it reads, and the weight
                v = conv.inputs[i]
                if (i != (2 if backward else 1) or _has_window(v)) and not want(v) and _plain_4d(v):
                    copies.append((conv, i))
            if backward and 1 in conv.result_positions:  # the weight's gradient
                grad_weight = conv.outputs[conv.result_positions.index(1)]
                if _has_window(grad_weight) and not want(grad_weight) and _plain_4d(grad_weight):
                    copied_back.append((conv, grad_weight))
        while work:
            for x in _neighbours(work.pop()):
                want(x)
        return chosen, copies, copied_back


def _plain_4d(v: SSAValue) -> bool:
    t = v.type
    return isinstance(t, TensorType) and t.is_contiguous and t.rank == 4


def _has_window(weight: SSAValue) -> bool:
    """A weight (or its gradient) wider than 1x1, whose channels-last layout differs from its contiguous one."""
    t = weight.type
    return isinstance(t, TensorType) and t.rank == 4 and not (t.dims[2] == 1 and t.dims[3] == 1)


def _neighbours(v: SSAValue) -> list[SSAValue]:
    """Values that take ``v``'s layout (eager's rule: a pointwise result takes its full-size operands', and they
    its; a max pool's results take its input's)."""
    out: list[SSAValue] = []
    for use in v.uses:
        reader = use.operation
        if isinstance(reader, F.PointwiseOp) and _same_dims(reader.result, v):
            out.append(reader.result)
        elif isinstance(reader, F.ExternOp) and reader.target.data in FOLLOWERS and use.index == 0:
            out += [r for r in reader.outputs if _same_dims(r, reader.outputs[0])]
    if isinstance(v.owner, F.PointwiseOp):
        out += [x for x in v.owner.inputs if _same_dims(x, v)]
    return out


def _same_dims(a: SSAValue, b: SSAValue) -> bool:
    ta, tb = a.type, b.type
    return isinstance(ta, TensorType) and isinstance(tb, TensorType) and ta.rank == 4 and ta.dims == tb.dims
