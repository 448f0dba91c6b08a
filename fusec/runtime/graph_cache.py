"""Warm start: a compiled graph's lowering kept on disk, so a second process skips the pipeline.

The key is everything the result depends on: the imported graph's IR text, the pipeline
spec, the size hints, the launcher's input checks, and the versions of the code that
compiles it (a hash of fusec's own sources, torch, Triton, xDSL).  The value is the
``Launcher`` (host source and kernel sources), pickled; kernel binaries live in Triton's
cache, which fusec points under its own unless the user set
``TRITON_CACHE_DIR`` (``kernel_cache.use_fusec_triton_cache``).  An entry that cannot be read or unpickled is a miss, and is
overwritten by the next store.
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

from fusec.base import env
from fusec.base.progress import logger

FORMAT = 1


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


def load(key: str, graph_name: str | None = None):
    """The stored ``Launcher`` of ``key`` (renamed ``graph_name``), or None."""
    try:
        with open(_path(key), "rb") as f:
            launcher = pickle.load(f)
    except FileNotFoundError:
        return None
    except Exception as e:  # a torn or stale entry is a miss; the next store replaces it
        logger.debug("graph cache entry %s unreadable (%s: %s)", key[:12], type(e).__name__, e)
        return None
    from fusec.lowering.launcher import Launcher

    if not isinstance(launcher, Launcher):
        return None
    return dataclasses.replace(launcher, graph_name=graph_name) if graph_name else launcher


def store(key: str, launcher) -> None:
    """Keep ``launcher`` under ``key`` (atomically: a reader sees the old entry or the new one)."""
    path = _path(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{key[:16]}-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                pickle.dump(launcher, f, protocol=pickle.HIGHEST_PROTOCOL)
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
