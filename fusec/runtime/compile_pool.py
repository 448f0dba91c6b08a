"""Triton compilations in a pool of worker processes, as Inductor's async compile does.

A graph's first call on the GPU would compile its kernels one after another (LLVM and
ptxas: most of a cold start).  Instead ``CompiledGraph`` first walks its launcher once
without launching (``collect_requests``): every launch goes through Triton's own binding
and specialisation, and Triton's ``jit_cache_hook`` hands us what it would compile (the
signature, constexprs, attributes and options) and skips the compile.  Workers then
compile those requests with ``triton.compile`` into Triton's disk cache, all at once;
the real first call finds every binary there.  Nothing is trusted from a worker: a
request that fails or lands under another cache key is simply compiled again by the
launch that needs it, as without the pool.

Workers are spawned (never forked: the parent may hold a CUDA context), started early
(``start``, called when the backend is first used) so that their start overlaps the
pipeline.  A graph's compiles can also be sent ahead (``submit``, as soon as the graph is
lowered, from meta tensors of its example inputs): they run while Dynamo and AOTAutograd go on
to the next graph, and the first call waits only for what is still compiling.  Every request
is compiled once per process, however often it is asked for.  Size: ``workers``, else
``$FUSEC_COMPILE_WORKERS``, else half the cpus (at most 32): compiles sent ahead share the
machine with the next graph's pipeline, which as many workers as cpus slowed by 45% (ViT's
training step on a 16-core host: first call 30.5 s with 16 workers, 27.6 s with 8).  1, or a
platform without processes, compiles in-process.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import hashlib
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fusec.base import env
from fusec.base.progress import Progress, logger
from fusec.runtime.kernel_cache import use_fusec_triton_cache

MAX_DEFAULT_WORKERS = 32  # as Inductor's compile_threads


def default_workers() -> int:
    configured = env.compile_workers()
    return configured if configured is not None else max(1, min((os.cpu_count() or 1) // 2, MAX_DEFAULT_WORKERS))


@dataclass(frozen=True)
class CompileRequest:
    """One Triton compilation: the kernel (by its module source and name) and what Triton specialised it on."""

    source: str
    name: str
    signature: dict
    constexprs: dict
    attrs: dict
    target: object  # triton.backends.compiler.GPUTarget
    options: dict

    def key(self) -> tuple:
        return (self.source, self.name, repr(self.signature), repr(self.constexprs), repr(self.attrs),
                repr(self.target), repr(sorted(self.options.items())))


def _expected_compile_time(request: CompileRequest) -> tuple[bool, int]:
    """An order of requests by how long they take to compile, longest first: a matmul (``tl.dot``: LLVM and ptxas
    on a pipelined main loop) takes several times a pointwise kernel's, and sent last it would be what the first
    call waits for after the others are done; then the longer source.  Workers take requests in the order sent."""
    return "tl.dot(" in request.source, len(request.source)


def compile_request(request: CompileRequest) -> str:
    """Compile one request into Triton's disk cache (in a worker, or in-process); returns the kernel's hash."""
    import triton
    from triton.compiler import ASTSource

    from fusec.runtime.kernel_cache import load_kernel

    kernel = load_kernel(request.source, request.name, interpret=False)
    src = ASTSource(kernel, request.signature, request.constexprs, request.attrs)
    compiled = triton.compile(src, target=request.target, options=request.options)
    build_launcher(compiled)
    return compiled.hash


def compile_timed(request: CompileRequest) -> tuple[str, float]:
    """``compile_request`` and the seconds it took (what a worker returns: the pool keeps each kernel's time)."""
    start = time.perf_counter()
    kernel_hash = compile_request(request)
    return kernel_hash, time.perf_counter() - start


def build_launcher(compiled) -> None:
    """Build the kernel's host launcher into Triton's cache too, where Triton compiles one per kernel signature.

    Triton before 3.7 turns each new signature into a C launcher with the system's C compiler (about 0.3 s)
    when a kernel is first launched, in the launching process and one at a time: 20 of them took 6 s of
    ViT's first training step.  Built here, the launch finds them in the shared cache.  Later Triton launches
    every kernel through one generic launcher: there is nothing to build.  Never fatal: the launch builds
    whatever is missing, as without the pool.
    """
    try:
        from triton.backends.nvidia import driver as nvidia

        if getattr(compiled.metadata, "target", None) is not None and compiled.metadata.target.backend != "cuda":
            return
        if not hasattr(nvidia, "make_launcher"):  # the generic launcher: nothing is compiled per signature
            return
        nvidia.CudaLauncher(compiled.src, compiled.metadata)
    except Exception as e:
        logger.debug("building the launcher of %s failed: %s: %s", getattr(compiled, "name", "?"), type(e).__name__, e)


def on_disk(request: CompileRequest) -> bool:
    """Whether Triton's disk cache already holds this request's binary (a warm start): then it is not sent
    to a worker, the launch loads it in milliseconds.  Computed as ``triton.compile`` does; False when unsure."""
    try:
        triton_key_ready()
        from triton.compiler.compiler import ASTSource, get_cache_invalidating_env_vars, get_cache_key, get_cache_manager, make_backend

        from fusec.runtime.kernel_cache import load_kernel

        src = ASTSource(load_kernel(request.source, request.name, interpret=False), request.signature,
                        request.constexprs, request.attrs)
        backend = make_backend(request.target)
        options = backend.parse_options(dict(request.options, **src.parse_options()))
        key = get_cache_key(src, backend, options, env_vars=get_cache_invalidating_env_vars())
        name = f"{src.name[:150]}.json"
        group = get_cache_manager(hashlib.sha256(key.encode()).hexdigest()).get_group(name) or {}
        return group.get(name) is not None
    except Exception as e:  # a Triton whose internals moved: compile as if cold
        logger.debug("cannot look %s up in Triton's cache (%s: %s)", request.name, type(e).__name__, e)
        return False


def _warm() -> int:
    """Run once per worker as it starts: the imports a compile needs, paid while the pipeline runs (Triton and the
    kernels' own imports; never torch: ``fusec.runtime`` loads ``compiled`` lazily, for these workers)."""
    import triton.compiler  # noqa: F401

    import fusec.lowering.triton_compat  # noqa: F401  (every kernel's source imports it)
    import fusec.runtime.kernel_cache  # noqa: F401

    return os.getpid()


def _lower_priority() -> None:
    """Each worker's initializer: compiles sent ahead run beside the next graph's pipeline, which is what the
    first call waits for; with as many workers as cores, the pipeline must not queue behind them."""
    with contextlib.suppress(OSError, AttributeError):  # no nice() on this platform: equal priority
        os.nice(10)


@contextlib.contextmanager
def _without_main_module():
    """Workers spawned inside do not run the user's script: a spawned child imports the parent's ``__main__``
    (a script without an ``if __name__ == "__main__"`` guard would compile its model again in every worker).
    Workers run fusec's functions only, so an empty ``__main__`` is all they need."""
    import sys
    import types

    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


class CompilePool:
    """``pool.compile(requests)``: every request compiled, in parallel where processes are available;
    ``pool.submit(requests)``: the same without waiting (a later ``compile`` of them waits)."""

    def __init__(self, workers: int | None = None):
        self.workers = default_workers() if workers is None else max(1, int(workers))
        self._executor: concurrent.futures.Executor | None = None
        self._broken = False
        self._lock = threading.Lock()
        self._futures: dict[tuple, concurrent.futures.Future] = {}  # request key -> its compile in a worker
        self.compile_seconds: dict[str, float] = {}  # kernel name -> seconds its compile took (where one ran)

    @property
    def parallel(self) -> bool:
        return self.workers > 1 and not self._broken

    def start(self) -> None:
        """Start the workers now (they import Triton while the caller goes on)."""
        if not self.parallel or self._executor is not None:
            return
        use_fusec_triton_cache()  # before the spawn: workers and this process must share one cache
        with self._lock:
            if self._executor is not None:
                return
            try:
                executor = concurrent.futures.ProcessPoolExecutor(
                    self.workers, mp_context=multiprocessing.get_context("spawn"), initializer=_lower_priority)
                with _without_main_module():
                    for _ in range(self.workers):
                        executor.submit(_warm)
            except (OSError, NotImplementedError, ImportError, RuntimeError) as e:  # no processes here (sandbox, no /dev/shm)
                logger.debug("no compile workers (%s: %s): compiling in-process", type(e).__name__, e)
                self._broken = True
                return
            self._executor = executor

    def submitted(self, request: CompileRequest) -> bool:
        """Whether this process already sent ``request`` to a worker (done or still compiling)."""
        return request.key() in self._futures

    def submit(self, requests: Sequence[CompileRequest]) -> int:
        """Send the requests not yet sent to the workers and return at once; how many were sent (0 without
        workers: nothing compiles ahead in-process, the first call compiles as it would have)."""
        self.start()
        if self._executor is None:
            return 0
        try:
            return len(self._send([r for r in _unique(requests) if not self.submitted(r)]))
        except (RuntimeError, concurrent.futures.BrokenExecutor) as e:
            logger.debug("compile workers lost (%s): nothing sent ahead", e)
            return 0

    def compile(self, requests: Sequence[CompileRequest], progress: Progress | None = None) -> list[str | None]:
        """The kernels' hashes (None where a compile failed: the launch that needs it compiles it again)."""
        unique = _unique(requests)
        progress = progress or Progress("kernels")
        self.start()
        if self._executor is None:
            results = [self._guarded(r) for r in unique]
            for i, r in enumerate(unique):
                progress.step("compiled kernel %d of %d (%s)", i + 1, len(unique), r.name)
        else:
            results = self._in_workers(unique, progress)
        by_key = dict(zip((r.key() for r in unique), results, strict=True))
        return [by_key[r.key()] for r in requests]

    def _send(self, requests: list[CompileRequest]) -> list[concurrent.futures.Future]:
        executor = self._executor
        assert executor is not None, "the pool is parallel"
        with _without_main_module():
            for r in sorted(requests, key=_expected_compile_time, reverse=True):
                self._futures[r.key()] = executor.submit(compile_timed, r)
        return [self._futures[r.key()] for r in requests]

    def _in_workers(self, requests: list[CompileRequest], progress: Progress) -> list[str | None]:
        try:
            self._send([r for r in requests if not self.submitted(r)])
        except (RuntimeError, concurrent.futures.BrokenExecutor) as e:  # the pool died or was shut down
            return self._fall_back(requests, e)
        futures = {self._futures[r.key()]: i for i, r in enumerate(requests)}
        results: list[str | None] = [None] * len(requests)
        for done, future in enumerate(concurrent.futures.as_completed(futures), 1):
            i = futures[future]
            try:
                results[i] = self._record(requests[i], *future.result())
            except concurrent.futures.BrokenExecutor as e:
                return self._fall_back(requests, e)
            except Exception as e:  # a kernel Triton refuses: its launch will say so, with the real traceback
                logger.debug("compiling %s in a worker failed: %s: %s", requests[i].name, type(e).__name__, e)
            progress.step("compiled kernel %d of %d (%s)", done, len(requests), requests[i].name)
        return results

    def _fall_back(self, requests: list[CompileRequest], error: BaseException) -> list[str | None]:
        logger.debug("compile workers lost (%s): compiling in-process", error)
        self.shutdown()
        self._broken = True
        return [self._guarded(r) for r in requests]

    def _guarded(self, request: CompileRequest) -> str | None:
        try:
            return self._record(request, *compile_timed(request))
        except Exception as e:  # as in a worker: the launch compiles it again and reports
            logger.debug("compiling %s failed: %s: %s", request.name, type(e).__name__, e)
            return None

    def _record(self, request: CompileRequest, kernel_hash: str, seconds: float) -> str:
        self.compile_seconds[request.name] = seconds
        logger.debug("compiled %s in %.2f s", request.name, seconds)
        return kernel_hash

    def shutdown(self) -> None:
        self._futures.clear()
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)


def _unique(requests: Sequence[CompileRequest]) -> list[CompileRequest]:
    return list({r.key(): r for r in requests}.values())


_pools: dict[int | None, CompilePool] = {}


@atexit.register
def shut_down_pools() -> None:
    """Stop the workers while the interpreter is whole: an executor left for the final teardown logs "Exception
    ignored ... 'NoneType' object has no attribute 'util'" (its manager's callback runs after multiprocessing's
    module is gone; seen at the end of a GPU test run)."""
    for pool in _pools.values():
        pool.shutdown()


def shared_pool(workers: int | None = None) -> CompilePool:
    """The process's pool of ``workers`` processes (None: ``$FUSEC_COMPILE_WORKERS`` or the default), made once."""
    pool = _pools.get(workers)
    if pool is None:
        pool = _pools.setdefault(workers, CompilePool(workers))
    return pool


def start_early(workers: int | None = None) -> bool:
    """Start the shared pool's workers where there is a GPU to compile for (the interpreter compiles nothing),
    and hash Triton's own code for its cache keys in a thread; whether compiles then run in workers."""
    import torch

    if not torch.cuda.is_available():
        return False
    prefetch_triton_key()
    pool = shared_pool(workers)
    pool.start()
    return pool.parallel


_key_thread: threading.Thread | None = None


def prefetch_triton_key() -> None:
    """Compute the prefix of every Triton cache key (a hash of Triton's sources and of its 100s-of-MB library, once
    a process: 0.35 s on this project's CPU machine) in a thread, while AOTAutograd traces: a warm start's first
    cache lookup (``on_disk``) waited for it, and a cold start's first launch did."""
    global _key_thread
    if _key_thread is not None:
        return

    def compute():
        try:
            _triton_key()()
        except Exception as e:  # a Triton without it: the lookup computes what it needs itself
            logger.debug("cannot hash Triton's code ahead (%s: %s)", type(e).__name__, e)

    _key_thread = threading.Thread(target=compute, name="fusec-triton-key", daemon=True)
    _key_thread.start()


def triton_key_ready() -> None:
    """Wait for ``prefetch_triton_key``'s thread (if one runs) rather than hashing the same files beside it."""
    if _key_thread is not None:
        _key_thread.join()


def _triton_key() -> Callable[[], str]:
    try:
        from triton.runtime.cache import triton_key
    except ImportError:  # where an older Triton kept it (not checked against 3.6, the oldest supported)
        from triton.compiler.compiler import triton_key
    return triton_key


# ---------------------------------------------------------------- collecting what Triton would compile


_collectors: dict[int, tuple[dict[int, tuple[str, str]], list[CompileRequest]]] = {}  # thread id -> (sources, out)
_collectors_lock = threading.Lock()
_hook_before: list = []  # the jit_cache_hook installed before the first collector (a user's, or None)


def _collect_hook(*, fn, compile, is_manual_warmup=False, already_compiled=False, **kwargs):
    """Triton's ``jit_cache_hook`` while any thread collects: that thread's launches of fusec's kernels are
    recorded, not compiled (True skips the compile); every other launch compiles as without it, through the
    hook that was there before."""
    sources, out = _collectors.get(threading.get_ident(), ({}, []))
    found = sources.get(id(fn.jit_function))
    if found is not None and not already_compiled:
        import triton

        options = {k: compile[k] for k in ("num_warps", "num_ctas", "num_stages", "enable_fp_fusion",
                                           "launch_cooperative_grid", "extern_libs") if k in compile}
        out.append(CompileRequest(found[0], found[1], dict(compile["signature"]), dict(compile["constants"]),
                                  dict(compile["configs"][0]), triton.runtime.driver.active.get_current_target(), options))
        return True
    before = _hook_before[0] if _hook_before else None
    return bool(before(fn=fn, compile=compile, is_manual_warmup=is_manual_warmup, already_compiled=already_compiled,
                       **kwargs)) if before is not None else False


@contextlib.contextmanager
def collecting(sources: dict[int, tuple[str, str]], out: list[CompileRequest]):
    """Inside, this thread's launches of the kernels in ``sources`` are not compiled but recorded in ``out`` as
    ``CompileRequest``s; other threads' launches (a model running beside a compile) compile and run as always.

    ``sources``: id of a ``@triton.jit`` function -> (its module source, its name).  Uses Triton's
    ``jit_cache_hook`` (returning True skips the compile); launches must be warmups (``kernel.warmup``).
    """
    import triton

    knobs = triton.knobs.runtime
    me = threading.get_ident()
    with _collectors_lock:
        if not _collectors:
            _hook_before[:] = [knobs.jit_cache_hook]
            knobs.jit_cache_hook = _collect_hook
        _collectors[me] = (sources, out)
    try:
        yield
    finally:
        with _collectors_lock:
            del _collectors[me]
            if not _collectors:
                knobs.jit_cache_hook = _hook_before[0]
                _hook_before.clear()
