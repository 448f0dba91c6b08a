"""bias-epilogues through torch.compile: attention's projections and an output layer run as addmm, not as a matmul
and a kernel for the bias; values and gradients as eager's (CPU here; the GPU's cuBLAS in the models' tests)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as Fn

from fusec.dialects import fusec as F
from fusec.testing import parse

pytestmark = pytest.mark.usefixtures("fresh_dynamo")  # tests/conftest.py


class Head(torch.nn.Module):
    """Attention over q/k/v projections (each read only by the attention call), then an output layer."""

    def __init__(self, width: int = 32, heads: int = 4, classes: int = 10):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v = (torch.nn.Linear(width, width) for _ in range(3))
        self.out = torch.nn.Linear(width, classes)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = (p(x).view(b, t, self.heads, c // self.heads).transpose(1, 2) for p in (self.q, self.k, self.v))
        a = Fn.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, c)
        return self.out(a)


def _final_graphs(dump) -> list[F.GraphOp]:
    graphs = []
    for graph_dir in sorted(dump.iterdir()):
        final = sorted(graph_dir.glob("[0-9][0-9]-*.mlir"))[-1].read_text()
        graphs += [op for op in parse(final).walk() if isinstance(op, F.GraphOp)]
    return graphs


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_projections_and_output_layer_run_as_addmm(tmp_path, dynamic):
    torch.manual_seed(0)
    model = Head()
    x = torch.randn(2, 6, 32)
    compiled = torch.compile(model, backend="fusec", dynamic=dynamic, options={"dump_dir": str(tmp_path)})
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))
    (forward,) = _final_graphs(tmp_path)
    externs = [op.target.data for op in forward.walk() if isinstance(op, F.ExternOp)]
    assert externs.count("aten.addmm.default") == 4 and "aten.mm.default" not in externs, externs
    assert not [op for op in forward.walk() if isinstance(op, F.KernelOp)], "no kernel is left for a bias add"


def test_training_through_addmm_matches_eager(tmp_path):
    torch.manual_seed(0)
    eager = Head()
    compiled_model = Head()
    compiled_model.load_state_dict(eager.state_dict())
    x = torch.randn(2, 6, 32)
    weight = torch.randn(2, 6, 10)
    (eager(x) * weight).sum().backward()
    compiled = torch.compile(compiled_model, backend="fusec", options={"dump_dir": str(tmp_path)})
    (compiled(x) * weight).sum().backward()
    for (name, want), got in zip(eager.named_parameters(), compiled_model.parameters(), strict=True):
        torch.testing.assert_close(got.grad, want.grad, msg=name)
    forward = next(g for g in _final_graphs(tmp_path) if g.sym_name.data.startswith("forward"))
    assert [op.target.data for op in forward.walk() if isinstance(op, F.ExternOp)].count("aten.addmm.default") == 4
