"""The fusec dialect: tensor graphs with symbolic shapes, and the kernels they become.

This docstring states the rules of the IR that every pass, the lowering and the
reference interpreter (``fusec/runtime/interpreter.py``, which gives the IR its meaning)
rely on; each op's docstring gives its syntax.

Graph level (what the importer produces)::

    fusec.graph @fn(%a : !fusec.tensor<[s0, 512], f32>) -> (!fusec.tensor<[s0], f32>)
        symbols(s0 in [2, inf]) {
      %s = fusec.reduce "sum" %a dims [1] : !fusec.tensor<[s0, 512], f32> -> !fusec.tensor<[s0], f32>
      fusec.output %s : !fusec.tensor<[s0], f32>
    }

A module holds ``fusec.graph`` ops.  A graph's block arguments are its tensor
inputs; it declares its size symbols ``s0, s1, ...`` with bounds and ends with
``fusec.output``.  Dims are sympy expressions over the size symbols (text form
in ``fusec/base/shapes.py``).  The graph-level ops: ``fusec.pointwise`` (with
broadcasting), ``fusec.constant`` (a 0-d value or a broadcast fill),
``fusec.symbolic`` (the value of a size expression, 0-d i64), ``fusec.reduce``,
the views (``reshape``, ``permute``, ``expand``, ``slice``), ``fusec.cat``,
``fusec.index``, ``fusec.gather`` and ``fusec.extern`` (a torch call at run time,
see ``fusec.dialects.extern_calls``).

Pointwise conversions, at both levels: the operands are converted to the result's
element type before the function applies (an fp16/bf16 result with an fp32 operand
computes in fp32 instead, the operand unrounded: how torch's GPU kernels apply a
Python number to a 16-bit tensor, which the importer makes an f32 constant), except for the predicates
(``PREDICATES``: eq, ne, lt, le, gt, ge, isnan, isinf, logical_and/or/not,
signbit), which compare in ``torch.promote_types`` of their operands and give i1,
and for ``"where"``, whose condition is i1 (only its other two operands are
converted).  max/min (reductions, and ``maximum``/``minimum``) propagate NaN as
torch does.  fp16/bf16 values may be computed in fp32 and rounded at stores.

Kernel level (what the passes make; here the graph's body above after ``form-kernels``)::

    %s = fusec.kernel @fusec_red_sum_0 [s0, 512] (%a) : (!fusec.tensor<[s0, 512], f32>) -> (!fusec.tensor<[s0], f32>) {
    ^bb0(%0: !fusec.tensor<[s0, 512], f32>, %1: !fusec.tensor<[s0], f32>):
      %2 = fusec.load %0[r + 512*x] : !fusec.tensor<[s0, 512], f32>
      %3 = fusec.reduce_r "sum" %2 : f32 -> f32
      fusec.store %3, %1[x] : !fusec.tensor<[s0], f32>
    }

* ``fusec.kernel @name [xnumel]`` or ``[xnumel, rnumel]``: the body's block
  arguments are the input buffers, then the output buffers (one per result).
  ``x`` ranges over [0, xnumel), ``r`` over [0, rnumel).
* ``fusec.load %buf[idx]`` reads the element at flat *storage* offset ``idx``
  from the buffer's start: the buffer's strides are already folded into ``idx``.
  With ``mask %m`` (i1) it loads only where ``%m`` is true and gives 0 elsewhere;
  ``%buf[%o + idx]`` adds an i64 element value ``%o`` to the index (gathers and
  index ops).
* ``fusec.pointwise``, ``fusec.constant`` and ``fusec.symbolic`` also work on
  element values (scalar types f32, i64, i1, ...), with the same conversions.
* ``fusec.reduce_r KIND %v`` (KIND: sum, prod, max, min, argmax, argmin, any,
  all) reduces a value over ``r``, giving one value per ``x``; argmax/argmin give
  the ``r`` of the first extreme, as i64.
* ``fusec.store %v, %out[idx]`` writes (with ``mask %m``, only where true).  A
  value that does not depend on ``r`` is stored once per ``x``.  A value depends
  on ``r`` iff it comes (transitively) from a load or symbolic whose index uses
  ``r``, by a path that does not pass through a ``reduce_r``.

A matmul kernel (``fusec.kernel @k [B*M*N, K] matmul [B, M, N]``, made by
``matmul-epilogues``) follows the same rules: ``x`` is the flat index of the
product's element (b, m, n), ``r`` is k, and its body sums over r the product of
a load of A at (b, m, r) and a load of B at (b, r, n), in that order (in f32),
before its epilogue; the interpreter runs it as that reduction, the lowering as ``tl.dot``.

A ``fusec.combo`` holds independent kernels that launch as one.  After
``form-kernels`` a graph holds only ``fusec.kernel``, ``fusec.combo`` (after
``combo-grouping``), ``fusec.extern``, view ops whose results reach an extern or
the graph output (run as torch views at run time), and ``fusec.output``.

The definitions live beside this module, and this module re-exports them:
``attributes`` (types, attributes, element types), ``pointwise`` (the function
and reduction tables), ``directives`` (the custom directives of the ops'
assembly formats), ``graph_ops``, ``view_ops`` and ``kernel_ops``.
"""

from xdsl.ir import Dialect

from fusec.dialects.attributes import (
    BF16,
    BOOL,
    ELEMENT_TYPE_NAMES,
    ELEMENT_TYPES,
    F16,
    F32,
    F64,
    GRAPH_DEVICE,
    I8,
    I16,
    I32,
    I64,
    TORCH_ENUMS,
    U8,
    ExprAttr,
    NumberAttr,
    OperandSlotAttr,
    SizeFactAttr,
    SymbolAttr,
    TensorType,
    TorchConstAttr,
    TorchOpAttr,
    dtype_name,
    element_of,
    extern_arg_operand_count,
    is_element_type,
    is_extern_arg,
    is_float,
    torch_dtype,
)
from fusec.dialects.graph_ops import (
    ALIGNED_INPUTS,
    CUDNN_ALLOW_TF32_MARK,
    DEVICE_CAPABILITY_MARK,
    DEVICE_MARK,
    FLOAT32_MATMUL_PRECISION_MARK,
    INPUT_MUTATIONS,
    SAVED_OUTPUTS,
    SM_COUNT_MARK,
    CatOp,
    ConstantOp,
    ExternOp,
    GatherOp,
    GraphOp,
    IndexOp,
    OutputOp,
    PointwiseCanonicalization,
    PointwiseOp,
    ReduceOp,
    SymbolicOp,
    find_graph,
    flat_returns,
    op_symbol_uses,
)
from fusec.dialects.kernel_ops import (
    STORAGE,
    ComboOp,
    KernelOp,
    KernelSchedule,
    LoadOp,
    MatmulTiles,
    ReduceROp,
    StoreOp,
    mark_storage,
    storage_of,
)
from fusec.dialects.pointwise import POINTWISE_FUNCTIONS, PREDICATES, REDUCTIONS, broadcast_types, reduction_result_type
from fusec.dialects.view_ops import VIEW_OPS, ExpandOp, PermuteOp, ReshapeOp, SliceOp

Fusec = Dialect(
    "fusec",
    [GraphOp, OutputOp, PointwiseOp, ConstantOp, SymbolicOp, ReduceOp, ReshapeOp, PermuteOp, ExpandOp, SliceOp,
     CatOp, IndexOp, GatherOp, ExternOp, KernelOp, LoadOp, StoreOp, ReduceROp, ComboOp],
    [ExprAttr, TensorType, SymbolAttr, SizeFactAttr, NumberAttr, OperandSlotAttr, TorchConstAttr, TorchOpAttr],
)

# The dialect's names, one namespace for its users (`from fusec.dialects import fusec as F; F.KernelOp`):
# every public name of attributes, pointwise, graph_ops, view_ops and kernel_ops (a test checks that none is missing).
__all__ = [
    # attributes and types
    "BF16", "BOOL", "ELEMENT_TYPES", "ELEMENT_TYPE_NAMES", "F16", "F32", "F64", "GRAPH_DEVICE", "I8", "I16", "I32", "I64",
    "TORCH_ENUMS", "U8", "ExprAttr", "NumberAttr", "OperandSlotAttr", "SizeFactAttr", "SymbolAttr", "TensorType", "TorchConstAttr",
    "TorchOpAttr",
    "dtype_name", "element_of", "extern_arg_operand_count", "is_element_type", "is_extern_arg", "is_float", "torch_dtype",
    # pointwise functions and reductions
    "POINTWISE_FUNCTIONS", "PREDICATES", "REDUCTIONS", "broadcast_types", "reduction_result_type",
    # graph ops and views
    "ALIGNED_INPUTS", "CUDNN_ALLOW_TF32_MARK", "DEVICE_CAPABILITY_MARK", "DEVICE_MARK", "INPUT_MUTATIONS",
    "FLOAT32_MATMUL_PRECISION_MARK", "SAVED_OUTPUTS", "SM_COUNT_MARK",
    "CatOp", "ConstantOp", "ExternOp", "GatherOp", "GraphOp", "IndexOp", "OutputOp", "PointwiseCanonicalization",
    "VIEW_OPS", "PointwiseOp", "ReduceOp", "SymbolicOp", "find_graph", "flat_returns", "op_symbol_uses",
    "ExpandOp", "PermuteOp", "ReshapeOp", "SliceOp",
    # kernel ops
    "STORAGE", "ComboOp", "KernelOp", "KernelSchedule", "LoadOp", "MatmulTiles", "ReduceROp", "StoreOp", "mark_storage",
    "storage_of",
    "Fusec",
]
