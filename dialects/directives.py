"""Custom directives of the fusec ops' assembly formats: the values the ops write bare.

xDSL's format language writes an attribute whole (``#fusec.expr<s0 + 1>``) or,
for a dialect attribute, as its bracketed parameters (``<s0 + 1>``); fusec's
ops write sizes, literals and integer lists bare
(``fusec.slice %a dim 1 start s0 step 2``).  Each directive here reads and
writes one such value; an op names it in its ``assembly_format`` as
``custom<Name>(...)``.
"""

from __future__ import annotations

import math
from typing import TypeVar

from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, IntAttr, NoneAttr, StringAttr
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import IRDLOperation
from xdsl.irdl.declarative_assembly_format import (
    AttributeVariable,
    CustomDirective,
    ParsingState,
    PrintingState,
    TypeDirective,
    VariadicOperandVariable,
    irdl_custom_directive,
)
from xdsl.parser import Parser
from xdsl.printer import Printer

from fusec.base.shapes import print_expr
from fusec.dialects.attributes import (
    ELEMENT_TYPE_NAMES,
    GRAPH_DEVICE,
    TORCH_ENUMS,
    ExprAttr,
    NumberAttr,
    OperandSlotAttr,
    TensorType,
    TorchConstAttr,
    TorchOpAttr,
    expr_reader,
    number_text,
    parse_expr,
    parse_int_list,
    parse_number,
    print_int_list,
)

_A = TypeVar("_A", bound=Attribute)


def _value(variable: AttributeVariable, op: IRDLOperation, kind: type[_A]) -> _A:
    attr = variable.get(op)
    assert isinstance(attr, kind), f"{op.name}: {variable.name} is {attr}, not a {kind.__name__}"
    return attr


@irdl_custom_directive
class Expr(CustomDirective):
    """A size expression (``ExprAttr``) written bare: ``floordiv(s0, 2) + 1``."""

    attr: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        self.attr.set(state, ExprAttr(parse_expr(parser)))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        printer.print_string(print_expr(_value(self.attr, op, ExprAttr).data))


@irdl_custom_directive
class Number(CustomDirective):
    """A literal (``NumberAttr``) written bare: ``0.5``, ``-inf``, ``true``."""

    attr: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        self.attr.set(state, NumberAttr(parse_number(parser)))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        printer.print_string(number_text(_value(self.attr, op, NumberAttr).data))


@irdl_custom_directive
class Int(CustomDirective):
    """A non-negative integer (``IntAttr``: a dim, a step) written bare: ``1``."""

    attr: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        self.attr.set(state, IntAttr(parser.parse_integer(allow_negative=False)))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        printer.print_string(str(_value(self.attr, op, IntAttr).data))


@irdl_custom_directive
class IntList(CustomDirective):
    """A list of integers (``ArrayAttr[IntAttr]``: dims, a permutation) written bare: ``[2, 0, 1]``."""

    attr: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        self.attr.set(state, ArrayAttr([IntAttr(i) for i in parse_int_list(parser)]))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        print_int_list(printer, [i.data for i in _value(self.attr, op, ArrayAttr).data])


@irdl_custom_directive
class BufferType(CustomDirective):
    """A buffer's ``!fusec.tensor`` type, which also gives the type of the element loaded from or stored to it."""

    buffer: TypeDirective
    element: TypeDirective

    def parse(self, parser: Parser, state: ParsingState) -> None:
        start = parser.pos
        buffer_type = parser.parse_type()
        if not isinstance(buffer_type, TensorType):
            parser.raise_error(f"{state.op_type.name}: the buffer type must be a !fusec.tensor", start)
        self.buffer.set(state, (buffer_type,))
        self.element.set(state, (buffer_type.element_type,))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        printer.print_attribute(self.buffer.get(op)[0])


# ---------------------------------------------------------------- extern calls


@irdl_custom_directive
class ExternArguments(CustomDirective):
    """An extern's argument list, its tensor operands in their places: ``(%a, [s0, 8], 0.5, dtype = f32)``.

    Printed right after the target, with no space: ``"aten.mm.default"(%a, %w)``.
    """

    inputs: VariadicOperandVariable
    args: AttributeVariable
    kwargs: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        reader = _ExternArgParser(parser)
        args, kwargs = reader.call()
        self.inputs.set(state, reader.operands)
        self.args.set(state, ArrayAttr(args))
        self.kwargs.set(state, DictionaryAttr(kwargs))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        writer = _ExternArgPrinter(printer, self.inputs.get(op))
        items = [(None, a) for a in _value(self.args, op, ArrayAttr).data] + list(_value(self.kwargs, op, DictionaryAttr).data.items())

        def item(entry: tuple[str | None, Attribute]) -> None:
            name, a = entry
            if name is not None:
                printer.print_string(f"{name} = ")
            writer.arg(a)

        printer.print_string("(")
        printer.print_list(items, item)
        printer.print_string(")")


@irdl_custom_directive
class ResultPositions(CustomDirective):
    """Which elements of an extern's return value its results are, when not the first ones in order: ``results [0, 2]``."""

    attr: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        if parser.parse_optional_keyword("results"):
            self.attr.set(state, ArrayAttr([IntAttr(i) for i in parse_int_list(parser)]))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        positions = self.attr.get(op)
        if isinstance(positions, ArrayAttr):
            state.print_whitespace(printer)
            printer.print_string("results ")
            print_int_list(printer, [i.data for i in positions.data])


class _ExternArgPrinter:
    def __init__(self, printer: Printer, operands: tuple[SSAValue, ...] | list[SSAValue]):
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
            text = number_text(a.data)
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
        elif isinstance(a, TorchOpAttr):
            p.print_string("op ")
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
                items: list[Attribute] | None = [] if p.parse_optional_punctuation("]") is not None else None
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
                reader = expr_reader(p)
                return ExprAttr(reader.expr(reader.term(-reader.unary())))
            number = p.parse_optional_float(allow_negative=False)
            if number is not None:
                return NumberAttr(number)
            name = p.parse_optional_identifier()
            if name is None:
                return ExprAttr(parse_expr(p))
        return self.named(name)

    def named(self, name: str) -> Attribute:
        keyword = {"none": NoneAttr(), "true": NumberAttr(True), "false": NumberAttr(False),
                   "inf": NumberAttr(math.inf), "nan": NumberAttr(math.nan)}
        if name in keyword:
            return keyword[name]
        if name == "device":
            text = self.parser.parse_optional_str_literal()
            return TorchConstAttr(GRAPH_DEVICE if text is None else text)
        if name == "op" and (op := self.parser.parse_optional_str_literal()) is not None:
            return TorchOpAttr(op)
        if name in ELEMENT_TYPE_NAMES:
            return ELEMENT_TYPE_NAMES[name]
        if name.startswith("torch."):
            if name.removeprefix("torch.") not in TORCH_ENUMS:
                self.parser.raise_error(f"unknown torch constant '{name}' (one of {', '.join('torch.' + e for e in TORCH_ENUMS)})")
            return TorchConstAttr(name.removeprefix("torch."))
        reader = expr_reader(self.parser)
        return ExprAttr(reader.expr(reader.term(reader.named(name))))
