"""Runs the lit/FileCheck tests under tests/filecheck, one pytest test per file (lit's output shows on failure),
so that pytest-xdist spreads them over its workers."""

import subprocess
import sys
from pathlib import Path

import pytest

FILECHECK_DIR = Path(__file__).parent / "filecheck"
FILES = sorted(p.relative_to(FILECHECK_DIR).as_posix() for p in FILECHECK_DIR.rglob("*.mlir")
               if not {"Output", "Inputs"} & set(p.relative_to(FILECHECK_DIR).parts))

# lit ships no `python -m lit`; run its console-script entry point with this Python.
RUN_LIT = "import sys, lit.main; sys.argv[0] = 'lit'; lit.main.main()"


def test_the_suite_has_files():
    assert len(FILES) > 40, FILES


@pytest.mark.parametrize("name", FILES)
def test_filecheck(name):
    result = subprocess.run([sys.executable, "-c", RUN_LIT, "-v", str(FILECHECK_DIR / name)],
                            capture_output=True, text=True, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"lit failed (exit {result.returncode}):\n{output}"
    assert "Passed: 1 " in output, f"lit ran no test:\n{output}"
