"""Every kind of generated kernel goes through Triton's whole GPU compiler for Hopper (sm_90).

No GPU is needed: ``triton.compile`` with a target runs TTIR, TTGIR, LLVM, PTX and
ptxas.  This catches what the interpreter forgives (types a loop carries, constexpr
specialisation of sizes equal to 1, int64 index arithmetic) on the Triton installed.
"""

import importlib

import pytest
import test_triton_kernel as cases
from kernel_cases import LOOPED, PERSISTENT, compile_for_hopper, kernel_module

from fusec.dialects import fusec as F
from fusec.lowering.triton_kernel import lower_kernel
from fusec.testing import parse


@pytest.fixture(autouse=True)
def _quiet_triton(monkeypatch):
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")  # Triton 3.9 warns when it is unset


@pytest.fixture(scope="module", autouse=True)
def _needs_the_nvidia_backend():
    try:
        importlib.import_module("triton.backends.nvidia.compiler")
    except Exception as e:  # no CUDA backend in this Triton
        pytest.skip(f"Triton cannot compile for CUDA here: {e}")


def _kernel(text):
    return next(op for op in parse(text).walk() if isinstance(op, F.KernelOp))


def _all_pointwise_functions() -> str:
    """One kernel applying every pointwise function (and every conversion) to loaded values."""
    lines = ["      %f = fusec.load %in0[x] : !fusec.tensor<[s0], f32>",
             "      %i = fusec.load %in1[x] : !fusec.tensor<[s0], i64>",
             "      %b = fusec.pointwise \"gt\" %f, %f : (f32, f32) -> i1"]
    results = []
    for n, (fn, arity) in enumerate(F.POINTWISE_FUNCTIONS.items()):
        if fn == "iota":  # graph level only: form-kernels turns it into the index
            continue
        if fn == "where":
            lines.append(f"      %r{n} = fusec.pointwise \"where\" %b, %f, %f : (i1, f32, f32) -> f32")
        elif fn.startswith("bitwise"):
            lines.append(f"      %r{n} = fusec.pointwise \"{fn}\" {', '.join(['%i'] * arity)} : ({', '.join(['i64'] * arity)}) -> i64")
            results.append((f"%r{n}", "i64"))
            continue
        else:
            out = "i1" if fn in F.PREDICATES else "f32"
            lines.append(f"      %r{n} = fusec.pointwise \"{fn}\" {', '.join(['%f'] * arity)} : ({', '.join(['f32'] * arity)}) -> {out}")
            results.append((f"%r{n}", out))
            if fn in ("floordiv", "remainder", "pow", "maximum", "abs", "sign", "relu"):
                lines.append(f"      %q{n} = fusec.pointwise \"{fn}\" {', '.join(['%i'] * arity)} : ({', '.join(['i64'] * arity)}) -> i64")
                results.append((f"%q{n}", "i64"))
            continue
        results.append((f"%r{n}", "f32"))
    for target in ("f16", "bf16", "i8", "i1", "f64"):
        lines.append(f"      %c_{target} = fusec.pointwise \"convert\" %f : (f32) -> {target}")
        results.append((f"%c_{target}", target))
    outs = [f"!fusec.tensor<[s0], {t}>" for _, t in results]
    stores = [f"      fusec.store {v}, %out{k}[x] : {o}" for k, ((v, _), o) in enumerate(zip(results, outs, strict=True))]
    return kernel_module("fusec_poi_everything_0", "s0", ["!fusec.tensor<[s0], f32>", "!fusec.tensor<[s0], i64>"], outs,
                         "\n".join(lines + stores))


def _all_reductions(dtype: str) -> str:
    t = f"!fusec.tensor<[s0, 37], {dtype}>"
    lines = [f"      %v = fusec.load %in0[37*x + r] : {t}"]
    outs = []
    for kind in F.REDUCTIONS:
        if dtype == "i1" and kind in ("argmax", "argmin"):
            continue
        out = "i64" if kind in ("argmax", "argmin") else "i1" if kind in ("any", "all") else dtype
        lines.append(f"      %{kind} = fusec.reduce_r \"{kind}\" %v : {dtype} -> {out}")
        outs.append((f"%{kind}", f"!fusec.tensor<[s0], {out}>"))
    stores = [f"      fusec.store {v}, %out{k}[x] : {o}" for k, (v, o) in enumerate(outs)]
    return kernel_module(f"fusec_red_all_{dtype}_0", "s0, 37", [t], [o for _, o in outs], "\n".join(lines + stores))


KERNELS = {
    "pointwise-broadcast": cases.POINTWISE_BROADCAST, "softmax": cases.SOFTMAX, "arg": cases.ARG, "fp16": cases.F16,
    "int64": cases.INT64, "cat": cases.CAT, "gather": cases.GATHER, "prologue": cases.PROLOGUE_STORE,
    "outer": cases.outer_sum("s0 in [1, 64]"), "every-pointwise": _all_pointwise_functions(),
    **{f"every-reduction-{t}": _all_reductions(t) for t in ("f32", "i32", "i1", "f16", "i8")},
}


@pytest.mark.parametrize("options", [PERSISTENT, LOOPED], ids=["persistent", "looped"])
@pytest.mark.parametrize("name", list(KERNELS))
def test_compiles_for_hopper(name, options):
    op = _kernel(KERNELS[name])
    compiled = compile_for_hopper(op, lower_kernel(op, {"s0": 64}, options=options))
    assert "cubin" in compiled.asm


@pytest.mark.parametrize("size_type", ["one", "i64"])
@pytest.mark.parametrize("symbols", ["s0 in [1, inf]", "s0 in [1, 1000]"], ids=["int64-index", "int32-index"])
def test_compiles_with_other_size_specialisations(size_type, symbols):
    for text in (cases.SOFTMAX, cases.CAT):
        op = _kernel(text.replace("s0 in [1, inf]", symbols))
        for options in (PERSISTENT, LOOPED):
            assert "cubin" in compile_for_hopper(op, lower_kernel(op, {"s0": 64}, options=options), size_type=size_type).asm


@pytest.mark.parametrize(("cols", "masked"), [(512, False), (500, True)])
def test_static_sizes_the_block_divides_compile_without_masks(cols, masked):
    """A row sum over [64, cols]: at 512 columns the masks are constant true and Triton drops them (plain loads and
    stores in TTGIR); at 500 the loads stay masked (the tail of the last block)."""
    text = kernel_module("fusec_red_sum_0", f"64, {cols}", [f"!fusec.tensor<[64, {cols}], f32>"],
                         ["!fusec.tensor<[64], f32>"], f"""      %v = fusec.load %in0[{cols}*x + r] : !fusec.tensor<[64, {cols}], f32>
      %s = fusec.reduce_r "sum" %v : f32 -> f32
      fusec.store %s, %out0[x] : !fusec.tensor<[64], f32>""", symbols="")
    op = _kernel(text)
    ttgir = compile_for_hopper(op, lower_kernel(op, {}), xnumel=64, rnumel=cols).asm["ttgir"]
    loads = [line for line in ttgir.splitlines() if "tt.load" in line]
    assert loads
    assert all(("tt.load %" in line and line.split("tt.load ")[1].count("%") > 1) == masked for line in loads), loads
