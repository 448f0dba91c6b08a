"""Pointwise launch configurations (issue 12.7): Inductor's rule, small domains included."""

import pytest

from fusec.analysis.heuristics import MIN_PROGRAMS, pointwise_config


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
