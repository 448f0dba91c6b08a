"""form-kernels keeps the program's meaning: reference interpreter before and after, random inputs."""

from pathlib import Path

import pytest

from fusec.dialects import fusec as F
from fusec.passes.form_kernels import FormKernels
from fusec.runtime import interpreter
from fusec.testing import apply_passes, assert_same_results, parse, print_ir, random_inputs

FILECHECK = Path(__file__).parents[1] / "filecheck" / "passes"

GRAPHS = {
    "reduce-argmax-permute": """
builtin.module {
  fusec.graph @g(%a : !fusec.tensor<[s0, 6], f32>, %b : !fusec.tensor<[6], f32>) -> (!fusec.tensor<[s0, 1], i64>, !fusec.tensor<[6], f32>, !fusec.tensor<[6, s0], f32>, !fusec.tensor<[], f32>) symbols(s0 in [1, inf]) {
    %t = fusec.pointwise "tanh" %a : (!fusec.tensor<[s0, 6], f32>) -> !fusec.tensor<[s0, 6], f32>
    %k = fusec.reduce "argmax" %t dims [1] keepdim : !fusec.tensor<[s0, 6], f32> -> !fusec.tensor<[s0, 1], i64>
    %o = fusec.reduce "max" %t dims [0] : !fusec.tensor<[s0, 6], f32> -> !fusec.tensor<[6], f32>
    %p = fusec.permute %t [1, 0] : !fusec.tensor<[s0, 6], f32> -> !fusec.tensor<[6, s0], f32>
    %c = fusec.constant 2.5 : !fusec.tensor<[], f32>
    fusec.output %k, %o, %p, %c : !fusec.tensor<[s0, 1], i64>, !fusec.tensor<[6], f32>, !fusec.tensor<[6, s0], f32>, !fusec.tensor<[], f32>
  }
}""",
    "index-gather-cat": """
builtin.module {
  fusec.graph @g(%w : !fusec.tensor<[10, 4], f32>, %i : !fusec.tensor<[s0, 3], i64>, %g : !fusec.tensor<[10, 2], i64>) -> (!fusec.tensor<[s0, 3, 4], f32>, !fusec.tensor<[10, 2], f32>, !fusec.tensor<[10, 6], f32>) symbols(s0 in [1, inf]) {
    %e = fusec.index %w[%i] dim 0 : !fusec.tensor<[10, 4], f32>, !fusec.tensor<[s0, 3], i64> -> !fusec.tensor<[s0, 3, 4], f32>
    %wt = fusec.permute %w [1, 0] : !fusec.tensor<[10, 4], f32> -> !fusec.tensor<[4, 10], f32>
    %gt = fusec.permute %wt [1, 0] : !fusec.tensor<[4, 10], f32> -> !fusec.tensor<[10, 4], f32>
    %h = fusec.gather %gt[%g] dim 1 : !fusec.tensor<[10, 4], f32>, !fusec.tensor<[10, 2], i64> -> !fusec.tensor<[10, 2], f32>
    %n = fusec.pointwise "neg" %h : (!fusec.tensor<[10, 2], f32>) -> !fusec.tensor<[10, 2], f32>
    %c = fusec.cat %h, %n, %w dim 1 : (!fusec.tensor<[10, 2], f32>, !fusec.tensor<[10, 2], f32>, !fusec.tensor<[10, 4], f32>) -> !fusec.tensor<[10, 8], f32>
    %s = fusec.slice %c dim 1 start 1 step 1 : !fusec.tensor<[10, 8], f32> -> !fusec.tensor<[10, 7], f32>
    %s2 = fusec.slice %s dim 1 start 0 step 1 : !fusec.tensor<[10, 7], f32> -> !fusec.tensor<[10, 6], f32>
    %q = fusec.pointwise "identity" %s2 : (!fusec.tensor<[10, 6], f32>) -> !fusec.tensor<[10, 6], f32>
    fusec.output %e, %h, %q : !fusec.tensor<[s0, 3, 4], f32>, !fusec.tensor<[10, 2], f32>, !fusec.tensor<[10, 6], f32>
  }
}""",
}


def _graph_files():
    return sorted(FILECHECK.glob("form-kernels*.mlir"))


@pytest.mark.parametrize("text", list(GRAPHS.values()) + [p.read_text() for p in _graph_files()], ids=list(GRAPHS) + [p.stem for p in _graph_files()])
@pytest.mark.parametrize("size", [1, 3, 17])
def test_form_kernels_keeps_meaning(text, size):
    module = parse(text)
    names = [g.sym_name.data for g in module.walk() if isinstance(g, F.GraphOp)]  # a filecheck file may hold several
    graphs = {name: F.find_graph(module, name) for name in names}
    # integer inputs lie in [0, 4): valid indices
    inputs = {name: random_inputs(g, {"s0": size, "s1": size + 2}, seed=size) for name, g in graphs.items()}
    before = {name: interpreter.run(module, inputs[name], name) for name in names}
    apply_passes(module, FormKernels())
    computing = (F.PointwiseOp, F.ReduceOp, F.CatOp, F.IndexOp, F.GatherOp)
    printed = parse(print_ir(module))
    for name in names:
        graph = F.find_graph(module, name)
        assert not any(isinstance(op, computing) for op in graph.block.ops), print_ir(module)
        assert_same_results(before[name], interpreter.run(printed, inputs[name], name))


def test_each_op_its_own_kernel_with_symbolic_domain():
    module = parse(GRAPHS["reduce-argmax-permute"])
    apply_passes(module, FormKernels())
    kernels = [op for op in module.walk() if isinstance(op, F.KernelOp)]
    names = [k.sym_name.data for k in kernels]
    assert names == ["fusec_poi_tanh_0", "fusec_red_argmax_1", "fusec_red_max_2", "fusec_poi_full_3"]
    assert [str(d) for d in kernels[1].domain_exprs] == ["s0", "6"]
    assert [str(d) for d in kernels[2].domain_exprs] == ["6", "s0"]  # outer reduction: x over columns
    assert "6*r + x" in print_ir(kernels[2])


def test_gather_through_views_that_mix_the_gathered_dim_copies_its_input():
    """[2, 3, 4] permuted to [4, 3, 2] and reshaped to [4, 6]: gathered column g sits at 4*floordiv(g, 2) +
    12*mod(g, 2), not at a multiple of g.  form-kernels copies the view to a contiguous tensor, says so in a
    remark, and gathers from the copy; values against torch's and the interpreter's."""
    import torch

    from fusec.base import remarks
    from fusec.runtime import compile_module

    text = """builtin.module {
  fusec.graph @g(%a : !fusec.tensor<[2, 3, 4], f32>, %i : !fusec.tensor<[4, 1], i64>) -> (!fusec.tensor<[4, 1], f32>) {
    %p = fusec.permute %a [2, 1, 0] : !fusec.tensor<[2, 3, 4], f32> -> !fusec.tensor<[4, 3, 2], f32>
    %r = fusec.reshape %p : !fusec.tensor<[4, 3, 2], f32> -> !fusec.tensor<[4, 6], f32>
    %g = fusec.gather %r[%i] dim 1 : !fusec.tensor<[4, 6], f32>, !fusec.tensor<[4, 1], i64> -> !fusec.tensor<[4, 1], f32>
    fusec.output %g : !fusec.tensor<[4, 1], f32>
  }
}"""
    module = parse(text)
    with remarks.collect() as log:
        apply_passes(module, FormKernels())
    assert [r.code for r in log.remarks] == ["gather-copy"]
    assert [k.sym_name.data.rsplit("_", 1)[0] for k in module.walk() if isinstance(k, F.KernelOp)] == \
        ["fusec_poi_identity", "fusec_poi_gather"]
    (a, _) = random_inputs(parse(text), {}, seed=4)
    i = torch.tensor([[5], [0], [3], [2]])
    expected = a.permute(2, 1, 0).reshape(4, 6).gather(1, i)
    assert torch.equal(interpreter.run(parse(text), [a, i])[0], expected)
    assert torch.equal(compile_module(parse(print_ir(module)), {})([a, i])[0], expected)
