"""DDP, tensor parallelism and FSDP2 through backend="fusec" on two gloo processes (CPU).

Each test spawns two ranks (``gloo_cases``) that compare fusec with eager PyTorch on the same
process group, with zero fallbacks to eager allowed; rank 0 reports what was compiled.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).parent))  # the spawned ranks import the cases by module name
import gloo_cases  # noqa: E402

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(), reason="torch built without gloo"),
]


def test_ddp_small_buckets_one_graph_per_bucket(tmp_path):
    facts = gloo_cases.run_on_two_ranks("ddp_small_buckets", tmp_path)
    assert facts["backend_calls"] == 3, facts  # three Linears, one bucket each: Dynamo's DDPOptimizer splits there
    assert all(n == 0 for n in facts["graphs"].values()), facts  # DDP's reducer runs the collectives, not the graphs


def test_ddp_python_reducer_backward_holds_collectives(tmp_path):
    facts = gloo_cases.run_on_two_ranks("ddp_python_reducer", tmp_path)
    backward = {name: n for name, n in facts["graphs"].items() if n}
    assert sum(backward.values()) == 12, facts  # six gradients: an all_reduce and its wait each


def test_tp_pairwise(tmp_path):
    facts = gloo_cases.run_on_two_ranks("tp_pairwise", tmp_path)
    assert facts["backend_calls"] == 1, facts  # fullgraph: one graph, no break
    assert list(facts["graphs"].values()) == [2], facts  # the row-wise all_reduce and its wait


def test_tp_sequence_parallel(tmp_path):
    facts = gloo_cases.run_on_two_ranks("tp_sequence_parallel", tmp_path)
    assert facts["backend_calls"] == 1, facts
    assert list(facts["graphs"].values()) == [4], facts  # all_gather -> matmuls -> reduce_scatter, each waited


def test_fsdp2_per_block_losses_match_eager(tmp_path):
    facts = gloo_cases.run_on_two_ranks("fsdp2_per_block", tmp_path)  # losses equal eager FSDP2's on gloo
    for run in ("plain", "checkpointed"):  # checkpointed: activation checkpointing, per-block compile, fully_shard
        assert facts[run]["backend_calls"] == 2, facts  # one graph per block, no recompile on steps 2 and 3
        assert len(facts[run]["losses"]) == 3



def test_overlap_option(tmp_path):
    # torch's overlap scheduler before import (a constant compute estimate stands in for its GPU roofline):
    # outputs and gradients equal eager's (checked on the ranks)
    facts = gloo_cases.run_on_two_ranks("overlap_option", tmp_path)
    bucketed = {k: n for k, n in facts["graphs"].items() if k.startswith("bucketed/")}
    reducer = {k: n for k, n in facts["graphs"].items() if k.startswith("reducer/")}
    assert list(bucketed.values()) == [6], facts  # 2 all-gathers bucketed into 1, 2 reduce-scatters: 3 issues, 3 waits
    assert sum(reducer.values()) == 12, facts  # DDP python_reducer backward: each all_reduce kept with its wait
    assert "(1 all-gather bucket(s) made functional)" in facts["remarks"], facts
    assert facts["remarks"].count("overlap-collectives: scheduled") >= 2, facts
