"""Eager PyTorch's semantic rules that fusec must follow, one class per test group, through backend="fusec"."""

from __future__ import annotations

import re
import warnings

import pytest
import torch

from fusec.base import remarks

pytestmark = [pytest.mark.usefixtures("fresh_dynamo"),  # tests/conftest.py
              pytest.mark.filterwarnings("error:fusec. graph .* runs with torch")]


def compile_and_compare(fn, *inputs, dynamic=False, exact=True):
    """fn compiled with fusec equals eager (values, dtype, shape; bit for bit unless not ``exact``: then within
    torch's default tolerance for the dtype); no graph fell back to eager."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = torch.compile(fn, backend="fusec", dynamic=dynamic)(*inputs)
    assert not [w for w in caught if "runs with torch" in str(w.message)], [str(w.message) for w in caught]
    want = fn(*inputs)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,), strict=True):
        assert (g.dtype, g.shape, g.device) == (w.dtype, w.shape, w.device)
        torch.testing.assert_close(g, w, equal_nan=True, **({"rtol": 0, "atol": 0} if exact else {}))


# ---------------------------------------------------------------- dtype-reinterpreting views


@pytest.mark.parametrize("to", [torch.int32, torch.uint8, torch.int16, torch.float16, torch.int64, torch.uint64],
                         ids=lambda d: str(d).removeprefix("torch."))
def test_a_dtype_view_gives_eager_bits(to):
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(0))
    compile_and_compare(lambda x: (x * 2).view(to), x)
    if to != torch.uint64:  # torch computes little on uint64
        compile_and_compare(lambda x: (x * 2).view(to) + 1, x)


def test_a_native_form_that_disagrees_with_torch_runs_as_torch_with_a_remark():
    """The importer checks each native form's dtypes and shapes against torch's: view(dtype) is no reshape."""
    from torch._dynamo.backends.common import aot_autograd

    from fusec.frontend.decompositions import fusec_decompositions
    from fusec.frontend.importer import import_graph

    log = None

    def keep(gm, example):
        nonlocal log
        with remarks.collect() as log:
            import_graph(gm, example)
        return gm.forward

    backend = aot_autograd(fw_compiler=keep, decompositions=fusec_decompositions())
    torch.compile(lambda x: x.view(torch.int32) + 1, backend=backend)(torch.randn(3, 4))
    messages = [r.message for r in log.remarks if r.code == "extern-fallback"]
    assert any("aten.view.dtype" in m and "gives f32 where torch gives torch.int32" in m for m in messages), messages


# ---------------------------------------------------------------- integer pow wraps around as torch's


INT_DTYPES = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8]


def _ints(dtype, n, seed, low=None, high=None):
    info = torch.iinfo(dtype)
    low = max(info.min, -3000) if low is None else low
    high = min(info.max, 3000) if high is None else high
    return torch.randint(low, high, (n,), generator=torch.Generator().manual_seed(seed)).to(dtype)


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize("exponent", [0, 1, 2, 3, 4, 7, 13, 31, 64])
def test_integer_pow_by_a_constant_wraps_as_torch(dtype, exponent):
    compile_and_compare(lambda x: x ** exponent, _ints(dtype, 64, exponent))


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_integer_pow_by_a_tensor_wraps_as_torch(dtype, dynamic):
    """Every bit of the exponent counts (odd bases never wrap to 0); negative exponents give 0 except for 1 and -1."""
    signed = torch.iinfo(dtype).min < 0
    base = torch.cat([_ints(dtype, 40, 1), torch.tensor([0, 1, 2, 3] + ([-1, -2] if signed else []), dtype=dtype)])
    exponent = _ints(dtype, base.numel(), 2, low=-5 if signed else 0, high=min(torch.iinfo(dtype).max, 200))
    compile_and_compare(lambda x, y: x ** y, base, exponent, dynamic=dynamic)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64], ids=str)
@pytest.mark.parametrize("exponent", [2, 3, -1, -2, 3.0, 0.5, 2.5, -3])
def test_float_pow_by_a_constant_gives_eager_bits(dtype, exponent):
    """torch multiplies out x**2, x**3, x**-1, x**-2; fusec does the same (no libdevice pow), other exponents call pow.
    fp16/bf16: eager on the CPU rounds between the multiplies, on the GPU it does not (nor does fusec)."""
    x = torch.randn(257, generator=torch.Generator().manual_seed(3)).to(dtype)
    x[:3] = torch.tensor([0.0, -0.0, float("inf")])
    multiplied_out = exponent in (2, 3, -1, -2)  # other exponents: libdevice's pow, not torch's (an ulp apart)
    compile_and_compare(lambda x: x ** exponent, x, exact=multiplied_out and dtype in (torch.float32, torch.float64))


# ---------------------------------------------------------------- division by zero and division modes


FLOAT_DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
DIVISIONS = {
    "true": lambda a, b: a / b,
    "floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "floor_divide": lambda a, b: a // b,
    "remainder": torch.remainder,
    "fmod": torch.fmod,
}


def _numerators(dtype):
    special = torch.tensor([1.0, -1.0, 0.0, -0.0, float("inf"), float("-inf"), float("nan"), 2.5, -7.25, 1e-3])
    return special.to(dtype)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("mode", sorted(DIVISIONS))
def test_float_division_by_zero_follows_eager(mode, dtype):
    a = _numerators(dtype)
    for zero in (0.0, -0.0):
        torch._dynamo.reset()  # Dynamo's guard on a float default argument takes -0.0 for 0.0 (so does backend="eager")
        compile_and_compare(DIVISIONS[mode], a, torch.full_like(a, zero))
        compile_and_compare(lambda a, z=zero: DIVISIONS[mode](a, z), a)  # a Python scalar divisor
    compile_and_compare(DIVISIONS[mode], a.repeat(10), a.repeat_interleave(10))  # every pair, inf/inf and nan included


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.int8, torch.uint8], ids=str)
@pytest.mark.parametrize("mode", sorted(DIVISIONS))
def test_integer_division_modes_follow_eager(mode, dtype):
    signed = torch.iinfo(dtype).min < 0
    a = _ints(dtype, 60, 4, low=-100 if signed else 0, high=100)
    b = _ints(dtype, 60, 5, low=1, high=9)
    if signed:
        b = b * torch.where(torch.arange(60) % 2 == 0, 1, -1).to(dtype)
    compile_and_compare(DIVISIONS[mode], a, b)


# ---------------------------------------------------------------- padding with negative pads, and its backward


@pytest.mark.parametrize("mode", ["reflect", "replicate", "constant", "circular"])
@pytest.mark.parametrize("pad", [(2, 3), (-1, 2), (2, -3), (1, 2, -1, 1)], ids=str)
def test_padding_and_its_gradient(mode, pad):
    shape = (2, 3, 6, 7) if len(pad) == 4 else (2, 3, 7)  # torch pads the last len(pad) // 2 dims of a batch
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(6), requires_grad=True)
    fn = (lambda x: torch.nn.functional.pad(x, pad, mode=mode)) if mode != "constant" else \
        (lambda x: torch.nn.functional.pad(x, pad, value=0.5))
    want = fn(x)
    weight = torch.randn(want.shape, generator=torch.Generator().manual_seed(7))
    (want * weight).sum().backward()
    want_grad, x.grad = x.grad, None
    got = torch.compile(fn, backend="fusec")(x)
    (got * weight).sum().backward()
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    torch.testing.assert_close(x.grad, want_grad)


# ---------------------------------------------------------------- reductions keep eager's precision


@pytest.mark.parametrize("case", ["flat", "rows", "columns", "mean"])
def test_long_sums_keep_eager_precision(case):
    """A million 0.1s: a left-to-right fp32 sum is off by 2e-5, a tree (the GPU's, and numpy's under
    Triton's interpreter) by 1e-7, inside torch's default tolerance."""
    fn = {"flat": lambda x: x.sum(), "rows": lambda x: x.view(16, -1).sum(1), "columns": lambda x: x.view(-1, 16).sum(0),
          "mean": lambda x: x.view(16, -1).mean(1)}[case]
    x = torch.full((1 << 20,), 0.1)
    got, want = torch.compile(fn, backend="fusec")(x), fn(x)
    torch.testing.assert_close(got, want)
    exact = fn(x.double())
    assert ((got.double() - exact).abs() / exact).max() < 2e-6


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_low_precision_sums_accumulate_in_fp32(dtype):
    x = torch.rand(1 << 16, generator=torch.Generator().manual_seed(8)).to(dtype)
    fn = lambda x: (x.sum(), x.view(64, -1).mean(1), x.view(-1, 64).sum(0))  # noqa: E731
    for g, w in zip(torch.compile(fn, backend="fusec")(x), fn(x), strict=True):
        assert g.dtype == w.dtype
        torch.testing.assert_close(g, w)


# ---------------------------------------------------------------- an output's device is eager's


ON_GPU = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


@pytest.mark.parametrize("_", [pytest.param(None, marks=ON_GPU)], ids=["cuda"])
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_outputs_made_only_from_cpu_values_stay_on_the_cpu(_, dynamic):
    """A factory op for the CPU, or a tensor computed only from CPU scalars, stays on the CPU beside GPU outputs."""
    def fn(x, n):
        return x * 2 + 1, torch.zeros(3) + n, torch.full((2, 2), 3.0) * torch.tensor(2.0), torch.arange(4) * n, x.sum()

    x = torch.randn(5, 4, generator=torch.Generator().manual_seed(9)).cuda()
    for n in (3, 4):
        compile_and_compare(fn, x, n, dynamic=dynamic)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=ON_GPU)])
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_an_index_built_on_the_cpu_for_a_gather_on_the_device(device, dynamic):
    """BEiT's relative-position index, built from sizes on the CPU with in-place writes every call, gathers from a
    table on the graph's device: on a GPU it is computed there (tests/frontend/test_devices.py), eager's values."""
    from corpus import relative_position_bias

    table = torch.randn(38, 4, generator=torch.Generator().manual_seed(3)).to(device)
    compile_and_compare(relative_position_bias, table, dynamic=dynamic)


@pytest.mark.parametrize("_", [pytest.param(None, marks=ON_GPU)], ids=["cuda"])
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_a_cpu_scalar_read_only_on_the_gpu_is_computed_there(_, dynamic, tmp_path):
    """A CPU scalar made from a size (as torch 2.11 traces ``q.shape[-1] ** -0.5`` under dynamic=True) scales a GPU
    tensor: no torch call, eager's values; returned as well, it stays on the CPU."""
    def scaled(x):
        return torch.softmax(x * torch.scalar_tensor(x.shape[-1], dtype=torch.float64).pow(-0.5).float(), -1)

    def returned(x):
        s = torch.scalar_tensor(x.shape[-1], dtype=torch.float64).pow(-0.5)
        return x * s.float(), s

    compiled = torch.compile(scaled, backend="fusec", dynamic=dynamic, options={"dump_dir": str(tmp_path)})
    for cols in (64, 96):
        x = torch.randn(8, cols, generator=torch.Generator().manual_seed(cols)).cuda()
        torch.testing.assert_close(compiled(x), scaled(x))
        compile_and_compare(returned, x, dynamic=dynamic, exact=False)
    text = "".join(p.read_text() for p in tmp_path.rglob("remarks.txt"))
    assert "extern-device" not in text and "extern-producer" not in text, text
    assert not [p for p in tmp_path.rglob("launcher.py") if "_aten_" in p.read_text()]  # no torch call at all


@pytest.mark.parametrize("_", [pytest.param(None, marks=ON_GPU)], ids=["cuda"])
def test_a_cpu_step_count_argument_is_read_on_the_gpu(_, tmp_path):
    """An optimizer-like update whose step count is a CPU scalar argument (AdamW's state after an eager step, or
    loaded from a checkpoint): copied to the GPU once, the bias correction fuses into the update's kernel."""
    def update(p, g, m, step):
        m = 0.9 * m + 0.1 * g
        return p - 0.01 * m / (1 - 0.9 ** step), m

    gen = torch.Generator().manual_seed(3)
    p, g, m = (torch.randn(64, 32, generator=gen).cuda() for _ in range(3))
    step = torch.tensor(3.0)
    compiled = torch.compile(update, backend="fusec", options={"dump_dir": str(tmp_path)})
    for got, want in zip(compiled(p, g, m, step), update(p, g, m, step), strict=True):
        torch.testing.assert_close(got, want)
    (launcher,) = tmp_path.rglob("launcher.py")
    torch_calls = sorted(set(re.findall(r"\b(_aten_\w+)\(", launcher.read_text())))
    assert torch_calls == ["_aten__to_copy_default"], torch_calls  # the step's copy; the update is generated code


# ---------------------------------------------------------------- numbers in 16-bit arithmetic


@pytest.mark.parametrize("_", [pytest.param(None, marks=ON_GPU)], ids=["cuda"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_a_number_in_16_bit_arithmetic_is_applied_as_cuda_eager_applies_it(_, dtype):
    """Bit for bit against CUDA eager: a Python number in add, sub, mul and div of a 16-bit tensor (one op a
    result, so fusec's fp32 between fused ops does not enter), and a number that becomes a 16-bit value (where)."""
    x = (torch.randn(1 << 16, generator=torch.Generator().manual_seed(5)) * 3).to("cuda", dtype)
    for fn in (lambda x: x * 0.044715, lambda x: x / 0.3, lambda x: x + 0.1, lambda x: 0.7 - x,
               lambda x: torch.add(x, x, alpha=0.15), lambda x: torch.where(x > 0, x, 0.1)):
        torch._dynamo.reset()
        compile_and_compare(fn, x)
