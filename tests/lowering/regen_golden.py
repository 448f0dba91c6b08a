"""Regenerates the golden Triton sources under tests/lowering/golden/ (reviewers read the diff).

    python tests/lowering/regen_golden.py

test_golden.py compares the lowering's output with these files; only this script writes them.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from kernel_cases import LOOPED, PERSISTENT, kernel_module  # noqa: E402

from fusec.dialects import fusec as F  # noqa: E402
from fusec.lowering.combo_kernel import lower_combo  # noqa: E402
from fusec.lowering.launcher import lower_graph  # noqa: E402
from fusec.lowering.triton_kernel import lower_kernel  # noqa: E402
from fusec.testing import parse  # noqa: E402

GOLDEN = Path(__file__).parent / "golden"

_ROW = "!fusec.tensor<[s0, 512], f32>"
SOFTMAX = kernel_module("fusec_red_max_sum_0", "s0, 512", [_ROW], [_ROW], f"""      %v = fusec.load %in0[512*x + r] : {_ROW}
      %m = fusec.reduce_r "max" %v : f32 -> f32
      %d = fusec.pointwise "sub" %v, %m : (f32, f32) -> f32
      %e = fusec.pointwise "exp" %d : (f32) -> f32
      %s = fusec.reduce_r "sum" %e : f32 -> f32
      %y = fusec.pointwise "div" %e, %s : (f32, f32) -> f32
      fusec.store %y, %out0[512*x + r] : {_ROW}""", "s0 in [1, 1000000]")

# x.t() + y as tile-pointwise makes it: [XBLOCK, RBLOCK] tiles, x read down its columns.
TRANSPOSE_ADD = kernel_module(
    "fusec_poi_add_0", "s1, s0", ["!fusec.tensor<[s0, s1], f32>", "!fusec.tensor<[s1, s0], f32>"], ["!fusec.tensor<[s1, s0], f32>"],
    """      %a = fusec.load %in0[r*s1 + x] : !fusec.tensor<[s0, s1], f32>
      %b = fusec.load %in1[r + x*s0] : !fusec.tensor<[s1, s0], f32>
      %s = fusec.pointwise "add" %a, %b : (f32, f32) -> f32
      fusec.store %s, %out0[r + x*s0] : !fusec.tensor<[s1, s0], f32>""",
    "s0 in [1, 100000], s1 in [1, 100000]").replace("[s1, s0] (", "[s1, s0] tiled (")

# A combo of a pointwise convert and a persistent argmax, sizes unbounded: int64 indices, so each
# member re-binds its size arguments (a local copy in its branch).
_H, _A = "!fusec.tensor<[s0], f16>", "!fusec.tensor<[s0, 512], f32>"
COMBO = f"""builtin.module {{
  fusec.graph @g(%h : {_H}, %a : {_A}) -> (!fusec.tensor<[s0], f32>, !fusec.tensor<[s0], i64>) symbols(s0 in [1, inf]) {{
    %c:2 = fusec.combo @fusec_combo_0 : (!fusec.tensor<[s0], f32>, !fusec.tensor<[s0], i64>) {{
      %p = fusec.kernel @fusec_poi_convert_1 [s0] (%h) : ({_H}) -> (!fusec.tensor<[s0], f32>) {{
      ^bb0(%in : {_H}, %out : !fusec.tensor<[s0], f32>):
        %v = fusec.load %in[x] : {_H}
        %f = fusec.pointwise "convert" %v : (f16) -> f32
        fusec.store %f, %out[x] : !fusec.tensor<[s0], f32>
      }}
      %m = fusec.kernel @fusec_red_argmax_2 [s0, 512] (%a) : ({_A}) -> (!fusec.tensor<[s0], i64>) {{
      ^bb0(%in : {_A}, %out : !fusec.tensor<[s0], i64>):
        %v = fusec.load %in[r + 512*x] : {_A}
        %i = fusec.reduce_r "argmax" %v : f32 -> i64
        fusec.store %i, %out[x] : !fusec.tensor<[s0], i64>
      }}
      fusec.output %p, %m : !fusec.tensor<[s0], f32>, !fusec.tensor<[s0], i64>
    }}
    fusec.output %c#0, %c#1 : !fusec.tensor<[s0], f32>, !fusec.tensor<[s0], i64>
  }}
}}"""

# file name -> what it holds
CASES = {
    "softmax_persistent.py": lambda: _kernel_source(SOFTMAX, PERSISTENT),
    "softmax_looped.py": lambda: _kernel_source(SOFTMAX, LOOPED),
    "softmax_launcher.py": lambda: lower_graph(_graph(SOFTMAX), {"s0": 64}).source,
    "transpose_add_tiled.py": lambda: _kernel_source(TRANSPOSE_ADD, PERSISTENT),
    "transpose_add_tiled_launcher.py": lambda: lower_graph(_graph(TRANSPOSE_ADD), {"s0": 64, "s1": 64}).source,
    "combo_convert_argmax.py": lambda: _combo_source(COMBO),
    "combo_convert_argmax_launcher.py": lambda: lower_graph(_graph(COMBO), {"s0": 64}).source,
}


def _graph(text: str) -> F.GraphOp:
    return next(op for op in parse(text).walk() if isinstance(op, F.GraphOp))


def _kernel_source(text: str, options) -> str:
    kernel = next(op for op in parse(text).walk() if isinstance(op, F.KernelOp))
    return lower_kernel(kernel, {"s0": 64}, options=options).source


def _combo_source(text: str) -> str:
    combo = next(op for op in parse(text).walk() if isinstance(op, F.ComboOp))
    return lower_combo(combo, {"s0": 64}).source


def main() -> None:
    GOLDEN.mkdir(exist_ok=True)
    for name, render in CASES.items():
        (GOLDEN / name).write_text(render())
        print(f"wrote {GOLDEN / name}")


if __name__ == "__main__":
    main()
