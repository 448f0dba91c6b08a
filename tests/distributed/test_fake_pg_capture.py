"""Functional collectives captured on one process with a fake process group, compiled by fusec.

The fake group runs no communication (an all_reduce leaves its buffer as it is), so these
tests check the IR and the launcher: collectives imported as ordered externs, kept in the
graph's order, their buffers alive until the wait, nothing fused or grouped across one.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as fcol

from fusec import testing
from fusec.dialects import fusec as F

FILECHECK = "import sys, filecheck.finput, filecheck.filecheck; sys.argv[0] = 'filecheck'; filecheck.filecheck.main()"


@pytest.fixture(scope="module", autouse=True)
def fake_group(fake_process_group):
    """Every test here runs in the fake two-rank group (tests/conftest.py)."""


def filecheck(text: str, checks: str, tmp_path) -> None:
    """Runs FileCheck's CHECK lines ``checks`` against ``text``; fails with its message."""
    check_file = tmp_path / "checks.txt"
    check_file.write_text(checks)
    result = subprocess.run([sys.executable, "-m", "filecheck", str(check_file)], input=text, capture_output=True, text=True)
    assert result.returncode == 0, f"filecheck failed:\n{result.stdout}{result.stderr}\n--- input ---\n{text}"


def compile_and_dump(fn, inputs, tmp_path):
    """Runs ``fn`` compiled by fusec with a dump folder; returns (outputs, the graph's dump folder, remarks)."""
    torch._dynamo.reset()
    out = torch.compile(fn, backend="fusec", options={"dump_dir": str(tmp_path / "dump")})(*inputs)
    (graph_dir,) = sorted((tmp_path / "dump").iterdir())
    return out, graph_dir, (graph_dir / "remarks.txt").read_text().splitlines()


def tp_like(x, y):
    """All-reduce, compute independent of it, then all-gather and reduce-scatter of one buffer."""
    h = x.relu() + 1
    a = fcol.all_reduce(h, "sum", dist.group.WORLD)
    z = y * 2
    b = a.sin() + z
    g = fcol.all_gather_tensor(b, 0, dist.group.WORLD)
    return g.cos(), fcol.reduce_scatter_tensor(g, "sum", 0, dist.group.WORLD)


@pytest.fixture(scope="module")
def tp_like_dump(fake_group, tmp_path_factory):
    """tp_like compiled once: (outputs, its dump folder, its remarks)."""
    torch.manual_seed(0)
    x, y = torch.randn(8, 4), torch.randn(8, 4)
    return compile_and_dump(tp_like, (x, y), tmp_path_factory.mktemp("tp_like"))


def graph_of(text: str) -> F.GraphOp:
    return next(op for op in testing.parse(text).walk() if isinstance(op, F.GraphOp))


def test_collectives_import_as_ordered_externs(tp_like_dump, tmp_path):
    out, graph_dir, log = tp_like_dump
    assert [tuple(o.shape) for o in out] == [(16, 4), (8, 4)]
    checks = """
CHECK:      fusec.pointwise "relu"
CHECK:      %[[AR:.*]] = fusec.extern "_c10d_functional.all_reduce.default"(%{{.*}}, "sum", "0") {collective = "issue"}
CHECK-NEXT: %[[W0:.*]] = fusec.extern "_c10d_functional.wait_tensor.default"(%[[AR]]) {collective = "wait"}
CHECK:      fusec.pointwise "sin" %[[W0]]
CHECK:      %[[AG:.*]] = fusec.extern "_c10d_functional.all_gather_into_tensor.default"(%{{.*}}, 2, "0") {collective = "issue"}
CHECK-NEXT: %[[W1:.*]] = fusec.extern "_c10d_functional.wait_tensor.default"(%[[AG]]) {collective = "wait"}
CHECK:      fusec.pointwise "cos" %[[W1]]
CHECK:      %[[RS:.*]] = fusec.extern "_c10d_functional.reduce_scatter_tensor.default"(%[[W1]], "sum", 2, "0") {collective = "issue"}
CHECK-NEXT: fusec.extern "_c10d_functional.wait_tensor.default"(%[[RS]]) {collective = "wait"}
CHECK:      fusec.output
"""
    filecheck((graph_dir / "imported.mlir").read_text(), checks, tmp_path)
    boundaries = [line for line in log if line.startswith("remark: importer: collective: ")]
    assert len(boundaries) == 6, log
    assert not [line for line in log if "extern-fallback" in line], "a collective is no fallback"


def test_final_ir_keeps_order_and_nothing_reads_before_the_wait(tp_like_dump, tmp_path):
    _, graph_dir, _ = tp_like_dump
    final = (graph_dir / "final.mlir").read_text()
    checks = """
CHECK:      fusec.kernel @{{.*}}relu
CHECK:      %[[AR:.*]] = fusec.extern "_c10d_functional.all_reduce.default"
CHECK-NEXT: %[[W0:.*]] = fusec.extern "_c10d_functional.wait_tensor.default"(%[[AR]])
CHECK-NEXT: fusec.kernel @{{.*}}sin{{.*}}(%[[W0]]
CHECK:      %[[AG:.*]] = fusec.extern "_c10d_functional.all_gather_into_tensor.default"
CHECK-NEXT: %[[W1:.*]] = fusec.extern "_c10d_functional.wait_tensor.default"(%[[AG]])
CHECK:      fusec.extern "_c10d_functional.reduce_scatter_tensor.default"(%[[W1]]
CHECK-NEXT: fusec.extern "_c10d_functional.wait_tensor.default"
"""
    filecheck(final, checks, tmp_path)
    # A collective's result has one reader: its wait.
    issued = [op for op in graph_of(final).block.ops if isinstance(op, F.ExternOp) and "wait_tensor" not in op.target.data]
    assert len(issued) == 3
    for op in issued:
        readers = [u.operation for r in op.results for u in r.uses]
        assert len(readers) == 1 and "wait_tensor" in readers[0].target.data, (op.target.data, readers)


def test_launcher_keeps_buffers_alive_until_the_wait(tp_like_dump):
    _, graph_dir, _ = tp_like_dump
    lines = [line.strip() for line in (graph_dir / "launcher.py").read_text().splitlines()]
    issue = next(i for i, line in enumerate(lines) if "all_reduce_default(" in line)
    wait = next(i for i, line in enumerate(lines) if "wait_tensor_default(" in line)
    assert wait == issue + 1, "nothing runs between an issue and its wait here: the wait follows at once"
    sent = re.search(r"all_reduce_default\((buf\d+)", lines[issue]).group(1)
    freed = next(i for i, line in enumerate(lines) if line.startswith("del ") and re.search(rf"\b{sent}\b", line))
    assert freed > wait, "the collective's input is freed only after its wait"
    assert "_as_layout" not in lines[issue + 1], "no copy of an in-flight buffer"


def independent_around(x, y, z):
    """Two kernels independent of the collective, one before it and one after its wait."""
    a = x.sin() * 2
    r = fcol.all_reduce(y * 3, "sum", dist.group.WORLD)
    b = z.cos() + 1
    return a, r + 1, b


def test_no_combo_crosses_a_collective(fresh_dynamo, tmp_path):
    torch.manual_seed(3)
    xs = [torch.randn(8, 4) for _ in range(3)]
    out, graph_dir, _ = compile_and_dump(independent_around, xs, tmp_path)
    # The fake group leaves an all_reduce's buffer as it is: eager computes the same values.
    for got, want in zip(out, independent_around(*xs), strict=True):
        torch.testing.assert_close(got, want)
    top = list(graph_of((graph_dir / "final.mlir").read_text()).block.ops)

    def position(word: str) -> int:
        """Where the graph-level op holding a kernel (or extern) named with ``word`` is."""
        for i, op in enumerate(top):
            names = [k.sym_name.data for k in op.walk() if isinstance(k, F.KernelOp)]
            names += [op.target.data] if isinstance(op, F.ExternOp) else []
            if any(word in n for n in names):
                return i
        raise AssertionError(f"no op named with {word!r}")

    assert position("sin") < position("all_reduce") < position("wait_tensor") < position("cos")


def coalesced_and_others(x, y):
    a, b = fcol.all_reduce_coalesced([x * 2, y + 1], "sum", dist.group.WORLD)
    c = fcol.all_to_all_single(x.relu(), None, None, dist.group.WORLD)
    d = fcol.broadcast(y.sin(), 0, dist.group.WORLD)
    return a + 1, b * 2, c, d


def test_coalesced_all_to_all_and_broadcast_keep_their_order(fresh_dynamo, tmp_path):
    torch.manual_seed(4)
    x, y = torch.randn(8, 4), torch.randn(8, 4)
    out, graph_dir, log = compile_and_dump(coalesced_and_others, (x, y), tmp_path)
    # The fake group leaves all_reduce's and broadcast's buffers as they are.
    torch.testing.assert_close(out[0], x * 2 + 1)
    torch.testing.assert_close(out[1], (y + 1) * 2)
    torch.testing.assert_close(out[3], y.sin())
    checks = """
CHECK:      %[[A:[0-9]+]], %[[B:[0-9]+]] = fusec.extern "_c10d_functional.all_reduce_coalesced.default"([%{{.*}}, %{{.*}}], "sum", "0") {collective = "issue"}
CHECK-NEXT: fusec.extern "_c10d_functional.wait_tensor.default"(%[[A]]) {collective = "wait"}
CHECK-NEXT: fusec.extern "_c10d_functional.wait_tensor.default"(%[[B]]) {collective = "wait"}
CHECK:      fusec.extern "_c10d_functional.all_to_all_single.default"
CHECK-NEXT: fusec.extern "_c10d_functional.wait_tensor.default"
CHECK:      fusec.extern "_c10d_functional.broadcast.default"
CHECK-NEXT: fusec.extern "_c10d_functional.wait_tensor.default"
"""
    filecheck((graph_dir / "final.mlir").read_text(), checks, tmp_path)
    assert sum(line.startswith("remark: importer: collective: ") for line in log) == 7, log
    # Both inputs of the coalesced all_reduce are freed only after the second wait.
    lines = [line.strip() for line in (graph_dir / "launcher.py").read_text().splitlines()]
    issue = next(i for i, line in enumerate(lines) if "all_reduce_coalesced_default(" in line)
    last_wait = max(i for i, line in enumerate(lines) if "wait_tensor_default(" in line and i < issue + 6)
    for sent in re.search(r"all_reduce_coalesced_default\(\[([^\]]*)\]", lines[issue]).group(1).split(", "):
        freed = next(i for i, line in enumerate(lines) if line.startswith("del ") and re.search(rf"\b{sent}\b", line))
        assert freed > last_wait, (sent, lines[issue:freed + 1])
