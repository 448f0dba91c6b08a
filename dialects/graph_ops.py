"""Graph-level ops of the fusec dialect: tensors with symbolic shapes, as the importer makes them (views: ``view_ops``).

The IR's rules are in the module docstring of ``fusec.dialects.fusec``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import sympy
from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, DictionaryAttr, FunctionType, IntAttr, IntegerAttr, StringAttr, UnitAttr, i1
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import HasCanonicalizationPatternsTrait, IsolatedFromAbove, IsTerminator, Pure, SymbolOpInterface
from xdsl.utils.exceptions import VerifyException

from fusec.base import shapes
from fusec.base.shapes import print_expr
from fusec.dialects.attributes import (
    BOOL,
    I32,
    I64,
    ExprAttr,
    NumberAttr,
    OperandSlotAttr,
    SizeFactAttr,
    SymbolAttr,
    TensorType,
    check_same_dims,
    checked_tensor_type,
    element_of,
    extern_arg_operand_count,
    is_element_type,
    is_extern_arg,
    is_float,
    parse_size_fact,
    parse_symbol_decl,
    symbol_definitions,
)
from fusec.dialects.directives import Expr, ExternArguments, Int, IntList, Number, ResultPositions
from fusec.dialects.pointwise import POINTWISE_FUNCTIONS, PREDICATES, REDUCTIONS, broadcast_types, reduction_result_type

__all__ = [
    "CatOp", "ConstantOp", "ExternOp", "GatherOp", "GraphOp", "IndexOp", "OutputOp", "PointwiseCanonicalization",
    "PointwiseOp", "ReduceOp", "SymbolicOp", "find_graph", "flat_returns", "op_symbol_uses",
]


# Marks the importer leaves on a graph for passes that decide by torch's settings (they print with the graph, so a
# dump replays as it compiled): the device type ("cuda", "cpu", ...), and on accelerators whether fp32 matmuls and
# convolutions may use TF32 (torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32).
DEVICE_MARK = "fusec.device"
FLOAT32_MATMUL_PRECISION_MARK = "fusec.float32_matmul_precision"
CUDNN_ALLOW_TF32_MARK = "fusec.cudnn_allow_tf32"
# A CUDA graph's GPU, for schedules that depend on it: its compute capability (major * 10 + minor: 90 is Hopper) and
# its SM count.
DEVICE_CAPABILITY_MARK = "fusec.device_capability"
SM_COUNT_MARK = "fusec.sm_count"
# Inputs a call writes (a batch norm's running statistics, kept in the graph by AOTAutograd):
# ``[[input, output, in_place], ...]``: after a call, graph input ``input`` holds output ``output``'s value;
# ``in_place`` (1: decided by the mutate-in-place pass) has the output's kernel store it straight into the input.
INPUT_MUTATIONS = "fusec.input_mutations"
# ``array<i64: ...>``: inputs the caller keeps at one 16-byte-aligned address from call to call (parameters and
# buffers under torch.compile, as AOTAutograd's static inputs; aligned when traced): the launcher does not check
# their alignment (as Inductor checks only its other inputs).
ALIGNED_INPUTS = "fusec.aligned_inputs"
# ``N : i64`` on a training forward: its outputs from the N-th on are saved for the backward, which AOTAutograd
# compiles for the strides fusec.backend reports, so passes may hand them in any layout with static strides.
SAVED_OUTPUTS = "fusec.saved_outputs"


@irdl_op_definition
class GraphOp(IRDLOperation):
    """A compiled program: tensor inputs, size symbols with bounds (and facts relating them), tensor outputs."""

    name = "fusec.graph"

    sym_name = prop_def(StringAttr)
    function_type = prop_def(FunctionType)
    symbols = prop_def(ArrayAttr[SymbolAttr])
    facts = opt_prop_def(ArrayAttr[SizeFactAttr])  # equalities of sizes every call satisfies (SizeFactAttr)
    body = region_def("single_block")
    traits = traits_def(IsolatedFromAbove(), SymbolOpInterface())

    def __init__(self, name: str, input_types: Sequence[Attribute], output_types: Sequence[Attribute],
                 symbols: Sequence[SymbolAttr], body: Region | None = None, facts: Sequence[SizeFactAttr] = ()):
        if body is None:
            body = Region(Block(arg_types=input_types))
        properties: dict[str, Attribute] = {
            "sym_name": StringAttr(name),
            "function_type": FunctionType.from_lists(input_types, output_types),
            "symbols": ArrayAttr(symbols),
        }
        if facts:
            properties["facts"] = ArrayAttr(facts)
        super().__init__(properties=properties, regions=[body])

    @property
    def block(self) -> Block:
        return self.body.block

    @property
    def output_op(self) -> OutputOp:
        """The terminator, which the verifier made a fusec.output."""
        last = self.block.last_op
        assert isinstance(last, OutputOp), "fusec.graph ends with fusec.output"
        return last

    def mark(self, name: str) -> str | int | bool | None:
        """The mark ``name`` (``DEVICE_MARK``, ...): a string, a flag, an integer, or None where unset."""
        attr = self.attributes.get(name)
        if isinstance(attr, StringAttr):
            return attr.data
        if not isinstance(attr, IntegerAttr):
            return None
        return bool(attr.value.data) if attr.type == i1 else attr.value.data  # i1's true is -1 as a signed value

    @property
    def input_mutations(self) -> list[tuple[int, int, bool]]:
        """(input, output, in place) for each input a call writes (``INPUT_MUTATIONS``)."""
        attr = self.attributes.get(INPUT_MUTATIONS)
        if not isinstance(attr, ArrayAttr):
            return []
        return [(e.data[0].value.data, e.data[1].value.data, bool(e.data[2].value.data)) for e in attr.data]

    @property
    def aligned_inputs(self) -> frozenset[int]:
        """Inputs whose alignment the launcher need not check (``ALIGNED_INPUTS``)."""
        attr = self.attributes.get(ALIGNED_INPUTS)
        return frozenset(attr.get_values()) if isinstance(attr, DenseArrayBase) else frozenset()

    def declare_returned_types(self) -> None:
        """Declare the types ``fusec.output`` returns (after a pass laid out an output anew: a saved tensor)."""
        fn = self.function_type
        self.function_type = FunctionType.from_lists(list(fn.inputs.data), [v.type for v in self.output_op.values])

    @property
    def saved_outputs_from(self) -> int | None:
        """The first output saved for the backward (``SAVED_OUTPUTS``), or None outside a training forward."""
        attr = self.attributes.get(SAVED_OUTPUTS)
        if isinstance(attr, IntegerAttr):
            return attr.value.data
        return attr.data if isinstance(attr, IntAttr) else None

    def set_input_mutations(self, mutations: Sequence[tuple[int, int, bool]]) -> None:
        if not mutations:
            self.attributes.pop(INPUT_MUTATIONS, None)
            return
        self.attributes[INPUT_MUTATIONS] = ArrayAttr([ArrayAttr([IntegerAttr(i, 64), IntegerAttr(o, 64), IntegerAttr(int(p), 64)])
                                                      for i, o, p in mutations])

    @property
    def declared_symbols(self) -> dict[str, SymbolAttr]:
        return {s.sym.data: s for s in self.symbols.data}

    @property
    def symbol_definitions(self) -> dict[str, sympy.Expr]:
        """Derived size symbols and what each stands for (``d0 = floordiv(s0 - 1, 2) + 1``)."""
        return symbol_definitions(self.symbols.data)

    @property
    def size_facts(self) -> list[tuple[sympy.Expr, sympy.Expr]]:
        """The graph's size facts as rewrites (left side -> right side, which the types use)."""
        return [f.rule for f in self.facts.data] if self.facts is not None else []

    @property
    def symbol_bounds(self) -> dict[str, tuple[float, float]]:
        """Each size symbol's declared [lower, upper] (upper may be inf)."""
        return {name: (s.lower.data, math.inf if s.upper.data < 0 else s.upper.data) for name, s in self.declared_symbols.items()}

    # Hand-written: the signature names the body's block arguments (`@g(%a : T) -> (T)`), which a format cannot.
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
        if self.facts is not None and self.facts.data:
            printer.print_string(" facts(" + ", ".join(f.text for f in self.facts.data) + ")")
        # Marks the importer leaves for passes (``fusec.device``) print, so a dump replays as it compiled.
        printer.print_op_attributes(self.attributes, print_keyword=True)
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
            decls = parser.parse_comma_separated_list(parser.Delimiter.PAREN, lambda: parse_symbol_decl(parser))
            symbols = [SymbolAttr(n, lo, None if hi < 0 else hi, d, h) for n, lo, hi, d, h in decls]
        facts: list[SizeFactAttr] = []
        if parser.parse_optional_keyword("facts"):
            facts = [SizeFactAttr(*f) for f in parser.parse_comma_separated_list(parser.Delimiter.PAREN, lambda: parse_size_fact(parser))]
        attributes = parser.parse_optional_attr_dict_with_keyword()
        region = parser.parse_region(args)
        graph = GraphOp(name, [a.type for a in args], outputs, symbols, region, facts)
        if attributes is not None:
            graph.attributes.update(attributes.data)
        return graph

    def verify_(self) -> None:
        if list(self.block.arg_types) != list(self.function_type.inputs.data):
            raise VerifyException(f"fusec.graph @{self.sym_name.data}: block arguments do not match its input types")
        last = self.block.last_op
        if not isinstance(last, OutputOp):
            raise VerifyException(f"fusec.graph @{self.sym_name.data}: must end with fusec.output")
        if [v.type for v in last.values] != list(self.function_type.outputs.data):
            raise VerifyException(f"fusec.graph @{self.sym_name.data}: fusec.output types do not match the declared outputs")
        _check_mutations(self)
        declared = set(self.declared_symbols)
        definitions = self.symbol_definitions
        for name, definition in definitions.items():
            undeclared = shapes.free_size_symbols([definition]) - declared
            if undeclared or name in shapes.free_size_symbols([definition]):
                raise VerifyException(f"fusec.graph @{self.sym_name.data}: size symbol '{name}' is defined by "
                                      f"{print_expr(definition)}, which uses "
                                      f"{', '.join(sorted(undeclared)) + ' (not declared)' if undeclared else 'itself'}")
        try:
            for definition in definitions.values():
                shapes.expand_definitions(definition, definitions)
        except ValueError as e:
            raise VerifyException(f"fusec.graph @{self.sym_name.data}: {e}") from None
        for lhs, rhs in self.size_facts:
            undeclared = shapes.free_size_symbols([lhs, rhs]) - declared
            fact = f"fusec.graph @{self.sym_name.data}: size fact {shapes.print_fact(lhs, rhs)}"
            if undeclared:
                raise VerifyException(f"{fact} uses {', '.join(sorted(undeclared, key=shapes.natural_key))}, not declared")
            if not shapes.free_size_symbols([lhs]):
                raise VerifyException(f"{fact} rewrites a constant")
        for op in self.walk():
            for name, value in op_symbol_uses(op):
                if name not in declared:
                    raise VerifyException(f"{op.name}: size symbol '{name}' in {value} is not declared by "
                                          f"fusec.graph @{self.sym_name.data}")


def _check_mutations(graph: GraphOp) -> None:
    """Each input written once, from an output of its own type where the write is in place."""
    where = f"fusec.graph @{graph.sym_name.data}: {INPUT_MUTATIONS}"
    attr = graph.attributes.get(INPUT_MUTATIONS)
    if attr is not None and not (isinstance(attr, ArrayAttr) and all(
            isinstance(e, ArrayAttr) and len(e.data) == 3 and all(isinstance(x, IntegerAttr) for x in e.data) for e in attr.data)):
        raise VerifyException(f"{where} must be a list of [input, output, in_place] integer triples")
    inputs, outputs = graph.function_type.inputs.data, graph.function_type.outputs.data
    written = [i for i, _, _ in graph.input_mutations]
    if len(set(written)) != len(written):
        raise VerifyException(f"{where} writes an input twice")
    for i, o, in_place in graph.input_mutations:
        if not (0 <= i < len(inputs) and 0 <= o < len(outputs)):
            raise VerifyException(f"{where}: [{i}, {o}] names no input or no output")
        if in_place and inputs[i] != outputs[o]:
            raise VerifyException(f"{where}: output {o} is written into input {i} in place, but its type differs")


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
        if fn == "iota":
            if not isinstance(out, TensorType) or out.rank != 1 or out.element_type not in (I64, I32):
                raise VerifyException(f"fusec.pointwise \"iota\": result must be a 1-D i64 or i32 tensor, got {out}")
            return
        if isinstance(out, TensorType):
            types = [checked_tensor_type(self, v, "operand") for v in self.inputs]
            shape = broadcast_types(types)
            if shape is None:
                shown = " and ".join(str(t.dims) for t in types)
                raise VerifyException(f"fusec.pointwise \"{fn}\": operand shapes {shown} do not broadcast")
            check_same_dims(self, out.dims, shape, "result")
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
    custom_directives = (Number,)
    assembly_format = "custom<Number>($value) attr-dict `:` type($result)"

    def __init__(self, value: float | int | bool, result_type: Attribute):
        super().__init__(result_types=[result_type], properties={"value": NumberAttr(value)})

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
    custom_directives = (Expr,)
    assembly_format = "custom<Expr>($expr) attr-dict `:` type($result)"

    def __init__(self, expr: int | str | sympy.Basic, result_type: Attribute):
        super().__init__(result_types=[result_type], properties={"expr": ExprAttr.of(expr)})

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
    custom_directives = (IntList,)
    assembly_format = "$kind $input `dims` custom<IntList>($dims) (`keepdim` $keepdim^)? attr-dict `:` type($input) `->` type($result)"

    def __init__(self, kind: str, input: SSAValue, dims: Sequence[int], keepdim: bool, result_type: Attribute):
        props: dict[str, Attribute] = {"kind": StringAttr(kind), "dims": ArrayAttr([IntAttr(d) for d in dims])}
        if keepdim:
            props["keepdim"] = UnitAttr()
        super().__init__(operands=[input], result_types=[result_type], properties=props)

    @property
    def dim_list(self) -> list[int]:
        return [d.data for d in self.dims.data]

    def verify_(self) -> None:
        kind = self.kind.data
        if kind not in REDUCTIONS:
            raise VerifyException(f"fusec.reduce: unknown reduction '{kind}' (one of {', '.join(REDUCTIONS)})")
        t = checked_tensor_type(self, self.input, "input")
        dims = self.dim_list
        if not dims or len(set(dims)) != len(dims) or any(d < 0 or d >= t.rank for d in dims):
            raise VerifyException(f"fusec.reduce: dims {dims} invalid for a tensor of rank {t.rank}")
        if kind in ("argmax", "argmin") and len(dims) != 1:
            raise VerifyException(f"fusec.reduce \"{kind}\": exactly one dim")
        want = [sympy.Integer(1) if i in dims else d for i, d in enumerate(t.dims) if self.keepdim or i not in dims]
        out = checked_tensor_type(self, self.result, "result")
        check_same_dims(self, out.dims, want, "result")
        want_type = reduction_result_type(kind, t.element_type)
        if out.element_type != want_type:
            raise VerifyException(f"fusec.reduce \"{kind}\": result element type must be {want_type}, got {out.element_type}")


@irdl_op_definition
class CatOp(IRDLOperation):
    """Concatenation along one dim: ``fusec.cat %a, %b dim 0 : (T, T) -> T``."""

    name = "fusec.cat"
    dim = prop_def(IntAttr)
    inputs = var_operand_def()
    result = result_def()
    traits = traits_def(Pure())
    custom_directives = (Int,)
    assembly_format = "$inputs `dim` custom<Int>($dim) attr-dict `:` functional-type($inputs, $result)"

    def __init__(self, inputs: Sequence[SSAValue], dim: int, result_type: Attribute):
        super().__init__(operands=[inputs], result_types=[result_type], properties={"dim": IntAttr(dim)})

    def verify_(self) -> None:
        d = self.dim.data
        types = [checked_tensor_type(self, v, "input") for v in self.inputs]
        out = checked_tensor_type(self, self.result, "result")
        if not types or any(t.rank != out.rank for t in types) or d >= out.rank:
            raise VerifyException(f"fusec.cat: inputs and result must share a rank above dim {d}")
        for t in types:
            if t.element_type != out.element_type:
                raise VerifyException("fusec.cat: element types differ")
            others = [e for i, e in enumerate(out.dims) if i != d]
            check_same_dims(self, [e for i, e in enumerate(t.dims) if i != d], others, "an input's dims other than the cat dim")
        check_same_dims(self, [out.dims[d]], [sympy.Add(*[t.dims[d] for t in types])], "the cat dim")


class _IndexingOp(IRDLOperation):
    """Base of index and gather: ``%input[%index] dim d : T, I -> R``."""

    dim = prop_def(IntAttr)
    input = operand_def()
    index = operand_def()
    result = result_def()
    traits = traits_def(Pure())
    custom_directives = (Int,)
    assembly_format = "$input `[` $index `]` `dim` custom<Int>($dim) attr-dict `:` type($input) `,` type($index) `->` type($result)"

    def __init__(self, input: SSAValue, index: SSAValue, dim: int, result_type: Attribute):
        super().__init__(operands=[input, index], result_types=[result_type], properties={"dim": IntAttr(dim)})


@irdl_op_definition
class IndexOp(_IndexingOp):
    """Indexing one dim by an integer tensor: ``input[..., index, ...]`` (index_select, embedding).

    A negative index counts from the end of the dim, as in ``torch.Tensor.__getitem__``.
    """

    name = "fusec.index"

    def verify_(self) -> None:
        t = checked_tensor_type(self, self.input, "input")
        idx = checked_tensor_type(self, self.index, "index")
        out = checked_tensor_type(self, self.result, "result")
        d = self.dim.data
        if d >= t.rank:
            raise VerifyException(f"fusec.index: dim {d} out of range for rank {t.rank}")
        if idx.element_type not in (I64, I32):
            raise VerifyException("fusec.index: index must be i64 or i32")
        check_same_dims(self, out.dims, t.dims[:d] + idx.dims + t.dims[d + 1:], "result")


@irdl_op_definition
class GatherOp(_IndexingOp):
    """torch.gather: ``out[i][j] = input[i][index[i][j]]`` for dim 1, and so on."""

    name = "fusec.gather"

    def verify_(self) -> None:
        t = checked_tensor_type(self, self.input, "input")
        idx = checked_tensor_type(self, self.index, "index")
        out = checked_tensor_type(self, self.result, "result")
        if self.dim.data >= t.rank or idx.rank != t.rank:
            raise VerifyException("fusec.gather: index must have the input's rank, dim in range")
        check_same_dims(self, out.dims, idx.dims, "result")


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
    custom_directives = (ExternArguments, ResultPositions)
    assembly_format = ("$target custom<ExternArguments>($inputs, $args, $kwargs) custom<ResultPositions>($positions) attr-dict "
                       "`:` functional-type($inputs, $outputs)")

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
