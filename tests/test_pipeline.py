"""fusec.pipeline: spec parsing, pipeline files, and run_pipeline's dumps, printing and checks."""

from dataclasses import dataclass
from io import StringIO

import pytest
from xdsl.passes import ModulePass
from xdsl.transforms.dead_code_elimination import DeadCodeElimination

from fusec.base import remarks
from fusec.pipeline import (
    DEFAULT_PIPELINE_FILE,
    PipelineError,
    default_pipeline_spec,
    join_pipeline_lines,
    module_text,
    parse_module,
    parse_pipeline_spec,
    pipeline_spec_text,
    read_pipeline_file,
    run_pipeline,
)
from fusec.registry import PASSES, make_context

GRAPH = """fusec.graph @g(%a : !fusec.tensor<[s0], f32>) -> (!fusec.tensor<[s0], f32>) symbols(s0 in [1, inf]) {
  %n = fusec.pointwise "neg" %a : (!fusec.tensor<[s0], f32>) -> !fusec.tensor<[s0], f32>
  fusec.output %n : !fusec.tensor<[s0], f32>
}
"""


@dataclass(frozen=True)
class Tuned(ModulePass):
    """A test pass with options; emits one remark."""

    name = "test-tuned"
    max_ops: int = 8
    sizes: tuple[int, ...] = (1, 2)

    def apply(self, ctx, op) -> None:
        remarks.emit(self.name, "limit", f"max-ops={self.max_ops}")


@pytest.fixture(autouse=True)
def tuned(monkeypatch):
    monkeypatch.setitem(PASSES, Tuned.name, lambda: Tuned)


@pytest.mark.parametrize("text, spec", [
    ("a\nb\n", "a,b"),
    ("a,\nb,\n", "a,b"),
    ("# only a comment\n\n a # trailing\n", "a"),
    ("a{x=1\n  y=2}\nb", "a{x=1 y=2},b"),
    ("a{\nx=1\n}", "a{x=1}"),
    ('a{s="#not a comment"} # but this is', 'a{s="#not a comment"}'),
    ("a{xs=1,\n2}", "a{xs=1,2}"),
])
def test_join_pipeline_lines(text, spec):
    assert join_pipeline_lines(text) == spec


def test_default_pipeline_file_is_shipped_and_valid():
    assert DEFAULT_PIPELINE_FILE.is_file()
    spec = default_pipeline_spec()
    # channels-last, attention-layouts, merge-matmuls, pad-matmuls, bias-epilogues, activation-epilogues,
    # embedding-gradients and sink-gathers on the graph's ops, then form-kernels: the baseline fusion starts from
    assert spec.split(",")[:9] == ["channels-last", "attention-layouts", "merge-matmuls", "pad-matmuls", "bias-epilogues",
                                   "activation-epilogues", "embedding-gradients", "sink-gathers",
                                   "form-kernels"]
    assert spec.endswith("canonicalize,dce,schedule-kernels,autotune-matmuls,mutate-in-place,reuse-buffers")
    assert [p.name for p in parse_pipeline_spec(spec)] == [p.split("{")[0] for p in spec.split(",")]


def test_options_parse_and_print_back():
    [p] = parse_pipeline_spec("test-tuned{max-ops=3 sizes=4,5}")
    assert p == Tuned(max_ops=3, sizes=(4, 5))
    assert parse_pipeline_spec(pipeline_spec_text([p, DeadCodeElimination()])) == (p, DeadCodeElimination())


def test_a_float_option_takes_an_integer_and_an_int_option_no_float():
    [p] = parse_pipeline_spec("vertical-fusion{max-recompute=0}")  # the spec parser reads 0 as an int
    assert p.max_recompute == 0.0 and isinstance(p.max_recompute, float)
    with pytest.raises(PipelineError, match=r"option 'max-ops' expects int, got 1.5"):
        parse_pipeline_spec("vertical-fusion{max-ops=1.5}")


def test_bad_tuple_option_value():
    with pytest.raises(PipelineError, match=r"option 'sizes' expects tuple\[int, \.\.\.\], got a,b"):
        parse_pipeline_spec("test-tuned{sizes=a,b}")


def test_run_pipeline_returns_remarks_and_prints_to_out():
    ctx = make_context()
    module = parse_module(ctx, GRAPH)
    out = StringIO()
    log = run_pipeline(ctx, module, "test-tuned{max-ops=3},form-kernels", print_after=["form-kernels"], out=out)
    assert [str(r) for r in log.remarks] == ["remark: test-tuned: limit: max-ops=3"]
    assert out.getvalue() == f"// -----// IR Dump After form-kernels //----- //\n{module_text(module)}\n"


def test_run_pipeline_accepts_pass_instances(tmp_path):
    ctx = make_context()
    module = parse_module(ctx, GRAPH)
    run_pipeline(ctx, module, [Tuned(max_ops=1), DeadCodeElimination()], dump_dir=tmp_path)
    assert sorted(p.name for p in tmp_path.glob("*.mlir")) == ["00-input.mlir", "01-test-tuned.mlir", "02-dce.mlir"]
    assert (tmp_path / "remarks.txt").read_text() == "remark: test-tuned: limit: max-ops=1\n"


def test_invalid_input_is_reported_before_any_pass():
    ctx = make_context()
    module = parse_module(ctx, GRAPH.replace("symbols(s0 in [1, inf]) ", ""))
    with pytest.raises(PipelineError, match=r"^<input>:1:1: input IR does not verify: fusec.graph: size symbol 's0'"):
        run_pipeline(ctx, module, "dce")


def test_parse_module_error_is_located():
    with pytest.raises(PipelineError, match=r"^in.mlir:2:\d+: "):
        parse_module(make_context(), GRAPH.replace('"neg" %a', '"neg" %a %a'), "in.mlir")


def test_a_type_rejected_while_parsing_is_located():
    # Not a ParseError: the tensor type's verifier raises while the parser builds it.
    text = GRAPH.replace("-> !fusec.tensor<[s0], f32>\n", "-> !fusec.tensor<[s0], index>\n", 1)
    assert text != GRAPH
    with pytest.raises(PipelineError, match=r"^in.mlir:3:\d+: fusec.tensor: index is not an element type\n.*\n +\^+$"):
        parse_module(make_context(), text, "in.mlir")


def test_a_pass_that_fails_to_load_is_a_clean_error(monkeypatch):
    def broken():
        raise SyntaxError("invalid syntax (vertical_fusion.py, line 3)")

    monkeypatch.setitem(PASSES, "test-broken", broken)
    with pytest.raises(PipelineError, match=r"^pass 'test-broken' cannot be loaded: SyntaxError: invalid syntax"):
        parse_pipeline_spec("dce,test-broken")
    from fusec.pipeline import list_passes

    assert "test-broken\n    (pass 'test-broken' cannot be loaded: SyntaxError" in list_passes()


# ---------------------------------------------------------------- where errors point


def test_a_pipeline_file_spec_knows_where_each_character_was(tmp_path):
    path = tmp_path / "p.pipeline"
    path.write_text("# header\n\n  a{x=1   # why\n    y=2}\n\tb,\nc\n")
    spec = read_pipeline_file(path)
    assert spec == "a{x=1 y=2},b,c" and spec.path == str(path)
    assert [spec.place(spec.index(ch)) for ch in "axybc"] == [(3, 3), (3, 5), (4, 5), (5, 2), (6, 1)]
    assert spec.place(spec.index(" ")) == (3, 8)  # the space joined in for a line break: the end of the line before
    assert spec.place(len(spec)) == (6, 2)  # the end of the spec: after its last character


def test_parsed_ops_carry_their_place_and_keep_a_loc_of_their_own():
    text = GRAPH.replace("-> !fusec.tensor<[s0], f32>\n", '-> !fusec.tensor<[s0], f32> loc("model.py":12:9)\n', 1)
    module = parse_module(make_context(), text, "in.mlir")
    graph = module.body.block.first_op
    neg, output = list(graph.body.block.ops)
    assert (graph.location.filename.data, graph.location.line.data, graph.location.column.data) == ("in.mlir", 1, 1)
    assert (neg.location.filename.data, neg.location.line.data, neg.location.column.data) == ("model.py", 12, 9)
    assert (output.location.line.data, output.location.column.data) == (3, 3)


def test_a_pass_refusal_names_the_fx_node_of_an_imported_op():
    """An op the importer made carries loc("mul_3"("model.py":12:9)): a refusal names the node and its line."""
    from xdsl.dialects.builtin import FileLineColLoc, IntAttr, NameLoc, StringAttr
    from xdsl.utils.exceptions import PassFailedException

    from fusec.dialects import fusec as F

    @dataclass(frozen=True)
    class Refuse(ModulePass):
        name = "test-refuse"

        def apply(self, ctx, op) -> None:
            for neg in op.walk():
                if isinstance(neg, F.PointwiseOp):
                    raise PassFailedException("no")

    ctx = make_context()
    module = parse_module(ctx, GRAPH)
    neg = next(op for op in module.walk() if isinstance(op, F.PointwiseOp))
    neg.location = NameLoc(StringAttr("neg_1"), FileLineColLoc(StringAttr("/no/such/model.py"), IntAttr(12), IntAttr(9)))
    with pytest.raises(PipelineError) as info:
        run_pipeline(ctx, module, [Refuse()])
    assert info.value.message == (
        "pass 'test-refuse' failed: no\n"
        '  at: %n = fusec.pointwise "neg" %a : (!fusec.tensor<[s0], f32>) -> !fusec.tensor<[s0], f32>\n'
        "  from FX node 'neg_1' at /no/such/model.py:12:9")


# ---------------------------------------------------------------- verification, timings, progress

TWO = """fusec.graph @g(%a : !fusec.tensor<[s0], f32>) -> (!fusec.tensor<[s0], f32>) symbols(s0 in [1, inf]) {
  %n = fusec.pointwise "neg" %a : (!fusec.tensor<[s0], f32>) -> !fusec.tensor<[s0], f32>
  %m = fusec.pointwise "mul" %n, %a : (!fusec.tensor<[s0], f32>, !fusec.tensor<[s0], f32>) -> !fusec.tensor<[s0], f32>
  fusec.output %m : !fusec.tensor<[s0], f32>
}
"""


@dataclass(frozen=True)
class Misorder(ModulePass):
    """Moves the graph's last computing op to the front: its operand is then used before it is defined."""

    name = "test-misorder"

    def apply(self, ctx, op) -> None:
        from fusec.dialects import fusec as F

        graph = F.find_graph(op)
        ops = list(graph.block.ops)
        last = ops[-2]
        last.detach()
        graph.block.insert_op_before(last, ops[0])


@dataclass(frozen=True)
class DropOperand(ModulePass):
    """Leaves IR whose structure holds but whose verifier fails: a binary op loses an operand."""

    name = "test-drop-operand"

    def apply(self, ctx, op) -> None:
        from fusec.dialects import fusec as F

        for p in op.walk():
            if isinstance(p, F.PointwiseOp) and len(p.inputs) == 2:
                p.operands = [p.inputs[0]]
                return


def test_the_structural_check_catches_a_use_before_its_definition():
    module = parse_module(make_context(), TWO)
    with pytest.raises(PipelineError, match=r"IR after pass 'test-misorder' is broken: 'fusec.pointwise' uses a value"):
        run_pipeline(make_context(), module, [Misorder(), DeadCodeElimination()], verify_each=False)


def test_without_verify_each_the_result_is_still_verified_in_full():
    spec = [DropOperand(), DeadCodeElimination()]
    module = parse_module(make_context(), TWO)
    with pytest.raises(PipelineError, match=r"(?s)^<input>:3:3: IR after pass 'dce' does not verify.*rerun with --verify-each"):
        run_pipeline(make_context(), module, spec, verify_each=False)
    module = parse_module(make_context(), TWO)
    with pytest.raises(PipelineError, match=r"^<input>:3:3: IR after pass 'test-drop-operand' does not verify"):
        run_pipeline(make_context(), module, spec, verify_each=True)


def test_verify_each_defaults_to_the_environment(monkeypatch):
    spec = [DropOperand(), DeadCodeElimination()]
    for value, culprit in (("1", "test-drop-operand"), ("", "dce")):
        monkeypatch.setenv("FUSEC_VERIFY_EACH", value)
        with pytest.raises(PipelineError, match=f"^<input>:3:3: IR after pass '{culprit}' does not verify"):
            run_pipeline(make_context(), parse_module(make_context(), TWO), spec)


def test_time_passes_prints_xdsl_lines_and_dumps_timings(tmp_path):
    out = StringIO()
    module = parse_module(make_context(), TWO)
    run_pipeline(make_context(), module, "form-kernels,dce", out=out, time_passes=True, dump_dir=tmp_path)
    lines = out.getvalue().splitlines()
    assert [line.split(" took ")[0] for line in lines[:2]] == ["Pass form-kernels", "Pass dce"]
    assert all(line.endswith(" seconds") and float(line.split()[3]) >= 0 for line in lines[:2])
    assert lines[2].startswith("Total: ") and lines[2].endswith(" seconds in 2 passes")
    assert (tmp_path / "timings.txt").read_text() == out.getvalue()


def test_a_slow_compile_logs_its_passes_at_info(caplog, monkeypatch):
    import logging

    from fusec.base import progress

    module = parse_module(make_context(), TWO)
    with caplog.at_level(logging.INFO, logger="fusec"):
        run_pipeline(make_context(), module, "form-kernels,dce")
    assert not caplog.records  # a fast compile says nothing at INFO
    monkeypatch.setattr(progress, "SLOW_AFTER_S", 0.0)
    module = parse_module(make_context(), TWO)
    with caplog.at_level(logging.INFO, logger="fusec"):
        run_pipeline(make_context(), module, "form-kernels,dce")
    messages = [r.getMessage() for r in caplog.records if r.name == "fusec.compile"]
    assert [m.split(": ", 1)[1] for m in messages] == ["pass form-kernels", "pass dce"]
    assert all(m.startswith("g [") for m in messages)
