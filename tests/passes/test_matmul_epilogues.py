"""matmul-epilogues: matmul kernels give the reference interpreter's results (Triton's interpreter, tl.dot) and eager's,
values and gradients, static and symbolic; the GPU runs the same checks on tensor cores."""

import math

import pytest
import torch
import torch.nn.functional as Fn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fusec.dialects import fusec as F
from fusec.passes.matmul_epilogues import MatmulEpilogues
from fusec.passes.schedule_kernels import ScheduleKernels
from fusec.pipeline import default_pipeline_spec, run_pipeline
from fusec.registry import make_context
from fusec.runtime import compile_module, interpreter
from fusec.testing import assert_same_results, kernels, parse, random_inputs

# The Triton matmul route: activation-epilogues would send a linear + bias + GELU on CUDA to cuBLASLt instead.
FORCED = default_pipeline_spec().replace("matmul-epilogues", "matmul-epilogues{when=always cost-rule=false}").replace(
    "activation-epilogues", "activation-epilogues{when=never}")
ON_GPU = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def _graph(name: str, args: str, outs: str, body: str, symbols: str = "") -> str:
    return f"builtin.module {{\n  fusec.graph @{name}({args}) -> ({outs}) {symbols} {{\n{body}\n  }}\n}}"


def _t(shape: str, dtype: str, strides: str = "") -> str:
    return f"!fusec.tensor<[{shape}], {dtype}{', strides [' + strides + ']' if strides else ''}>"


def linear(dtype: str, k: int = 40, epilogue: str = "tanh") -> str:
    """x [s0, k] @ w.t() (w [24, k]) + b, then ``epilogue``, plus a residual: a ragged k (not a multiple of a step)."""
    x, w, b, y = _t(f"s0, {k}", dtype), _t(f"24, {k}", dtype), _t("24", dtype), _t("s0, 24", dtype)
    wt = _t(f"{k}, 24", dtype, f"1, {k}")
    body = f"""    %wt = fusec.permute %w [1, 0] : {w} -> {wt}
    %p = fusec.extern "aten.mm.default"(%x, %wt) : ({x}, {wt}) -> {y}
    %h = fusec.pointwise "add" %p, %b : ({y}, {b}) -> {y}
    %e = fusec.pointwise "{epilogue}" %h : ({y}) -> {y}
    %o = fusec.pointwise "add" %e, %r : ({y}, {y}) -> {y}
    fusec.output %o, %p : {y}, {y}"""
    return _graph("linear", f"%x : {x}, %w : {w}, %b : {b}, %r : {y}", f"{y}, {y}", body, "symbols(s0 in [1, inf])")


def scores(dtype: str) -> str:
    """bmm of [3, 20, 16] by [3, 16, 33], scaled, plus a broadcast mask."""
    q, k, s, m = _t("3, 20, 16", dtype), _t("3, 16, 33", dtype), _t("3, 20, 33", dtype), _t("20, 33", dtype)
    body = f"""    %s = fusec.extern "aten.bmm.default"(%q, %k) : ({q}, {k}) -> {s}
    %c = fusec.constant 0.25 : !fusec.tensor<[], {dtype}>
    %t = fusec.pointwise "mul" %s, %c : ({s}, !fusec.tensor<[], {dtype}>) -> {s}
    %y = fusec.pointwise "add" %t, %m : ({s}, {m}) -> {s}
    fusec.output %y : {s}"""
    return _graph("scores", f"%q : {q}, %k : {k}, %m : {m}", s, body)


def padded(dtype: str) -> str:
    """A padded product read through its slice (pad-matmuls' LM head): the epilogue's points are its first columns."""
    x, w, p, s = _t("s0, 24", dtype), _t("24, 40", dtype), _t("s0, 40", dtype), _t("s0, 33", dtype, "40, 1")
    body = f"""    %p = fusec.extern "aten.mm.default"(%x, %w) : ({x}, {w}) -> {p}
    %s = fusec.slice %p dim 1 start 0 step 1 : {p} -> {s}
    %o = fusec.pointwise "neg" %s : ({s}) -> {_t("s0, 33", dtype)}
    fusec.output %o : {_t("s0, 33", dtype)}"""
    return _graph("head", f"%x : {x}, %w : {w}", _t("s0, 33", dtype), body, "symbols(s0 in [1, inf])")


CASES = {"linear-bf16": linear("bf16"), "padded-bf16": padded("bf16"), "linear-f16-relu": linear("f16", k=64, epilogue="relu"),
         "linear-f32": linear("f32", k=17), "bmm-f32": scores("f32"), "bmm-bf16": scores("bf16")}


PADDED = FORCED.replace("pad-matmuls", "pad-matmuls{when=always cost-rule=false}")


def _fused(text: str, spec: str = FORCED, required: bool = True):
    """The module after ``spec``; ``required``: its matmul must have become a matmul kernel."""
    module = parse(text)
    run_pipeline(make_context(), module, spec)
    if required:
        matmuls = [k for k in kernels(module) if k.is_matmul]
        assert len(matmuls) == 1 and matmuls[0].schedule.kind == "matmul"
        assert not [op for op in module.walk() if isinstance(op, F.ExternOp)]
    return module


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=ON_GPU)])
@pytest.mark.parametrize("name", list(CASES))
def test_matmul_kernels_give_the_reference_interpreters_results(name, device):
    reference, module = parse(CASES[name]), _fused(CASES[name])
    compiled = compile_module(module, {"s0": 33})
    tol = {"rtol": 2e-2, "atol": 2e-2} if "f32" not in name else {"rtol": 1e-4, "atol": 1e-4}
    for size in (1, 33, 70):  # one compiled artifact: a partial tile, a full one, several
        inputs = random_inputs(reference, {"s0": size}, seed=size)
        got = [t.cpu() for t in compiled([t.to(device) for t in inputs])]
        assert_same_results(interpreter.run(reference, inputs), got, **tol)


def lm_head(dtype: str) -> str:
    """x [s0, 24] @ w.t() with w [33, 24]: 33 outputs, rows pad-matmuls pads (bf16: 66 bytes) for cuBLAS."""
    x, w, wt, y = _t("s0, 24", dtype), _t("33, 24", dtype), _t("24, 33", dtype, "1, 24"), _t("s0, 33", dtype)
    body = f"""    %wt = fusec.permute %w [1, 0] : {w} -> {wt}
    %p = fusec.extern "aten.mm.default"(%x, %wt) : ({x}, {wt}) -> {y}
    %o = fusec.pointwise "neg" %p : ({y}) -> {y}
    fusec.output %o : {y}"""
    return _graph("lm_head", f"%x : {x}, %w : {w}", y, body, "symbols(s0 in [1, inf])")


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=ON_GPU)])
def test_a_matmul_kernel_reads_the_weight_not_its_zero_padded_copy(device):
    """pad-matmuls pads the weight's rows for cuBLAS; fused into a Triton kernel, the product reads the weight itself
    over its rows, the padding's columns not computed at all: no copy is made."""
    text = lm_head("bf16")
    reference, module = parse(text), parse(text)
    got_remarks = run_pipeline(make_context(), module, PADDED)
    (matmul,) = [k for k in kernels(module) if k.is_matmul]
    assert [k.sym_name.data for k in kernels(module)] == [matmul.sym_name.data]  # no padding kernel
    graph = next(op for op in module.walk() if isinstance(op, F.GraphOp))
    assert matmul.inputs[1] is graph.block.args[1] and matmul.matmul_dims[2] == 33  # the weight, its 33 columns
    assert any("not its zero-padded copy" in r.message for r in got_remarks.remarks), got_remarks.text()
    compiled = compile_module(module, {"s0": 33})
    for size in (1, 33, 70):
        inputs = random_inputs(reference, {"s0": size}, seed=size)
        got = [t.cpu() for t in compiled([t.to(device) for t in inputs])]
        assert_same_results(interpreter.run(reference, inputs), got, rtol=2e-2, atol=2e-2)


def test_the_interpreter_runs_a_matmul_kernel_as_the_reduction_it_is():
    reference, module = parse(CASES["bmm-f32"]), _fused(CASES["bmm-f32"])
    inputs = random_inputs(reference, {}, seed=3)
    assert_same_results(interpreter.run(reference, inputs), interpreter.run(module, inputs), rtol=1e-5, atol=1e-5)


def _lin_gelu(x, w, b):
    return Fn.gelu(x @ w.t() + b, approximate="tanh")


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=ON_GPU)])
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_a_linear_gelu_training_step_matches_eager(device, dynamic, fresh_dynamo):
    """The forward is one matmul kernel that also stores the pre-activation its backward reads."""
    g = torch.Generator().manual_seed(0)
    w = (torch.randn(48, 40, generator=g) / 6).to(device, torch.bfloat16)
    b = torch.randn(48, generator=g).to(device, torch.bfloat16)
    compiled = torch.compile(_lin_gelu, backend="fusec", dynamic=dynamic, options={"pipeline": FORCED})
    _training_steps_match(_lin_gelu, compiled, (w, b), (37, 64) if dynamic else (37,), g, device)


def _training_steps_match(fn, compiled, weights, row_counts, g, device) -> None:
    """``compiled`` against ``fn`` on bf16 x [rows, 40] and ``weights``: outputs, and gradients of every argument."""
    for rows in row_counts:
        x = torch.randn(rows, 40, generator=g).to(device, torch.bfloat16)
        args = [[t.clone().requires_grad_() for t in (x, *weights)] for _ in range(2)]
        want, got = fn(*args[0]), compiled(*args[1])
        torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)
        want.float().square().sum().backward()
        got.float().square().sum().backward()
        for a, e in zip(args[1], args[0], strict=True):  # bf16 gradients of sums: compared in norm, as eager's error is
            assert (a.grad.float() - e.grad.float()).norm() <= 1e-2 * e.grad.float().norm()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("precision", ["highest", "high"])
def test_fp32_matmul_kernels_follow_torchs_matmul_precision(precision, fresh_dynamo):
    """Exact fp32 (ieee) at 'highest': eager's result to fp32 rounding; TF32 at 'high': within TF32's error of the
    exact product (the schedule records tf32, see tests/filecheck/matmul_epilogues/fused.mlir)."""
    saved = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(precision)
    try:
        g = torch.Generator().manual_seed(1)
        x, w, b = (torch.randn(*s, generator=g).cuda() for s in ((300, 200), (96, 200), (96,)))
        w = w / 200**0.5
        got = torch.compile(_lin_gelu, backend="fusec", options={"pipeline": FORCED})(x, w, b)
        exact = _lin_gelu(x.double(), w.double(), b.double())
        error = ((got.double() - exact).norm() / exact.norm()).item()
        assert error < (1e-6 if precision == "highest" else 2e-3), error
    finally:
        torch.set_float32_matmul_precision(saved)


# merge-matmuls (GPU graphs only) would first make the gate and up projections one cuBLAS call on concatenated
# weights, whose product the epilogue reads as two column blocks, not element for element: no siblings left to pair.
SIBLINGS = FORCED.replace("matmul-epilogues{when=always cost-rule=false}",
                          "matmul-epilogues{when=always cost-rule=false siblings=true}").replace(
    "merge-matmuls", "merge-matmuls{when=never}")


def swiglu(dtype: str, k: int = 40) -> str:
    """silu(x @ wg.t()) * (x @ wu.t()): SwiGLU's gate and up projections of one input, read by one kernel."""
    x, w, y = _t(f"s0, {k}", dtype), _t(f"24, {k}", dtype), _t("s0, 24", dtype)
    wt = _t(f"{k}, 24", dtype, f"1, {k}")
    body = f"""    %wgt = fusec.permute %wg [1, 0] : {w} -> {wt}
    %g = fusec.extern "aten.mm.default"(%x, %wgt) : ({x}, {wt}) -> {y}
    %wut = fusec.permute %wu [1, 0] : {w} -> {wt}
    %u = fusec.extern "aten.mm.default"(%x, %wut) : ({x}, {wt}) -> {y}
    %sg = fusec.pointwise "sigmoid" %g : ({y}) -> {y}
    %s = fusec.pointwise "mul" %g, %sg : ({y}, {y}) -> {y}
    %h = fusec.pointwise "mul" %s, %u : ({y}, {y}) -> {y}
    fusec.output %h : {y}"""
    return _graph("swiglu", f"%x : {x}, %wg : {w}, %wu : {w}", y, body, "symbols(s0 in [1, inf])")


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=ON_GPU)])
@pytest.mark.parametrize("dtype", ["bf16", "f32"])
def test_sibling_products_run_in_one_main_loop(dtype, device):
    """With siblings=true, the gate and up products come from one kernel of two accumulators (A's tile loaded once),
    and its epilogue computes silu(gate) * up: no product is written.  Without it, the up product stays cuBLAS's."""
    text = swiglu(dtype, k=40 if dtype == "bf16" else 17)
    reference, module = parse(text), _fused(text, SIBLINGS)
    (matmul,) = kernels(module)
    assert len([op for op in matmul.block.ops if isinstance(op, F.ReduceROp)]) == 2
    assert matmul.schedule.tiles.warps == 8 and len(matmul.inputs) == 3
    compiled = compile_module(module, {"s0": 33})
    (source,) = [k.source for k in compiled.launcher.kernels]
    assert source.count("tl.dot(") == 2, source
    tol = {"rtol": 2e-2, "atol": 2e-2} if dtype == "bf16" else {"rtol": 1e-4, "atol": 1e-4}
    for size in (1, 33, 70):
        inputs = random_inputs(reference, {"s0": size}, seed=size)
        got = [t.cpu() for t in compiled([t.to(device) for t in inputs])]
        assert_same_results(interpreter.run(reference, inputs), got, **tol)
    without = parse(text)
    run_pipeline(make_context(), without, FORCED)
    assert [op.target.data for op in without.walk() if isinstance(op, F.ExternOp)] == ["aten.mm.default"]


def _swiglu(x, wg, wu):
    return Fn.silu(x @ wg.t()) * (x @ wu.t())


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=ON_GPU)])
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_a_swiglu_training_step_matches_eager(device, dynamic, fresh_dynamo, tmp_path):
    """The forward is one matmul kernel of two accumulators that also stores both products for the backward."""
    g = torch.Generator().manual_seed(0)
    wg, wu = ((torch.randn(48, 40, generator=g) / 6).to(device, torch.bfloat16) for _ in range(2))
    options = {"pipeline": SIBLINGS, "dump_dir": str(tmp_path)}
    compiled = torch.compile(_swiglu, backend="fusec", dynamic=dynamic, options=options)
    _training_steps_match(_swiglu, compiled, (wg, wu), (37, 64) if dynamic else (37,), g, device)
    forward = "".join(p.read_text() for p in tmp_path.glob("forward_*/remarks.txt"))
    assert "in the same main loop (two accumulators), its product also stored for the graph output" in forward, forward


def test_bad_options_say_what_is_wrong():
    with pytest.raises(ValueError, match="when must be one of accelerator, always, never"):
        MatmulEpilogues(when="sometimes")
    with pytest.raises(ValueError, match=r"efficiency must be in \(0, 2\]"):
        MatmulEpilogues(efficiency=0)
    with pytest.raises(ValueError, match="matmul-tile must be BMxBNxBKxWARPSxSTAGES"):
        ScheduleKernels(matmul_tile="128x128")
    with pytest.raises(ValueError, match="block sizes are powers of 2 of at least 16"):
        ScheduleKernels(matmul_tile="128x96x64x4x3")


_LAYOUTS = st.tuples(st.booleans(), st.booleans())  # (A stored transposed, B stored transposed)


@settings(derandomize=True, deadline=None, database=None, max_examples=25, suppress_health_check=list(HealthCheck))
@given(batch=st.sampled_from([1, 3]), m=st.integers(1, 40), n=st.integers(1, 40), k=st.integers(1, 70),
       layout=_LAYOUTS, dtype=st.sampled_from(["f32", "bf16"]), epilogue=st.sampled_from(["neg", "exp", "relu"]),
       symbolic=st.booleans(), padded=st.booleans())
def test_generated_matmuls_give_the_reference_interpreters_results(batch, m, n, k, layout, dtype, epilogue, symbolic,
                                                                   padded):
    """Random sizes (a tile's ragged edges in m, n and k), operands stored transposed (a weight read as ``w.t()``, a
    weight gradient's ``grad.t() @ x``), batched or not, a symbolic M, and (``padded``) misaligned rows zero-padded
    by pad-matmuls first (a weight's padded copy the matmul kernel may read around): the matmul kernel under Triton's
    interpreter against the reference interpreter on the graph before any pass."""
    lead = [str(batch)] if batch != 1 else []
    rows = "s0" if symbolic else str(m)

    def operand(name: str, dims: list[str], transposed: bool) -> tuple[str, str, str]:
        """(graph argument, its type, the view ops giving the [.., rows, cols] operand)."""
        want = _t(", ".join(lead + dims), dtype)
        if not transposed:
            return f"%{name} : {want}", f"%{name}", ""
        stored = _t(", ".join(lead + dims[::-1]), dtype)
        perm = [0, 2, 1] if lead else [1, 0]
        strides = ", ".join(([f"{dims[0]}*{dims[1]}"] if lead else []) + ["1", dims[0]])
        view = _t(", ".join(lead + dims), dtype, strides)
        return (f"%{name} : {stored}", f"%{name}t",
                f"    %{name}t = fusec.permute %{name} [{', '.join(map(str, perm))}] : {stored} -> {view}\n")

    a_arg, a, a_view = operand("a", [rows, str(k)], layout[0])
    b_arg, b, b_view = operand("b", [str(k), str(n)], layout[1])
    a_type = _t(", ".join(lead + [rows, str(k)]), dtype, ", ".join(([f"{rows}*{k}"] if lead else []) + ["1", rows]) if layout[0] else "")
    b_type = _t(", ".join(lead + [str(k), str(n)]), dtype, ", ".join(([f"{k}*{n}"] if lead else []) + ["1", str(k)]) if layout[1] else "")
    p = _t(", ".join(lead + [rows, str(n)]), dtype)
    target = "aten.bmm.default" if lead else "aten.mm.default"
    body = (a_view + b_view + f'    %p = fusec.extern "{target}"({a}, {b}) : ({a_type}, {b_type}) -> {p}\n'
            f'    %e = fusec.pointwise "{epilogue}" %p : ({p}) -> {p}\n    fusec.output %e : {p}')
    text = _graph("g", f"{a_arg}, {b_arg}", p, body, "symbols(s0 in [1, inf])" if symbolic else "")
    # Padded, a product read at one element ([1, 1]: index 0) is not recognised as elementwise and stays cuBLAS's.
    reference, module = parse(text), _fused(text, PADDED if padded else FORCED, required=not padded)
    compiled = compile_module(module, {"s0": m})
    for rows_now in ([m, m + 17] if symbolic else [m]):
        inputs = random_inputs(reference, {"s0": rows_now}, seed=rows_now)
        want = interpreter.run(reference, inputs)
        tol = {"rtol": 1e-4, "atol": 1e-4} if dtype == "f32" else {"rtol": 2e-2, "atol": 2e-2}
        if dtype == "bf16" and epilogue == "exp":
            # A product rounded to bf16 one ulp apart (another summation order) is exp's input: a relative error
            # of up to |x| * 2^-7 in its output, x = log(output).
            top = max(float(w.float().abs().max()) for w in want)
            tol["rtol"] += 2**-7 * max(1.0, abs(math.log(max(top, 1e-30))))
        assert_same_results(want, compiled(inputs), **tol)


@settings(derandomize=True, deadline=None, database=None, max_examples=15, suppress_health_check=list(HealthCheck))
@given(batch=st.sampled_from([1, 3]), m=st.integers(1, 40), n=st.integers(1, 40), k=st.integers(1, 70),
       transposed=st.booleans(), dtype=st.sampled_from(["f32", "bf16"]), symbolic=st.booleans())
def test_generated_sibling_products_give_the_reference_interpreters_results(batch, m, n, k, transposed, dtype,
                                                                            symbolic):
    """Random sizes, batched or not, B stored transposed or not, a symbolic M: ``sigmoid(a @ b1) * (a @ b2)`` as one
    kernel of two accumulators (siblings=true) under Triton's interpreter, against the reference interpreter."""
    lead = [str(batch)] if batch != 1 else []
    rows = "s0" if symbolic else str(m)
    a_t, p = _t(", ".join(lead + [rows, str(k)]), dtype), _t(", ".join(lead + [rows, str(n)]), dtype)
    if transposed:
        stored = _t(", ".join(lead + [str(n), str(k)]), dtype)
        view = _t(", ".join(lead + [str(k), str(n)]), dtype, ", ".join(([f"{k}*{n}"] if lead else []) + ["1", str(k)]))
        perm = "[0, 2, 1]" if lead else "[1, 0]"
        views = "".join(f"    %b{i}t = fusec.permute %b{i} {perm} : {stored} -> {view}\n" for i in (1, 2))
        b_names = ("%b1t", "%b2t")
    else:
        stored = view = _t(", ".join(lead + [str(k), str(n)]), dtype)
        views, b_names = "", ("%b1", "%b2")
    target = "aten.bmm.default" if lead else "aten.mm.default"
    body = views + "".join(f'    %p{i} = fusec.extern "{target}"(%a, {b}) : ({a_t}, {view}) -> {p}\n'
                           for i, b in zip((1, 2), b_names, strict=True))
    body += (f'    %s = fusec.pointwise "sigmoid" %p1 : ({p}) -> {p}\n'
             f'    %e = fusec.pointwise "mul" %s, %p2 : ({p}, {p}) -> {p}\n    fusec.output %e : {p}')
    text = _graph("g", f"%a : {a_t}, %b1 : {stored}, %b2 : {stored}", p, body,
                  "symbols(s0 in [1, inf])" if symbolic else "")
    reference, module = parse(text), _fused(text, SIBLINGS)
    assert len([op for op in kernels(module)[0].block.ops if isinstance(op, F.ReduceROp)]) == 2
    compiled = compile_module(module, {"s0": m})
    tol = {"rtol": 1e-4, "atol": 1e-4} if dtype == "f32" else {"rtol": 2e-2, "atol": 2e-2}
    for rows_now in ([m, m + 17] if symbolic else [m]):
        inputs = random_inputs(reference, {"s0": rows_now}, seed=rows_now)
        assert_same_results(interpreter.run(reference, inputs), compiled(inputs), **tol)


def _llama_mlp_gate_up(x, wg, wu):
    return Fn.silu(Fn.linear(x, wg)) * Fn.linear(x, wu)


def test_linear_layers_of_one_hidden_state_are_siblings(tmp_path, fresh_dynamo):
    """[B, T, C] hidden states: AOTAutograd gives each linear layer its own view to [B*T, C]; the two views of one
    tensor are one A (``_same_view``), so the gate and up projections still share a main loop."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 37, 40, generator=g).to(torch.bfloat16)
    wg, wu = ((torch.randn(48, 40, generator=g) / 6).to(torch.bfloat16) for _ in range(2))
    compiled = torch.compile(_llama_mlp_gate_up, backend="fusec", options={"pipeline": SIBLINGS, "dump_dir": str(tmp_path)})
    with torch.no_grad():
        torch.testing.assert_close(compiled(x, wg, wu), _llama_mlp_gate_up(x, wg, wu), rtol=2e-2, atol=2e-2)
    remarks = "".join(p.read_text() for p in tmp_path.glob("*/remarks.txt"))
    assert "in the same main loop (two accumulators)" in remarks and "not-elementwise" not in remarks, remarks


def test_a_matmul_whose_b_is_the_others_product_is_no_sibling():
    """u = x @ g where g = x @ wg: one A and one size, but u needs g first: the epilogue reaches g's matmul through
    u's (a dependence cycle for either as the other's sibling), no main loop is shared, and the results stay the
    reference interpreter's."""
    x, y = _t("32, 32", "f32"), _t("32, 32", "f32")
    body = f"""    %g = fusec.extern "aten.mm.default"(%x, %wg) : ({x}, {x}) -> {y}
    %u = fusec.extern "aten.mm.default"(%x, %g) : ({x}, {y}) -> {y}
    %sg = fusec.pointwise "sigmoid" %g : ({y}) -> {y}
    %h = fusec.pointwise "mul" %sg, %u : ({y}, {y}) -> {y}
    fusec.output %h : {y}"""
    text = _graph("chained", f"%x : {x}, %wg : {x}", y, body)
    reference, module = parse(text), _fused(text, SIBLINGS, required=False)
    matmuls = [k for k in kernels(module) if k.is_matmul]
    assert all(len([op for op in k.block.ops if isinstance(op, F.ReduceROp)]) == 1 for k in matmuls), matmuls
    inputs = random_inputs(reference, {}, seed=5)
    assert_same_results(interpreter.run(reference, inputs), compile_module(module, {})(inputs), rtol=1e-4, atol=1e-4)
