"""Attributes and types of the fusec dialect, and the glue that reads sympy expressions from xDSL's parser.

Sizes are sympy expressions over size symbols (and, in kernels, ``x`` and
``r``), written in the text form of ``fusec.base.shapes``.  The attributes'
syntax is hand-written (``parse_parameter(s)`` / ``print_parameter(s)``): a
sympy-valued parameter is what xDSL's format language cannot say.  The ops
write the same values inline through the custom directives of
``fusec.dialects.directives``, which use the readers and writers below.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

import sympy
from xdsl.dialects.builtin import AnyFloat, ArrayAttr, IntAttr, NoneAttr, StringAttr
from xdsl.ir import Attribute, Data, Operation, ParametrizedAttribute, SSAValue, TypeAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from fusec.base import dtypes, shapes
from fusec.base.shapes import ExprReader, print_expr

__all__ = [
    "BF16", "BOOL", "ELEMENT_TYPES", "ELEMENT_TYPE_NAMES", "F16", "F32", "F64", "GRAPH_DEVICE", "I8", "I16", "I32", "I64",
    "TORCH_ENUMS", "U8", "ExprAttr", "NumberAttr", "OperandSlotAttr", "SizeFactAttr", "SymbolAttr", "TensorType", "TorchConstAttr",
    "TorchOpAttr", "dtype_name", "element_of", "extern_arg_operand_count", "is_element_type", "is_extern_arg", "is_float", "torch_dtype",
]

# ---------------------------------------------------------------- expressions in xDSL's token stream


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


def expr_reader(parser: AttrParser) -> ExprReader:
    """A reader of the expression grammar (fusec.base.shapes) over xDSL's token stream."""
    return ExprReader(_ParserTokens(parser))


def parse_expr(parser: AttrParser) -> sympy.Expr:
    """Read an integer expression from xDSL's token stream: ``floordiv(s0, 2) + 1``."""
    return expr_reader(parser).expr()


def parse_expr_list(parser: AttrParser) -> list[sympy.Expr]:
    return parser.parse_comma_separated_list(parser.Delimiter.SQUARE, lambda: parse_expr(parser))


def print_expr_list(printer: Printer, exprs: Sequence[sympy.Expr]) -> None:
    printer.print_string("[" + ", ".join(print_expr(e) for e in exprs) + "]")


def parse_int_list(parser: AttrParser) -> list[int]:
    return parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_integer)


def print_int_list(printer: Printer, values: Sequence[int]) -> None:
    printer.print_string("[" + ", ".join(str(v) for v in values) + "]")


# ---------------------------------------------------------------- attributes


@irdl_attr_definition
class ExprAttr(Data[sympy.Expr]):
    """An integer expression over size symbols (and, in kernels, ``x`` and ``r``)."""

    name = "fusec.expr"

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> sympy.Expr:
        with parser.in_angle_brackets():
            return parse_expr(parser)

    def print_parameter(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(print_expr(self.data))

    @staticmethod
    def of(value: int | str | sympy.Basic) -> ExprAttr:
        return ExprAttr(shapes.as_expr(value))


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
        if stride_exprs and all(shapes.provably_equal(a, b) for a, b in zip(stride_exprs, shapes.contiguous_strides(dims), strict=True)):
            stride_exprs = []
        super().__init__(ArrayAttr([ExprAttr(d) for d in dims]), element_type, ArrayAttr([ExprAttr(s) for s in stride_exprs]))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            dims = parse_expr_list(parser)
            parser.parse_punctuation(",")
            element_type = parser.parse_type()
            strides: list[sympy.Expr] = []
            if parser.parse_optional_punctuation(","):
                parser.parse_keyword("strides")
                strides = parse_expr_list(parser)
                if len(strides) != len(dims):
                    parser.raise_error(f"{len(strides)} strides given for a tensor of rank {len(dims)}")
        return (ArrayAttr([ExprAttr(d) for d in dims]), element_type, ArrayAttr([ExprAttr(s) for s in strides]))

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            print_expr_list(printer, self.dims)
            printer.print_string(", ")
            printer.print_attribute(self.element_type)
            if self.strides.data:
                printer.print_string(", strides ")
                print_expr_list(printer, [s.data for s in self.strides.data])

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


def checked_tensor_type(op: Operation, value: SSAValue, what: str) -> TensorType:
    """A verifier's check that an operand or result is a tensor: its type."""
    if not isinstance(value.type, TensorType):
        raise VerifyException(f"{op.name}: {what} must be a !fusec.tensor, got {value.type}")
    return value.type


def tensor_type_of(value: SSAValue) -> TensorType:
    """The type of a value the verifiers already made a tensor (a graph's or a kernel's operand or result)."""
    assert isinstance(value.type, TensorType), f"expected a !fusec.tensor, got {value.type}"
    return value.type


def check_same_dims(op: Operation, got: Sequence[sympy.Expr], want: Sequence[sympy.Expr], what: str) -> None:
    """A verifier's check that a shape is provably the one the op computes (where the graph names compound
    sizes, ``d0 = floordiv(s0 - 1, 2) + 1``, also with each name replaced by what it stands for; where it states
    size facts, also once they are applied)."""
    if len(got) != len(want):
        raise VerifyException(f"{op.name}: {what}: expected {len(want)} dims, got {len(got)}")
    if not all(sizes_equal(op, a, b) for a, b in zip(got, want, strict=True)):
        raise VerifyException(f"{op.name}: {what}: expected shape [{', '.join(map(print_expr, want))}], "
                              f"got [{', '.join(map(print_expr, got))}]")


def sizes_equal(op: Operation, a: sympy.Expr, b: sympy.Expr) -> bool:
    """A verifier's test that two sizes are equal on every call of the graph around ``op``: provably so, or
    once its derived symbols are replaced by their definitions and its size facts are applied."""
    if shapes.provably_equal(a, b):
        return True
    definitions, facts = _sizes_around(op)
    if not definitions and not facts:
        return False
    a, b = (shapes.apply_facts(shapes.expand_definitions(e, definitions), facts) for e in (a, b))
    return shapes.provably_equal(a, b)


def _sizes_around(op: Operation) -> tuple[dict[str, sympy.Expr], list[tuple[sympy.Expr, sympy.Expr]]]:
    """The derived symbols and the size facts (over the traced symbols) of the graph around ``op``; for an op in no
    graph, none and the facts being stated."""
    graph = _enclosing_graph(op)
    if graph is None:
        return {}, list(_facts_being_stated.get())
    symbols, stated = graph.properties["symbols"], graph.properties.get("facts")
    definitions = symbol_definitions(symbols.data) if isinstance(symbols, ArrayAttr) else {}
    facts = [f.rule for f in stated.data if isinstance(f, SizeFactAttr)] if isinstance(stated, ArrayAttr) else []
    return definitions, [(shapes.expand_definitions(old, definitions), shapes.expand_definitions(new, definitions))
                         for old, new in facts]


# The size facts of a graph being built (the importer's block is in no graph yet): what sizes_equal applies to an
# op in no graph.
_facts_being_stated: ContextVar[tuple[tuple[sympy.Expr, sympy.Expr], ...]] = ContextVar("fusec_size_facts", default=())


@contextmanager
def stating_size_facts(facts: Sequence[tuple[sympy.Expr, sympy.Expr]]) -> Iterator[None]:
    """Within: ops in no graph are verified under ``facts`` (the importer's, for the graph it is building)."""
    token = _facts_being_stated.set(tuple(facts))
    try:
        yield
    finally:
        _facts_being_stated.reset(token)


def _enclosing_graph(op: Operation) -> Operation | None:
    """The graph around ``op`` (the op that declares size symbols), or None where it is in none."""
    parent = op.parent_op()
    while parent is not None and not isinstance(parent.properties.get("symbols"), ArrayAttr):
        parent = parent.parent_op()
    return parent


def symbol_definitions(symbols: Sequence[Attribute]) -> dict[str, sympy.Expr]:
    """Derived size symbols among ``symbols`` (a graph's declarations) and what each stands for."""
    return {s.sym.data: s.expr for s in symbols if isinstance(s, SymbolAttr) and s.expr is not None}


@irdl_attr_definition
class SymbolAttr(ParametrizedAttribute):
    """A size symbol declaration with its known bounds: ``s0 in [2, inf]``; a derived one also with the
    expression it stands for, ``d0 = floordiv(s0 - 1, 2) + 1 in [1, inf]`` (fusec.frontend.derived_sizes)."""

    name = "fusec.sym"

    sym: StringAttr
    lower: IntAttr
    upper: IntAttr  # -1 stands for no upper bound
    definition: ArrayAttr[ExprAttr]  # empty, or the one expression the symbol names
    hint: IntAttr  # the example value the graph was traced with (schedules may be chosen for it); -1: none

    def __init__(self, sym: str, lower: int = 0, upper: int | None = None, definition: sympy.Expr | None = None,
                 hint: int | None = None):
        super().__init__(StringAttr(sym), IntAttr(lower), IntAttr(-1 if upper is None else upper),
                         ArrayAttr([] if definition is None else [ExprAttr(definition)]), IntAttr(-1 if hint is None else hint))

    @property
    def example(self) -> int | None:
        """The size the graph was traced with, where the importer knew it (``s0 in [2, inf] hint 16``)."""
        return None if self.hint.data < 0 else self.hint.data

    @property
    def expr(self) -> sympy.Expr | None:
        """What a derived symbol stands for; None for a symbol of its own."""
        return self.definition.data[0].data if self.definition.data else None

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            sym, lower, upper, definition, hint = parse_symbol_decl(parser)
        return (StringAttr(sym), IntAttr(lower), IntAttr(upper), ArrayAttr([] if definition is None else [ExprAttr(definition)]),
                IntAttr(-1 if hint is None else hint))

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(self.text)

    @property
    def text(self) -> str:
        upper = "inf" if self.upper.data < 0 else str(self.upper.data)
        definition = f" = {print_expr(self.expr)}" if self.expr is not None else ""
        hint = f" hint {self.example}" if self.example is not None else ""
        return f"{self.sym.data}{definition} in [{self.lower.data}, {upper}]{hint}"


def parse_symbol_decl(parser: AttrParser) -> tuple[str, int, int, sympy.Expr | None, int | None]:
    """``s0 in [2, inf]``, ``d0 = floordiv(s0, 2) in [1, inf]``, ``s0 in [2, inf] hint 16`` -> (name, lower,
    upper, definition or None, hint or None), upper -1 for no bound."""
    name = parser.parse_identifier(" (a size symbol)")
    if not shapes._SYMBOL_NAME.match(name) or name in shapes.INDEX_VARS:
        parser.raise_error(f"'{name}' is not a valid size symbol name")
    definition = parse_expr(parser) if parser.parse_optional_punctuation("=") else None
    parser.parse_keyword("in")
    parser.parse_punctuation("[")
    lower = parser.parse_integer(allow_negative=False)
    parser.parse_punctuation(",")
    upper = -1 if parser.parse_optional_keyword("inf") else parser.parse_integer(allow_negative=False)
    parser.parse_punctuation("]")
    hint = parser.parse_integer(allow_negative=False) if parser.parse_optional_keyword("hint") else None
    return name, lower, upper, definition, hint


@irdl_attr_definition
class SizeFactAttr(ParametrizedAttribute):
    """An equality of sizes that holds on every call of a graph, ``s38*s97 = s3*s88``, written as the rewrite the
    graph's types went through: they use only the right side's form.  The importer takes them from Dynamo's
    guards (a graph break gives a loss's labels and its logits separate symbols, related only by a guard);
    executors check them on the inputs."""

    name = "fusec.size_fact"

    lhs: ExprAttr
    rhs: ExprAttr

    def __init__(self, lhs: sympy.Expr, rhs: sympy.Expr):
        super().__init__(ExprAttr(lhs), ExprAttr(rhs))

    @property
    def rule(self) -> tuple[sympy.Expr, sympy.Expr]:
        return self.lhs.data, self.rhs.data

    @property
    def text(self) -> str:
        return shapes.print_fact(*self.rule)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            lhs, rhs = parse_size_fact(parser)
        return ExprAttr(lhs), ExprAttr(rhs)

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(self.text)


def parse_size_fact(parser: AttrParser) -> tuple[sympy.Expr, sympy.Expr]:
    """``s38*s97 = s3*s88`` -> (left, right)."""
    lhs = parse_expr(parser)
    parser.parse_punctuation("=")
    return lhs, parse_expr(parser)


@irdl_attr_definition
class NumberAttr(Data[float | int | bool]):
    """A scalar literal: ``0.5``, ``-3``, ``inf``, ``nan``, ``true``."""

    name = "fusec.number"

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> float | int | bool:
        with parser.in_angle_brackets():
            return parse_number(parser)

    def print_parameter(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(number_text(self.data))


def number_text(value: float | int | bool) -> str:
    """A literal as the IR writes it (``nan``, ``-inf``, ``1.0e-05``, ``true``)."""
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


def parse_number(parser: AttrParser) -> float | int | bool:
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


# ---------------------------------------------------------------- extern call arguments


@irdl_attr_definition
class OperandSlotAttr(ParametrizedAttribute):
    """In an extern's arguments, the place of its next tensor operand (printed as the operand: ``%a``)."""

    name = "fusec.operand"


class _QuotedName(Data[str]):
    """A name in quotes, in angle brackets in the generic form (``#fusec.torch<"channels_last">``)."""

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> str:
        with parser.in_angle_brackets():
            return parser.parse_str_literal()

    def print_parameter(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string_literal(self.data)


@irdl_attr_definition
class TorchConstAttr(_QuotedName):
    """A torch constant in an extern's arguments: a memory format or layout (``torch.channels_last``),
    or a device: ``device`` is the device the graph runs on, ``device "cpu"`` the CPU whatever that is."""

    name = "fusec.torch"


@irdl_attr_definition
class TorchOpAttr(_QuotedName):
    """A torch op passed as an argument (``op "aten.rand_like.default"``): a higher-order op's ``op``, which it
    runs (``higher_order.run_with_rng_state``, the random op that activation checkpointing recomputes)."""

    name = "fusec.torch_op"


GRAPH_DEVICE = "device"
TORCH_ENUMS = ("contiguous_format", "channels_last", "channels_last_3d", "preserve_format", "strided", "sparse_coo")


def extern_arg_operand_count(arg: Attribute) -> int:
    """How many tensor operands an extern argument (a list, maybe nested) holds."""
    if isinstance(arg, OperandSlotAttr):
        return 1
    if isinstance(arg, ArrayAttr):
        return sum(extern_arg_operand_count(a) for a in arg.data)
    return 0


def is_extern_arg(arg: Attribute) -> bool:
    """The values an extern argument may hold: operands, numbers, sizes, none, strings, dtypes, torch constants and
    ops, lists."""
    if isinstance(arg, ArrayAttr):
        return all(is_extern_arg(a) for a in arg.data)
    return isinstance(arg, (OperandSlotAttr, ExprAttr, NumberAttr, NoneAttr, StringAttr, TorchConstAttr, TorchOpAttr)) \
        or is_element_type(arg)
