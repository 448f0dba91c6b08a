"""fusec in torch's logs: artifacts in TORCH_TRACE (what tlparse reads) and remarks under TORCH_LOGS="+fusec"."""

import json
import logging
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch

# A matmul feeding a pointwise kernel: one kernel, one torch call, an extern-producer remark.
PROGRAM = textwrap.dedent("""
    import torch
    def f(a, b, c):
        return (torch.mm(a, b) + c).relu()  # the bias add has a kernel to fuse into: mm stays an mm
    torch.manual_seed(0)
    a, b, c = torch.randn(4, 8), torch.randn(8, 6), torch.randn(6)
    torch.testing.assert_close(torch.compile(f, backend="fusec")(a, b, c), f(a, b, c), rtol=1e-5, atol=1e-5)
    print("compiled")
""")



@pytest.fixture(autouse=True)
def _no_torch_logs(monkeypatch):
    monkeypatch.delenv("TORCH_LOGS", raising=False)
    monkeypatch.delenv("TORCH_TRACE", raising=False)


def run(env: dict[str, str]) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-c", PROGRAM], env={**os.environ, **env}, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0 and "compiled" in done.stdout, done.stderr[-3000:]
    return done


def artifacts(trace_dir) -> dict[str, str]:
    """name -> payload of every structured-trace artifact in the folder's logs."""
    found = {}
    for path in trace_dir.glob("*.log"):
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            if line.startswith("\t") or "{" not in line:
                continue
            record = json.loads(line[line.index("{"):])
            if "artifact" in record:
                payload = []
                for following in lines[i + 1:]:
                    if not following.startswith("\t"):
                        break
                    payload.append(following[1:])
                found[record["artifact"]["name"]] = "\n".join(payload)
    return found


def tlparse() -> str | None:
    """The tlparse binary: on PATH, or beside this Python (pip installs it there)."""
    return shutil.which("tlparse", path=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]))


def test_remarks_are_quiet_unless_asked():
    from fusec.report import trace

    assert trace.remarks_log.name.startswith("fusec.")  # under "fusec": TORCH_LOGS="+fusec" enables it
    assert not trace.remarks_log.isEnabledFor(logging.DEBUG)
    assert torch._logging._internal.log_registry.is_artifact(trace.REMARKS_ARTIFACT)


@pytest.mark.slow  # starts Python, torch and a compile (~15 s)
def test_torch_trace_and_torch_logs(tmp_path):
    """One compile with both: the trace holds fusec's artifacts, stderr shows the remarks."""
    trace = tmp_path / "trace"
    done = run({"TORCH_TRACE": str(trace), "TORCH_LOGS": "+fusec"})
    assert "fusec: graph inference_0_0: remark: vertical-fusion: extern-producer" in done.stderr
    found = artifacts(trace)
    graph = "inference_0_0"
    assert "aten.mm.default" in found[f"fusec_imported_ir_{graph}"] and "loc(" in found[f"fusec_imported_ir_{graph}"]
    assert "fusec.kernel @" in found[f"fusec_final_ir_{graph}"]
    assert "extern-producer" in found[f"fusec_remarks_{graph}"]
    assert "def call(inputs)" in found[f"fusec_launcher_{graph}"]
    kernels = [name for name in found if name.startswith("fusec_kernel_")]
    assert kernels and all("@triton.jit" in found[name] for name in kernels)
    if tlparse():  # tlparse lists the artifacts under the compile that made them
        out = tmp_path / "tl"
        (log,) = trace.glob("*.log")
        subprocess.run([tlparse(), str(log), "-o", str(out), "--no-browser", "--overwrite"], check=True,
                       capture_output=True, timeout=120)
        written = {p.name for p in out.rglob("*")}
        assert any(n.startswith(f"fusec_final_ir_{graph}") for n in written), sorted(written)
