"""Persistent tensor-descriptor matmuls (``schedule(..., programs = N, tma)``): the kernel's tiles loop over the
product and load A and B through tensor descriptors where the call's operands allow it, else through pointers.
Checked under Triton's interpreter against the reference interpreter (both branches), and on the GPU (TMA)."""

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fusec.dialects import fusec as F
from fusec.lowering.triton_kernel import lower_kernel
from fusec.pipeline import default_pipeline_spec, run_pipeline
from fusec.registry import make_context
from fusec.runtime import compile_module, interpreter, kernel_cache
from fusec.testing import assert_same_results, kernels, parse, random_inputs

FUSED = default_pipeline_spec().replace("matmul-epilogues", "matmul-epilogues{when=always cost-rule=false}")
# One SM: a product of two tiles or more takes the persistent route, its one program looping over all of them.
TMA = FUSED.replace("schedule-kernels", "schedule-kernels{matmul-tma=always sm-count=1}")
ON_GPU = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def _t(shape: str, dtype: str, strides: str = "") -> str:
    return f"!fusec.tensor<[{shape}], {dtype}{', strides [' + strides + ']' if strides else ''}>"


def product(rows: str, n: int, k: int, dtype: str, a_transposed: bool, b_transposed: bool, epilogue: str) -> str:
    """``(a @ b + bias) * scale`` then ``epilogue`` (a bias per column, a scale per row: loads of one row and one
    column of the tile), each operand stored as given or transposed (a weight read as ``w.t()``: contiguous along
    k; a weight gradient's ``grad.t()``: contiguous along m)."""
    def operand(name: str, dims: tuple[str, str], transposed: bool) -> tuple[str, str, str, str]:
        view = _t(f"{dims[0]}, {dims[1]}", dtype, f"1, {dims[0]}" if transposed else "")
        if not transposed:
            return f"%{name} : {view}", f"%{name}", view, ""
        stored = _t(f"{dims[1]}, {dims[0]}", dtype)
        return (f"%{name} : {stored}", f"%{name}t", view,
                f"    %{name}t = fusec.permute %{name} [1, 0] : {stored} -> {view}\n")

    a_arg, a, a_view, a_perm = operand("a", (rows, str(k)), a_transposed)
    b_arg, b, b_view, b_perm = operand("b", (str(k), str(n)), b_transposed)
    y, bias, scale = _t(f"{rows}, {n}", dtype), _t(f"{n}", dtype), _t(f"{rows}, 1", dtype)
    body = (a_perm + b_perm + f'    %p = fusec.extern "aten.mm.default"({a}, {b}) : ({a_view}, {b_view}) -> {y}\n'
            f'    %h = fusec.pointwise "add" %p, %bias : ({y}, {bias}) -> {y}\n'
            f'    %s = fusec.pointwise "mul" %h, %scale : ({y}, {scale}) -> {y}\n'
            f'    %e = fusec.pointwise "{epilogue}" %s : ({y}) -> {y}\n    fusec.output %e : {y}')
    symbols = "symbols(s0 in [1, inf]) " if rows == "s0" else ""
    return (f"builtin.module {{\n  fusec.graph @g({a_arg}, {b_arg}, %bias : {bias}, %scale : {scale}) -> ({y}) "
            f"{symbols}{{\n{body}\n  }}\n}}")


def _tma_module(text: str, spec: str = TMA, programs: int = 1):
    module = parse(text)
    run_pipeline(make_context(), module, spec)
    (matmul,) = [k for k in kernels(module) if k.is_matmul]
    tiles = matmul.schedule.tiles
    assert tiles.tma and tiles.programs == programs, matmul.schedule
    return module, matmul


@settings(derandomize=True, deadline=None, database=None, max_examples=12, suppress_health_check=list(HealthCheck))
@given(m=st.integers(1, 300), n=st.sampled_from([264, 272, 520]), k=st.sampled_from([8, 72, 136]),
       dtype=st.sampled_from(["bf16", "f16"]), a_transposed=st.booleans(), b_transposed=st.booleans(),
       symbolic=st.booleans(), epilogue=st.sampled_from(["tanh", "relu", "neg"]))
def test_generated_tma_matmuls_give_the_reference_interpreters_results(m, n, k, dtype, a_transposed, b_transposed,
                                                                      symbolic, epilogue):
    """Ragged tiles in m, n and k (k past the operand reads as zeros), every layout a descriptor takes, static and
    symbolic rows (int64 indexing: the descriptors' int32 sizes checked per call), one program looping over
    several tiles: the persistent descriptor kernel under Triton's interpreter."""
    # Static rows of at least 128 (fewer stay cuBLAS's); A stored transposed has a row stride of s0 (not provably
    # 16-byte aligned): static.
    static = max(m, 128) if not a_transposed else max(m, 128) // 8 * 8  # A's rows then its row stride: 16 bytes
    rows = "s0" if symbolic and not a_transposed else str(static)
    text = product(rows, n, k, dtype, a_transposed, b_transposed, epilogue)
    reference, (module, _) = parse(text), _tma_module(text)
    compiled = compile_module(module, {"s0": m})
    assert "make_tensor_descriptor" in compiled.launcher.kernels[0].source
    for now in ([m, m + 300] if rows == "s0" else [static]):
        inputs = random_inputs(reference, {"s0": now}, seed=now)
        assert_same_results(interpreter.run(reference, inputs), compiled(inputs), rtol=2e-2, atol=2e-2)


class _Site:
    """A launcher that knows no pointer's alignment and prints sizes as Python."""

    def py(self, e):
        return str(e)

    def int_variable(self, name, e):
        return f"{name} = {e}"

    def is_aligned(self, pointer):
        return pointer == "out"

    def launch(self, kernel, grid, warps, args, num_pointers, constexprs):
        return f"{kernel}.launch({grid}, {warps}, {', '.join(args + [v for _, v in constexprs])})"


def test_the_launcher_checks_what_a_descriptor_needs_per_call():
    """Operands of unknown alignment and a symbolic size are checked per call: TMA is a constexpr of the call."""
    _, matmul = _tma_module(product("s0", 136, 72, "bf16", False, True, "neg"))
    tk = lower_kernel(matmul)
    (line,) = tk.launch_lines(_Site(), ["x", "w", "bias", "scale", "out"])
    assert line.startswith("fusec_mm_add_mul_neg_2.launch(min(1, ((s0 + 127) // 128) * ((136 + 255) // 256)), 8")
    assert line.endswith("int(x.data_ptr() % 16 == 0 and w.data_ptr() % 16 == 0 and s0 < 2147483648))")


def test_without_descriptors_the_persistent_kernel_loads_through_pointers():
    """TMA=0 (an operand the call finds misaligned): the same kernel, its loads through pointers, same results."""
    text = product("300", 264, 72, "bf16", False, True, "tanh")
    reference, (_, matmul) = parse(text), _tma_module(text)
    tk = lower_kernel(matmul)
    inputs = random_inputs(reference, {}, seed=5)
    want = interpreter.run(reference, inputs)
    t = tk.tiles
    grid = min(t.programs, -(-300 // t.block_m) * -(-264 // t.block_n))
    for tma in (0, 1):
        out = torch.full((300, 264), float("nan"), dtype=torch.bfloat16)
        with kernel_cache.triton_interpret(True):
            kernel = kernel_cache.load_kernel(tk.source, tk.name, True)
            kernel[(grid,)](*inputs, out, 300 * 264, 72, 300, 264, t.block_m, t.block_n, t.block_k, t.group_m, tma,
                            num_warps=t.warps)
        assert_same_results(want, [out], rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("a_transposed,b_transposed", [(False, True), (True, False), (False, False)])
@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_tma_matmuls_on_the_gpu(dtype, a_transposed, b_transposed):
    """On the GPU (tensor descriptors, wgmma on Hopper), the SMs of the machine: ragged sizes, symbolic rows (tiles
    several a program, and fewer tiles than programs), against the reference."""
    rows = "8000" if a_transposed else "s0"  # A stored transposed has a row stride of its rows: static
    text = product(rows, 1032, 136, dtype, a_transposed, b_transposed, "tanh")
    graph = parse(text)
    props = torch.cuda.get_device_properties(0)
    spec = FUSED.replace("schedule-kernels", f"schedule-kernels{{matmul-tma=always sm-count={props.multi_processor_count}}}")
    reference, (module, _) = graph, _tma_module(text, spec, props.multi_processor_count)
    compiled = compile_module(module, {"s0": 8000})
    for now in ([8000] if a_transposed else [8000, 77, 20001]):
        inputs = random_inputs(reference, {"s0": now}, seed=now)
        got = [t.cpu() for t in compiled([t.cuda() for t in inputs])]
        assert_same_results(interpreter.run(reference, inputs), got, rtol=2e-2, atol=2e-2)


def test_a_tma_schedule_on_operands_it_cannot_load_is_a_lowering_error():
    """A hand-written schedule asking for descriptors on a misaligned operand: one clear error, not a wrong kernel."""
    text = product("64", 128, 36, "bf16", False, False, "neg")
    module = parse(text)
    run_pipeline(make_context(), module, TMA)
    (matmul,) = [k for k in kernels(module) if k.is_matmul]
    assert not matmul.schedule.tiles.tma  # schedule-kernels declined: rows of 72 bytes
    schedule = matmul.schedule
    matmul.record_schedule(F.KernelSchedule("matmul", schedule.index, tiles=type(schedule.tiles)(
        128, 128, 64, 4, 3, 8, programs=132, tma=True)))
    with pytest.raises(ValueError, match="a tma schedule needs each operand a 2-D tensor with 16-byte aligned rows"):
        lower_kernel(matmul)
