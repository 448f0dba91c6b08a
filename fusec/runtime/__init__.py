"""Running graphs: the reference interpreter, the kernel cache, kernel runners and compiled graphs.

The package's names load on first use: a compile worker imports ``fusec.runtime.compile_pool`` and
``kernel_cache`` (Triton only), not ``compiled`` (torch and sympy: seconds a worker would spend before its first
compile)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fusec.runtime.compiled import CompiledGraph, InputSignature, InputTypeMismatch, compile_module

__all__ = ["CompiledGraph", "InputSignature", "InputTypeMismatch", "compile_module"]


def __getattr__(name: str):
    if name in __all__:
        return getattr(importlib.import_module("fusec.runtime.compiled"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
