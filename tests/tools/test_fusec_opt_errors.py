"""fusec-opt on bad input: the exact message of each, exit code 1, no traceback (issue 11.2, issue 14.3)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass

import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from fusec.dialects import fusec as F
from fusec.pipeline import PassCrash
from fusec.registry import PASSES
from fusec.tools.fusec_opt import main

SMALL = """\
fusec.graph @h(%a : !fusec.tensor<[4], f32>) -> (!fusec.tensor<[4], f32>) {
  %n = fusec.pointwise "neg" %a : (!fusec.tensor<[4], f32>) -> !fusec.tensor<[4], f32>
  fusec.output %n : !fusec.tensor<[4], f32>
}
"""
NEG_LINE = '  %n = fusec.pointwise "neg" %a : (!fusec.tensor<[4], f32>) -> !fusec.tensor<[4], f32>'


@dataclass(frozen=True)
class RefuseOnPointwise(ModulePass):
    """Refuses the first pointwise op, as an xDSL pass does (PassFailedException)."""

    name = "test-refuse-pointwise"

    def apply(self, ctx, op: ModuleOp) -> None:
        for pointwise in op.walk():
            if isinstance(pointwise, F.PointwiseOp):
                raise PassFailedException(f"cannot handle {pointwise.fn.data}")


@dataclass(frozen=True)
class CrashOnPointwise(ModulePass):
    """A pass with a bug that shows on a pointwise op."""

    name = "test-crash-pointwise"

    def apply(self, ctx, op: ModuleOp) -> None:
        for pointwise in op.walk():
            if isinstance(pointwise, F.PointwiseOp):
                _ = {}[pointwise.fn.data]


@dataclass(frozen=True)
class CrashInsideFusec(ModulePass):
    """A pass whose bug surfaces in a fusec module it calls (here: asking for the dtype of a non-type)."""

    name = "test-crash-inside-fusec"

    def apply(self, ctx, op: ModuleOp) -> None:
        from fusec.base import dtypes

        for pointwise in op.walk():
            if isinstance(pointwise, F.PointwiseOp):
                dtypes.of_ir(pointwise.fn)


@dataclass(frozen=True)
class Tuned(ModulePass):
    name = "test-tuned"
    max_ops: int = 8

    def apply(self, ctx, op: ModuleOp) -> None:
        pass


@pytest.fixture(autouse=True)
def test_passes(monkeypatch):
    for cls in (RefuseOnPointwise, CrashOnPointwise, CrashInsideFusec, Tuned):
        monkeypatch.setitem(PASSES, cls.name, lambda cls=cls: cls)


def error_of(capsys, *args) -> list[str]:
    """fusec-opt's stderr lines, after checking it failed with exit code 1, one error and no traceback."""
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    assert code == 1, err
    assert out == "" and "Traceback" not in err and err.count("fusec-opt: error: ") == 1, err
    return err.rstrip("\n").split("\n")


def ir_file(tmp_path, text: str, name: str = "in.mlir"):
    path = tmp_path / name
    path.write_text(text)
    return path


# ---------------------------------------------------------------- malformed IR


def test_truncated_file(capsys, tmp_path):
    path = ir_file(tmp_path, SMALL[:150])
    assert error_of(capsys, path) == [
        f"fusec-opt: error: {path}:2:75: 'fusec.tens' is not registered",
        "  %n = fusec.pointwise \"neg\" %a : (!fusec.tensor<[4], f32>) -> !fusec.tens",
        " " * 74 + "^",
    ]


def test_file_ending_inside_a_region(capsys, tmp_path):
    path = ir_file(tmp_path, "".join(SMALL.splitlines(True)[:2]))
    assert error_of(capsys, path)[0] == f"fusec-opt: error: {path}:3:1: unexpected end of input: expected '}}' to close the region"


def test_unknown_op_points_at_its_name(capsys, tmp_path):
    path = ir_file(tmp_path, SMALL.replace("fusec.pointwise", "fusec.pointwize"))
    assert error_of(capsys, path) == [
        f"fusec-opt: error: {path}:2:8: unknown operation 'fusec.pointwize'",
        NEG_LINE.replace("pointwise", "pointwize"),
        "       " + "^" * len("fusec.pointwize"),
    ]


def test_value_used_with_the_wrong_type(capsys, tmp_path):
    path = ir_file(tmp_path, SMALL.replace("-> !fusec.tensor<[4], f32>\n", "-> !fusec.tensor<[4], i32>\n", 1))
    assert error_of(capsys, path)[0] == (
        f"fusec-opt: error: {path}:3:16: operand is used with type !fusec.tensor<[4], f32>, "
        "but has been previously used or defined with type !fusec.tensor<[4], i32>")


def test_unknown_element_type(capsys, tmp_path):
    path = ir_file(tmp_path, SMALL.replace("-> !fusec.tensor<[4], f32>\n", "-> !fusec.tensor<[4], f33>\n", 1))
    assert error_of(capsys, path)[0] == f"fusec-opt: error: {path}:2:83: type expected"


def test_undeclared_size_symbol(capsys, tmp_path):
    path = ir_file(tmp_path, SMALL.replace("[4]", "[s0]"))
    assert error_of(capsys, path) == [
        f"fusec-opt: error: {path}:1:1: input IR does not verify: fusec.graph: size symbol 's0' in "
        "!fusec.tensor<[s0], f32> is not declared by fusec.graph @h",
        "fusec.graph @h(%a : !fusec.tensor<[s0], f32>) -> (!fusec.tensor<[s0], f32>) {",
        "^",
    ]


@pytest.mark.parametrize("kind, operands, message", [
    ("neg", "%a, %a", 'fusec.pointwise "neg": expected 1 operands, got 2'),
    ("add", "%a", 'fusec.pointwise "add": expected 2 operands, got 1'),
])
def test_wrong_operand_count_names_the_op_and_its_line(capsys, tmp_path, kind, operands, message):
    types = ", ".join(["!fusec.tensor<[4], f32>"] * (operands.count("%")))
    line = f'  %n = fusec.pointwise "{kind}" {operands} : ({types}) -> !fusec.tensor<[4], f32>'
    path = ir_file(tmp_path, SMALL.replace(NEG_LINE, line))
    assert error_of(capsys, path) == [f"fusec-opt: error: {path}:2:3: input IR does not verify: {message}", line, "  ^"]


def test_split_input_file_places_errors_in_the_whole_file(capsys, tmp_path):
    bad = SMALL.replace("[4]", "[s0]")
    path = ir_file(tmp_path, SMALL + "// -----\n" + bad)
    code = main([str(path), "--split-input-file"])
    _, err = capsys.readouterr()
    assert code == 1 and err.startswith(f"fusec-opt: error: {path}:6:1: input IR does not verify: fusec.graph: size symbol 's0'")


# ---------------------------------------------------------------- empty and binary input


def test_empty_file(capsys, tmp_path):
    path = ir_file(tmp_path, "\n  \n")
    assert error_of(capsys, path) == [f"fusec-opt: error: {path}: the input is empty (expected fusec IR, e.g. a fusec.graph)"]


def test_not_utf8(capsys, tmp_path):
    path = tmp_path / "bin.mlir"
    path.write_bytes(b"fusec\xff\xfe")
    assert error_of(capsys, path) == [f"fusec-opt: error: cannot read '{path}': not UTF-8 text (invalid start byte at byte 5)"]


def test_nul_byte(capsys, tmp_path):
    path = tmp_path / "bin.mlir"
    path.write_bytes(b"fusec.graph\n  @g\x00\x01")
    assert error_of(capsys, path) == [
        f"fusec-opt: error: cannot read '{path}': binary data (a NUL byte at line 2, column 5)"]


@pytest.mark.parametrize("data, message", [
    (b"", "<stdin>: the input is empty (expected fusec IR, e.g. a fusec.graph)"),
    (b"\xff\xfe\x00", "cannot read '<stdin>': not UTF-8 text (invalid start byte at byte 0)"),
])
def test_empty_and_binary_stdin_in_a_real_process(data, message):
    result = subprocess.run([sys.executable, "-m", "fusec.tools.fusec_opt"], input=data, capture_output=True, timeout=120)
    assert result.returncode == 1
    assert result.stdout == b""
    assert result.stderr.decode() == f"fusec-opt: error: {message}\n"


# ---------------------------------------------------------------- pipelines


def pipeline_file(tmp_path, text: str):
    path = tmp_path / "p.pipeline"
    path.write_text(text)
    return path


def test_pipeline_file_syntax_error_names_file_line_column(capsys, tmp_path):
    pipe = pipeline_file(tmp_path, "# fusion\nform-kernels\n  vertical-fusion{\n")
    assert error_of(capsys, ir_file(tmp_path, SMALL), "--pipeline-file", pipe) == [
        f"fusec-opt: error: {pipe}:3:19: invalid pipeline spec: Expected argument name here",
        "  vertical-fusion{",
        "                  ^",
    ]


def test_pipeline_file_error_after_a_comment_and_blank_lines(capsys, tmp_path):
    pipe = pipeline_file(tmp_path, "form-kernels,  # first\n\n  # then\n\tdce{=1}\n")
    assert error_of(capsys, ir_file(tmp_path, SMALL), "--pipeline-file", pipe)[0] == (
        f"fusec-opt: error: {pipe}:4:6: invalid pipeline spec: Expected argument name here")


@pytest.mark.parametrize("text, line, col, message", [
    ("form-kernels\n  vertical-fusio\n", 2, 3, "unknown pass 'vertical-fusio' (did you mean 'vertical-fusion' or 'reduction-fusion'?)"),
    ("test-tuned{\n  max-ops=4\n  max-opz=3\n}\n", 3, 3, "pass 'test-tuned' has no option 'max-opz' (did you mean 'max-ops'?)"),
    ("dce\ntest-tuned{max-ops=many}\n", 2, 12, "pass 'test-tuned': option 'max-ops' expects int, got many"),
])
def test_pipeline_file_pass_and_option_errors_name_file_line_column(capsys, tmp_path, text, line, col, message):
    pipe = pipeline_file(tmp_path, text)
    err = error_of(capsys, ir_file(tmp_path, SMALL), "--pipeline-file", pipe)
    assert err == [f"fusec-opt: error: {pipe}:{line}:{col}: {message}", text.splitlines()[line - 1], " " * (col - 1) + "^"]


@pytest.mark.parametrize("spec, col, message", [
    ("dce,test-tuned{", 15, "invalid pipeline spec: Expected argument name here"),
    ("dce,,dce", 4, "invalid pipeline spec: Expected pass name here"),
    ("dce,form-kernel", 4, "unknown pass 'form-kernel' (did you mean 'form-kernels'?)"),
    ("dce,test-tuned{max-op=1}", 15, "pass 'test-tuned' has no option 'max-op' (did you mean 'max-ops'?)"),
    ("dce,test-tuned{max-ops=1.5}", 15, "pass 'test-tuned': option 'max-ops' expects int, got 1.5"),
    ("dce{x=1}", 4, "pass 'dce' has no option 'x' (it takes no options)"),
])
def test_inline_spec_errors_point_into_the_spec(capsys, tmp_path, spec, col, message):
    err = error_of(capsys, ir_file(tmp_path, SMALL), "-p", spec)
    assert err == [f"fusec-opt: error: {message}", f"  {spec}", " " * (col + 2) + "^"]


# ---------------------------------------------------------------- output


def test_output_into_a_missing_folder(capsys, tmp_path):
    out = tmp_path / "no" / "out.mlir"
    assert error_of(capsys, ir_file(tmp_path, SMALL), "-o", out) == [
        f"fusec-opt: error: cannot write '{out}': No such file or directory"]


def test_output_onto_a_folder(capsys, tmp_path):
    assert error_of(capsys, ir_file(tmp_path, SMALL), "-o", tmp_path) == [f"fusec-opt: error: cannot write '{tmp_path}': Is a directory"]


def test_output_under_a_file(capsys, tmp_path):
    out = ir_file(tmp_path, SMALL) / "out.mlir"
    assert error_of(capsys, tmp_path / "in.mlir", "-o", out) == [f"fusec-opt: error: cannot write '{out}': Not a directory"]


# ---------------------------------------------------------------- failures inside passes


def test_pass_refusal_names_the_op_file_line_column(capsys, tmp_path):
    path = ir_file(tmp_path, SMALL)
    assert error_of(capsys, path, "-p", "dce,test-refuse-pointwise") == [
        f"fusec-opt: error: {path}:2:3: pass 'test-refuse-pointwise' failed: cannot handle neg",
        NEG_LINE,
        "  ^",
    ]


def test_pass_crash_names_the_pass_and_the_op(capsys, tmp_path):
    path = ir_file(tmp_path, SMALL)
    assert error_of(capsys, path, "-p", "test-crash-pointwise") == [
        f"fusec-opt: error: internal error (while running pass 'test-crash-pointwise' on 'fusec.pointwise' op ({path}:2:3)): "
        "KeyError: 'neg' (rerun with --traceback to see where)"]


def test_pass_crash_names_the_innermost_fusec_line(tmp_path):
    """A one-line crash report already says where in fusec it broke (the module, line and function)."""
    import re

    path = ir_file(tmp_path, SMALL)
    with pytest.raises(PassCrash) as info:
        main([str(path), "-p", "test-crash-inside-fusec", "--traceback"])
    assert re.search(r"UnknownDType: .* is not a fusec element type \(at fusec\.base\.dtypes:\d+ in of_ir\)", str(info.value))


def test_pass_crash_traceback_carries_the_context(tmp_path):
    path = ir_file(tmp_path, SMALL)
    with pytest.raises(PassCrash) as info:
        main([str(path), "-p", "test-crash-pointwise", "--traceback"])
    assert str(info.value) == (f"while running pass 'test-crash-pointwise' on 'fusec.pointwise' op ({path}:2:3): "
                               f"KeyError: 'neg'\n{NEG_LINE}\n  ^")
    assert isinstance(info.value.__cause__, KeyError)


def test_comment_only_input_is_empty(capsys, tmp_path):
    path = ir_file(tmp_path, "// RUN: nothing\n\n// else\n")
    assert error_of(capsys, path) == [f"fusec-opt: error: {path}: the input is empty (expected fusec IR, e.g. a fusec.graph)"]


def test_split_input_file_skips_a_trailing_marker(capsys, tmp_path):
    path = ir_file(tmp_path, SMALL + "// -----\n// nothing after the marker\n")
    assert main([str(path), "--split-input-file"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and out.count("fusec.graph @h") == 1 and "// -----" not in out


@pytest.mark.parametrize("data, message", [
    (b"dce\xff\n", "not UTF-8 text (invalid start byte at byte 3)"),
    (b"dce\n\x00", "binary data (a NUL byte at line 2, column 1)"),
])
def test_binary_pipeline_file(capsys, tmp_path, data, message):
    pipe = tmp_path / "p.pipeline"
    pipe.write_bytes(data)
    assert error_of(capsys, ir_file(tmp_path, SMALL), "--pipeline-file", pipe) == [
        f"fusec-opt: error: cannot read pipeline file '{pipe}': {message}"]


def test_a_lowering_refusal_names_the_op_file_line_column(capsys, tmp_path):
    path = ir_file(tmp_path, SMALL)  # no form-kernels: a graph-level op cannot be lowered
    assert error_of(capsys, path, "--emit", "triton") == [
        f"fusec-opt: error: {path}:2:3: triton emission failed: LoweringError: @h: fusec.pointwise cannot reach the launcher; "
        "run form-kernels first (after it a graph holds only kernels, combos, externs, views and its output)",
        NEG_LINE,
        "  ^",
    ]
