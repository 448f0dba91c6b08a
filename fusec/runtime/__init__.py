"""Running graphs: the reference interpreter, the kernel cache, kernel runners and compiled graphs."""

from fusec.runtime.compiled import CompiledGraph, compile_module

__all__ = ["CompiledGraph", "compile_module"]
