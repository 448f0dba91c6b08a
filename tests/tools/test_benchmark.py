"""The benchmark tool: refuses to run without a GPU; its programs are plain PyTorch functions."""

import pytest
import torch
from click.testing import CliRunner

from fusec.tools.benchmark import PROGRAMS, main


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on machines without a GPU")
def test_without_a_gpu_the_benchmark_says_so_and_fails():
    result = CliRunner().invoke(main, ["--programs", "seed"])
    assert result.exit_code == 1
    assert "fusec benchmark: error: needs a CUDA GPU" in result.output


def test_program_names_are_unique_and_each_returns_tensors():
    assert len({p.name for p in PROGRAMS}) == len(PROGRAMS)
    for p in PROGRAMS:
        if p.name in ("swiglu", "transpose_add", "bias_rows_cols", "full_sum", "mean_of_rows"):
            continue  # large matrices: eager on CPU would only slow the suite
        out = p.fn(*p.make_inputs(torch.float32, "cpu"))
        assert all(isinstance(t, torch.Tensor) and t.isfinite().all() for t in (out if isinstance(out, tuple) else (out,)))


def test_tables_are_markdown_with_one_decimal():
    from fusec.tools.benchmark import markdown_table

    assert markdown_table(["program", "us"], [("seed", 33.04), ("sum", 2)]).splitlines() == [
        "| program | us |", "|---|---|", "| seed | 33.0 |", "| sum | 2 |"]


def test_the_summary_compares_each_backend_with_inductor_combo():
    from fusec.tools.benchmark import ratio_summary

    rows = [("a", "fusec", "yes", 1, 0, "10.0", "12.0"), ("a", "inductor-combo", "yes", 2, 0, "20.0", "22.0"),
            ("b", "fusec", "yes", 3, 0, "30.0", "32.0"), ("b", "inductor-combo", "yes", 2, 0, "15.0", "17.0"),
            ("c", "fusec", "error: Boom", "-", "-", "-", "-"), ("c", "inductor-combo", "yes", 1, 0, "5.0", "6.0")]
    # ratios 0.5 and 2.0 (c failed: left out): geometric mean 1; b is the worst and launches more kernels
    assert ratio_summary(rows) == ["fusec / inductor-combo kernel time over 2 programs: geometric mean 1.000, "
                                   "worst 2.00 (b); more kernels: b (3 vs 2)"]
    assert ratio_summary([r for r in rows if r[1] == "fusec"]) == []  # nothing to compare with


def test_a_16_bit_result_closer_to_float64_than_eager_matches_though_it_differs_from_eager():
    from fusec.tools.benchmark import _transformer_mix, matches

    torch.manual_seed(0)
    inputs = [torch.randn(64, 1024, dtype=torch.bfloat16)] + [torch.randn(1024, dtype=torch.bfloat16) for _ in range(5)]
    eager = list(_transformer_mix(*inputs))
    exact = list(_transformer_mix(*[t.double() for t in inputs]))
    fp32_between_ops = [t.bfloat16() for t in _transformer_mix(*[t.float() for t in inputs])]  # what a compiler does
    assert not all(torch.allclose(e.float(), g.float(), rtol=2e-2, atol=2e-2) for e, g in zip(eager, fp32_between_ops, strict=True))
    assert matches(eager, fp32_between_ops, exact)
    wrong = [fp32_between_ops[0] * 1.05, *fp32_between_ops[1:]]
    assert not matches(eager, wrong, exact)
    assert not matches([exact[0].float()], [exact[0].float() + 1e-3], None)  # fp32: elementwise 1e-4


def test_timings_cycle_through_enough_input_sets_to_miss_the_cache():
    from fusec.tools.benchmark import L2_ROTATION_BYTES, copies_for, rotating, rotation_sets

    assert copies_for(16 * 2**20) == 16 and copies_for(L2_ROTATION_BYTES) == 2 and copies_for(1024) == 32
    seen = []
    call = rotating(lambda x: seen.append(x), [[1], [2], [3]])
    for _ in range(5):
        call()
    assert seen == [1, 2, 3, 1, 2]
    first = [torch.zeros(64 * 2**20, dtype=torch.uint8)]
    sets = rotation_sets(first, lambda: [torch.ones(64 * 2**20, dtype=torch.uint8)])
    assert len(sets) == 4 and sets[0] is first and all(s[0][0] == 1 for s in sets[1:])
