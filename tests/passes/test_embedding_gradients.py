"""embedding-gradients: an embedding's weight gradient as (idx == idx.T) @ grad and a row write, against torch's
embedding_dense_backward (the reference interpreter runs the graph before the pass) on random gradients and
indices with repeated words, a padding word, a symbolic token count."""

import pytest
import torch

from fusec.dialects import fusec as F
from fusec.passes.embedding_gradients import EmbeddingGradients
from fusec.pipeline import default_pipeline_spec, run_pipeline
from fusec.registry import make_context
from fusec.runtime import compile_module, interpreter
from fusec.testing import assert_same_results, parse


def graph(dtype: str, padding: int, rows: int = 50) -> str:
    g, i, w = f"!fusec.tensor<[2, s0, 8], {dtype}>", "!fusec.tensor<[2, s0], i64>", f"!fusec.tensor<[{rows}, 8], {dtype}>"
    return (f'builtin.module {{\n  fusec.graph @g(%grad : {g}, %idx : {i}) -> ({w}) symbols(s0 in [1, 64]) {{\n'
            f'    %w = fusec.extern "aten.embedding_dense_backward.default"(%grad, %idx, {rows}, {padding}, false) : '
            f'({g}, {i}) -> {w}\n    fusec.output %w : {w}\n  }}\n}}')


def _calls(module) -> list[str]:
    return [op.target.data for op in module.walk() if isinstance(op, F.ExternOp)]


ON = default_pipeline_spec().replace("embedding-gradients,", "embedding-gradients{when=always},")
assert ON != default_pipeline_spec()


@pytest.mark.parametrize("padding", [-1, 3])
@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_the_equality_matmul_gives_torchs_gradient(dtype, padding):
    text = graph(dtype, padding)
    reference, module = parse(text), parse(text)
    run_pipeline(make_context(), module, ON)
    assert "fusec.embedding_rows.default" in _calls(module) and "aten.embedding_dense_backward.default" not in _calls(module)
    compiled = compile_module(module, {"s0": 16})
    torch_dtype = {"bf16": torch.bfloat16, "f16": torch.float16}[dtype]
    for tokens in (1, 16, 37):
        g = torch.Generator().manual_seed(tokens)
        grad = torch.randn(2, tokens, 8, generator=g).to(torch_dtype)
        idx = torch.randint(0, 6, (2, tokens), generator=g)  # 6 of 50 words: every word repeats, 3 included
        inputs = [grad, idx]
        got = compiled(inputs)
        assert_same_results(interpreter.run(reference, inputs), got, rtol=2e-2, atol=2e-2)
        exact = torch.zeros(50, 8, dtype=torch.float64).index_add_(0, idx.flatten(), grad.double().flatten(0, 1))
        if padding >= 0:
            exact[padding] = 0
        assert ((got[0].double() - exact).norm() / exact.norm()).item() < 1e-2  # fp32 sums, one rounding


def test_an_expanded_index_is_copied_contiguous_first():
    """BERT's token-type ids: one row expanded over the batch (strides [0, 1]); the position ids a slice of a longer
    buffer (strides [64, 1]): each is copied contiguous (T indices) before the reshape."""
    i, ib = "!fusec.tensor<[2, 16], i64, strides [0, 1]>", "!fusec.tensor<[1, 16], i64>"
    g, w = "!fusec.tensor<[2, 16, 8], bf16>", "!fusec.tensor<[3, 8], bf16>"
    text = (f'builtin.module {{\n  fusec.graph @g(%grad : {g}, %ids : {ib}) -> ({w}) {{\n'
            f'    %idx = fusec.expand %ids : {ib} -> {i}\n'
            f'    %w = fusec.extern "aten.embedding_dense_backward.default"(%grad, %idx, 3, -1, false) : ({g}, {i}) -> {w}\n'
            f'    fusec.output %w : {w}\n  }}\n}}')
    reference, module = parse(text), parse(text)
    run_pipeline(make_context(), module, ON)
    assert "fusec.embedding_rows.default" in _calls(module)
    compiled = compile_module(module, {})
    g_ = torch.Generator().manual_seed(0)
    inputs = [torch.randn(2, 16, 8, generator=g_).bfloat16(), torch.randint(0, 3, (1, 16), generator=g_)]
    assert_same_results(interpreter.run(reference, inputs), compiled(inputs), rtol=2e-2, atol=2e-2)


def test_what_it_leaves_to_torch_says_why():
    from fusec.base import remarks

    for text, code in ((graph("f32", -1), "not-16-bit"),
                       (graph("bf16", -1).replace("50, -1, false", "50, -1, true"), "scaled-by-frequency")):
        module = parse(text)
        with remarks.collect() as got:
            EmbeddingGradients(when="always").apply(make_context(), module)
        assert _calls(module) == ["aten.embedding_dense_backward.default"]
        assert [r.code for r in got.remarks] == [code], got.text()
    module = parse(graph("bf16", -1))
    with remarks.collect() as got:
        EmbeddingGradients(when="always", max_gflop=1e-5).apply(make_context(), module)  # 128 tokens x 8: 2.6e-4
    assert [r.code for r in got.remarks] == ["too-many-tokens"] and _calls(module) == ["aten.embedding_dense_backward.default"]


def test_only_accelerator_graphs_by_default_and_bad_options():
    module = parse(graph("bf16", -1))  # no device mark: counts as unmarked
    EmbeddingGradients().apply(make_context(), module)
    assert _calls(module) == ["aten.embedding_dense_backward.default"]
    cuda = parse(graph("bf16", -1).replace("symbols(s0 in [1, 64])", 'symbols(s0 in [1, 64]) attributes {fusec.device = "cuda"}'))
    EmbeddingGradients().apply(make_context(), cuda)
    assert "fusec.embedding_rows.default" in _calls(cuda)
    with pytest.raises(ValueError, match="max-gflop must be positive"):
        EmbeddingGradients(max_gflop=0)
    with pytest.raises(ValueError, match="when must be one of"):
        EmbeddingGradients(when="gpu")
