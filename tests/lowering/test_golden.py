"""The generated source of a few small kernels, as reviewed text (regenerate: tests/lowering/regen_golden.py)."""

import pytest
from regen_golden import CASES, GOLDEN


@pytest.mark.parametrize("name", list(CASES))
def test_generated_source_matches_golden(name):
    want = (GOLDEN / name).read_text()
    assert CASES[name]() == want, f"generated source changed; if intended, run python tests/lowering/regen_golden.py and review the diff of {name}"
