"""Warm start: a compiled graph's lowering kept on disk, so a second process skips the import and the pipeline.

Two keys, each everything the result depends on.  Before the import: the FX graph's signature
(``fusec.frontend.fx_signature``: its code, traced values, inputs, size symbols), what the backend reads
of AOTAutograd's context, the pipeline spec and the launcher's input checks; its value is the
``Launcher`` with the ``ImportInfo`` (``Imported``).  After the import, for a graph with no signature or
a new signature that imports to IR already compiled: the imported IR's text, the pipeline spec, the size
hints and the input checks; its value is the ``Launcher``.  Both keys hash the versions of the code that
compiles (fusec's own sources, torch, Triton, xDSL).  A launcher holds host source and kernel sources;
kernel binaries live in Triton's cache, which fusec points under its own unless the user set
``TRITON_CACHE_DIR`` (``kernel_cache.use_fusec_triton_cache``).  An entry that cannot be read or
unpickled is a miss, and is overwritten by the next store.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import os
import pickle
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fusec.base import env
from fusec.base.progress import logger

FORMAT = 2


@functools.cache
def code_version() -> str:
    """A hash of fusec's sources and the versions of the libraries that shape its output."""
    import torch
    import triton
    import xdsl

    import fusec

    digest = hashlib.sha256(f"{FORMAT} {torch.__version__} {triton.__version__} {getattr(xdsl, '__version__', '')}".encode())
    roots = {Path(fusec.__file__).parent}
    for name in ("fusec.dialects", "fusec.passes", "fusec.lowering"):
        module = __import__(name, fromlist=["_"])
        assert module.__file__ is not None  # regular packages, installed from source
        roots.add(Path(module.__file__).parent)
    for path in sorted(p for root in roots for p in root.rglob("*") if p.suffix in (".py", ".pipeline")):
        digest.update(str(path.name).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def graph_key(imported_ir: str, spec: str, size_hints: Mapping[str, int], input_checks: str) -> str:
    parts = [code_version(), spec, repr(sorted(size_hints.items())), input_checks, imported_ir]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def module_key(module, spec: str, size_hints: Mapping[str, int], input_checks: str) -> str | None:
    """``graph_key`` of an imported module, or None when the cache is off (``FUSEC_GRAPH_CACHE=0``).

    Graph names (``forward_0_0``, unique within a process) do not count: the same graph compiled again
    under another name is the same entry."""
    if not env.graph_cache_enabled():
        return None
    from io import StringIO

    from xdsl.printer import Printer

    from fusec.dialects import fusec as F

    out = StringIO()
    Printer(stream=out).print_op(module)  # with the graph's marks, which passes decide by (fusec.device, ...)
    text = out.getvalue()
    for op in module.ops:
        if isinstance(op, F.GraphOp):
            text = re.sub(rf"@{re.escape(op.sym_name.data)}\b", "@__graph__", text)
    return graph_key(text, spec, size_hints, input_checks)


def _path(key: str) -> Path:
    return env.cache_dir() / "graphs" / f"{key}.pickle"


def fx_graph_key(signature: str, spec: str, input_checks: str, context: str) -> str | None:
    """The key of a graph before its import: its FX signature (``fusec.frontend.fx_signature``), the pipeline, the
    launcher's input checks and what the backend reads of AOTAutograd's context (``context``); None when the cache
    is off."""
    if not env.graph_cache_enabled():
        return None
    parts = [code_version(), "fx", spec, input_checks, context, signature]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def load(key: str, graph_name: str | None = None):
    """The stored ``Launcher`` of ``key`` (renamed ``graph_name``), or None."""
    from fusec.lowering.launcher import Launcher

    launcher = _read(key)
    if not isinstance(launcher, Launcher):
        return None
    return dataclasses.replace(launcher, graph_name=graph_name) if graph_name else launcher


def store(key: str, launcher) -> None:
    """Keep ``launcher`` under ``key`` (atomically: a reader sees the old entry or the new one)."""
    _write(key, launcher)


@dataclasses.dataclass(frozen=True)
class Imported:
    """A graph's ``Launcher`` and its ``ImportInfo`` without the constants (the graph module holds them; their
    values never shape the code), kept under the graph's FX key: a warm start then skips the import as well."""

    launcher: Any  # fusec.lowering.launcher.Launcher
    info: Any  # fusec.frontend.importer.ImportInfo
    constants: int  # how many the info had
    requests: tuple | None  # the Triton compiles its first call needs (compile_pool.CompileRequest); None: unknown


def load_imported(key: str, graph_name: str, constants: tuple):
    """(launcher, import info, compile requests or None) stored under ``key``, renamed ``graph_name``, the info given
    ``constants``; or None."""
    entry = _read(key)
    if not isinstance(entry, Imported) or len(constants) != entry.constants:
        return None
    info = dataclasses.replace(entry.info, graph_name=graph_name, constants=constants)
    return dataclasses.replace(entry.launcher, graph_name=graph_name), info, entry.requests


def store_imported(key: str, launcher, info, requests: tuple | None = None) -> None:
    _write(key, Imported(launcher, dataclasses.replace(info, constants=(), _moved={}), len(info.constants), requests))


def _read(key: str):
    try:
        with open(_path(key), "rb") as f:
            return pickle.load(f)
    except FileNotFoundError:
        return None
    except Exception as e:  # a torn or stale entry is a miss; the next store replaces it
        logger.debug("graph cache entry %s unreadable (%s: %s)", key[:12], type(e).__name__, e)
        return None


def _write(key: str, value) -> None:
    path = _path(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{key[:16]}-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as e:  # a cache that cannot store (a read-only or full disk) is no cache
        logger.debug("graph cache: cannot store %s (%s: %s)", key[:12], type(e).__name__, e)
    except (pickle.PicklingError, TypeError, AttributeError, RecursionError) as e:  # fusec's bug: say so
        logger.warning("graph cache: cannot store %s, the warm start will recompile it (%s: %s)", key[:12],
                       type(e).__name__, str(e)[:200])
