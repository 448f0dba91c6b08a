"""reuse-buffers: kernel results written into dead buffers' storage; the launcher hands storages on and gives the
results the reference interpreter gives, and refuses a plan that breaks the rule."""

from pathlib import Path

import pytest
from xdsl.utils.exceptions import VerifyException

from fusec.base import remarks
from fusec.dialects import fusec as F
from fusec.lowering.triton_kernel import LoweringError
from fusec.passes.combo_grouping import ComboGrouping
from fusec.passes.form_kernels import FormKernels
from fusec.passes.reuse_buffers import ReuseBuffers
from fusec.passes.schedule_kernels import ScheduleKernels
from fusec.runtime import compile_module, interpreter
from fusec.testing import apply_passes, assert_same_results, graph_text, parse, random_inputs, tensor_type

CASES = (Path(__file__).parents[1] / "filecheck" / "passes" / "reuse-buffers.mlir").read_text()


def planned(text: str, *fusion):
    module = parse(text)
    return apply_passes(module, FormKernels(), *fusion, ScheduleKernels(), ReuseBuffers())


def storages(graph: F.GraphOp) -> list[int]:
    return [s for k in graph.walk() if isinstance(k, F.KernelOp) for s in (F.storage_of(k) or [])]


@pytest.mark.parametrize("name", ["chain", "view_alias", "sizes_and_types", "extern_storage"])
def test_handed_on_storages_give_the_interpreters_results(name):
    module = planned(CASES)
    compiled = compile_module(module, graph_name=name)
    inputs = random_inputs(F.find_graph(parse(CASES), name), {}, seed=3)
    assert_same_results(interpreter.run(F.find_graph(parse(CASES), name), inputs), compiled(inputs))
    assert "; del buf0" in compiled.source


def test_symbolic_sizes_share_storage_when_the_element_counts_are_equal():
    a, flat = tensor_type("s0, 8"), tensor_type("8*s0")
    text = graph_text(f"%x : {a}", f"{flat}", f"""
    %e = fusec.pointwise "exp" %x : ({a}) -> {a}
    %n = fusec.pointwise "neg" %e : ({a}) -> {a}
    %r = fusec.reshape %n : {a} -> {flat}
    %s = fusec.pointwise "sin" %r : ({flat}) -> {flat}
    %t = fusec.pointwise "tanh" %s : ({flat}) -> {flat}
    fusec.output %t : {flat}""")
    module = planned(text)
    assert storages(F.find_graph(module)) == [0, 1, 0, 1]
    compiled = compile_module(module, {"s0": 3})
    assert "_reinterpret(buf0, (8*s0,), (1,), 0); del buf0" in compiled.source
    for size in (3, 17):
        inputs = random_inputs(parse(text), {"s0": size}, seed=size)
        assert_same_results(interpreter.run(parse(text), inputs), compiled(inputs))


def test_combo_members_take_storage_dead_before_their_launch():
    t = tensor_type("64, 8")
    text = graph_text(f"%x : {t}", f"{t}, {t}", f"""
    %e = fusec.pointwise "exp" %x : ({t}) -> {t}
    %a = fusec.pointwise "sin" %e : ({t}) -> {t}
    %b = fusec.pointwise "cos" %e : ({t}) -> {t}
    %c = fusec.pointwise "tanh" %a : ({t}) -> {t}
    %d = fusec.pointwise "neg" %b : ({t}) -> {t}
    fusec.output %c, %d : {t}, {t}""", symbolic=False)
    with remarks.collect():
        module = planned(text, ComboGrouping())
    graph = F.find_graph(module)
    assert any(isinstance(op, F.ComboOp) for op in graph.block.ops), "the test needs combos"
    compiled = compile_module(module)
    inputs = random_inputs(parse(text), {}, seed=1)
    assert_same_results(interpreter.run(parse(text), inputs), compiled(inputs))
    assert len(set(storages(graph))) < len(storages(graph)), storages(graph)


def test_a_plan_that_breaks_the_rule_is_refused():
    module = planned(CASES)
    chain = F.find_graph(module, "chain")
    exp, neg = [k for k in chain.walk() if isinstance(k, F.KernelOp)][:2]
    F.mark_storage(neg, [0])  # neg reads exp's result while it would write over it
    with pytest.raises(LoweringError, match=r"puts @fusec_poi_neg_\d+'s result into storage 0 while the result written there before is still read"):
        compile_module(module, graph_name="chain")

    module = planned(CASES)
    graph = F.find_graph(module, "sizes_and_types")
    convert = next(k for k in graph.walk() if isinstance(k, F.KernelOp) and "convert" in k.sym_name.data)
    F.mark_storage(convert, [0])  # f16 into exp's dead f32 storage
    with pytest.raises(LoweringError, match="allocated for another element type or size"):
        compile_module(module, graph_name="sizes_and_types")


def test_the_verifier_wants_a_storage_per_result():
    module = planned(CASES)
    kernel = next(k for k in module.walk() if isinstance(k, F.KernelOp))
    F.mark_storage(kernel, [0, 1])
    with pytest.raises(VerifyException, match=r"fusec.storage must be an array<i64> with a storage \(or -1\) per result"):
        module.verify()


def test_a_view_whose_schema_declares_a_new_tensor_keeps_its_input_alive():
    """``aten._unsafe_view`` returns a view though its schema says a new tensor: neg's result may not take exp's
    storage while the view is still read."""
    sq, flat = tensor_type("8, 8"), tensor_type("64")
    text = graph_text(f"%x : {sq}", f"{flat}, {sq}", f"""
    %e = fusec.pointwise "exp" %x : ({sq}) -> {sq}
    %v = fusec.extern "aten._unsafe_view.default"(%e, [64]) : ({sq}) -> {flat}
    %n = fusec.pointwise "neg" %x : ({sq}) -> {sq}
    %s = fusec.pointwise "sin" %v : ({flat}) -> {flat}
    %t = fusec.pointwise "tanh" %n : ({sq}) -> {sq}
    fusec.output %s, %t : {flat}, {sq}""", symbolic=False)
    module = planned(text)
    exp, neg = [k for k in F.find_graph(module).walk() if isinstance(k, F.KernelOp)][:2]
    assert F.storage_of(exp) != F.storage_of(neg), (F.storage_of(exp), F.storage_of(neg))
    compiled = compile_module(module)
    inputs = random_inputs(parse(text), {}, seed=2)
    assert_same_results(interpreter.run(parse(text), inputs), compiled(inputs))
