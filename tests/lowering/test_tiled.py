"""Tiled pointwise kernels ([XBLOCK, RBLOCK] tiles on a 1-D grid) under Triton's interpreter,
against the reference interpreter and torch eager; static and symbolic sizes, ragged edges."""

import importlib

import pytest
import torch
from kernel_cases import compile_for_hopper, compile_text, kernel_module, only_kernel, randn

from fusec.analysis import heuristics
from fusec.dialects import fusec as F
from fusec.lowering.launcher import lower_graph
from fusec.lowering.triton_kernel import lower_kernel
from fusec.passes.combo_grouping import ComboGrouping
from fusec.passes.form_kernels import FormKernels
from fusec.passes.schedule_kernels import ScheduleKernels
from fusec.passes.tile_pointwise import TilePointwise
from fusec.runtime import compile_module, interpreter
from fusec.testing import apply_passes, assert_same_results, parse, random_inputs

# x.t() + y, written as the tiled kernel tile-pointwise makes of it: x read down its columns.
TRANSPOSE_ADD = kernel_module(
    "fusec_poi_add_0", "s1, s0", ["!fusec.tensor<[s0, s1], f32>", "!fusec.tensor<[s1, s0], f32>"],
    ["!fusec.tensor<[s1, s0], f32>"],
    """      %a = fusec.load %in0[r*s1 + x] : !fusec.tensor<[s0, s1], f32>
      %b = fusec.load %in1[r + x*s0] : !fusec.tensor<[s1, s0], f32>
      %s = fusec.pointwise "add" %a, %b : (f32, f32) -> f32
      fusec.store %s, %out0[r + x*s0] : !fusec.tensor<[s1, s0], f32>""",
    "s0 in [1, inf], s1 in [1, inf]").replace("[s1, s0] (", "[s1, s0] tiled (")

# x * w[None, :] + b[:, None] into fp16: a row vector, a column vector, a rounding store.
BROADCAST = kernel_module(
    "fusec_poi_mul_add_0", "s0, 40", ["!fusec.tensor<[s0, 40], f32>", "!fusec.tensor<[40], f32>", "!fusec.tensor<[s0, 1], f32>"],
    ["!fusec.tensor<[s0, 40], f16>"],
    """      %a = fusec.load %in0[r + 40*x] : !fusec.tensor<[s0, 40], f32>
      %w = fusec.load %in1[r] : !fusec.tensor<[40], f32>
      %b = fusec.load %in2[x] : !fusec.tensor<[s0, 1], f32>
      %m = fusec.pointwise "mul" %a, %w : (f32, f32) -> f32
      %s = fusec.pointwise "add" %m, %b : (f32, f32) -> f32
      %h = fusec.pointwise "convert" %s : (f32) -> f16
      fusec.store %h, %out0[r + 40*x] : !fusec.tensor<[s0, 40], f16>""").replace("[s0, 40] (", "[s0, 40] tiled (")

STATIC_TRANSPOSE = TRANSPOSE_ADD.replace("s0", "65").replace("s1", "33").replace(" symbols(65 in [1, inf], 33 in [1, inf])", "")

# Graph-level programs that tile-pointwise tiles (sizes bound by s0, s1).
GRAPHS = {
    "transpose-add": """builtin.module {
  fusec.graph @g(%x : !fusec.tensor<[s0, s1], f32>, %y : !fusec.tensor<[s1, s0], f32>) -> (!fusec.tensor<[s1, s0], f32>) symbols(s0 in [1, inf], s1 in [1, inf]) {
    %t = fusec.permute %x [1, 0] : !fusec.tensor<[s0, s1], f32> -> !fusec.tensor<[s1, s0], f32, strides [1, s1]>
    %s = fusec.pointwise "add" %t, %y : (!fusec.tensor<[s1, s0], f32, strides [1, s1]>, !fusec.tensor<[s1, s0], f32>) -> !fusec.tensor<[s1, s0], f32>
    fusec.output %s : !fusec.tensor<[s1, s0], f32>
  }
}""",
    "batched-transpose-bounded": """builtin.module {
  fusec.graph @g(%x : !fusec.tensor<[3, s0, s1], f32>) -> (!fusec.tensor<[3, s1, s0], f32>) symbols(s0 in [1, 4096], s1 in [1, 4096]) {
    %t = fusec.permute %x [0, 2, 1] : !fusec.tensor<[3, s0, s1], f32> -> !fusec.tensor<[3, s1, s0], f32, strides [s0*s1, 1, s1]>
    %s = fusec.pointwise "exp" %t : (!fusec.tensor<[3, s1, s0], f32, strides [s0*s1, 1, s1]>) -> !fusec.tensor<[3, s1, s0], f32>
    fusec.output %s : !fusec.tensor<[3, s1, s0], f32>
  }
}""",
    "broadcast-row-and-column": """builtin.module {
  fusec.graph @g(%x : !fusec.tensor<[s0, s1], f32>, %w : !fusec.tensor<[s1], f32>, %b : !fusec.tensor<[s0, 1], f32>) -> (!fusec.tensor<[s0, s1], f32>) symbols(s0 in [1, inf], s1 in [1, inf]) {
    %m = fusec.pointwise "mul" %x, %w : (!fusec.tensor<[s0, s1], f32>, !fusec.tensor<[s1], f32>) -> !fusec.tensor<[s0, s1], f32>
    %a = fusec.pointwise "add" %m, %b : (!fusec.tensor<[s0, s1], f32>, !fusec.tensor<[s0, 1], f32>) -> !fusec.tensor<[s0, s1], f32>
    fusec.output %a : !fusec.tensor<[s0, s1], f32>
  }
}""",
}
RAGGED = [(1, 1), (17, 17), (33, 65), (2, 70)]


def _tiled_module(name: str):
    return apply_passes(parse(GRAPHS[name]), FormKernels(), TilePointwise())


# ---------------------------------------------------------------- kernels


def test_transposed_add_one_artifact_for_ragged_sizes():
    module, compiled = compile_text(TRANSPOSE_ADD, {"s0": 64, "s1": 64})
    kernel = only_kernel(compiled)
    assert kernel.kind == "tiled" and kernel.name == "fusec_poi_add_0" and kernel.constexprs == ("XBLOCK", "RBLOCK")
    assert "pid = tl.program_id(0)" in kernel.source and "roffset = (pid % rtiles) * RBLOCK" in kernel.source
    for s0, s1 in RAGGED:
        x, y = randn(s0, s1, seed=s0), randn(s1, s0, seed=s1)
        (out,) = compiled([x, y])
        torch.testing.assert_close(out, x.t() + y)
        assert_same_results(interpreter.run(module, [x, y]), [out])
    assert len(compiled._calls) == 1


def test_broadcast_rows_and_columns_round_at_the_store():
    module, compiled = compile_text(BROADCAST, {"s0": 8})
    assert only_kernel(compiled).kind == "tiled"
    for rows in (1, 5, 33):
        a, w, b = randn(rows, 40, seed=rows), randn(40, seed=1), randn(rows, 1, seed=2)
        (out,) = compiled([a, w, b])
        assert out.dtype == torch.float16
        torch.testing.assert_close(out, (a * w + b).half())


def test_static_sizes_launch_literal_blocks_and_grid():
    module, compiled = compile_text(STATIC_TRANSPOSE)
    cfg = heuristics.tiled_config(33, 65)
    grid = -(-33 // cfg.xblock) * -(-65 // cfg.rblock)
    assert f"launch({grid}, {cfg.num_warps}," in compiled.launcher.source
    assert f"XBLOCK={cfg.xblock}, RBLOCK={cfg.rblock}" in compiled.launcher.source
    x, y = randn(65, 33, seed=3), randn(33, 65, seed=4)
    torch.testing.assert_close(compiled([x, y])[0], x.t() + y)


def test_symbolic_sizes_ask_the_heuristics_and_grid_over_both_dims():
    source = lower_graph(next(op for op in parse(TRANSPOSE_ADD).walk() if isinstance(op, F.GraphOp)), {"s0": 64}).source
    assert "XBLOCK, RBLOCK, num_warps = _tiled_config(xnumel, rnumel, 16)" in source  # per_thread: 3 registers an element
    assert "launch((xnumel + XBLOCK - 1) // XBLOCK * ((rnumel + RBLOCK - 1) // RBLOCK), num_warps," in source


@pytest.mark.parametrize("symbols, index", [("s0 in [1, inf], s1 in [1, inf]", "int64"),
                                            ("s0 in [1, 4096], s1 in [1, 4096]", "int32")])
def test_index_dtype_follows_the_bounds(symbols, index):
    text = TRANSPOSE_ADD.replace("s0 in [1, inf], s1 in [1, inf]", symbols)
    module, compiled = compile_text(text, {"s0": 16, "s1": 16})
    kernel = only_kernel(compiled)
    assert kernel.index_dtype == index
    assert ("pid = tl.program_id(0).to(tl.int64)" in kernel.source) == (index == "int64")
    x, y = randn(17, 9, seed=5), randn(9, 17, seed=6)
    torch.testing.assert_close(compiled([x, y])[0], x.t() + y)


def test_a_tiled_kernel_in_a_combo_keeps_a_program_per_tile():
    kernel_text = TRANSPOSE_ADD.split("fusec.kernel", 1)[1].rsplit("fusec.output", 1)[0].rstrip().rstrip("}")
    text = TRANSPOSE_ADD.replace("%k = fusec.kernel" + kernel_text + "}",
                                 "%k = fusec.combo @fusec_combo_0 : (!fusec.tensor<[s1, s0], f32>) {\n"
                                 "      %t = fusec.kernel" + kernel_text + "}\n      fusec.output %t : !fusec.tensor<[s1, s0], f32>\n    }")
    module, compiled = compile_text(text, {"s0": 8, "s1": 8})
    (combo,) = compiled.kernels
    assert [m.kernel.kind for m in combo.members] == ["tiled"]
    assert "num_blocks_0 = (xnumel_0 + XBLOCK_0 - 1) // XBLOCK_0 * ((rnumel_0 + RBLOCK_0 - 1) // RBLOCK_0)" in combo.source
    for s0, s1 in RAGGED:
        x, y = randn(s0, s1, seed=s0), randn(s1, s0, seed=s1)
        torch.testing.assert_close(compiled([x, y])[0], x.t() + y)


# Two transposes and a flat kernel, independent: one combo, the transposed members tiled (a program a tile),
# the flat one in row blocks after them.
TRANSPOSES_IN_A_COMBO = """builtin.module {
  fusec.graph @g(%x : !fusec.tensor<[s0, s1], f32>, %y : !fusec.tensor<[s1, s0], f32>, %z : !fusec.tensor<[s0, s1], f32>) -> (!fusec.tensor<[s1, s0], f32>, !fusec.tensor<[s1, s0], f32>, !fusec.tensor<[s0, s1], f32>) symbols(s0 in [1, inf], s1 in [1, inf]) {
    %t = fusec.permute %x [1, 0] : !fusec.tensor<[s0, s1], f32> -> !fusec.tensor<[s1, s0], f32, strides [1, s1]>
    %a = fusec.pointwise "add" %t, %y : (!fusec.tensor<[s1, s0], f32, strides [1, s1]>, !fusec.tensor<[s1, s0], f32>) -> !fusec.tensor<[s1, s0], f32>
    %u = fusec.permute %z [1, 0] : !fusec.tensor<[s0, s1], f32> -> !fusec.tensor<[s1, s0], f32, strides [1, s1]>
    %e = fusec.pointwise "exp" %u : (!fusec.tensor<[s1, s0], f32, strides [1, s1]>) -> !fusec.tensor<[s1, s0], f32>
    %m = fusec.pointwise "mul" %z, %z : (!fusec.tensor<[s0, s1], f32>, !fusec.tensor<[s0, s1], f32>) -> !fusec.tensor<[s0, s1], f32>
    fusec.output %a, %e, %m : !fusec.tensor<[s1, s0], f32>, !fusec.tensor<[s1, s0], f32>, !fusec.tensor<[s0, s1], f32>
  }
}"""


@pytest.mark.parametrize("hints", [{"s0": 32, "s1": 32}, None], ids=["symbolic", "static"])
def test_tile_pointwise_tiles_combo_members(hints):
    text = TRANSPOSES_IN_A_COMBO
    if hints is None:  # the static form: the sizes written in
        text = text.replace("s0", "70").replace("s1", "33").replace(" symbols(70 in [1, inf], 33 in [1, inf])", "")
    module = apply_passes(parse(text), FormKernels(), ComboGrouping(size_hints=("s0=64", "s1=64")), TilePointwise(), ScheduleKernels())
    (combo,) = [op for op in module.walk() if isinstance(op, F.ComboOp)]
    assert sorted(k.schedule.kind for k in combo.kernels) == ["pointwise", "tiled", "tiled"]
    compiled = compile_module(module, hints)
    assert [k.name for k in compiled.kernels] == [combo.sym_name.data]
    for seed, (s0, s1) in enumerate(RAGGED if hints else [(70, 33)]):
        inputs = random_inputs(parse(text), {"s0": s0, "s1": s1}, seed=seed)
        x, y, z = inputs
        assert_same_results([x.t() + y, z.t().exp(), z * z], compiled(inputs))


# ---------------------------------------------------------------- graphs through tile-pointwise


@pytest.mark.parametrize("name", list(GRAPHS))
def test_tiled_graphs_match_the_reference_interpreter(name):
    reference = parse(GRAPHS[name])
    module = _tiled_module(name)
    assert any(op.is_tiled for op in module.walk() if isinstance(op, F.KernelOp))
    compiled = compile_module(module, {"s0": 32, "s1": 32})
    for seed, (s0, s1) in enumerate(RAGGED):
        inputs = random_inputs(reference, {"s0": s0, "s1": s1}, seed=seed)
        assert_same_results(interpreter.run(reference, inputs), compiled(inputs))


# ---------------------------------------------------------------- heuristics


@pytest.mark.parametrize("xnumel, rnumel", [(1, 1), (17, 17), (33, 65), (4096, 4096), (3, 100000), (100000, 3), (0, 5)])
def test_tiled_config_is_square_ish_powers_of_two(xnumel, rnumel):
    cfg = heuristics.tiled_config(xnumel, rnumel)
    for v in (cfg.xblock, cfg.rblock, cfg.num_warps):
        assert v & (v - 1) == 0
    assert cfg.xblock * cfg.rblock <= heuristics.TILE_ELEMENTS and cfg.num_warps <= 4
    if min(xnumel, rnumel) >= heuristics.TILE_SIDE:
        assert cfg.xblock == cfg.rblock == heuristics.TILE_SIDE and cfg.num_warps == 4
    tiles = -(-xnumel // cfg.xblock) * -(-rnumel // cfg.rblock)
    if 0 < xnumel < 8:  # few rows: the tile grows along r instead, as far as every SM still gets a tile
        assert cfg.rblock == heuristics.MAX_TILE_SIDE or cfg.rblock >= rnumel or tiles >= heuristics.MIN_PROGRAMS
    if tiles < heuristics.MIN_PROGRAMS:  # a small domain: tiles of 512 elements, or one tile for all of it
        assert cfg.xblock * cfg.rblock <= 512 or (cfg.xblock >= xnumel and cfg.rblock >= rnumel)


def test_a_small_domain_gets_a_tile_an_sm():
    """sigmoid(x*w + b) at 256x256 (issue 12.7) in 64x64 tiles ran on 16 of 132 SMs: 16x32 tiles, 128 programs."""
    assert heuristics.tiled_config(256, 256) == heuristics.LaunchConfig(16, 32, 2)
    assert heuristics.tiled_config(4096, 4096) == heuristics.LaunchConfig(64, 64, 4)  # a large one keeps 64x64


def test_the_cost_model_counts_a_program_per_tile():
    from fusec.analysis.cost_model import SizeHints, block_shape, kernel_cost

    kernel = next(op for op in _tiled_module("transpose-add").walk() if isinstance(op, F.KernelOp))
    hints = SizeHints({"s0": 4000, "s1": 300})
    shape = block_shape(kernel, hints)
    assert shape.tiled and (shape.xblock, shape.rblock) == (64, 64)
    assert kernel_cost(kernel, hints).blocks == 5 * 63


# ---------------------------------------------------------------- Triton's GPU compiler (no GPU needed)


@pytest.mark.parametrize("text, size_type", [(TRANSPOSE_ADD, "i32"), (TRANSPOSE_ADD, "one"), (TRANSPOSE_ADD, "i64"),
                                             (BROADCAST, "i32"), (STATIC_TRANSPOSE, "i32")],
                         ids=["transpose", "transpose-sizes-one", "transpose-sizes-i64", "broadcast", "static"])
def test_compiles_for_hopper(text, size_type, monkeypatch):
    try:
        importlib.import_module("triton.backends.nvidia.compiler")
    except Exception as e:  # no CUDA backend in this Triton
        pytest.skip(f"Triton cannot compile for CUDA here: {e}")
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")
    op = next(o for o in parse(text).walk() if isinstance(o, F.KernelOp))
    lowered = lower_kernel(op, {"s0": 64, "s1": 64})
    assert "cubin" in compile_for_hopper(op, lowered, xnumel=64, rnumel=64, size_type=size_type).asm


# ---------------------------------------------------------------- torch.compile


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_backend_tiles_a_transposed_add(tmp_path, dynamic):
    torch._dynamo.reset()
    f = torch.compile(lambda x, y: x.t() + y, backend="fusec", dynamic=dynamic, options={"dump_dir": str(tmp_path)})
    for rows, cols in [(33, 65), (17, 5)] if dynamic else [(33, 65)]:
        x, y = randn(rows, cols, seed=rows), randn(cols, rows, seed=cols)
        torch.testing.assert_close(f(x, y), x.t() + y)
    (graph_dir,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    final = sorted(graph_dir.glob("[0-9]*-*.mlir"))[-1].read_text()  # the IR after the last pass
    assert "tiled schedule(tiled, " in final
    (source,) = [p.read_text() for p in graph_dir.glob("fusec_poi_*.py")]
    assert "tiled pointwise" in source and "roffset = (pid % rtiles) * RBLOCK" in source
