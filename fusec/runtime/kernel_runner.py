"""Launching a ``@triton.jit`` kernel without Triton's per-call argument binding.

``kernel[grid](*args)`` binds every argument to the signature, computes Triton's
specialisation key (dtypes, 16-byte alignment of pointers, ints equal to 1 or
divisible by 16, 32- or 64-bit ints), looks the compiled kernel up and launches
it: tens of microseconds for a kernel with many arguments, more than a small
kernel runs.  A launcher already knows most of that: its constexprs and warps
come from heuristics, its buffers come from ``torch.empty_strided`` (aligned),
its inputs were made aligned by the launcher's prologue, and static sizes are
literals.  ``KernelRunner`` keys its compiled kernels only on what can still
vary at a launch site — the warps, the alignment of pointers of unknown origin
(``checked``), the Triton classes of runtime ints (``ints``) and the values of
constexprs chosen per call (``chosen``: block sizes of a symbolic domain) — and on a miss
goes through ``kernel[grid]`` once, which compiles (or finds) the kernel Triton
would have used for exactly these arguments, and launches it.  Later launches
call the compiled kernel's own launcher, the way Triton's ``run`` ends.

Under Triton's interpreter (CPU tensors) every launch goes through ``kernel[grid]``,
one at a time: the interpreter patches ``triton.language`` and keeps the program id
in one global builder while a launch runs, so two threads launching at once would
read each other's program ids.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Sequence

import triton
from triton.runtime import _allocation

_INT32 = 2**31
_interpreter_lock = threading.Lock()  # Triton's interpreter runs one launch at a time per process


def int_class(v: int) -> tuple[bool, bool, bool]:
    """What Triton specialises an int argument on: equal to 1, divisible by 16, fits in int32."""
    return v == 1, v % 16 == 0, -_INT32 <= v < _INT32


class KernelRunner:
    """``runner.launch(grid, num_warps, *args)``: one launch of ``(grid, 1, 1)`` programs.

    ``args`` are every parameter of the kernel in signature order, constexprs
    included (positionally).  ``checked``: positions of pointers whose 16-byte
    alignment is not known when the launcher is generated; ``ints``: positions of
    int arguments that are not literals; ``chosen``: positions of constexprs that
    are not literals.
    """

    __slots__ = ("kernel", "interpret", "checked", "ints", "chosen", "compiled", "key")

    def __init__(self, kernel, interpret: bool, checked: Sequence[int] = (), ints: Sequence[int] = (),
                 chosen: Sequence[int] = ()):
        self.kernel = kernel
        self.interpret = interpret
        self.checked = tuple(checked)
        self.ints = tuple(ints)
        self.chosen = tuple(chosen)
        self.compiled: dict[tuple | int, tuple] = {}
        self.key = _key_function(self.checked, self.ints, self.chosen)

    def launch(self, grid: int, num_warps: int, *args) -> None:
        if self.interpret:
            ensure_allocator()
            with _interpreter_lock:
                self.kernel[(grid,)](*args, num_warps=num_warps)
            return
        key = self.key(num_warps, args)
        entry = self.compiled.get(key)
        if entry is None or _hooked():
            # Triton binds, specialises, compiles if needed and launches; keep what it chose.
            ensure_allocator()  # a kernel may need scratch (a tensor descriptor made on the device)
            compiled = self.kernel[(grid,)](*args, num_warps=num_warps)
            scratch = bool(getattr(compiled.run, "global_scratch_size", 0))
            self.compiled[key] = (compiled.run, compiled.function, compiled.packed_metadata, _c_launch(compiled.run), scratch)
            return
        run, function, metadata, c_launch, scratch = entry
        device, stream = _current()
        if c_launch is not None:
            launch, cooperative, pdl = c_launch
            launch(grid, 1, 1, stream(device()), function, cooperative, pdl, None, None, metadata, None, None, None, *args)
        else:
            if scratch:  # Triton reads the allocator from the launching thread's context
                ensure_allocator()
            run(grid, 1, 1, stream(device()), function, metadata, None, None, None, *args)


def _key_function(checked: tuple[int, ...], ints: tuple[int, ...], chosen: tuple[int, ...]):
    """``key(num_warps, args)``: the warps, then per checked pointer its 16-byte alignment, per int its
    ``int_class``, per chosen constexpr its value.  Written out as one expression per runner: the generic loops
    took 1.3-1.9 us a launch, this 0.2-0.6."""
    parts = ["w"]
    parts += [f"a[{i}].data_ptr() % 16 == 0" for i in checked]
    parts += [f"(a[{i}] == 1, a[{i}] % 16 == 0, {-_INT32} <= a[{i}] < {_INT32})" for i in ints]
    parts += [f"a[{i}]" for i in chosen]
    if len(parts) == 1:
        return lambda w, a: w
    return eval(f"lambda w, a: ({', '.join(parts)})")  # noqa: S307 -- built from ints above


def _c_launch(run):
    """Triton 3.6's C launch function, with the two flags its Python ``CudaLauncher.__call__`` passes, where that
    ``__call__`` would only add empty scratch buffers (None) before calling it: the launch skips a Python frame
    (about 1.5 us).  None for any other launcher (other Triton versions order the C function's arguments
    otherwise, or allocate scratch): those are called as Triton calls them."""
    code = getattr(type(run).__dict__.get("__call__"), "__code__", None)
    if code is None or code.co_argcount != 6 or not code.co_flags & inspect.CO_VARARGS:
        return None
    names = set(code.co_names)
    if not {"launch", "launch_cooperative_grid", "launch_pdl", "global_scratch_size", "profile_scratch_size"} <= names \
            or names & {"gsan_enabled", "arg_annotations", "kernel_signature", "has_profile_allocator"}:
        return None
    if getattr(run, "global_scratch_size", None) != 0 or getattr(run, "profile_scratch_size", None) != 0:
        return None
    return run.launch, run.launch_cooperative_grid, run.launch_pdl


def ensure_allocator() -> None:
    """Give Triton an allocator for kernels that need global scratch (tensor descriptors made on the device)
    where the launching thread has none: torch's caching allocator on the current stream's device.  A user's own
    allocator stays."""
    if isinstance(_allocation._allocator.get(), _allocation.NullAllocator):
        triton.set_allocator(_torch_scratch)


def _torch_scratch(size: int, alignment: int, stream):
    import torch

    # Triton asks for 128-byte alignment at most; the caching allocator's blocks start 512-byte aligned.
    return torch.empty(size, dtype=torch.int8, device="cuda" if torch.cuda.is_available() else "cpu")


def _hooked() -> bool:
    """A launch hook is installed (a profiler such as proton): Triton's own path builds its metadata.

    Triton 3.6 keeps ``None`` there when no hook is set, 3.9 an empty ``HookChain``.
    """
    hook = triton.knobs.runtime.launch_enter_hook
    return hook is not None and (not hasattr(hook, "calls") or bool(hook.calls))


_driver_calls: tuple | None = None


def _current():
    """(current device, current stream) functions, looked up once: torch's own C functions where it has them
    (what Triton's CUDA driver calls, less ``torch.cuda.current_device``'s Python and lazy-init check: CUDA is
    up once tensors exist), else the active Triton driver's."""
    global _driver_calls
    if _driver_calls is None:
        import torch

        get_device = getattr(torch._C, "_cuda_getDevice", None)
        get_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if get_device is None or get_stream is None or triton.runtime.driver.active.get_current_target().backend != "cuda":
            active = triton.runtime.driver.active
            get_device, get_stream = active.get_current_device, active.get_current_stream
        _driver_calls = (get_device, get_stream)
    return _driver_calls
