"""Block sizes and warps for a kernel launch, from the sizes at hand.

Called by generated launchers with the actual sizes of a call when a kernel's
domain is symbolic (memoised, so a repeated size costs one dict lookup), or once
at compile time when it is static.  Every answer is a power of two, so the set of
Triton specialisations a dynamic kernel can need stays small.

Rules of thumb (Hopper, memory-bound kernels):
* pointwise: 1024 elements a program, 4 warps (8 elements, two 16-byte vectors of
  fp32, a thread); smaller blocks only when there are fewer elements.
* persistent reduction: a whole row in RBLOCK = next_power_of_2(rnumel); as many
  rows as keep a program near 4096 elements (fewer registers would spill less but
  starve the SM of loads in flight); warps grow with the tile.
* looped reduction, inner (r contiguous): RBLOCK up to ``max_rblock`` with few
  rows; outer (x contiguous): wide XBLOCK for coalescing, short RBLOCK.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

from fusec.shapes import next_power_of_2

TILE_ELEMENTS = 4096  # elements a reduction program holds at once (persistent tile / looped block)


class LaunchConfig(NamedTuple):
    xblock: int
    rblock: int  # 0 for pointwise kernels
    num_warps: int


def _clamp(v: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, v))


@functools.lru_cache(maxsize=1024)
def pointwise_config(xnumel: int) -> LaunchConfig:
    xblock = _clamp(next_power_of_2(xnumel), 16, 1024)
    return LaunchConfig(xblock, 0, _clamp(xblock // 256, 1, 4))


@functools.lru_cache(maxsize=1024)
def persistent_config(xnumel: int, rnumel: int, outer: bool = False) -> LaunchConfig:
    rblock = max(next_power_of_2(rnumel), 2)
    xblock = _clamp(TILE_ELEMENTS // rblock, 1, 64 if outer else 32)
    xblock = min(xblock, max(next_power_of_2(xnumel), 1))
    return LaunchConfig(xblock, rblock, _clamp(next_power_of_2(xblock * rblock // 512), 1, 8))


@functools.lru_cache(maxsize=1024)
def looped_config(xnumel: int, rnumel: int, outer: bool = False, max_rblock: int = 1024) -> LaunchConfig:
    if outer:
        xblock = min(64, max(next_power_of_2(xnumel), 1))
        rblock = _clamp(next_power_of_2(rnumel), 2, min(8, max_rblock))
        return LaunchConfig(xblock, rblock, 4)
    rblock = _clamp(next_power_of_2(rnumel), 2, max_rblock)
    xblock = _clamp(2048 // rblock, 1, max(next_power_of_2(xnumel), 1))
    xblock = min(xblock, 8)
    return LaunchConfig(xblock, rblock, _clamp(next_power_of_2(xblock * rblock // 256), 2, 8))
