"""kernel_merge: merged kernels are named after what their body still computes; the limit helper both passes use."""

import pytest
from xdsl.transforms.common_subexpression_elimination import cse
from xdsl.transforms.dead_code_elimination import region_dce

from fusec.passes.form_kernels import FormKernels
from fusec.passes.kernel_merge import computed_parts, name_parts, simplify_body
from fusec.passes.reduction_fusion import ReductionFusion
from fusec.passes.vertical_fusion import VerticalFusion
from fusec.testing import graph_text, kernels, parse, print_ir, run_passes_checked, tensor_type


@pytest.mark.parametrize("name, parts", [
    ("fusec_poi_mul_add_sigmoid_2", ["mul", "add", "sigmoid"]),
    ("fusec_poi_logical_and_exp_3", ["logical_and", "exp"]),  # a function name with "_" is one part
    ("fusec_red_sum_argmax_12", ["sum", "argmax"]),
    ("fusec_poi_ne_where_gather_neg_7", ["ne", "where", "gather", "neg"]),
    ("my_kernel", ["my_kernel"]),  # not a fusec name: kept whole
])
def test_name_parts(name, parts):
    assert name_parts(name) == parts


def test_simplify_body_is_xdsls_cse_then_dce():
    # Two loads of one index and the exps over them (CSE); a dead chain (neg of tanh); a dead exp equal to a later
    # live one, a load between them: xDSL forgets a dead op, so the later one stays where it is; a store to keep.
    t = tensor_type("s0")
    text = graph_text(f"%x : {t}, %y : {t}", t, f"""
    %k = fusec.kernel @fusec_poi_exp_0 [s0] (%x, %y) : ({t}, {t}) -> ({t}) {{
    ^bb0(%a: {t}, %b: {t}, %o: {t}):
      %u = fusec.load %a[x] : {t}
      %early = fusec.pointwise "exp" %u : (f32) -> f32
      %w = fusec.load %b[x] : {t}
      %v = fusec.load %a[x] : {t}
      %e1 = fusec.pointwise "exp" %u : (f32) -> f32
      %e2 = fusec.pointwise "exp" %v : (f32) -> f32
      %th = fusec.pointwise "tanh" %w : (f32) -> f32
      %n = fusec.pointwise "neg" %th : (f32) -> f32
      %s = fusec.pointwise "add" %e1, %e2 : (f32, f32) -> f32
      %m = fusec.pointwise "mul" %s, %w : (f32, f32) -> f32
      fusec.store %m, %o[x] : {t}
    }}
    fusec.output %k : {t}""")
    ours, theirs = parse(text), parse(text)
    simplify_body(kernels(ours)[0].body)
    cse(kernels(theirs)[0].body)
    region_dce(kernels(theirs)[0].body)
    assert print_ir(ours) == print_ir(theirs)
    assert [op.name for op in kernels(ours)[0].block.ops] == ["fusec.load", "fusec.load", "fusec.pointwise",
                                                              "fusec.pointwise", "fusec.pointwise", "fusec.store"]


def two_output_producer(t: str) -> str:
    """@fusec_poi_exp_tanh_0 stores exp(x) and tanh(x); only exp(x) is read (by neg), tanh(x) is dead."""
    return f"""
    %e, %th = fusec.kernel @fusec_poi_exp_tanh_0 [8*s0] (%x) : ({t}) -> ({t}, {t}) {{
    ^bb0(%in: {t}, %o0: {t}, %o1: {t}):
      %v = fusec.load %in[x] : {t}
      %a = fusec.pointwise "exp" %v : (f32) -> f32
      %b = fusec.pointwise "tanh" %v : (f32) -> f32
      fusec.store %a, %o0[x] : {t}
      fusec.store %b, %o1[x] : {t}
    }}
    %n = fusec.kernel @fusec_poi_neg_1 [8*s0] (%e) : ({t}) -> ({t}) {{
    ^bb0(%in: {t}, %o: {t}):
      %v = fusec.load %in[x] : {t}
      %m = fusec.pointwise "neg" %v : (f32) -> f32
      fusec.store %m, %o[x] : {t}
    }}"""


def test_vertical_merge_drops_the_parts_of_a_dead_output():
    t = tensor_type("s0, 8")
    module, _ = run_passes_checked(graph_text(f"%x : {t}", t, two_output_producer(t) + f"""
    fusec.output %n : {t}"""), VerticalFusion())
    (k,) = kernels(module)
    assert computed_parts(k.block) == {"exp", "neg"}
    assert k.sym_name.data == "fusec_poi_exp_neg_1"  # was fusec_poi_exp_tanh_neg_1: tanh went with the dead output


def test_vertical_merge_keeps_the_parts_of_a_stored_output():
    t = tensor_type("s0, 8")
    module, _ = run_passes_checked(graph_text(f"%x : {t}", f"{t}, {t}", two_output_producer(t) + f"""
    fusec.output %n, %th : {t}, {t}"""), VerticalFusion())
    (k,) = kernels(module)
    assert k.sym_name.data == "fusec_poi_exp_tanh_neg_1" and len(k.outputs) == 2


def test_reduction_merge_drops_the_parts_of_an_output_only_the_epilogue_read():
    # var_mean-like siblings already merged: sum and max of each row; the epilogue reads only the sum,
    # nothing else reads the max, so the merged kernel neither stores nor computes it.
    t, r = tensor_type("s0, 32"), tensor_type("s0")
    body = f"""
    %s, %mx = fusec.kernel @fusec_red_sum_max_0 [s0, 32] (%x) : ({t}) -> ({r}, {r}) {{
    ^bb0(%in: {t}, %o0: {r}, %o1: {r}):
      %v = fusec.load %in[r + 32*x] : {t}
      %a = fusec.reduce_r "sum" %v : f32 -> f32
      %b = fusec.reduce_r "max" %v : f32 -> f32
      fusec.store %a, %o0[x] : {r}
      fusec.store %b, %o1[x] : {r}
    }}
    %m = fusec.kernel @fusec_poi_div_1 [s0] (%s) : ({r}) -> ({r}) {{
    ^bb0(%in: {r}, %o: {r}):
      %v = fusec.load %in[x] : {r}
      %c = fusec.constant 32.0 : f32
      %d = fusec.pointwise "div" %v, %c : (f32, f32) -> f32
      fusec.store %d, %o[x] : {r}
    }}
    fusec.output %m : {r}"""
    module, _ = run_passes_checked(graph_text(f"%x : {t}", r, body), ReductionFusion())
    (k,) = kernels(module)
    assert computed_parts(k.block) == {"sum", "div", "full"}
    assert k.sym_name.data == "fusec_red_sum_div_1"


def test_structural_parts_stay_while_their_loads_do():
    # A cat has no function of its own: its masked loads show it is still computed after exp inlined it.
    t, c = tensor_type("s0"), tensor_type("2*s0")
    module, _ = run_passes_checked(graph_text(f"%a : {t}, %b : {t}", c, f"""
    %j = fusec.cat %a, %b dim 0 : ({t}, {t}) -> {c}
    %e = fusec.pointwise "exp" %j : ({c}) -> {c}
    fusec.output %e : {c}"""), FormKernels(), VerticalFusion())
    (k,) = kernels(module)
    assert "cat" in computed_parts(k.block)
    assert k.sym_name.data == "fusec_poi_cat_exp_1"


def test_a_merge_past_the_limits_is_dropped_with_a_limit_remark():
    t = tensor_type("s0, 8")
    module, notes = run_passes_checked(graph_text(f"%x : {t}", t, two_output_producer(t) + f"""
    fusec.output %n : {t}"""), VerticalFusion(max_ops=3))
    assert [k.sym_name.data for k in kernels(module)] == ["fusec_poi_exp_tanh_0", "fusec_poi_neg_1"]
    assert [(n.code, n.message, n.subjects) for n in notes] == [
        ("limit", "max-ops=3 exceeded (4)", ("@fusec_poi_exp_tanh_0", "@fusec_poi_neg_1"))]


def _pointwise(n: int, fn: str, arg: str, t: str) -> str:
    return f"""
    %k{n} = fusec.kernel @fusec_poi_{fn}_{n} [8*s0] (%{arg}) : ({t}) -> ({t}) {{
    ^bb0(%in: {t}, %o: {t}):
      %v = fusec.load %in[x] : {t}
      %r = fusec.pointwise "{fn}" %v : (f32) -> f32
      fusec.store %r, %o[x] : {t}
    }}"""


def test_a_merge_moves_earlier_readers_of_a_kept_output_after_it_and_nothing_else():
    # exp feeds a matmul (which needs it stored) and neg: exp merges into neg and stays stored there, so the
    # matmul, which sat before neg, must now follow the merged kernel; tanh, before the span, keeps its place.
    t, w = tensor_type("s0, 8"), tensor_type("8, 8")
    body = (_pointwise(0, "tanh", "y", t) + _pointwise(1, "exp", "x", t)
            + f'\n    %e:1 = fusec.extern "aten.mm.default"(%k1, %w) : ({t}, {w}) -> ({t})'
            + _pointwise(2, "neg", "k1", t) + f"\n    fusec.output %k2, %e, %k0 : {t}, {t}, {t}")
    module, _ = run_passes_checked(graph_text(f"%x : {t}, %y : {t}, %w : {w}", f"{t}, {t}, {t}", body), VerticalFusion())
    ops = [op for op in module.walk() if op.parent_op() is not None and op.parent_op().name == "fusec.graph"]
    names = [op.sym_name.data if hasattr(op, "sym_name") else op.name for op in ops]
    assert names == ["fusec_poi_tanh_0", "fusec_poi_exp_neg_2", "fusec.extern", "fusec.output"]
