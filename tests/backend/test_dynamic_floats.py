"""Python floats under ``dynamic=True``: Dynamo traces them as symbols, and one it had to specialize while tracing
(a LayerNorm's eps, a dropout rate) restarts its analysis.  fusec restarts before AOTAutograd traces the graph,
not after (``backend._restart_now_for_specialized_floats``): one AOTAutograd trace a graph, not two."""

from __future__ import annotations

import pytest
import torch

from fusec import backend


@pytest.fixture
def aot_traces(monkeypatch):
    calls = []
    traced = backend._aot_compile

    def counted(*args):
        calls.append(args[0])
        return traced(*args)

    monkeypatch.setattr(backend, "_aot_compile", counted)
    torch._dynamo.reset()
    yield calls
    torch._dynamo.reset()


def test_a_specialized_float_restarts_before_aot_traces(aot_traces):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8, eps=1e-6), torch.nn.Dropout(0.0))
    compiled = torch.compile(model, backend="fusec", dynamic=True, options={"execute": "interpret"})
    for rows in (4, 7):
        x = torch.randn(rows, 8)
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), model(x))
    assert len(aot_traces) == 1, "AOTAutograd traced the graph again after a restart"


def test_a_float_argument_stays_a_tensor_input(aot_traces):
    """A float the graph can take as a 0-d tensor (tensorify) is left to AOTAutograd: no restart, no recompile."""

    def scaled(x, s):
        return torch.tanh(x) * s + s

    compiled = torch.compile(scaled, backend="fusec", dynamic=True, options={"execute": "interpret"})
    x = torch.randn(5, 3)
    for s in (0.5, 1.25):
        torch.testing.assert_close(compiled(x, s), scaled(x, s))
    assert len(aot_traces) == 1


def test_an_embeddings_unread_norm_type_restarts_before_aot_traces(aot_traces):
    """``nn.Embedding`` passes ``norm_type`` to ``F.embedding``, which reads it only with ``max_norm``: Dynamo makes
    it a float input all the same, which AOTAutograd cannot keep (its graph never reads it), so it restarts."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(10, 8), torch.nn.LayerNorm(8))
    compiled = torch.compile(model, backend="fusec", dynamic=True, options={"execute": "interpret"})
    for length in (4, 7):
        ids = torch.randint(0, 10, (2, length), generator=torch.Generator().manual_seed(length))
        with torch.no_grad():
            torch.testing.assert_close(compiled(ids), model(ids))
    assert len(aot_traces) == 1, "AOTAutograd traced the graph again after a restart"


def test_an_embedding_with_max_norm_reads_its_norm_type():
    """With ``max_norm`` the norm type matters: it is a read, not a float to drop."""
    import torch.fx

    def f(ids, weight, p: float):
        return torch.nn.functional.embedding(ids, weight, max_norm=1.0, norm_type=p)

    gm = torch.fx.symbolic_trace(f)
    (call,) = [n for n in gm.graph.nodes if n.op == "call_function"]
    p = next(n for n in gm.graph.nodes if n.name == "p")
    assert not backend._ignores(call, p)
    call.kwargs = {**call.kwargs, "max_norm": None}
    assert backend._ignores(call, p)
