"""fusec in torch's own logs.

``TORCH_TRACE=dir`` (then ``tlparse dir``): each compiled graph's imported IR, final
IR, remarks, launcher and kernel sources are structured-trace artifacts, as Inductor's
output code is, so tlparse shows them beside Dynamo's and AOTAutograd's.

``TORCH_LOGS="+fusec"``: fusec's logs, among them every active remark.  The remarks
are also the artifact ``fusec_remarks`` (``torch._logging.set_logs(modules={"fusec_remarks": True})``
once fusec is imported; torch parses ``TORCH_LOGS`` when it is imported, before fusec
can register the artifact, so in the environment use ``+fusec``).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

import torch._logging
from torch._logging import _internal, trace_structured

from fusec.base import remarks

LOG_NAME = "fusec"
REMARKS_ARTIFACT = "fusec_remarks"


def _register() -> None:
    if not _internal.log_registry.is_log(LOG_NAME):
        _internal.register_log(LOG_NAME, LOG_NAME)
    if not _internal.log_registry.is_artifact(REMARKS_ARTIFACT):
        _internal.register_artifact(REMARKS_ARTIFACT, "fusec's remarks: why kernels stayed apart, by code", visible=True)


_register()
remarks_log: logging.Logger = torch._logging.getArtifactLogger(__name__, REMARKS_ARTIFACT)


def artifact(graph: str, what: str, payload: Callable[[], str]) -> None:
    """``fusec_<what>_<graph>`` in the structured trace; ``payload`` is called only when a trace is being written."""
    trace_structured("artifact", metadata_fn=lambda: {"name": f"fusec_{what}_{graph}", "encoding": "string"},
                     payload_fn=payload)


def graph_compiled(graph: str, final_ir: Callable[[], str], log: remarks.RemarkLog) -> None:
    """After the pipeline: the final IR and the remarks to the trace, each active remark to ``TORCH_LOGS``."""
    artifact(graph, "final_ir", final_ir)
    artifact(graph, "remarks", log.text)
    for remark in log.active:
        remarks_log.debug("fusec: graph %s: %s", graph, remark)


def sources(graph: str, compiled) -> None:
    """The generated code of a compiled graph (``fusec.runtime``'s ``CompiledGraph``): launcher and kernels."""
    artifact(graph, "launcher", lambda: compiled.source)
    for kernel in compiled.kernels:
        artifact(graph, f"kernel_{kernel.name}", functools.partial(getattr, kernel, "source"))
