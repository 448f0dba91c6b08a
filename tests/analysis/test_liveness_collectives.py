"""Liveness around a collective: the wait's result is the collective's buffer, and its inputs live until the wait."""

from fusec import testing
from fusec.analysis import collectives
from fusec.analysis.liveness import graph_steps, live_intervals, op_step, storage_root
from fusec.dialects import fusec as F

T8, T16 = "!fusec.tensor<[8], f32>", "!fusec.tensor<[16], f32>"
GRAPH = f"""
builtin.module {{
  fusec.graph @g(%0 : {T8}) -> ({T16}, {T8}) {{
    %1 = fusec.extern "aten.relu.default"(%0) : ({T8}) -> {T8}
    %2 = fusec.extern "_c10d_functional.all_gather_into_tensor.default"(%1, 2, "0") {{collective = "issue"}} : ({T8}) -> {T16}
    %3 = fusec.extern "aten.sin.default"(%0) : ({T8}) -> {T8}
    %4 = fusec.extern "_c10d_functional.wait_tensor.default"(%2) {{collective = "wait"}} : ({T16}) -> {T16}
    fusec.output %4, %3 : {T16}, {T8}
  }}
}}
"""


def test_wait_aliases_the_collective_and_holds_its_inputs():
    graph = next(op for op in testing.parse(GRAPH).walk() if isinstance(op, F.GraphOp))
    relu, gather, sin, wait = list(graph.block.ops)[:4]
    assert [collectives.kind(op) for op in (relu, gather, sin, wait)] == [None, "issue", None, "wait"]
    assert collectives.issuer(wait) is gather
    assert storage_root(wait.results[0]) is gather.results[0]
    assert not op_step(wait).allocates
    steps, outputs = graph_steps(graph)
    intervals = live_intervals(steps, outputs)
    assert intervals[relu.results[0]] == (0, 3), "the collective's input lives until its wait (moment 3)"
    assert intervals[gather.results[0]] == (1, 4), "the gathered buffer is the graph's output through the wait"
    assert wait.results[0] not in intervals
