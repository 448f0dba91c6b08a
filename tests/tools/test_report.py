"""fusec-report and the report the backend writes into each graph's dump folder."""

import json
import re
from pathlib import Path

import pytest
import torch

from fusec.report import picture
from fusec.report.model import read_graph
from fusec.tools.fusec_report import main

pytestmark = pytest.mark.slow  # the module's fixture compiles two programs (~9 s); each test after it is fast


def seed(t1, t2, t3, t4):
    return t1.sum(1), t2.max(1).values, t3.min(1).values, t4.sum(1)


def mm_then_add(a, b, c):
    return (torch.mm(a, b) + c).relu()  # a torch call feeding a kernel: an extern-producer remark


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    """Two real compiles into one dump folder: the seed example and a matmul with an epilogue."""
    root = tmp_path_factory.mktemp("dump")
    torch._dynamo.reset()
    torch.manual_seed(0)
    inputs = [torch.randn(8, 32) for _ in range(4)]
    got = torch.compile(seed, backend="fusec", options={"dump_dir": str(root)})(*inputs)
    for g, w in zip(got, seed(*inputs), strict=True):
        torch.testing.assert_close(g, w)
    a, b, c = torch.randn(4, 8), torch.randn(8, 6), torch.randn(6)
    torch.testing.assert_close(torch.compile(mm_then_add, backend="fusec", options={"dump_dir": str(root)})(a, b, c),
                               mm_then_add(a, b, c), rtol=1e-5, atol=1e-5)
    torch._dynamo.reset()
    return root


def graph_dirs(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir())


def final_kernels(folder: Path) -> list[str]:
    return re.findall(r"fusec\.(?:kernel|combo) @(\w+)", (folder / "final.mlir").read_text())


def test_backend_writes_a_report_per_graph(dumps):
    folders = graph_dirs(dumps)
    assert len(folders) == 2
    for folder in folders:
        page = (folder / "report.html").read_text()
        assert set(json.loads((folder / "timings.json").read_text())) == {"import", "passes", "lowering"}
        for name in final_kernels(folder):
            assert name in page
        assert "<script" in page and "src=" not in page and "http" not in page.split("</style>")[0]  # nothing fetched


def test_kernels_name_their_fx_nodes_and_source_lines(dumps):
    report = read_graph(next(f for f in graph_dirs(dumps) if "fusec.combo" in (f / "final.mlir").read_text()))
    members = [b for b in report.boxes if b.combo is not None]
    assert [b.label for b in members] == ["sum", "max", "min", "sum"]
    line = seed.__code__.co_firstlineno + 1  # the return line computes all four
    for box in members:
        assert box.nodes and all(n.file == __file__ and n.line == line for n in box.nodes)
        assert "persistent" in box.schedule["lowered as"] and box.launch and "XBLOCK" in box.launch
    combo = next(b for b in report.boxes if b.kind == "combo")
    assert combo.members == [b.name for b in members] and "@triton.jit" in combo.source


def test_remarks_and_externs_reach_their_kernels(dumps):
    report = read_graph(next(f for f in graph_dirs(dumps) if "aten.mm" in (f / "final.mlir").read_text()))
    extern = next(b for b in report.boxes if b.kind == "extern")
    kernel = next(b for b in report.boxes if b.kind == "kernel")
    assert extern.label == "aten.mm.default"
    assert any(e.source == extern.name and e.target == kernel.name for e in report.edges)
    assert "extern-producer" in {r["code"] for r in kernel.remarks}
    assert report.remark_counts["extern-producer"] >= 1


@pytest.mark.skipif(picture.dot_binary() is None, reason="Graphviz's dot is not installed")
def test_picture_holds_every_kernel_of_the_final_ir(dumps, tmp_path):
    out = tmp_path / "all.html"
    assert main([str(dumps), "-o", str(out)]) == 0
    page = out.read_text()
    assert page.count("<svg") == 2
    for folder in graph_dirs(dumps):
        for name in final_kernels(folder):
            assert f'id="{picture.anchor(folder.name, name)}"' in page  # a node of the picture
            assert f'id="details-{picture.anchor(folder.name, name)}"' in page


def test_without_graphviz_the_page_lists_the_kernels(dumps, tmp_path, monkeypatch):
    monkeypatch.setattr(picture, "dot_binary", lambda: None)
    out = tmp_path / "plain.html"
    assert main([str(dumps), "-o", str(out)]) == 0
    page = out.read_text()
    assert "<svg" not in page and "Graphviz's <code>dot</code> was not found" in page
    for folder in graph_dirs(dumps):
        for name in final_kernels(folder):
            assert f'data-box="{picture.anchor(folder.name, name)}"' in page


def test_pass_diffs(dumps):
    page = (graph_dirs(dumps)[0] / "report.html").read_text()
    assert "09 form-kernels" in page and '<span class="add">+' in page and "no change" in page


def test_profile_times_show_on_their_kernels(dumps, tmp_path):
    folder = next(f for f in graph_dirs(dumps) if "aten.mm" in (f / "final.mlir").read_text())
    kernel = final_kernels(folder)[0]
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps({"kernels": [{"graph": folder.name, "name": kernel, "device_time_us": 12.5}]}))
    out = tmp_path / "timed.html"
    assert main([str(dumps), "--profile", str(profile), "-o", str(out)]) == 0
    assert "12.5 µs" in out.read_text()
    timed = read_graph(folder, profile={f"{folder.name}/{kernel}": 3.0, "fusec_other_9": 1.0})
    assert {b.name: b.device_time_us for b in timed.boxes if b.kind == "kernel"} == {kernel: 3.0}


def test_compile_times_of_a_first_call_show_on_their_kernels(dumps, tmp_path):
    """A graph's first call on a GPU writes each kernel's compile seconds into its dump; the report shows them."""
    import shutil

    from fusec.base.env import COMPILE_TIMES_FILE

    folder = tmp_path / "copy"
    shutil.copytree(next(f for f in graph_dirs(dumps) if final_kernels(f)), folder)
    kernel = final_kernels(folder)[0]
    (folder / COMPILE_TIMES_FILE).write_text(json.dumps({kernel: 1.234, "fusec_other_9": 2.0}))
    boxes = {b.name: b.schedule.get("Triton compile") for b in read_graph(folder).boxes if b.kind in ("kernel", "combo")}
    assert boxes[kernel] == "1.23 s in a compile worker (the first call's)"
    assert sum(v is not None for v in boxes.values()) == 1
    assert read_graph(folder).timings["slowest Triton compile (a worker)"] == 2.0
    out = tmp_path / "compiled.html"
    assert main([str(folder), "-o", str(out)]) == 0
    assert "1.23 s in a compile worker" in out.read_text() and "slowest Triton compile (a worker) 2000 ms" in out.read_text()


@pytest.mark.parametrize(("args", "message"), [
    (["{missing}"], "not a folder"),
    (["{empty}"], "no graph dumps here"),
    (["{dump}", "--profile", "{bad_profile}"], "not a fusec profile"),
    (["{dump}", "--profile", "{missing}"], "cannot read the profile"),
])
def test_errors_are_one_line(dumps, tmp_path, capsys, args, message):
    (tmp_path / "empty").mkdir()
    (tmp_path / "bad.json").write_text('{"kernels": [{"name": "k"}]}')
    names = {"missing": tmp_path / "nope", "empty": tmp_path / "empty", "dump": dumps, "bad_profile": tmp_path / "bad.json"}
    assert main([a.format(**names) for a in args] + ["-o", str(tmp_path / "r.html")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("fusec-report: error: ") and message in err and err.count("\n") == 1


def test_a_failing_report_never_fails_the_compile(tmp_path, monkeypatch):
    import fusec.report

    def broken(*args, **kwargs):
        raise RuntimeError("broken on purpose")

    monkeypatch.setattr(fusec.report, "read_graph", broken)
    torch._dynamo.reset()
    x = torch.randn(4, 8)
    with pytest.warns(UserWarning, match="no report for .*broken on purpose"):
        got = torch.compile(seed, backend="fusec", options={"dump_dir": str(tmp_path)})(x, x, x, x)
    torch._dynamo.reset()
    torch.testing.assert_close(got, seed(x, x, x, x))
    (folder,) = graph_dirs(tmp_path)
    assert (folder / "final.mlir").exists() and not (folder / "report.html").exists()


def test_reads_a_fusec_opt_dump(dumps, tmp_path):
    from fusec.tools import fusec_opt

    folder = next(f for f in graph_dirs(dumps) if "fusec.combo" in (f / "final.mlir").read_text())
    opt_dump = tmp_path / "opt"
    assert fusec_opt.main([str(folder / "imported.mlir"), "--default-pipeline", "--dump-dir", str(opt_dump),
                           "-o", str(tmp_path / "out.mlir")]) == 0
    assert main([str(opt_dump)]) == 0
    page = (opt_dump / "report.html").read_text()
    for name in final_kernels(folder):
        assert f'data-box="{picture.anchor("opt", name)}"' in page


def test_a_graph_that_ran_as_torch_ops_is_counted_as_a_fallback(dumps, tmp_path):
    import shutil

    root = tmp_path / "mixed"
    shutil.copytree(dumps, root)
    eager = root / "forward_9_0"
    eager.mkdir()
    (eager / "fx_graph.py").write_text("# the graph\n")
    (eager / "not-compiled.txt").write_text("aten.foo has no fusec lowering\n")  # what the backend's fallback writes
    assert main([str(root)]) == 0
    page = (root / "report.html").read_text()
    assert "This graph ran as torch ops (not compiled): aten.foo has no fusec lowering" in page
    assert page.count("<td>ran as torch ops</td>") == 1


def test_a_profiled_kernel_shared_by_launch_sites_splits_its_time_among_them(tmp_path):
    """Identical bodies compile once and profile under the first site's name: the report splits that time
    evenly among the graph's sites of the body, and says so."""
    from fusec.report.model import read_profile, share_out
    from fusec.runtime.kernel_cache import body_hash

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin, self.norm = torch.nn.Linear(16, 16), torch.nn.LayerNorm(16)

        def forward(self, x):
            return self.norm(x + torch.tanh(self.lin(x)))

    torch._dynamo.reset()
    torch.manual_seed(0)
    model = torch.nn.Sequential(Layer(), Layer()).eval()
    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(model, backend="fusec", options={"dump_dir": str(tmp_path)})(x), model(x))
    torch._dynamo.reset()
    (folder,) = graph_dirs(tmp_path)
    by_body: dict[str, list[str]] = {}
    for p in sorted(folder.glob("fusec_*.py")):
        by_body.setdefault(body_hash(p.read_text(), p.stem), []).append(p.stem)
    sites = max(by_body.values(), key=len)
    assert len(sites) == 2  # the two layers' norms (or tails) lower to one body
    profile_file = tmp_path / "profile.json"
    profile_file.write_text(json.dumps({"kernels": [{"graph": folder.name, "name": sites[0], "device_time_us": 9.0}]}))
    report = read_graph(folder, profile=share_out(read_profile(profile_file), [folder]))
    timed = {b.name: b for b in report.boxes if b.device_time_us is not None}
    assert sorted(b.device_time_us for b in timed.values()) == [4.5, 4.5]
    assert all("split evenly" in b.schedule["compiled kernel"] for b in timed.values())
    out = tmp_path / "r.html"
    assert main([str(tmp_path), "--profile", str(profile_file), "-o", str(out)]) == 0
    assert out.read_text().count("4.5 µs") >= 2


def test_a_kernel_with_a_persistent_form_shows_its_own_source_and_names_the_other(tmp_path):
    torch._dynamo.reset()
    x = torch.randn(4, 50)
    got = torch.compile(lambda x: torch.softmax(x, -1), backend="fusec", dynamic=True,
                        options={"dump_dir": str(tmp_path)})(x)
    torch.testing.assert_close(got, torch.softmax(x, -1))
    torch._dynamo.reset()
    (folder,) = graph_dirs(tmp_path)
    (box,) = [b for b in read_graph(folder).boxes if b.kind == "kernel"]
    assert box.name.startswith("fusec_red_") and box.source_file == f"{box.name}.py"
    assert box.schedule["also compiled"].startswith(box.name.replace("fusec_red_", "fusec_per_") + ".py")
