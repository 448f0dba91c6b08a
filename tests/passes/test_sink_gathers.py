"""sink-gathers: a gather of a pointwise result becomes the pointwise op over gathered operands; same values."""

import pytest
import torch
import torch.nn.functional as Fn

import fusec  # noqa: F401  (registers the backend)
from fusec.base import remarks
from fusec.dialects import fusec as F
from fusec.passes.form_kernels import FormKernels
from fusec.passes.sink_gathers import SinkGathers
from fusec.registry import PASSES
from fusec.runtime import compile_module, interpreter
from fusec.testing import apply_passes, assert_same_results, graph_text, parse, print_ir, random_inputs, tensor_type


def sunk(text: str, sizes: list[dict[str, int]]):
    """The graph after sink-gathers (printed and parsed back), checked against the graph before on random
    inputs at each binding; returns (module, remarks)."""
    before = parse(text)
    after = parse(text)
    with remarks.collect() as log:
        apply_passes(after, SinkGathers())
    after = parse(print_ir(after))
    for i, env in enumerate(sizes):
        args = random_inputs(before, env, seed=i)
        assert_same_results(interpreter.run(before, args), interpreter.run(after, args))
    return after, [r for r in log.remarks if r.pass_name == "sink-gathers"]


def ops(module, cls) -> list:
    return [op for op in module.walk() if isinstance(op, cls)]


def test_log_softmax_at_the_targets_gathers_the_logits():
    t, k, i = tensor_type("s0, 7"), tensor_type("s0, 1"), tensor_type("s0, 1", "i64")
    text = graph_text(f"%x : {t}, %idx : {i}", k, f"""
    %m = fusec.reduce "max" %x dims [1] keepdim : {t} -> {k}
    %d = fusec.pointwise "sub" %x, %m : ({t}, {k}) -> {t}
    %e = fusec.pointwise "exp" %d : ({t}) -> {t}
    %s = fusec.reduce "sum" %e dims [1] keepdim : {t} -> {k}
    %l = fusec.pointwise "log" %s : ({k}) -> {k}
    %ls = fusec.pointwise "sub" %d, %l : ({t}, {k}) -> {t}
    %g = fusec.gather %ls[%idx] dim 1 : {t}, {i} -> {k}
    fusec.output %g : {k}""")
    module, notes = sunk(text, [{"s0": 5}, {"s0": 1}])
    (gather,) = ops(module, F.GatherOp)
    assert gather.input == F.find_graph(module).block.args[0]  # the graph's input
    assert [n.code for n in notes] == ["sunk-gather", "sunk-gather"]
    # the full-size log-softmax is gone: every remaining [s0, 7] pointwise op feeds the sum
    assert [op.fn.data for op in ops(module, F.PointwiseOp) if op.result.type == F.TensorType(["s0", 7], F.F32)] == \
        ["sub", "exp"]


def test_gather_along_dim_0_of_a_three_dim_chain():
    t, idx, out = tensor_type("6, 3, 4"), tensor_type("2, 3, 4", "i64"), tensor_type("2, 3, 4")
    text = graph_text(f"%a : {t}, %b : {t}, %i : {idx}", out, f"""
    %p = fusec.pointwise "mul" %a, %b : ({t}, {t}) -> {t}
    %q = fusec.pointwise "tanh" %p : ({t}) -> {t}
    %g = fusec.gather %q[%i] dim 0 : {t}, {idx} -> {out}
    fusec.output %g : {out}""", symbolic=False)
    module, notes = sunk(text, [{}])
    assert len(ops(module, F.GatherOp)) == 2 and len(notes) == 2


def test_an_index_with_fewer_rows_than_the_input_reads_its_first_rows():
    """Labels whose row count is another symbol than the logits' (dynamic=True gives a separate input its own
    symbols): torch.gather reads the input's first rows, and so do the sunk gathers, on sliced operands."""
    t, k, idx, out = tensor_type("s0, 33"), tensor_type("s0, 1"), tensor_type("s1, 1", "i64"), tensor_type("s1, 1")
    text = graph_text(f"%x : {t}, %idx : {idx}", out, f"""
    %m = fusec.reduce "max" %x dims [1] keepdim : {t} -> {k}
    %d = fusec.pointwise "sub" %x, %m : ({t}, {k}) -> {t}
    %g = fusec.gather %d[%idx] dim 1 : {t}, {idx} -> {out}
    fusec.output %g : {out}""").replace("symbols(s0 in [1, inf])", "symbols(s0 in [1, inf], s1 in [1, inf])")
    module, notes = sunk(text, [{"s0": 5, "s1": 5}, {"s0": 6, "s1": 4}, {"s0": 3, "s1": 1}])
    assert [n.code for n in notes] == ["sunk-gather"]
    assert ops(module, F.GatherOp)[0].input.owner.name == "fusec.slice"
    apply_passes(module, FormKernels())
    x, index = random_inputs(module, {"s0": 6, "s1": 4}, seed=5)
    (got,) = compile_module(module, {"s0": 6, "s1": 4})([x, index])
    torch.testing.assert_close(got, (x - x.amax(1, keepdim=True)).gather(1, index))


def test_iota_and_broadcasts_stay():
    t, b, k, i = tensor_type("4, 8"), tensor_type("1, 8"), tensor_type("4, 1"), tensor_type("4, 1", "i64")
    text = graph_text(f"%a : {t}, %b : {b}, %i : {i}", k, f"""
    %p = fusec.pointwise "add" %a, %b : ({t}, {b}) -> {t}
    %g = fusec.gather %p[%i] dim 1 : {t}, {i} -> {k}
    fusec.output %g : {k}""", symbolic=False)
    module, (note,) = sunk(text, [{}])
    assert note.code == "gather-kept" and "broadcasts along another dim" in note.message
    assert ops(module, F.GatherOp)[0].input.owner is ops(module, F.PointwiseOp)[0]


def test_registered():
    assert PASSES["sink-gathers"]() is SinkGathers


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("shape", ["rows", "batch-length"])
def test_cross_entropy_through_the_backend_matches_eager(dynamic, shape):
    """Forward and gradient of a bf16 cross-entropy (the loss of every language model) against eager; also as
    HuggingFace writes it: [batch, length, vocabulary] logits upcast, then viewed as rows."""
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 37, generator=g).bfloat16()
    logits = (logits if shape == "rows" else logits.view(2, 3, 37)).requires_grad_()
    target = torch.randint(0, 37, (6,), generator=g)
    target[2] = -100  # ignored

    def loss(x, t):
        return Fn.cross_entropy(x.float().view(-1, 37), t)

    compiled = torch.compile(loss, backend="fusec", dynamic=dynamic)
    out = compiled(logits, target)
    (grad,) = torch.autograd.grad(out, logits)
    ref = loss(logits, target)
    (ref_grad,) = torch.autograd.grad(ref, logits)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(grad, ref_grad)


def test_the_sunk_graph_runs_through_triton():
    t, k, i = tensor_type("5, 33"), tensor_type("5, 1"), tensor_type("5, 1", "i64")
    text = graph_text(f"%x : {t}, %idx : {i}", k, f"""
    %m = fusec.reduce "max" %x dims [1] keepdim : {t} -> {k}
    %d = fusec.pointwise "sub" %x, %m : ({t}, {k}) -> {t}
    %g = fusec.gather %d[%idx] dim 1 : {t}, {i} -> {k}
    fusec.output %g : {k}""", symbolic=False)
    module, _ = sunk(text, [{}])
    apply_passes(module, FormKernels())
    x, idx = random_inputs(module, {}, seed=3)
    (out,) = compile_module(module, {})([x, idx])
    torch.testing.assert_close(out, (x - x.amax(1, keepdim=True)).gather(1, idx))
