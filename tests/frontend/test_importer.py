"""import_graph on the graphs torch.compile produces: types, symbols, round trips, locations, fallbacks."""

import re

import pytest
import sympy
import torch
from import_helpers import assert_matches_eager, capture, import_and_run, ir_text, reparsed_text

from fusec.base import remarks
from fusec.dialects import fusec as F
from fusec.frontend.importer import InputSlot, UnsupportedGraph, import_graph
from fusec.runtime import interpreter

pytestmark = pytest.mark.usefixtures("fresh_dynamo")  # tests/conftest.py


def seed(t1, t2, t3, t4):
    return t1.sum(1), t2.max(1).values, t3.min(1).values, t4.sum(1)


def seed_inputs(rows=37, cols=53):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(rows, cols, generator=g) for _ in range(4)]


def test_seed_example_static():
    (gm, example), = capture(seed, *seed_inputs())
    module, info = import_graph(gm, example, "seed")
    module.verify()
    text = ir_text(module)
    assert "fusec.graph @seed(%0 : !fusec.tensor<[37, 53], f32>" in text
    assert text.count('fusec.reduce "sum"') == 2
    assert 'fusec.reduce "max" %1 dims [1]' in text and 'fusec.reduce "min" %2 dims [1]' in text
    assert "symbols(" not in text and info.symbols == {}
    assert [s.kind for s in info.inputs] == ["tensor"] * 4
    assert [(s.kind, s.index) for s in info.outputs] == [("tensor", i) for i in range(4)]


def test_seed_example_dynamic_has_symbols_not_example_values():
    inputs = seed_inputs()
    (gm, example), = capture(seed, *inputs, dynamic=True)
    module, info = import_graph(gm, example, "seed")
    module.verify()
    text = ir_text(module)
    assert "[s" in text
    declared = re.search(r"symbols\((.*?)\) (attributes|\{)", text).group(1)
    types = text.replace(declared, "")
    assert not re.search(r"[\[ ,](37|53)[\],]", types), text  # the example sizes never appear as dims
    # ... only as each symbol's hint: what schedules may be chosen for, never what the code computes with
    assert re.fullmatch(r"s\d+ in \[2, inf\] hint (37|53), s\d+ in \[2, inf\] hint (37|53)", declared), declared
    rows, cols = sorted(info.symbols, key=lambda s: info.size_hints[s])
    assert info.size_hints == {rows: 37, cols: 53}
    # SymInt placeholders are not graph inputs; the slots say which argument is what.
    assert [s.kind for s in info.inputs] == ["symint", "symint", "tensor", "tensor", "tensor", "tensor"]
    assert len(module.ops.first.block.args) == 4
    args = [37, 53, *inputs]
    assert info.bind_symbols(args) == {rows: 37, cols: 53}
    outputs = interpreter.run(module, info.tensor_inputs(args))
    assert_matches_eager(info.assemble_outputs(outputs, {}), seed(*inputs))
    other = seed_inputs(5, 9)
    outputs = interpreter.run(module, info.tensor_inputs([5, 9, *other]))
    assert_matches_eager(outputs, seed(*other))


@pytest.mark.parametrize("locations", [False, True])
def test_printed_ir_parses_back_to_the_same_text(locations):
    def fn(x, y):
        h = torch.nn.functional.layer_norm(x[:, 1:] * y[1:], (x.shape[1] - 1,), eps=0.25)
        return h.softmax(-1), h.argmax(1), torch.cat([x, x], 0)[::2].float().mean()

    g = torch.Generator().manual_seed(0)
    (gm, example), = capture(fn, torch.randn(6, 9, generator=g), torch.randn(9, generator=g), dynamic=True)
    module, _ = import_graph(gm, example)
    text = ir_text(module, locations)
    again = reparsed_text(text, locations)
    # An op printed without a place of its own (loc(unknown): the module, the graph) gets its place in the text.
    assert re.sub(r'loc\("<input>":\d+:\d+\)', "loc(unknown)", again) == text


def test_float_literal_in_exponent_form_parses_back():
    (gm, example), = capture(lambda x: x + 1e-05, torch.randn(3))
    module, _ = import_graph(gm, example)
    text = ir_text(module)
    assert reparsed_text(text) == text


def test_locations_name_the_fx_node_and_the_users_line():
    def fn(x):
        y = x * 3  # the line the location must point at
        return y.exp()

    (gm, example), = capture(fn, torch.randn(4, 4))
    module, _ = import_graph(gm, example)
    text = ir_text(module, locations=True)
    line = fn.__code__.co_firstlineno + 1
    mul = next(line_ for line_ in text.splitlines() if 'pointwise "mul"' in line_)
    assert re.search(rf'loc\("mul(_\d+)?"\(".*test_importer\.py":{line}:\d+\)\)', mul), mul
    assert "loc(" not in ir_text(module)  # plain printing leaves them out


def test_unknown_op_becomes_an_extern_with_a_remark():
    def fn(x):
        return torch.cumsum(x, 1) * 2

    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 5, generator=g)
    (gm, example), = capture(fn, x)
    with remarks.collect() as log:
        module, info = import_graph(gm, example)
    externs = [op for op in module.walk() if isinstance(op, F.ExternOp)]
    assert [e.target.data for e in externs] == ["aten.cumsum.default"]
    assert 'fusec.extern "aten.cumsum.default"(%0, 1) :' in ir_text(module)
    assert [(r.pass_name, r.code) for r in log.remarks] == [("importer", "extern-fallback")]
    assert "aten.cumsum.default" in log.remarks[0].message and info.externs == ("aten.cumsum.default",)
    outputs = interpreter.run(module, info.tensor_inputs([x]))
    assert_matches_eager(outputs, fn(x))


def test_extern_call_passes_sizes_as_symbolic_expressions():
    def fn(x):
        return torch.cumsum(x, 0) + torch.fmod(x, x.shape[0] * 2)

    (gm, example), = capture(fn, torch.randn(6, 3), dynamic=True)
    module, info = import_graph(gm, example)
    fmod = next(op for op in module.walk() if isinstance(op, F.ExternOp) and "fmod" in op.target.data)
    text = ir_text(fmod)
    assert re.search(r'"aten.fmod.Scalar"\(%\d+, 2\*s\d+\)', text), text
    x = torch.randn(5, 3)
    outputs = interpreter.run(module, info.tensor_inputs([*x.shape, x]))
    assert_matches_eager(outputs, fn(x))


def test_native_op_that_cannot_be_proved_falls_back_to_extern():
    # Dynamo knows s0*s1 is even; sympy cannot prove 2*floordiv(s0*s1, 2) == s0*s1 for fusec.reshape.
    def fn(x):
        return x.reshape(x.shape[0] * x.shape[1] // 2, 2).sum(0)

    (gm, example), = capture(fn, torch.randn(6, 4), dynamic=True)
    with remarks.collect() as log:
        module, info = import_graph(gm, example)
    module.verify()
    assert any(r.code == "extern-fallback" and "does not verify" in r.message for r in log.remarks), log.text()
    x = torch.randn(4, 8)
    outputs = interpreter.run(module, info.tensor_inputs(list(x.shape) + [x]))
    assert_matches_eager(outputs, fn(x))


def test_non_contiguous_input_keeps_its_strides():
    def fn(x):
        return x + 1

    x = torch.randn(5, 7).t()
    (gm, example), = capture(fn, x, dynamic=True)
    module, info = import_graph(gm, example)
    arg = module.ops.first.block.args[0].type
    assert not arg.is_contiguous
    assert arg.layout[0] == 1 and isinstance(arg.layout[1], sympy.Symbol)
    assert_matches_eager(interpreter.run(module, info.tensor_inputs([7, 5, x])), fn(x))


def test_backward_sizes_without_tensors_get_size_carriers():
    x = torch.randn(4, 3, requires_grad=True)
    forward, backward = capture(lambda x: x.sum(), x, dynamic=True, backward=True)
    module, info = import_graph(*backward)
    assert len(info.carriers) == 2
    carriers = [a.type for a in module.ops.first.block.args][-2:]
    assert all(t.element_type == F.I8 and t.layout == [0] for t in carriers)
    args = [4, 3, torch.tensor(1.5)]
    outputs = info.assemble_outputs(interpreter.run(module, info.tensor_inputs(args)), info.bind_symbols(args))
    assert outputs[:-1] == [None] * (len(outputs) - 1)
    assert torch.equal(outputs[-1], torch.full((4, 3), 1.5))


def test_float_size_arithmetic_becomes_pointwise_ops():
    x = torch.randn(4, 3, requires_grad=True)
    _, backward = capture(lambda x: x.var(), x, dynamic=True, backward=True)
    module, info = import_graph(*backward)
    text = ir_text(module)
    assert "fusec.symbolic s" in text and '"convert"' in text  # 2/(numel - 1), computed at run time


def test_constant_tensor_becomes_an_input():
    def fn(x):
        return x * torch.tensor([1.0, 2.0, 3.0])

    x = torch.randn(4, 3)
    (gm, example), = capture(fn, x)
    module, info = import_graph(gm, example)
    assert len(info.constants) == 1 and len(module.ops.first.block.args) == 2
    assert_matches_eager(interpreter.run(module, info.tensor_inputs([x])), fn(x))


def test_dtype_without_element_type_is_unsupported():
    def fn(x):
        return torch.view_as_real(x * 2)

    (gm, example), = capture(fn, torch.randn(3, dtype=torch.complex64))
    with pytest.raises(UnsupportedGraph, match="complex64"):
        import_graph(gm, example)


def test_hand_made_graph_gets_its_meta_by_fake_propagation():
    gm = torch.fx.symbolic_trace(lambda x: torch.ops.aten.mul.Tensor(torch.ops.aten.exp.default(x), 2))
    x = torch.randn(3, 4)
    module, info = import_graph(gm, [x])
    assert info.inputs == (InputSlot("tensor", 0),)
    assert_matches_eager(interpreter.run(module, info.tensor_inputs([x])), [x.exp() * 2])


def test_import_and_run_matches_on_a_small_model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.GELU(), torch.nn.LayerNorm(8), torch.nn.Linear(8, 3))
    x = torch.randn(5, 6)
    params = dict(model.named_parameters())

    def fn(x, *weights):
        return torch.func.functional_call(model, dict(zip(params, weights, strict=True)), (x,)).softmax(-1)

    module, info, log, outputs = import_and_run(fn, x, *params.values())
    assert not log.remarks
    with torch.no_grad():
        assert_matches_eager(outputs, [model(x).softmax(-1)])


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_an_output_eager_lays_out_transposed_is_stored_so_by_its_kernel(tmp_path, dynamic):
    """``x.t() + y``: eager's result is column-major (TensorIterator follows the first operand).  The graph's output
    is an identity into that layout, which fuses into the add's kernel: one kernel stores it so, where a copy after
    the graph would read and write the result again."""
    from fusec.testing import parse

    def fn(x, y):
        return x.t() + y

    x, y = torch.randn(24, 24), torch.randn(24, 24)
    got = torch.compile(fn, backend="fusec", dynamic=dynamic, options={"dump_dir": str(tmp_path)})(x, y)
    want = fn(x, y)
    torch.testing.assert_close(got, want)
    assert got.stride() == want.stride() == (1, 24)
    (folder,) = tmp_path.iterdir()
    (graph,) = [op for op in parse((folder / "final.mlir").read_text()).walk() if isinstance(op, F.GraphOp)]
    (kernel,) = [op for op in graph.block.ops if isinstance(op, F.KernelOp)]
    assert not [op for op in graph.block.ops if isinstance(op, F.ExternOp)]
    assert str(kernel.results[0].type.layout[0]) == "1"  # stored column-major
