"""fusec-opt: every flag, and every error path as one `fusec-opt: error:` line with exit code 1."""

from __future__ import annotations

import importlib.machinery
import json
import subprocess
import sys
import types
from dataclasses import dataclass

import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from fusec.base import remarks
from fusec.dialects import fusec as F
from fusec.registry import PASSES
from fusec.tools import fusec_opt
from fusec.tools.fusec_opt import main

GRAPH = """\
fusec.graph @g(%a : !fusec.tensor<[s0, 8], f32>, %b : !fusec.tensor<[8], f32>) -> (!fusec.tensor<[s0], f32>) symbols(s0 in [1, inf]) {
  %c = fusec.constant 0.5 : !fusec.tensor<[], f32>
  %m = fusec.pointwise "mul" %a, %c : (!fusec.tensor<[s0, 8], f32>, !fusec.tensor<[], f32>) -> !fusec.tensor<[s0, 8], f32>
  %ad = fusec.pointwise "add" %m, %b : (!fusec.tensor<[s0, 8], f32>, !fusec.tensor<[8], f32>) -> !fusec.tensor<[s0, 8], f32>
  %s = fusec.reduce "sum" %ad dims [1] : !fusec.tensor<[s0, 8], f32> -> !fusec.tensor<[s0], f32>
  fusec.output %s : !fusec.tensor<[s0], f32>
}
"""
SMALL = """\
fusec.graph @h(%a : !fusec.tensor<[4], f32>) -> (!fusec.tensor<[4], f32>) {
  %n = fusec.pointwise "neg" %a : (!fusec.tensor<[4], f32>) -> !fusec.tensor<[4], f32>
  fusec.output %n : !fusec.tensor<[4], f32>
}
"""
HEADER_AFTER = "// -----// IR Dump After {} //----- //"
HEADER_BEFORE = "// -----// IR Dump Before {} //----- //"


# ---------------------------------------------------------------- test passes


@dataclass(frozen=True)
class OptionsPass(ModulePass):
    """A test pass with typed options; changes nothing."""

    name = "test-options"
    max_ops: int = 8
    mode: str = "fast"
    flag: bool = False

    def apply(self, ctx, op: ModuleOp) -> None:
        pass


@dataclass(frozen=True)
class RequiredPass(ModulePass):
    """A test pass with a required option."""

    name = "test-required"
    limit: int

    def apply(self, ctx, op: ModuleOp) -> None:
        pass


@dataclass(frozen=True)
class RemarkPass(ModulePass):
    """Emits one remark per graph."""

    name = "test-remark"

    def apply(self, ctx, op: ModuleOp) -> None:
        for graph in op.walk():
            if isinstance(graph, F.GraphOp):
                remarks.emit(self.name, "limit", "8 ops > max-ops=4", graph, ops=8)


@dataclass(frozen=True)
class BreakingPass(ModulePass):
    """Leaves IR that does not verify: a pointwise op loses an operand."""

    name = "test-break"

    def apply(self, ctx, op: ModuleOp) -> None:
        for p in op.walk():
            if isinstance(p, F.PointwiseOp) and len(p.inputs) == 2:
                p.operands = [p.inputs[0]]
                return


@dataclass(frozen=True)
class RefusingPass(ModulePass):
    """Fails as xDSL passes do, with PassFailedException."""

    name = "test-refuse"

    def apply(self, ctx, op: ModuleOp) -> None:
        raise PassFailedException("cannot handle fusec.extern here")


@dataclass(frozen=True)
class CrashingPass(ModulePass):
    """A pass with a bug."""

    name = "test-crash"

    def apply(self, ctx, op: ModuleOp) -> None:
        raise KeyError("oops")


@pytest.fixture(autouse=True)
def test_passes(monkeypatch):
    for cls in (OptionsPass, RequiredPass, RemarkPass, BreakingPass, RefusingPass, CrashingPass):
        monkeypatch.setitem(PASSES, cls.name, lambda cls=cls: cls)


# ---------------------------------------------------------------- helpers


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_error(capsys, *args: str) -> str:
    """Runs fusec-opt expecting one clean error; returns stderr."""
    code, _, err = run(capsys, *args)
    assert code == 1, err
    assert err.startswith("fusec-opt: error: "), err
    assert "Traceback" not in err
    return err


@pytest.fixture
def graph_file(tmp_path):
    path = tmp_path / "g.mlir"
    path.write_text(GRAPH)
    return path


# ---------------------------------------------------------------- plain runs


def test_no_pipeline_parses_verifies_and_prints(capsys, graph_file, tmp_path):
    code, out, err = run(capsys, graph_file)
    assert code == 0 and err == ""
    assert out.startswith("builtin.module {\n  fusec.graph @g(")
    again = tmp_path / "again.mlir"
    again.write_text(out)
    assert run(capsys, again)[1] == out


def test_pipeline_runs_passes_in_order(capsys, graph_file):
    code, out, err = run(capsys, graph_file, "-p", "form-kernels,canonicalize,dce")
    assert code == 0, err
    assert "fusec.kernel @fusec_red_sum_" in out
    assert "fusec.reduce " not in out


def test_output_file(capsys, graph_file, tmp_path):
    target = tmp_path / "out.mlir"
    code, out, _ = run(capsys, graph_file, "-o", target)
    assert code == 0 and out == ""
    assert target.read_text().startswith("builtin.module {")


def test_stdin_and_python_dash_m_entry(graph_file):
    result = subprocess.run([sys.executable, "-m", "fusec.tools.fusec_opt", "-", "-p", "dce"],
                            input=graph_file.read_text(), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "fusec.graph @g(" in result.stdout


def test_the_default_pipeline_on_ir_without_externs_never_imports_torch(graph_file):
    """torch takes ~1.8 s to import: fusec-opt loads it only for IR that calls torch ops (an extern's schema), so the
    filecheck suite's runs and a compiler engineer's edits of a fusion test start in about a second."""
    assert "fusec.extern" not in GRAPH
    code = ("import sys; from fusec.tools.fusec_opt import main\n"
            "try:\n    rc = main([sys.argv[1], '--default-pipeline', '-o', sys.argv[2]])\n"
            "except SystemExit as e:\n    rc = e.code\n"
            "assert not rc, rc\n"
            "assert 'torch' not in sys.modules, 'fusec-opt imported torch'")
    result = subprocess.run([sys.executable, "-c", code, str(graph_file), str(graph_file.with_suffix(".out.mlir"))],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "fusec.kernel" in graph_file.with_suffix(".out.mlir").read_text()


def test_parse_error_from_stdin_names_stdin():
    result = subprocess.run([sys.executable, "-m", "fusec.tools.fusec_opt"], input="fusec.graph @g(\n",
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert result.stderr.startswith("fusec-opt: error: <stdin>:2:1: Expected block argument")
    assert "Traceback" not in result.stderr


# ---------------------------------------------------------------- printing and dumps


def test_print_ir_after_all_and_before_all(capsys, graph_file):
    code, out, err = run(capsys, graph_file, "-p", "form-kernels,dce", "--print-ir-after-all", "--print-ir-before-all")
    assert code == 0
    headers = [line for line in err.splitlines() if line.startswith("// -----//")]
    assert headers == [HEADER_BEFORE.format("form-kernels"), HEADER_AFTER.format("form-kernels"),
                       HEADER_BEFORE.format("dce"), HEADER_AFTER.format("dce")]
    # stdout holds only the final IR; the IR after the last pass is that same IR
    assert err.split(HEADER_AFTER.format("dce") + "\n")[1].rstrip("\n") == out.rstrip("\n")


def test_print_ir_after_named_pass(capsys, graph_file):
    code, _, err = run(capsys, graph_file, "-p", "form-kernels,canonicalize,dce", "--print-ir-after", "dce",
                       "--print-ir-after", "form-kernels")
    assert code == 0
    assert [line for line in err.splitlines() if line.startswith("// -----//")] == [
        HEADER_AFTER.format("form-kernels"), HEADER_AFTER.format("dce")]


def test_print_ir_after_change_skips_passes_that_change_nothing(capsys, graph_file):
    code, _, err = run(capsys, graph_file, "-p", "test-options,form-kernels,test-options", "--print-ir-after-change")
    assert code == 0
    assert [line for line in err.splitlines() if line.startswith("// -----//")] == [HEADER_AFTER.format("form-kernels")]


def test_dump_dir_names_and_every_dump_parses_back(capsys, graph_file, tmp_path):
    dump = tmp_path / "dump"
    dump.mkdir()
    (dump / "07-stale.mlir").write_text("from an earlier, longer run")
    code, out, _ = run(capsys, graph_file, "-p", "form-kernels,canonicalize,dce", "--dump-dir", dump)
    assert code == 0
    assert sorted(p.name for p in dump.iterdir()) == [
        "00-input.mlir", "01-form-kernels.mlir", "02-canonicalize.mlir", "03-dce.mlir", "remarks.json", "remarks.txt", "timings.txt"]
    assert (dump / "03-dce.mlir").read_text() == out
    for path in dump.glob("*.mlir"):
        text = path.read_text()
        assert run(capsys, path) == (0, text, ""), path.name


def test_remarks_go_to_stderr_and_the_dump(capsys, graph_file, tmp_path):
    code, out, err = run(capsys, graph_file, "-p", "test-remark", "--remarks", "--dump-dir", tmp_path / "d")
    assert code == 0
    assert "remark: test-remark: limit: 8 ops > max-ops=4 [@g]" in err
    assert "remark" not in out
    assert (tmp_path / "d" / "remarks.txt").read_text() == "remark: test-remark: limit: 8 ops > max-ops=4 [@g]\n"
    [entry] = json.loads((tmp_path / "d" / "remarks.json").read_text())
    assert entry["code"] == "limit" and entry["subjects"] == ["@g"] and entry["data"] == {"ops": 8}


# ---------------------------------------------------------------- split input


def test_split_input_file_processes_chunks_independently(capsys, tmp_path):
    path = tmp_path / "split.mlir"
    path.write_text(GRAPH + "// -----\n" + SMALL)
    code, out, err = run(capsys, path, "--split-input-file", "-p", "form-kernels")
    assert code == 0, err
    first, second = out.split("// -----\n")
    assert "@g(" in first and "@h(" not in first
    assert "@h(" in second and "fusec.kernel @fusec_poi_neg_0" in second  # numbering restarts per chunk


def test_split_input_file_error_keeps_line_numbers_and_other_chunks(capsys, tmp_path):
    bad = SMALL.replace('"neg" %a', '"neg" %a dimz')
    path = tmp_path / "split.mlir"
    path.write_text(GRAPH + "// -----\n" + bad + "// -----\n" + SMALL)
    code, out, err = run(capsys, path, "--split-input-file")
    assert code == 1
    line = GRAPH.count("\n") + 3  # GRAPH, the marker line, then the chunk's second line
    assert err.startswith(f"fusec-opt: error: {path}:{line}:")
    assert out.count("builtin.module") == 2


def test_split_input_dumps_per_chunk(capsys, tmp_path):
    path = tmp_path / "split.mlir"
    path.write_text(SMALL + "// -----\n" + SMALL)
    code, _, _ = run(capsys, path, "--split-input-file", "-p", "dce", "--dump-dir", tmp_path / "d")
    assert code == 0
    assert sorted(p.name for p in (tmp_path / "d" / "chunk-1").iterdir()) == [
        "00-input.mlir", "01-dce.mlir", "remarks.json", "remarks.txt", "timings.txt"]


# ---------------------------------------------------------------- pipeline files, --list-passes, --emit


def test_pipeline_file_with_comments(capsys, graph_file, tmp_path):
    spec = tmp_path / "p.pipeline"
    spec.write_text("# leading comment\nform-kernels   # trailing comment\n\n"
                    "test-options{max-ops=3   # an option per line\n  mode=\"a#b\"}\ndce\n")
    code, _, err = run(capsys, graph_file, "--pipeline-file", spec, "--print-ir-after-all")
    assert code == 0, err
    assert [line for line in err.splitlines() if line.startswith("// -----//")] == [
        HEADER_AFTER.format(n) for n in ("form-kernels", "test-options", "dce")]


def test_default_pipeline_flag(capsys, graph_file):
    code, out, err = run(capsys, graph_file, "--default-pipeline")
    assert code == 0, err
    assert "fusec.kernel" in out


def test_list_passes(capsys):
    code, out, _ = run(capsys, "--list-passes")
    assert code == 0
    for name in PASSES:
        assert f"\n{name}\n" in f"\n{out}"
    assert "Applies all canonicalization patterns." in out
    assert "    max-ops: int = 8\n    mode: str = \"fast\"\n    flag: bool = false\n" in out
    assert "    limit: int (required)\n" in out


def test_emit_triton_missing_lowering(capsys, graph_file, monkeypatch):
    monkeypatch.setattr(fusec_opt.importlib.util, "find_spec", lambda name: None)
    assert "triton emission is not available yet" in run_error(capsys, graph_file, "--emit", "triton")


def test_emit_triton_calls_the_emitter(capsys, graph_file, monkeypatch):
    fake = types.ModuleType("fusec.lowering.emit")
    fake.__spec__ = importlib.machinery.ModuleSpec("fusec.lowering.emit", None)
    fake.emit_module_source = lambda module: f"# {sum(1 for _ in module.walk())} ops\n"
    monkeypatch.setitem(sys.modules, "fusec.lowering.emit", fake)
    code, out, err = run(capsys, graph_file, "-p", "form-kernels", "--emit", "triton")
    assert code == 0, err
    assert out.startswith("# ") and out.endswith(" ops\n")


# ---------------------------------------------------------------- errors


def test_missing_file(capsys, tmp_path):
    err = run_error(capsys, tmp_path / "nope.mlir")
    assert "nope.mlir': no such file" in err


def test_directory_as_input(capsys, tmp_path):
    assert "it is a directory" in run_error(capsys, tmp_path)


def test_binary_input(capsys, tmp_path):
    path = tmp_path / "bin.mlir"
    path.write_bytes(b"\xff\xfe\x00garbage")
    assert "not UTF-8 text" in run_error(capsys, path)


def test_parse_error_has_file_line_col_and_caret(capsys, tmp_path):
    path = tmp_path / "bad.mlir"
    path.write_text(GRAPH.replace("dims [1]", "dimz [1]"))
    err = run_error(capsys, path)
    first, source, caret = err.splitlines()[:3]
    assert first == f"fusec-opt: error: {path}:5:31: Expected 'dims'"
    assert "dimz [1]" in source
    assert caret.strip() == "^^^^" and caret.index("^") == source.index("dimz")


def test_verifier_failure_names_the_op(capsys, tmp_path):
    path = tmp_path / "bad.mlir"
    path.write_text(SMALL.replace("-> !fusec.tensor<[4], f32>\n", "-> !fusec.tensor<[5], f32>\n", 1)
                    .replace("-> (!fusec.tensor<[4], f32>)", "-> (!fusec.tensor<[5], f32>)")
                    .replace("fusec.output %n : !fusec.tensor<[4], f32>", "fusec.output %n : !fusec.tensor<[5], f32>"))
    err = run_error(capsys, path)
    assert err.splitlines() == [
        f"fusec-opt: error: {path}:2:3: input IR does not verify: fusec.pointwise: result: expected shape [4], got [5]",
        '  %n = fusec.pointwise "neg" %a : (!fusec.tensor<[4], f32>) -> !fusec.tensor<[5], f32>',
        "  ^",
    ]


def test_verifier_failure_after_a_pass_names_the_pass(capsys, graph_file):
    err = run_error(capsys, graph_file, "-p", "dce,test-break")
    assert "IR after pass 'test-break' does not verify: fusec.pointwise \"mul\": expected 2 operands, got 1" in err


def test_pass_failure_names_the_pass(capsys, graph_file):
    assert "pass 'test-refuse' failed: cannot handle fusec.extern here" in run_error(capsys, graph_file, "-p", "test-refuse")


def test_crashing_pass_gives_no_traceback(capsys, graph_file):
    err = run_error(capsys, graph_file, "-p", "dce,test-crash")
    assert "internal error (while running pass 'test-crash'): KeyError: 'oops'" in err


def test_unknown_pass_lists_close_names(capsys, graph_file):
    err = run_error(capsys, graph_file, "-p", "form-kernel")
    assert err == "fusec-opt: error: unknown pass 'form-kernel' (did you mean 'form-kernels'?)\n  form-kernel\n  ^\n"


def test_unknown_pass_without_close_names_lists_all(capsys, graph_file):
    err = run_error(capsys, graph_file, "-p", "zzz")
    assert "unknown pass 'zzz' (available passes: " in err and "form-kernels" in err


def test_unknown_print_ir_after_pass(capsys, graph_file):
    assert "unknown pass 'dec' (did you mean 'dce'?)" in run_error(capsys, graph_file, "--print-ir-after", "dec")


def test_bad_option_name(capsys, graph_file):
    err = run_error(capsys, graph_file, "-p", "test-options{max-op=3}")
    assert "pass 'test-options' has no option 'max-op' (did you mean 'max-ops'?)" in err


def test_option_on_pass_without_options(capsys, graph_file):
    assert "pass 'dce' has no option 'x' (it takes no options)" in run_error(capsys, graph_file, "-p", "dce{x=1}")


@pytest.mark.parametrize("spec, message", [
    ("test-options{max-ops=many}", "pass 'test-options': option 'max-ops' expects int, got many"),
    ("test-options{max-ops=1.5}", "pass 'test-options': option 'max-ops' expects int, got 1.5"),
    ("test-options{flag=maybe}", "pass 'test-options': option 'flag' expects bool, got maybe"),
    ("test-options{mode}", "pass 'test-options': option 'mode' expects str, got (no value)"),
    ("test-required", "pass 'test-required': option 'limit' is required"),
])
def test_bad_option_value(capsys, graph_file, spec, message):
    assert message in run_error(capsys, graph_file, "-p", spec)


def test_bad_pipeline_syntax(capsys, graph_file):
    err = run_error(capsys, graph_file, "-p", "dce,,dce")
    assert err.startswith("fusec-opt: error: invalid pipeline spec: Expected pass name here\n  dce,,dce\n")


def test_both_pipeline_and_pipeline_file(capsys, graph_file, tmp_path):
    err = run_error(capsys, graph_file, "-p", "dce", "--pipeline-file", tmp_path / "p")
    assert "-p and --pipeline-file cannot be used together" in err


def test_missing_pipeline_file(capsys, graph_file, tmp_path):
    assert "cannot read pipeline file" in run_error(capsys, graph_file, "--pipeline-file", tmp_path / "none.pipeline")


def test_unknown_flag_and_bad_choice(capsys, graph_file):
    assert "No such option" in run_error(capsys, graph_file, "--bogus")
    assert "--emit" in run_error(capsys, graph_file, "--emit", "ptx")


def test_unwritable_output(capsys, graph_file, tmp_path):
    assert "cannot write" in run_error(capsys, graph_file, "-o", tmp_path / "no" / "such" / "dir.mlir")


def test_help(capsys):
    code, out, _ = run(capsys, "--help")
    assert code == 0 and "--print-ir-after-change" in out and "--split-input-file" in out


def test_verify_each_flag_names_the_pass_that_broke_the_ir(capsys, graph_file, monkeypatch):
    monkeypatch.delenv("FUSEC_VERIFY_EACH")
    err = run_error(capsys, graph_file, "-p", "test-break,dce")  # checked structurally, verified at the end
    assert "IR after pass 'dce' does not verify" in err and "rerun with --verify-each" in err
    err = run_error(capsys, graph_file, "-p", "test-break,dce", "--verify-each")
    assert "IR after pass 'test-break' does not verify" in err
    monkeypatch.setenv("FUSEC_VERIFY_EACH", "1")
    assert "IR after pass 'dce' does not verify" in run_error(capsys, graph_file, "-p", "test-break,dce", "--no-verify-each")


def test_time_passes_prints_to_stderr(capsys, graph_file):
    code, out, err = run(capsys, graph_file, "-p", "form-kernels,dce", "--time-passes")
    assert code == 0 and "Pass" not in out
    lines = err.splitlines()
    assert [line.split(" took ")[0] for line in lines[:2]] == ["Pass form-kernels", "Pass dce"]
    assert lines[2].startswith("Total: ")
