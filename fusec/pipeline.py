"""Pass pipelines: parse a spec (xDSL syntax ``a,b{opt=1}``), run it, dump and print the IR between passes.

``fusec-opt`` and the backend both go through ``run_pipeline``, so a backend run
can be replayed with ``fusec-opt -p "<spec>"`` and gives the same dumps.
Every problem the user can cause is a ``PipelineError`` with one clear message.
"""

from __future__ import annotations

import bisect
import dataclasses
import difflib
import importlib
import linecache
import re
import sys
import time
import traceback
import types
import typing
from collections.abc import Sequence
from io import StringIO
from pathlib import Path
from typing import IO

from xdsl.context import Context
from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr, UnknownLoc
from xdsl.ir import Operation, SSAValue
from xdsl.parser import Parser
from xdsl.passes import ModulePass, PassPipeline
from xdsl.printer import Printer
from xdsl.utils.arg_spec import ArgSpec, PipelineLexer, SpecTokenKind, parse_pipeline
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException, MultipleSpansParseError, ParseError
from xdsl.utils.hints import isa, type_repr

from fusec.analysis import timing
from fusec.base import env, origins, remarks
from fusec.base.progress import Progress
from fusec.dialects import fusec as F
from fusec.registry import PASSES, PassFactory, pass_summary

# Passes may time kernels (combo-grouping{benchmark=true}, autotune-matmuls); they reach the runtime only through
# this seam.
timing.register_group_timer(lambda: importlib.import_module("fusec.runtime.combo_benchmark").time_separate_and_combo)
timing.register_kernel_timer(lambda: importlib.import_module("fusec.runtime.kernel_timer").time_schedules)

DEFAULT_PIPELINE_FILE = Path(__file__).parent / "pipelines" / "default.pipeline"


class PipelineError(Exception):
    """A problem with a pipeline, its options or the IR it runs on, worded for the user."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


# ---------------------------------------------------------------- IR text


def module_text(module: ModuleOp) -> str:
    """The text fusec-opt prints and dumps (parsing it back gives the same text)."""
    out = StringIO()
    Printer(stream=out).print_op(module)
    out.write("\n")
    return out.getvalue()


def parse_module(ctx: Context, text: str, name: str = "<input>") -> ModuleOp:
    """Parse IR text; errors become ``name:line:col: message`` with the line and a caret.

    Ops without a ``loc(...)`` of their own get the place of their text, so later errors can point at it.
    """
    if is_blank_ir(text):
        raise PipelineError(f"{name}: the input is empty (expected fusec IR, e.g. a fusec.graph)")
    linecache.cache[name] = (len(text), None, text.splitlines(True), name)  # for the excerpts of later errors
    parser = _LocatingParser(ctx, text, name)
    try:
        return parser.parse_module()
    except ParseError as e:
        raise PipelineError(_parse_error_text(_clearer(parser, e))) from e
    except Exception as e:  # e.g. a type's verifier rejecting its parameters while parsing
        raise PipelineError(_parse_error_text(_located_at_current_token(parser, str(e)))) from e


def is_blank_ir(text: str) -> bool:
    """Whether ``text`` holds nothing but white space and ``//`` comments."""
    return not re.sub(r"//[^\n]*", "", text).strip()


def decode_text(name: str, data: bytes) -> str:
    """``data`` as text; binary data (not UTF-8, or holding a NUL byte) is one PipelineError saying where."""
    try:
        text = data.decode()
    except UnicodeDecodeError as e:
        raise PipelineError(f"cannot read '{name}': not UTF-8 text ({e.reason} at byte {e.start})") from None
    if "\0" in text:
        at = text.index("\0")
        line, col = text.count("\n", 0, at) + 1, at - text.rfind("\n", 0, at)
        raise PipelineError(f"cannot read '{name}': binary data (a NUL byte at line {line}, column {col})")
    return text.replace("\r\n", "\n")


class _LocatingParser(Parser):
    """xDSL's parser, giving each op it parses the file position of its first token."""

    def parse_operation(self) -> Operation:
        start = self.pos
        op = super().parse_operation()
        if isinstance(op.location, UnknownLoc):
            line, col = self.line_col(start)
            op.location = FileLineColLoc(StringAttr(self.lexer.input.name), IntAttr(line), IntAttr(col))
        return op

    def line_col(self, pos: int) -> tuple[int, int]:
        if not hasattr(self, "line_starts"):
            content = self.lexer.input.content
            self.line_starts = [0] + [m.end() for m in re.finditer("\n", content)]
        line = bisect.bisect_right(self.line_starts, pos)
        return line, pos - self.line_starts[line - 1] + 1


_UNREGISTERED = re.compile(r"Operation (\S+) is not registered")


def _clearer(parser: Parser, e: ParseError) -> ParseError:
    """xDSL's message made plainer where it is terse: an unknown op points at its name (xDSL points at the token
    after it); a file ending inside a region says so (xDSL: " in block definition")."""
    content = parser.lexer.input.content
    unknown = _UNREGISTERED.match(e.msg)
    if unknown:
        name = unknown.group(1)
        start = content.rfind(name, 0, e.span.start)
        if start >= 0:
            return _error_at(parser, f"unknown operation '{name}'", start, start + len(name))
    if e.span.start >= len(content.rstrip()) and e.msg.strip() == "in block definition":
        return _error_at(parser, "unexpected end of input: expected '}' to close the region", e.span.start, e.span.end)
    return e


def _error_at(parser: Parser, message: str, start: int, end: int) -> ParseError:
    try:
        parser.raise_error(message, at_position=start, end_position=end)
    except ParseError as e:
        return e
    raise AssertionError("raise_error returns only by raising")


def _located_at_current_token(parser: Parser, message: str) -> ParseError:
    """``message`` as a ParseError at the token the parser stopped on (xDSL's ``raise_error`` locates it)."""
    try:
        parser.raise_error(message)
    except ParseError as e:
        return e


def _parse_error_text(e: ParseError) -> str:
    def located(span, msg: str) -> str:
        context = span.print_with_context().splitlines()[1:]  # its first line is the location
        return f"{span.get_location()}: {msg}\n" + "".join(f"{line}\n" for line in context)

    text = located(e.span, e.msg)
    if isinstance(e, MultipleSpansParseError):
        text += e.ref_text + "\n" if e.ref_text else ""
        text += "".join(located(span, msg or "here") for span, msg in e.refs)
    return text.rstrip("\n")


def verify_module(module: ModuleOp, what: str = "IR") -> None:
    """Verify ``module``; a failure names the op that fails and ``what`` was checked ("IR after pass 'dce'")."""
    try:
        module.verify()
        return
    except Exception as e:  # verifiers of broken IR can fail in any way; all are verification errors
        error = e
    op, message = _failing_op(module, error)
    if op is not None and not message.startswith(op.name):
        message = f"'{op.name}' op: {message}"
    raise PipelineError(message_at(op, f"{what} does not verify: {message}")) from error


def message_at(op: Operation | None, message: str) -> str:
    """``message`` placed at ``op``: ``file:line:col: message`` and the line for IR parsed from a file; the FX node
    and the user's source line for IR imported from torch; the op's text otherwise.  The place goes under the
    message's first line, before any further lines it has (remarks, notes)."""
    if op is None:
        return message
    first, _, rest = message.partition("\n")
    where = origins.located(op)
    loc = origins.location_of(op)
    excerpt = origins.source_excerpt(loc)
    if where is not None and isinstance(loc, FileLineColLoc):  # IR parsed from a file: its line as it is, as xDSL shows parse errors
        inside = "" if where is op else f"\n  in: {_op_summary(where)}"
        body = excerpt if where is op and excerpt else f"  at: {_op_summary(op)}"
        lines = [f"{origins.location_text(loc)}: {first}", body + inside]
    else:
        lines = [first, f"  at: {_op_summary(op)}"]
        if where is not None:  # imported from torch: the FX node and the user's line
            inside = "" if where is op else f" (through '{where.name}' op)"
            lines += [f"  from {origins.location_text(loc)}{inside}"] + ([excerpt] if excerpt else [])
    return "\n".join(lines + ([rest] if rest else []))


def _failing_op(module: ModuleOp, error: Exception) -> tuple[Operation | None, str]:
    """The innermost op whose own verifier fails, preferring the one that raised ``error``."""
    failing: list[tuple[Operation, str]] = []
    for op in module.walk():
        try:
            op.verify(verify_nested_ops=False)
        except Exception as e:
            failing.append((op, str(e)))
    for op, message in failing:
        if message == str(error):
            return op, message
    return (failing[-1] if failing else (None, str(error) or type(error).__name__))


def _op_summary(op: Operation) -> str:
    try:
        out = StringIO()
        Printer(stream=out).print_op(op)
        first = out.getvalue().splitlines()[0].strip()
    except Exception:  # an op broken enough may not print
        return op.name
    return first if len(first) <= 200 else first[:197] + "..."


# ---------------------------------------------------------------- specs


def read_pipeline_file(path: str | Path) -> PipelineText:
    """A pipeline file's spec: ``#`` starts a comment, lines are joined (with commas between passes).

    The spec remembers where each of its characters was in the file, so errors name the file, line and column.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise PipelineError(f"cannot read pipeline file '{path}': {e.strerror or e}") from e
    try:
        text = decode_text(str(path), data)
    except PipelineError as e:
        raise PipelineError(e.message.replace("cannot read '", "cannot read pipeline file '", 1)) from None
    spec, pieces = _join_lines_with_places(text)
    return PipelineText(spec, str(path), tuple(text.splitlines()), pieces)


class PipelineText(str):
    """A spec joined from a pipeline file's lines; ``place(offset)`` is the (line, column) of a spec character."""

    path: str
    lines: tuple[str, ...]
    pieces: tuple[tuple[int, int, int], ...]  # (offset in the spec, line, column) where each file line's text starts

    def __new__(cls, spec: str, path: str, lines: tuple[str, ...], pieces: tuple[tuple[int, int, int], ...]):
        self = super().__new__(cls, spec)
        self.path, self.lines, self.pieces = path, lines, pieces
        return self

    def place(self, offset: int) -> tuple[int, int]:
        if not self.pieces:
            return 1, 1
        i = max(bisect.bisect_right([p[0] for p in self.pieces], offset) - 1, 0)
        start, line, col = self.pieces[i]
        end = self.pieces[i + 1][0] if i + 1 < len(self.pieces) else len(self)
        # A separator joined in before the next line, or the end of the spec, is placed just after this line's text.
        return line, col + min(offset, end) - start


def join_pipeline_lines(text: str) -> str:
    """Strip ``#`` comments and join lines: with a comma between passes, a space between options."""
    return _join_lines_with_places(text)[0]


def _join_lines_with_places(text: str) -> tuple[str, tuple[tuple[int, int, int], ...]]:
    spec, pieces = "", []
    for number, raw in enumerate(text.splitlines(), 1):
        line = _strip_comment(raw).strip()
        if not line:
            continue
        if not spec or spec.endswith((",", "{")) or line.startswith((",", "}")):
            sep = ""
        else:
            sep = " " if _brace_depth(spec) > 0 else ","
        spec += sep
        pieces.append((len(spec), number, len(raw) - len(raw.lstrip()) + 1))
        spec += line
    return spec.removesuffix(","), tuple(pieces)  # a trailing comma after the last pass is harmless in a file


def _point_into(spec: str, offset: int, message: str) -> str:
    """``message`` with the place ``offset`` of ``spec`` shown: the file's line for a pipeline file, else the spec."""
    if isinstance(spec, PipelineText):
        line, col = spec.place(offset)
        shown = spec.lines[line - 1] if 0 < line <= len(spec.lines) else ""
        return f"{spec.path}:{line}:{col}: {message}\n{shown}\n{' ' * (col - 1)}^"
    return f"{message}\n  {spec}\n  {' ' * offset}^"


def _spec_places(spec: str) -> list[tuple[int, dict[str, int]]]:
    """Per pass of a well-formed spec: the offset of its name and of each option name (xDSL's own lexer)."""
    places: list[tuple[int, dict[str, int]]] = []
    lexer, depth, expect_name = PipelineLexer(spec), 0, True
    while (token := lexer.lex()).kind is not SpecTokenKind.EOF:
        kind = token.kind
        if kind is SpecTokenKind.IDENT and expect_name:
            if depth == 0:
                places.append((token.span.start, {}))
            elif places:
                places[-1][1].setdefault(token.span.text, token.span.start)
        depth += (kind is SpecTokenKind.L_BRACE) - (kind is SpecTokenKind.R_BRACE)
        expect_name = kind in (SpecTokenKind.COMMA, SpecTokenKind.L_BRACE, SpecTokenKind.SPACE) if depth else \
            kind is SpecTokenKind.COMMA
    return places


def _strip_comment(line: str) -> str:
    quoted = False
    for i, ch in enumerate(line):
        if ch == '"' and (i == 0 or line[i - 1] != "\\"):
            quoted = not quoted
        elif ch == "#" and not quoted:
            return line[:i]
    return line


def _brace_depth(spec: str) -> int:
    unquoted = re.sub(r'"(\\.|[^"\\])*"', "", spec)
    return unquoted.count("{") - unquoted.count("}")


def default_pipeline_spec() -> str:
    return read_pipeline_file(DEFAULT_PIPELINE_FILE)


def parse_pipeline_spec(spec: str, available: dict[str, PassFactory] | None = None) -> tuple[ModulePass, ...]:
    """The passes of ``spec``, options checked: a syntax error, an unknown pass and a bad option are PipelineErrors
    that point into the spec (into the file, for a spec read by ``read_pipeline_file``)."""
    available = PASSES if available is None else available
    try:
        arg_specs = list(parse_pipeline(spec))
    except ArgSpecParseError as e:  # a BaseException in xDSL, so it must be named
        offset, message = _syntax_error(e)
        raise PipelineError(_point_into(spec, offset, f"invalid pipeline spec: {message}")) from None
    places = _spec_places(spec)
    passes = []
    for arg_spec, (at, option_at) in zip(arg_specs, places, strict=True):
        try:
            check_pass_name(arg_spec.name, available)
            passes.append(_instantiate(load_pass(arg_spec.name, available), arg_spec))
        except PipelineError as e:
            offset = option_at.get(e.option, at) if isinstance(e, OptionError) else at
            raise PipelineError(_point_into(spec, offset, e.message)) from e.__cause__
    return tuple(passes)


def load_pass(name: str, available: dict[str, PassFactory] | None = None) -> type[ModulePass]:
    """The pass class registered as ``name``; a pass file that fails to import is a PipelineError."""
    available = PASSES if available is None else available
    check_pass_name(name, available)
    try:
        return available[name]()
    except Exception as e:  # a pass module being edited, or missing a dependency
        raise PipelineError(f"pass '{name}' cannot be loaded: {type(e).__name__}: {e}") from e


def check_pass_name(name: str, available: dict[str, PassFactory] | None = None) -> None:
    available = PASSES if available is None else available
    if name not in available:
        close = difflib.get_close_matches(name, available, n=3, cutoff=0.6)
        hint = f"did you mean {_quoted(close, 'or')}?" if close else f"available passes: {', '.join(available)}"
        raise PipelineError(f"unknown pass '{name}' ({hint})")


def _syntax_error(e: ArgSpecParseError) -> tuple[int, str]:
    """(offset in the spec, message) of xDSL's error: its text is a title, ``pass-pipeline:1:col``, the spec,
    a caret line, the message."""
    lines = str(e).splitlines()
    found = re.search(r":1:(\d+)$", lines[1]) if len(lines) >= 5 else None
    if found is None:
        return 0, str(e)
    return int(found.group(1)) - 1, lines[4].strip()


class OptionError(PipelineError):
    """A bad option of a pass: ``option`` is its name as written in the spec."""

    def __init__(self, message: str, option: str):
        super().__init__(message)
        self.option = option


def _quoted(names: Sequence[str], conj: str = "and") -> str:
    quoted = [f"'{n}'" for n in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} {conj} {quoted[-1]}"


def pass_options(cls: type[ModulePass]) -> list[tuple[str, str, str | None]]:
    """(option name as written in specs, type, default text or None when required) of a pass."""
    hints = typing.get_type_hints(cls)
    options = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        if f.default is not dataclasses.MISSING:
            default = _value_text(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            default = _value_text(f.default_factory())
        else:
            default = None
        options.append((f.name.replace("_", "-"), type_repr(hints.get(f.name, f.type)), default))
    return options


def _value_text(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return ",".join(_value_text(v) for v in value) if value else "(empty)"
    if isinstance(value, str):
        return f'"{value}"'
    return "none" if value is None else str(value)


def _option_fits(values: tuple, hint) -> bool:
    """Whether an option's values convert to its field's type, by the rule of xDSL's ``ArgSpecConvertible.from_spec``:
    no value for an optional field, one value of the type, or a tuple of the type."""
    if not values and typing.get_origin(hint) in (typing.Union, types.UnionType):
        return type(None) in typing.get_args(hint)
    return (len(values) == 1 and isa(values[0], hint)) or isa(values, hint)


def _widened(values: tuple, hint) -> tuple:
    """An option's integer values as floats where its field takes floats and not ints (``max-recompute=0``: the
    spec parser reads ``0`` as an int)."""
    if isa(1, hint) or not (isa(1.0, hint) or isa((1.0,), hint)):
        return values
    return tuple(float(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in values)


def _instantiate(cls: type[ModulePass], spec: ArgSpec) -> ModulePass:
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    hints = typing.get_type_hints(cls)
    parameters = {}
    for key, value in spec.parameters.items():
        field = key.replace("-", "_")
        if field not in fields:
            names = [n.replace("_", "-") for n in fields]
            close = difflib.get_close_matches(key.replace("_", "-"), names, n=3, cutoff=0.6)
            hint = (f"did you mean {_quoted(close, 'or')}?" if close else
                    f"its options are {_quoted(names)}" if names else "it takes no options")
            raise OptionError(f"pass '{spec.name}' has no option '{key}' ({hint})", key)
        value = parameters[key] = _widened(tuple(value), hints[field])
        if not _option_fits(value, hints[field]):
            given = ",".join(map(str, value)) if value else "(no value)"
            raise OptionError(f"pass '{spec.name}': option '{key}' expects {type_repr(hints[field])}, got {given}", key)
    try:
        return cls.from_spec(ArgSpec(spec.name, parameters))
    except (ValueError, TypeError) as e:  # a required option missing, or the pass's own __post_init__ check
        msg = str(e)
        missing = re.match(r'.* requires argument "(\w+)"', msg)
        if missing:
            msg = f"option '{missing.group(1).replace('_', '-')}' is required"
        raise PipelineError(f"pass '{spec.name}': {msg}") from None


def pipeline_spec_text(passes: Sequence[ModulePass]) -> str:
    """The spec that rebuilds ``passes`` (for replaying a backend run with fusec-opt -p)."""
    return ",".join(str(p) for p in passes)


# ---------------------------------------------------------------- running


def run_pipeline(
    ctx: Context,
    module: ModuleOp,
    spec: str | Sequence[ModulePass],
    *,
    dump_dir: str | Path | None = None,
    print_before_all: bool = False,
    print_after_all: bool = False,
    print_after: Sequence[str] = (),
    print_after_change: bool = False,
    out: IO[str] | None = None,
    verify_each: bool | None = None,
    time_passes: bool = False,
) -> remarks.RemarkLog:
    """Run ``spec`` on ``module`` in place, checking the IR after every pass; returns the remarks passes emitted.

    ``dump_dir`` receives ``00-input.mlir``, ``01-<pass>.mlir``, ... and ``remarks.txt``/``remarks.json``,
    and ``timings.txt`` (seconds per pass).  Printed IR goes to ``out`` (stderr by default, like mlir-opt)
    under MLIR's header lines.  ``print_after_change`` prints after the selected passes (all, without
    ``print_after_all`` or ``print_after``) only where the pass changed the IR.
    ``verify_each``: every op's verifier after every pass (None: ``$FUSEC_VERIFY_EACH``, set by the tests);
    otherwise the input and the result are verified in full and the IR between passes only structurally
    (``check_structure``).  ``time_passes`` writes per-pass times to ``out`` after the run.
    """
    passes = parse_pipeline_spec(spec) if isinstance(spec, str) else tuple(spec)
    for name in print_after:
        check_pass_name(name)
    out = sys.stderr if out is None else out
    dumps = _Dumps(Path(dump_dir)) if dump_dir is not None else None
    select_all_after = print_after_all or (print_after_change and not print_after)
    wants_text = dumps is not None or print_before_all or select_all_after or bool(print_after)

    state: dict = {"step": 0, "text": None, "running": None}
    clock = PassClock(Progress(", ".join(graph_names(module)) or "module"))

    def show(when: str, name: str, text: str) -> None:
        out.write(f"// -----// IR Dump {when} {name} //----- //\n{text}\n")

    def callback(previous: ModulePass | None, module: ModuleOp, upcoming: ModulePass | None) -> None:
        clock.stop(previous)
        before = state["text"]
        check_between_passes(module, previous, upcoming, verify_each)
        text = module_text(module) if wants_text else ""  # no dump or print reads it then
        if previous is None:
            if dumps:
                dumps.write(0, "input", text)
        else:
            state["step"] += 1
            if dumps:
                dumps.write(state["step"], previous.name, text)
            selected = select_all_after or previous.name in print_after
            if selected and not (print_after_change and text == before):
                show("After", previous.name, text)
        if upcoming is not None and print_before_all:
            show("Before", upcoming.name, text)
        state["text"], state["running"] = text, upcoming
        clock.start(upcoming)

    with remarks.collect() as log:
        try:
            PassPipeline(passes, callback).apply(ctx, module)
        except DiagnosticException as e:  # a pass refusing the IR it was given
            raise _pass_failure(state["running"], e) from e
        except PipelineError:
            raise
        except Exception as e:  # a bug in a pass: say which one and where; the traceback stays on the cause
            if state["running"] is None:
                raise
            raise PassCrash(state["running"].name, origins.op_in_flight(e.__traceback__), e) from e
        else:
            log.settle({f"@{op.sym_name.data}" for op in module.walk() if isinstance(op, (F.GraphOp, F.KernelOp, F.ComboOp))})
        finally:
            if dumps:
                dumps.write_remarks(log)
                dumps.write_timings(clock.text())
    clock.report(out if time_passes else None)
    return log


def _pass_failure(running: ModulePass | None, e: Exception) -> PipelineError:
    """A pass's refusal as one message placed at the op it was handling (its FX node and source line)."""
    name = running.name if running is not None else "?"
    return PipelineError(message_at(origins.op_in_flight(e.__traceback__), f"pass '{name}' failed: {e}"))


class PassCrash(Exception):
    """A bug inside a pass (not a problem with the input): the pass, the op it was handling with its FX node and
    source line, and the original error (also the ``__cause__``, with its traceback)."""

    def __init__(self, pass_name: str, op: Operation | None, error: Exception):
        self.context = f"while running pass '{pass_name}'" + (f" on {origins.describe(op)}" if op is not None else "")
        self.error = error
        excerpt = origins.source_excerpt(origins.location_of(op))
        where = _innermost_fusec_frame(error.__traceback__)
        super().__init__(f"{self.context}: {type(error).__name__}: {error}" + (f" (at {where})" if where else "")
                         + (f"\n{excerpt}" if excerpt else ""))


def _innermost_fusec_frame(tb) -> str | None:
    """``fusec.passes.x:12 in f``: where in fusec a crash happened, so a one-line report already points at the bug."""
    where = None
    for frame, line in traceback.walk_tb(tb):
        module = frame.f_globals.get("__name__", "")
        if module.startswith("fusec.") and module != __name__:  # the driver's own frames say nothing
            where = f"{module}:{line} in {frame.f_code.co_name}"
    return where


def graph_names(module: ModuleOp) -> list[str]:
    return [op.sym_name.data for op in module.ops if isinstance(op, F.GraphOp)]


class PassClock:
    """Seconds each pass ran (checks, dumps and printing between passes excluded), and progress lines."""

    def __init__(self, progress: Progress):
        self.progress = progress
        self.times: list[tuple[str, float]] = []
        self._started = time.perf_counter()

    def start(self, upcoming: ModulePass | None) -> None:
        if upcoming is not None:
            self.progress.step("pass %s", upcoming.name)
        self._started = time.perf_counter()

    def stop(self, previous: ModulePass | None) -> None:
        if previous is not None:
            self.times.append((previous.name, time.perf_counter() - self._started))

    def report(self, out: IO[str] | None) -> None:
        if out is not None:
            out.write(self.text())

    def text(self) -> str:
        """xDSL's ``--time-passes`` lines, then the total."""
        lines = [f"Pass {name} took {seconds:.6f} seconds\n" for name, seconds in self.times]
        return "".join(lines) + f"Total: {sum(t for _, t in self.times):.6f} seconds in {len(self.times)} passes\n"


def check_between_passes(module: ModuleOp, previous: ModulePass | None, upcoming: ModulePass | None,
                         verify_each: bool | None) -> None:
    """Every verifier on the input, the result and (``verify_each``, None: ``$FUSEC_VERIFY_EACH``) between
    passes; else the structural check."""
    what = "input IR" if previous is None else f"IR after pass '{previous.name}'"
    if previous is not None:  # also where verifiers run: they do not see a dropped op's dangling uses
        check_structure(module, what)
    if previous is None or (env.verify_each() if verify_each is None else verify_each):
        verify_module(module, what)
    elif upcoming is None:
        verify_result(module, what)


def verify_result(module: ModuleOp, what: str) -> None:
    """The full verification of a pipeline's result when passes were only checked structurally."""
    try:
        verify_module(module, what)
    except PipelineError as e:
        raise PipelineError(f"{e.message}\n  (an earlier pass may have broken it: rerun with --verify-each, "
                            "or FUSEC_VERIFY_EACH=1, to find which)") from e


def check_structure(module: ModuleOp, what: str = "IR") -> None:
    """The cheap check between passes: every operand is defined before its use, in a block that encloses it,
    and every use of a value belongs to an op still in the module.

    The mistakes a pass makes most (an op moved before its producer, a use of an erased op's result, an op built
    and dropped without erasing it, whose uses then count as readers) cost a walk with set lookups here, against
    every op's verifier in ``verify_module``.
    """
    defined: set[SSAValue] = set()
    present: set[int] = {id(op) for op in module.walk()}

    def check_uses(values, op: Operation) -> None:
        for value in values:
            for use in value.uses:
                if id(use.operation) not in present:
                    raise PipelineError(f"{what} is broken: a value of '{op.name}' is used by a "
                                        f"'{use.operation.name}' that is not in the module (built and "
                                        f"dropped without erasing it?)\n  at: {_op_summary(op)}")

    def walk_block(block) -> None:
        check_uses(block.args, block.parent_op())
        added = list(block.args)
        defined.update(added)
        for op in block.ops:
            for v in op.operands:
                if v not in defined:
                    raise PipelineError(f"{what} is broken: '{op.name}' uses a value that is not defined before it "
                                        f"in an enclosing block\n  at: {_op_summary(op)}")
            for region in op.regions:
                for inner in region.blocks:
                    walk_block(inner)
            check_uses(op.results, op)
            defined.update(op.results)
            added.extend(op.results)
        defined.difference_update(added)

    for region in module.regions:
        for block in region.blocks:
            walk_block(block)


@dataclasses.dataclass
class _Dumps:
    """The dump folder: one numbered .mlir per step, then the remarks."""

    folder: Path

    def __post_init__(self) -> None:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise PipelineError(f"cannot create dump folder '{self.folder}': {e.strerror or e}") from e
        # Stale dumps of a longer earlier run would read as steps of this one.
        for old in self.folder.iterdir():
            if re.fullmatch(r"\d{2,}-.+\.mlir", old.name) or old.name in ("remarks.txt", "remarks.json", "timings.txt"):
                old.unlink()

    def write(self, step: int, name: str, text: str) -> None:
        self._write(f"{step:02d}-{name}.mlir", text)

    def write_timings(self, text: str) -> None:
        self._write("timings.txt", text)

    def write_remarks(self, log: remarks.RemarkLog) -> None:
        self._write("remarks.txt", log.text())
        self._write("remarks.json", log.json() + "\n")

    def _write(self, name: str, text: str) -> None:
        try:
            (self.folder / name).write_text(text)
        except OSError as e:
            raise PipelineError(f"cannot write '{self.folder / name}': {e.strerror or e}") from e


def list_passes(available: dict[str, PassFactory] | None = None) -> str:
    """Every pass with its one-line description and its options (type and default)."""
    available = PASSES if available is None else available
    lines = []
    for name in available:
        try:
            cls = load_pass(name, available)
        except PipelineError as e:
            lines.append(f"{name}\n    ({e.message})")
            continue
        lines.append(f"{name}\n    {pass_summary(name, cls)}")
        for option, type_text, default in pass_options(cls):
            lines.append(f"    {option}: {type_text}" + (f" = {default}" if default is not None else " (required)"))
    return "\n".join(lines) + "\n"

