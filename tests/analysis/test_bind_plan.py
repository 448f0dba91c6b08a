"""The bind plan: which input gives each size symbol, and what is left to check; both executors follow it.

Each graph below takes inputs whose types bind a symbol in another way than a plain
dim (``[2*s0]``, ``[s0 - 1]``, ``[s0, 4*s1]``, a stride, a SymInt argument); it runs
through the reference interpreter (as written, after form-kernels, after the default
pipeline) and through the generated launcher and kernels (Triton's interpreter on
CPU), at two sizes with one compiled artifact, against torch.
"""

import pytest
import torch

from fusec.analysis.bind_plan import InputMismatch, UnboundSymbol, bind_plan, make_plan
from fusec.base import shapes
from fusec.dialects import fusec as F
from fusec.frontend.importer import ImportInfo, InputSlot, OutputSlot
from fusec.passes.form_kernels import FormKernels
from fusec.pipeline import default_pipeline_spec, run_pipeline
from fusec.registry import make_context
from fusec.runtime import compile_module, interpreter
from fusec.testing import apply_passes, parse


def T(dims: str, strides: str = "") -> str:
    return f"!fusec.tensor<[{dims}], f32{f', strides [{strides}]' if strides else ''}>"


I64 = "!fusec.tensor<[], i64>"


def _graph(args: str, outs: list[tuple[str, str]], body: str, symbols: str) -> str:
    names, types = ", ".join(o for o, _ in outs), ", ".join(t for _, t in outs)
    return f"""builtin.module {{
  fusec.graph @g({args}) -> ({types}) symbols({symbols}) {{
{body}
    fusec.output {names} : {types}
  }}
}}"""


def _randn(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# name -> (graph text, {symbol: value} -> (inputs, torch's outputs)), at two sizes each
CASES = {
    "twice-s0": (_graph(f"%a : {T('2*s0')}", [("%s", T("s0")), ("%e", T("2*s0")), ("%n", I64)], f"""
    %r = fusec.reshape %a : {T('2*s0')} -> {T('s0, 2')}
    %s = fusec.reduce "sum" %r dims [1] : {T('s0, 2')} -> {T('s0')}
    %e = fusec.pointwise "exp" %a : ({T('2*s0')}) -> {T('2*s0')}
    %n = fusec.symbolic s0 : {I64}""", "s0 in [1, inf]"),
        lambda s, seed: ([a := _randn(2 * s["s0"], seed=seed)], [a.reshape(-1, 2).sum(1), a.exp(), torch.tensor(s["s0"])])),
    "s0-minus-one": (_graph(f"%a : {T('s0 - 1')}", [("%c", T("s0")), ("%n", I64)], f"""
    %m = fusec.pointwise "neg" %a : ({T('s0 - 1')}) -> {T('s0 - 1')}
    %one = fusec.constant 1.5 : {T('1')}
    %c = fusec.cat %m, %one dim 0 : ({T('s0 - 1')}, {T('1')}) -> {T('s0')}
    %n = fusec.symbolic s0 : {I64}""", "s0 in [2, inf]"),
        lambda s, seed: ([a := _randn(s["s0"] - 1, seed=seed)], [torch.cat([-a, torch.tensor([1.5])]), torch.tensor(s["s0"])])),
    "s0-and-four-s1": (_graph(f"%a : {T('s0, 4*s1')}", [("%s", T("s0, s1")), ("%q", T("s0, 4*s1")), ("%n", I64)], f"""
    %r = fusec.reshape %a : {T('s0, 4*s1')} -> {T('s0, s1, 4')}
    %s = fusec.reduce "sum" %r dims [2] : {T('s0, s1, 4')} -> {T('s0, s1')}
    %q = fusec.pointwise "mul" %a, %a : ({T('s0, 4*s1')}, {T('s0, 4*s1')}) -> {T('s0, 4*s1')}
    %n = fusec.symbolic s0 + 10*s1 : {I64}""", "s0 in [1, inf], s1 in [1, inf]"),
        lambda s, seed: ([a := _randn(s["s0"], 4 * s["s1"], seed=seed)],
                         [a.reshape(s["s0"], -1, 4).sum(2), a * a, torch.tensor(s["s0"] + 10 * s["s1"])])),
    # a transposed slice: its dims are static, only its column stride says s0
    "stride-only": (_graph(f"%a : {T('4, 8', '1, s0')}, %b : {T('4, 8')}", [("%y", T("4, 8")), ("%s", T("4")), ("%n", I64)], f"""
    %y = fusec.pointwise "add" %a, %b : ({T('4, 8', '1, s0')}, {T('4, 8')}) -> {T('4, 8')}
    %s = fusec.reduce "sum" %a dims [1] : {T('4, 8', '1, s0')} -> {T('4')}
    %n = fusec.symbolic s0 : {I64}""", "s0 in [4, inf]"),
        lambda s, seed: ([a := _randn(8, s["s0"], seed=seed)[:, :4].t(), b := _randn(4, 8, seed=seed + 1)],
                         [a + b, a.sum(1), torch.tensor(s["s0"])])),
    # a derived symbol (a strided conv's size): no input gives it, its definition does
    "derived": (_graph(f"%a : {T('s0')}", [("%e", T("d0")), ("%n", I64)], f"""
    %h = fusec.slice %a dim 0 start 0 step 2 : {T('s0')} -> {T('d0', '2')}
    %e = fusec.pointwise "exp" %h : ({T('d0', '2')}) -> {T('d0')}
    %n = fusec.symbolic d0*d0 + s0 : {I64}""", "s0 in [1, inf], d0 = floordiv(s0 - 1, 2) + 1 in [1, inf]"),
        lambda s, seed: ([a := _randn(s["s0"], seed=seed)], [a[::2].exp(), torch.tensor(len(a[::2]) ** 2 + s["s0"])])),
}
SIZES = {"twice-s0": [{"s0": 3}, {"s0": 8}], "s0-minus-one": [{"s0": 2}, {"s0": 9}],
         "s0-and-four-s1": [{"s0": 3, "s1": 2}, {"s0": 5, "s1": 7}], "stride-only": [{"s0": 4}, {"s0": 11}],
         "derived": [{"s0": 5}, {"s0": 8}]}


def _default_pipeline(text: str):
    module = parse(text)
    run_pipeline(make_context(), module, default_pipeline_spec())
    return module


def _assert_all_close(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape
        torch.testing.assert_close(g, w.to(g.dtype))


@pytest.mark.parametrize("name", list(CASES))
def test_both_executors_bind_the_symbols_and_agree_with_torch(name):
    text, make = CASES[name]
    written = parse(text)
    formed = apply_passes(parse(text), FormKernels())
    fused = _default_pipeline(text)
    first = SIZES[name][0]
    compiled = [compile_module(m, first) for m in (formed, fused)]  # one artifact for every size
    for seed, sizes in enumerate(SIZES[name]):
        inputs, expected = make(sizes, seed)
        for module in (written, formed, fused):
            _assert_all_close(interpreter.run(module, inputs), expected)
        for c in compiled:
            _assert_all_close(c(inputs), expected)


def test_the_launcher_prints_the_plan():
    sources = {name: compile_module(apply_passes(parse(CASES[name][0]), FormKernels()), SIZES[name][0]).source for name in CASES}
    assert "s0 = arg0.shape[0] // 2\n" in sources["twice-s0"]
    assert "s0 = (arg0.shape[0] + 1)\n" in sources["s0-minus-one"]
    assert "s0 = arg0.shape[0]\n    s1 = arg0.shape[1] // 4\n" in sources["s0-and-four-s1"]
    assert "s0 = arg0.stride(1)\n" in sources["stride-only"]
    assert "s0 = arg0.shape[0]\n    d0 = ((s0 - 1) // 2) + 1\n" in sources["derived"]


# ---------------------------------------------------------------- wrong inputs


def _executors(name):
    text, _ = CASES[name]
    compiled = compile_module(_default_pipeline(text), SIZES[name][0])
    return parse(text), compiled


def test_an_odd_length_for_twice_s0_is_a_clean_error_in_both_executors():
    written, compiled = _executors("twice-s0")
    a = _randn(7, seed=0)
    with pytest.raises(interpreter.InterpreterError, match=r"^@g: input 0 dim 0 is 7, but its type says 2\*s0 = 6 \(s0 = 3 from input 0 dim 0\)$"):
        interpreter.run(written, [a])
    with pytest.raises(InputMismatch, match=r"input 0 must be torch.float32 of shape \[6\].*got torch.float32 of shape \[7\]"):
        compiled([a])


def test_a_dim_that_contradicts_the_bound_symbols_is_a_clean_error_in_both_executors():
    text = _graph(f"%a : {T('s0, 4*s1')}, %b : {T('s0, s1')}", [("%y", T("s0, s1"))], f"""
    %r = fusec.reshape %a : {T('s0, 4*s1')} -> {T('s0, s1, 4')}
    %s = fusec.reduce "sum" %r dims [2] : {T('s0, s1, 4')} -> {T('s0, s1')}
    %y = fusec.pointwise "add" %s, %b : ({T('s0, s1')}, {T('s0, s1')}) -> {T('s0, s1')}""", "s0 in [1, inf], s1 in [1, inf]")
    compiled = compile_module(_default_pipeline(text), {"s0": 3, "s1": 2})
    a, b = _randn(3, 8, seed=0), _randn(3, 3, seed=1)  # b's dim 1 binds s1 = 3: a's dim 1 must be 12
    with pytest.raises(interpreter.InterpreterError,
                       match=r"^@g: input 0 dim 1 is 8, but its type says 4\*s1 = 12 \(s1 = 3 from input 1 dim 1\)$"):
        interpreter.run(parse(text), [a, b])
    with pytest.raises(InputMismatch, match=r"input 0 must be torch.float32 of shape \[3, 12\].*got torch.float32 of shape \[3, 8\]"):
        compiled([a, b])
    good = _randn(3, 2, seed=1)
    torch.testing.assert_close(compiled([a, good])[0], a.reshape(3, 2, 4).sum(2) + good)
    torch.testing.assert_close(interpreter.run(parse(text), [a, good])[0], a.reshape(3, 2, 4).sum(2) + good)


def test_a_symbol_no_input_gives_is_one_error_wherever_it_is_needed():
    text = _graph(f"%a : {T('4')}", [("%c", T("s1"))], f"""
    %c = fusec.constant 1.0 : {T('s1')}""", "s1 in [1, inf]")
    message = r"@g: size symbol 's1' is neither a dim nor a stride of any input \(nor solvable from one\)"
    with pytest.raises(interpreter.InterpreterError, match=message):
        interpreter.run(parse(text), [_randn(4, seed=0)])
    with pytest.raises(UnboundSymbol, match=message):
        compile_module(apply_passes(parse(text), FormKernels()))


def test_a_wrong_number_of_inputs_or_rank():
    written, _ = _executors("twice-s0")
    with pytest.raises(interpreter.InterpreterError, match=r"^@g takes 1 tensors, got 2$"):
        interpreter.run(written, [_randn(4, seed=0)] * 2)
    with pytest.raises(interpreter.InterpreterError, match=r"^@g: input 0 has 2 dims \[2, 2\], its type has 1$"):
        interpreter.run(written, [_randn(2, 2, seed=0)])


# ---------------------------------------------------------------- the plan itself


def _s(name):
    return shapes.size_symbol(name)


def test_the_plan_says_where_each_symbol_comes_from_and_what_is_left_to_check():
    graph = F.find_graph(parse(CASES["s0-and-four-s1"][0]))
    plan = bind_plan(graph)
    assert [(b.symbol, b.place.kind, b.place.input, b.place.index, b.coeff, b.offset) for b in plan.bindings] == [
        ("s0", "dim", 0, 0, 1, 0), ("s1", "dim", 0, 1, 4, 0)]
    # s0's dim is s0 itself; s1's dim must be checked (4*s1 is exact only for a multiple of 4); strides are layouts
    assert [(p.kind, p.index, p.expr) for p in plan.checks] == [("dim", 1, 4 * _s("s1")), ("stride", 0, 4 * _s("s1")),
                                                               ("stride", 1, 1)]
    assert plan.missing == ()


def test_a_symbol_is_solved_once_the_symbols_of_its_coefficient_are_bound():
    types = [F.TensorType(["s0*s1 + 2"], F.F32), F.TensorType(["s0"], F.F32)]
    plan = make_plan("g", types, ["s0", "s1", "s2"])
    assert [(b.symbol, b.place.input, b.coeff, b.offset) for b in plan.bindings] == [("s0", 1, 1, 0), ("s1", 0, _s("s0"), 2)]
    assert plan.missing == ("s2",)
    assert [b.symbol for b in plan.bindings_for(["s1"])] == ["s0", "s1"]  # s1 is solved with s0
    assert plan.bind([torch.empty(3 * 5 + 2), torch.empty(3)]) == {"s0": 3, "s1": 5}
    with pytest.raises(InputMismatch, match=r"input 0 dim 0 is 18, but its type says s0\*s1 \+ 2 = 17 \(s0 = 3 from input 1 dim 0, s1 = 5 from input 0 dim 0\)"):
        plan.bind([torch.empty(18), torch.empty(3)])
    with pytest.raises(UnboundSymbol, match="size symbol 's2'"):
        plan.bindings_for(["s1", "s2"])


def test_a_symbol_only_a_scalar_argument_gives():
    plan = make_plan("g", [F.TensorType([4], F.F32)], ["s0"], scalars=[2 * _s("s0") + 1])
    (b,) = plan.bindings
    assert (b.place.kind, b.place.input, b.coeff, b.offset) == ("scalar", 0, 2, 1)
    assert plan.bind([torch.empty(4)], [7]) == {"s0": 3}
    with pytest.raises(InputMismatch, match=r"scalar argument 0 is 8, but its type says 2\*s0 \+ 1 = 7 \(s0 = 3 from scalar argument 0\)"):
        plan.bind([torch.empty(4)], [8])
    with pytest.raises(UnboundSymbol, match="nor a scalar argument"):
        make_plan("g", [F.TensorType([4], F.F32)], ["s0"], scalars=[_s("s0") ** 2]).require(["s0"])


def test_a_coefficient_that_may_be_zero_does_not_solve():
    plan = make_plan("g", [F.TensorType(["s0*s1 - s1"], F.F32), F.TensorType(["s0"], F.F32)], ["s0", "s1"])
    assert [b.symbol for b in plan.bindings] == ["s0"] and plan.missing == ("s1",)  # s0 = 1 would leave s1 unknown


# ---------------------------------------------------------------- a SymInt argument, through the backend


@pytest.mark.parametrize("execute", ["interpret", "triton"])
def test_a_size_only_a_symint_argument_gives(execute, fresh_dynamo):
    def fn(x, n):
        return x.sum() + torch.full((n,), 2.0), x * 2

    compiled = torch.compile(fn, backend="fusec", dynamic=True, options={"execute": execute})
    for rows, n in ((3, 6), (5, 9)):  # n is a symbol of its own (no input has it as a size): a size carrier
        x = _randn(rows, 4, seed=rows)
        for got, want in zip(compiled(x, n), fn(x, n), strict=True):
            torch.testing.assert_close(got, want)


def test_import_info_binds_a_symint_expression_and_makes_its_carrier_from_it():
    s0, s1 = _s("s0"), _s("s1")
    info = ImportInfo("g", (InputSlot("tensor", 0), InputSlot("symint", expr=2 * s1 + 1)),
                      (F.TensorType([s0], F.F32), F.TensorType([s1], F.I8, [0])), (), (OutputSlot("symint", expr=s0 * s1),),
                      {"s0": (2, None), "s1": (2, None)}, carriers=("s1",))
    x = _randn(5, seed=0)
    assert info.bind_symbols([x, 7]) == {"s0": 5, "s1": 3}
    carrier = info.tensor_inputs([x, 7])[1]
    assert carrier.shape == (3,) and carrier.stride() == (0,)
    assert info.assemble_outputs([], info.bind_symbols([x, 7])) == [15]


def test_inputs_that_break_a_size_fact_are_a_clean_error_in_both_executors():
    """A graph's size facts (``s2*s3 = s0*s1``: Dynamo guarded them) are checked like its dims: a call that breaks one
    gets one error naming it, in the interpreter and in the generated launcher; one that keeps it runs."""
    text = _graph(f"%a : {T('s0, s1')}, %b : {T('s2, s3')}", [("%y", T("s0*s1"))], f"""
    %fa = fusec.reshape %a : {T('s0, s1')} -> {T('s0*s1')}
    %fb = fusec.reshape %b : {T('s2, s3')} -> {T('s0*s1')}
    %y = fusec.pointwise "add" %fa, %fb : ({T('s0*s1')}, {T('s0*s1')}) -> {T('s0*s1')}""",
                  "s0 in [1, inf], s1 in [1, inf], s2 in [1, inf], s3 in [1, inf]").replace(
                      "s3 in [1, inf])", "s3 in [1, inf]) facts(s2*s3 = s0*s1)")
    assert bind_plan(F.find_graph(parse(text))).facts == ((shapes.parse_expr("s2*s3"), shapes.parse_expr("s0*s1")),)
    compiled = compile_module(_default_pipeline(text), {"s0": 4, "s1": 6, "s2": 3, "s3": 8})
    a, b = _randn(4, 6, seed=0), _randn(3, 8, seed=1)
    for run in (lambda xs: interpreter.run(parse(text), xs), compiled):
        torch.testing.assert_close(run([a, b])[0], a.reshape(-1) + b.reshape(-1))
        torch.testing.assert_close(run([a, b.reshape(2, 12)])[0], a.reshape(-1) + b.reshape(-1))  # other sizes, same fact
    broken = r"@g: the inputs break the graph's size fact s2\*s3 = s0\*s1: 15 != 24"
    with pytest.raises(interpreter.InterpreterError, match=broken):
        interpreter.run(parse(text), [a, _randn(3, 5, seed=1)])
    with pytest.raises(InputMismatch, match=broken):
        compiled([a, _randn(3, 5, seed=1)])
