"""Issue 4's programs through ``torch.compile(backend="fusec")`` on CPU: how many launches remain, and why.

For each program, static and ``dynamic=True``: the results match eager, the final IR in the
dump folder launches the expected number of kernels (a combo counts once; matmuls stay
``fusec.extern``), and every boundary left between two launches is explained by a remark in the
dump's remarks.json and in ``fusec-opt --remarks`` replaying the same pipeline.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from fusec.dialects import fusec as F
from fusec.passes.kernel_merge import MAX_NAME_PARTS, VIEWS, computed_parts, name_parts
from fusec.testing import parse
from fusec.tools.benchmark import _layer_norm_gelu, _rmsnorm, _swiglu, _transformer_mix
from fusec.tools.fusec_opt import main as fusec_opt

HIDDEN = 48  # SwiGLU's inner width at the first size


@dataclass(frozen=True)
class Program:
    name: str
    fn: Callable
    shapes: Callable[[int, int], list[tuple[int, ...]]]  # (rows, cols) -> input shapes
    max_kernels: int
    exact: bool = True  # the count must equal max_kernels, not just stay at or under it
    externs: tuple[str, ...] = ()  # the extern targets the final IR keeps, in any order
    atol: float = 1e-5  # torch.testing's float32 default; more for sums over thousands of elements


def _rows_cols(rows, cols):
    return [(rows, cols)]


def _row_and_vectors(n):
    return lambda rows, cols: [(rows, cols)] + [(cols,)] * n


PROGRAMS = [
    Program("pointwise", lambda x, w, b: torch.sigmoid(x * w + b), _row_and_vectors(2), 1),
    Program("rmsnorm", _rmsnorm, _row_and_vectors(1), 1),
    Program("layernorm_gelu", _layer_norm_gelu, _row_and_vectors(2), 1),
    Program("softmax", lambda x: torch.softmax(x, -1), _rows_cols, 1),
    Program("transformer_mix", _transformer_mix, _row_and_vectors(5), 2, exact=False),
    Program("swiglu", _swiglu, lambda rows, cols: [(rows, cols), (cols, HIDDEN * cols // 32), (cols, HIDDEN * cols // 32),
                                                   (HIDDEN * cols // 32, cols)], 1, externs=("aten.mm.default",) * 3),
]
# Programs whose boundaries stay (the programs leave few): the remarks must explain them too.
BOUNDARY_PROGRAMS = [
    Program("column_then_row", lambda x: (x - x.mean(0)).sum(1), _rows_cols, 2),  # a column reduction feeds a row one
    Program("cumsum", lambda x: torch.cumsum(x.sin(), 1).cos(), _rows_cols, 2, externs=("aten.cumsum.default",)),
    Program("view_into_mm", lambda x, w: x.sin().t() @ w, lambda rows, cols: [(rows, cols), (rows, 16)], 1,
            externs=("aten.mm.default",)),
    # Static sizes: a long and a short reduction stay apart (combo-grouping); dynamic: one combo.
    Program("long_and_short_rows", lambda x, y: (x.sum(1), y.sum(1)), lambda rows, cols: [(rows, cols), (rows, 128 * cols)], 2,
            exact=False, atol=1e-3),
]
SIZES = [(8, 32), (6, 16)]  # the second runs through the same compiled function when dynamic


# ---------------------------------------------------------------- compiling once per program


@dataclass
class Compiled:
    program: Program
    dynamic: bool
    graph_dirs: list[Path]
    final: F.GraphOp  # the graph after the last pass

    @property
    def dump(self) -> Path:
        return self.graph_dirs[0]


def _inputs(program: Program, rows: int, cols: int, seed: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    # Inputs after the first (weights, biases) halved: SwiGLU's matmul outputs stay where float32 rounds little.
    return [torch.randn(*shape, generator=gen) * (1.0 if i == 0 else 0.5)
            for i, shape in enumerate(program.shapes(rows, cols))]


def _flat(out) -> list[torch.Tensor]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def last_pass_ir(dump: Path) -> F.GraphOp:
    """The graph of the dump's last numbered IR file (``07-dce.mlir``)."""
    last = sorted(dump.glob("[0-9][0-9]-*.mlir"))[-1]
    (graph,) = [op for op in parse(last.read_text()).walk() if isinstance(op, F.GraphOp)]
    return graph


_compiled: dict[tuple[str, bool], Compiled] = {}


@pytest.fixture
def compiled(request, tmp_path_factory) -> Compiled:
    """Compile and run ``program`` (both sizes when dynamic), checking results on the way; cached per case."""
    program, dynamic = request.param
    key = (program.name, dynamic)
    if key not in _compiled:
        torch._dynamo.reset()
        dump = tmp_path_factory.mktemp(f"{program.name}_{'dynamic' if dynamic else 'static'}")
        fn = torch.compile(program.fn, backend="fusec", dynamic=dynamic, options={"dump_dir": str(dump)})
        for seed, (rows, cols) in enumerate(SIZES if dynamic else SIZES[:1]):
            inputs = _inputs(program, rows, cols, seed)
            got, want = _flat(fn(*inputs)), _flat(program.fn(*inputs))
            assert len(got) == len(want)
            for g, w in zip(got, want, strict=True):
                torch.testing.assert_close(g, w, rtol=1.3e-6, atol=program.atol)
        torch._dynamo.reset()
        dirs = sorted(p for p in dump.iterdir() if p.is_dir())
        _compiled[key] = Compiled(program, dynamic, dirs, last_pass_ir(dirs[0]) if dirs else None)
    return _compiled[key]


def _cases(programs: list[Program]) -> list:
    return [pytest.param((p, d), id=f"{p.name}-{'dynamic' if d else 'static'}") for p in programs for d in (False, True)]


CASES = _cases(PROGRAMS)


# ---------------------------------------------------------------- what the final IR launches


def launches(graph: F.GraphOp) -> list[F.KernelOp | F.ComboOp]:
    """Top-level kernels and combos: each one launch (kernels inside a combo do not count apart)."""
    return [op for op in graph.block.ops if isinstance(op, (F.KernelOp, F.ComboOp))]


def externs(graph: F.GraphOp) -> list[F.ExternOp]:
    return [op for op in graph.block.ops if isinstance(op, F.ExternOp)]


def units(graph: F.GraphOp) -> list[F.KernelOp | F.ExternOp]:
    """Every kernel (also inside combos) and extern: the things remarks are about."""
    found = []
    for op in graph.block.ops:
        found += op.kernels if isinstance(op, F.ComboOp) else [op] if isinstance(op, (F.KernelOp, F.ExternOp)) else []
    return found


def launch_of(unit: F.KernelOp | F.ExternOp):
    parent = unit.parent_op()
    return parent if isinstance(parent, F.ComboOp) else unit


def producer(value) -> F.KernelOp | F.ExternOp | None:
    """The kernel or extern whose result ``value`` is, through views and combo results; None for graph inputs."""
    while True:
        owner = value.owner
        if isinstance(owner, VIEWS):
            value = owner.input
        elif isinstance(owner, F.ComboOp):  # the combo yields a result of one of its kernels
            value = owner.body.block.last_op.operands[value.index]
        elif isinstance(owner, (F.KernelOp, F.ExternOp)):
            return owner
        else:
            return None


def edges(graph: F.GraphOp) -> list[tuple]:
    """(producer, consumer) pairs in different launches with at least one kernel among them."""
    found = []
    for consumer in units(graph):
        for p in dict.fromkeys(producer(v) for v in consumer.operands):
            if p is None or launch_of(p) is launch_of(consumer):
                continue
            if isinstance(p, F.KernelOp) or isinstance(consumer, F.KernelOp):
                found.append((p, consumer))
    return found


def independent_pairs(graph: F.GraphOp) -> list[tuple[F.KernelOp, F.KernelOp]]:
    """Pairs of kernels in different launches with no dependence path between them (combo candidates)."""
    all_units = units(graph)
    reads = {u: {p for v in u.operands if (p := producer(v)) is not None} for u in all_units}
    reaches: dict = {}
    for u in all_units:  # block order: producers come first
        reaches[u] = set(reads[u]).union(*(reaches[p] for p in reads[u]))
    kernels = [u for u in all_units if isinstance(u, F.KernelOp)]
    return [(a, b) for a, b in itertools.combinations(kernels, 2)
            if launch_of(a) is not launch_of(b) and a not in reaches[b] and b not in reaches[a]]


# ---------------------------------------------------------------- remarks


def subject(unit) -> str:
    """How remarks name a unit: ``@kernel``, or an extern's torch op."""
    return unit.target.data if isinstance(unit, F.ExternOp) else f"@{unit.sym_name.data}"


def remark_text(r: dict) -> str:
    """The line ``fusec-opt --remarks`` prints for a remark of remarks.json (fusec.base.remarks.Remark.__str__)."""
    about = f" [{', '.join(r['subjects'])}]" if r["subjects"] else ""
    return f"remark: {r['pass_name']}: {r['code']}: {r['message']}{about}"


def explains_edge(r: dict, a, b) -> bool:
    names = set(r["subjects"])
    if r["pass_name"] == "combo-grouping":
        return False
    kernels = [subject(u) for u in (a, b) if isinstance(u, F.KernelOp)]
    if len(kernels) == 1:  # a kernel and an extern: both named, the extern by its torch op
        return {subject(a), subject(b)} <= names
    return bool(names & set(kernels))


def unexplained(graph: F.GraphOp, log: list[dict]) -> list[str]:
    """The boundaries of ``graph`` that no remark of ``log`` explains, as text."""
    missing = [f"edge {subject(a)} -> {subject(b)}" for a, b in edges(graph)
               if not any(explains_edge(r, a, b) for r in log)]
    missing += [f"ungrouped {subject(a)} / {subject(b)}" for a, b in independent_pairs(graph)
                if not any(r["pass_name"] == "combo-grouping" and {subject(a), subject(b)} & set(r["subjects"])
                           for r in log)]
    return missing


# ---------------------------------------------------------------- tests


@pytest.mark.parametrize("compiled", CASES, indirect=True)
def test_launch_counts(compiled):
    program = compiled.program
    assert len(compiled.graph_dirs) == 1, f"recompiled: {[d.name for d in compiled.graph_dirs]}"
    found = launches(compiled.final)
    names = [f"@{op.sym_name.data}" for op in found]
    if program.exact:
        assert len(found) == program.max_kernels, names
    else:
        assert 1 <= len(found) <= program.max_kernels, names
    assert sorted(op.target.data for op in externs(compiled.final)) == sorted(program.externs)


@pytest.mark.parametrize("compiled", CASES + _cases(BOUNDARY_PROGRAMS), indirect=True)
def test_remarks_explain_every_boundary(compiled, capsys):
    dump = compiled.dump
    if compiled.program in BOUNDARY_PROGRAMS and not compiled.dynamic:
        assert edges(compiled.final) or independent_pairs(compiled.final), "no boundary left to explain"
    log = json.loads((dump / "remarks.json").read_text())
    assert all(r["code"] and r["code"] == r["code"].lower() and " " not in r["code"] for r in log)
    assert unexplained(compiled.final, log) == []
    # fusec-opt replaying the same pipeline on the same input prints the same remarks.
    capsys.readouterr()
    spec = (dump / "pipeline.txt").read_text().strip()
    assert fusec_opt([str(dump / "00-input.mlir"), "-p", spec, "--remarks"]) == 0
    printed = capsys.readouterr().err.splitlines()
    pipeline_log = [r for r in log if r["pass_name"] != "importer"]
    assert [remark_text(r) for r in pipeline_log if not r["superseded"]] == [line for line in printed if line.startswith("remark: ")]
    # remarks about kernels a later pass merged anyway are kept apart, marked superseded
    assert [remark_text(r) for r in pipeline_log if r["superseded"]] == [line[3:] for line in printed if line.startswith("// remark: ")]


@pytest.mark.parametrize("compiled", [c for c in CASES if c.id == "swiglu-static"], indirect=True)
def test_swiglu_boundaries_are_the_matmuls(compiled):
    # The one kernel sits between the matmuls: two extern -> kernel edges and one kernel -> extern edge.
    (kernel,) = launches(compiled.final)
    mm, k = "aten.mm.default", subject(kernel)
    assert sorted((subject(a), subject(b)) for a, b in edges(compiled.final)) == sorted([(mm, k), (mm, k), (k, mm)])
    log = json.loads((compiled.dump / "remarks.json").read_text())
    assert sorted((r["code"], r["message"]) for r in log if k in r["subjects"]) == [
        ("extern-consumer", f"{k} feeds {mm}"),
        ("extern-producer", f"{k} reads the result of {mm}, a torch call, as input 0"),
        ("extern-producer", f"{k} reads the result of {mm}, a torch call, as input 1")]


@pytest.mark.parametrize("compiled", CASES, indirect=True)
def test_kernel_names_list_what_the_kernels_compute(compiled):
    for kernel in units(compiled.final):
        if isinstance(kernel, F.KernelOp):
            parts = name_parts(kernel.sym_name.data)
            assert set(parts) <= computed_parts(kernel.block), kernel.sym_name.data
            assert len(parts) <= MAX_NAME_PARTS
