"""emit_module_source: the whole generated text of a module (what fusec-opt --emit triton prints)."""

import subprocess
import sys

from test_end_to_end import GRAPHS

from fusec.lowering.emit import emit_module_source
from fusec.passes.form_kernels import FormKernels
from fusec.testing import apply_passes, parse


def test_every_kernel_then_the_launcher():
    module = apply_passes(parse(GRAPHS["extern-and-views"]), FormKernels())
    text = emit_module_source(module)
    relu, tanh, launcher = text.index("def fusec_poi_relu_0("), text.index("def fusec_poi_tanh_1("), text.index("def call(inputs):")
    assert relu < tanh < launcher
    assert "# _aten_mm_default = torch.ops.aten.mm.default" in text
    compile(text, "<emitted>", "exec")  # the whole text is valid Python


def test_fusec_opt_emits_triton(tmp_path):
    path = tmp_path / "softmax.mlir"
    path.write_text(GRAPHS["softmax"])
    out = subprocess.run([sys.executable, "-m", "fusec.tools.fusec_opt", str(path), "-p", "form-kernels", "--emit", "triton"],
                         capture_output=True, text=True, check=True).stdout
    assert "@triton.jit" in out and "def call(inputs):" in out and "def fusec_per_max_0(" in out
