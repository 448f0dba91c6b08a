"""Runs the lit/FileCheck tests under tests/filecheck (lit's output shows on failure): one pytest test per file
under pytest-xdist, so that its workers share them; else one lit run of the whole folder, on lit's own workers
(52 lit processes one after another would take twice as long)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

FILECHECK_DIR = Path(__file__).parent / "filecheck"
FILES = sorted(p.relative_to(FILECHECK_DIR).as_posix() for p in FILECHECK_DIR.rglob("*.mlir")
               if not {"Output", "Inputs"} & set(p.relative_to(FILECHECK_DIR).parts))
UNDER_XDIST = bool(os.environ.get("PYTEST_XDIST_WORKER"))  # every worker collects the same tests

# lit ships no `python -m lit`; run its console-script entry point with this Python.
RUN_LIT = "import sys, lit.main; sys.argv[0] = 'lit'; lit.main.main()"


def test_the_suite_has_files():
    assert len(FILES) > 40, FILES


@pytest.mark.parametrize("name", FILES if UNDER_XDIST else ["."])
def test_filecheck(name):
    result = subprocess.run([sys.executable, "-c", RUN_LIT, "-v", str(FILECHECK_DIR / name)],
                            capture_output=True, text=True, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"lit failed (exit {result.returncode}):\n{output}"
    passed = f"Passed: {1 if UNDER_XDIST else len(FILES)} "
    assert passed in output, f"lit did not pass every test ({passed!r} expected):\n{output}"
