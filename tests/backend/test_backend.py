"""torch.compile(backend="fusec") end to end on CPU: results, gradients, options, dumps."""

import re
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as Fn

from fusec.backend import BackendOptionError, BackendOptions, fusec_backend
from fusec.pipeline import PipelineError, module_text, parse_module, run_pipeline
from fusec.registry import make_context

EXECUTE = ["interpret", "triton"]


pytestmark = pytest.mark.usefixtures("fresh_dynamo")  # tests/conftest.py


def randn(*shape, seed=0, requires_grad=False):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).requires_grad_(requires_grad)


def compiled(fn, execute=None, dynamic=False, **options):
    if execute is not None:
        options["execute"] = execute
    return torch.compile(fn, backend="fusec", dynamic=dynamic, options=options)


def assert_close_all(got, want):
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)


def seed(t1, t2, t3, t4):
    return t1.sum(1), t2.max(1).values, t3.min(1).values, t4.sum(1)


def test_fusec_is_a_registered_backend():
    from torch._dynamo.backends.registry import lookup_backend

    assert "fusec" in torch._dynamo.list_backends()
    assert lookup_backend("fusec") is fusec_backend


@pytest.mark.parametrize("execute", EXECUTE)
@pytest.mark.parametrize("dynamic", [False, True])
def test_seed_example(execute, dynamic, tmp_path):
    fn = compiled(seed, execute, dynamic, dump_dir=str(tmp_path))
    for rows, cols in [(8, 5), (3, 11)] if dynamic else [(8, 5)]:
        inputs = [randn(rows, cols, seed=i) for i in range(4)]
        assert_close_all(fn(*inputs), seed(*inputs))
    graphs = sorted(p.name for p in tmp_path.iterdir())
    assert len(graphs) == 1, graphs  # with dynamic=True the second size reuses the first graph
    imported = (tmp_path / graphs[0] / "imported.mlir").read_text()
    assert ("[s" in imported) == dynamic


@pytest.mark.parametrize("module", [
    nn.LayerNorm(12), nn.Softmax(-1), nn.GELU(), nn.GELU("tanh"), nn.SiLU(),
], ids=["layer_norm", "softmax", "gelu", "gelu_tanh", "silu"])
def test_modules_forward(module):
    torch.manual_seed(0)
    x = randn(6, 12)
    with torch.no_grad():
        torch.testing.assert_close(compiled(module)(x), module(x))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up, self.norm, self.down = nn.Linear(10, 16), nn.LayerNorm(16), nn.Linear(16, 4)

    def forward(self, x):
        return self.down(self.norm(Fn.gelu(self.up(x))))


def _grads(model, fn, x, y):
    model.zero_grad()
    loss = fn(model, x, y)
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in model.parameters()]


def _loss(model, x, y):
    return Fn.cross_entropy(model(x), y)


@pytest.mark.parametrize("execute, dynamic", [("triton", False), ("interpret", True)])
def test_mlp_loss_backward_matches_eager(execute, dynamic):
    torch.manual_seed(0)
    model = MLP()
    fn = compiled(_loss, execute, dynamic)
    for batch in [8, 5] if dynamic else [8]:
        x, y = randn(batch, 10, seed=1), torch.randint(0, 4, (batch,), generator=torch.Generator().manual_seed(2))
        want_loss, want = _grads(model, _loss, x, y)
        got_loss, got = _grads(model, fn, x, y)
        torch.testing.assert_close(got_loss, want_loss)
        assert_close_all(got, want)


@pytest.mark.parametrize("execute", EXECUTE)
def test_backward_with_sizes_only_in_symints(execute):
    # d(x.sum())/dx: the backward graph has a 0-d tangent and the sizes as SymInts.
    fn = compiled(lambda x: (x * 3).sum(), execute, dynamic=True)
    for shape in [(4, 6), (3, 2)]:
        x = randn(*shape, requires_grad=True)
        fn(x).backward()
        torch.testing.assert_close(x.grad, torch.full(shape, 3.0))


def test_dump_dir_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSEC_DUMP_DIR", str(tmp_path))
    x = randn(4, 6, requires_grad=True)
    compiled(lambda x: (x.sin() * x).sum(), "triton")(x).backward()
    folders = sorted(p.name for p in tmp_path.iterdir())
    assert [re.sub(r"_\d+", "", f) for f in folders] == ["backward", "forward"], folders
    forward = tmp_path / next(f for f in folders if f.startswith("forward"))
    files = {p.name for p in forward.iterdir()}
    assert {"fx_graph.py", "imported.mlir", "pipeline.txt", "remarks.txt", "00-input.mlir", "01-channels-last.mlir", "02-attention-layouts.mlir", "03-merge-matmuls.mlir", "04-pad-matmuls.mlir", "05-bias-epilogues.mlir", "06-activation-epilogues.mlir", "07-embedding-gradients.mlir", "08-sink-gathers.mlir", "09-form-kernels.mlir", "launcher.py"} <= files
    assert any(f.startswith("fusec_") and f.endswith(".py") for f in files)  # a kernel's Triton source
    assert 'loc("sin' in (forward / "imported.mlir").read_text()
    assert "aten.sin.default" in (forward / "fx_graph.py").read_text()


def test_dump_replays_with_the_recorded_pipeline(tmp_path):
    x = randn(5, 7)
    compiled(lambda x: x.softmax(-1), "interpret", dump_dir=str(tmp_path))(x)
    (folder,) = tmp_path.iterdir()
    spec = (folder / "pipeline.txt").read_text().strip()
    steps = sorted(folder.glob("[0-9][0-9]-*.mlir"))
    assert len(steps) == 1 + len(spec.split(","))
    module = parse_module(make_context(), steps[0].read_text())
    run_pipeline(make_context(), module, spec)
    assert module_text(module) == steps[-1].read_text()


def test_pipeline_option_spec_and_file(tmp_path):
    x = randn(4, 6)
    fn = lambda x: (x * 2).exp()  # noqa: E731
    compiled(fn, "interpret", pipeline="form-kernels", dump_dir=str(tmp_path / "spec"))(x)
    assert sorted(p.name for p in next((tmp_path / "spec").iterdir()).glob("*.mlir")) == [
        "00-input.mlir", "01-form-kernels.mlir", "final.mlir", "imported.mlir"]
    torch._dynamo.reset()
    pipeline_file = tmp_path / "mine.pipeline"
    pipeline_file.write_text("# just the baseline\nform-kernels\ndce\n")
    torch.testing.assert_close(compiled(fn, "interpret", pipeline=str(pipeline_file), dump_dir=str(tmp_path / "file"))(x), fn(x))
    assert (next((tmp_path / "file").iterdir()) / "pipeline.txt").read_text() == "form-kernels,dce\n"


def test_extern_fallback_runs_and_is_remarked(tmp_path):
    fn = lambda x: torch.cumsum(x, 1).relu()  # noqa: E731
    x = randn(3, 7)
    torch.testing.assert_close(compiled(fn, "triton", dump_dir=str(tmp_path))(x), fn(x))
    (folder,) = tmp_path.iterdir()
    assert "importer: extern-fallback: aten.cumsum.default" in (folder / "remarks.txt").read_text()


def test_a_remark_collection_around_the_call_gets_every_graphs_remarks():
    """``remarks.collect()`` around a torch.compile'd call: the backend's own collections sit inside it, and once
    kept the importer's and the passes' remarks to themselves (the caller's log stayed empty)."""
    from fusec.base import remarks

    fn = lambda x: torch.cumsum(x, 1).relu() + x.sum(1, keepdim=True)  # noqa: E731
    x = randn(3, 7)
    with remarks.collect() as log:
        torch.testing.assert_close(compiled(fn, "triton")(x), fn(x))
    by_pass = {r.pass_name for r in log.remarks}
    assert "importer" in by_pass and "reuse-buffers" in by_pass, by_pass
    assert any(r.code == "extern-fallback" and "aten.cumsum.default" in r.message for r in log.remarks)
    with remarks.collect() as view_log, pytest.warns(UserWarning, match="runs with torch"):  # a graph left to torch
        compiled(lambda z: torch.view_as_real(z * 2), "interpret")(torch.randn(3, dtype=torch.complex64))
    (why,) = [r for r in view_log.remarks if r.code == "graph-runs-with-torch"]
    assert "complex64" in why.message


def test_graph_the_ir_cannot_express_runs_eagerly_with_a_warning():
    fn = lambda x: torch.view_as_real(x * 2)  # noqa: E731
    x = torch.randn(3, dtype=torch.complex64, generator=torch.Generator().manual_seed(0))
    with pytest.warns(UserWarning, match="fusec: graph .* runs with torch .*complex64"):
        out = compiled(fn, "interpret")(x)
    torch.testing.assert_close(out, fn(x))


@pytest.mark.parametrize("options, message", [
    ({"bogus": 1}, "unknown option(s) 'bogus'"),
    ({"execute": "cuda"}, "'execute' must be one of 'triton', 'interpret'"),
    ({"pipeline": ["form-kernels"]}, "'pipeline' must be a string"),
])
def test_bad_options_give_one_clear_message(options, message):
    gm = torch.fx.symbolic_trace(lambda x: x + 1)
    with pytest.raises(BackendOptionError) as err:
        fusec_backend(gm, [torch.randn(2)], options=options)
    assert message in str(err.value)


def test_bad_pipeline_fails_before_tracing():
    gm = torch.fx.symbolic_trace(lambda x: x + 1)
    with pytest.raises(PipelineError, match="unknown pass 'form-kernel'"):
        fusec_backend(gm, [torch.randn(2)], options={"pipeline": "form-kernel"})


def test_options_default_to_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSEC_DUMP_DIR", str(tmp_path))
    assert BackendOptions.from_dict(None).dump_dir == tmp_path
    assert BackendOptions.from_dict({"dump_dir": str(tmp_path / "x")}).dump_dir == tmp_path / "x"
    assert BackendOptions.from_dict({}).execute == "triton"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert BackendOptions.from_dict({}).pipeline_spec().startswith("channels-last,attention-layouts,merge-matmuls,pad-matmuls,bias-epilogues,activation-epilogues,embedding-gradients,sink-gathers,form-kernels")


def test_the_collector_skips_older_objects_only_while_a_graph_compiles(monkeypatch):
    """gc.freeze during compile_graph (full collections would walk the whole process again and again), and every
    object is the collector's again afterwards, the compile failing or not."""
    import gc

    import fusec.backend as backend

    seen = []
    inner = backend._compile_graph

    def watched(*args, **kwargs):
        seen.append(gc.get_freeze_count())
        return inner(*args, **kwargs)

    monkeypatch.setattr(backend, "_compile_graph", watched)
    torch._dynamo.reset()
    x = torch.randn(8, 5, generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(torch.compile(lambda t: (t * 2).softmax(-1), backend="fusec")(x), (x * 2).softmax(-1))
    assert seen and all(n > 0 for n in seen) and gc.get_freeze_count() == 0
    monkeypatch.setattr(backend, "_compile_graph", lambda *a, **k: 1 / 0)
    torch._dynamo.reset()
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed, match="ZeroDivisionError"):
        torch.compile(lambda t: t.exp(), backend="fusec")(x)
    assert gc.get_freeze_count() == 0
    torch._dynamo.reset()


@pytest.mark.parametrize("train", [False, True], ids=["inference", "training"])
def test_parameters_are_trusted_aligned_and_the_other_inputs_are_checked(tmp_path, train):
    """A module's parameters (AOTAutograd's static inputs, aligned when traced) are marked ``fusec.aligned_inputs``
    on the forward or inference graph and its launcher checks only the other inputs' alignment; a backward's saved
    tensors stay checked.  A misaligned user input is still copied, and results equal eager's."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 12), nn.LayerNorm(12))
    x = randn(5 * 12 + 1)[1:].view(5, 12)  # 4 bytes past an aligned start
    with torch.set_grad_enabled(train):
        got = compiled(model, "triton", dump_dir=str(tmp_path))(x)
        want = model(x)
    torch.testing.assert_close(got, want)
    if train:  # the backward compiles at its first call
        got.square().sum().backward()
        grads = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        want.square().sum().backward()
        for g, w in zip(grads, [p.grad for p in model.parameters()], strict=True):
            torch.testing.assert_close(g, w)
    graphs = {re.sub(r"_\d+", "", p.name): p for p in tmp_path.iterdir()}
    main = graphs["forward" if train else "inference"]
    imported = (main / "imported.mlir").read_text()
    launcher = (main / "launcher.py").read_text()
    trusted = re.search(r"fusec\.aligned_inputs = array<i64: ([\d, ]+)>", imported)
    assert trusted is not None, imported[:2000]
    trusted = [int(i) for i in trusted.group(1).split(", ")]
    assert len(trusted) == 4  # the linear's and the norm's weight and bias
    checked = [int(i) for i in re.findall(r"if arg(\d+)\.data_ptr\(\) % 16:", launcher)]
    assert checked and not set(checked) & set(trusted), (checked, trusted)
    if train:
        assert "fusec.aligned_inputs" not in (graphs["backward"] / "imported.mlir").read_text()
