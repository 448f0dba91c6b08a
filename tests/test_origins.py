"""fusec.base.origins: describing where an op came from, and finding the op a failure was handling."""

import linecache

from xdsl.dialects.builtin import FileLineColLoc, IntAttr, NameLoc, StringAttr

from fusec.base import origins
from fusec.dialects import fusec as F
from fusec.pipeline import parse_module
from fusec.registry import make_context

GRAPH = """fusec.graph @g(%a : !fusec.tensor<[4], f32>) -> (!fusec.tensor<[4], f32>) {
  %n = fusec.pointwise "neg" %a : (!fusec.tensor<[4], f32>) -> !fusec.tensor<[4], f32>
  fusec.output %n : !fusec.tensor<[4], f32>
}
"""


def fx_loc(node: str, file: str, line: int, col: int) -> NameLoc:
    return NameLoc(StringAttr(node), FileLineColLoc(StringAttr(file), IntAttr(line), IntAttr(col)))


def parsed():
    module = parse_module(make_context(), GRAPH, "origins.mlir")
    return module, next(op for op in module.walk() if isinstance(op, F.PointwiseOp))


def test_location_text_of_each_kind():
    assert origins.location_text(fx_loc("mul_3", "model.py", 12, 9)) == "FX node 'mul_3' at model.py:12:9"
    assert origins.location_text(FileLineColLoc(StringAttr("in.mlir"), IntAttr(2), IntAttr(3))) == "in.mlir:2:3"
    assert origins.location_text(None) is None


def test_an_op_without_location_is_described_by_its_parent():
    module, neg = parsed()
    graph = neg.parent_op()
    from xdsl.dialects.builtin import UnknownLoc

    neg.location = UnknownLoc()
    assert origins.located(neg) is graph
    assert origins.describe(neg) == "'fusec.pointwise' op (in 'fusec.graph' op, origins.mlir:1:1)"
    graph.location = UnknownLoc()
    assert origins.located(neg) is None and origins.describe(neg) == "'fusec.pointwise' op"


def test_source_excerpt_shows_the_line_and_a_caret(tmp_path):
    source = tmp_path / "model.py"
    source.write_text("def f(x):\n    return torch.sin(x) * 3\n")
    linecache.checkcache(str(source))
    assert origins.source_excerpt(fx_loc("mul", str(source), 2, 12)) == "        return torch.sin(x) * 3\n" + " " * 15 + "^"
    assert origins.source_excerpt(fx_loc("mul", str(tmp_path / "gone.py"), 2, 12)) == ""


def test_op_in_flight_is_the_innermost_located_op():
    module, neg = parsed()

    def inner(op):
        raise KeyError(op.name)

    def outer(graph):
        for op in graph.walk():
            if op is neg:
                inner(op)

    try:
        outer(module)
    except KeyError as e:
        assert origins.op_in_flight(e.__traceback__) is neg



def test_no_op_in_flight():
    try:
        raise ValueError("no op here")
    except ValueError as e:
        assert origins.op_in_flight(e.__traceback__) is None
