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

from fusec.lowering.triton_kernel import LoweringOptions
from fusec.passes.form_kernels import FormKernels
from fusec.runtime import compile_module, interpreter
from fusec.testing import apply_passes, assert_same_results, parse, random_inputs

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
