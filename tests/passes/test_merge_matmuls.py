"""merge-matmuls: projections of one input, weight gradients from one input and summed products as one matmul, against
the reference interpreter on the graph before the pass (symbolic token counts) and against eager autograd."""

import pytest
import torch

from fusec.dialects import fusec as F
from fusec.passes.merge_matmuls import MergeMatmuls
from fusec.pipeline import default_pipeline_spec, run_pipeline
from fusec.registry import make_context
from fusec.runtime import compile_module, interpreter
from fusec.testing import assert_same_results, parse

ON = default_pipeline_spec().replace("merge-matmuls,", "merge-matmuls{when=always},")
assert ON != default_pipeline_spec()

T = "!fusec.tensor<[s0, {}], f32>"
# A layer's forward projections (two with row biases, through w.t()) and its backward's input and weight gradients.
GRAPH = f"""
builtin.module {{
  fusec.graph @g(%x : {T.format(16)}, %wq : !fusec.tensor<[16, 16], f32>, %wk : !fusec.tensor<[8, 16], f32>, %bq : !fusec.tensor<[16], f32>, %bk : !fusec.tensor<[8], f32>, %dq : {T.format(16)}, %dk : {T.format(8)}) -> ({T.format(16)}, {T.format(8)}, !fusec.tensor<[16, 16], f32>, !fusec.tensor<[8, 16], f32>, {T.format(16)}) symbols(s0 in [1, 64]) {{
    %tq = fusec.permute %wq [1, 0] : !fusec.tensor<[16, 16], f32> -> !fusec.tensor<[16, 16], f32, strides [1, 16]>
    %q = fusec.extern "aten.mm.default"(%x, %tq) : ({T.format(16)}, !fusec.tensor<[16, 16], f32, strides [1, 16]>) -> {T.format(16)}
    %qb = fusec.pointwise "add" %q, %bq : ({T.format(16)}, !fusec.tensor<[16], f32>) -> {T.format(16)}
    %tk = fusec.permute %wk [1, 0] : !fusec.tensor<[8, 16], f32> -> !fusec.tensor<[16, 8], f32, strides [1, 16]>
    %k = fusec.extern "aten.mm.default"(%x, %tk) : ({T.format(16)}, !fusec.tensor<[16, 8], f32, strides [1, 16]>) -> {T.format(8)}
    %kb = fusec.pointwise "add" %k, %bk : ({T.format(8)}, !fusec.tensor<[8], f32>) -> {T.format(8)}
    %kr = fusec.pointwise "tanh" %kb : ({T.format(8)}) -> {T.format(8)}
    %dqt = fusec.permute %dq [1, 0] : {T.format(16)} -> !fusec.tensor<[16, s0], f32, strides [1, 16]>
    %gq = fusec.extern "aten.mm.default"(%dqt, %x) : (!fusec.tensor<[16, s0], f32, strides [1, 16]>, {T.format(16)}) -> !fusec.tensor<[16, 16], f32>
    %dkt = fusec.permute %dk [1, 0] : {T.format(8)} -> !fusec.tensor<[8, s0], f32, strides [1, 8]>
    %gk = fusec.extern "aten.mm.default"(%dkt, %x) : (!fusec.tensor<[8, s0], f32, strides [1, 8]>, {T.format(16)}) -> !fusec.tensor<[8, 16], f32>
    %xq = fusec.extern "aten.mm.default"(%dq, %wq) : ({T.format(16)}, !fusec.tensor<[16, 16], f32>) -> {T.format(16)}
    %xk = fusec.extern "aten.mm.default"(%dk, %wk) : ({T.format(8)}, !fusec.tensor<[8, 16], f32>) -> {T.format(16)}
    %dx = fusec.pointwise "add" %xq, %xk : ({T.format(16)}, {T.format(16)}) -> {T.format(16)}
    fusec.output %qb, %kr, %gq, %gk, %dx : {T.format(16)}, {T.format(8)}, !fusec.tensor<[16, 16], f32>, !fusec.tensor<[8, 16], f32>, {T.format(16)}
  }}
}}
"""


def _matmuls(module) -> int:
    return sum(1 for op in module.walk() if isinstance(op, F.ExternOp) and "mm" in op.target.data)


def test_merged_graph_computes_what_the_graph_did():
    reference, module = parse(GRAPH), parse(GRAPH)
    got = run_pipeline(make_context(), module, ON)
    merged = sorted(r.message.split(" (")[0] for r in got.remarks if r.code == "merged-matmuls")
    assert merged == ["2 matmuls with one left operand and row biases", "2 matmuls with one right operand",
                      "2 matmuls with summed products"], got.text()
    assert _matmuls(reference) == 6 and _matmuls(module) == 3
    compiled = compile_module(module, {"s0": 16})
    for tokens in (1, 16, 37):
        g = torch.Generator().manual_seed(tokens)
        shapes = [(tokens, 16), (16, 16), (8, 16), (16,), (8,), (tokens, 16), (tokens, 8)]
        inputs = [torch.randn(*s, generator=g) for s in shapes]
        assert_same_results(interpreter.run(reference, inputs), compiled(inputs), rtol=1e-5, atol=1e-5)


class _Layer(torch.nn.Module):
    """Llama's shapes in small: query, key and value projections of one input (no biases), a gated MLP."""

    def __init__(self, d: int = 32):
        super().__init__()
        self.q, self.k, self.v = (torch.nn.Linear(d, n, bias=False) for n in (d, d // 2, d // 2))
        self.gate, self.up = torch.nn.Linear(d, 48, bias=False), torch.nn.Linear(d, 48, bias=False)
        self.down = torch.nn.Linear(48, d, bias=False)

    def forward(self, x):
        q, k, v = self.q(x), self.k(x), self.v(x)
        h = x + q * torch.cat([k, v], -1).sigmoid()
        return h + self.down(torch.nn.functional.silu(self.gate(h)) * self.up(h))


@pytest.mark.parametrize("dynamic", [False, True])
def test_training_step_matches_eager(dynamic, tmp_path):
    torch._dynamo.reset()
    torch.manual_seed(0)
    eager = _Layer()
    compiled_layer = _Layer()
    compiled_layer.load_state_dict(eager.state_dict())
    compiled = torch.compile(compiled_layer, backend="fusec", dynamic=dynamic, options={"pipeline": ON, "dump_dir": str(tmp_path)})
    for tokens in (12, 20) if dynamic else (12,):
        x = torch.randn(2, tokens, 32, generator=torch.Generator().manual_seed(tokens))
        x_eager, x_compiled = x.clone().requires_grad_(), x.clone().requires_grad_()  # the input's gradient: sums
        for m in (eager, compiled_layer):
            m.zero_grad(set_to_none=True)
        want, got = eager(x_eager), compiled(x_compiled)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        (want ** 2).sum().backward()
        (got ** 2).sum().backward()
        torch.testing.assert_close(x_compiled.grad, x_eager.grad, rtol=1e-4, atol=1e-5)
        for (name, p), (_, c) in zip(eager.named_parameters(), compiled_layer.named_parameters(), strict=True):
            torch.testing.assert_close(c.grad, p.grad, rtol=1e-4, atol=1e-5, msg=name)
    said = "".join(p.read_text() for p in tmp_path.rglob("remarks.txt"))
    for kind in ("one left operand", "one right operand", "summed products"):
        assert f"merged-matmuls: 3 matmuls with {kind}" in said, said  # q, k, v in the forward, backward
        assert f"merged-matmuls: 2 matmuls with {kind}" in said, said  # gate and up


def test_only_accelerator_graphs_by_default_and_bad_options():
    module = parse(GRAPH)  # no device mark
    MergeMatmuls().apply(make_context(), module)
    assert _matmuls(module) == 6
    cuda = parse(GRAPH.replace("symbols(s0 in [1, 64])", 'symbols(s0 in [1, 64]) attributes {fusec.device = "cuda"}'))
    MergeMatmuls(size_hints=("s0=16",)).apply(make_context(), cuda)
    assert _matmuls(cuda) == 3
    with pytest.raises(ValueError, match="when must be one of"):
        MergeMatmuls(when="gpu")
    with pytest.raises(ValueError):
        MergeMatmuls(size_hints=("s0",))
