"""A module's generated code as one readable text: every kernel's Triton source, then the launcher.

Used by ``fusec-opt --emit triton`` and the dump folder.  Nothing here runs the code.
"""

from __future__ import annotations

from collections.abc import Mapping

from xdsl.dialects.builtin import ModuleOp

from fusec.dialects import fusec as F
from fusec.lowering.launcher import lower_graph
from fusec.lowering.triton_kernel import LoweringOptions

_RULE = "# " + "-" * 78


def emit_module_source(module: ModuleOp, size_hints: Mapping[str, int] | None = None,
                       options: LoweringOptions = LoweringOptions()) -> str:
    parts: list[str] = []
    for graph in (op for op in module.walk() if isinstance(op, F.GraphOp)):
        launcher = lower_graph(graph, size_hints, options)
        parts.append(f"{_RULE}\n# graph @{launcher.graph_name}: {len(launcher.kernels)} kernel(s)\n{_RULE}\n")
        for k in launcher.kernels:
            parts.append(f"{_RULE}\n# {k.name}.py\n\n{k.source}")
        externs = "".join(f"# {name} = torch.ops.{target}\n" for name, target in launcher.externs)
        parts.append(f"{_RULE}\n# launcher for @{launcher.graph_name}\n{externs}\n{launcher.source}")
    return "\n".join(parts)
