"""Block sizes and warps for a kernel launch, from the sizes at hand.

Called by generated launchers with the actual sizes of a call when a kernel's
domain is symbolic (memoised, so a repeated size costs one dict lookup), or once
at compile time when it is static; the cost model (``fusec.analysis.cost_model``) reads the
same rules for hinted sizes, so both agree on how many blocks a kernel launches.
Every answer is a power of two, so the set of Triton specialisations a dynamic
kernel can need stays small.

Rules of thumb (Hopper, memory-bound kernels):
* pointwise (Inductor's rule): XBLOCK = xnumel / MIN_PROGRAMS rounded down to a power
  of two, within [256, 1024], so that a small domain still launches a program per SM
  (256x256: 128 programs of 512, not 64 of 1024) and a large one 1024 a program;
  warps = XBLOCK / 256 (8 elements, two 16-byte vectors of fp32, a thread);
  a domain below 256 elements takes one block of its size, one warp.
* persistent reduction: a whole row in RBLOCK = next_power_of_2(rnumel); as many
  rows as keep a program near 4096 elements (fewer registers would spill less but
  starve the SM of loads in flight); warps grow with the tile, up to 8, and up to 4
  for an outer tile over many programs (column sums ran faster at 4).
* looped reduction, inner (r contiguous): rows that fit one RBLOCK of up to 1024
  share a program; a longer row gets a program of its own that steps through it
  four elements a thread at a time, and where the rows are too few for the warps
  to keep the GPU's loads in flight (WARPS_IN_FLIGHT), the step widens (RBLOCK up
  to ``max_rblock``, up to 16 warps): a loop over long rows is bound by the loads in
  flight, not by bandwidth (bench 2026-11-27: 512 rows of 32000 fp32, 2 rows and 8
  warps a program 41.7 us, a row and 16 warps 25.3 us).  Outer (x contiguous):
  wide XBLOCK for coalescing, short RBLOCK.
* tiled pointwise (a 2-D domain, e.g. a transpose): square-ish tiles up to 64x64,
  4096 elements of fp32 (32 a thread, 4 warps) so that both a row-contiguous and a
  column-contiguous access get 64 contiguous elements (256 bytes) a row of the tile;
  a thin domain gives its unused side to the other one (up to 1024); a small
  domain gets smaller tiles, a program an SM (down to 512 elements).
* ``per_thread``: the most elements a thread may hold, where the kernel's body needs many registers an element
  (``fusec.analysis.register_pressure``; ``schedule-kernels`` records it): a config that would give a thread more
  first takes more warps (up to ``MAX_WARPS``), then a smaller tile (``_fit``).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

from fusec.base.shapes import next_power_of_2

MIN_PROGRAMS = 128  # about one program per SM of an H100 (132): fewer leave SMs idle
PERSISTENT_TILE = 2048  # elements a persistent reduction program holds (bench/persistent_sweep.py, H100, 2026-11-21)
TILE_ELEMENTS = 4096  # elements a program holds at once (persistent tile, looped block, tiled pointwise tile)
PERSISTENT_THRESHOLD = 4096  # a reduction whose rnumel is provably at most this keeps whole rows (LoweringOptions)
TILE_SIDE = 64  # the side of a square tile of a tiled pointwise kernel
WARPS_IN_FLIGHT = 48 * MIN_PROGRAMS  # three quarters of an SM's 64 warps on every SM: enough loads in flight
LOOP_STEP = 1024  # the RBLOCK a loop over long rows starts from
MAX_TILE_SIDE = 1024  # the long side of a tile over a thin domain
MAX_WARPS = 8  # warps a register-bound program may grow to (16 where a whole row must stay in one program)
OUTER_LOOP_COLUMNS = 64  # columns a looped column reduction's program takes (64 x 8 rows, 4 warps: 2026-11-27)
OUTER_LOOP_RBLOCK = 8  # rows a step of a looped column reduction takes
OUTER_LOOP_WARPS = 4  # warps of a looped column reduction's program


class LaunchConfig(NamedTuple):
    xblock: int
    rblock: int  # 0 for pointwise kernels
    num_warps: int


def _clamp(v: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, v))


def most_per_thread(kind: str, outer: bool = False) -> int:
    """The most elements a thread holds under each kind's config below without a ``per_thread`` limit: a limit at
    least this never binds (``schedule-kernels`` records only one that does)."""
    return {"pointwise": 8, "tiled": 32, "persistent": 64 if outer else 16, "looped": 8}[kind]


def _fit(cfg: LaunchConfig, per_thread: int, rows_fixed: bool = False) -> LaunchConfig:
    """``cfg`` with at most ``per_thread`` elements a thread (0: no limit): more warps, then fewer rows (x), then
    narrower r steps; a program that must hold whole rows (``rows_fixed``: persistent) may grow to 16 warps."""
    xblock, rblock, warps = cfg
    most_warps = 16 if rows_fixed else MAX_WARPS
    while per_thread and xblock * max(rblock, 1) > per_thread * 32 * warps:
        if warps < most_warps:
            warps *= 2
        elif xblock > 1 and (rows_fixed or xblock >= rblock):
            xblock //= 2
        elif rblock > 1 and not rows_fixed:
            rblock //= 2
        else:
            break
    return LaunchConfig(xblock, rblock, warps)


@functools.lru_cache(maxsize=1024)
def pointwise_config(xnumel: int, per_thread: int = 0) -> LaunchConfig:
    per_program = 1 << max(0, (xnumel // MIN_PROGRAMS).bit_length() - 1)  # largest power of two <= xnumel / 128
    xblock = min(_clamp(per_program, 256, 1024), _clamp(next_power_of_2(xnumel), 16, 1024))
    return _fit(LaunchConfig(xblock, 0, _clamp(xblock // 256, 1, 4)), per_thread)


@functools.lru_cache(maxsize=1024)
def persistent_config(xnumel: int, rnumel: int, outer: bool = False, per_thread: int = 0) -> LaunchConfig:
    rblock = max(next_power_of_2(rnumel), 2)
    # Outer (x contiguous): the tile's rows are x, so a wider tile coalesces (64 columns: 128 bytes of bf16);
    # mean over dim 0 of 8192x2048 bf16, split partials [131072, 128]: 16 columns 29.0 us, 64 columns 22.0 (H100).
    xblock = _clamp((4 if outer else 1) * PERSISTENT_TILE // rblock, 1, 64 if outer else 32)
    xblock = min(xblock, max(next_power_of_2(xnumel), 1))
    # Few rows (or columns): narrower programs until every SM gets one, as pointwise_config does; an outer tile
    # keeps 16 columns (a 32-byte sector of bf16).  The combine of a split column sum, [2048, 64], ran 32 programs.
    while xblock > (16 if outer else 1) and -(-xnumel // xblock) < MIN_PROGRAMS:
        xblock //= 2
    # Outer tiles over many programs take at most 4 warps: column sums (bias and norm-weight gradients, split
    # partials of 128 rows, >= 512 programs) ran 7-34% faster than at 8 on an H100 (fp32 and bf16, [8192, 2048],
    # [16384, 768], [2048, 3072]; 2026-11-27).  Few programs keep 8: their warps are all the SMs have in flight.
    few_warps = outer and -(-xnumel // xblock) >= 4 * MIN_PROGRAMS
    cfg = LaunchConfig(xblock, rblock, _clamp(next_power_of_2(xblock * rblock // 512), 1, 4 if few_warps else 8))
    return _fit(cfg, per_thread, rows_fixed=True)


@functools.lru_cache(maxsize=1024)
def looped_config(xnumel: int, rnumel: int, outer: bool = False, max_rblock: int = 4096,
                  per_thread: int = 0, warps: int = 0) -> LaunchConfig:
    """``warps``: an outer reduction's warps a program as its schedule records them (0: ``OUTER_LOOP_WARPS``)."""
    return _fit(_looped_config(xnumel, rnumel, outer, max_rblock, warps), per_thread)


def _looped_config(xnumel: int, rnumel: int, outer: bool, max_rblock: int, warps: int = 0) -> LaunchConfig:
    if outer:
        xblock = min(OUTER_LOOP_COLUMNS, max(next_power_of_2(xnumel), 1))
        rblock = _clamp(next_power_of_2(rnumel), 2, min(OUTER_LOOP_RBLOCK, max_rblock))
        # Few columns: narrower programs taking longer steps until every SM has one, as persistent_config does (a
        # split column sum's combine over [768, 128] partials: 12 programs of 64 x 8, 20.3 us; 48 of 16 x 32, 9.2 us;
        # H200, 2026-11-28).
        while xblock > 16 and -(-xnumel // xblock) < MIN_PROGRAMS and 2 * rblock <= min(max_rblock, next_power_of_2(rnumel)):
            xblock, rblock = xblock // 2, rblock * 2
        return LaunchConfig(xblock, rblock, warps or OUTER_LOOP_WARPS)
    rblock = _clamp(next_power_of_2(rnumel), 2, min(LOOP_STEP, max_rblock))
    if rnumel <= rblock:  # a row is one step: several rows a program
        xblock = _clamp(2048 // rblock, 1, max(next_power_of_2(xnumel), 1))
        xblock = min(xblock, 8)
        while xblock > 1 and -(-xnumel // xblock) < MIN_PROGRAMS:  # few rows: a program a row, to fill the SMs
            xblock //= 2
        return LaunchConfig(xblock, rblock, _clamp(next_power_of_2(xblock * rblock // 256), 2, 8))
    warps = _clamp(rblock // 128, 1, 16)  # four elements a thread a step
    while xnumel * warps < WARPS_IN_FLIGHT and 2 * rblock <= max_rblock and rnumel >= 8 * rblock:
        rblock *= 2  # few rows: wider steps, more warps (a tail step wastes at most an eighth)
        warps = min(rblock // 128, 16)
    return LaunchConfig(1, rblock, warps)


@functools.lru_cache(maxsize=1024)
def tiled_config(xnumel: int, rnumel: int, per_thread: int = 0) -> LaunchConfig:
    rblock = min(next_power_of_2(rnumel), TILE_SIDE)
    xblock = min(next_power_of_2(xnumel), MAX_TILE_SIDE, TILE_ELEMENTS // rblock)
    rblock = min(next_power_of_2(rnumel), MAX_TILE_SIDE, TILE_ELEMENTS // xblock)  # few rows: wider columns
    # A small domain: smaller tiles (the longer side halved, down to 512 elements) until every SM gets one, as
    # pointwise_config does (256x256 in 64x64 tiles ran on 16 of 132 SMs).
    while -(-xnumel // xblock) * -(-rnumel // rblock) < MIN_PROGRAMS and xblock * rblock > 512:
        if xblock >= rblock:
            xblock //= 2
        else:
            rblock //= 2
    return _fit(LaunchConfig(xblock, rblock, _clamp(next_power_of_2(xblock * rblock // 256), 1, 4)), per_thread)

