"""Warm start: a graph compiled before (by this or an earlier process) skips the import and the pipeline."""

import pytest
import torch
import torch.nn as nn

import fusec.backend
import fusec.pipeline
from fusec.base import remarks
from fusec.frontend.fx_signature import fx_signature
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


def no_import(*args, **kwargs):
    raise AssertionError("the graph was imported although its FX signature was cached")


def entries(cache) -> tuple[list, list]:
    """(entries keyed by the imported IR: a launcher, entries keyed by the FX graph: a launcher with its import)"""
    found = [(e, graph_cache._read(e.stem)) for e in sorted(cache.glob("*.pickle"))]
    return ([e for e, v in found if not isinstance(v, graph_cache.Imported)],
            [e for e, v in found if isinstance(v, graph_cache.Imported)])


@pytest.mark.slow
def test_a_second_compile_of_the_same_graph_skips_the_import_and_the_pipeline(cache, monkeypatch):
    torch.manual_seed(0)
    model = Block().eval()
    x = torch.randn(5, 12, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        want = model(x)
        with remarks.collect() as cold:
            torch.testing.assert_close(torch.compile(model, backend="fusec")(x), want)
        by_ir, by_fx = entries(cache)
        assert len(by_ir) == len(by_fx) == 1
        torch._dynamo.reset()
        monkeypatch.setattr(fusec.pipeline, "run_pipeline", no_pipeline)
        monkeypatch.setattr(fusec.backend, "import_graph", no_import)
        with remarks.collect() as warm:
            torch.testing.assert_close(torch.compile(model, backend="fusec")(x), want)
    assert entries(cache) == (by_ir, by_fx)
    assert any(r.pass_name == "reuse-buffers" for r in cold.remarks)
    assert [r.code for r in warm.remarks] == ["graph-cache-hit"]  # the passes did not run: a remark says so


@pytest.mark.slow
def test_a_graph_without_its_fx_entry_is_imported_and_takes_the_pipeline_result_from_its_ir_entry(cache, monkeypatch):
    model = Block().eval()
    x = torch.randn(5, 12, generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        torch.compile(model, backend="fusec")(x)
        by_ir, (fx_entry,) = entries(cache)
        fx_entry.unlink()
        torch._dynamo.reset()
        monkeypatch.setattr(fusec.pipeline, "run_pipeline", no_pipeline)
        torch.testing.assert_close(torch.compile(model, backend="fusec")(x), model(x))
    assert entries(cache) == (by_ir, [fx_entry])  # stored again


def test_a_corrupt_entry_is_a_miss_and_is_replaced(cache):
    model = Block().eval()
    x = torch.randn(5, 12, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        torch.compile(model, backend="fusec")(x)
        (ir_entry,), (fx_entry,) = entries(cache)
        ir_entry.write_bytes(b"not a pickle")
        fx_entry.write_bytes(b"not a pickle either")
        torch._dynamo.reset()
        torch.testing.assert_close(torch.compile(model, backend="fusec")(x), model(x))
    assert graph_cache.load(ir_entry.stem) is not None
    assert isinstance(graph_cache._read(fx_entry.stem), graph_cache.Imported)


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
    by_ir, by_fx = entries(cache)
    assert len(by_ir) == len(by_fx) == 2  # the forward and the backward
    launchers = [graph_cache.load(e.stem) for e in by_ir]
    assert all(any(isinstance(k, TritonCombo) for k in launcher.kernels) for launcher in launchers)
    for e in by_ir + by_fx:  # launches, sources and types only: no IR operation (pickling one took the module)
        assert not any(name in e.read_bytes() for name in (b"SSAValue", b"OpResult", b"BlockArgument", b"Operation"))
    torch._dynamo.reset()
    monkeypatch.setattr(fusec.pipeline, "run_pipeline", no_pipeline)
    monkeypatch.setattr(fusec.backend, "import_graph", no_import)
    second = step(torch.compile(model, backend="fusec"))
    torch.testing.assert_close(first, want)
    torch.testing.assert_close(second, want)
    assert entries(cache) == (by_ir, by_fx)


def _traced(fn, *inputs):
    from torch.fx.experimental.proxy_tensor import make_fx

    return make_fx(fn)(*inputs), list(inputs)


def test_the_fx_signature_tells_apart_what_the_import_reads():
    def f(x, w):
        return (x * w).sum(-1), torch.mm(x, x.t())

    x, w = torch.randn(4, 8), torch.randn(8)
    base = fx_signature(*_traced(f, x, w))
    assert base is not None and base == fx_signature(*_traced(f, x.clone(), w.clone()))  # values do not count
    assert base != fx_signature(*_traced(f, x.t().contiguous().t(), w))  # an input's strides
    assert base != fx_signature(*_traced(f, x.double(), w.double()))  # dtypes
    assert base != fx_signature(*_traced(f, torch.randn(5, 8), w))  # sizes
    precision = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high" if precision == "highest" else "highest")
        assert base != fx_signature(*_traced(f, x, w))  # the TF32 mark the importer puts on the graph
    finally:
        torch.set_float32_matmul_precision(precision)


def test_a_graph_holding_an_opaque_value_has_no_fx_signature_and_is_keyed_by_its_ir():
    gm, inputs = _traced(lambda x: x + 1, torch.randn(3))
    node = next(n for n in gm.graph.nodes if n.op == "call_function")
    node.meta["val"] = object()
    assert fx_signature(gm, inputs) is None


class GatedProjections(nn.Module):  # gate and up of one input: merge-matmuls makes them one matmul, saved strided
    def __init__(self):
        super().__init__()
        self.gate, self.up = nn.Linear(16, 24, bias=False), nn.Linear(16, 24, bias=False)

    def forward(self, x):
        return torch.sigmoid(self.gate(x)) * self.up(x)


@pytest.mark.slow
def test_a_warm_start_reports_the_strides_of_saved_slices_again(cache, monkeypatch):
    """A forward that saves column slices of one product for its backward hands them on strided, and AOTAutograd
    compiles the backward for the strides the launcher reports: a launcher from the cache reports them too, so the
    backward traced in the second compile is the first one's and comes from the cache (no import) -- else it would
    be traced for dense inputs and copy the slices on every call."""
    spec = fusec.pipeline.default_pipeline_spec().replace("merge-matmuls,", "merge-matmuls{when=always},")
    torch.manual_seed(0)
    model = GatedProjections()
    x = torch.randn(10, 16, generator=torch.Generator().manual_seed(7))

    def step(run):
        model.zero_grad()
        run(x).square().sum().backward()
        return [p.grad.clone() for p in model.parameters()]

    want = step(model)
    first = step(torch.compile(model, backend="fusec", options={"pipeline": spec}))
    by_ir, _ = entries(cache)
    strided = [[s for s in graph_cache.load(e.stem).strided_outputs if s] for e in by_ir]
    assert sorted(strided) == [[], [(48, 1), (48, 1)]]  # the forward's gate and up: [10, 24] of [10, 48]
    torch._dynamo.reset()
    monkeypatch.setattr(fusec.pipeline, "run_pipeline", no_pipeline)
    monkeypatch.setattr(fusec.backend, "import_graph", no_import)
    second = step(torch.compile(model, backend="fusec", options={"pipeline": spec}))
    torch.testing.assert_close(first, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(second, want, rtol=1e-5, atol=1e-5)
