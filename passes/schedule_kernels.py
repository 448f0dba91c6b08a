"""schedule-kernels: records how each kernel runs, so the lowering only obeys the IR.

In:  a graph after the fusion passes, combo-grouping and tile-pointwise.
Out: every ``fusec.kernel`` (combo members included) carries a ``schedule(...)``
     (``fusec.KernelSchedule``) and its final name as ``sym_name``:

* kind: ``pointwise`` (1-D domain); ``tiled`` (a ``tiled`` kernel, in a combo or not: a
  combo gives a tiled member a program per tile); ``persistent`` when rnumel is provably at most
  ``persistent-threshold`` (its upper bound under the symbols' declared bounds, not a
  hint: the source must serve every size the symbols admit; an outer reduction at most
  ``OUTER_PERSISTENT_MAX`` (64 rows), since whole long columns in a tile leave too few columns to
  coalesce); else ``looped``, with ``max-rblock``.  A looped kernel over a symbolic rnumel that the
  bounds let be that small also gets ``persistent_up_to``: a call whose rnumel is at most the threshold
  runs the persistent form, chosen by the launcher per call (``runtime-persistent``; a combo's members share
  the choice: the combo runs its members' persistent forms when every such member's rows fit).
* ``matmul`` for a matmul kernel (``matmul-epilogues`` makes them), with its tiles: ``tile = [BM, BN, BK]``,
  ``warps``, ``stages`` (the k-loop's software pipeline), ``group_m``, ``tf32`` where the graph's
  ``float32_matmul_precision`` lets fp32 operands multiply as TF32 and ``approx_tanh`` where every float it
  stores is 16-bit (``matmul_tiles``; option ``matmul-tile``).  On Hopper (``matmul-tma``), a product of 16-bit
  operands laid out as 2-D tensors with 16-byte aligned rows, with two waves of [128, 256] tiles or more, runs
  persistent (``programs = <SMs>``: each program loops over tiles) and loads its operands through tensor
  descriptors (``tma``): its main loop at 0.87-0.96 of cuBLAS's speed where pointer loads ran 0.78-0.82
  (``matmul_tma_tiles``).
* ``outer``: a reduction whose loads are contiguous along x, not r (``x.sum(0)``).
* ``per_thread``: the most elements a thread may hold, where the body's estimated registers an element
  (``fusec.analysis.register_pressure``) times what the kind's launch heuristic gives a thread would pass
  ``register-budget``: the heuristic then gives the program more warps or a smaller tile (Llama's rotary
  embedding, 5 registers an element by the estimate, in 64x64 tiles of 4 warps: 255 registers and spills, 42 us against
  Inductor's 7).  Recorded only where it binds.
* ``warps`` (looped outer reductions only): 2 where the kernel stores 16-bit values per (x, r) element (a layer
  norm's input gradient, stored beside its weight's column sums), so that a thread's eight elements of a 64 x 8
  step store 16 bytes: the split layer-norm backward of [8192, 2048] bf16 ran 81.6 us at 4 warps, 54.4 at 2
  (16384 x 768: 77.7, 51.0; fp32 and column sums that store nothing per element unchanged or slower at 2: H200,
  2026-11-28, ``bench/column_sum_sweep.py --outer-warps 2``).  Recorded only where it differs from
  ``heuristics.OUTER_LOOP_WARPS``.
* index type: int32 unless some index (or the domain's size) may leave the int32
  range for sizes the bounds admit, masked tail lanes included.
* the name: Inductor's prefixes, ``fusec_per_*`` for persistent and ``fusec_red_*``
  for looped reductions; a name that is not a Python identifier gets ``_`` for the
  other characters.  Remarks collected so far follow the new names.

``decide_schedule`` is the one decision procedure: the lowering calls it for IR that
did not run this pass (a hand-written ``fusec-opt`` file).  Running the pass again
re-decides from the base name (a recorded name is renamed back and forth consistently).

Options:
  persistent-threshold: a reduction whose rnumel is provably at most this many elements
      keeps whole rows in registers (0 forces the looped form).
  max-rblock: the largest RBLOCK of a looped reduction (small values test the loop).
  runtime-persistent: record ``persistent_up_to`` where it applies (false: symbolic rows always loop).
  register-budget: the registers a thread's elements may take, by the estimate (0: no limit).
  matmul-tile: ``BMxBNxBKxWARPSxSTAGES`` (``128x256x64x8x3``): every matmul kernel's tiles, chosen by hand
      (else ``matmul_tiles``' closed form).
  matmul-tma: ``hopper`` (where the graph's GPU has compute capability 9.0 or more), ``always`` or ``never``: when
      a matmul whose operands allow it runs persistent with tensor-descriptor loads.
  sm-count: the SMs a persistent matmul's programs fill where the graph does not say (``fusec.sm_count``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from fusec.analysis import heuristics, register_pressure
from fusec.base import dtypes, remarks, shapes
from fusec.base.shapes import next_power_of_2, value_range
from fusec.dialects import fusec as F
from fusec.dialects.attributes import tensor_type_of
from fusec.passes.kernel_index import matmul_products, tile_operands

PASS = "schedule-kernels"
INT32_LIMIT = 2**31
# An outer reduction keeps whole columns a program only up to here.  Column sums split in chunks of 128 rows ran
# 5-16% faster looped than persistent (H100, 2026-11-28, inputs rotated past L2: [8192, 2048] bf16 21.1 -> 17.8 us,
# fp32 32.7 -> 29.4; [16384, 768] 17.0 -> 15.5 and 25.7 -> 24.0; [2048, 3072], [4096, 1024], [1024, 768] unchanged).
OUTER_PERSISTENT_MAX = 64
DEFAULT_MAX_RBLOCK = 4096

Bounds = Mapping[str, tuple[float, float]]


def _enclosing_graph(kernel: F.KernelOp) -> F.GraphOp | None:
    op: Operation | None = kernel
    while op is not None and not isinstance(op, F.GraphOp):
        op = op.parent_op()
    return op


def symbol_bounds(kernel: F.KernelOp) -> dict[str, tuple[float, float]]:
    """Each size symbol's declared [lower, upper] in the enclosing graph (upper may be inf); none outside one."""
    graph = _enclosing_graph(kernel)
    return {} if graph is None else graph.symbol_bounds


def persistent_limit(outer: bool, persistent_threshold: int) -> int:
    """The largest rnumel a reduction keeps in registers as whole rows (an outer one: whole columns, fewer)."""
    return min(persistent_threshold, OUTER_PERSISTENT_MAX) if outer else persistent_threshold


def schedule_kind(kernel: F.KernelOp, bounds: Bounds, limit: int) -> str:
    """``limit``: the ``persistent_limit`` of the kernel."""
    if kernel.is_matmul:
        return "matmul"
    if not kernel.is_reduction:
        return "pointwise"
    if kernel.is_tiled:
        return "tiled"
    _, hi = value_range(kernel.domain_exprs[1], bounds)
    return "persistent" if hi <= limit else "looped"


def persistent_up_to(kernel: F.KernelOp, bounds: Bounds, limit: int) -> int | None:
    """For a looped kernel: the rnumel up to which a call may run it persistent (``limit``, its ``persistent_limit``),
    where rnumel is symbolic and the bounds let it be that small (a static rnumel was decided for good by
    ``schedule_kind``)."""
    rnumel = kernel.domain_exprs[1]
    if not rnumel.free_symbols or limit < 1:
        return None
    lo, _ = value_range(rnumel, bounds)
    return limit if lo <= limit else None


def needs_int64(kernel: F.KernelOp, bounds: Bounds) -> bool:
    """int64 unless every index and the domain provably stay inside int32 (masked tail lanes included)."""
    dom = kernel.domain_exprs
    env = dict(bounds)
    x_hi = value_range(dom[0], env)[1]
    r_hi = value_range(dom[1], env)[1] if kernel.is_reduction else 1
    # A matmul never forms x*r: its programs index the product's tiles and the operands' elements only.
    if (x_hi if kernel.is_matmul else x_hi * max(r_hi, 1)) >= INT32_LIMIT:
        return True
    env["x"] = (0, x_hi + 1024)  # a block's tail lanes run past xnumel (masked)
    env["r"] = (0, 2 * r_hi + 1024)
    for op in kernel.block.ops:
        expr = op.index.data if isinstance(op, (F.LoadOp, F.StoreOp)) else op.expr.data if isinstance(op, F.SymbolicOp) else None
        if expr is None:
            continue
        lo, hi = value_range(expr, env)
        if lo < -INT32_LIMIT or hi >= INT32_LIMIT:
            return True
    return False


def kernel_name(base: str, kind: str) -> str:
    """Inductor's prefixes: fusec_red_* is looped, fusec_per_* persistent; other characters than \\w become _."""
    if kind == "persistent" and base.startswith("fusec_red_"):
        return "fusec_per_" + base.removeprefix("fusec_red_")
    if kind == "looped" and base.startswith("fusec_per_"):
        return "fusec_red_" + base.removeprefix("fusec_per_")
    return base if base.isidentifier() else re.sub(r"\W", "_", base)


def matmul_tiles(kernel: F.KernelOp, bounds: Bounds) -> F.MatmulTiles:
    """A matmul kernel's tiles, by a closed form on its sizes' upper bounds (a symbolic M or N is taken as large:
    the tile must serve every size the bounds admit, and small sizes only waste masked lanes) and its operands'
    element size: [128, 128] tiles of 4 warps, 3 stages (96 KiB of shared memory: two programs share an SM, one's
    epilogue runs beside the other's main loop), or the smallest power of 2 of at least 16 (``tl.dot``'s
    minimum) for a smaller M or N; k in steps of 128 bytes of each operand row; groups of 8 row blocks share B's
    column tiles in L2.  Measured on 8192x1024 @ 1024x4096 bf16 (H200, scratch probes of 2026-11-27): 117 us
    against cuBLAS's 97.7; [256, 128] x 8 warps 121, [128, 256] x 8 warps 143 (one program an SM).  Its precision:
    TF32 where the graph's ``float32_matmul_precision`` allows it, an approximate tanh where it stores only 16-bit
    floats."""
    batch, m, n = kernel.matmul_dims or (1, 1, 1)
    m_hi, n_hi = (value_range(d, bounds)[1] for d in (m, n))
    products = matmul_products(kernel) or []
    element = max((dtypes.of_ir(ld.result.type).bytes for p in products for ld in p.loads), default=4)
    block_m = 128 if m_hi >= 128 else max(16, next_power_of_2(int(m_hi)))
    block_n = 128 if n_hi >= 128 else max(16, next_power_of_2(int(n_hi)))
    block_k = max(16, 128 // element)
    graph = _enclosing_graph(kernel)
    tf32 = graph is not None and graph.mark(F.FLOAT32_MATMUL_PRECISION_MARK) in ("high", "medium")
    stored = [tensor_type_of(st.buffer).element_type for st in kernel.block.ops if isinstance(st, F.StoreOp)]
    # Sibling products (gate and up of one input) keep an accumulator each: 8 warps hold two [128, 128] fp32 tiles in
    # 128 registers a thread, as 4 warps hold one (the siblings option is off by default: it lost to cuBLAS on an H200).
    warps = 8 if len(products) > 1 else 4
    return F.MatmulTiles(block_m, block_n, block_k, warps, 3, 8, tf32, approx_tanh=only_16_bit_floats(stored))


MATMUL_TMA = ("hopper", "always", "never")
# A persistent tensor-descriptor matmul's tile: [block_m, block_n, block_k, warps, stages].  It runs where its tiles
# make two waves over the SMs or more; with fewer, a program a [128, 128] tile through pointer loads is as fast.
# fusec's own fused matmul + bias + tanh-GELU kernels, bf16, H200 device us, descriptors / pointers
# (``bench/epilogue_sweep.py --patterns gelu --pointers``, one run, 2026-11-29), by [128, 256] tiles:
# 8192x4096x1024 (1024) 118.7 / 125.6; 16384x1024x1024 (512) 60.4 / 63.4; 4096x4096x1024 (512) 59.9 / 62.0;
# 2048x5632x2048 (352) 79.2 / 81.6; 8192x1024x1024 (256) 32.2 / 32.1; 1024x8192x1024 (256) 32.8 / 32.3;
# 2048x2048x2048 (128) 28.4 / 27.3; 4096x1024x4096 (128) 50.2 / 48.6.  The main loop alone (a scratch probe):
# 8192x4096x1024 99.2 / 118.2 against cuBLAS's 94.0.
TMA_TILE = (128, 256, 64, 8, 3)


def matmul_tma_tiles(kernel: F.KernelOp, bounds: Bounds, when: str, sm_count: int) -> F.MatmulTiles | None:
    """A persistent tensor-descriptor schedule for a matmul kernel, or None where ``when`` or the kernel rules it
    out: a batched product, an operand that is not a 2-D tensor with 16-byte aligned rows (``tile_operands``),
    other than 16-bit operands (the route measured), or too few tiles (``TMA_TILE``) to fill the SMs.  Sizes past the
    descriptors' int32 range are the launcher's to check per call (it then loads through pointers)."""
    graph = _enclosing_graph(kernel)
    capability = graph.mark(F.DEVICE_CAPABILITY_MARK) if graph is not None else None
    if when == "never" or (when == "hopper" and not (isinstance(capability, int) and capability >= 90)):
        return None
    operands, products = tile_operands(kernel), matmul_products(kernel)
    if operands is None or products is None:
        return None
    if any(dtypes.of_ir(ld.result.type).bytes != 2 or not dtypes.of_ir(ld.result.type).is_float
           for p in products for ld in p.loads):
        return None
    _, m, n = kernel.matmul_dims or (1, 1, 1)
    m_hi, n_hi = (value_range(d, bounds)[1] for d in (m, n))
    sms = graph.mark(F.SM_COUNT_MARK) if graph is not None else None
    sms = sms if isinstance(sms, int) and not isinstance(sms, bool) and sms > 0 else sm_count
    bm, bn, bk, warps, stages = TMA_TILE
    tiles = shapes.ceil_div(int(min(m_hi, 2**40)), bm) * shapes.ceil_div(int(min(n_hi, 2**40)), bn)
    if tiles < 2 * sms:
        return None
    return dataclasses.replace(matmul_tiles(kernel, bounds), block_m=bm, block_n=bn, block_k=bk, warps=warps,
                               stages=stages, programs=sms, tma=True)


def only_16_bit_floats(element_types) -> bool:
    """No float among them wider than 16 bits (what a kernel stores: an approximate tanh is then as good as an exact
    one, its error below the rounding)."""
    return all(t in (F.BF16, F.F16) or not dtypes.of_ir(t).is_float for t in element_types)


def decide_schedule(kernel: F.KernelOp, bounds: Bounds, persistent_threshold: int = heuristics.PERSISTENT_THRESHOLD,
                    max_rblock: int = DEFAULT_MAX_RBLOCK, runtime_persistent: bool = False,
                    matmul_tile: F.MatmulTiles | None = None,
                    register_budget: int = register_pressure.REGISTER_BUDGET, matmul_tma: str = "hopper",
                    sm_count: int = 132) -> tuple[F.KernelSchedule, str]:
    """The schedule of ``kernel`` for sizes within ``bounds``, and its final name; ``runtime_persistent``: a looped
    kernel over a symbolic rnumel may run persistent per call (``persistent_up_to``); ``matmul_tile``: a matmul
    kernel's tiles, chosen by the user (else ``matmul_tiles``); ``register_budget``: see ``per_thread`` (0: no
    limit); ``matmul_tma``, ``sm_count``: see ``matmul_tma_tiles``."""
    if kernel.is_matmul:
        index = "int64" if needs_int64(kernel, bounds) else "int32"
        tiles = matmul_tma_tiles(kernel, bounds, matmul_tma, sm_count) or matmul_tiles(kernel, bounds)
        if matmul_tile is not None:  # the user's tile, warps and stages; the precision and route choices stay the kernel's
            tiles = dataclasses.replace(matmul_tile, tf32=tiles.tf32, approx_tanh=tiles.approx_tanh, programs=tiles.programs,
                                        tma=tiles.tma)
        return F.KernelSchedule("matmul", index, tiles=tiles), kernel_name(kernel.sym_name.data, "matmul")
    outer = kernel.is_outer_reduction  # False for pointwise and tiled kernels; computed once (it walks the body)
    limit = persistent_limit(outer, persistent_threshold)
    kind = schedule_kind(kernel, bounds, limit)
    index = "int64" if needs_int64(kernel, bounds) else "int32"
    up_to = persistent_up_to(kernel, bounds, limit) if kind == "looped" and runtime_persistent else None
    per_thread = register_pressure.per_thread_limit(kernel, kind, outer, register_budget, persistent_form=up_to is not None)
    warps = outer_loop_warps(kernel) if kind == "looped" and outer else None
    schedule = F.KernelSchedule(kind, index, outer, max_rblock if kind == "looped" else None, up_to, per_thread=per_thread,
                                warps=warps)
    return schedule, kernel_name(kernel.sym_name.data, kind)


def outer_loop_warps(kernel: F.KernelOp) -> int | None:
    """A looped column reduction's warps where its stores decide them (see the module's docstring), else None."""
    r = shapes.index_symbol("r")
    narrow = any(isinstance(op, F.StoreOp) and r in op.index.data.free_symbols and op.value.type in (F.BF16, F.F16)
                 for op in kernel.block.ops)
    warps = 2 if narrow else heuristics.OUTER_LOOP_WARPS
    return warps if warps != heuristics.OUTER_LOOP_WARPS else None


@dataclass(frozen=True)
class ScheduleKernels(ModulePass):
    """Records each kernel's schedule (kind, index type, outer reduction, max RBLOCK) and its final name."""

    name = PASS

    persistent_threshold: int = heuristics.PERSISTENT_THRESHOLD
    max_rblock: int = DEFAULT_MAX_RBLOCK
    runtime_persistent: bool = True
    matmul_tile: str = ""  # BMxBNxBKxWARPSxSTAGES, e.g. 128x256x64x8x3: every matmul kernel's tiles, chosen by hand
    register_budget: int = register_pressure.REGISTER_BUDGET
    matmul_tma: str = "hopper"  # hopper | always | never: persistent matmuls loading through tensor descriptors
    sm_count: int = 132  # SMs a persistent matmul fills where the graph does not say

    def __post_init__(self):
        parse_matmul_tile(self.matmul_tile)  # a malformed tile is a bad option now
        if self.matmul_tma not in MATMUL_TMA:
            raise ValueError(f"matmul-tma must be one of {', '.join(MATMUL_TMA)}, got {self.matmul_tma!r}")
        if self.sm_count < 1:
            raise ValueError(f"sm-count must be at least 1, got {self.sm_count}")
        if self.persistent_threshold < 0:
            raise ValueError(f"persistent-threshold must be at least 0, got {self.persistent_threshold}")
        if self.max_rblock < 2 or self.max_rblock & (self.max_rblock - 1):
            raise ValueError(f"max-rblock must be a power of 2 of at least 2, got {self.max_rblock}")
        if self.register_budget < 0:
            raise ValueError(f"register-budget must be at least 0, got {self.register_budget}")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        renamed: dict[str, str] = {}
        matmul_tile = parse_matmul_tile(self.matmul_tile)
        for kernel in op.walk():
            if isinstance(kernel, F.KernelOp):
                schedule, name = decide_schedule(kernel, symbol_bounds(kernel), self.persistent_threshold, self.max_rblock,
                                                 self.runtime_persistent, matmul_tile, self.register_budget,
                                                 self.matmul_tma, self.sm_count)
                kernel.record_schedule(schedule)
                if name != kernel.sym_name.data:
                    renamed[f"@{kernel.sym_name.data}"] = f"@{name}"
                    kernel.properties["sym_name"] = StringAttr(name)
        _rename_in_remarks(renamed)


def parse_matmul_tile(text: str, what: str = "matmul-tile") -> F.MatmulTiles | None:
    """``matmul-tile``'s value (``128x256x64x8x3``: block m, n, k, warps, stages) as tiles, or None when empty;
    ``what`` names the option in errors."""
    if not text:
        return None
    parts = text.split("x")
    if len(parts) != 5 or not all(p.isdigit() for p in parts):
        raise ValueError(f"{what} must be BMxBNxBKxWARPSxSTAGES (e.g. 128x256x64x8x3), got {text!r}")
    m, n, k, warps, stages = (int(p) for p in parts)
    if any(b < 16 or b & (b - 1) for b in (m, n, k)) or warps not in (1, 2, 4, 8, 16) or stages < 1:
        raise ValueError(f"{what} {text!r}: block sizes are powers of 2 of at least 16, warps 1-16 (a power of 2), "
                         "stages at least 1")
    return F.MatmulTiles(m, n, k, warps, stages, 8)


def _rename_in_remarks(renamed: Mapping[str, str]) -> None:
    """Earlier remarks name kernels as they were: give them the final names (else they would read as merged away)."""
    log = remarks.current()
    if log is not None and renamed:
        log.remarks = [dataclasses.replace(r, subjects=tuple(renamed.get(s, s) for s in r.subjects)) for r in log.remarks]
