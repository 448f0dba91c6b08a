"""fusec-report: an HTML page per dump folder showing what each compiled graph became, and fusec's artifacts in
torch's own logs (``TORCH_LOGS``, ``TORCH_TRACE``)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from xdsl.dialects.builtin import ModuleOp

from fusec.report.html import page
from fusec.report.model import FINAL_IR, TIMINGS, GraphReport, ReportError, graph_folders, read_graph, read_profile, share_out

REPORT_FILE = "report.html"

__all__ = ["REPORT_FILE", "GraphReport", "ReportError", "read_graph", "read_profile", "write_report", "write_dump_report"]


def write_report(dump_root: Path, out: Path | None = None, profile: Path | None = None) -> Path:
    """The report of every graph dumped under ``dump_root`` (or of the one graph dumped there), written to
    ``out`` (default: ``<dump_root>/report.html``)."""
    if not dump_root.is_dir():
        raise ReportError(f"{dump_root}: not a folder")
    folders = graph_folders(dump_root)
    if not folders:
        raise ReportError(f"{dump_root}: no graph dumps here (a graph's folder holds remarks.json and NN-<pass>.mlir files)")
    times = share_out(read_profile(profile), folders) if profile is not None else None
    reports = [read_graph(folder, profile=times) for folder in folders]
    out = out if out is not None else dump_root / REPORT_FILE
    out.write_text(page(reports, f"fusec report: {dump_root.resolve().name}"))
    return out


def write_dump_report(folder: Path, module: ModuleOp, final_ir: str, timings: dict[str, float]) -> Path:
    """The backend's hook, once a graph is compiled into ``folder``: its final IR (``final_ir``: ``module`` printed with
    locations), its compile time by stage (seconds) and its report, ``<folder>/report.html``."""
    (folder / FINAL_IR).write_text(final_ir)
    (folder / TIMINGS).write_text(json.dumps(timings, indent=1) + "\n")
    out = folder / REPORT_FILE
    try:
        out.write_text(page([read_graph(folder, module)], f"fusec report: {folder.name}"))
    except Exception as e:  # the report explains a compile; it must never fail one
        warnings.warn(f"fusec: no report for {folder}: {type(e).__name__}: {e}", stacklevel=2)
    return out
