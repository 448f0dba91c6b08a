"""Running graphs: the reference interpreter, the kernel cache, kernel runners and compiled graphs."""

from fusec.runtime.compiled import CompiledGraph, InputSignature, InputTypeMismatch, compile_module

__all__ = ["CompiledGraph", "InputSignature", "InputTypeMismatch", "compile_module"]
