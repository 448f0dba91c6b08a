"""The compile pool: Triton compiles in worker processes, or in-process where there are none."""

import concurrent.futures

import pytest
import torch

import fusec.backend
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


def test_a_request_sent_ahead_compiles_once_and_compile_waits_for_it(monkeypatch):
    """``submit`` returns at once; a later ``compile`` of the same request waits for that compile, not a second."""
    import threading

    started, release, compiled = threading.Event(), threading.Event(), []

    def slow_compile(r):
        started.set()
        release.wait(10)
        compiled.append(r.name)
        return f"hash-of-{r.name}"

    def threads(workers, mp_context=None, initializer=None):  # the pool's executor, with threads standing in for processes
        return concurrent.futures.ThreadPoolExecutor(workers)

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", threads)
    monkeypatch.setattr(compile_pool, "compile_request", slow_compile)
    pool = CompilePool(2)
    try:
        assert pool.submit([request("k_a", 1.0), request("k_a", 1.0)]) == 1
        assert started.wait(10) and pool.submitted(request("k_a", 1.0)) and not pool.submitted(request("k_b", 2.0))
        assert pool.submit([request("k_a", 1.0)]) == 0  # already on its way
        release.set()
        assert pool.compile([request("k_b", 2.0), request("k_a", 1.0)]) == ["hash-of-k_b", "hash-of-k_a"]
        assert sorted(compiled) == ["k_a", "k_b"]
    finally:
        release.set()
        pool.shutdown()
    assert CompilePool(1).submit([request("k_c", 3.0)]) == 0  # in-process: nothing compiles ahead


def test_matmuls_are_sent_to_the_workers_first(monkeypatch):
    """Workers take requests in the order sent: a matmul (the longest compile) goes first, whatever the launcher's
    order, so that it does not start when the pointwise kernels are done."""
    import dataclasses

    sent = []

    class Recording(concurrent.futures.ThreadPoolExecutor):
        def submit(self, fn, *args):
            if not args:  # the pool's warm-up of its workers
                return super().submit(lambda: None)
            sent.append(args[0].name)
            return super().submit(lambda: (f"hash-of-{args[0].name}", 0.5))  # what compile_timed returns

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", lambda workers, **_: Recording(workers))
    small, large = request("k_small", 1.0), request("k_large", 2.0)
    large = dataclasses.replace(large, source=large.source + "    tl.store(out_ptr0, tl.exp(tl.load(in_ptr0)))\n")
    matmul = dataclasses.replace(request("k_mm", 3.0), source=request("k_mm", 3.0).source.replace(
        "tl.exp(tl.load(in_ptr0 + xindex, xmask))", "tl.sum(tl.dot(tl.load(in_ptr0 + xindex[:, None] * 16 + "
        "tl.arange(0, 16)[None, :]), tl.load(in_ptr0 + tl.arange(0, 16)[:, None] * 16 + tl.arange(0, 16)[None, :])), 1)"))
    pool = CompilePool(2)
    try:
        assert pool.submit([small, large, matmul]) == 3
        assert sent == ["k_mm", "k_large", "k_small"]
        assert pool.compile([small, matmul]) == ["hash-of-k_small", "hash-of-k_mm"]  # results in the asked order
        assert pool.compile_seconds == {"k_small": 0.5, "k_mm": 0.5}  # each compile's time, for reports
    finally:
        pool.shutdown()


def test_meta_inputs_keep_the_layout_triton_specialises_on():
    from fusec.backend import _meta_like

    base = torch.randn(8, 10, generator=torch.Generator().manual_seed(10))
    for t in (base, base[:, 1:], base.t(), base[2:, ::3], base[:0], base.expand(2, 8, 10)):
        m = _meta_like(t)
        assert m.device.type == "meta" and m.dtype == t.dtype
        assert (m.shape, m.stride(), m.storage_offset()) == (t.shape, t.stride(), t.storage_offset())
        assert m.data_ptr() == t.storage_offset() * t.element_size()  # what Triton's alignment check sees


def test_meta_inputs_of_symbolic_sizes_take_their_hints():
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

    from fusec.backend import _meta_like

    mode = FakeTensorMode(shape_env=ShapeEnv())
    real = torch.randn(6, 10, generator=torch.Generator().manual_seed(12))[:, 2:]
    context = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC, DimDynamic.DYNAMIC])
    fake = mode.from_tensor(real, symbolic_context=context)
    assert isinstance(fake.shape[0], torch.SymInt)
    m = _meta_like(fake)
    assert (m.shape, m.stride(), m.storage_offset()) == (real.shape, real.stride(), real.storage_offset())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dynamic", [False, True])
def test_on_the_gpu_a_training_step_compiles_its_kernels_ahead_of_its_calls(tmp_path, monkeypatch, dynamic):
    """The forward's and the backward's kernels are sent to the pool while compiling (the backward right after
    the forward; under symbolic sizes, at the example inputs' sizes): the first calls find every compile sent
    already, and the step equals eager's."""
    from fusec.runtime import compiled as compiled_module

    monkeypatch.setenv("FUSEC_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    monkeypatch.setenv("FUSEC_GRAPH_CACHE", "1")  # the second compile is a warm start
    sent, late = [], []
    ahead, precompile = compiled_module.CompiledGraph.compile_ahead, compiled_module.CompiledGraph.precompile

    def count_ahead(self, inputs, skip_cached=False):
        sent.append(ahead(self, inputs, skip_cached))
        return sent[-1]

    def count_late(self, inputs):
        if self._known_missing is None:  # a cold graph: what its first call compiles that compile_ahead did not send
            late.extend(r for r in self._collect(inputs)[0] if not self.pool.submitted(r) and not compile_pool.on_disk(r))
        return precompile(self, inputs)

    monkeypatch.setattr(compiled_module.CompiledGraph, "compile_ahead", count_ahead)
    monkeypatch.setattr(compiled_module.CompiledGraph, "precompile", count_late)
    torch._dynamo.reset()
    g = torch.Generator("cuda").manual_seed(11)
    x = torch.randn(64, 96, device="cuda", generator=g)
    w = torch.randn(96, device="cuda", generator=g, requires_grad=True)

    def step(x, w):
        return torch.nn.functional.layer_norm(torch.tanh(x) * w, (96,)).square().mean(0)

    got = torch.compile(step, backend="fusec", dynamic=dynamic, options={"compile_workers": 2})(x, w)
    got.sum().backward()
    got_grad, w.grad = w.grad, None
    want = step(x, w)
    want.sum().backward()
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(got_grad, w.grad)
    assert len(sent) == 2 and all(n > 0 for n in sent), sent  # forward and backward, each sent its compiles
    assert not late, [r.name for r in late]  # the first calls specialised as the meta inputs did

    # A warm start (as a second process: the graphs from the cache, a new pool) sends nothing: the binaries are
    # on disk, and waiting for workers to start and load them cost more than loading them here.  Nor does it
    # bind a launch to find that out: each graph's requests come with it from the cache.
    torch._dynamo.reset()
    monkeypatch.setattr(compile_pool, "_pools", {})
    monkeypatch.setattr(fusec.backend, "import_graph", _no_import)  # both graphs come from their FX entries
    known, compile_known = [], compiled_module.CompiledGraph.compile_known
    monkeypatch.setattr(compiled_module.CompiledGraph, "compile_known",
                        lambda self, requests: known.append((len(requests), compile_known(self, requests))) or known[-1][1])
    monkeypatch.setattr(compiled_module.CompiledGraph, "_collect", lambda *a, **k: pytest.fail("a warm graph bound a launch"))
    again = torch.compile(step, backend="fusec", dynamic=dynamic, options={"compile_workers": 2})(x, w)
    torch.testing.assert_close(again, want)
    assert sent[2:] == [] and [n for _, n in known] == [0, 0] and all(r > 0 for r, _ in known), (sent, known)
    torch._dynamo.reset()


def _no_import(*args, **kwargs):
    raise AssertionError("a warm start imported a graph")


def test_launches_alike_in_what_triton_specialises_on_are_bound_once():
    from fusec.runtime.compiled import _Warmup

    bound = []

    class Kernel:
        def warmup(self, *args, grid, num_warps):
            bound.append((args, num_warps))

    seen: set = set()
    a, b = Kernel(), Kernel()
    x = torch.empty(64, device="meta")
    layers = [_Warmup(a, seen) for _ in range(6)]  # six layers' launch sites of one shared kernel
    for site in layers:
        site.launch(4, 4, x, x[16:], 256, 128)
    assert len(bound) == 1
    _Warmup(a, seen).launch(4, 4, x, x[1:], 256, 128)  # a pointer 4 bytes off: Triton specialises otherwise
    _Warmup(a, seen).launch(4, 8, x, x[16:], 256, 128)  # other warps
    _Warmup(a, seen).launch(4, 4, x, x[16:], 256, 64)  # another block size (a constexpr)
    _Warmup(a, seen).launch(4, 4, x.to(torch.bfloat16), x[16:], 256, 128)  # another dtype
    _Warmup(b, seen).launch(4, 4, x, x[16:], 256, 128)  # another kernel
    assert len(bound) == 6


def test_collecting_records_only_its_own_threads_launches(monkeypatch):
    """While one thread collects compiles, another thread's launches of the same kernels compile as always (a
    model running beside a compile), through whatever hook the user had; the user's hook is back afterwards."""
    import threading
    import types

    import triton

    monkeypatch.setattr(triton.runtime.driver, "_active", types.SimpleNamespace(get_current_target=lambda: "sm90"))
    users = []

    def users_hook(**kwargs):
        users.append(kwargs["fn"])
        return False

    monkeypatch.setattr(triton.knobs.runtime, "jit_cache_hook", users_hook)
    fn = types.SimpleNamespace(jit_function=object())
    compile = {"signature": {"x": "*fp32"}, "constants": {}, "configs": [{}], "num_warps": 4}
    out: list = []
    with compile_pool.collecting({id(fn.jit_function): ("source", "k")}, out):
        hook = triton.knobs.runtime.jit_cache_hook
        assert hook(fn=fn, compile=compile) is True  # this thread: recorded, not compiled
        other: list = []
        thread = threading.Thread(target=lambda: other.append(hook(fn=fn, compile=compile)))
        thread.start()
        thread.join()
        assert other == [False] and users == [fn]  # the other thread compiles, the user's hook saw it
    assert [(r.name, r.options, r.target) for r in out] == [("k", {"num_warps": 4}, "sm90")]
    assert triton.knobs.runtime.jit_cache_hook is users_hook


def test_workers_stop_at_exit_while_the_interpreter_is_whole():
    """A process that started workers and exits prints nothing: no "Exception ignored" from an executor left for the
    interpreter's final teardown (the pool's atexit hook shuts it down first)."""
    import subprocess
    import sys

    code = ("from fusec.runtime.compile_pool import shared_pool\n"
            "pool = shared_pool(2)\npool.start()\nassert pool.parallel\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    pool = CompilePool(2)
    pool.start()
    compile_pool._pools[-1] = pool
    try:
        compile_pool.shut_down_pools()
        assert pool._executor is None
    finally:
        del compile_pool._pools[-1]


def test_a_warm_graph_sends_its_stored_requests_without_binding_a_launch(gelu_graph, monkeypatch):
    """``compile_known`` (a warm start: the requests the cold process collected, from the graph cache) sends what
    Triton's disk cache lacks, and the first call's ``precompile`` waits for those alone: neither binds a launch."""
    from fusec.dialects import fusec as F
    from fusec.lowering.launcher import lower_graph
    from fusec.runtime import compiled as compiled_module

    def threads(workers, mp_context=None, initializer=None):
        return concurrent.futures.ThreadPoolExecutor(workers)

    built = []
    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", threads)
    monkeypatch.setattr(compile_pool, "compile_request", lambda r: built.append(r.name) or f"hash-of-{r.name}")
    monkeypatch.setattr(compiled_module, "on_disk", lambda r: r.name == "k_cached")
    monkeypatch.setattr(compiled_module.CompiledGraph, "_collect", lambda *a, **k: pytest.fail("bound a launch"))
    pool = CompilePool(2)
    try:
        graph = compiled_module.CompiledGraph(lower_graph(F.find_graph(gelu_graph)), pool=pool)
        stored = (request("k_cached", 1.0), request("k_missing", 2.0))
        assert graph.compile_known(stored) == 1
        assert graph.requests == stored  # kept, so that storing the graph again keeps them
        a = torch.empty(37, 16)
        assert graph.precompile([a, a]) == 1  # waits for the one sent, collects nothing
        assert built == ["k_missing"]
    finally:
        pool.shutdown()


def test_the_graph_cache_keeps_a_graphs_compile_requests(tmp_path, monkeypatch):
    """The FX entry holds the requests (or None: not collected, and a warm start collects them as before)."""
    from fusec.frontend.importer import ImportInfo
    from fusec.lowering.launcher import Launcher
    from fusec.runtime import graph_cache

    monkeypatch.setenv("FUSEC_CACHE_DIR", str(tmp_path))
    launcher = Launcher("g", "def call(inputs):\n    return []\n", (), (), ())
    info = ImportInfo("g", (), (), (), (), {})
    for stored in ((request("k_a", 1.0), request("k_b", 2.0)), None):
        graph_cache.store_imported("key", launcher, info, stored)
        launcher2, info2, requests = graph_cache.load_imported("key", "g2", ())
        assert requests == stored and launcher2.graph_name == info2.graph_name == "g2"


def test_the_prefix_of_tritons_cache_keys_is_hashed_in_a_thread_once():
    """``prefetch_triton_key`` (started with the workers where there is a GPU) leaves Triton's cached key prefix
    computed for the first lookup; a second call starts no second thread."""
    compile_pool.prefetch_triton_key()
    thread = compile_pool._key_thread
    compile_pool.prefetch_triton_key()
    assert compile_pool._key_thread is thread
    compile_pool.triton_key_ready()
    assert not thread.is_alive() and compile_pool._triton_key().cache_info().currsize == 1


def test_a_worker_imports_triton_not_torch():
    """A worker's start-up (``_warm``: the imports every compile needs) loads Triton, not torch, sympy or xDSL:
    8 workers importing torch beside the pipeline delayed the first compiles by seconds on a GPU host."""
    import subprocess
    import sys

    script = ("import sys; from fusec.runtime import compile_pool; compile_pool._warm(); "
              "print(sorted(m for m in ('torch', 'sympy', 'xdsl', 'fusec.runtime.compiled') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_first_call_writes_its_kernels_compile_times_into_the_dump(tmp_path):
    """What ``precompile`` compiled, each kernel's seconds in a worker, lands in the graph's dump for fusec-report."""
    import json
    import types

    from fusec.base.env import COMPILE_TIMES_FILE
    from fusec.pipeline import run_pipeline
    from fusec.registry import make_context
    from fusec.runtime import compile_module
    from fusec.testing import parse

    module = parse("""
    fusec.graph @g(%x : !fusec.tensor<[8], f32>) -> (!fusec.tensor<[8], f32>) {
      %y = fusec.pointwise "exp" %x : (!fusec.tensor<[8], f32>) -> !fusec.tensor<[8], f32>
      fusec.output %y : !fusec.tensor<[8], f32>
    }""")
    run_pipeline(make_context(), module, "form-kernels")
    compiled = compile_module(module)
    compiled.pool = CompilePool(1)  # its own, not the process's shared pool
    compiled.pool.compile_seconds.update({"k_a": 1.23456, "k_b": 0.5})
    requests = [types.SimpleNamespace(name="k_a"), types.SimpleNamespace(name="k_c")]  # k_c: not compiled here
    compiled.dump_compile_times(requests)  # no dump folder: nothing written
    assert not list(tmp_path.iterdir())
    compiled.dump_dir = tmp_path
    compiled.dump_compile_times(requests)
    assert json.loads((tmp_path / COMPILE_TIMES_FILE).read_text()) == {"k_a": 1.235}
