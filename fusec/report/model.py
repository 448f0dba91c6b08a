"""What a report shows of one compiled graph, read from its dump folder (and the final IR).

The backend dumps each graph into ``<dump_dir>/<graph>/``: ``NN-<pass>.mlir`` after every
pass, ``final.mlir`` (the last IR, with each op's FX node and source line), ``remarks.json``,
each kernel's Triton source (``<kernel>.py``), ``launcher.py``, ``timings.json`` and, for a
graph fusec could not compile, ``not-compiled.txt``.  This module turns them into plain
dataclasses; ``fusec.report.html`` draws them.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from xdsl.dialects.builtin import FileLineColLoc, ModuleOp, NameLoc
from xdsl.ir import Block, BlockArgument, Operation, OpResult, SSAValue
from xdsl.parser import Parser

from fusec.base.env import COMPILE_TIMES_FILE
from fusec.dialects import fusec as F

FINAL_IR = "final.mlir"
TIMINGS = "timings.json"
_PASS_DUMP = re.compile(r"(\d{2,})-(.+)\.mlir")
_KIND_PREFIX = re.compile(r"^fusec_(poi|red|per|til|tiled|looped|combo)_")


@dataclass
class SourceNode:
    """An FX node a kernel computes and the user's line that created it."""

    node: str
    file: str = ""
    line: int = 0
    column: int = 0

    def where(self) -> str:
        return f"{self.file}:{self.line}:{self.column}" if self.file else "(no source line)"

    def short(self) -> str:
        return f"{Path(self.file).name}:{self.line}" if self.file else "(no source line)"


@dataclass
class Box:
    """One box of the picture: a kernel, a combo, an extern (torch call), a graph input or the output."""

    name: str
    kind: str  # "kernel" | "combo" | "extern" | "input" | "output"
    label: str  # what it computes: the ops it fuses, the torch op it calls
    domain: str = ""
    combo: str | None = None  # the combo a member kernel launches in
    members: list[str] = field(default_factory=list)
    schedule: dict[str, str] = field(default_factory=dict)  # every attribute the final IR has on it
    nodes: list[SourceNode] = field(default_factory=list)
    remarks: list[dict] = field(default_factory=list)
    source: str | None = None  # its Triton source
    source_file: str | None = None
    launch: str | None = None  # the launcher's grid, warps and block sizes
    device_time_us: float | None = None


@dataclass
class Edge:
    """A tensor from one box to another."""

    source: str
    target: str
    label: str


@dataclass
class PassStep:
    index: int
    name: str
    text: str


@dataclass
class GraphReport:
    name: str
    folder: Path
    boxes: list[Box] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    steps: list[PassStep] = field(default_factory=list)
    remarks: list[dict] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)  # stage -> seconds
    not_compiled: str | None = None  # why the graph ran as torch ops
    launcher: str | None = None

    def of_kind(self, kind: str) -> list[Box]:
        return [b for b in self.boxes if b.kind == kind]

    @property
    def remark_counts(self) -> Counter:
        return Counter(r["code"] for r in self.remarks if not r.get("superseded"))


class ReportError(Exception):
    """A dump folder the report cannot read; the message says which file and why."""


# ---------------------------------------------------------------- reading a dump folder


def read_graph(folder: Path, module: ModuleOp | None = None, profile: dict[str, float] | None = None) -> GraphReport:
    """The report of the graph dumped in ``folder``; ``module``: its final IR when the caller holds it."""
    report = GraphReport(folder.name, folder)
    report.steps = _pass_steps(folder)
    report.remarks = _json(folder / "remarks.json", [])
    report.timings = _json(folder / TIMINGS, {})
    if (folder / "not-compiled.txt").exists():
        report.not_compiled = (folder / "not-compiled.txt").read_text().strip()
    if (folder / "launcher.py").exists():
        report.launcher = (folder / "launcher.py").read_text()
    if module is None:
        module = _final_module(folder, report.steps)
    if module is not None:
        _read_module(report, module)
    _attach_files(report, profile if isinstance(profile, Profile) else Profile(profile))
    return report


def graph_folders(root: Path) -> list[Path]:
    """``root`` itself when it is one graph's dump, else its sub-folders that are."""
    if _is_graph_dump(root):
        return [root]
    return sorted((p for p in root.iterdir() if p.is_dir() and _is_graph_dump(p)), key=_compile_order)


def _compile_order(folder: Path) -> tuple:
    """``forward_1_0`` before ``backward_1_0``, both after ``forward_0_0``: Dynamo's compile id, then the kind."""
    kind, _, compile_id = folder.name.partition("_")
    numbers = [int(n) for n in re.findall(r"\d+", compile_id)]
    return numbers, {"forward": 0, "inference": 0, "backward": 1}.get(kind, 2), folder.name


def _is_graph_dump(folder: Path) -> bool:
    return any((folder / name).exists() for name in (FINAL_IR, "remarks.json", "not-compiled.txt", "imported.mlir"))


def _json(path: Path, default):
    if not path.exists():
        return default
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ReportError(f"{path}: not valid JSON ({e})") from None


def _pass_steps(folder: Path) -> list[PassStep]:
    steps = []
    for path in folder.iterdir():
        m = _PASS_DUMP.fullmatch(path.name)
        if m:
            steps.append(PassStep(int(m.group(1)), m.group(2), path.read_text()))
    return sorted(steps, key=lambda s: s.index)


def _final_module(folder: Path, steps: list[PassStep]) -> ModuleOp | None:
    from fusec.registry import make_context

    path = folder / FINAL_IR
    text = path.read_text() if path.exists() else (steps[-1].text if steps else None)
    if text is None:
        return None
    try:
        return Parser(make_context(), text, str(path)).parse_module()
    except Exception as e:  # a dump from another fusec version: say so rather than draw nothing silently
        raise ReportError(f"{path if path.exists() else folder}: cannot parse the final IR: {str(e).splitlines()[0]}") from None


# ---------------------------------------------------------------- the final IR -> boxes and edges


def _read_module(report: GraphReport, module: ModuleOp) -> None:
    graph = next((op for op in module.walk() if isinstance(op, F.GraphOp)), None)
    if graph is None:
        return
    block = graph.body.block
    for i, arg in enumerate(block.args):
        report.boxes.append(Box(f"input {i}", "input", f"input {i}", domain=_type_text(arg.type)))
    for op in block.ops:
        if isinstance(op, F.KernelOp):
            report.boxes.append(_kernel_box(op))
        elif isinstance(op, F.ComboOp):
            members = [_kernel_box(k, combo=op.sym_name.data) for k in op.body.block.ops if isinstance(k, F.KernelOp)]
            report.boxes.append(Box(op.sym_name.data, "combo", f"{len(members)} kernels launched as one",
                                    members=[m.name for m in members], schedule=_attributes(op)))
            report.boxes += members
        elif isinstance(op, F.ExternOp):
            report.boxes.append(Box(_extern_name(op), "extern", op.target.data, nodes=_nodes([op]),
                                    domain=", ".join(_type_text(r.type) for r in op.results)))
        elif isinstance(op, F.OutputOp):
            report.boxes.append(Box("output", "output", "graph output"))
    for op in block.ops:
        target = _box_of_op(op)
        if target is None or isinstance(op, F.ComboOp):
            continue
        _add_edges(report, target, op.operands)
    for combo in (op for op in block.ops if isinstance(op, F.ComboOp)):
        for kernel in (k for k in combo.body.block.ops if isinstance(k, F.KernelOp)):
            _add_edges(report, kernel.sym_name.data, kernel.operands)


def _add_edges(report: GraphReport, target: str, operands) -> None:
    seen = set()
    for value in operands:
        source = _producer(value)
        if source is not None and (source, target) not in seen:
            seen.add((source, target))
            report.edges.append(Edge(source, target, _type_text(value.type)))


def _producer(value: SSAValue) -> str | None:
    """The box that computes ``value``: views are index arithmetic (no box of their own), a combo's result
    comes from one of its member kernels."""
    while True:
        if isinstance(value, BlockArgument):
            block = value.owner
            graph = block.parent_op() if isinstance(block, Block) else None
            return f"input {value.index}" if isinstance(graph, F.GraphOp) else None
        assert isinstance(value, OpResult)
        op = value.op
        if isinstance(op, F.ComboOp):
            terminator = op.body.block.last_op
            assert terminator is not None
            value = terminator.operands[value.index]
            continue
        name = _box_of_op(op)
        if name is not None:
            return name
        if not op.operands:  # a constant or a size at graph level
            return None
        value = op.operands[0]  # a view: follow it to what it views


def _box_of_op(op: Operation) -> str | None:
    if isinstance(op, (F.KernelOp, F.ComboOp)):
        return op.sym_name.data
    if isinstance(op, F.ExternOp):
        return _extern_name(op)
    if isinstance(op, F.OutputOp) and isinstance(op.parent_op(), F.GraphOp):
        return "output"
    return None


def _extern_name(op: F.ExternOp) -> str:
    graph_block = op.parent_block()
    index = list(graph_block.ops).index(op) if graph_block is not None else 0
    return f"{op.target.data} #{index}"


def _kernel_box(op: F.KernelOp, combo: str | None = None) -> Box:
    body_ops = [o for o in op.body.walk() if o is not op]
    fused = [_op_word(o) for o in body_ops if not isinstance(o, (F.LoadOp, F.StoreOp, F.ConstantOp, F.SymbolicOp))]
    label = " → ".join(_dedupe_runs(fused)) or "copy"
    domain = "[" + ", ".join(str(e.data) for e in op.domain.data) + "]"
    return Box(op.sym_name.data, "kernel", label, domain=domain, combo=combo, schedule=_attributes(op), nodes=_nodes(body_ops))


def _op_word(op: Operation) -> str:
    for attr in ("fn", "kind"):
        value = op.properties.get(attr)
        if value is not None and hasattr(value, "data") and isinstance(value.data, str):
            return value.data
    return op.name.removeprefix("fusec.")


def _dedupe_runs(words: list[str]) -> list[str]:
    return [w for i, w in enumerate(words) if i == 0 or words[i - 1] != w]


def _attributes(op: Operation) -> dict[str, str]:
    """Every property and attribute of a kernel or combo but its name and domain, printed generically: the
    schedule passes record their decisions here (``tiled``, block sizes, ...)."""
    found = {**op.properties, **op.attributes}
    return {k: _attr_text(v) for k, v in sorted(found.items()) if k not in ("sym_name", "domain")}


def _attr_text(attr) -> str:
    from xdsl.dialects.builtin import UnitAttr

    if isinstance(attr, UnitAttr):
        return "yes"
    data = getattr(attr, "data", None)
    return str(data) if isinstance(data, (str, int, float)) else str(attr)


def _nodes(ops: list[Operation]) -> list[SourceNode]:
    """The FX nodes ``ops`` came from (form-kernels gives each element op its graph op's location), in order."""
    found: dict[str, SourceNode] = {}
    for op in ops:
        loc = op.location
        if isinstance(loc, NameLoc) and loc.desc.data not in found:
            where = loc.location
            if isinstance(where, FileLineColLoc):
                found[loc.desc.data] = SourceNode(loc.desc.data, where.filename.data, where.line.data, where.column.data)
            else:
                found[loc.desc.data] = SourceNode(loc.desc.data)
    return list(found.values())


def _type_text(t) -> str:
    if isinstance(t, F.TensorType):
        dims = ", ".join(str(d) for d in t.dims)
        return f"[{dims}] {t.element_type}"
    return str(t)


# ---------------------------------------------------------------- sources, launches, remarks, profile


def kernel_key(name: str) -> str:
    """A kernel's name without its schedule prefix: the IR's ``fusec_red_sum_1`` is the lowering's ``fusec_per_sum_1``
    (and a combo's persistent form, ``fusec_combo_0_persistent``, the combo's)."""
    return _KIND_PREFIX.sub("", name.lstrip("@")).removesuffix("_persistent")


def kernel_id(name: str) -> str | None:
    """The number a kernel keeps through every pass that renames it (``fusec_poi_div_1`` became ``fusec_red_sum_div_1``):
    remarks name kernels as the pass that emitted them saw them."""
    m = re.fullmatch(r"@?fusec_(?!combo_)\w+_(\d+)", name)
    return m.group(1) if m else name.lstrip("@")


def _attach_files(report: GraphReport, profile: Profile) -> None:
    sources: dict[str, list[Path]] = {}
    for p in sorted(report.folder.glob("fusec_*.py")):
        sources.setdefault(kernel_key(p.stem), []).append(p)
    launches = _launch_lines(report.launcher or "")
    compile_times = _json(report.folder / COMPILE_TIMES_FILE, {})  # written by the graph's first call on a GPU
    if compile_times:  # the summary's compile-time column: what the first call waited for at least
        report.timings["slowest Triton compile (a worker)"] = max(compile_times.values())
    for box in report.boxes:
        if box.kind not in ("kernel", "combo"):
            continue
        if (seconds := compile_times.get(box.name.lstrip("@"))) is not None:
            box.schedule["Triton compile"] = f"{seconds:.2f} s in a compile worker (the first call's)"
        key = kernel_key(box.name)
        forms = sources.get(key, [])  # a looped kernel with persistent_up_to has two: fusec_red_* and fusec_per_*
        path = next((p for p in forms if p.stem == box.name.lstrip("@")), forms[0] if forms else None)
        if len(forms) > 1:
            box.schedule["also compiled"] = ", ".join(p.name for p in forms if p is not path) + \
                " (the launcher picks a form per call)"
        if path is not None:
            box.source, box.source_file = path.read_text(), path.name
            header = box.source.splitlines()[0] if box.source else ""
            if header.startswith("# fusec"):
                box.schedule.setdefault("lowered as", header.split(":", 1)[-1].strip())
        elif box.combo is not None:
            box.schedule.setdefault("combo member", box.combo)
        box.launch = launches.get(key)
        box.remarks = [r for r in report.remarks if kernel_id(box.name) in {kernel_id(s) for s in r.get("subjects", ())}]
        own = f"{report.name}/{path.stem}" if path is not None else None
        box.device_time_us = next((profile[k] for k in (f"{report.name}/{box.name}", own, box.name, key)
                                   if k is not None and k in profile), None)
        if own is not None and own in profile.shared:
            box.schedule["compiled kernel"] = (f"one body with {profile.shared[own] - 1} other launch site(s) of this graph: "
                                               "the profile's time for it is split evenly among them")
    for combo in report.of_kind("combo"):  # a member's launch is its combo's; the combo's header names its schedule
        header = (combo.source or "").split("\n", 1)[0]
        kinds = {kernel_key(name): kind for name, kind in re.findall(r"(fusec_\w+) \(([^)]*)\)", header)}
        for box in report.boxes:
            if box.combo == combo.name:
                box.launch = box.launch or combo.launch
                box.source, box.source_file = combo.source, combo.source_file  # its code is a branch of the combo's
                if kernel_key(box.name) in kinds:
                    box.schedule["lowered as"] = f"{kinds[kernel_key(box.name)]}, member of {combo.name}"


def _launch_lines(launcher: str) -> dict[str, str]:
    """kernel key -> the launcher's comment on its launch (grid, num_warps, block sizes) or its run-time config."""
    found = {}
    for line in launcher.splitlines():
        m = re.search(r"(fusec_\w+)\.launch\(.*#\s*(.+)$", line)
        if m:
            found[kernel_key(m.group(1))] = m.group(2).strip()
    return found


class Profile(dict[str, float]):
    """Device microseconds by ``"graph/kernel"`` (or ``kernel`` where the profile names no graph); ``shared``: keys
    whose time is one share of a compiled kernel that several launch sites of their graph run."""

    def __init__(self, times: dict[str, float] | None = None, shared: dict[str, int] | None = None):
        super().__init__(times or {})
        self.shared = shared or {}


def read_profile(path: Path) -> Profile:
    """A profile: ``{"kernels": [{"name": "fusec_poi_add_3", "graph": "forward_0_0", "device_time_us": 4.2}, ...]}``
    (``graph`` optional).  Returns ``"graph/name"`` (or ``name``) -> microseconds."""
    try:
        data = json.loads(path.read_text())
        times = Profile()
        for entry in data["kernels"]:
            key = f"{entry['graph']}/{entry['name']}" if entry.get("graph") else entry["name"]
            times[key] = times.get(key, 0.0) + float(entry["device_time_us"])
        return times
    except OSError as e:
        raise ReportError(f"{path}: cannot read the profile: {e.strerror or e}") from None
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise ReportError(f"{path}: not a fusec profile ({type(e).__name__}: {e}); expected "
                          '{"kernels": [{"name": ..., "device_time_us": ...}]}') from None


def share_out(profile: Profile, folders: list[Path]) -> Profile:
    """Kernels with one body compile once and run under the name of the launch site that compiled them first
    (``fusec.runtime.kernel_cache.load_shared_kernel``), so a profile names one site, perhaps of another graph, for
    all of a graph's sites of that body: its time is split evenly among them (keys ``graph/site``)."""
    from fusec.runtime.kernel_cache import body_hash

    bodies = {f.name: {p.stem: body_hash(p.read_text(), p.stem) for p in f.glob("fusec_*.py")} for f in folders}
    out = Profile(profile)
    for key, us in profile.items():
        graph, _, name = key.rpartition("/")
        sites = bodies.get(graph)
        if not sites:
            continue
        launched = {sites[name]} if name in sites else {b.get(name) for b in bodies.values()} - {None}
        same = [site for site, body in sites.items() if body in launched]
        if len(same) < 2 and name in sites or not same:
            continue
        out.pop(key)
        for site in same:
            out[f"{graph}/{site}"] = out.get(f"{graph}/{site}", 0.0) + us / len(same)
            if len(same) > 1:
                out.shared[f"{graph}/{site}"] = len(same)
    return out
