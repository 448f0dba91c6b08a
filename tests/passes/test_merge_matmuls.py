"""merge-matmuls: projections of one input, weight gradients from one input and summed products as one matmul, against
the reference interpreter on the graph before the pass (symbolic token counts) and against eager autograd."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fusec.dialects import fusec as F
from fusec.passes.merge_matmuls import MergeMatmuls
from fusec.pipeline import default_pipeline_spec, run_pipeline
from fusec.registry import make_context
from fusec.runtime import compile_module, interpreter
from fusec.testing import apply_passes, assert_same_results, graph_text, parse, random_inputs

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
    if not dynamic:  # the forward saves gate and up as column slices of one product: the backward reads them strided
        signature = next(tmp_path.rglob("backward_*/imported.mlir")).read_text().splitlines()[1]
        assert signature.count("!fusec.tensor<[24, 48], f32, strides [96, 1]>") == 2, signature
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


def _random_layer_graph(rnd) -> str:
    """Projections of one input (some with row biases), weight gradients from it, sums of input gradients, and
    pointwise readers in between, some feeding later matmuls: every merge's legality and rewriting, at random."""
    widths = [rnd.choice([4, 8, 12]) for _ in range(4)]
    args = ["%x : !fusec.tensor<[s0, 8], f32>"]
    args += [f"%w{i} : !fusec.tensor<[{n}, 8], f32>, %b{i} : !fusec.tensor<[{n}], f32>, %d{i} : !fusec.tensor<[s0, {n}], f32>"
             for i, n in enumerate(widths)]
    lines, outs, token_values = [], [], [("%x", 8)]
    sums: dict[int, list[str]] = {}
    for n in range(rnd.randint(4, 12)):
        i = rnd.randrange(4)
        w, width = f"%w{i}", widths[i]
        kind = rnd.random()
        if kind < 0.4:  # a projection of a token value of width 8, maybe biased, maybe read as a reshape
            a = rnd.choice([v for v, k in token_values if k == 8])
            lines.append(f"%t{n} = fusec.permute {w} [1, 0] : !fusec.tensor<[{width}, 8], f32> -> !fusec.tensor<[8, {width}], f32, strides [1, 8]>")
            lines.append(f'%p{n} = fusec.extern "aten.mm.default"({a}, %t{n}) : (!fusec.tensor<[s0, 8], f32>, !fusec.tensor<[8, {width}], f32, strides [1, 8]>) -> !fusec.tensor<[s0, {width}], f32>')
            value = f"%p{n}"
            if rnd.random() < 0.5:
                lines.append(f'%q{n} = fusec.pointwise "add" %p{n}, %b{i} : (!fusec.tensor<[s0, {width}], f32>, !fusec.tensor<[{width}], f32>) -> !fusec.tensor<[s0, {width}], f32>')
                value = f"%q{n}"
            if rnd.random() < 0.3:
                lines.append(f"%r{n} = fusec.reshape {value} : !fusec.tensor<[s0, {width}], f32> -> !fusec.tensor<[s0, {width // 4}, 4], f32>")
                outs.append((f"%r{n}", f"!fusec.tensor<[s0, {width // 4}, 4], f32>"))
            elif width == 8 and rnd.random() < 0.6:  # read by a pointwise op that later projections may read
                lines.append(f'%h{n} = fusec.pointwise "tanh" {value} : (!fusec.tensor<[s0, 8], f32>) -> !fusec.tensor<[s0, 8], f32>')
                token_values.append((f"%h{n}", 8))
                outs.append((f"%h{n}", "!fusec.tensor<[s0, 8], f32>"))
            else:
                outs.append((value, f"!fusec.tensor<[s0, {width}], f32>"))
        elif kind < 0.7:  # a weight gradient from %x
            lines.append(f"%u{n} = fusec.permute %d{i} [1, 0] : !fusec.tensor<[s0, {width}], f32> -> !fusec.tensor<[{width}, s0], f32, strides [1, {width}]>")
            lines.append(f'%g{n} = fusec.extern "aten.mm.default"(%u{n}, %x) : (!fusec.tensor<[{width}, s0], f32, strides [1, {width}]>, !fusec.tensor<[s0, 8], f32>) -> !fusec.tensor<[{width}, 8], f32>')
            outs.append((f"%g{n}", f"!fusec.tensor<[{width}, 8], f32>"))
        else:  # a term of an input gradient sum
            lines.append(f'%e{n} = fusec.extern "aten.mm.default"(%d{i}, {w}) : (!fusec.tensor<[s0, {width}], f32>, !fusec.tensor<[{width}, 8], f32>) -> !fusec.tensor<[s0, 8], f32>')
            sums.setdefault(rnd.randrange(2), []).append(f"%e{n}")
    for k, terms in sums.items():
        total = terms[0]
        for j, term in enumerate(terms[1:]):
            lines.append(f'%s{k}_{j} = fusec.pointwise "add" {total}, {term} : (!fusec.tensor<[s0, 8], f32>, !fusec.tensor<[s0, 8], f32>) -> !fusec.tensor<[s0, 8], f32>')
            total = f"%s{k}_{j}"
        outs.append((total, "!fusec.tensor<[s0, 8], f32>"))
    lines.append(f"fusec.output {', '.join(v for v, _ in outs)} : {', '.join(t for _, t in outs)}")
    return graph_text(", ".join(args), ", ".join(t for _, t in outs), "\n".join("    " + line for line in lines))


@settings(derandomize=True, max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_random_layers_keep_their_meaning(seed):
    import random

    text = _random_layer_graph(random.Random(seed))
    reference, module = parse(text), parse(text)
    apply_passes(module, MergeMatmuls(when="always", cost_rule=False))
    for tokens in (1, 5):
        inputs = random_inputs(reference, {"s0": tokens}, seed=tokens)
        assert_same_results(interpreter.run(reference, inputs), interpreter.run(module, inputs), rtol=1e-5, atol=1e-5)


def _saved_gate_up(reshaped: bool) -> str:
    """A training forward's gate and up projections of ``2*s0`` tokens, both saved for the backward -- as they are,
    or reshaped to [2, s0, 1376] (a batch of two: its strides hold s0, so AOTAutograd cannot be told them)."""
    m, n = "!fusec.tensor<[2*s0, 1376], bf16>", "!fusec.tensor<[2*s0, 512], bf16>"
    w = "!fusec.tensor<[512, 1376], bf16>"
    saved = "!fusec.tensor<[2, s0, 1376], bf16>" if reshaped else m
    views = "".join(f"    %{v}s = fusec.reshape %{v} : {m} -> {saved}\n" for v in "gu") if reshaped else ""
    g, u = ("%gs", "%us") if reshaped else ("%g", "%u")
    return f"""
builtin.module {{
  fusec.graph @f(%x : {n}, %wg : {w}, %wu : {w}) -> ({m}, {saved}, {saved}) symbols(s0 in [1, 4096]) attributes {{fusec.saved_outputs = 1 : i64}} {{
    %g = fusec.extern "aten.mm.default"(%x, %wg) : ({n}, {w}) -> {m}
    %u = fusec.extern "aten.mm.default"(%x, %wu) : ({n}, {w}) -> {m}
    %s = fusec.pointwise "sigmoid" %g : ({m}) -> {m}
    %h = fusec.pointwise "mul" %s, %u : ({m}, {m}) -> {m}
{views}    fusec.output %h, {g}, {u} : {m}, {saved}, {saved}
  }}
}}"""


@pytest.mark.parametrize("reshaped", [False, True], ids=["static-strides", "symbolic-strides"])
def test_saved_slices_cost_a_copy_only_where_their_strides_are_symbolic(reshaped):
    """The cost rule counts the copies the rewrite will make: none for saved slices whose strides are static even
    under a symbolic token count ([2*s0, 1376] of [2*s0, 2752]: they merge at 1024 tokens), one each where a view's
    strides hold s0 (then the copies outweigh the call saved, and the projections stay apart)."""
    from fusec.base import remarks

    module = parse(_saved_gate_up(reshaped))
    with remarks.collect() as log:
        MergeMatmuls(when="always", size_hints=("s0=512",)).apply(make_context(), module)
    said = "\n".join(r.message for r in log.remarks)
    graph = F.find_graph(module)
    identities = [op for op in graph.walk() if isinstance(op, F.PointwiseOp) and op.fn.data == "identity"]
    if reshaped:
        assert _matmuls(module) == 2 and "2 of them slices copied dense" in said, said
    else:
        assert _matmuls(module) == 1 and not identities and "copied dense" not in said, said
        assert [str(t) for t in graph.function_type.outputs.data][1:] == ["!fusec.tensor<[2*s0, 1376], bf16, strides [2752, 1]>"] * 2
