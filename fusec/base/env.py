"""The one place fusec reads environment variables.

``FUSEC_DUMP_DIR``: a folder where every graph the backend compiles dumps its IR
(one subfolder per graph).  Options given to ``torch.compile`` take precedence.

``FUSEC_CACHE_DIR``: where fusec.runtime caches generated kernel sources
(default ``~/.cache/fusec``).

``FUSEC_VERIFY_EACH``: ``1`` runs every op's verifier after every pass (the default in the tests);
otherwise the pipeline verifies its input and result and checks the IR between passes cheaply.

``FUSEC_COMPILE_WORKERS``: how many processes compile Triton kernels (default min(cpus, 8); 1: in-process).

``FUSEC_GRAPH_CACHE``: ``0`` turns off the warm start (compiled graphs' lowerings kept in the cache folder).
"""

from __future__ import annotations

import os
from pathlib import Path

DUMP_DIR = "FUSEC_DUMP_DIR"
CACHE_DIR = "FUSEC_CACHE_DIR"
VERIFY_EACH = "FUSEC_VERIFY_EACH"
COMPILE_WORKERS = "FUSEC_COMPILE_WORKERS"
GRAPH_CACHE = "FUSEC_GRAPH_CACHE"

# A file of a graph's dump that one stage writes and another reads (the runtime at the first call, fusec-report):
COMPILE_TIMES_FILE = "compile_times.json"  # each kernel's Triton compile, seconds in a worker


def dump_dir() -> Path | None:
    """The dump folder named by FUSEC_DUMP_DIR, or None when it is unset or empty."""
    value = os.environ.get(DUMP_DIR, "").strip()
    return Path(value) if value else None


def cache_dir() -> Path:
    """The kernel cache folder: FUSEC_CACHE_DIR, else ~/.cache/fusec."""
    value = os.environ.get(CACHE_DIR, "").strip()
    return Path(value) if value else Path.home() / ".cache" / "fusec"


def verify_each() -> bool:
    """FUSEC_VERIFY_EACH=1: run every op's verifier after every pass (the tests set it; fusec-opt --verify-each)."""
    return os.environ.get(VERIFY_EACH, "").strip().lower() in ("1", "true", "yes", "on")


def compile_workers() -> int | None:
    """FUSEC_COMPILE_WORKERS as a positive int; None when unset (a bad value is ignored with a warning)."""
    value = os.environ.get(COMPILE_WORKERS, "").strip()
    if not value:
        return None
    try:
        workers = int(value)
        if workers < 1:
            raise ValueError
    except ValueError:
        import warnings

        warnings.warn(f"{COMPILE_WORKERS}={value!r} is not a positive integer: using the default", stacklevel=2)
        return None
    return workers


def graph_cache_enabled() -> bool:
    """False when FUSEC_GRAPH_CACHE is 0/false/off (the test suite turns it off; tests of it turn it on)."""
    return os.environ.get(GRAPH_CACHE, "").strip().lower() not in ("0", "false", "no", "off")
