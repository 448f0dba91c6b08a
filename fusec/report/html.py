"""One self-contained HTML page (styles and script inline, nothing fetched) for the graphs of a dump folder."""

from __future__ import annotations

import difflib
from collections import Counter
from html import escape

from fusec.report import picture
from fusec.report.model import Box, GraphReport

_CSS = """
body{font-family:system-ui,Helvetica,sans-serif;margin:0 1.5em 2em;color:#111827}
h1{font-size:1.5em} h2{border-bottom:2px solid #1d4ed8;padding-bottom:.2em;margin-top:2em} h3{margin:.8em 0 .3em}
table{border-collapse:collapse;margin:.4em 0} td,th{border:1px solid #d1d5db;padding:.15em .6em;text-align:left;font-size:.9em}
th{background:#f3f4f6} pre{background:#f9fafb;border:1px solid #e5e7eb;padding:.6em;overflow:auto;font-size:.8em;max-height:32em}
.graph-view{display:flex;gap:1em;align-items:flex-start}
.graph-view > :first-child{flex:3 1 0;min-width:0} .picture{overflow:auto;border:1px solid #e5e7eb;max-height:90vh}
.picture svg{max-width:none;height:auto}
.pane{flex:2 1 0;position:sticky;top:0;max-height:95vh;overflow:auto}
.hint{color:#6b7280;font-style:italic}
.picture.fit svg{width:100%;height:auto} .fit-toggle{font-size:.8em;margin:.3em 0}
.picture g.node{cursor:pointer} .picture g.node.selected polygon,.picture g.node.selected path{stroke:#dc2626;stroke-width:3}
.kernel-list a{cursor:pointer;color:#1d4ed8;text-decoration:underline}
.details{border:2px solid #1d4ed8;border-radius:6px;padding:.2em 1em;margin:.8em 0;background:#fff}
.note{background:#fef3c7;border:1px solid #f59e0b;padding:.4em .8em} .superseded{color:#6b7280}
.diff .add{color:#166534;background:#dcfce7} .diff .del{color:#991b1b;background:#fee2e2} .diff .hunk{color:#6d28d9}
code{font-size:.9em} .pane table{width:100%;table-layout:fixed;overflow-wrap:anywhere}
.pane table.schedule th{width:25%} .pane table.nodes th:nth-child(2){width:50%} .pane table.remarks th:nth-child(3){width:40%}
"""

# Clicking a node of the picture (or a name in the kernel list) shows that box's details and hides the others.
_SCRIPT = """
function fusecShow(graph, id) {
  document.querySelectorAll('.details[data-graph="' + graph + '"]').forEach(function (d) { d.hidden = d.id !== 'details-' + id; });
  document.querySelectorAll('.picture[data-graph="' + graph + '"] g.node').forEach(function (n) {
    n.classList.toggle('selected', n.id === id);
  });
  document.querySelectorAll('.pane[data-graph="' + graph + '"] .hint').forEach(function (h) { h.hidden = true; });
  var shown = document.getElementById('details-' + id);
  if (shown) { shown.scrollIntoView({block: 'nearest'}); }
}
document.querySelectorAll('.picture').forEach(function (pic) {
  pic.querySelectorAll('g.node, g.cluster').forEach(function (node) {
    node.addEventListener('click', function (event) {
      event.stopPropagation();
      fusecShow(pic.dataset.graph, node.id);
    });
  });
});
document.querySelectorAll('button.fit-toggle').forEach(function (button) {
  button.addEventListener('click', function () {
    var pic = document.querySelector('.picture[data-graph="' + button.dataset.graph + '"]');
    pic.classList.toggle('fit');
    button.textContent = pic.classList.contains('fit') ? 'actual size' : 'fit to width';
  });
});
document.querySelectorAll('.kernel-list a[data-box]').forEach(function (a) {
  a.addEventListener('click', function () { fusecShow(a.dataset.graph, a.dataset.box); });
});
"""


def page(reports: list[GraphReport], title: str = "fusec report") -> str:
    body = [f"<h1>{escape(title)}</h1>", _summary(reports)]
    body += [_graph_section(r) for r in reports]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>\n"
            + "\n".join(body) + f"\n<script>{_SCRIPT}</script>\n</body></html>\n")


def _summary(reports: list[GraphReport]) -> str:
    rows = ["<tr><th>graph</th><th>kernels</th><th>combos</th><th>externs</th><th>fallback</th>"
            "<th>remarks by code</th><th>compile time</th><th>device time</th></tr>"]
    total: Counter = Counter()
    for r in reports:
        counts = r.remark_counts
        total.update(counts)
        stages = ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in r.timings.items()) or "—"
        device = [b.device_time_us for b in r.boxes if b.device_time_us is not None and b.combo is None]
        rows.append(f"<tr><td><a href=\"#graph-{escape(r.name)}\">{escape(r.name)}</a></td><td>{len(r.of_kind('kernel'))}</td>"
                    f"<td>{len(r.of_kind('combo'))}</td><td>{len(r.of_kind('extern'))}</td>"
                    f"<td>{'ran as torch ops' if r.not_compiled else 'no'}</td><td>{escape(_counts(counts))}</td>"
                    f"<td>{escape(stages)}</td><td>{f'{sum(device):.1f} µs' if device else '—'}</td></tr>")
    return (f"<h2>Summary</h2><p>{len(reports)} graph(s); remarks: {escape(_counts(total) or 'none')}.</p>"
            f"<table class=\"summary\">{''.join(rows)}</table>")


def _counts(counts: Counter) -> str:
    return ", ".join(f"{code} ×{n}" for code, n in sorted(counts.items()))


def _graph_section(r: GraphReport) -> str:
    out = [f"<section class=\"graph\" id=\"graph-{escape(r.name)}\"><h2>{escape(r.name)}</h2>"]
    if r.not_compiled:
        out.append(f"<p class=\"note\">This graph ran as torch ops (not compiled): {escape(r.not_compiled)}</p>")
    if r.boxes:
        details = "".join(_details(r, b) for b in r.boxes if b.kind in ("kernel", "combo", "extern"))
        out.append(f"<div class=\"graph-view\">{_picture(r)}<div class=\"pane\" data-graph=\"{escape(r.name)}\">"
                   f"<p class=\"hint\">Click a box of the picture, or a name in the table below.</p>{details}</div></div>")
        out.append(_kernel_list(r))
    if r.remarks:
        out.append(_remarks_table(r.remarks, "All remarks"))
    if r.steps:
        out.append(_passes(r))
    out.append("</section>")
    return "\n".join(out)


def _picture(r: GraphReport) -> str:
    svg = picture.svg(r)
    if svg is None:
        return ("<p class=\"note picture-missing\">No picture: Graphviz's <code>dot</code> was not found (install graphviz, e.g. "
                "<code>apt-get install graphviz</code>, and run <code>fusec-report</code> again). The kernels are listed below.</p>")
    return (f"<div><button class=\"fit-toggle\" data-graph=\"{escape(r.name)}\">fit to width</button>"
            f"<div class=\"picture\" data-graph=\"{escape(r.name)}\" title=\"click a box to see what it computes\">{svg}</div></div>")


def _kernel_list(r: GraphReport) -> str:
    rows = ["<tr><th>box</th><th>kind</th><th>fuses</th><th>domain</th><th>schedule</th><th>device time</th></tr>"]
    for b in r.boxes:
        if b.kind not in ("kernel", "combo", "extern"):
            continue
        where = f" (in {b.combo})" if b.combo else ""
        time = f"{b.device_time_us:.1f} µs" if b.device_time_us is not None else ""
        rows.append(f"<tr><td><a data-graph=\"{escape(r.name)}\" data-box=\"{picture.anchor(r.name, b.name)}\">{escape(b.name)}</a>"
                    f"{escape(where)}</td><td>{b.kind}</td><td>{escape(b.label)}</td><td>{escape(b.domain)}</td>"
                    f"<td>{escape(b.schedule.get('lowered as', ''))}</td><td>{time}</td></tr>")
    return f"<h3>Kernels, combos and torch calls</h3><table class=\"kernel-list\">{''.join(rows)}</table>"


def _details(r: GraphReport, b: Box) -> str:
    anchor = picture.anchor(r.name, b.name)
    out = [f"<div class=\"details\" id=\"details-{anchor}\" data-graph=\"{escape(r.name)}\" hidden>",
           f"<h3>{escape(b.name)} <small>({b.kind})</small></h3><p>{escape(b.label)} {escape(b.domain)}</p>"]
    if b.members:
        out.append(f"<p>Members: {escape(', '.join(b.members))}</p>")
    facts = dict(b.schedule)
    if b.launch:
        facts["launch"] = b.launch
    if b.device_time_us is not None:
        facts["device time"] = f"{b.device_time_us:.2f} µs"
    if facts:
        out.append("<table class=\"schedule\">" + "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>"
                                                          for k, v in facts.items()) + "</table>")
    if b.nodes:
        out.append(_source_lines(b))
    out.append(_remarks_table(b.remarks, "Remarks") if b.remarks else "<p class=\"remarks\">No remarks name it.</p>")
    if b.source:
        where = f"in its combo's kernel, {b.source_file}" if b.combo else b.source_file
        out.append(f"<h4>Triton source ({escape(where or '')})</h4><pre class=\"source\">{escape(b.source)}</pre>")
    out.append("</div>")
    return "\n".join(out)


def _source_lines(b: Box) -> str:
    """The user's lines the box computes, each with the FX nodes that came from it (a LayerNorm is six nodes of one line)."""
    by_line: dict[tuple[str, int], list] = {}
    for n in b.nodes:
        by_line.setdefault((n.file, n.line), []).append(n)
    rows = ["<tr><th>source line</th><th>code</th><th>FX nodes</th></tr>"]
    for nodes in by_line.values():
        first = nodes[0]
        rows.append(f"<tr><td title=\"{escape(first.where())}\">{escape(first.short())}</td><td><code>{escape(_line(first))}</code></td>"
                    f"<td><code>{escape(', '.join(n.node for n in nodes))}</code></td></tr>")
    return f"<h4>What it computes, in your code</h4><table class=\"nodes\">{''.join(rows)}</table>"


def _line(node) -> str:
    import linecache

    return linecache.getline(node.file, node.line).strip() if node.file and node.line else ""


def _remarks_table(remarks: list[dict], title: str) -> str:
    rows = ["<tr><th>pass</th><th>code</th><th>message</th><th>about</th></tr>"]
    for rem in sorted(remarks, key=lambda x: bool(x.get("superseded"))):
        cls = " class=\"superseded\" title=\"superseded: a later pass merged these kernels\"" if rem.get("superseded") else ""
        rows.append(f"<tr{cls}><td>{escape(rem['pass_name'])}</td><td><b>{escape(rem['code'])}</b></td>"
                    f"<td>{escape(rem['message'])}</td><td>{escape(', '.join(rem.get('subjects', ())))}</td></tr>")
    return f"<h4>{escape(title)}</h4><table class=\"remarks\">{''.join(rows)}</table>"


def _passes(r: GraphReport) -> str:
    out = ["<h3>The IR after each pass</h3>"]
    previous = None
    for step in r.steps:
        title = f"{step.index:02d} {step.name}"
        if previous is None:
            out.append(f"<details><summary>{escape(title)}</summary><pre>{escape(step.text)}</pre></details>")
        else:
            diff = list(difflib.unified_diff(previous.text.splitlines(), step.text.splitlines(),
                                             f"after {previous.name}", f"after {step.name}", lineterm="", n=2))
            change = f"{sum(1 for d in diff if d[:1] in '+-') - 2} lines changed" if diff else "no change"
            out.append(f"<details><summary>{escape(title)} ({change})</summary>"
                       + (f"<pre class=\"diff\">{_diff_html(diff)}</pre>" if diff else "")
                       + f"<details><summary>full IR</summary><pre>{escape(step.text)}</pre></details></details>")
        previous = step
    return "\n".join(out)


def _diff_html(lines: list[str]) -> str:
    def one(line: str) -> str:
        cls = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1])
        return f"<span class=\"{cls}\">{escape(line)}</span>" if cls else escape(line)

    return "\n".join(one(line) for line in lines)
