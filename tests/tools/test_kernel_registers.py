"""bench/kernel_registers.py: ptxas's registers of a dump's kernels, compiled for sm_90 on the CPU."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_it_reports_ptxas_registers_beside_the_estimate(tmp_path):
    pytest.importorskip("triton.backends.nvidia")
    ir = subprocess.run([sys.executable, "-m", "fusec.tools.fusec_opt", str(ROOT / "tests/filecheck/schedule_kernels/per-thread.mlir"),
                         "-p", "form-kernels,vertical-fusion,tile-pointwise,schedule-kernels"],
                        capture_output=True, text=True, check=True).stdout
    (tmp_path / "final.mlir").write_text(ir)
    out = subprocess.run([sys.executable, str(ROOT / "bench/kernel_registers.py"), str(tmp_path / "final.mlir")],
                         capture_output=True, text=True, check=True, cwd=tmp_path).stdout
    rows = dict(re.findall(r"^(\S+)\s+estimate .* ptxas +(\d+) registers", out, re.M))
    assert set(rows) == {n for n in re.findall(r"fusec\.kernel @(\w+)", ir)}, out
    assert all(16 <= int(r) <= 255 for r in rows.values()), out
    assert "per_thread 8" in out  # the heavy tiled kernel runs under its limit
