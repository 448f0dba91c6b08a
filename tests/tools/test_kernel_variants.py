"""bench/kernel_variants.py: one kernel of a dump at other launch configurations, against the reference interpreter."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

GRADIENT = """builtin.module {
  fusec.graph @g(%dy : !fusec.tensor<[600, 96], bf16>, %x : !fusec.tensor<[600, 96], bf16>) -> (!fusec.tensor<[96], f32>, !fusec.tensor<[600, 96], bf16>) {
    %p = fusec.pointwise "mul" %dy, %x : (!fusec.tensor<[600, 96], bf16>, !fusec.tensor<[600, 96], bf16>) -> !fusec.tensor<[600, 96], bf16>
    %f = fusec.pointwise "convert" %p : (!fusec.tensor<[600, 96], bf16>) -> !fusec.tensor<[600, 96], f32>
    %s = fusec.reduce "sum" %f dims [0] : !fusec.tensor<[600, 96], f32> -> !fusec.tensor<[96], f32>
    fusec.output %s, %p : !fusec.tensor<[96], f32>, !fusec.tensor<[600, 96], bf16>
  }
}"""


def test_each_configuration_is_checked_against_the_interpreter(tmp_path):
    (tmp_path / "in.mlir").write_text(GRADIENT)
    pipeline = "form-kernels,vertical-fusion,reduction-fusion,schedule-kernels{persistent-threshold=0}"
    ir = subprocess.run([sys.executable, "-m", "fusec.tools.fusec_opt", str(tmp_path / "in.mlir"), "-p", pipeline],
                        capture_output=True, text=True, check=True).stdout
    (tmp_path / "final.mlir").write_text(ir)
    (name,) = re.findall(r"fusec\.kernel @(\w+)", ir)
    assert "warps = 2" in ir  # a column sum storing bf16 per element
    run = subprocess.run([sys.executable, str(ROOT / "bench/kernel_variants.py"), str(tmp_path / "final.mlir"), name,
                          "--configs", "32x16x4,16x64x1"], capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ, "TRITON_INTERPRET": "1"})
    assert run.returncode == 0, run.stdout + run.stderr
    rows = re.findall(rf"^\| {name} \| (\S+) \| (\d+) \| (\d+) \| (\d+) \| (yes|NO) ", run.stdout, re.M)
    assert rows == [("heuristic", "16", "32", "2", "yes"), ("32x16x4", "32", "16", "4", "yes"),
                    ("16x64x1", "16", "64", "1", "yes")], run.stdout


def test_an_unknown_kernel_or_a_bad_configuration_is_one_clear_message(tmp_path):
    (tmp_path / "in.mlir").write_text(GRADIENT)
    ir = subprocess.run([sys.executable, "-m", "fusec.tools.fusec_opt", str(tmp_path / "in.mlir"), "-p",
                         "form-kernels,vertical-fusion,reduction-fusion,schedule-kernels"],
                        capture_output=True, text=True, check=True).stdout
    (tmp_path / "final.mlir").write_text(ir)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    run = subprocess.run([sys.executable, str(ROOT / "bench/kernel_variants.py"), str(tmp_path / "final.mlir"), "nope"],
                         capture_output=True, text=True, env=env)
    assert run.returncode != 0 and "no kernel nope in" in run.stderr and "Traceback" not in run.stderr
    (name,) = re.findall(r"fusec\.kernel @(\w+)", ir)
    run = subprocess.run([sys.executable, str(ROOT / "bench/kernel_variants.py"), str(tmp_path / "final.mlir"), name,
                          "--configs", "64x8"], capture_output=True, text=True, env=env)
    assert run.returncode != 0 and "is XBLOCKxRBLOCKxWARPS" in run.stderr and "Traceback" not in run.stderr


def test_a_kernel_over_symbolic_sizes_is_refused_with_one_message(tmp_path):
    text = GRADIENT.replace("600", "s0").replace(") {\n    %p", ") symbols(s0 in [1, inf]) {\n    %p")
    (tmp_path / "in.mlir").write_text(text)
    ir = subprocess.run([sys.executable, "-m", "fusec.tools.fusec_opt", str(tmp_path / "in.mlir"), "-p",
                         "form-kernels,vertical-fusion,reduction-fusion,schedule-kernels"],
                        capture_output=True, text=True, check=True).stdout
    (tmp_path / "final.mlir").write_text(ir)
    (name,) = re.findall(r"fusec\.kernel @(\w+)", ir)
    run = subprocess.run([sys.executable, str(ROOT / "bench/kernel_variants.py"), str(tmp_path / "final.mlir"), name],
                         capture_output=True, text=True, env={**os.environ, "TRITON_INTERPRET": "1"})
    assert run.returncode != 0 and "has symbolic sizes [96, s0]" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr, run.stderr
