"""The compile pool: Triton compiles in worker processes, or in-process where there are none."""

import concurrent.futures

import pytest
import torch

from fusec.runtime import compile_pool
from fusec.runtime.compile_pool import CompilePool, CompileRequest

KERNEL = '''import triton
import triton.language as tl


@triton.jit
def {name}(in_ptr0, out_ptr0, xnumel, XBLOCK: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    xmask = xindex < xnumel
    tl.store(out_ptr0 + xindex, tl.exp(tl.load(in_ptr0 + xindex, xmask)) * {scale}, xmask)
'''


def request(name: str, scale: float, block: int = 128) -> CompileRequest:
    from triton.backends.compiler import GPUTarget

    return CompileRequest(KERNEL.format(name=name, scale=scale), name,
                          {"in_ptr0": "*fp32", "out_ptr0": "*fp32", "xnumel": "i32", "XBLOCK": "constexpr"},
                          {(3,): block}, {(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]]},
                          GPUTarget("cuda", 90, 32), {"num_warps": 4})


def test_size_from_the_argument_the_environment_or_the_cpus(monkeypatch):
    monkeypatch.delenv("FUSEC_COMPILE_WORKERS", raising=False)
    assert 1 <= CompilePool().workers <= compile_pool.MAX_DEFAULT_WORKERS
    monkeypatch.setenv("FUSEC_COMPILE_WORKERS", "3")
    assert CompilePool().workers == 3
    assert CompilePool(1).workers == 1 and not CompilePool(1).parallel
    monkeypatch.setenv("FUSEC_COMPILE_WORKERS", "lots")
    with pytest.warns(UserWarning, match="FUSEC_COMPILE_WORKERS='lots' is not a positive integer"):
        assert CompilePool().workers >= 1


def test_without_processes_the_pool_compiles_in_process(monkeypatch):
    def no_processes(*args, **kwargs):
        raise OSError("no semaphores here")

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", no_processes)
    monkeypatch.setattr(compile_pool, "compile_request", lambda r: f"hash-of-{r.name}")
    pool = CompilePool(4)
    pool.start()
    assert not pool.parallel
    reqs = [request("k_a", 1.0), request("k_b", 2.0), request("k_a", 1.0)]
    assert pool.compile(reqs) == ["hash-of-k_a", "hash-of-k_b", "hash-of-k_a"]


def _can_compile_for_cuda() -> bool:
    try:
        import triton.backends.nvidia.compiler  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.slow
@pytest.mark.skipif(not _can_compile_for_cuda(), reason="Triton's NVIDIA backend is not installed")
def test_workers_compile_what_in_process_compiles(tmp_path, monkeypatch):
    """Compiling for an sm_90 target needs no GPU: workers and the in-process path give the same binaries."""
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")
    reqs = [request("fusec_poi_exp_mul_0", 2.0), request("fusec_poi_exp_mul_1", 3.0, block=256)]
    results = {}
    for workers, wanted in ((2, reqs), (1, reqs[:1])):
        cache = tmp_path / f"triton-{workers}"
        monkeypatch.setenv("TRITON_CACHE_DIR", str(cache))  # workers are spawned after this: they inherit it
        pool = CompilePool(workers)
        try:
            results[workers] = pool.compile(wanted)
        finally:
            pool.shutdown()
        assert len(list(cache.rglob("*.cubin"))) == len(wanted), workers
        assert all(compile_pool.on_disk(r) for r in wanted)  # what a warm start skips
        assert not compile_pool.on_disk(request("fusec_poi_exp_mul_2", 4.0))
    assert None not in results[2] and len(set(results[2])) == 2 and results[1] == results[2][:1]


@pytest.fixture
def gelu_graph():
    from fusec.passes.form_kernels import FormKernels
    from fusec.testing import apply_passes, parse

    module = parse("""
fusec.graph @g(%a : !fusec.tensor<[37, 16], f32>, %b : !fusec.tensor<[37, 16], f32>) -> (!fusec.tensor<[37], f32>) {
  %m = fusec.pointwise "mul" %a, %b : (!fusec.tensor<[37, 16], f32>, !fusec.tensor<[37, 16], f32>) -> !fusec.tensor<[37, 16], f32>
  %e = fusec.pointwise "exp" %m : (!fusec.tensor<[37, 16], f32>) -> !fusec.tensor<[37, 16], f32>
  %s = fusec.reduce "sum" %e dims [1] : !fusec.tensor<[37, 16], f32> -> !fusec.tensor<[37], f32>
  fusec.output %s : !fusec.tensor<[37], f32>
}""")
    apply_passes(module, FormKernels())
    return module


def test_on_cpu_nothing_is_precompiled_and_results_hold(gelu_graph):
    from fusec.dialects import fusec as F
    from fusec.lowering.launcher import lower_graph
    from fusec.runtime.compiled import CompiledGraph

    a, b = (torch.randn(37, 16, generator=torch.Generator().manual_seed(s)) for s in (3, 4))
    for workers in (1, 2):
        compiled = CompiledGraph(lower_graph(F.find_graph(gelu_graph)), pool=CompilePool(workers))
        (got,) = compiled([a, b])
        torch.testing.assert_close(got, (a * b).exp().sum(1))
        assert not compiled._calls.get(False)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_the_gpu_the_pool_compiles_before_the_first_launch(gelu_graph, tmp_path, monkeypatch):
    from fusec.dialects import fusec as F
    from fusec.lowering.launcher import lower_graph
    from fusec.runtime.compiled import CompiledGraph

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    a, b = (torch.randn(37, 16, device="cuda", generator=torch.Generator("cuda").manual_seed(s)) for s in (5, 6))
    results = []
    for workers in (2, 1):
        compiled = CompiledGraph(lower_graph(F.find_graph(gelu_graph)), pool=CompilePool(workers))
        requested = compiled.precompile([a, b])
        assert (requested > 0) == (workers > 1)
        binaries = set(tmp_path.rglob("*.cubin"))
        launchers = set(tmp_path.rglob("__triton_launcher*"))  # Triton < 3.7 builds a C launcher per signature
        results.append(compiled([a, b])[0])
        if workers > 1:  # the launches found every binary and launcher the workers built
            assert binaries and set(tmp_path.rglob("*.cubin")) == binaries
            assert set(tmp_path.rglob("__triton_launcher*")) == launchers
        compiled.pool.shutdown()
    torch.testing.assert_close(results[0], (a * b).exp().sum(1))
    torch.testing.assert_close(results[1], results[0])


def test_backend_option_sizes_the_pool_and_bad_values_are_one_message(monkeypatch):
    from fusec.backend import BackendOptionError, BackendOptions

    assert BackendOptions.from_dict({"compile_workers": 3}).compile_workers == 3
    assert compile_pool.shared_pool(3) is compile_pool.shared_pool(3) and compile_pool.shared_pool(3).workers == 3
    for bad in (0, "4", True):
        with pytest.raises(BackendOptionError, match="option 'compile_workers' must be a positive int"):
            BackendOptions.from_dict({"compile_workers": bad})


@pytest.mark.slow
def test_compiled_model_with_a_pool_size_equals_eager(monkeypatch):
    torch._dynamo.reset()
    x = torch.randn(6, 10, generator=torch.Generator().manual_seed(7))
    fn = torch.compile(lambda t: torch.softmax(t * 2, -1), backend="fusec", options={"compile_workers": 2})
    torch.testing.assert_close(fn(x), torch.softmax(x * 2, -1))
    torch._dynamo.reset()


def test_externs_compute_nothing_while_compiles_are_collected():
    from fusec.runtime.compiled import _shapes_only

    a = torch.randn(5, 3, generator=torch.Generator().manual_seed(8))
    b = torch.randn(3, 4, generator=torch.Generator().manual_seed(9)).t().contiguous().t()
    out = _shapes_only(torch.ops.aten.mm.default)(a, b)
    want = torch.ops.aten.mm.default(a, b)
    assert out.shape == want.shape and out.stride() == want.stride() and out.device == a.device
    # An index no real tensor could use is harmless: nothing reads through it.
    index = torch.full((2,), 10**9, dtype=torch.int64)
    assert _shapes_only(torch.ops.aten.index_select.default)(a, 0, index).shape == (2, 3)


def test_a_slow_compile_says_how_many_kernels_are_done(caplog, monkeypatch):
    import logging

    from fusec.base.progress import Progress

    monkeypatch.setattr(compile_pool, "compile_request", lambda r: f"hash-of-{r.name}")
    reqs = [request("k_a", 1.0), request("k_b", 2.0)]
    with caplog.at_level(logging.INFO, logger="fusec"):
        CompilePool(1).compile(reqs, Progress("@forward_0"))
        assert not caplog.records  # quick: nothing at INFO
        CompilePool(1).compile(reqs, Progress("@forward_0", slow_after=0.0))
    messages = [r.getMessage() for r in caplog.records if r.name == "fusec.compile" and r.levelno == logging.INFO]
    assert [m.split(": ", 1)[1] for m in messages] == ["compiled kernel 1 of 2 (k_a)", "compiled kernel 2 of 2 (k_b)"]
    assert all(m.startswith("@forward_0 [") for m in messages)
