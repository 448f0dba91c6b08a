"""Ops that eager computes off the graph's device (CPU factory ops, CPU scalar math beside GPU tensors) run as
torch calls there.  Traced with fake CUDA tensors, so it runs without a GPU; the GPU run is in
tests/backend/test_semantics.py."""

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx

from fusec.base import remarks
from fusec.dialects import fusec as F
from fusec.frontend.importer import import_graph


def fn(x):
    return x * 2 + 1, torch.zeros(3) + 3, torch.arange(4) * 2, x.sum()


def test_cpu_results_beside_gpu_tensors_run_as_torch_calls_on_the_cpu():
    with FakeTensorMode(allow_non_fake_inputs=True):
        x = torch.empty(5, 4, device="cuda")
    gm = make_fx(fn, tracing_mode="fake")(x)
    with remarks.collect() as log:
        module, info = import_graph(gm, [x])
    assert info.device.type == "cuda"
    externs = [op.target.data for op in module.walk() if isinstance(op, F.ExternOp)]
    assert externs == ["aten.zeros.default", "aten.add.Tensor", "aten.arange.default", "aten.mul.Tensor"]
    moved = [r for r in log.remarks if r.code == "extern-device"]
    assert len(moved) == 4 and all("on cpu" in r.message for r in moved)
    assert not info.externs  # placed, not fallen back: nothing is reported as a fallback
    # The GPU tensor's arithmetic and its sum stay native (kernels on the graph's device).
    assert [op.fn.data for op in module.walk() if isinstance(op, F.PointwiseOp)] == ["mul", "add"]
    assert [op.kind.data for op in module.walk() if isinstance(op, F.ReduceOp)] == ["sum"]
