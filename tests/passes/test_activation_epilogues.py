"""activation-epilogues: mm + row bias + ReLU or tanh-GELU becomes one aten._addmm_activation (cuBLASLt's epilogue):
recognised by what the ops compute, run against the reference interpreter (ReLU on the CPU) and eager (GPU)."""

import math

import pytest
import torch
import torch.nn.functional as Fn

from fusec.base import remarks
from fusec.dialects import fusec as F
from fusec.passes.activation_epilogues import ActivationEpilogues
from fusec.pipeline import default_pipeline_spec, run_pipeline
from fusec.registry import make_context
from fusec.runtime import compile_module, interpreter
from fusec.testing import assert_same_results, parse, random_inputs


def _t(shape: str, dtype: str) -> str:
    return f"!fusec.tensor<[{shape}], {dtype}>"


def linear(dtype: str, activation: str, device: str = "cuda", constants: dict[str, float] | None = None) -> str:
    """x [s0, 24] @ w [24, 40] + b, then ``activation`` spelled as GPT-2's gelu_new (``gelu``) or ``relu``."""
    k = {"half": 0.5, "kappa": 0.044715, "beta": math.sqrt(2 / math.pi), "one": 1.0} | (constants or {})
    x, w, b, y, s = _t("s0, 24", dtype), _t("24, 40", dtype), _t("40", dtype), _t("s0, 40", dtype), _t("", "f32")
    body = f"""    %p = fusec.extern "aten.mm.default"(%x, %w) : ({x}, {w}) -> {y}
    %h = fusec.pointwise "add" %p, %b : ({y}, {b}) -> {y}
"""
    if activation == "relu":
        body += f'    %g = fusec.pointwise "relu" %h : ({y}) -> {y}\n'
    else:
        body += "".join(f"    %{n} = fusec.constant {v!r} : {s}\n" for n, v in k.items())
        body += f"""    %a = fusec.pointwise "mul" %half, %h : ({s}, {y}) -> {y}
    %cube = fusec.pointwise "mul" %h, %h : ({y}, {y}) -> {y}
    %cube3 = fusec.pointwise "mul" %h, %cube : ({y}, {y}) -> {y}
    %kc = fusec.pointwise "mul" %cube3, %kappa : ({y}, {s}) -> {y}
    %in = fusec.pointwise "add" %kc, %h : ({y}, {y}) -> {y}
    %arg = fusec.pointwise "mul" %beta, %in : ({s}, {y}) -> {y}
    %t = fusec.pointwise "tanh" %arg : ({y}) -> {y}
    %t1 = fusec.pointwise "add" %t, %one : ({y}, {s}) -> {y}
    %g = fusec.pointwise "mul" %t1, %a : ({y}, {y}) -> {y}
"""
    body += f"    fusec.output %g : {y}"
    return (f'builtin.module {{\n  fusec.graph @g(%x : {x}, %w : {w}, %b : {b}) -> ({y}) symbols(s0 in [1, inf]) '
            f'attributes {{fusec.device = "{device}"}} {{\n{body}\n  }}\n}}')


def _calls(module) -> list[str]:
    return [op.target.data for op in module.walk() if isinstance(op, F.ExternOp)]


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_relu_runs_in_the_matmuls_epilogue_and_gives_the_reference_interpreters_results(dtype):
    """On the CPU (when=always: torch's CPU _addmm_activation has the same ReLU), a symbolic row count."""
    text = linear(dtype, "relu", device="cpu")
    reference, module = parse(text), parse(text)
    run_pipeline(make_context(), module, default_pipeline_spec().replace("activation-epilogues",
                                                                          "activation-epilogues{when=always}"))
    assert _calls(module) == ["aten._addmm_activation.default"]
    compiled = compile_module(module, {"s0": 33})
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == "f32" else {"rtol": 2e-2, "atol": 2e-2}
    for rows in (1, 33, 70):
        inputs = random_inputs(reference, {"s0": rows}, seed=rows)
        assert_same_results(interpreter.run(reference, inputs), compiled(inputs), **tol)


def test_a_linear_layer_viewed_back_to_three_dims_before_its_activation():
    """GPT-2's Conv1D: addmm on the flattened rows, a reshape to [batch, seq, features], then the activation: the
    call's result is reshaped instead (an elementwise function commutes with a row-major reshape)."""
    x, w, b = _t("2*s0, 24", "f32"), _t("24, 40", "f32"), _t("40", "f32")
    y, y3 = _t("2*s0, 40", "f32"), _t("2, s0, 40", "f32")
    text = (f'builtin.module {{\n  fusec.graph @g(%x : {x}, %w : {w}, %b : {b}) -> ({y3}) symbols(s0 in [1, inf]) '
            f'attributes {{fusec.device = "cpu"}} {{\n'
            f'    %p = fusec.extern "aten.mm.default"(%x, %w) : ({x}, {w}) -> {y}\n'
            f'    %h = fusec.pointwise "add" %p, %b : ({y}, {b}) -> {y}\n'
            f'    %v = fusec.reshape %h : {y} -> {y3}\n'
            f'    %g = fusec.pointwise "relu" %v : ({y3}) -> {y3}\n'
            f'    fusec.output %g : {y3}\n  }}\n}}')
    reference, module = parse(text), parse(text)
    run_pipeline(make_context(), module, default_pipeline_spec().replace("activation-epilogues",
                                                                          "activation-epilogues{when=always}"))
    assert _calls(module) == ["aten._addmm_activation.default"]
    compiled = compile_module(module, {"s0": 16})
    for rows in (1, 16, 35):
        inputs = random_inputs(reference, {"s0": rows}, seed=rows)
        assert_same_results(interpreter.run(reference, inputs), compiled(inputs), rtol=1e-5, atol=1e-5)


def test_a_tanh_gelu_in_other_words_is_recognised_only_on_cuda_graphs():
    module = parse(linear("bf16", "gelu"))
    ActivationEpilogues().apply(make_context(), module)
    assert _calls(module) == ["aten._addmm_activation.default"]
    (call,) = [op for op in module.walk() if isinstance(op, F.ExternOp)]
    assert call.kwargs.data["use_gelu"].data is True
    cpu = parse(linear("bf16", "gelu", device="cpu"))
    ActivationEpilogues(when="always").apply(make_context(), cpu)  # CPU's _addmm_activation computes erf's GELU
    assert _calls(cpu) == ["aten.mm.default"]


@pytest.mark.parametrize("constant,value", [("half", 0.5001), ("kappa", 0.04472), ("beta", 0.7979), ("one", 1.001)])
def test_a_function_near_tanh_gelu_is_not_taken_for_it(constant, value):
    """Each constant of the formula a little off: another function, left as it is."""
    module = parse(linear("f32", "gelu", constants={constant: value}))
    ActivationEpilogues().apply(make_context(), module)
    assert _calls(module) == ["aten.mm.default"]


def test_bad_options_say_what_is_wrong():
    with pytest.raises(ValueError, match="when must be one of accelerator, always, never"):
        ActivationEpilogues(when="sometimes")


def _gelu_new(x, w, b):
    h = Fn.linear(x, w, b)
    return 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * torch.pow(h, 3.0))))


def _gelu_tanh(x, w, b):
    return Fn.gelu(Fn.linear(x, w, b), approximate="tanh")


def _relu(x, w, b):
    return torch.relu(Fn.linear(x, w, b))


@pytest.mark.parametrize("fn", [_gelu_new, _gelu_tanh, _relu])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_linear_activations_on_the_gpu_match_eager(fn, dtype, tmp_path, fresh_dynamo):
    """cuBLASLt's bias + activation epilogue, against eager on fp64 copies, and the remark saying so."""
    g = torch.Generator().manual_seed(0)
    x, w, b = (torch.randn(*s, generator=g).to("cuda", dtype) for s in ((300, 256), (512, 256), (512,)))
    got = torch.compile(fn, backend="fusec", options={"dump_dir": str(tmp_path)})(x, w / 16, b)
    want = fn(x.double(), (w / 16).double(), b.double())
    error = ((got.double() - want).norm() / want.norm()).item()
    exact = dtype == torch.float32 and fn is not _relu  # torch's default precision, 'highest': no cuBLASLt GELU
    assert error < (2e-2 if dtype != torch.float32 else 1e-5 if exact else 1e-3), error
    code = "activation-epilogues: fp32-exact:" if exact else "activation-epilogues: activation-epilogue:"
    assert any(code in p.read_text() for p in tmp_path.rglob("remarks.txt"))


def test_an_exact_fp32_gelu_stays_a_matmul_and_a_kernel():
    """At float32_matmul_precision 'highest', cuBLASLt's GELU (1.7e-6 relative error on an H200) is less exact than
    eager's (1.8e-7): the fp32 tanh-GELU is left alone, with a remark; at 'high' (TF32) it moves; ReLU always."""
    for precision, calls in (("highest", ["aten.mm.default"]), ("high", ["aten._addmm_activation.default"])):
        text = linear("f32", "gelu").replace('attributes {fusec.device = "cuda"}', 'attributes {fusec.device = "cuda", '
                                             f'fusec.float32_matmul_precision = "{precision}"}}')
        module = parse(text)
        with remarks.collect() as got:
            ActivationEpilogues().apply(make_context(), module)
        assert _calls(module) == calls, precision
        assert any(r.code == "fp32-exact" for r in got.remarks) == (precision == "highest"), got.text()
    relu = parse(linear("f32", "relu").replace('{fusec.device = "cuda"}',
                                               '{fusec.device = "cuda", fusec.float32_matmul_precision = "highest"}'))
    ActivationEpilogues().apply(make_context(), relu)
    assert _calls(relu) == ["aten._addmm_activation.default"]
