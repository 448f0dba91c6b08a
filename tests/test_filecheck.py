"""Runs the lit/FileCheck tests under tests/filecheck (one pytest test; lit's output shows on failure)."""

import subprocess
import sys
from pathlib import Path

FILECHECK_DIR = Path(__file__).parent / "filecheck"

# lit ships no `python -m lit`; run its console-script entry point with this Python.
RUN_LIT = "import sys, lit.main; sys.argv[0] = 'lit'; lit.main.main()"


def test_filecheck_suite():
    result = subprocess.run([sys.executable, "-c", RUN_LIT, "-v", str(FILECHECK_DIR)],
                            capture_output=True, text=True, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"lit failed (exit {result.returncode}):\n{output}"
    assert "Passed:" in output, f"lit ran no test:\n{output}"
