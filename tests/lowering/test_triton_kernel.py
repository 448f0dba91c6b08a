"""Kernel-level IR -> Triton, run under Triton's interpreter, compared with torch eager and fusec.runtime.interpreter."""

import math

import pytest
import torch
from kernel_cases import LOOPED, PERSISTENT, compile_text, kernel_module, only_kernel, randn

from fusec.base import dtypes
from fusec.dialects import fusec as F
from fusec.lowering.triton_kernel import LoweringOptions, lower_kernel
from fusec.runtime import interpreter
from fusec.testing import parse

MODES = pytest.mark.parametrize("options", [PERSISTENT, LOOPED], ids=["persistent", "looped"])


def run_both(text, inputs, hints=None, options=PERSISTENT):
    """The compiled kernel's outputs and the reference interpreter's, on the same inputs."""
    module, compiled = compile_text(text, hints, options)
    return compiled(inputs), interpreter.run(module, inputs), compiled


# ---------------------------------------------------------------- pointwise


POINTWISE_BROADCAST = kernel_module(
    "fusec_poi_mul_add_sigmoid_0", "64*s0",
    ["!fusec.tensor<[s0, 64], f32>", "!fusec.tensor<[64], f32>", "!fusec.tensor<[s0, 1], f32>"],
    ["!fusec.tensor<[s0, 64], f32>"],
    """      %a = fusec.load %in0[x] : !fusec.tensor<[s0, 64], f32>
      %b = fusec.load %in1[mod(x, 64)] : !fusec.tensor<[64], f32>
      %c = fusec.load %in2[floordiv(x, 64)] : !fusec.tensor<[s0, 1], f32>
      %m = fusec.pointwise "mul" %a, %b : (f32, f32) -> f32
      %s = fusec.pointwise "add" %m, %c : (f32, f32) -> f32
      %y = fusec.pointwise "sigmoid" %s : (f32) -> f32
      fusec.store %y, %out0[x] : !fusec.tensor<[s0, 64], f32>""")


def test_pointwise_with_broadcast_loads_several_sizes_one_artifact():
    module, compiled = compile_text(POINTWISE_BROADCAST, {"s0": 8})
    kernel = only_kernel(compiled)
    assert kernel.kind == "pointwise" and kernel.name == "fusec_poi_mul_add_sigmoid_0"
    assert [name for name, _ in kernel.size_args] == ["xnumel"]
    assert "xindex % 64" in kernel.source and "xindex // 64" in kernel.source
    for rows in (1, 3, 8, 13):
        a, b, c = randn(rows, 64, seed=rows), randn(64, seed=1), randn(rows, 1, seed=2)
        (out,) = compiled([a, b, c])
        torch.testing.assert_close(out, torch.sigmoid(a * b + c))
    assert len(compiled._calls) == 1  # one launcher, one kernel module for every size


# ---------------------------------------------------------------- reductions

ROW = "!fusec.tensor<[s0, 37], f32>"
ROWS = "!fusec.tensor<[s0], f32>"
ROW_SUM = kernel_module("fusec_red_sum_0", "s0, 37", [ROW], [ROWS], f"""      %v = fusec.load %in0[37*x + r] : {ROW}
      %s = fusec.reduce_r "sum" %v : f32 -> f32
      fusec.store %s, %out0[x] : {ROWS}""")


def test_persistent_row_sum():
    module, compiled = compile_text(ROW_SUM, {"s0": 6})
    kernel = only_kernel(compiled)
    assert kernel.kind == "persistent" and kernel.name == "fusec_per_sum_0"
    assert "for roffset" not in kernel.source
    for rows in (1, 6, 9):
        a = randn(rows, 37, seed=rows)
        (out,) = compiled([a])
        torch.testing.assert_close(out, a.sum(1))


def test_looped_row_sum():
    module, compiled = compile_text(ROW_SUM, {"s0": 6}, LOOPED)
    kernel = only_kernel(compiled)
    assert kernel.kind == "looped" and kernel.name == "fusec_red_sum_0"
    assert kernel.source.count("for roffset in range(0, rnumel, RBLOCK):") == 1
    for rows in (1, 6):
        a = randn(rows, 37, seed=rows)  # 37 columns: RBLOCK 16 takes three steps, the last one masked
        (out,) = compiled([a])
        torch.testing.assert_close(out, a.sum(1))


SOFTMAX = kernel_module("fusec_red_max_sum_0", "s0, 37", [ROW], [ROW, ROWS], f"""      %v = fusec.load %in0[37*x + r] : {ROW}
      %m = fusec.reduce_r "max" %v : f32 -> f32
      %d = fusec.pointwise "sub" %v, %m : (f32, f32) -> f32
      %e = fusec.pointwise "exp" %d : (f32) -> f32
      %s = fusec.reduce_r "sum" %e : f32 -> f32
      %y = fusec.pointwise "div" %e, %s : (f32, f32) -> f32
      %l = fusec.pointwise "log" %s : (f32) -> f32
      %z = fusec.pointwise "add" %l, %m : (f32, f32) -> f32
      fusec.store %y, %out0[37*x + r] : {ROW}
      fusec.store %z, %out1[x] : {ROWS}""")


@MODES
def test_softmax_recomputes_per_phase(options):
    module, compiled = compile_text(SOFTMAX, {"s0": 4}, options)
    kernel = only_kernel(compiled)
    # looped: one loop for the max and the sum of exp(v - max), kept online (a running max per lane, the sum rescaled
    # as it grows), one more for the per-(x, r) store
    assert kernel.source.count("for roffset") == (2 if options is LOOPED else 0)
    for rows in (1, 4, 7):
        a = randn(rows, 37, seed=rows) * 3
        a[0, 5] = 40.0  # a large value: exp overflows without the max subtraction
        if rows > 1:
            a[1, :20] = float("-inf")  # masked positions (attention)
        if rows > 3:
            a[2] = float("-inf")  # a row with nothing: eager's softmax is nan, its logsumexp -inf
            a[3, 30] = float("nan")
        y, z = compiled([a])
        torch.testing.assert_close(y, torch.softmax(a, 1), equal_nan=True)
        rows_with_values = [i for i in range(rows) if i != 2]  # this IR's log(sum) + max is nan there (aten's guards it)
        torch.testing.assert_close(z[rows_with_values], torch.logsumexp(a, 1)[rows_with_values], equal_nan=True)


ARG = kernel_module("fusec_red_argmax_argmin_0", "s0, 37", [ROW], ["!fusec.tensor<[s0], i64>", "!fusec.tensor<[s0], i64>", ROWS, ROWS], f"""      %v = fusec.load %in0[37*x + r] : {ROW}
      %i = fusec.reduce_r "argmax" %v : f32 -> i64
      %j = fusec.reduce_r "argmin" %v : f32 -> i64
      %m = fusec.reduce_r "max" %v : f32 -> f32
      %n = fusec.reduce_r "min" %v : f32 -> f32
      fusec.store %i, %out0[x] : !fusec.tensor<[s0], i64>
      fusec.store %j, %out1[x] : !fusec.tensor<[s0], i64>
      fusec.store %m, %out2[x] : {ROWS}
      fusec.store %n, %out3[x] : {ROWS}""")


@MODES
def test_argmax_argmin_first_index_and_nan(options):
    module, compiled = compile_text(ARG, {"s0": 5}, options)
    a = torch.randint(0, 4, (6, 37), generator=torch.Generator().manual_seed(0)).float()  # many ties
    a[1, 20] = a[1, 30] = math.nan  # NaN is the largest and the smallest: first NaN wins both
    a[2, :] = -math.inf
    a[3, 36] = 9.0  # the extreme in the masked tail step
    i, j, m, n = compiled([a])
    torch.testing.assert_close(i, torch.argmax(a, 1))
    torch.testing.assert_close(j, torch.argmin(a, 1))
    torch.testing.assert_close(m, torch.amax(a, 1), equal_nan=True)
    torch.testing.assert_close(n, torch.amin(a, 1), equal_nan=True)
    assert m[1].isnan() and n[1].isnan()
    assert j[1] == 20 and i[1] == 20


def outer_sum(symbols: str) -> str:
    t = "!fusec.tensor<[s0, 6], f32>"
    return kernel_module("fusec_red_sum_0", "6, s0", [t], ["!fusec.tensor<[6], f32>"], f"""      %v = fusec.load %in0[6*r + x] : {t}
      %s = fusec.reduce_r "sum" %v : f32 -> f32
      fusec.store %s, %out0[x] : !fusec.tensor<[6], f32>""", symbols)


@pytest.mark.parametrize("symbols, kind", [("s0 in [1, 64]", "persistent"), ("s0 in [1, inf]", "looped")])
def test_outer_reduction_kind_follows_the_bound_of_rnumel(symbols, kind):
    # the looped form itself at every size (its persistent form for short calls: tests/lowering/test_runtime_persistent.py)
    module, compiled = compile_text(outer_sum(symbols), {"s0": 16}, LoweringOptions(max_rblock=16, runtime_persistent=False))
    kernel = only_kernel(compiled)
    assert kernel.kind == kind and kernel.outer
    for rows in (1, 16, 40 if kind == "looped" else 64):
        a = randn(rows, 6, seed=rows)
        (out,) = compiled([a])
        torch.testing.assert_close(out, a.sum(0))


F16 = kernel_module("fusec_red_sum_0", "s0, 37", ["!fusec.tensor<[s0, 37], f16>"], ["!fusec.tensor<[s0], f16>", "!fusec.tensor<[s0, 37], f16>"], """      %v = fusec.load %in0[37*x + r] : !fusec.tensor<[s0, 37], f16>
      %e = fusec.pointwise "exp" %v : (f16) -> f16
      %s = fusec.reduce_r "sum" %e : f16 -> f16
      %h = fusec.constant 0.1 : f16
      %y = fusec.pointwise "mul" %e, %h : (f16, f16) -> f16
      fusec.store %s, %out0[x] : !fusec.tensor<[s0], f16>
      fusec.store %y, %out1[37*x + r] : !fusec.tensor<[s0, 37], f16>""")


@MODES
def test_fp16_computes_in_fp32_and_rounds_at_stores(options):
    module, compiled = compile_text(F16, {"s0": 4}, options)
    source = only_kernel(compiled).source
    assert ".to(tl.float32)" in source and ".to(tl.float16)" in source
    a = randn(5, 37, dtype=torch.float16)
    s, y = compiled([a])
    assert s.dtype == torch.float16 and y.dtype == torch.float16
    torch.testing.assert_close(s, a.float().exp().sum(1).half(), rtol=2e-3, atol=1e-3)
    torch.testing.assert_close(y, (a.float().exp() * 0.0999755859375).half(), rtol=2e-3, atol=1e-3)  # 0.1 as fp16


I64 = "!fusec.tensor<[s0, 37], i64>"
INT64 = kernel_module("fusec_red_sum_max_0", "s0, 37", [I64], ["!fusec.tensor<[s0], i64>", "!fusec.tensor<[s0], i64>", I64], f"""      %v = fusec.load %in0[37*x + r] : {I64}
      %s = fusec.reduce_r "sum" %v : i64 -> i64
      %m = fusec.reduce_r "max" %v : i64 -> i64
      %c = fusec.constant -3 : i64
      %q = fusec.pointwise "floordiv" %v, %c : (i64, i64) -> i64
      %p = fusec.pointwise "remainder" %v, %c : (i64, i64) -> i64
      %y = fusec.pointwise "add" %q, %p : (i64, i64) -> i64
      fusec.store %s, %out0[x] : !fusec.tensor<[s0], i64>
      fusec.store %m, %out1[x] : !fusec.tensor<[s0], i64>
      fusec.store %y, %out2[37*x + r] : {I64}""")


@MODES
def test_int64_input_exact(options):
    module, compiled = compile_text(INT64, {"s0": 4}, options)
    a = torch.randint(-2**40, 2**40, (5, 37), generator=torch.Generator().manual_seed(3))
    s, m, y = compiled([a])
    assert torch.equal(s, a.sum(1)) and torch.equal(m, a.amax(1))
    assert torch.equal(y, torch.div(a, -3, rounding_mode="floor") + torch.remainder(a, -3))


CAT = kernel_module("fusec_poi_cat_0", "s0 + 3", ["!fusec.tensor<[s0], f32>", "!fusec.tensor<[3], f32>"], ["!fusec.tensor<[s0 + 3], f32>"], """      %p = fusec.symbolic x : i64
      %n = fusec.symbolic s0 : i64
      %inside = fusec.pointwise "lt" %p, %n : (i64, i64) -> i1
      %outside = fusec.pointwise "logical_not" %inside : (i1) -> i1
      %a = fusec.load %in0[x] mask %inside : !fusec.tensor<[s0], f32>
      %b = fusec.load %in1[x - s0] mask %outside : !fusec.tensor<[3], f32>
      %y = fusec.pointwise "where" %inside, %a, %b : (i1, f32, f32) -> f32
      fusec.store %y, %out0[x] : !fusec.tensor<[s0 + 3], f32>""")


def test_masked_loads_like_cat():
    module, compiled = compile_text(CAT, {"s0": 5})
    kernel = only_kernel(compiled)
    assert [name for name, _ in kernel.size_args] == ["xnumel", "s0"]
    for n in (1, 5, 30):
        a, b = randn(n, seed=n), randn(3, seed=7)
        (out,) = compiled([a, b])
        torch.testing.assert_close(out, torch.cat([a, b]))


GATHER = kernel_module("fusec_poi_index_0", "4*s0", ["!fusec.tensor<[10, 4], f32>", "!fusec.tensor<[s0], i64>"], ["!fusec.tensor<[s0, 4], f32>"], """      %i = fusec.load %in1[floordiv(x, 4)] : !fusec.tensor<[s0], i64>
      %c = fusec.constant 4 : i64
      %o = fusec.pointwise "mul" %i, %c : (i64, i64) -> i64
      %v = fusec.load %in0[%o + mod(x, 4)] : !fusec.tensor<[10, 4], f32>
      fusec.store %v, %out0[x] : !fusec.tensor<[s0, 4], f32>""")


def test_load_with_a_runtime_offset_gathers():
    module, compiled = compile_text(GATHER, {"s0": 3})
    w = randn(10, 4)
    idx = torch.tensor([9, 0, 3, 3, 7])
    (out,) = compiled([w, idx])
    torch.testing.assert_close(out, w[idx])


PROLOGUE_STORE = kernel_module("fusec_red_sum_0", "s0, 37", [ROW], [ROWS, ROW, ROWS], f"""      %v = fusec.load %in0[37*x + r] : {ROW}
      %two = fusec.constant 2.0 : f32
      %d = fusec.pointwise "mul" %v, %two : (f32, f32) -> f32
      %s = fusec.reduce_r "sum" %v : f32 -> f32
      %w = fusec.load %in0[37*x] : {ROW}
      %n = fusec.reduce_r "sum" %w : f32 -> f32
      fusec.store %s, %out0[x] : {ROWS}
      fusec.store %d, %out1[37*x + r] : {ROW}
      fusec.store %n, %out2[x] : {ROWS}""")


@MODES
def test_prologue_store_shares_the_reduction_loop_and_per_x_reduction_input(options):
    module, compiled = compile_text(PROLOGUE_STORE, {"s0": 4}, options)
    assert only_kernel(compiled).source.count("for roffset") == (1 if options is LOOPED else 0)
    a = randn(3, 37)
    s, d, n = compiled([a])
    torch.testing.assert_close(s, a.sum(1))
    torch.testing.assert_close(d, a * 2)
    torch.testing.assert_close(n, a[:, 0] * 37)  # a value per x summed over r: times rnumel


# ---------------------------------------------------------------- every reduction kind and dtype

_REDUCE_CASES = [(k, "f32") for k in F.REDUCTIONS] + [(k, "i32") for k in F.REDUCTIONS] + \
    [(k, "i1") for k in ("sum", "max", "min", "any", "all")] + [("prod", "f64"), ("max", "i8"), ("min", "bf16")]


@MODES
@pytest.mark.parametrize("kind, dtype", _REDUCE_CASES, ids=[f"{k}-{t}" for k, t in _REDUCE_CASES])
def test_every_reduction_matches_the_reference_interpreter(kind, dtype, options):
    out = "i64" if kind in ("argmax", "argmin") else "i1" if kind in ("any", "all") else dtype
    t = f"!fusec.tensor<[s0, 19], {dtype}>"
    text = kernel_module(f"fusec_red_{kind}_0", "s0, 19", [t], [f"!fusec.tensor<[s0], {out}>"], f"""      %v = fusec.load %in0[19*x + r] : {t}
      %s = fusec.reduce_r "{kind}" %v : {dtype} -> {out}
      fusec.store %s, %out0[x] : !fusec.tensor<[s0], {out}>""")
    gen = torch.Generator().manual_seed(5)
    torch_dtype = dtypes.of_name({"f32": "float32", "i32": "int32", "i1": "bool", "f64": "float64", "i8": "int8", "bf16": "bfloat16"}[dtype]).torch
    if torch_dtype.is_floating_point:
        a = (torch.randn(4, 19, generator=gen) * (0.5 if kind == "prod" else 1)).to(torch_dtype)
    elif torch_dtype == torch.bool:
        a = torch.rand(4, 19, generator=gen) > 0.7
        a[0] = True
        a[1] = False
    else:
        a = torch.randint(-5, 5, (4, 19), generator=gen).to(torch_dtype)
        if kind == "prod":
            a = a.clamp(-2, 2)
    got, want, _ = run_both(text, [a], {"s0": 4}, options)
    torch.testing.assert_close(got[0], want[0], rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- every pointwise function

_FLOAT_INPUTS = torch.tensor([-2.5, -1.0, -0.5, -0.0, 0.0, 0.25, 0.5, 1.0, 1.5, 2.5, 3.0, -3.0, 0.75, -0.75, 10.0, -0.1])
_UNIT_INPUTS = torch.tensor([-0.9, -0.5, -0.25, 0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, -0.7, -0.3, 0.05, -0.05, 0.95, 0.4])
_INT_INPUTS = torch.tensor([-7, -3, -2, -1, 0, 1, 2, 3, 5, 7, 9, -9, 4, -4, 6, 8])


def _pointwise_cases():
    cases = []
    for fn, arity in F.POINTWISE_FUNCTIONS.items():
        if fn == "iota":  # graph level only: form-kernels turns it into the index (tests/filecheck form-kernels-iota)
            continue
        if fn == "where":
            cases.append((fn, ["i1", "f32", "f32"], "f32"))
        elif fn == "convert":
            cases += [(fn, ["f32"], "i32"), (fn, ["i64"], "f16"), (fn, ["f32"], "i1"), (fn, ["i1"], "f32"), (fn, ["f32"], "bf16")]
        elif fn in ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not"):
            cases += [(fn, ["i32"] * arity, "i32"), (fn, ["i1"] * arity, "i1")]
        else:
            out = "i1" if fn in F.PREDICATES else "f32"
            cases.append((fn, ["f32"] * arity, out))
            if fn in ("add", "sub", "mul", "floordiv", "remainder", "maximum", "minimum", "neg", "abs", "sign", "eq", "lt",
                      "pow", "relu", "identity", "isnan", "signbit"):
                cases.append((fn, ["i64"] * arity, "i1" if fn in F.PREDICATES else "i64"))
            if fn in ("lt", "eq", "logical_and", "maximum"):
                cases.append((fn, ["i64", "f32"] if arity == 2 else ["i64"], "i1" if fn in F.PREDICATES else "f32"))
    return cases


_NAMES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "i32": "int32", "i64": "int64", "i1": "bool"}


def _operand(i: int, dtype: str, fn: str) -> torch.Tensor:
    base = _UNIT_INPUTS if fn in ("asin", "acos") else _FLOAT_INPUTS.roll(i * 3)
    if fn in ("log", "log2", "sqrt", "rsqrt", "log1p") and dtype == "f32":
        base = base.abs() + 0.1
    if fn in ("floordiv", "remainder", "div") and i == 1:
        base = torch.where(base == 0, torch.tensor(1.5), base)
    if fn == "pow" and dtype == "i64":
        return _INT_INPUTS.abs().roll(i).clamp(max=4) if i == 1 else _INT_INPUTS
    if dtype == "i1":
        return base > 0
    if dtype in ("i32", "i64"):
        ints = _INT_INPUTS.roll(i * 5)
        if fn in ("floordiv", "remainder") and i == 1:
            ints = torch.where(ints == 0, torch.tensor(3), ints)
        return ints.to(dtypes.of_name(_NAMES[dtype]).torch)
    t = base.to(dtypes.of_name(_NAMES[dtype]).torch)
    if fn in ("isnan", "isinf", "maximum", "minimum", "sign", "relu"):
        t = t.clone()
        t[3] = math.nan
        t[4] = math.inf
    return t


@pytest.mark.parametrize("fn, operands, result", _pointwise_cases(), ids=lambda v: v if isinstance(v, str) else "-".join(v))
def test_every_pointwise_function_matches_the_reference_interpreter(fn, operands, result):
    types = [f"!fusec.tensor<[16], {t}>" for t in operands]
    loads = "\n".join(f"      %v{i} = fusec.load %in{i}[x] : {t}" for i, t in enumerate(types))
    args = ", ".join(f"%v{i}" for i in range(len(operands)))
    text = kernel_module(f"fusec_poi_{fn}_0", "16", types, [f"!fusec.tensor<[16], {result}>"], f"""{loads}
      %y = fusec.pointwise "{fn}" {args} : ({", ".join(operands)}) -> {result}
      fusec.store %y, %out0[x] : !fusec.tensor<[16], {result}>""", symbols="")
    inputs = [_operand(i, t, fn) for i, t in enumerate(operands)]
    got, want, _ = run_both(text, inputs)
    tol = {"rtol": 1e-3, "atol": 1e-3} if result in ("f16", "bf16") else {"rtol": 2e-5, "atol": 2e-5}
    torch.testing.assert_close(got[0], want[0], equal_nan=True, **tol)


# ---------------------------------------------------------------- decisions


def _kernel(text):
    return next(op for op in parse(text).walk() if isinstance(op, F.KernelOp))


@pytest.mark.parametrize("domain, symbols, want", [
    ("s0, 37", "s0 in [1, 1000]", "int32"),
    ("s0, 37", "s0 in [1, inf]", "int64"),  # a symbolic size with no bound: be safe
    ("s0, 37", "s0 in [1, 60000000]", "int64"),  # 37 * 6e7 > 2**31
])
def test_index_dtype_follows_bounds(domain, symbols, want):
    text = kernel_module("fusec_red_sum_0", domain, [ROW], [ROWS], f"""      %v = fusec.load %in0[37*x + r] : {ROW}
      %s = fusec.reduce_r "sum" %v : f32 -> f32
      fusec.store %s, %out0[x] : {ROWS}""", symbols)
    kernel = lower_kernel(_kernel(text), {"s0": 8})
    assert kernel.index_dtype == want
    assert ("tl.program_id(0).to(tl.int64)" in kernel.source) == (want == "int64")


def test_static_huge_domain_is_int64_and_small_is_int32():
    big = "!fusec.tensor<[65536, 65536], f32>"
    text = kernel_module("fusec_poi_neg_0", "4294967296", [big], [big], f"""      %v = fusec.load %in0[x] : {big}
      %y = fusec.pointwise "neg" %v : (f32) -> f32
      fusec.store %y, %out0[x] : {big}""", symbols="")
    assert lower_kernel(_kernel(text)).index_dtype == "int64"
    assert lower_kernel(_kernel(POINTWISE_BROADCAST.replace("s0 in [1, inf]", "s0 in [1, 100]"))).index_dtype == "int32"


def test_hints_never_appear_in_the_source():
    a = lower_kernel(_kernel(ROW_SUM), {"s0": 777}).source
    b = lower_kernel(_kernel(ROW_SUM), {"s0": 3}).source
    assert a == b and "777" not in a


def test_names_follow_the_kind():
    per = ROW_SUM.replace("fusec_red_sum_0", "fusec_per_sum_0")
    assert lower_kernel(_kernel(per), options=LOOPED).name == "fusec_red_sum_0"
    assert lower_kernel(_kernel(ROW_SUM)).name == "fusec_per_sum_0"
