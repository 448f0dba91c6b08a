"""fusec-opt: parse fusec IR, run a pass pipeline on it, print the result (like mlir-opt).

    fusec-opt in.mlir -p form-kernels,canonicalize --print-ir-after-all
    fusec-opt in.mlir --pipeline-file fusec/pipelines/default.pipeline --dump-dir dump/ --remarks
    fusec-opt in.mlir --default-pipeline --emit triton

With no pipeline, the input is parsed, verified and printed back.  IR printed
between passes goes to stderr (as in mlir-opt), so stdout stays parseable.
Every error is one ``fusec-opt: error: ...`` message on stderr and exit code 1.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path

import click

from fusec.base import origins
from fusec.pipeline import (
    DEFAULT_PIPELINE_FILE,
    PassCrash,
    PipelineError,
    check_pass_name,
    decode_text,
    is_blank_ir,
    list_passes,
    message_at,
    module_text,
    parse_module,
    parse_pipeline_spec,
    read_pipeline_file,
    run_pipeline,
)
from fusec.registry import make_context

SPLIT_MARKER = "// -----"


class CommandError(Exception):
    """An error that ends the whole run (bad flags, unreadable input)."""


@click.command(name="fusec-opt", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("input_file", metavar="[FILE|-]", default="-")
@click.option("-p", "--pipeline", "pipeline", metavar="SPEC", help="Passes to run, e.g. 'form-kernels,canonicalize'.")
@click.option("--pipeline-file", metavar="FILE", help="Read the pipeline from FILE ('#' comments, one pass per line).")
@click.option("--default-pipeline", is_flag=True, help=f"Run the shipped pipeline ({DEFAULT_PIPELINE_FILE.name}).")
@click.option("-o", "--output", metavar="FILE", help="Write the result to FILE instead of stdout.")
@click.option("--print-ir-before-all", is_flag=True, help="Print the IR before every pass (to stderr).")
@click.option("--print-ir-after-all", is_flag=True, help="Print the IR after every pass (to stderr).")
@click.option("--print-ir-after", "print_ir_after", metavar="PASS", multiple=True, help="Print the IR after PASS (repeatable).")
@click.option("--print-ir-after-change", is_flag=True, help="Print the IR after a pass only where the pass changed it.")
@click.option("--dump-dir", metavar="DIR", help="Write 00-input.mlir, 01-<pass>.mlir, ... and remarks.txt/json into DIR.")
@click.option("--split-input-file", is_flag=True, help=f"Process each '{SPLIT_MARKER}' chunk on its own.")
@click.option("--list-passes", "show_passes", is_flag=True, help="List every pass with its options and exit.")
@click.option("--emit", type=click.Choice(["mlir", "triton"]), default="mlir", show_default=True, help="Output format.")
@click.option("--remarks", "show_remarks", is_flag=True, help="Print the passes' remarks to stderr after the run.")
@click.option("--verify-each/--no-verify-each", default=None,
              help="Run every op's verifier after every pass (default: $FUSEC_VERIFY_EACH; else a cheap check between passes).")
@click.option("--time-passes", is_flag=True, help="Print each pass's time to stderr after the run.")
@click.option("--traceback", "show_traceback", is_flag=True, help="On an internal error, show the Python traceback.")
def cli(input_file: str, pipeline: str | None, pipeline_file: str | None, default_pipeline: bool, output: str | None,
        print_ir_before_all: bool, print_ir_after_all: bool, print_ir_after: tuple[str, ...], print_ir_after_change: bool,
        dump_dir: str | None, split_input_file: bool, show_passes: bool, emit: str, show_remarks: bool,
        verify_each: bool | None, time_passes: bool, show_traceback: bool) -> int:
    """Run fusec passes on an IR file (FILE, or stdin when FILE is '-' or absent)."""
    if show_passes:
        click.echo(list_passes(), nl=False)
        return 0
    spec = _pipeline_spec(pipeline, pipeline_file, default_pipeline)
    passes = parse_pipeline_spec(spec)
    for name in print_ir_after:
        check_pass_name(name)
    emitter = _triton_emitter() if emit == "triton" else module_text
    name, text = _read_input(input_file)

    chunks = _split(text) if split_input_file else [text]
    outputs: list[str] = []
    failed = False
    for i, chunk in enumerate(chunks):
        chunk_dump = None if dump_dir is None else (Path(dump_dir) / f"chunk-{i}" if split_input_file else Path(dump_dir))
        try:
            outputs.append(_process(name, chunk, passes, chunk_dump, emitter, show_remarks, dict(
                print_before_all=print_ir_before_all, print_after_all=print_ir_after_all,
                print_after=print_ir_after, print_after_change=print_ir_after_change,
                verify_each=verify_each, time_passes=time_passes)))
        except PipelineError as e:  # this chunk failed; the others still run, as in mlir-opt
            _report(e.message if e.message.startswith(f"{name}:") else f"{name}: {e.message}")
            failed = True
    _write_output(output, f"{SPLIT_MARKER}\n".join(outputs))
    return 1 if failed else 0


def _pipeline_spec(pipeline: str | None, pipeline_file: str | None, default_pipeline: bool) -> str:
    given = [flag for flag, value in (("-p", pipeline), ("--pipeline-file", pipeline_file),
                                      ("--default-pipeline", default_pipeline)) if value]
    if len(given) > 1:
        raise CommandError(f"{' and '.join(given)} cannot be used together: give the pipeline once")
    if pipeline_file is not None:
        return read_pipeline_file(pipeline_file)
    if default_pipeline:
        return read_pipeline_file(DEFAULT_PIPELINE_FILE)
    return pipeline or ""


def _triton_emitter():
    """fusec.lowering.emit.emit_module_source, or a clean error while the lowering does not exist."""
    try:
        found = importlib.util.find_spec("fusec.lowering.emit") is not None
    except ImportError:
        found = False
    emit = getattr(importlib.import_module("fusec.lowering.emit"), "emit_module_source", None) if found else None
    if emit is None:
        raise CommandError("triton emission is not available yet")
    return emit


def _read_input(input_file: str) -> tuple[str, str]:
    if input_file == "-":
        return "<stdin>", decode_text("<stdin>", sys.stdin.buffer.read())
    try:
        return input_file, decode_text(input_file, Path(input_file).read_bytes())
    except FileNotFoundError:
        raise CommandError(f"cannot read '{input_file}': no such file") from None
    except IsADirectoryError:
        raise CommandError(f"cannot read '{input_file}': it is a directory") from None
    except OSError as e:
        raise CommandError(f"cannot read '{input_file}': {e.strerror or e}") from None


def _split(text: str) -> list[str]:
    """Chunks at MLIR's `// -----` lines, each padded with the newlines before it so errors keep their line numbers."""
    chunks, line = [], 0
    for chunk in text.split(SPLIT_MARKER):
        chunks.append("\n" * line + chunk)
        line += chunk.count("\n")
    # A chunk of only comments (a trailing marker, a file's header) is no input of its own.
    return [c for c in chunks if not is_blank_ir(c)] or chunks[:1]


def _process(name: str, text: str, passes, dump_dir: Path | None, emitter, show_remarks: bool, printing: dict) -> str:
    ctx = make_context()
    module = parse_module(ctx, text, name)
    log = run_pipeline(ctx, module, passes, dump_dir=dump_dir, out=sys.stderr, **printing)
    if show_remarks:
        sys.stderr.write(log.text())
    try:
        return emitter(module)
    except PipelineError:
        raise
    except Exception as e:  # the emitter refusing IR it cannot lower is the user's input, not a crash
        if emitter is module_text:
            raise
        op = origins.op_in_flight(e.__traceback__)
        raise PipelineError(message_at(op, f"triton emission failed: {type(e).__name__}: {e}")) from e


def _write_output(output: str | None, text: str) -> None:
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        Path(output).write_text(text)
    except OSError as e:
        raise CommandError(f"cannot write '{output}': {e.strerror or e}") from None


def _report(message: str) -> None:
    sys.stderr.write(f"fusec-opt: error: {message}\n")
    sys.stderr.flush()


def _internal_error_text(e: Exception) -> str:
    """A bug, not the user's input: one line with what was running, where, and the error."""
    where = f" ({e.context})" if isinstance(e, PassCrash) else ""
    error = e.error if isinstance(e, PassCrash) else e
    return f"internal error{where}: {type(error).__name__}: {error} (rerun with --traceback to see where)"


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point: returns the exit code (0, or 1 after an error message)."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        result = cli.main(args, prog_name="fusec-opt", standalone_mode=False)
    except click.exceptions.Exit as e:  # --help
        return e.exit_code
    except click.exceptions.Abort:
        _report("interrupted")
        return 1
    except click.ClickException as e:  # unknown flag, missing flag value, bad --emit choice
        _report(e.format_message())
        return 1
    except (CommandError, PipelineError) as e:
        _report(e.message if isinstance(e, PipelineError) else str(e))
        return 1
    except Exception as e:
        if "--traceback" in args:
            raise
        _report(_internal_error_text(e))
        return 1
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
