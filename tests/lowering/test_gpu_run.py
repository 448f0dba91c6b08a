"""On a CUDA GPU: the compiled kernels give the reference interpreter's results (skipped elsewhere).

Sizes here are larger than the interpreter tests use: many programs, long rows, a
looped reduction with several steps, sizes past one block.
"""

import pytest
import test_end_to_end as graphs
import test_tiled as tiled
import test_triton_kernel as cases
import torch
from kernel_cases import LOOPED, PERSISTENT

from fusec.dialects import fusec as F
from fusec.lowering.triton_kernel import LoweringOptions
from fusec.passes.combo_grouping import ComboGrouping
from fusec.passes.form_kernels import FormKernels
from fusec.passes.reduction_fusion import ReductionFusion
from fusec.passes.schedule_kernels import ScheduleKernels
from fusec.passes.split_reductions import SplitReductions
from fusec.passes.tile_pointwise import TilePointwise
from fusec.passes.vertical_fusion import VerticalFusion
from fusec.runtime import compile_module, interpreter
from fusec.testing import apply_passes, assert_same_results, parse, random_inputs, variance_graph

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

KERNELS = {"pointwise-broadcast": cases.POINTWISE_BROADCAST, "row-sum": cases.ROW_SUM, "softmax": cases.SOFTMAX,
           "arg": cases.ARG, "fp16": cases.F16, "int64": cases.INT64, "cat": cases.CAT, "prologue": cases.PROLOGUE_STORE,
           "outer-persistent": cases.outer_sum("s0 in [1, 64]"), "outer-looped": cases.outer_sum("s0 in [1, inf]")}


def _tolerance(name: str) -> dict:
    return {"rtol": 2e-3, "atol": 2e-3} if "fp16" in name else {"rtol": 1e-4, "atol": 1e-4}


@pytest.mark.parametrize("options", [PERSISTENT, LOOPED, LoweringOptions(persistent_threshold=0)], ids=["persistent", "looped-16", "looped"])
@pytest.mark.parametrize("name", list(KERNELS))
def test_kernels_on_the_gpu(name, options):
    module = parse(KERNELS[name])
    compiled = compile_module(module, {"s0": 1000}, options=options)
    for size in (1, 64 if name.startswith("outer-persistent") else 3000):
        inputs = random_inputs(module, {"s0": size}, seed=size)
        if name == "arg":  # ties and NaN
            inputs[0] = torch.randint(0, 4, inputs[0].shape).float()
            inputs[0][0, 3] = float("nan")
        want = interpreter.run(module, inputs)
        got = [t.cpu() for t in compiled([t.cuda() for t in inputs])]
        assert_same_results(want, got, equal_nan=True, **_tolerance(name))


@pytest.mark.parametrize("name", list(graphs.GRAPHS))
def test_graphs_on_the_gpu(name):
    reference = parse(graphs.GRAPHS[name])
    module = apply_passes(parse(graphs.GRAPHS[name]), FormKernels(), *graphs._fusion_passes())
    compiled = compile_module(module, {"s0": 512})
    for size in (1, 777):
        inputs = random_inputs(reference, {"s0": size}, seed=size)
        got = [t.cpu() for t in compiled([t.cuda() for t in inputs])]
        assert_same_results(interpreter.run(reference, inputs), got, **_tolerance(name))


def test_misaligned_inputs_and_new_size_classes_on_the_gpu():
    """An input 4 bytes past alignment is copied by the launcher's prologue; sizes divisible by 16 or not,
    and equal to 1, each get the kernel Triton specialises for them."""
    module = parse(cases.SOFTMAX)
    compiled = compile_module(module, {"s0": 64})
    for rows, offset in [(33, 1), (32, 0), (1, 1), (48, 1)]:
        (x,) = random_inputs(module, {"s0": rows}, seed=rows)
        flat = torch.empty(x.numel() + offset, device="cuda")
        flat[offset:] = x.flatten().cuda()
        got = compiled([flat[offset:].view(x.shape)])
        assert_same_results(interpreter.run(module, [x]), [t.cpu() for t in got], rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- tiled pointwise kernels (tile-pointwise)


TILED_KERNELS = {"tiled-transpose": tiled.TRANSPOSE_ADD, "tiled-broadcast-fp16": tiled.BROADCAST,
                 "tiled-transpose-int32": tiled.TRANSPOSE_ADD.replace("s0 in [1, inf], s1 in [1, inf]", "s0 in [1, 8192], s1 in [1, 8192]")}


@pytest.mark.parametrize("name", list(TILED_KERNELS))
def test_tiled_kernels_on_the_gpu(name):
    """Many tiles, ragged edges on both axes, sizes divisible by 16 and not (Triton specialises on them)."""
    module = parse(TILED_KERNELS[name])
    compiled = compile_module(module, {"s0": 1024, "s1": 1024})
    for s0, s1 in [(1, 1), (17, 33), (1000, 3000), (4096, 129), (2048, 2048)]:
        inputs = random_inputs(module, {"s0": s0, "s1": s1}, seed=s0)
        got = [t.cpu() for t in compiled([t.cuda() for t in inputs])]
        assert_same_results(interpreter.run(module, inputs), got, **_tolerance(name))


def test_static_tiled_kernel_on_the_gpu():
    module = parse(tiled.STATIC_TRANSPOSE)
    compiled = compile_module(module)
    inputs = random_inputs(module, {}, seed=0)
    assert_same_results(interpreter.run(module, inputs), [t.cpu() for t in compiled([t.cuda() for t in inputs])])


@pytest.mark.parametrize("name", list(tiled.GRAPHS))
def test_tiled_graphs_on_the_gpu(name):
    reference = parse(tiled.GRAPHS[name])
    compiled = compile_module(tiled._tiled_module(name), {"s0": 1024, "s1": 1024})
    for s0, s1 in [(1, 7), (33, 65), (1024, 3000), (3000, 1024)]:
        inputs = random_inputs(reference, {"s0": s0, "s1": s1}, seed=s1)
        got = [t.cpu() for t in compiled([t.cuda() for t in inputs])]
        assert_same_results(interpreter.run(reference, inputs), got)


def test_tiled_combo_members_on_the_gpu():
    module = apply_passes(parse(tiled.TRANSPOSES_IN_A_COMBO), FormKernels(),
                          ComboGrouping(size_hints=("s0=1024", "s1=1024")), TilePointwise(), ScheduleKernels())
    assert sum(k.is_tiled for k in module.walk() if isinstance(k, F.KernelOp)) == 2
    compiled = compile_module(module, {"s0": 1024, "s1": 1024})
    for s0, s1 in [(1, 7), (33, 65), (1024, 3000), (3000, 1024)]:
        inputs = random_inputs(module, {"s0": s0, "s1": s1}, seed=s0)
        x, y, z = inputs
        got = [t.cpu() for t in compiled([t.cuda() for t in inputs])]
        assert_same_results([x.t() + y, z.t().exp(), z * z], got, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- split reductions: chunk-local moments


@pytest.mark.parametrize("shape,dim", [("200704, 64", 0), ("64, 200704", 1), ("s0, 64", 0)])
def test_batch_norm_statistics_as_chunk_moments_on_the_gpu(shape, dim):
    """A variance after its mean split as chunk moments (two kernels): eager's float64 answer, on values far
    from zero (1e3 + N(0, 1)) where the sum of squares minus n mean^2 would lose the variance."""
    text = variance_graph(shape, dim, "s0 in [4096, inf]" if "s0" in shape else "", n="200704.0")
    module = apply_passes(parse(text), FormKernels(), VerticalFusion(), ReductionFusion(), SplitReductions(),
                          ScheduleKernels())
    assert len([k for k in module.walk() if isinstance(k, F.KernelOp)]) == 2
    compiled = compile_module(module, {"s0": 200704})
    gen = torch.Generator().manual_seed(0)
    x = 1e3 + torch.randn([200704, 64] if dim == 0 else [64, 200704], generator=gen, dtype=torch.float64)
    mean, var = [t.cpu().double() for t in compiled([x.float().cuda()])]
    xf = x.float().double()
    torch.testing.assert_close(mean, xf.mean(dim, keepdim=True), rtol=1e-6, atol=0)
    torch.testing.assert_close(var, xf.var(dim, correction=0, keepdim=True), rtol=1e-3, atol=0)
