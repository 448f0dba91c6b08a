"""Launch configurations: pointwise (issue 12.7: Inductor's rule, small domains included) and looped reductions."""

import pytest

from fusec.analysis.heuristics import MIN_PROGRAMS, WARPS_IN_FLIGHT, LaunchConfig, looped_config, persistent_config, pointwise_config


@pytest.mark.parametrize(("xnumel", "xblock", "warps"), [
    (10, 16, 1),  # tiny: one block of the domain's size
    (1000, 256, 1),  # small: the smallest block, 4 programs
    (256 * 256, 512, 2),  # the sigmoid(x*w + b): 128 programs of 512, 2 warps (not 64 of 1024, 4 warps)
    (100_000, 512, 2),  # 196 programs: at least one an SM
    (1 << 20, 1024, 4),  # large: 1024 a program, 4 warps
])
def test_pointwise_config(xnumel, xblock, warps):
    config = pointwise_config(xnumel)
    assert (config.xblock, config.num_warps) == (xblock, warps)


@pytest.mark.parametrize("xnumel", [1, 7, 255, 256, 4097, 65535, 65536, 131071, 131072, 10**7])
def test_pointwise_config_invariants(xnumel):
    config = pointwise_config(xnumel)
    assert config.xblock & (config.xblock - 1) == 0 and 16 <= config.xblock <= 1024  # a power of two
    assert config.num_warps == max(1, config.xblock // 256)
    programs = -(-xnumel // config.xblock)
    if xnumel >= 256 * MIN_PROGRAMS:  # enough work: at least a program per SM, else the largest block
        assert programs >= MIN_PROGRAMS
    else:
        assert config.xblock == min(256, max(16, 1 << (xnumel - 1).bit_length()))


@pytest.mark.parametrize(("rows", "cols", "config"), [
    (512, 32000, (1, 2048, 16)),  # a cross-entropy's rows: 512 programs of 8 warps leave loads idle; wider steps
    (64, 50257, (1, 4096, 16)),  # fewer rows: as wide as max_rblock allows
    (4096, 8192, (1, 1024, 8)),  # enough rows: a row a program, four elements a thread a step
    (16384, 5000, (1, 1024, 8)),
    (100, 2000, (1, 1024, 8)),  # too short to widen: a wider step would mostly be the tail
    (1000, 300, (4, 512, 8)),  # a row in one step: rows share a program, as many programs as SMs
    (64, 700, (1, 1024, 4)),
])
def test_looped_inner_config(rows, cols, config):
    got = looped_config(rows, cols)
    assert (got.xblock, got.rblock, got.num_warps) == config


@pytest.mark.parametrize("rows", [1, 3, 64, 512, 4096, 10**6])
@pytest.mark.parametrize("cols", [1025, 5000, 32000, 10**6])
def test_looped_long_rows_invariants(rows, cols):
    """A row longer than a step: a program a row; the step grows only while the warps do not fill the GPU, never past
    max_rblock, never to more than an eighth of a row."""
    for max_rblock in (1024, 4096):
        config = looped_config(rows, cols, max_rblock=max_rblock)
        assert config.xblock == 1 and 1024 <= config.rblock <= max_rblock and config.num_warps <= 16
        if config.rblock > 1024:
            narrower_warps = min(config.rblock // 2 // 128, 16)  # the step before the last widening
            assert rows * narrower_warps < WARPS_IN_FLIGHT and 8 * config.rblock // 2 <= cols


def test_an_outer_persistent_tile_is_wide_in_x():
    """x is the contiguous dim of an outer reduction: 64 columns (128 bytes of bf16), not 16, where rows are short;
    at most 4 warps (measured faster than 8 on column sums)."""
    assert persistent_config(131072, 128, outer=True) == LaunchConfig(64, 128, 4)  # mean(0) of 8192x2048, split
    assert persistent_config(131072, 128, outer=False) == LaunchConfig(16, 128, 4)  # inner: rows are contiguous
    assert persistent_config(192 * 32, 128, outer=True) == LaunchConfig(32, 128, 8)  # 192 programs: warps stay 8
    assert persistent_config(4096, 2048, outer=True).xblock == 4  # a long row: the tile stays bounded


def test_a_persistent_kernel_over_few_rows_narrows_until_every_sm_has_a_program():
    """The combine of a split column sum ([2048 columns, 64 partials]) ran 32 programs of 64 columns; an outer tile
    narrows to 16 columns (a 32-byte sector of bf16) at most, an inner one to a row a program."""
    assert persistent_config(2048, 64, outer=True) == LaunchConfig(16, 64, 2)
    assert persistent_config(512, 64, outer=True).xblock == 16  # 32 programs: no narrower than a sector
    assert persistent_config(64, 1024) == LaunchConfig(1, 1024, 2)  # 64 rows: a row a program
    for rows, cols in ((100, 128), (4096, 512), (12288, 128)):
        cfg = persistent_config(rows, cols)
        assert cfg.xblock == 1 or -(-rows // cfg.xblock) >= MIN_PROGRAMS


def test_a_looped_column_sum_over_few_columns_narrows_and_takes_longer_steps():
    """The combine of a split column sum over [768 columns, 128 partials] ran 12 programs of 64 x 8 (20.3 us, H200);
    it narrows to 16 columns of 32 rows a step, 48 programs (9.2 us): the elements a step stay 512."""
    assert looped_config(768, 128, outer=True) == LaunchConfig(16, 32, 4)
    assert looped_config(131072, 128, outer=True) == LaunchConfig(64, 8, 4)  # 2048 programs: as before
    assert looped_config(768, 16, outer=True).rblock == 16  # never a step past the rows
    assert looped_config(768, 128, outer=True, max_rblock=8) == LaunchConfig(64, 8, 4)  # max_rblock binds
    for cols, rows in ((100, 5000), (3000, 300), (20000, 77)):
        cfg = looped_config(cols, rows, outer=True)
        assert cfg.xblock * cfg.rblock <= 512 and cfg.xblock >= 16


def test_a_looped_column_sum_takes_the_warps_its_schedule_records():
    """schedule-kernels gives a column reduction that stores 16-bit values per element 2 warps (16-byte stores)."""
    assert looped_config(131072, 128, outer=True, warps=2) == LaunchConfig(64, 8, 2)
    assert looped_config(131072, 128, outer=True, per_thread=1, warps=2).num_warps == 8  # a register limit still binds

