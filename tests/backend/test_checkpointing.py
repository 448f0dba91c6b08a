"""Activation checkpointing through backend="fusec": recomputed random ops replay the forward's RNG state.

AOTAutograd wraps a random op that the backward recomputes in ``run_and_save_rng_state`` (forward: the
RNG state, then the op) and ``run_with_rng_state`` (backward: the op again from that state).  fusec
imports both as ordered torch calls (``fusec.extern "higher_order.run_with_rng_state"(op "aten.rand_like.default", ...)``),
so a checkpointed dropout draws the same mask twice.  The checks need no RNG agreement with eager (fusec,
like Inductor, draws dropout masks its own way): the backward must use the forward's mask.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as Fn
from torch.utils.checkpoint import checkpoint

P = 0.5


def checkpointed_dropout(x, w):
    return checkpoint(lambda x: Fn.dropout(x * w, P, training=True).sin() * 3, x, use_reentrant=False)


def run(device: str, tmp_path):
    torch._dynamo.reset()
    torch.manual_seed(0)
    x = torch.randn(64, 32, device=device, requires_grad=True)
    w = torch.randn(32, device=device, requires_grad=True)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="fusec: graph .* runs with torch")  # no graph may fall back
        y = torch.compile(checkpointed_dropout, backend="fusec", options={"dump_dir": str(tmp_path)})(x, w)
        y.sum().backward()
    return x, w, y.detach()


def check_replayed_mask(x, w, y) -> None:
    """The gradients the forward's mask gives: y = sin(x*w*m/(1-p))*3 with m = (y != 0)."""
    keep = (y != 0).to(x.dtype)
    scale = keep / (1 - P)
    inner = x.detach() * w.detach() * scale
    torch.testing.assert_close(y, inner.sin() * 3)  # y itself is what that mask gives
    upstream = inner.cos() * 3 * scale
    torch.testing.assert_close(x.grad, upstream * w.detach())
    torch.testing.assert_close(w.grad, (upstream * x.detach()).sum(0))
    assert 0.3 < keep.mean().item() < 0.7  # a real mask, neither all kept nor all dropped


def test_checkpointed_dropout_compiles_whole_and_replays_its_mask(tmp_path):
    x, w, y = run("cpu", tmp_path)
    check_replayed_mask(x, w, y)
    (forward,), (backward,) = ([p.read_text() for p in tmp_path.glob(f"{kind}_*/final.mlir")] for kind in ("forward", "backward"))
    assert 'fusec.extern "higher_order.run_and_save_rng_state"(op "aten.rand_like.default"' in forward
    assert 'fusec.extern "higher_order.run_with_rng_state"(%' in backward and 'op "aten.rand_like.default"' in backward


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_checkpointed_dropout_on_the_gpu(tmp_path):
    x, w, y = run("cuda", tmp_path)
    check_replayed_mask(x, w, y)
