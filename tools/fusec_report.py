"""fusec-report: one self-contained HTML page showing what each compiled graph of a dump folder became.

    fusec-report fusec_dump/                      # writes fusec_dump/report.html (every graph in the folder)
    fusec-report fusec_dump/forward_0_0 -o fw.html
    fusec-report fusec_dump/ --profile prof.json  # each kernel's device time, the slowest shaded red

A dump folder is what ``torch.compile(..., backend="fusec", options={"dump_dir": DIR})``
(or ``FUSEC_DUMP_DIR=DIR``) writes: one sub-folder per graph.  A profile is JSON:
``{"kernels": [{"name": "fusec_poi_add_3", "graph": "forward_0_0", "device_time_us": 4.2}]}``
(``graph`` optional).  Every error is one ``fusec-report: error: ...`` line and exit code 1.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import click

from fusec.report import ReportError, write_report
from fusec.report.picture import dot_binary


@click.command(name="fusec-report", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("dump_dir", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Write the page here (default: DUMP_DIR/report.html).")
@click.option("--profile", type=click.Path(path_type=Path), help="A JSON profile with per-kernel device times.")
def cli(dump_dir: Path, output: Path | None, profile: Path | None) -> None:
    written = write_report(dump_dir, output, profile)
    if dot_binary() is None:
        click.echo("fusec-report: note: Graphviz's 'dot' was not found; the page lists kernels instead of a picture", err=True)
    click.echo(str(written))


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point: returns the exit code (0, or 1 after one error line)."""
    try:
        cli.main(list(sys.argv[1:] if argv is None else argv), prog_name="fusec-report", standalone_mode=False)
    except click.exceptions.Exit as e:  # --help
        return e.exit_code
    except click.ClickException as e:
        click.echo(f"fusec-report: error: {e.format_message()}", err=True)
        return 1
    except ReportError as e:
        click.echo(f"fusec-report: error: {e}", err=True)
        return 1
    except OSError as e:
        click.echo(f"fusec-report: error: {e.filename or ''}: {e.strerror or e}", err=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
