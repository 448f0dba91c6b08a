"""CUDA-graph replay (``options={"cudagraphs": True}``): what keeps a replay correct.

On the CPU the recorder is replaced by one that "replays" by running the graph again over the
recording's own inputs and writing into the outputs it recorded, which is what a CUDA graph does:
every rule of ``CudaGraphed`` (copied and pinned inputs, held outputs, aliases, small outputs,
one recording per shape) is checked here against that model.  The GPU tests at the end record real
CUDA graphs through ``backend="fusec"``: a training loop's gradients and an inference loop's outputs
against eager, with inputs moving between calls.
"""

import warnings

import pytest
import torch

from fusec.backend import BackendOptionError, BackendOptions
from fusec.runtime.cudagraphs import SMALL_OUTPUT_BYTES, CudaGraphed

gpu = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


class RerunRecorder:
    """A CUDA graph's semantics on the CPU: a replay reads the recording's buffers and the pinned inputs (those of
    the call, which ``CudaGraphed`` checked are where they were recorded), and overwrites the recorded outputs."""

    def unsupported(self, inputs, outputs):
        return None

    def record(self, call, args, pinned):
        outputs = call(list(args))
        owned = [None if i in pinned else a for i, a in enumerate(args)]  # a graph holds no pinned tensor alive

        def replay(inputs):
            now = [inputs[i] if a is None else a for i, a in enumerate(owned)]
            for old, new in zip(outputs, call(now), strict=True):
                old.copy_(new)

        return replay, outputs


def graphed(fn, **kwargs):
    return CudaGraphed(lambda xs: list(fn(*xs)), "test", recorder=RerunRecorder(), **kwargs)


def rand(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


BIG = (64, 512)  # 128 KiB of fp32: above SMALL_OUTPUT_BYTES, so it stays in the recording's pool
assert BIG[0] * BIG[1] * 4 > SMALL_OUTPUT_BYTES


def test_replays_follow_new_inputs_at_new_addresses():
    weight = rand(*BIG, seed=0)
    g = graphed(lambda x, w: (x * 2 + w,), static=frozenset({1}))
    for step in range(5):
        x = rand(*BIG, seed=10 + step)  # a new tensor, a new address, new values every call
        (out,) = g([x, weight])
        torch.testing.assert_close(out, x * 2 + weight)
        del out
    assert g.stats == {"plain": 1, "recorded": 1, "replayed": 3}


def test_copied_inputs_may_come_in_any_layout():
    g = graphed(lambda x: (x * 2,), shapes_vary=False)
    for s in range(4):
        x = rand(*BIG, seed=s)
        x = x.t().contiguous().t() if s % 2 else x  # column-major on odd calls: the copy into the buffer takes it
        torch.testing.assert_close(g([x])[0], x * 2)
    assert g.stats == {"plain": 1, "recorded": 1, "replayed": 2}


def test_a_held_output_is_never_overwritten():
    g = graphed(lambda x: (x.exp(),))
    first = g([rand(*BIG, seed=1)])[0]  # plain
    kept = g([rand(*BIG, seed=2)])[0]  # recorded: pool memory, now held
    want = kept.clone()
    again = g([rand(*BIG, seed=3)])[0]  # the recording is held: a second one
    torch.testing.assert_close(kept, want)
    torch.testing.assert_close(again, rand(*BIG, seed=3).exp())
    assert g.stats["recorded"] == 2
    del kept, first
    g([rand(*BIG, seed=4)])  # the first recording is free again
    assert g.stats == {"plain": 1, "recorded": 2, "replayed": 1}


def test_views_of_a_held_output_hold_it_too():
    g = graphed(lambda x: (x + 1,))
    g([rand(*BIG, seed=1)])
    view = g([rand(*BIG, seed=2)])[0][3:5]  # only a slice survives the statement
    want = view.clone()
    g([rand(*BIG, seed=3)])
    torch.testing.assert_close(view, want)
    assert g.stats["recorded"] == 2


def test_past_max_instances_calls_run_without_a_graph_and_say_so_once():
    g = graphed(lambda x: (x * 3,), max_instances=2)
    held = [g([rand(*BIG, seed=s)])[0] for s in range(3)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        held += [g([rand(*BIG, seed=s)])[0] for s in range(3, 6)]
    for s, out in enumerate(held):
        torch.testing.assert_close(out, rand(*BIG, seed=s) * 3)
    assert g.stats == {"plain": 4, "recorded": 2, "replayed": 0}
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and "2 recordings of this shape are all held" in messages[0]


def test_a_moved_static_input_gets_its_own_recording():
    g = graphed(lambda x, w: (x @ w,), static=frozenset({1}))
    x = rand(8, 8, seed=0)
    w1, w2 = rand(8, 8, seed=1), rand(8, 8, seed=2)
    for w in (w1, w1, w2, w1, w2):
        torch.testing.assert_close(g([x, w])[0], x @ w)
    assert g.stats == {"plain": 1, "recorded": 2, "replayed": 2}


def test_parameters_are_read_in_place_even_unmarked():
    w = torch.nn.Parameter(rand(8, 8, seed=1))
    g = graphed(lambda x, w: (x + w,))
    for s in range(3):
        with torch.no_grad():
            w.mul_(2)  # in place: the recording sees the update without a copy
        x = rand(8, 8, seed=s)
        torch.testing.assert_close(g([x, w])[0], x + w.detach())
    recording = g._shapes[next(iter(g._shapes))][0]
    assert recording.pinned_at == [1] and recording.copied_at == [0]


def test_an_output_aliasing_an_input_is_a_view_of_the_callers_tensor():
    g = graphed(lambda x: (x.view(-1)[2:], x.sum()))
    for s in range(3):
        x = rand(*BIG, seed=s)
        flat, total = g([x])
        assert flat.data_ptr() == x.data_ptr() + 2 * x.element_size()
        torch.testing.assert_close(total, x.sum())


def test_small_visible_outputs_are_copies_and_saved_ones_stay_in_the_pool():
    g = graphed(lambda x: (x.sum(), x.sum(1), x * 2), visible=frozenset({0}))
    g([rand(*BIG, seed=0)])
    loss, rows, doubled = g([rand(*BIG, seed=1)])
    recording = g._shapes[next(iter(g._shapes))][0]
    pooled = {t.untyped_storage().data_ptr() for t in recording.outputs}
    assert loss.untyped_storage().data_ptr() not in pooled  # small and visible: a copy, holding nothing
    assert rows.untyped_storage().data_ptr() in pooled  # small but saved for a backward: read there in place
    assert doubled.untyped_storage().data_ptr() in pooled
    del rows, doubled
    held_loss = loss
    g([rand(*BIG, seed=2)])  # the loss of the last step, still held, does not pin the recording
    assert g.stats["recorded"] == 1 and g.stats["replayed"] == 1
    torch.testing.assert_close(held_loss, rand(*BIG, seed=1).sum())


def test_each_shape_has_its_own_recordings():
    g = graphed(lambda x: (x.softmax(-1),))
    for s in range(6):
        x = rand(4 + 4 * (s % 2), 300, seed=s)
        torch.testing.assert_close(g([x])[0], x.softmax(-1))
    assert g.stats == {"plain": 2, "recorded": 2, "replayed": 2}
    assert len(g._shapes) == 2


def test_shapes_past_max_shapes_run_without_graphs():
    g = graphed(lambda x: (x + 1,), max_shapes=2)
    with pytest.warns(UserWarning, match="more than 2 input shapes"):
        for rows in (3, 4, 5, 3, 4, 5):
            x = rand(rows, 8, seed=rows)
            torch.testing.assert_close(g([x])[0], x + 1)
    assert g.stats == {"plain": 4, "recorded": 2, "replayed": 0}


def test_a_failed_recording_runs_the_graph_and_says_why():
    class Failing(RerunRecorder):
        def record(self, call, args, pinned):
            raise RuntimeError("operation not permitted when stream is capturing")

    g = CudaGraphed(lambda xs: [xs[0] + 1], "g", recorder=Failing())
    with pytest.warns(UserWarning, match="graph g runs without CUDA graphs: recording failed .*not permitted"):
        for s in range(3):
            x = rand(4, seed=s)
            torch.testing.assert_close(g([x])[0], x + 1)
    assert g.stats == {"plain": 3, "recorded": 0, "replayed": 0}


@pytest.fixture
def rerun_recordings(monkeypatch):
    """Every ``CudaGraphed`` the backend makes, recording with ``RerunRecorder`` (on the CPU)."""
    made = []
    init = CudaGraphed.__init__

    def keep(self, *args, **kwargs):
        init(self, *args, **{**kwargs, "recorder": RerunRecorder()})
        made.append(self)

    monkeypatch.setattr(CudaGraphed, "__init__", keep)
    return made


class Block(torch.nn.Module):
    def __init__(self, width=256):
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.up = torch.nn.Linear(width, 4 * width)
        self.down = torch.nn.Linear(4 * width, width)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


def test_a_training_loop_replays_forward_and_backward(fresh_dynamo, rerun_recordings):
    """Through AOTAutograd: the forward's saved tensors (its input among them) stay where the backward's recording
    reads them, the loss of the last step is held while the next runs, gradients match eager at every step."""
    torch.manual_seed(0)
    eager = torch.nn.Sequential(Block(32), Block(32))
    model = torch.nn.Sequential(Block(32), Block(32))
    model.load_state_dict(eager.state_dict())
    compiled = torch.compile(model, backend="fusec", options={"cudagraphs": True})
    losses = []
    for step in range(5):
        x = rand(16, 32, seed=step)
        for m in (eager, model):
            m.zero_grad(set_to_none=True)
        want = eager(x).square().mean()
        want.backward()
        losses.append(compiled(x).square().mean())
        losses[-1].backward()
        torch.testing.assert_close(losses[-1], want)
        for (name, p), q in zip(model.named_parameters(), eager.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad, msg=f"step {step}: {name}")
    stats = {g.name.split("_")[0]: g.stats for g in rerun_recordings}
    assert stats == {"forward": {"plain": 1, "recorded": 1, "replayed": 3},
                     "backward": {"plain": 1, "recorded": 1, "replayed": 3}}


def test_options_and_mode():
    assert BackendOptions.from_dict({"cudagraphs": True}).cudagraphs
    with pytest.raises(BackendOptionError, match="'cudagraphs' must be True or False"):
        BackendOptions.from_dict({"cudagraphs": "yes"})
    with pytest.raises(BackendOptionError, match="needs execute='triton'"):
        BackendOptions.from_dict({"cudagraphs": True, "execute": "interpret"})


def test_on_the_cpu_the_backend_runs_without_graphs_and_says_so(fresh_dynamo):
    def f(x, y):
        return (x * y).relu().sum(1)

    compiled = torch.compile(f, backend="fusec", mode="reduce-overhead")
    x, y = rand(16, 32, seed=0), rand(16, 32, seed=1)
    with pytest.warns(UserWarning, match="runs without CUDA graphs: it has tensors on cpu"):
        for _ in range(3):
            torch.testing.assert_close(compiled(x, y), f(x, y))


# ---------------------------------------------------------------- on the GPU, real CUDA graphs


@pytest.fixture
def recordings(monkeypatch):
    """Every ``CudaGraphed`` the backend makes, to read its counts."""
    made = []
    init = CudaGraphed.__init__

    def keep(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(CudaGraphed, "__init__", keep)
    return made


def totals(made):
    return {k: sum(g.stats[k] for g in made) for k in ("plain", "recorded", "replayed")}


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_training_steps_match_eager(fresh_dynamo, recordings, dtype, dynamic):
    torch.manual_seed(0)
    eager = torch.nn.Sequential(Block(), Block()).cuda().to(dtype)
    model = torch.nn.Sequential(Block(), Block()).cuda().to(dtype)
    model.load_state_dict(eager.state_dict())
    compiled = torch.compile(model, backend="fusec", options={"cudagraphs": True}, dynamic=dynamic)
    tol = {"atol": 2e-2, "rtol": 2e-2} if dtype == torch.bfloat16 else {"atol": 1e-4, "rtol": 1e-4}
    for step in range(5):
        rows = 64 if not dynamic or step < 3 else 48  # a second size under dynamic=True: its own recordings
        x = torch.randn(rows, 256, device="cuda", dtype=dtype, generator=torch.Generator("cuda").manual_seed(step))
        for m in (eager, model):
            m.zero_grad(set_to_none=True)
        want = eager(x).float().square().mean()
        want.backward()
        got = compiled(x).float().square().mean()
        got.backward()
        torch.testing.assert_close(got, want, **tol)
        for (name, p), q in zip(model.named_parameters(), eager.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad, **tol, msg=f"step {step}: {name}")
    counts = totals(recordings)
    assert counts["recorded"] >= 2 and counts["replayed"] >= 2, counts


def test_inference_with_held_outputs_and_moving_inputs(fresh_dynamo, recordings):
    torch.manual_seed(0)
    model = Block().cuda().eval()
    compiled = torch.compile(model, backend="fusec", mode="reduce-overhead")
    kept = []
    with torch.no_grad():
        for step in range(6):
            x = torch.randn(128, 256, device="cuda", generator=torch.Generator("cuda").manual_seed(step))
            kept.append((x, compiled(x)))  # the last two outputs held: neither may be overwritten by a replay
            if len(kept) > 2:
                kept.pop(0)
            for x, out in kept:
                torch.testing.assert_close(out, model(x), atol=1e-4, rtol=1e-4)
    assert totals(recordings) == {"plain": 1, "recorded": 3, "replayed": 2}


def test_dropout_draws_new_numbers_on_every_replay(fresh_dynamo, recordings):
    def f(x):
        return torch.nn.functional.dropout(x, 0.5, training=True) * 2

    compiled = torch.compile(f, backend="fusec", options={"cudagraphs": True})
    x = torch.ones(4096, device="cuda")
    masks = [(compiled(x) != 0).clone() for _ in range(5)]
    assert totals(recordings)["replayed"] >= 2
    assert all(0.4 < m.float().mean() < 0.6 for m in masks)
    assert not torch.equal(masks[3], masks[4])  # two replays, two masks


for _test in (test_training_steps_match_eager, test_inference_with_held_outputs_and_moving_inputs,
              test_dropout_draws_new_numbers_on_every_replay):
    for _mark in gpu:
        _mark(_test)
