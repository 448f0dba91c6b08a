"""The picture of a compiled graph: its boxes and tensors laid out by Graphviz (``dot -Tsvg``).

Kernels, externs, inputs and the output are nodes, tensors are edges, a combo's
members sit in one cluster.  Each node's SVG ``id`` is its box's anchor, so the
page's script can make nodes clickable.  Without Graphviz's ``dot`` binary the page
shows a list instead (``svg`` returns None).
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
import textwrap

from fusec.report.model import Box, GraphReport

_STYLE = {
    "kernel": 'shape=box style="rounded,filled" fillcolor="#dbeafe" color="#1d4ed8"',
    "extern": 'shape=box style="filled" fillcolor="#fde68a" color="#b45309"',
    "input": 'shape=ellipse style="filled" fillcolor="#f3f4f6" color="#6b7280" fontsize=10',
    "output": 'shape=ellipse style="filled" fillcolor="#f3f4f6" color="#6b7280" fontsize=10',
}


def anchor(graph: str, box: str) -> str:
    """The id of a box's node in the picture (and, prefixed, of its details on the page)."""
    return re.sub(r"\W", "_", f"{graph}__{box}")


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _label(box: Box) -> str:
    lines = [box.name]
    if box.kind == "kernel" or (box.kind == "extern" and not box.name.startswith(box.label)):
        lines += textwrap.wrap(box.label, 44, max_lines=3, placeholder=" …")
    if box.domain and box.kind == "kernel":
        lines.append(box.domain)
    if box.device_time_us is not None:
        lines.append(f"{box.device_time_us:.1f} µs")
    return "\n".join(lines)


def _heat(box: Box, slowest: float) -> str:
    """Kernels with a measured time are shaded from white to red by their share of the slowest one."""
    if box.device_time_us is None or slowest <= 0:
        return ""
    share = box.device_time_us / slowest
    green_blue = int(255 - 150 * share)
    return f' fillcolor="#ff{green_blue:02x}{green_blue:02x}"'


def dot_source(report: GraphReport) -> str:
    times = [b.device_time_us for b in report.boxes if b.device_time_us is not None]
    slowest = max(times, default=0.0)
    lines = [f"digraph {_quote(report.name)} {{", "  rankdir=TB; node [fontname=Helvetica fontsize=11];",
             "  edge [fontname=Helvetica fontsize=9 color=\"#6b7280\"];"]

    def node(box: Box) -> str:
        return (f"  {_quote(anchor(report.name, box.name))} [id={_quote(anchor(report.name, box.name))} "
                f"label={_quote(_label(box))} tooltip={_quote(box.label)} {_STYLE[box.kind]}{_heat(box, slowest)}];")

    for box in report.boxes:
        if box.kind in _STYLE and box.combo is None:
            lines.append(node(box))
    for combo in report.of_kind("combo"):
        lines.append(f"  subgraph {_quote('cluster_' + anchor(report.name, combo.name))} {{")
        lines.append(f"    id={_quote(anchor(report.name, combo.name))}; label={_quote(f'{combo.name}: {combo.label}')};")
        lines.append('    style="dashed,rounded"; color="#7c3aed"; fontcolor="#7c3aed"; fontname=Helvetica;')
        lines += ["  " + node(b) for b in report.boxes if b.combo == combo.name]
        lines.append("  }")
    for edge in report.edges:
        lines.append(f"  {_quote(anchor(report.name, edge.source))} -> {_quote(anchor(report.name, edge.target))} "
                     f"[label={_quote(edge.label)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


@functools.cache
def dot_binary() -> str | None:
    return shutil.which("dot")


def svg(report: GraphReport, timeout_s: float = 60) -> str | None:
    """The picture as an inline ``<svg>`` element, or None without Graphviz (or when it fails: the page says so)."""
    binary = dot_binary()
    if binary is None:
        return None
    try:
        done = subprocess.run([binary, "-Tsvg"], input=dot_source(report), capture_output=True, text=True,
                              timeout=timeout_s, check=True)
    except (subprocess.SubprocessError, OSError):
        return None
    text = done.stdout
    return text[text.index("<svg"):] if "<svg" in text else None
