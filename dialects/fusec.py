"""The fusec dialect: tensor graphs with symbolic shapes, and the kernels they become.

This docstring states the rules of the IR that every pass, the lowering and the
reference interpreter (``fusec/interpreter.py``, which gives the IR its meaning)
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
in ``fusec/shapes.py``).  The graph-level ops: ``fusec.pointwise`` (with
broadcasting), ``fusec.constant`` (a 0-d value or a broadcast fill),
``fusec.symbolic`` (the value of a size expression, 0-d i64), ``fusec.reduce``,
the views (``reshape``, ``permute``, ``expand``, ``slice``), ``fusec.cat``,
``fusec.index``, ``fusec.gather`` and ``fusec.extern`` (a torch call at run time,
see ``fusec.dialects.extern_calls``).

Pointwise conversions, at both levels: the operands are converted to the result's
element type before the function applies, except for the predicates
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

A ``fusec.combo`` holds independent kernels that launch as one.  After
``form-kernels`` a graph holds only ``fusec.kernel``, ``fusec.combo`` (after
``combo-grouping``), ``fusec.extern``, view ops whose results reach an extern or
the graph output (run as torch views at run time), and ``fusec.output``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import sympy
from xdsl.dialects.builtin import (
    AnyFloat,
    ArrayAttr,
    DictionaryAttr,
    FunctionType,
    IntAttr,
    NoneAttr,
    StringAttr,
    UnitAttr,
)
from xdsl.ir import (
    Attribute,
    Block,
    Data,
    Dialect,
    Operation,
    ParametrizedAttribute,
    Region,
    SSAValue,
    TypeAttribute,
)
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.traits import HasCanonicalizationPatternsTrait, IsolatedFromAbove, IsTerminator, NoTerminator, Pure, SymbolOpInterface
from xdsl.utils.exceptions import VerifyException

from fusec.base import dtypes, shapes
from fusec.base.shapes import ExprReader, print_expr

# ---------------------------------------------------------------- attributes


class _ParserTokens:
    """``ExprReader``'s token source over xDSL's parser (its public ``parse_optional_*`` calls)."""

    def __init__(self, parser: AttrParser):
        self.parser = parser

    def punct(self, p) -> bool:
        return self.parser.parse_optional_punctuation(p) is not None

    def integer(self) -> int | None:
        return self.parser.parse_optional_integer(allow_boolean=False, allow_negative=False)

    def identifier(self) -> str | None:
        return self.parser.parse_optional_identifier()

    def error(self, msg: str):
        self.parser.raise_error(msg)


def _expr_reader(parser: AttrParser) -> ExprReader:
    return ExprReader(_ParserTokens(parser))


def _parse_expr_tokens(parser: AttrParser) -> sympy.Expr:
    """Read an integer expression from xDSL's token stream (grammar in fusec.base.shapes)."""
    return _expr_reader(parser).expr()


@irdl_attr_definition
class ExprAttr(Data[sympy.Expr]):
    """An integer expression over size symbols (and, in kernels, ``x`` and ``r``)."""

    name = "fusec.expr"

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> sympy.Expr:
        with parser.in_angle_brackets():
            return _parse_expr_tokens(parser)

    def print_parameter(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(print_expr(self.data))

    @staticmethod
    def of(value: int | str | sympy.Basic) -> ExprAttr:
        return ExprAttr(shapes.as_expr(value))


def _parse_expr_list(parser: AttrParser) -> list[sympy.Expr]:
    return parser.parse_comma_separated_list(parser.Delimiter.SQUARE, lambda: _parse_expr_tokens(parser))


def _print_expr_list(printer: Printer, exprs: Sequence[sympy.Expr]) -> None:
    printer.print_string("[" + ", ".join(print_expr(e) for e in exprs) + "]")


def _parse_int_list(parser: AttrParser) -> list[int]:
    return parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_integer)


def _print_int_list(printer: Printer, values: Sequence[int]) -> None:
    printer.print_string("[" + ", ".join(str(v) for v in values) + "]")


@irdl_attr_definition
class TensorType(ParametrizedAttribute, TypeAttribute):
    """A tensor whose dims are integers or sympy expressions: ``!fusec.tensor<[s0, 512], f32>``.

    Strides are printed only where the layout is not contiguous:
    ``!fusec.tensor<[512, s0], f32, strides [1, 512]>``.
    """

    name = "fusec.tensor"

    shape: ArrayAttr[ExprAttr]
    element_type: Attribute
    strides: ArrayAttr[ExprAttr]

    def __init__(self, shape: Sequence[int | str | sympy.Basic], element_type: Attribute, strides: Sequence | None = None):
        dims = [shapes.as_expr(d) for d in shape]
        stride_exprs = [shapes.as_expr(s) for s in strides] if strides is not None else []
        if stride_exprs and all(sympy.simplify(a - b) == 0 for a, b in zip(stride_exprs, shapes.contiguous_strides(dims), strict=True)):
            stride_exprs = []
        super().__init__(ArrayAttr([ExprAttr(d) for d in dims]), element_type, ArrayAttr([ExprAttr(s) for s in stride_exprs]))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            dims = _parse_expr_list(parser)
            parser.parse_punctuation(",")
            element_type = parser.parse_type()
            strides: list[sympy.Expr] = []
            if parser.parse_optional_punctuation(","):
                parser.parse_keyword("strides")
                strides = _parse_expr_list(parser)
                if len(strides) != len(dims):
                    parser.raise_error(f"{len(strides)} strides given for a tensor of rank {len(dims)}")
        return (ArrayAttr([ExprAttr(d) for d in dims]), element_type, ArrayAttr([ExprAttr(s) for s in strides]))

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            _print_expr_list(printer, self.dims)
            printer.print_string(", ")
            printer.print_attribute(self.element_type)
            if self.strides.data:
                printer.print_string(", strides ")
                _print_expr_list(printer, [s.data for s in self.strides.data])

    def verify(self) -> None:
        if not is_element_type(self.element_type):
            raise VerifyException(f"fusec.tensor: {self.element_type} is not an element type")
        if self.strides.data and len(self.strides.data) != len(self.shape.data):
            raise VerifyException("fusec.tensor: strides and shape differ in rank")
        for e in self.dims:
            if shapes.INDEX_VARS and {s.name for s in e.free_symbols} & set(shapes.INDEX_VARS):
                raise VerifyException(f"fusec.tensor: dim {print_expr(e)} uses an iteration variable")

    @property
    def dims(self) -> list[sympy.Expr]:
        return [d.data for d in self.shape.data]

    @property
    def rank(self) -> int:
        return len(self.shape.data)

    @property
    def layout(self) -> list[sympy.Expr]:
        """The strides, contiguous ones made explicit."""
        if self.strides.data:
            return [s.data for s in self.strides.data]
        return shapes.contiguous_strides(self.dims)

    @property
    def is_contiguous(self) -> bool:
        return not self.strides.data

    def contiguous(self) -> TensorType:
        """The same dims and element type, laid out contiguously (what a kernel's output gets)."""
        return TensorType(self.dims, self.element_type)

    def with_dtype(self, element_type: Attribute) -> TensorType:
        return TensorType(self.dims, element_type)


@irdl_attr_definition
class SymbolAttr(ParametrizedAttribute):
    """A size symbol declaration with its known bounds: ``s0 in [2, inf]``."""

    name = "fusec.sym"

    sym: StringAttr
    lower: IntAttr
    upper: IntAttr  # -1 stands for no upper bound

    def __init__(self, sym: str, lower: int = 0, upper: int | None = None):
        super().__init__(StringAttr(sym), IntAttr(lower), IntAttr(-1 if upper is None else upper))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            sym, lower, upper = _parse_symbol_decl(parser)
        return (StringAttr(sym), IntAttr(lower), IntAttr(upper))

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(self.text)

    @property
    def text(self) -> str:
        upper = "inf" if self.upper.data < 0 else str(self.upper.data)
        return f"{self.sym.data} in [{self.lower.data}, {upper}]"


def _parse_symbol_decl(parser: AttrParser) -> tuple[str, int, int]:
    name = parser.parse_identifier(" (a size symbol)")
    if not shapes._SYMBOL_NAME.match(name) or name in shapes.INDEX_VARS:
        parser.raise_error(f"'{name}' is not a valid size symbol name")
    parser.parse_keyword("in")
    parser.parse_punctuation("[")
    lower = parser.parse_integer(allow_negative=False)
    parser.parse_punctuation(",")
    upper = -1 if parser.parse_optional_keyword("inf") else parser.parse_integer(allow_negative=False)
    parser.parse_punctuation("]")
    return name, lower, upper


@irdl_attr_definition
class NumberAttr(Data[float | int | bool]):
    """A scalar literal: ``0.5``, ``-3``, ``inf``, ``nan``, ``true``."""

    name = "fusec.number"

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> float | int | bool:
        with parser.in_angle_brackets():
            return _parse_number(parser)

    def print_parameter(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(_number_text(self.data))


def _number_text(value: float | int | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        text = repr(value)
        mantissa, _, exponent = text.partition("e")
        if exponent and "." not in mantissa:  # MLIR float literals need a '.': 1e-05 -> 1.0e-05
            text = f"{mantissa}.0e{exponent}"
        return text
    return str(value)


def _parse_number(parser: AttrParser) -> float | int | bool:
    if parser.parse_optional_keyword("true"):
        return True
    if parser.parse_optional_keyword("false"):
        return False
    if parser.parse_optional_keyword("nan"):
        return math.nan
    negative = parser.parse_optional_punctuation("-") is not None
    if parser.parse_optional_keyword("inf"):
        return -math.inf if negative else math.inf
    value = parser.parse_number()
    if isinstance(value, float) and math.isinf(value):
        parser.raise_error("number out of range")
    return -value if negative else value


# ---------------------------------------------------------------- element types

ELEMENT_TYPES: dict[str, Attribute] = {d.name: d.ir for d in dtypes.DTYPES}  # torch's name -> the IR's type (fusec.base.dtypes)
ELEMENT_TYPE_NAMES: dict[str, Attribute] = {str(t): t for t in ELEMENT_TYPES.values()}  # "f32" -> f32
BOOL, I8, I16, I32, I64, U8 = (ELEMENT_TYPES[n] for n in ("bool", "int8", "int16", "int32", "int64", "uint8"))
F16, BF16, F32, F64 = (ELEMENT_TYPES[n] for n in ("float16", "bfloat16", "float32", "float64"))


def is_element_type(t: Attribute) -> bool:
    return t in ELEMENT_TYPES.values()


def dtype_name(t: Attribute) -> str:
    """torch's name of an element type (``"float32"`` for ``f32``)."""
    return dtypes.of_ir(t).name


def is_float(t: Attribute) -> bool:
    return isinstance(t, AnyFloat)


def element_of(t: Attribute) -> Attribute:
    """The element type of a tensor type, or the type itself for a scalar."""
    return t.element_type if isinstance(t, TensorType) else t


def torch_dtype(t: Attribute):
    """The torch dtype of a tensor or element type (torch is imported only when asked)."""
    return dtypes.of_ir(element_of(t)).torch


# ---------------------------------------------------------------- pointwise functions

# name -> arity.  Comparisons and predicates give bool; every other function gives
# the result type, its operands converted to it first ("where" converts its 2nd and 3rd).
POINTWISE_FUNCTIONS: dict[str, int] = {
    **dict.fromkeys(["add", "sub", "mul", "div", "floordiv", "remainder", "pow", "maximum", "minimum",
                     "atan2", "bitwise_and", "bitwise_or", "bitwise_xor", "logical_and", "logical_or",
                     "eq", "ne", "lt", "le", "gt", "ge"], 2),
    **dict.fromkeys(["neg", "abs", "exp", "exp2", "expm1", "log", "log2", "log1p", "sqrt", "rsqrt", "sin", "cos",
                     "tan", "tanh", "sigmoid", "erf", "floor", "ceil", "round", "trunc", "sign", "reciprocal",
                     "relu", "logical_not", "bitwise_not", "isnan", "isinf", "convert", "identity",
                     "asin", "acos", "atan", "sinh", "cosh", "erfc", "signbit"], 1),
    "where": 3,
}
PREDICATES = {"eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "logical_and", "logical_or", "logical_not", "signbit"}
REDUCTIONS = ("sum", "prod", "max", "min", "argmax", "argmin", "any", "all")


def broadcast_types(types: Sequence[TensorType]) -> list[sympy.Expr] | None:
    return shapes.broadcast_shapes(*[t.dims for t in types])


# ---------------------------------------------------------------- graph level


@irdl_op_definition
class GraphOp(IRDLOperation):
    """A compiled program: tensor inputs, size symbols with bounds, tensor outputs."""

    name = "fusec.graph"

    sym_name = prop_def(StringAttr)
    function_type = prop_def(FunctionType)
    symbols = prop_def(ArrayAttr[SymbolAttr])
    body = region_def("single_block")
    traits = traits_def(IsolatedFromAbove(), SymbolOpInterface())

    def __init__(self, name: str, input_types: Sequence[Attribute], output_types: Sequence[Attribute],
                 symbols: Sequence[SymbolAttr], body: Region | None = None):
        if body is None:
            body = Region(Block(arg_types=input_types))
        super().__init__(
            properties={
                "sym_name": StringAttr(name),
                "function_type": FunctionType.from_lists(input_types, output_types),
                "symbols": ArrayAttr(symbols),
            },
            regions=[body],
        )

    @property
    def block(self) -> Block:
        return self.body.block

    @property
    def declared_symbols(self) -> dict[str, SymbolAttr]:
        return {s.sym.data: s for s in self.symbols.data}

    @property
    def symbol_bounds(self) -> dict[str, tuple[float, float]]:
        """Each size symbol's declared [lower, upper] (upper may be inf)."""
        return {name: (s.lower.data, math.inf if s.upper.data < 0 else s.upper.data) for name, s in self.declared_symbols.items()}

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        printer.print_string("(")
        def argument(a) -> None:
            printer.print_ssa_value(a)
            printer.print_string(" : ")
            printer.print_attribute(a.type)

        printer.print_list(self.block.args, argument)
        printer.print_string(") -> (")
        printer.print_list(self.function_type.outputs.data, printer.print_attribute)
        printer.print_string(")")
        if self.symbols.data:
            printer.print_string(" symbols(" + ", ".join(s.text for s in self.symbols.data) + ")")
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False)

    @classmethod
    def parse(cls, parser: Parser) -> GraphOp:
        name = parser.parse_symbol_name().data
        args = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_argument)
        parser.parse_punctuation("->")
        outputs = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_type)
        symbols: list[SymbolAttr] = []
        if parser.parse_optional_keyword("symbols"):
            decls = parser.parse_comma_separated_list(parser.Delimiter.PAREN, lambda: _parse_symbol_decl(parser))
            symbols = [SymbolAttr(n, lo, None if hi < 0 else hi) for n, lo, hi in decls]
        region = parser.parse_region(args)
        return GraphOp(name, [a.type for a in args], outputs, symbols, region)

    def verify_(self) -> None:
        if list(self.block.arg_types) != list(self.function_type.inputs.data):
            raise VerifyException(f"fusec.graph @{self.sym_name.data}: block arguments do not match its input types")
        last = self.block.last_op
        if not isinstance(last, OutputOp):
            raise VerifyException(f"fusec.graph @{self.sym_name.data}: must end with fusec.output")
        if [v.type for v in last.values] != list(self.function_type.outputs.data):
            raise VerifyException(f"fusec.graph @{self.sym_name.data}: fusec.output types do not match the declared outputs")
        declared = set(self.declared_symbols)
        for op in self.walk():
            for name, value in op_symbol_uses(op):
                if name not in declared:
                    raise VerifyException(f"{op.name}: size symbol '{name}' in {value} is not declared by "
                                          f"fusec.graph @{self.sym_name.data}")


def find_graph(module: Operation, name: str | None = None) -> GraphOp:
    """The one ``fusec.graph`` in ``module`` (named ``name``, if given), or ``module`` itself if it is one."""
    if isinstance(module, GraphOp):
        return module
    graphs = [op for op in module.walk() if isinstance(op, GraphOp) and (name is None or op.sym_name.data == name)]
    if len(graphs) != 1:
        raise ValueError(f"expected one fusec.graph{f' named @{name}' if name else ''} in the module, found {len(graphs)}")
    return graphs[0]


def op_symbol_uses(op: Operation) -> list[tuple[str, str]]:
    """(symbol, where) for each size symbol an op's types and expressions use."""
    uses: list[tuple[str, str]] = []
    types = [r.type for r in op.results] + [a.type for region in op.regions for block in region.blocks for a in block.args]
    for t in types:
        if isinstance(t, TensorType):
            for name in shapes.free_size_symbols(t.dims + t.layout):
                uses.append((name, str(t)))
    for prop in op.properties.values():
        if isinstance(prop, ExprAttr):
            exprs = [prop.data]
        else:
            exprs = [a.data for a in prop.data if isinstance(a, ExprAttr)] if isinstance(prop, ArrayAttr) else []
        for name in shapes.free_size_symbols(exprs):
            uses.append((name, ", ".join(print_expr(e) for e in exprs)))
    return uses


@irdl_op_definition
class OutputOp(IRDLOperation):
    """Ends a graph or combo: the values it yields."""

    name = "fusec.output"
    values = var_operand_def()
    traits = traits_def(IsTerminator())
    assembly_format = "($values^ `:` type($values))? attr-dict"

    def __init__(self, values: Sequence[SSAValue]):
        super().__init__(operands=[values])


def _tensor(op: Operation, value: SSAValue, what: str) -> TensorType:
    if not isinstance(value.type, TensorType):
        raise VerifyException(f"{op.name}: {what} must be a !fusec.tensor, got {value.type}")
    return value.type


def _check_same_dims(op: Operation, got: Sequence[sympy.Expr], want: Sequence[sympy.Expr], what: str) -> None:
    if len(got) != len(want) or any(not shapes.provably_equal(a, b) for a, b in zip(got, want, strict=True)):
        raise VerifyException(f"{op.name}: {what}: expected shape [{', '.join(map(print_expr, want))}], "
                              f"got [{', '.join(map(print_expr, got))}]")


class PointwiseCanonicalization(HasCanonicalizationPatternsTrait):
    @classmethod
    def get_canonicalization_patterns(cls):
        from fusec.dialects.canonicalization import PowByConstant  # the patterns build ops of this module

        return (PowByConstant(),)


@irdl_op_definition
class PointwiseOp(IRDLOperation):
    """An elementwise function: on tensors (with broadcasting) in graphs, on element values in kernels."""

    name = "fusec.pointwise"
    fn = prop_def(StringAttr)
    inputs = var_operand_def()
    result = result_def()
    traits = traits_def(Pure(), PointwiseCanonicalization())
    assembly_format = "$fn $inputs attr-dict `:` functional-type($inputs, $result)"

    def __init__(self, fn: str, inputs: Sequence[SSAValue], result_type: Attribute):
        super().__init__(operands=[inputs], result_types=[result_type], properties={"fn": StringAttr(fn)})

    def verify_(self) -> None:
        fn = self.fn.data
        if fn not in POINTWISE_FUNCTIONS:
            raise VerifyException(f"fusec.pointwise: unknown function '{fn}'")
        if len(self.inputs) != POINTWISE_FUNCTIONS[fn]:
            raise VerifyException(f"fusec.pointwise \"{fn}\": expected {POINTWISE_FUNCTIONS[fn]} operands, got {len(self.inputs)}")
        out = self.result.type
        if fn in PREDICATES and element_of(out) != BOOL:
            raise VerifyException(f"fusec.pointwise \"{fn}\": result must be i1, got {element_of(out)}")
        if fn == "where" and element_of(self.inputs[0].type) != BOOL:
            raise VerifyException("fusec.pointwise \"where\": condition must be i1")
        if isinstance(out, TensorType):
            types = [_tensor(self, v, "operand") for v in self.inputs]
            shape = broadcast_types(types)
            if shape is None:
                shown = " and ".join(str(t.dims) for t in types)
                raise VerifyException(f"fusec.pointwise \"{fn}\": operand shapes {shown} do not broadcast")
            _check_same_dims(self, out.dims, shape, "result")
        else:
            if not is_element_type(out):
                raise VerifyException(f"fusec.pointwise \"{fn}\": result must be a tensor or an element type, got {out}")
            for v in self.inputs:
                if not is_element_type(v.type):
                    raise VerifyException(f"fusec.pointwise \"{fn}\": element operands expected, got {v.type}")


@irdl_op_definition
class ConstantOp(IRDLOperation):
    """A scalar literal, broadcast to the result's shape: ``fusec.constant 0.5 : !fusec.tensor<[], f32>``."""

    name = "fusec.constant"
    value = prop_def(NumberAttr)
    result = result_def()
    traits = traits_def(Pure())

    def __init__(self, value: float | int | bool, result_type: Attribute):
        super().__init__(result_types=[result_type], properties={"value": NumberAttr(value)})

    def print(self, printer: Printer) -> None:
        printer.print_string(" " + _number_text(self.value.data))
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> ConstantOp:
        value = _parse_number(parser)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        op = ConstantOp(value, parser.parse_type())
        op.attributes.update(attrs)
        return op

    def verify_(self) -> None:
        t = element_of(self.result.type)
        if not is_element_type(t):
            raise VerifyException(f"fusec.constant: result must be a tensor or an element type, got {self.result.type}")
        v = self.value.data
        if isinstance(v, float) and not is_float(t):
            raise VerifyException(f"fusec.constant: float literal {v} for integer type {t}")


@irdl_op_definition
class SymbolicOp(IRDLOperation):
    """The value of an integer expression over size symbols (and, in kernels, over ``x`` and ``r``)."""

    name = "fusec.symbolic"
    expr = prop_def(ExprAttr)
    result = result_def()
    traits = traits_def(Pure())

    def __init__(self, expr: int | str | sympy.Basic, result_type: Attribute):
        super().__init__(result_types=[result_type], properties={"expr": ExprAttr.of(expr)})

    def print(self, printer: Printer) -> None:
        printer.print_string(" " + print_expr(self.expr.data) + " : ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> SymbolicOp:
        expr = _parse_expr_tokens(parser)
        parser.parse_punctuation(":")
        return SymbolicOp(expr, parser.parse_type())

    def verify_(self) -> None:
        t = self.result.type
        if isinstance(t, TensorType) and t.rank != 0:
            raise VerifyException("fusec.symbolic: a graph-level symbolic value is a 0-d tensor")
        if element_of(t) not in (I64, I32):
            raise VerifyException(f"fusec.symbolic: result must be i64 or i32, got {element_of(t)}")
        if isinstance(t, TensorType) and set(shapes.INDEX_VARS) & {s.name for s in self.expr.data.free_symbols}:
            raise VerifyException("fusec.symbolic: x and r are only defined inside a fusec.kernel")


@irdl_op_definition
class ReduceOp(IRDLOperation):
    """A reduction over some dims: ``fusec.reduce "sum" %x dims [1] : T -> T`` (``keepdim`` keeps them as 1)."""

    name = "fusec.reduce"
    kind = prop_def(StringAttr)
    dims = prop_def(ArrayAttr[IntAttr])
    keepdim = opt_prop_def(UnitAttr)
    input = operand_def()
    result = result_def()
    traits = traits_def(Pure())

    def __init__(self, kind: str, input: SSAValue, dims: Sequence[int], keepdim: bool, result_type: Attribute):
        props: dict[str, Attribute] = {"kind": StringAttr(kind), "dims": ArrayAttr([IntAttr(d) for d in dims])}
        if keepdim:
            props["keepdim"] = UnitAttr()
        super().__init__(operands=[input], result_types=[result_type], properties=props)

    @property
    def dim_list(self) -> list[int]:
        return [d.data for d in self.dims.data]

    def print(self, printer: Printer) -> None:
        printer.print_string(f' "{self.kind.data}" ')
        printer.print_operand(self.input)
        printer.print_string(" dims ")
        _print_int_list(printer, self.dim_list)
        if self.keepdim:
            printer.print_string(" keepdim")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.input.type)
        printer.print_string(" -> ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> ReduceOp:
        kind = parser.parse_str_literal()
        operand = parser.parse_unresolved_operand()
        parser.parse_keyword("dims")
        dims = _parse_int_list(parser)
        keepdim = parser.parse_optional_keyword("keepdim") is not None
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        in_type = parser.parse_type()
        parser.parse_punctuation("->")
        out_type = parser.parse_type()
        op = ReduceOp(kind, parser.resolve_operand(operand, in_type), dims, keepdim, out_type)
        op.attributes.update(attrs)
        return op

    def verify_(self) -> None:
        kind = self.kind.data
        if kind not in REDUCTIONS:
            raise VerifyException(f"fusec.reduce: unknown reduction '{kind}' (one of {', '.join(REDUCTIONS)})")
        t = _tensor(self, self.input, "input")
        dims = self.dim_list
        if not dims or len(set(dims)) != len(dims) or any(d < 0 or d >= t.rank for d in dims):
            raise VerifyException(f"fusec.reduce: dims {dims} invalid for a tensor of rank {t.rank}")
        if kind in ("argmax", "argmin") and len(dims) != 1:
            raise VerifyException(f"fusec.reduce \"{kind}\": exactly one dim")
        want = [sympy.Integer(1) if i in dims else d for i, d in enumerate(t.dims) if self.keepdim or i not in dims]
        out = _tensor(self, self.result, "result")
        _check_same_dims(self, out.dims, want, "result")
        want_type = I64 if kind in ("argmax", "argmin") else BOOL if kind in ("any", "all") else t.element_type
        if out.element_type != want_type:
            raise VerifyException(f"fusec.reduce \"{kind}\": result element type must be {want_type}, got {out.element_type}")


class _ViewOp(IRDLOperation):
    """Base of the view ops: one tensor in, one tensor out with the same element type."""

    input = operand_def()
    result = result_def()

    def verify_(self) -> None:
        t = _tensor(self, self.input, "input")
        out = _tensor(self, self.result, "result")
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
        if not shapes.provably_equal(shapes.numel(t.dims), shapes.numel(out.dims)):
            before, after = print_expr(shapes.numel(t.dims)), print_expr(shapes.numel(out.dims))
            raise VerifyException(f"fusec.reshape: element count {before} != {after}")


@irdl_op_definition
class PermuteOp(_ViewOp):
    """A view with its dims reordered: result dim i is input dim perm[i]."""

    name = "fusec.permute"
    perm = prop_def(ArrayAttr[IntAttr])
    traits = traits_def(Pure())

    def __init__(self, input: SSAValue, perm: Sequence[int], result_type: Attribute):
        super().__init__(operands=[input], result_types=[result_type], properties={"perm": ArrayAttr([IntAttr(p) for p in perm])})

    @property
    def perm_list(self) -> list[int]:
        return [p.data for p in self.perm.data]

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.input)
        printer.print_string(" ")
        _print_int_list(printer, self.perm_list)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.input.type)
        printer.print_string(" -> ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> PermuteOp:
        operand = parser.parse_unresolved_operand()
        perm = _parse_int_list(parser)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        in_type = parser.parse_type()
        parser.parse_punctuation("->")
        op = PermuteOp(parser.resolve_operand(operand, in_type), perm, parser.parse_type())
        op.attributes.update(attrs)
        return op

    def verify_view(self, t: TensorType, out: TensorType) -> None:
        perm = self.perm_list
        if sorted(perm) != list(range(t.rank)):
            raise VerifyException(f"fusec.permute: {perm} is not a permutation of {t.rank} dims")
        _check_same_dims(self, out.dims, [t.dims[p] for p in perm], "result")


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
            if d_in != 1 and not shapes.provably_equal(d_in, d_out):
                raise VerifyException(f"fusec.expand: dim {print_expr(d_in)} cannot expand to {print_expr(d_out)}")


@irdl_op_definition
class SliceOp(_ViewOp):
    """A strided window of one dim: elements start, start+step, ... below end."""

    name = "fusec.slice"
    dim = prop_def(IntAttr)
    start = prop_def(ExprAttr)
    step = prop_def(IntAttr)
    traits = traits_def(Pure())

    def __init__(self, input: SSAValue, dim: int, start: int | sympy.Basic, step: int, result_type: Attribute):
        super().__init__(operands=[input], result_types=[result_type],
                         properties={"dim": IntAttr(dim), "start": ExprAttr.of(start), "step": IntAttr(step)})

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.input)
        printer.print_string(f" dim {self.dim.data} start {print_expr(self.start.data)} step {self.step.data}")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.input.type)
        printer.print_string(" -> ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> SliceOp:
        operand = parser.parse_unresolved_operand()
        parser.parse_keyword("dim")
        dim = parser.parse_integer(allow_negative=False)
        parser.parse_keyword("start")
        start = _parse_expr_tokens(parser)
        parser.parse_keyword("step")
        step = parser.parse_integer(allow_negative=False)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        in_type = parser.parse_type()
        parser.parse_punctuation("->")
        op = SliceOp(parser.resolve_operand(operand, in_type), dim, start, step, parser.parse_type())
        op.attributes.update(attrs)
        return op

    def verify_view(self, t: TensorType, out: TensorType) -> None:
        d = self.dim.data
        if d >= t.rank or out.rank != t.rank:
            raise VerifyException(f"fusec.slice: dim {d} invalid for rank {t.rank} -> {out.rank}")
        if self.step.data < 1:
            raise VerifyException("fusec.slice: step must be positive")
        others = [e for i, e in enumerate(t.dims) if i != d]
        _check_same_dims(self, [e for i, e in enumerate(out.dims) if i != d], others, "dims other than the sliced one")


@irdl_op_definition
class CatOp(IRDLOperation):
    """Concatenation along one dim."""

    name = "fusec.cat"
    dim = prop_def(IntAttr)
    inputs = var_operand_def()
    result = result_def()
    traits = traits_def(Pure())

    def __init__(self, inputs: Sequence[SSAValue], dim: int, result_type: Attribute):
        super().__init__(operands=[inputs], result_types=[result_type], properties={"dim": IntAttr(dim)})

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(self.inputs, printer.print_operand)
        printer.print_string(f" dim {self.dim.data}")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : (")
        printer.print_list([v.type for v in self.inputs], printer.print_attribute)
        printer.print_string(") -> ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> CatOp:
        operands = [parser.parse_unresolved_operand()]
        while parser.parse_optional_punctuation(","):
            operands.append(parser.parse_unresolved_operand())
        parser.parse_keyword("dim")
        dim = parser.parse_integer(allow_negative=False)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        in_types = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_type)
        parser.parse_punctuation("->")
        out_type = parser.parse_type()
        op = CatOp(parser.resolve_operands(operands, in_types, parser.pos), dim, out_type)
        op.attributes.update(attrs)
        return op

    def verify_(self) -> None:
        d = self.dim.data
        types = [_tensor(self, v, "input") for v in self.inputs]
        out = _tensor(self, self.result, "result")
        if not types or any(t.rank != out.rank for t in types) or d >= out.rank:
            raise VerifyException(f"fusec.cat: inputs and result must share a rank above dim {d}")
        for t in types:
            if t.element_type != out.element_type:
                raise VerifyException("fusec.cat: element types differ")
            others = [e for i, e in enumerate(out.dims) if i != d]
            _check_same_dims(self, [e for i, e in enumerate(t.dims) if i != d], others, "an input's dims other than the cat dim")
        _check_same_dims(self, [out.dims[d]], [sympy.Add(*[t.dims[d] for t in types])], "the cat dim")


@irdl_op_definition
class IndexOp(IRDLOperation):
    """Indexing one dim by an integer tensor: ``input[..., index, ...]`` (index_select, embedding).

    A negative index counts from the end of the dim, as in ``torch.Tensor.__getitem__``.
    """

    name = "fusec.index"
    dim = prop_def(IntAttr)
    input = operand_def()
    index = operand_def()
    result = result_def()
    traits = traits_def(Pure())

    def __init__(self, input: SSAValue, index: SSAValue, dim: int, result_type: Attribute):
        super().__init__(operands=[input, index], result_types=[result_type], properties={"dim": IntAttr(dim)})

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.input)
        printer.print_string("[")
        printer.print_operand(self.index)
        printer.print_string(f"] dim {self.dim.data}")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.input.type)
        printer.print_string(", ")
        printer.print_attribute(self.index.type)
        printer.print_string(" -> ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> IndexOp:
        src = parser.parse_unresolved_operand()
        parser.parse_punctuation("[")
        idx = parser.parse_unresolved_operand()
        parser.parse_punctuation("]")
        parser.parse_keyword("dim")
        dim = parser.parse_integer(allow_negative=False)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        src_t = parser.parse_type()
        parser.parse_punctuation(",")
        idx_t = parser.parse_type()
        parser.parse_punctuation("->")
        op = IndexOp(parser.resolve_operand(src, src_t), parser.resolve_operand(idx, idx_t), dim, parser.parse_type())
        op.attributes.update(attrs)
        return op

    def verify_(self) -> None:
        t = _tensor(self, self.input, "input")
        idx = _tensor(self, self.index, "index")
        out = _tensor(self, self.result, "result")
        d = self.dim.data
        if d >= t.rank:
            raise VerifyException(f"fusec.index: dim {d} out of range for rank {t.rank}")
        if idx.element_type not in (I64, I32):
            raise VerifyException("fusec.index: index must be i64 or i32")
        _check_same_dims(self, out.dims, t.dims[:d] + idx.dims + t.dims[d + 1:], "result")


@irdl_op_definition
class GatherOp(IRDLOperation):
    """torch.gather: ``out[i][j] = input[i][index[i][j]]`` for dim 1, and so on."""

    name = "fusec.gather"
    dim = prop_def(IntAttr)
    input = operand_def()
    index = operand_def()
    result = result_def()
    traits = traits_def(Pure())

    def __init__(self, input: SSAValue, index: SSAValue, dim: int, result_type: Attribute):
        super().__init__(operands=[input, index], result_types=[result_type], properties={"dim": IntAttr(dim)})

    print = IndexOp.print  # same syntax: %input[%index] dim d
    parse = classmethod(lambda cls, parser: _reparse_as(GatherOp, IndexOp.parse(parser)))

    def verify_(self) -> None:
        t = _tensor(self, self.input, "input")
        idx = _tensor(self, self.index, "index")
        out = _tensor(self, self.result, "result")
        if self.dim.data >= t.rank or idx.rank != t.rank:
            raise VerifyException("fusec.gather: index must have the input's rank, dim in range")
        _check_same_dims(self, out.dims, idx.dims, "result")


def _reparse_as(cls, op: IndexOp):
    new = cls(op.input, op.index, op.dim.data, op.result.type)
    new.attributes.update(op.attributes)
    op.detach_operands() if hasattr(op, "detach_operands") else None
    op.erase(safe_erase=False)
    return new


# ---------------------------------------------------------------- extern calls

@irdl_attr_definition
class OperandSlotAttr(ParametrizedAttribute):
    """In an extern's arguments, the place of its next tensor operand (printed as the operand: ``%a``)."""

    name = "fusec.operand"


@irdl_attr_definition
class TorchConstAttr(Data[str]):
    """A torch constant in an extern's arguments: a memory format or layout (``torch.channels_last``),
    or a device: ``device`` is the device the graph runs on, ``device "cpu"`` the CPU whatever that is."""

    name = "fusec.torch"

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> str:
        with parser.in_angle_brackets():
            return parser.parse_str_literal()

    def print_parameter(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string_literal(self.data)


GRAPH_DEVICE = "device"
TORCH_ENUMS = ("contiguous_format", "channels_last", "channels_last_3d", "preserve_format", "strided", "sparse_coo")
_ARG_KEYWORDS = ("none", "true", "false", "inf", "nan", "device")


def extern_arg_operand_count(arg: Attribute) -> int:
    """How many tensor operands an extern argument (a list, maybe nested) holds."""
    if isinstance(arg, OperandSlotAttr):
        return 1
    if isinstance(arg, ArrayAttr):
        return sum(extern_arg_operand_count(a) for a in arg.data)
    return 0


def is_extern_arg(arg: Attribute) -> bool:
    """The values an extern argument may hold: operands, numbers, sizes, none, strings, dtypes, torch constants, lists."""
    if isinstance(arg, ArrayAttr):
        return all(is_extern_arg(a) for a in arg.data)
    return isinstance(arg, (OperandSlotAttr, ExprAttr, NumberAttr, NoneAttr, StringAttr, TorchConstAttr)) or is_element_type(arg)


class _ExternArgPrinter:
    def __init__(self, printer: Printer, operands: Sequence[SSAValue]):
        self.printer, self.operands = printer, iter(operands)

    def arg(self, a: Attribute) -> None:
        p = self.printer
        if isinstance(a, OperandSlotAttr):
            p.print_operand(next(self.operands))
        elif isinstance(a, ArrayAttr):
            p.print_string("[")
            p.print_list(a.data, self.arg)
            p.print_string("]")
        elif isinstance(a, ExprAttr):
            p.print_string(print_expr(a.data))
        elif isinstance(a, NumberAttr):
            text = _number_text(a.data)
            if isinstance(a.data, float) and not any(c in text for c in ".ein"):
                text += ".0"  # a float stays a float when parsed back
            p.print_string(text)
        elif isinstance(a, NoneAttr):
            p.print_string("none")
        elif isinstance(a, StringAttr):
            p.print_string_literal(a.data)
        elif isinstance(a, TorchConstAttr):
            if a.data == GRAPH_DEVICE:
                p.print_string("device")
            elif a.data in TORCH_ENUMS:
                p.print_string(f"torch.{a.data}")
            else:
                p.print_string("device ")
                p.print_string_literal(a.data)
        else:
            p.print_attribute(a)


class _ExternArgParser:
    """Reads an extern's argument list: operands (``%a``), literals, sizes, lists and ``name = value``."""

    def __init__(self, parser: Parser):
        self.parser = parser
        self.operands: list = []  # unresolved operands, in the order they appear

    def call(self) -> tuple[list[Attribute], dict[str, Attribute]]:
        args: list[Attribute] = []
        kwargs: dict[str, Attribute] = {}

        def one() -> None:
            name = self.parser.parse_optional_identifier()
            if name is not None and self.parser.parse_optional_punctuation("=") is not None:
                kwargs[name] = self.value()
                return
            if kwargs:
                self.parser.raise_error("a positional argument after keyword arguments")
            args.append(self.value(name))

        self.parser.parse_comma_separated_list(self.parser.Delimiter.PAREN, one)
        return args, kwargs

    def value(self, name: str | None = None) -> Attribute:
        p = self.parser
        if name is None:
            operand = p.parse_optional_unresolved_operand()
            if operand is not None:
                self.operands.append(operand)
                return OperandSlotAttr()
            if p.parse_optional_punctuation("[") is not None:
                items = [] if p.parse_optional_punctuation("]") is not None else None
                if items is None:
                    items = [self.value()]
                    while p.parse_optional_punctuation(",") is not None:
                        items.append(self.value())
                    p.parse_punctuation("]")
                return ArrayAttr(items)
            text = p.parse_optional_str_literal()
            if text is not None:
                return StringAttr(text)
            if p.parse_optional_punctuation("-") is not None:
                number = p.parse_optional_float(allow_negative=False)
                if number is not None:
                    return NumberAttr(-number)
                if p.parse_optional_keyword("inf") is not None:
                    return NumberAttr(-math.inf)
                reader = _expr_reader(p)
                return ExprAttr(reader.expr(reader.term(-reader.unary())))
            number = p.parse_optional_float(allow_negative=False)
            if number is not None:
                return NumberAttr(number)
            name = p.parse_optional_identifier()
            if name is None:
                return ExprAttr(_parse_expr_tokens(p))
        return self.named(name)

    def named(self, name: str) -> Attribute:
        keyword = {"none": NoneAttr(), "true": NumberAttr(True), "false": NumberAttr(False),
                   "inf": NumberAttr(math.inf), "nan": NumberAttr(math.nan)}
        if name in keyword:
            return keyword[name]
        if name == "device":
            text = self.parser.parse_optional_str_literal()
            return TorchConstAttr(GRAPH_DEVICE if text is None else text)
        if name in ELEMENT_TYPE_NAMES:
            return ELEMENT_TYPE_NAMES[name]
        if name.startswith("torch."):
            if name.removeprefix("torch.") not in TORCH_ENUMS:
                self.parser.raise_error(f"unknown torch constant '{name}' (one of {', '.join('torch.' + e for e in TORCH_ENUMS)})")
            return TorchConstAttr(name.removeprefix("torch."))
        reader = _expr_reader(self.parser)
        return ExprAttr(reader.expr(reader.term(reader.named(name))))


def flat_returns(value) -> list:
    """A torch op's return value flattened depth-first (tuples and lists): what ``results`` positions count."""
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in flat_returns(v)]
    return [value]


@irdl_op_definition
class ExternOp(IRDLOperation):
    """A torch op called at run time (mm, conv, attention, and anything fusec does not lower).

    Its arguments are data, in the order of the op's schema, with keyword
    arguments after ``name =``: tensor operands (``%a``), sizes (``s0 - 1``),
    numbers (``0.5``, ``-inf``, ``true``), ``none``, strings, dtypes (``f16``),
    memory formats (``torch.channels_last``), the graph's ``device`` (or
    ``device "cpu"``) and lists of these::

        %o = fusec.extern "aten.full.default"([s0, 8], 0.5, dtype = f32, device = device) : () -> !fusec.tensor<[s0, 8], f32>
        %g, %w = fusec.extern "aten.convolution_backward.default"(%go, %x, %w, [16], [1, 1], [0, 0], [1, 1], false,
                                                                  [0, 0], 1, [false, true, true]) results [1, 2] : (...) -> (...)

    The op returns a tensor, or a tuple or list (maybe nested) of tensors and
    other values; ``results [i, ...]`` says which element of that return value,
    flattened depth-first, each result is (absent: the first ones, in order).
    """

    name = "fusec.extern"
    target = prop_def(StringAttr)
    args = prop_def(ArrayAttr)
    kwargs = prop_def(DictionaryAttr)
    positions = opt_prop_def(ArrayAttr[IntAttr])
    inputs = var_operand_def()
    outputs = var_result_def()

    def __init__(self, target: str, inputs: Sequence[SSAValue], args: Sequence[Attribute] | None, result_types: Sequence[Attribute],
                 kwargs: dict[str, Attribute] | None = None, results: Sequence[int] | None = None):
        if args is None:  # the common case: each operand once, in order
            args = [OperandSlotAttr() for _ in inputs]
        props: dict[str, Attribute] = {"target": StringAttr(target), "args": ArrayAttr(args), "kwargs": DictionaryAttr(kwargs or {})}
        if results is not None and list(results) != list(range(len(result_types))):
            props["positions"] = ArrayAttr([IntAttr(i) for i in results])
        super().__init__(operands=[inputs], result_types=[result_types], properties=props)

    @property
    def result_positions(self) -> list[int]:
        """Where each result is in the op's return value, flattened."""
        if self.positions is None:
            return list(range(len(self.outputs)))
        return [i.data for i in self.positions.data]

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_string_literal(self.target.data)
        args = _ExternArgPrinter(printer, self.inputs)
        printer.print_string("(")
        items = [(None, a) for a in self.args.data] + list(self.kwargs.data.items())

        def item(entry) -> None:
            name, a = entry
            if name is not None:
                printer.print_string(f"{name} = ")
            args.arg(a)

        printer.print_list(items, item)
        printer.print_string(")")
        if self.positions is not None:
            printer.print_string(" results ")
            _print_int_list(printer, self.result_positions)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_function_type([v.type for v in self.inputs], [r.type for r in self.outputs])

    @classmethod
    def parse(cls, parser: Parser) -> ExternOp:
        target = parser.parse_str_literal()
        reader = _ExternArgParser(parser)
        args, kwargs = reader.call()
        results = _parse_int_list(parser) if parser.parse_optional_keyword("results") else None
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        pos = parser.pos
        function_type = parser.parse_function_type()
        inputs = parser.resolve_operands(reader.operands, function_type.inputs.data, pos)
        op = ExternOp(target, inputs, args, function_type.outputs.data, kwargs, results)
        op.attributes.update(attrs)
        return op

    def verify_(self) -> None:
        where = f"fusec.extern \"{self.target.data}\""
        every = list(self.args.data) + list(self.kwargs.data.values())
        for a in every:
            if not is_extern_arg(a):
                raise VerifyException(f"{where}: {a} cannot be an extern argument")
        slots = sum(extern_arg_operand_count(a) for a in every)
        if slots != len(self.inputs):
            raise VerifyException(f"{where}: its arguments hold {slots} tensor operands, but it has {len(self.inputs)}")
        positions = self.result_positions
        if len(positions) != len(self.outputs):
            raise VerifyException(f"{where}: 'results' gives {len(positions)} positions for {len(self.outputs)} results")
        if len(set(positions)) != len(positions) or any(i < 0 for i in positions):
            raise VerifyException(f"{where}: 'results' positions {positions} must be distinct and non-negative")


# ---------------------------------------------------------------- kernel level


def _parse_domain(parser: AttrParser) -> list[sympy.Expr]:
    return _parse_expr_list(parser)


@irdl_op_definition
class KernelOp(IRDLOperation):
    """One GPU kernel: a body over element values iterated over ``domain`` = [xnumel] or [xnumel, rnumel].

    The body's block arguments are the input buffers then the output buffers.
    ``tiled`` (printed after the domain) marks a pointwise kernel over a 2-D domain:
    no ``reduce_r``, every (x, r) point computed independently, lowered as 2-D tiles
    (``tile-pointwise`` makes them: ``fusec.kernel @k [s1, s0] tiled (%a) ...``).
    """

    name = "fusec.kernel"
    sym_name = prop_def(StringAttr)
    domain = prop_def(ArrayAttr[ExprAttr])
    tiled = opt_prop_def(UnitAttr)
    inputs = var_operand_def()
    outputs = var_result_def()
    body = region_def("single_block")
    # Pure: a kernel writes only the buffers it returns, so an unused kernel can go (dce).
    traits = traits_def(IsolatedFromAbove(), NoTerminator(), Pure())

    def __init__(self, name: str, domain: Sequence[int | sympy.Basic], inputs: Sequence[SSAValue], output_types: Sequence[Attribute],
                 body: Region | None = None,
                 *, tiled: bool = False):
        if body is None:
            body = Region(Block(arg_types=[v.type for v in inputs] + list(output_types)))
        props: dict[str, Attribute] = {"sym_name": StringAttr(name), "domain": ArrayAttr([ExprAttr.of(d) for d in domain])}
        if tiled:
            props["tiled"] = UnitAttr()
        super().__init__(operands=[inputs], result_types=[output_types], regions=[body], properties=props)

    @property
    def block(self) -> Block:
        return self.body.block

    @property
    def domain_exprs(self) -> list[sympy.Expr]:
        return [d.data for d in self.domain.data]

    @property
    def is_reduction(self) -> bool:
        """The domain has an r extent: a reduction, or a tiled pointwise kernel (see ``is_tiled``)."""
        return len(self.domain.data) == 2

    @property
    def is_outer_reduction(self) -> bool:
        """A reduction whose loads are contiguous along x, not r (a column reduction: ``x.sum(0)``).

        Steps are measured at a point away from any wrap (x and r small, size symbols
        large and distinct), so ``mod(x, s0)`` steps by 1 as it does almost everywhere.
        """
        if not self.is_reduction or self.is_tiled:
            return False
        x, r = shapes.index_symbol("x"), shapes.index_symbol("r")
        r_steps, x_steps = [], []
        for op in self.block.ops:
            if isinstance(op, LoadOp) and r in op.index.data.free_symbols:
                e = op.index.data
                point = {s: 100003 + 2 * i for i, s in enumerate(sorted(e.free_symbols - {x, r}, key=str))}
                at = {(dx, dr): int(e.subs({**point, x: 1 + dx, r: 1 + dr})) for dx, dr in ((0, 0), (0, 1), (1, 0))}
                r_steps.append(at[0, 1] - at[0, 0])
                x_steps.append(at[1, 0] - at[0, 0])
        return bool(r_steps) and all(s != 1 for s in r_steps) and any(s == 1 for s in x_steps)

    @property
    def is_tiled(self) -> bool:
        """A pointwise kernel over a 2-D domain [xnumel, rnumel], lowered as 2-D tiles."""
        return self.tiled is not None

    @property
    def input_args(self):
        return self.block.args[: len(self.inputs)]

    @property
    def output_args(self):
        return self.block.args[len(self.inputs):]

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        printer.print_string(" ")
        _print_expr_list(printer, self.domain_exprs)
        if self.is_tiled:
            printer.print_string(" tiled")
        printer.print_string(" (")
        printer.print_list(self.inputs, printer.print_operand)
        printer.print_string(")")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : (")
        printer.print_list([v.type for v in self.inputs], printer.print_attribute)
        printer.print_string(") -> (")
        printer.print_list([r.type for r in self.outputs], printer.print_attribute)
        printer.print_string(") ")
        printer.print_region(self.body, print_entry_block_args=True)

    @classmethod
    def parse(cls, parser: Parser) -> KernelOp:
        name = parser.parse_symbol_name().data
        domain = _parse_domain(parser)
        tiled = parser.parse_optional_keyword("tiled") is not None
        operands = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_unresolved_operand)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        in_types = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_type)
        parser.parse_punctuation("->")
        out_types = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_type)
        inputs = parser.resolve_operands(operands, in_types, parser.pos)
        body = parser.parse_region()
        op = KernelOp(name, domain, inputs, out_types, body, tiled=tiled)
        op.attributes.update(attrs)
        return op

    def verify_(self) -> None:
        where = f"fusec.kernel @{self.sym_name.data}"
        if len(self.domain.data) not in (1, 2):
            raise VerifyException(f"{where}: domain must be [xnumel] or [xnumel, rnumel]")
        if self.is_tiled and len(self.domain.data) != 2:
            raise VerifyException(f"{where}: a tiled kernel has a 2-D domain [xnumel, rnumel]")
        want = [v.type for v in self.inputs] + [r.type for r in self.outputs]
        if list(self.block.arg_types) != want:
            raise VerifyException(f"{where}: block arguments must be the input then the output buffer types")
        outputs = set(self.output_args)
        for op in self.block.ops:
            if not isinstance(op, (LoadOp, StoreOp, PointwiseOp, ConstantOp, SymbolicOp, ReduceROp)):
                raise VerifyException(f"{where}: {op.name} cannot appear in a kernel body")
            if isinstance(op, ReduceROp) and not self.is_reduction:
                raise VerifyException(f"{where}: fusec.reduce_r in a kernel without a reduction domain")
            if isinstance(op, ReduceROp) and self.is_tiled:
                raise VerifyException(f"{where}: fusec.reduce_r in a tiled (pointwise) kernel")
            if isinstance(op, LoadOp) and op.buffer in outputs:
                raise VerifyException(f"{where}: loads from output buffer {op.buffer}")
            if isinstance(op, StoreOp) and op.buffer not in outputs:
                raise VerifyException(f"{where}: stores into {op.buffer}, which is not an output buffer")
            for expr_attr in [p for p in op.properties.values() if isinstance(p, ExprAttr)]:
                if not self.is_reduction and "r" in {s.name for s in expr_attr.data.free_symbols}:
                    raise VerifyException(f"{where}: {op.name} uses r in a kernel without a reduction domain")
        for arg in self.output_args:
            if not any(isinstance(u.operation, StoreOp) for u in arg.uses):
                raise VerifyException(f"{where}: output buffer {arg} is never stored")


def _print_index(printer: Printer, buffer: SSAValue, index: ExprAttr, offset: SSAValue | None, mask: SSAValue | None) -> None:
    printer.print_operand(buffer)
    printer.print_string("[")
    if offset is not None:
        printer.print_operand(offset)
        printer.print_string(" + ")
    printer.print_string(print_expr(index.data) + "]")
    if mask is not None:
        printer.print_string(" mask ")
        printer.print_operand(mask)


def _parse_index(parser: Parser) -> tuple[sympy.Expr, SSAValue | None, SSAValue | None]:
    """``[expr]`` or ``[%offset + expr]``, then an optional ``mask %m``."""
    parser.parse_punctuation("[")
    offset = parser.parse_optional_operand(I64)
    if offset is not None:
        parser.parse_punctuation("+")
    index = _parse_expr_tokens(parser)
    parser.parse_punctuation("]")
    mask = parser.parse_operand(BOOL) if parser.parse_optional_keyword("mask") else None
    return index, offset, mask


@irdl_op_definition
class LoadOp(IRDLOperation):
    """An element of a buffer at a flat storage index: ``fusec.load %a[512*x + r] : f32``.

    ``[%o + expr]`` adds an i64 element value to the index (gathers); with
    ``mask %m`` the load happens only where ``%m`` is true and gives 0 elsewhere.
    """

    name = "fusec.load"
    buffer = operand_def(TensorType)
    offset = opt_operand_def()
    mask = opt_operand_def()
    index = prop_def(ExprAttr)
    result = result_def()
    traits = traits_def(Pure())
    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def __init__(self, buffer: SSAValue, index: int | sympy.Basic, mask: SSAValue | None = None, offset: SSAValue | None = None):
        assert isinstance(buffer.type, TensorType)
        super().__init__(operands=[buffer, [offset] if offset else [], [mask] if mask else []],
                         result_types=[buffer.type.element_type], properties={"index": ExprAttr.of(index)})

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        _print_index(printer, self.buffer, self.index, self.offset, self.mask)
        printer.print_string(" : ")
        printer.print_attribute(self.buffer.type)

    @classmethod
    def parse(cls, parser: Parser) -> LoadOp:
        buf = parser.parse_unresolved_operand()
        index, offset, mask = _parse_index(parser)
        parser.parse_punctuation(":")
        return LoadOp(parser.resolve_operand(buf, parser.parse_type()), index, mask, offset)

    def verify_(self) -> None:
        if self.result.type != self.buffer.type.element_type:
            raise VerifyException("fusec.load: result type must be the buffer's element type")
        if self.mask is not None and self.mask.type != BOOL:
            raise VerifyException("fusec.load: mask must be i1")
        if self.offset is not None and self.offset.type != I64:
            raise VerifyException("fusec.load: offset must be i64")


@irdl_op_definition
class StoreOp(IRDLOperation):
    """Writes an element value into an output buffer: ``fusec.store %v, %out[x] : !fusec.tensor<...>``."""

    name = "fusec.store"
    value = operand_def()
    buffer = operand_def(TensorType)
    mask = opt_operand_def()
    index = prop_def(ExprAttr)

    def __init__(self, value: SSAValue, buffer: SSAValue, index: int | sympy.Basic, mask: SSAValue | None = None):
        super().__init__(operands=[value, buffer, [mask] if mask else []], properties={"index": ExprAttr.of(index)})

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.value)
        printer.print_string(", ")
        _print_index(printer, self.buffer, self.index, None, self.mask)
        printer.print_string(" : ")
        printer.print_attribute(self.buffer.type)

    @classmethod
    def parse(cls, parser: Parser) -> StoreOp:
        value = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        buf = parser.parse_unresolved_operand()
        index, offset, mask = _parse_index(parser)
        if offset is not None:
            parser.raise_error("fusec.store takes no offset operand")
        parser.parse_punctuation(":")
        buf_t = parser.parse_type()
        if not isinstance(buf_t, TensorType):
            parser.raise_error("fusec.store: the buffer type must be a !fusec.tensor")
        return StoreOp(parser.resolve_operand(value, buf_t.element_type), parser.resolve_operand(buf, buf_t), index, mask)

    def verify_(self) -> None:
        if self.value.type != self.buffer.type.element_type:
            raise VerifyException(f"fusec.store: value type {self.value.type} differs from the buffer's {self.buffer.type.element_type}")
        if self.mask is not None and self.mask.type != BOOL:
            raise VerifyException("fusec.store: mask must be i1")


@irdl_op_definition
class ReduceROp(IRDLOperation):
    """Reduces an element value over the kernel's ``r`` domain: ``fusec.reduce_r "sum" %v : f32 -> f32``.

    argmax/argmin give the ``r`` of the first extreme element (i64).
    """

    name = "fusec.reduce_r"
    kind = prop_def(StringAttr)
    input = operand_def()
    result = result_def()
    traits = traits_def(Pure())
    assembly_format = "$kind $input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, kind: str, input: SSAValue, result_type: Attribute):
        super().__init__(operands=[input], result_types=[result_type], properties={"kind": StringAttr(kind)})

    def verify_(self) -> None:
        kind = self.kind.data
        if kind not in REDUCTIONS:
            raise VerifyException(f"fusec.reduce_r: unknown reduction '{kind}'")
        want = I64 if kind in ("argmax", "argmin") else BOOL if kind in ("any", "all") else self.input.type
        if self.result.type != want:
            raise VerifyException(f"fusec.reduce_r \"{kind}\": result must be {want}, got {self.result.type}")


@irdl_op_definition
class ComboOp(IRDLOperation):
    """Independent kernels launched as one; thread blocks are routed to them by program id."""

    name = "fusec.combo"
    sym_name = prop_def(StringAttr)
    outputs = var_result_def()
    body = region_def("single_block")

    def __init__(self, name: str, output_types: Sequence[Attribute], body: Region):
        super().__init__(result_types=[output_types], regions=[body], properties={"sym_name": StringAttr(name)})

    @property
    def kernels(self) -> list[KernelOp]:
        return [op for op in self.body.block.ops if isinstance(op, KernelOp)]

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : (")
        printer.print_list([r.type for r in self.outputs], printer.print_attribute)
        printer.print_string(") ")
        printer.print_region(self.body, print_entry_block_args=False)

    @classmethod
    def parse(cls, parser: Parser) -> ComboOp:
        name = parser.parse_symbol_name().data
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        types = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_type)
        op = ComboOp(name, types, parser.parse_region())
        op.attributes.update(attrs)
        return op

    def verify_(self) -> None:
        where = f"fusec.combo @{self.sym_name.data}"
        ops = list(self.body.block.ops)
        if not ops or not isinstance(ops[-1], OutputOp):
            raise VerifyException(f"{where}: must end with fusec.output")
        kernels = ops[:-1]
        if any(not isinstance(k, KernelOp) for k in kernels):
            raise VerifyException(f"{where}: holds only fusec.kernel ops")
        produced = {r for k in kernels for r in k.results}
        for k in kernels:
            if any(v in produced for v in k.operands):
                raise VerifyException(f"{where}: kernel @{k.sym_name.data} depends on another kernel of the combo")
        if [v.type for v in ops[-1].operands] != [r.type for r in self.outputs]:
            raise VerifyException(f"{where}: fusec.output types do not match the combo's results")


Fusec = Dialect(
    "fusec",
    [GraphOp, OutputOp, PointwiseOp, ConstantOp, SymbolicOp, ReduceOp, ReshapeOp, PermuteOp, ExpandOp, SliceOp,
     CatOp, IndexOp, GatherOp, ExternOp, KernelOp, LoadOp, StoreOp, ReduceROp, ComboOp],
    [ExprAttr, TensorType, SymbolAttr, NumberAttr, OperandSlotAttr, TorchConstAttr],
)
