"""Warm start: a graph compiled before (by this or an earlier process) skips the pipeline."""

import pytest
import torch
import torch.nn as nn

import fusec.pipeline
from fusec.runtime import graph_cache


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin, self.norm = nn.Linear(12, 12), nn.LayerNorm(12)

    def forward(self, x):
        return self.norm(torch.relu(self.lin(x)) + x)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSEC_GRAPH_CACHE", "1")
    monkeypatch.setenv("FUSEC_CACHE_DIR", str(tmp_path))
    torch._dynamo.reset()
    yield tmp_path / "graphs"
    torch._dynamo.reset()


def no_pipeline(*args, **kwargs):
    raise AssertionError("the pipeline ran although its result was cached")


@pytest.mark.slow
def test_a_second_compile_of_the_same_graph_skips_the_pipeline(cache, monkeypatch):
    torch.manual_seed(0)
    model = Block().eval()
    x = torch.randn(5, 12, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        want = model(x)
        torch.testing.assert_close(torch.compile(model, backend="fusec")(x), want)
        (entry,) = cache.glob("*.pickle")
        torch._dynamo.reset()
        monkeypatch.setattr(fusec.pipeline, "run_pipeline", no_pipeline)
        torch.testing.assert_close(torch.compile(model, backend="fusec")(x), want)
    assert list(cache.glob("*.pickle")) == [entry]


def test_a_corrupt_entry_is_a_miss_and_is_replaced(cache):
    model = Block().eval()
    x = torch.randn(5, 12, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        torch.compile(model, backend="fusec")(x)
        (entry,) = cache.glob("*.pickle")
        entry.write_bytes(b"not a pickle")
        torch._dynamo.reset()
        torch.testing.assert_close(torch.compile(model, backend="fusec")(x), model(x))
    assert graph_cache.load(entry.stem) is not None


def test_the_key_follows_the_spec_the_checks_and_the_code_not_the_graph_name():
    ir = 'fusec.graph @forward_0_0() -> () {\n  fusec.output\n}'
    key = graph_cache.graph_key(ir, "form-kernels", {"s0": 8}, "alignment")
    assert key == graph_cache.graph_key(ir, "form-kernels", {"s0": 8}, "alignment")
    assert key != graph_cache.graph_key(ir, "form-kernels,dce", {"s0": 8}, "alignment")
    assert key != graph_cache.graph_key(ir, "form-kernels", {"s0": 9}, "alignment")
    assert key != graph_cache.graph_key(ir, "form-kernels", {"s0": 8}, "layout")


def test_off_when_turned_off(monkeypatch):
    monkeypatch.setenv("FUSEC_GRAPH_CACHE", "0")
    assert graph_cache.module_key(None, "dce", {}, "all") is None


class TwoNorms(nn.Module):  # two independent layer norms: their kernels become a combo, forward and backward
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.LayerNorm(12), nn.LayerNorm(12)

    def forward(self, x, y):
        return self.a(x).relu() + 1, self.b(y).sigmoid()


@pytest.mark.slow
def test_a_training_step_with_combo_kernels_is_stored_and_reused(cache, monkeypatch):
    """Every graph of a training step is stored, combos included (their IR values once made pickling recurse
    through the whole module, and the store gave up: a warm start recompiled those graphs)."""
    from fusec.lowering.combo_kernel import TritonCombo

    torch.manual_seed(0)
    model = TwoNorms()
    g = torch.Generator().manual_seed(5)
    x, y = torch.randn(5, 12, generator=g), torch.randn(7, 12, generator=g)

    def step(run):
        model.zero_grad()
        a, b = run(x, y)
        (a.square().sum() + b.sum()).backward()
        return a, b, [p.grad.clone() for p in model.parameters()]

    want = step(model)
    first = step(torch.compile(model, backend="fusec"))
    entries = sorted(cache.glob("*.pickle"))
    assert len(entries) == 2  # the forward and the backward
    launchers = [graph_cache.load(e.stem) for e in entries]
    assert all(any(isinstance(k, TritonCombo) for k in launcher.kernels) for launcher in launchers)
    assert not any(b"xdsl" in e.read_bytes() for e in entries)  # launches and sources only, no IR
    torch._dynamo.reset()
    monkeypatch.setattr(fusec.pipeline, "run_pipeline", no_pipeline)
    second = step(torch.compile(model, backend="fusec"))
    torch.testing.assert_close(first, want)
    torch.testing.assert_close(second, want)
    assert sorted(cache.glob("*.pickle")) == entries
