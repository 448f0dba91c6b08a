"""The ``overlap_collectives`` option: torch's overlap scheduler before import (fusec.frontend.collective_overlap).

Captured on one process with a fake process group (no communication: these tests check the graph and
the IR; tests/distributed/test_gloo.py checks values on two gloo ranks).  Torch's scheduler estimates
compute with a roofline of the GPU; on the CPU a constant stands in for it where a test says so.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as fcol
import torch.fx

from fusec.backend import BackendOptionError, BackendOptions
from fusec.frontend import collective_overlap

c10d = torch.ops._c10d_functional
aten = torch.ops.aten


@pytest.fixture(scope="module")
def fake_group(fake_process_group):
    """The fake two-rank group (tests/conftest.py)."""


@pytest.fixture
def estimates(monkeypatch):
    """Torch's scheduler runnable here: a constant compute estimate instead of the GPU roofline."""
    import torch._inductor.fx_passes.overlap_scheduling as overlap_scheduling

    monkeypatch.setattr(overlap_scheduling, "estimate_roofline_runtime_ms", lambda node: 0.01)
    monkeypatch.setattr(collective_overlap, "runtime_estimates_available", lambda: True)


def two_gathers_and_matmuls(x, w1, w2, y):
    a = fcol.all_gather_tensor(w1, 0, dist.group.WORLD)
    b = fcol.all_gather_tensor(w2, 0, dist.group.WORLD)
    h = (y @ y).relu()
    return (x @ a.t()) + 1, (h @ b.t()).sin()


def compile_and_dump(tmp_path, overlap: bool = True):
    """two_gathers_and_matmuls through fusec with a dump; returns (outputs, final IR, remarks text)."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    inputs = [torch.randn(32, 32) for _ in range(4)]
    options = {"dump_dir": str(tmp_path / "dump"), "overlap_collectives": overlap}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # all_gather_tensor's deprecation
        out = torch.compile(two_gathers_and_matmuls, backend="fusec", options=options)(*inputs)
    (graph_dir,) = sorted((tmp_path / "dump").iterdir())
    return out, (graph_dir / "final.mlir").read_text(), (graph_dir / "remarks.txt").read_text()


def test_the_option_takes_a_bool():
    assert BackendOptions.from_dict({"overlap_collectives": True}).overlap_collectives
    assert not BackendOptions.from_dict({}).overlap_collectives
    with pytest.raises(BackendOptionError, match="'overlap_collectives' must be True or False, got 'yes'"):
        BackendOptions.from_dict({"overlap_collectives": "yes"})


def test_buckets_the_gathers_and_overlaps_them_with_a_matmul(fake_group, estimates, tmp_path):
    out, final, log = compile_and_dump(tmp_path)
    assert [tuple(o.shape) for o in out] == [(32, 64), (32, 64)]
    assert "overlap-collectives: scheduled: torch's overlap scheduler: 2 collective(s) -> 1 after bucketing" in log
    assert "(1 all-gather bucket(s) made functional)" in log
    lines = final.splitlines()
    issue = [i for i, line in enumerate(lines) if '{collective = "issue"}' in line]
    wait = [i for i, line in enumerate(lines) if '{collective = "wait"}' in line]
    assert len(issue) == len(wait) == 1, final  # one bucket: one all-gather of both weights, one wait
    assert "all_gather_into_tensor.default" in lines[issue[0]]  # the functional form: no out= buffer, no copy_
    # The matmul that needs no gathered weight runs between the bucket's issue and its wait: the overlap.
    between = lines[issue[0]:wait[0]]
    assert any('fusec.extern "aten.mm.default"' in line for line in between), final


def test_without_estimates_the_graph_keeps_its_order(fake_group, monkeypatch, tmp_path):
    monkeypatch.setattr(collective_overlap, "runtime_estimates_available", lambda: False)
    _, final, log = compile_and_dump(tmp_path)
    assert "overlap-collectives: declined: 2 collective(s) kept in the traced order" in log
    assert final.count('{collective = "issue"}') == 2


def test_off_by_default(fake_group, tmp_path):
    _, final, log = compile_and_dump(tmp_path, overlap=False)
    assert "overlap-collectives" not in log
    assert final.count('{collective = "issue"}') == 2


def gather_into_fresh_buffer(extra_reader: bool) -> tuple[torch.fx.GraphModule, torch.fx.Node]:
    """Torch's all-gather bucket by hand: empty, this rank's slot of it, copy_(slot, cat), gather out= the buffer."""
    g = torch.fx.Graph()
    x, y = g.placeholder("x"), g.placeholder("y")
    for node, val in ((x, torch.empty(8)), (y, torch.empty(8))):
        node.meta["val"] = val
    buffer = g.call_function(aten.empty.memory_format, ([32],), {"dtype": torch.float32})
    slot = g.call_function(aten.slice.Tensor, (buffer, 0, 0, 16))
    slot.meta["val"] = torch.empty(16)
    cat = g.call_function(aten.cat.default, ([x, y],))
    cat.meta["val"] = torch.empty(16)
    copied = g.call_function(aten.copy_.default, (slot, cat))
    gathered = g.call_function(c10d.all_gather_into_tensor_out.default, (copied, 2, "0"), {"out": buffer})
    wait = g.call_function(c10d.wait_tensor.default, (gathered,))
    outputs = [wait, g.call_function(aten.sum.default, (buffer,))] if extra_reader else [wait]
    g.output(tuple(outputs))
    return torch.fx.GraphModule(torch.nn.Module(), g), cat


def test_an_all_gather_into_a_fresh_buffer_becomes_functional():
    gm, cat = gather_into_fresh_buffer(extra_reader=False)
    assert collective_overlap.functional_all_gathers(gm) == 1
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert targets == [aten.cat.default, c10d.all_gather_into_tensor.default, c10d.wait_tensor.default]
    gather = next(n for n in gm.graph.nodes if n.target == c10d.all_gather_into_tensor.default)
    assert gather.args == (cat, 2, "0")


def test_a_buffer_read_elsewhere_is_left_alone():
    gm, _ = gather_into_fresh_buffer(extra_reader=True)
    assert collective_overlap.functional_all_gathers(gm) == 0
    assert any(n.target == c10d.all_gather_into_tensor_out.default for n in gm.graph.nodes)
