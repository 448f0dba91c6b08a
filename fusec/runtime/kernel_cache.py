"""Kernel sources as Python modules: cached on disk by hash, loaded once per (source, mode).

Kernel sources are cached by the sha256 of their text, in memory and on disk
(``$FUSEC_CACHE_DIR``, else ``~/.cache/fusec``), where tracebacks and readers
find them.  Files are written to a temporary name and renamed into place
(atomic: processes compiling the same kernel at once never see half a file); a
file whose content does not hash to its name is rewritten, with a warning; a
folder that cannot be written leaves kernels uncached, with a warning.  Modules
run the source text in memory (``triton.jit`` finds it through ``linecache``),
so a cache deleted or rewritten while a process runs changes nothing in it.  On CUDA tensors kernels run compiled by
Triton; on CPU tensors under Triton's interpreter (patched here where it differs
from the GPU), and both versions of a kernel can live in one process.
"""

from __future__ import annotations

import contextlib
import hashlib
import linecache
import os
import re
import sys
import tempfile
import threading
import warnings
from pathlib import Path
from types import ModuleType

import triton

from fusec.base import env


def cache_dir() -> Path:
    """Where kernel sources are cached (``$FUSEC_CACHE_DIR``, read by fusec.base.env, the one place for variables)."""
    return env.cache_dir()


# ---------------------------------------------------------------- kernel modules

_modules: dict[tuple[str, bool], ModuleType] = {}
_lock = threading.RLock()


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def kernel_file(source: str, directory: Path | None = None) -> Path | None:
    """The cache file holding ``source``, written (atomically) unless a sound copy is there.

    The cache is only a convenience: a corrupt entry is rewritten (one warning), and a folder that
    cannot be written gives ``None`` (one warning per folder); the kernel then loads without it."""
    digest = source_hash(source)
    folder = (directory or cache_dir()) / "kernels"
    path = folder / f"fusec_{digest}.py"
    state = _entry_state(path, digest)
    if state == "sound":
        return path
    if state == "corrupt":
        warnings.warn(f"fusec: kernel cache entry {path} was corrupt (its content does not match its hash); rebuilt it",
                      RuntimeWarning, stacklevel=2)
    try:
        _write_atomically(folder, path, source)
    except OSError as e:
        _warn_once(("unwritable", folder), f"fusec: kernel cache folder {folder} cannot be written ({e}); "
                                           "kernels are compiled without caching them on disk")
        return None
    linecache.checkcache(str(path))
    return path


def _entry_state(path: Path, digest: str) -> str:
    """"sound", "corrupt" (truncated, garbage, another kernel) or "missing" (also: unreadable, which writing reports)."""
    try:
        text = path.read_bytes().decode()
    except UnicodeDecodeError:
        return "corrupt"
    except OSError:
        return "missing"
    return "sound" if source_hash(text) == digest else "corrupt"


def _write_atomically(folder: Path, path: Path, source: str) -> None:
    """Write to a temporary name, then rename: readers see no file or the whole file, never half of one."""
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.stem[6:22]}-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(source)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


_warned: set = set()


def _warn_once(key, message: str) -> None:
    with _lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(message, RuntimeWarning, stacklevel=3)


@contextlib.contextmanager
def triton_interpret(enabled: bool):
    """``triton.jit`` decorates for the interpreter (or not) inside this block.

    Triton 3.6 and 3.9 both read ``triton.knobs.runtime.interpret`` when ``@triton.jit``
    runs (an explicit setting, else ``$TRITON_INTERPRET``); setting the knob also sets
    the variable.  Both are restored afterwards.
    """
    knobs = triton.knobs.runtime
    missing = object()
    with _lock:
        saved_knob = knobs.__dict__.get("interpret", missing)
        saved_env = os.environ.get("TRITON_INTERPRET")
        knobs.interpret = enabled
        os.environ["TRITON_INTERPRET"] = "1" if enabled else "0"
        try:
            yield
        finally:
            if saved_knob is missing:
                knobs.__dict__.pop("interpret", None)
            else:
                knobs.__dict__["interpret"] = saved_knob
            if saved_env is None:
                os.environ.pop("TRITON_INTERPRET", None)
            else:
                os.environ["TRITON_INTERPRET"] = saved_env


def _fix_interpreter_loop_bounds() -> None:
    """Triton 3.6's interpreter turns a size argument into an int with ``int(array([n]))``, which
    NumPy 2 refuses, so ``for roffset in range(0, rnumel, RBLOCK)`` fails; 3.9 squeezes first.
    Give older interpreters 3.9's behaviour (only the interpreter is touched, only once)."""
    import inspect

    from triton.runtime import interpreter

    original = interpreter._patch_lang_tensor
    if getattr(original, "fusec_fixed", False) or "squeeze" in inspect.getsource(original):
        return

    def patch_lang_tensor(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.squeeze()))

    setattr(patch_lang_tensor, "fusec_fixed", True)  # noqa: B010 -- a mark on a function, unknown to the type checker
    interpreter._patch_lang_tensor = patch_lang_tensor


def _fix_interpreter_bf16_casts() -> None:
    """Triton's interpreter (3.6 and 3.9) holds bf16 as its uint16 bits, converts fp32 to bf16 by dropping
    the low 16 bits (GPUs and torch round to nearest even), and converts ints and bools to and from bf16 as
    if those bits were the value (an int 1 becomes 9e-41).  Give it the GPU's conversions: bf16 goes through
    fp32 by value and fp32 rounds to nearest even, so bf16 kernels match eager on CPU too (only once)."""
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    original = interpreter.InterpreterBuilder.cast_impl
    if getattr(original, "fusec_fixed", False):
        return

    def cast_impl(self, src, dst_type):
        src_type, dst_scalar = src.dtype.scalar, dst_type.scalar
        if tl.bfloat16 not in (src_type, dst_scalar) or src_type == dst_scalar:
            return original(self, src, dst_type)
        if src_type == tl.bfloat16:  # exact: a bf16 is the top half of an fp32
            value = interpreter.TensorHandle((np.asarray(src.data).astype(np.uint32) << 16).view(np.float32), tl.float32)
            return value if dst_scalar == tl.float32 else original(self, value, dst_type)
        value = np.asarray(src.data).astype(np.float32)
        bits = value.view(np.uint32)
        rounded = ((bits + np.uint32(0x7FFF) + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
        quiet_nan = ((bits >> 16) | 0x40).astype(np.uint16)  # rounding a NaN's payload could carry it into inf
        return interpreter.TensorHandle(np.where(np.isnan(value), quiet_nan, rounded), tl.bfloat16)

    setattr(cast_impl, "fusec_fixed", True)  # noqa: B010 -- a mark on a function, unknown to the type checker
    interpreter.InterpreterBuilder.cast_impl = cast_impl


def load_kernel_module(source: str, interpret: bool) -> ModuleType:
    """The module of a kernel source, loaded once per (source, mode)."""
    digest = source_hash(source)
    key = (digest, interpret)
    module = _modules.get(key)
    if module is not None:
        return module
    with _lock:
        module = _modules.get(key)
        if module is not None:
            return module
        path = kernel_file(source)
        name = f"fusec_kernel_{digest[:24]}_{'interp' if interpret else 'gpu'}"
        filename = str(path) if path is not None else f"<fusec kernel {digest}>"
        # The module runs the text in hand, not the file: another process may rewrite the file, or delete
        # the cache, at any time.  triton.jit reads the source through inspect, which finds it in linecache
        # (mtime None: never checked against a file).
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        module = ModuleType(name)
        module.__file__ = filename
        sys.modules[name] = module  # inspect (used by triton.jit) finds functions' modules here
        if interpret:
            _fix_interpreter_loop_bounds()
            _fix_interpreter_bf16_casts()
        try:
            with triton_interpret(interpret):
                exec(compile(source, filename, "exec"), module.__dict__)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        _modules[key] = module
        return module


def load_kernel(source: str, name: str, interpret: bool):
    """The ``@triton.jit`` function ``name`` of a kernel module's ``source``."""
    return getattr(load_kernel_module(source, interpret), name)


# ---------------------------------------------------------------- kernels shared by body

# A kernel's name appears in its source (the def, the header comment); its body is the rest.
KERNEL_NAME_PLACEHOLDER = "__fusec_kernel__"

_shared: dict[tuple[str, bool], object] = {}
_origins: dict[int, tuple[str, str]] = {}  # id of a shared kernel -> (the source, the name) it was loaded from
load_counts: dict[tuple[str, bool], int] = {}  # (body hash, interpret) -> times its module was loaded (once)


def body_hash(source: str, name: str) -> str:
    """A kernel's identity: the hash of its source with its own name replaced by a placeholder.

    Six identical GPT-2 layers lower to the same kernels under different names; they share one.
    """
    return source_hash(re.sub(rf"\b{re.escape(name)}\b", KERNEL_NAME_PLACEHOLDER, source))


def load_shared_kernel(source: str, name: str, interpret: bool):
    """The ``@triton.jit`` function of a kernel body, loaded (and so compiled by Triton) once per process
    and mode, whatever the kernel's name: the first name it was loaded under names it in profiles."""
    key = (body_hash(source, name), interpret)
    kernel = _shared.get(key)
    if kernel is None:
        with _lock:
            kernel = _shared.get(key)
            if kernel is None:
                kernel = _shared[key] = load_kernel(source, name, interpret)
                _origins[id(kernel)] = (source, name)
                load_counts[key] = load_counts.get(key, 0) + 1
    return kernel


def shared_origin(kernel) -> tuple[str, str]:
    """The (source, name) a shared kernel was loaded from: another process compiling it must use exactly these."""
    return _origins[id(kernel)]


def shared_kernel_count(interpret: bool | None = None) -> int:
    """How many distinct kernel bodies this process has loaded (in one mode, or both)."""
    return sum(1 for _, mode in _shared if interpret is None or mode == interpret)


def compiled_kernel_count() -> int:
    """How many binaries Triton compiled (or found on disk) for the shared kernels: one per body and specialisation.

    Read from each ``JITFunction``'s per-device cache (Triton 3.x: ``device_caches[device][0]``).
    """
    count = 0
    for (_, interpret), kernel in list(_shared.items()):
        for entry in () if interpret else getattr(kernel, "device_caches", {}).values():
            count += len(entry[0])
    return count


def use_fusec_triton_cache() -> None:
    """Triton's cache of compiled binaries under fusec's (``<cache>/triton``), unless the user chose one.

    Only the variable is set (as Inductor does): Triton reads it at each use, compile workers spawned
    later inherit it, and a user who sets it afterwards still wins."""
    if not os.environ.get("TRITON_CACHE_DIR"):
        os.environ["TRITON_CACHE_DIR"] = str(cache_dir() / "triton")
