"""On a CUDA GPU: combos through backend="fusec" (skipped elsewhere).

The seed example and an optimizer step over 16 parameters of mixed sizes, static
and dynamic with sizes changed between calls: launches counted by the CUDA
profiler, results against eager, and the peak of allocated memory with
combo-grouping not above the peak without it.
"""

import pytest
import torch

from fusec.pipeline import default_pipeline_spec, parse_pipeline_spec

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

SIZES16 = [(256, 256), (256,), (1024, 256), (1024,), (256, 1024), (256,), (4096,), (512, 512),
           (512,), (2048, 128), (128,), (64, 64), (64,), (1000,), (333, 77), (77,)]


def seed(t1, t2, t3, t4):
    return t1.sum(1), t2.max(1).values, t3.min(1).values, t4.sum(1)


def sgd(*tensors):
    n = len(tensors) // 2
    return tuple(p - 0.01 * (g + 0.1 * p) for p, g in zip(tensors[:n], tensors[n:], strict=True))


def seed_inputs(rows, seed_=0):
    g = torch.Generator().manual_seed(seed_)
    return [torch.randn(rows, 512, generator=g).cuda() for _ in range(4)]


def sgd_inputs(scale, seed_=0):
    g = torch.Generator().manual_seed(seed_)
    shapes = [tuple(max(1, d * scale // 2) for d in s) for s in SIZES16]
    return [torch.randn(s, generator=g).cuda() for s in shapes + shapes]


def launches(call) -> int:
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA], acc_events=True) as prof:
        call()
        torch.cuda.synchronize()
    return len([e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
                and "memcpy" not in e.name.lower() and "memset" not in e.name.lower()])


def without_combos() -> str:
    return ",".join(str(p.pipeline_pass_spec()) for p in parse_pipeline_spec(default_pipeline_spec())
                    if p.name != "combo-grouping")


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("program, make, sizes, count", [
    ("seed", seed_inputs, (1024, 333, 1027), 1),
    ("sgd16", sgd_inputs, (2, 3, 1), 2),
], ids=["seed", "sgd16"])
def test_combo_launch_counts_and_results(program, make, sizes, count, dynamic):
    fn = seed if program == "seed" else sgd
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="fusec", dynamic=dynamic)
    for i, size in enumerate(sizes if dynamic else sizes[:1]):
        inputs = make(size, seed_=i)
        for got, want in zip(compiled(*inputs), fn(*inputs), strict=True):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        assert launches(lambda inputs=inputs: compiled(*inputs)) == count


@pytest.mark.parametrize("program", ["seed", "sgd16"])
def test_combos_do_not_raise_peak_memory(program):
    fn, inputs = (seed, seed_inputs(4096)) if program == "seed" else (sgd, sgd_inputs(4))
    peaks = {}
    for name, options in [("grouped", {}), ("alone", {"pipeline": without_combos()})]:
        torch._dynamo.reset()
        compiled = torch.compile(fn, backend="fusec", options=options)
        compiled(*inputs)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        outputs = compiled(*inputs)
        torch.cuda.synchronize()
        peaks[name] = torch.cuda.max_memory_allocated() - base
        del outputs
    assert peaks["grouped"] <= peaks["alone"], peaks


@pytest.mark.parametrize("program", ["seed", "sgd16"])
def test_benchmark_option_times_each_group_on_the_gpu(program, tmp_path):
    """combo-grouping{benchmark=true}: each group is timed both ways (fusec.runtime.combo_benchmark); the result
    still matches eager, and a group the timing finds slower is split with a benchmark-slower remark."""
    import json

    from fusec.pipeline import default_pipeline_spec

    fn, inputs = (seed, seed_inputs(1024)) if program == "seed" else (sgd, sgd_inputs(2))
    spec = default_pipeline_spec().replace("combo-grouping", "combo-grouping{benchmark=true}")
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="fusec", options={"pipeline": spec, "dump_dir": str(tmp_path)})
    for got, want in zip(compiled(*inputs), fn(*inputs), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    (log,) = [json.loads(p.read_text()) for p in tmp_path.glob("*/remarks.json")]
    assert not [r for r in log if r["code"] == "benchmark-skipped"]
    slower = [r for r in log if r["code"] == "benchmark-slower"]
    assert all(r["data"]["combo_us"] >= r["data"]["separate_us"] > 0 for r in slower)
    grouped = 1 if program == "seed" else 2  # the cost model's launches
    count = launches(lambda: compiled(*inputs))
    assert count > grouped if slower else count == grouped
