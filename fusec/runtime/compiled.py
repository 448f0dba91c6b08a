"""Running compiled graphs: a graph lowered to Triton kernels and a launcher, ready to call.

``compile_module(module, size_hints)`` lowers a graph (after form-kernels) to
Triton kernel sources and a launcher, and returns a ``CompiledGraph``: call it
with a list of tensors.  Kernels run compiled by Triton on CUDA tensors and
under Triton's interpreter on CPU tensors (``fusec.runtime.kernel_cache``).
"""

from __future__ import annotations

import json
import linecache
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from xdsl.dialects.builtin import ModuleOp

from fusec.analysis.bind_plan import BindPlan, InputMismatch, UnboundSymbol, bind_plan
from fusec.base import dtypes, origins
from fusec.base.env import COMPILE_TIMES_FILE
from fusec.base.progress import Progress, logger
from fusec.dialects import fusec as F
from fusec.lowering.launcher import KernelSource, Launcher, lower_graph, runtime_globals
from fusec.lowering.triton_kernel import LoweringOptions, TritonKernel
from fusec.runtime.compile_pool import CompilePool, CompileRequest, collecting, on_disk, shared_pool
from fusec.runtime.kernel_cache import load_shared_kernel, shared_origin, source_hash, use_fusec_triton_cache
from fusec.runtime.kernel_runner import KernelRunner

# ---------------------------------------------------------------- graphs


class InputTypeMismatch(InputMismatch, TypeError):
    """An input that is not a tensor where the graph takes one (a Python number, None, ...)."""


@dataclass(frozen=True)
class InputSignature:
    """What a graph takes: ``check(inputs)`` raises one clear error naming the first input the types contradict."""

    plan: BindPlan  # count, ranks and every dim against the size symbols
    dtypes: tuple[torch.dtype | None, ...]  # None: a type with no torch dtype, not checked

    @staticmethod
    def of(graph: F.GraphOp) -> InputSignature:
        return InputSignature(bind_plan(graph), tuple(_torch_dtype(a.type) for a in graph.block.args))

    def check(self, inputs: Sequence) -> None:
        name = self.plan.graph
        for i, t in enumerate(inputs):
            if not isinstance(t, torch.Tensor):
                kind = f"a {self.dtypes[i]} tensor" if i < len(self.dtypes) and self.dtypes[i] is not None else "a tensor"
                raise InputTypeMismatch(f"@{name}: input {i} must be {kind}, got {type(t).__name__} {t!r:.40}")
        try:
            self.plan.bind(inputs)
        except UnboundSymbol:  # a symbol no input gives is a graph the launcher refused to build, not a bad call
            pass
        for i, (t, want) in enumerate(zip(inputs, self.dtypes, strict=True)):
            if want is not None and t.dtype != want:
                raise InputMismatch(f"@{name}: input {i} must be {want}, got {t.dtype} (shape {list(t.shape)})")


def _torch_dtype(t) -> torch.dtype | None:
    try:
        return dtypes.of_ir(t.element_type).torch
    except (dtypes.UnknownDType, AttributeError):
        return None


# A profiler range around each graph's call, named ``fusec:<graph name>``: a profile's kernels launched inside it
# are that graph's (``fusec.tools.benchmark --profile``), whichever thread (autograd's, for a backward) runs it.
PROFILE_RANGE = "fusec:"
_profiling = torch._C._autograd._profiler_enabled  # on under any torch profiler (torch.profiler, autograd's)


class CompiledGraph:
    """A graph ready to run: ``compiled(inputs) -> outputs`` (lists of tensors).

    How much of the inputs the generated launcher checks is ``compile_module``'s ``input_checks``; where it
    trusts its caller (Dynamo's guards) and a call fails anyway, the inputs are checked against ``signature``
    then, so a wrong input is reported as one ``InputMismatch`` naming it rather than as an error deep inside.
    """

    def __init__(self, launcher: Launcher, default_device: torch.device | None = None,
                 signature: InputSignature | None = None, pool: CompilePool | None = None):
        self.launcher = launcher
        self.pool = pool or shared_pool()
        use_fusec_triton_cache()
        self.default_device = default_device or torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.signature = signature
        self._calls: dict[bool, Callable[[Sequence[torch.Tensor]], list[torch.Tensor]]] = {}
        # What compile_ahead collected (kept with the graph in the graph cache), or, on a warm start, what the cold
        # process collected: ``compile_known`` then sends those without binding a launch.
        self.requests: tuple[CompileRequest, ...] | None = None
        self._known_missing: list[CompileRequest] | None = None  # compile_known's: not on disk, sent to the pool
        self.dump_dir: Path | None = None  # the graph's dump folder: its first call writes its kernels' compile times

    @property
    def kernels(self) -> tuple[KernelSource, ...]:
        return self.launcher.kernels

    @property
    def source(self) -> str:
        return self.launcher.source

    def __call__(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        try:
            interpret = not inputs[0].is_cuda if inputs else self.default_device.type != "cuda"
            call = self._calls.get(interpret)
            if call is None:
                if not interpret:
                    self.precompile(inputs)
                call = self._build(interpret)
            if _profiling():  # a profile attributes kernels to their graph by this range
                with torch.profiler.record_function(PROFILE_RANGE + self.launcher.graph_name):
                    return call(inputs)
            return call(inputs)
        except InputMismatch:
            raise
        except Exception:
            problem = self._input_problem(inputs)
            if problem is None:
                raise
        raise problem from None

    def check_inputs(self, inputs: Sequence) -> None:
        """Raise ``InputMismatch`` if ``inputs`` contradict the graph's dtypes, ranks or size symbols."""
        if self.signature is not None:
            self.signature.check(inputs)

    def _input_problem(self, inputs: Sequence) -> InputMismatch | None:
        try:
            self.check_inputs(inputs)
        except InputMismatch as e:
            return e
        return None

    def precompile(self, inputs: Sequence[torch.Tensor]) -> int:
        """Compile every kernel this call will launch, in the compile pool, before launching any.

        The launcher runs once with its launches turned into warmups whose compiles are collected
        (``compile_pool.collecting``), externs running on the uninitialised buffers: the specialisations
        are exactly those of the real call.  Returns how many compiles went to the pool (0 when the pool
        would compile in-process anyway, the launches then compiling as they come, or when Triton's disk
        cache holds every binary already: a warm start).  Those ``compile_ahead`` sent are only waited for.
        """
        if not self.pool.parallel or not self.launcher.kernels:
            return 0
        progress = Progress(f"@{self.launcher.graph_name}")
        collected = self._known_missing if self._known_missing is not None else self._collect(inputs)[0]
        requests = [r for r in collected if self.pool.submitted(r) or not on_disk(r)]
        if requests:
            progress.step("compiling %d kernels in %d workers", len(requests), self.pool.workers)
            self.pool.compile(requests, progress)
            self.dump_compile_times(requests)
        return len(requests)

    def dump_compile_times(self, requests: Sequence[CompileRequest]) -> None:
        """Each compiled kernel's seconds in a worker, into the graph's dump (``COMPILE_TIMES_FILE``, which
        ``fusec-report`` shows beside each kernel): where a first call's time went."""
        if self.dump_dir is None:
            return
        seconds = {r.name: round(s, 3) for r in requests if (s := self.pool.compile_seconds.get(r.name)) is not None}
        if seconds:
            (self.dump_dir / COMPILE_TIMES_FILE).write_text(json.dumps(seconds, indent=1) + "\n")

    def compile_ahead(self, inputs: Sequence[torch.Tensor], skip_cached: bool = False) -> int:
        """Send this graph's compiles to the pool now, without waiting: ``inputs`` are meta tensors with the
        real inputs' shapes, strides, storage offsets and dtypes (a meta tensor's ``data_ptr`` is its offset
        in bytes, so Triton specialises on alignment as it will for the real ones, whose allocations are
        aligned).  The first call then waits only for what is still compiling; if it specialises otherwise
        (an input of another alignment), it compiles that as before.  Returns how many compiles were sent.

        ``skip_cached`` (a graph from the warm start, whose binaries are likely on disk): what Triton's disk cache
        holds is not sent, the launch loads it in milliseconds; else nothing is looked up (milliseconds a kernel,
        in the process the first call waits for) and a worker's compile finds a cached binary itself.  Sent
        anyway, a warm graph's first call waited for workers still starting (GPT-2, H200: 2.1 s).
        """
        if not self.pool.parallel or not self.launcher.kernels:
            return 0
        requests, complete = self._collect(inputs, torch.empty_strided)
        self.requests = tuple(requests) if complete else None
        if skip_cached:
            requests = [r for r in requests if not on_disk(r)]
        return self.pool.submit(requests)

    def compile_known(self, requests: Sequence[CompileRequest]) -> int:
        """A warm start's ``compile_ahead``: ``requests`` are what the cold process collected for this graph (kept
        with it in the graph cache); those Triton's disk cache lacks are sent to the pool, and the first call's
        ``precompile`` waits for those alone.  No launch is bound to collect them again: that binding, every
        launch through Triton's JIT, was most of a warm graph's start (0.86 of 0.94 s, GPT-2 training, H100).
        A first call that specialises otherwise compiles what differs as it launches, as after compile_ahead."""
        if not self.pool.parallel or not self.launcher.kernels:
            return 0
        self.requests = tuple(requests)
        self._known_missing = [r for r in requests if not on_disk(r)]
        return self.pool.submit(self._known_missing)

    def _collect(self, inputs: Sequence[torch.Tensor], empty=None) -> tuple[list[CompileRequest], bool]:
        """What the launcher's Triton launches would compile for ``inputs`` (nothing launches; ``empty``
        allocates its buffers, by default on the inputs' GPU), and whether every launch was bound (a failure
        leaves what was collected before it)."""
        requests: list[CompileRequest] = []
        sources = {}
        try:
            seen: set[tuple] = set()  # launches already bound: identical layers launch one kernel alike
            call = self._bind(lambda k: _Warmup(load_shared_kernel(k.source, k.name, False), seen), False, _shapes_only,
                              empty)
            for k in self.launcher.kernels:
                kernel = load_shared_kernel(k.source, k.name, False)
                sources[id(kernel)] = shared_origin(kernel)  # the body's first name, which Triton keys on
            with collecting(sources, requests), torch.no_grad():
                call(list(inputs))
        except Exception as e:  # never worse than without the pool: the real launches compile what is missing
            logger.debug("@%s: collecting compiles failed (%s: %s)", self.launcher.graph_name, type(e).__name__, e)
            return requests, False
        return requests, True

    def _build(self, interpret: bool):
        """The launcher's ``call`` bound to this mode's kernels (once per mode)."""
        keys = {name: (positions, dtypes, literals) for name, *positions, dtypes, literals in self.launcher.launch_keys}

        def runner(k: TritonKernel) -> KernelRunner:
            positions, dtypes, literals = keys.get(k.name, ((), (), ()))
            return shared_runner(load_shared_kernel(k.source, k.name, interpret), interpret, tuple(positions), dtypes,
                                 literals)

        call = self._bind(runner, interpret)
        self._calls[interpret] = call
        return call

    def _bind(self, runner, interpret: bool, extern=lambda fn: _direct(fn), empty=None):
        """The launcher's ``call`` with each kernel name bound to ``runner(kernel)`` (each extern to ``extern(fn)``,
        its buffers allocated by ``empty``, by default on the current GPU)."""
        from fusec.dialects.extern_calls import resolve_target

        namespace: dict[str, Any] = runtime_globals()  # the exec fills in "call"
        namespace["_default_device"] = self.default_device
        if empty is not None:
            namespace["_empty"] = empty
        elif not interpret:
            namespace["_empty"] = _cuda_empty()
        for k in self.launcher.kernels:
            namespace[k.name] = runner(k)
        for name, target in self.launcher.externs:
            namespace[name] = extern(resolve_target(target))
        filename = f"<fusec launcher @{self.launcher.graph_name} {source_hash(self.launcher.source)[:12]}>"
        linecache.cache[filename] = (len(self.launcher.source), None, self.launcher.source.splitlines(True), filename)
        exec(compile(self.launcher.source, filename, "exec"), namespace)
        call = namespace["call"]
        return _quiet_numpy(call) if interpret else _on_inputs_device(call, self.default_device)


# Extern targets whose torch function is the same operator taking the same arguments: torch's generated binding
# parses them in C (~1.5 us a call on the CPU) where an OpOverload's boxed call takes ~4 us; a model's matmuls and
# attention run hundreds of times a step.
_TORCH_FUNCTIONS = frozenset({"mm", "addmm", "bmm", "baddbmm", "convolution", "_scaled_dot_product_flash_attention",
                              "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention"})


def _direct(fn):
    """The cheapest callable running extern target ``fn`` (an ``OpOverload``) as ``fn(*args, **kwargs)`` does."""
    if type(fn) is not torch._ops.OpOverload:  # a TorchBind op (an opaque object argument) keeps its own call
        return fn
    if fn._overloadname == "default" and fn._opname in _TORCH_FUNCTIONS:
        direct = getattr(torch._C._VariableFunctions, fn._opname, None)
        if direct is not None:
            return direct
    return fn._op  # OpOverload.__call__'s own body, less its Python frame


def _cuda_empty():
    """``torch.empty_strided`` for the launcher's CUDA buffers, through the allocator Inductor's wrappers call
    (``_empty_strided_cuda``: no Python argument parsing; it allocates on the current device, which
    ``_on_inputs_device`` makes the inputs' device)."""
    fast = getattr(torch._C._dynamo.guards, "_empty_strided_cuda", None)
    if fast is None:
        return torch.empty_strided

    def empty(size, stride, dtype, device):
        return fast(size, stride, dtype)

    return empty


def _on_inputs_device(call, default_device: torch.device):
    """``call`` with the inputs' GPU current while it runs: its buffers are allocated, and its kernels launched,
    on the current device."""
    guard = getattr(torch.cuda, "_DeviceGuard", None)
    if guard is None:
        return call
    default = default_device.index if default_device.index is not None else -1

    def on_device(inputs):
        with guard(inputs[0].get_device() if inputs else default):
            return call(inputs)

    return on_device


def _shapes_only(fn):
    """An extern that computes nothing while compiles are collected: its kernels' outputs are uninitialised,
    and an index computed by one could point anywhere (a device-side assert kills the CUDA context).
    It runs on meta tensors and returns empty tensors of the real outputs' shapes and strides."""
    from torch.utils._pytree import tree_map

    def meta(x):
        return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta") if isinstance(x, torch.Tensor) else x

    def dry(*args, **kwargs):
        device = next((x.device for x in (*args, *kwargs.values()) if isinstance(x, torch.Tensor)), None)
        out = fn(*tree_map(meta, args), **tree_map(meta, kwargs))

        def real(x):
            if not isinstance(x, torch.Tensor):
                return x
            return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=device or x.device)

        return tree_map(real, out)

    return dry


class _Warmup:
    """Stands for a ``KernelRunner`` while compiles are collected: Triton binds and specialises, nothing launches.

    A launch of a kernel with arguments alike in everything Triton specialises on (a pointer's dtype and 16-byte
    alignment; other arguments by value, which is stricter) is bound once: the six or twelve identical layers of
    a model launch the same shared kernels alike (ViT's walk ahead 1.47 -> 0.98 s on an H100; GPT-2's, 0.75 s,
    did not move: the rest of a walk is its externs and buffers)."""

    __slots__ = ("kernel", "seen")

    def __init__(self, kernel, seen: set[tuple]):
        self.kernel = kernel
        self.seen = seen

    def launch(self, grid: int, num_warps: int, *args) -> None:
        key = (id(self.kernel), num_warps,
               *((a.dtype, a.data_ptr() % 16 == 0) if isinstance(a, torch.Tensor) else (type(a), a) for a in args))
        if key in self.seen:
            return
        self.seen.add(key)
        self.kernel.warmup(*args, grid=(grid,), num_warps=num_warps)


_runners: dict[tuple, KernelRunner] = {}


def shared_runner(kernel, interpret: bool, keys: tuple, dtypes: tuple[str, ...] = (),
                  literals: tuple[tuple[int, str], ...] = ()) -> KernelRunner:
    """One runner per (kernel body, launch keys, pointer element types, literal arguments): a launch site whose body
    another site already launched with the same keys, types and literals starts on the fast path with that site's
    compiled kernels.  Types and literals must be part of it: the runner keys its compiled kernels on neither, one
    body can serve f16 and bf16 sites (a bf16 launch on an f16 binary reads the wrong numbers, silently) and sites of
    different sizes (a binary compiled for XBLOCK=128 launched on a grid for 256 leaves half the rows undone)."""
    key = (id(kernel), interpret, *map(tuple, keys), dtypes, tuple(literals))
    runner = _runners.get(key)
    if runner is None or runner.kernel is not kernel:
        runner = _runners[key] = KernelRunner(kernel, interpret, *keys)
    return runner


def _quiet_numpy(call):
    """Masked-off lanes compute too (log(0) in a padded row): under the interpreter numpy would warn."""
    import numpy as np

    def quiet(inputs):
        with np.errstate(all="ignore"):
            return call(inputs)

    return quiet


def compile_module(module: ModuleOp | F.GraphOp, size_hints: Mapping[str, int] | None = None, *,
                   graph_name: str | None = None, options: LoweringOptions = LoweringOptions(),
                   input_checks: str = "all", compile_workers: int | None = None) -> CompiledGraph:
    """Lower a graph after form-kernels (and any fusion) to Triton and a launcher.

    ``size_hints`` gives an example value per size symbol; the code works for every
    size the symbols' bounds admit, hints only steer choices that are safe anyway.
    ``input_checks``: what the caller leaves to check of the inputs (see ``lower_graph``);
    ``compile_workers``: processes compiling its kernels on the GPU (None: ``$FUSEC_COMPILE_WORKERS`` or min(cpus, 8)).
    """
    graph = F.find_graph(module, graph_name)
    try:
        launcher = lower_graph(graph, size_hints, options, input_checks)
    except Exception as e:
        _note_origin(e)
        raise
    return CompiledGraph(launcher, signature=InputSignature.of(graph), pool=shared_pool(compile_workers))


def _note_origin(e: Exception) -> None:
    """Notes under a lowering failure: the op being lowered, its FX node and the user's source line."""
    op = origins.op_in_flight(e.__traceback__)
    if op is None:
        return
    e.add_note(f"while lowering {origins.describe(op)}")
    excerpt = origins.source_excerpt(origins.location_of(op))
    if excerpt:
        e.add_note(excerpt)
