"""Every aten op the importer maps: it imports natively, and the reference interpreter agrees with eager."""

import pytest
from corpus import CASES, DYNAMIC_CASES, randn
from import_helpers import assert_matches_eager, import_and_run, trace

from fusec.dialects import fusec as F

DESIGNED_EXTERNS = {"aten.mm.default", "aten.bmm.default"}


def _ops_in(gm) -> set[str]:
    return {n.target._opname for n in gm.graph.nodes if n.op == "call_function" and hasattr(n.target, "_opname")}


@pytest.mark.parametrize("name, fn, make_inputs, aten_op", CASES, ids=[c[0] for c in CASES])
def test_op_imports_natively_and_matches_eager(name, fn, make_inputs, aten_op):
    inputs = make_inputs()
    assert aten_op in _ops_in(trace(fn, *inputs)), f"the traced graph does not exercise aten.{aten_op}"
    module, info, log, outputs = import_and_run(fn, *inputs)
    assert not log.remarks, log.text()
    externs = {op.target.data for op in module.walk() if isinstance(op, F.ExternOp)}
    assert externs <= DESIGNED_EXTERNS
    assert_matches_eager(outputs, fn(*inputs))


@pytest.mark.parametrize("name", DYNAMIC_CASES)
def test_op_imports_with_symbolic_sizes(name):
    _, fn, make_inputs, _ = next(c for c in CASES if c[0] == name)
    inputs = make_inputs()
    module, info, log, outputs = import_and_run(fn, *inputs, dynamic=True)
    assert info.symbols, "symbolic tracing should give size symbols"
    assert not log.remarks, log.text()
    assert_matches_eager(outputs, fn(*inputs))


def test_symbolic_graph_runs_at_other_sizes():
    fn = lambda x: (x[:, 1:] - x.mean(1, keepdim=True)).softmax(-1)  # noqa: E731
    gm = trace(fn, randn(4, 6), dynamic=True)
    from fusec.frontend.importer import import_graph
    from fusec.runtime import interpreter

    module, info = import_graph(gm, [randn(4, 6)])
    for shape in [(3, 5), (7, 2), (2, 9)]:
        x = randn(*shape, seed=3)
        outputs = interpreter.run(module, info.tensor_inputs([x]))
        assert_matches_eager(info.assemble_outputs(outputs, info.bind_symbols([x])), fn(x))
