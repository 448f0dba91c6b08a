"""A compiled optimizer step: ``torch.compile(opt.step, backend="fusec")`` moves the parameters as eager's step does.

With ``foreach=True`` AdamW calls ``_foreach_*`` ops, which fusec decomposes
into per-tensor pointwise ops (``fusec.frontend.foreach``); the default path
calls the per-tensor ops (and lerp's ``prims.fma``) itself.  Either way the
graph compiles whole with no extern, and three steps track eager's.
"""

from __future__ import annotations

import copy

import pytest
import torch
from compile_watch import watch_compiles

pytestmark = pytest.mark.usefixtures("fresh_dynamo")

OPTIMIZERS = {
    "adamw-foreach": lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, foreach=True),
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1),
    "sgd-momentum-foreach": lambda ps: torch.optim.SGD(ps, lr=1e-2, momentum=0.9, nesterov=True, foreach=True),
}


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))


def _backward(model, x):
    model.zero_grad(set_to_none=False)
    model(x).square().mean().backward()


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_compiled_step_tracks_eager(name):
    eager = _model()
    twin = copy.deepcopy(eager)
    eager_opt, twin_opt = OPTIMIZERS[name](eager.parameters()), OPTIMIZERS[name](twin.parameters())
    step = torch.compile(twin_opt.step, backend="fusec")
    g = torch.Generator().manual_seed(1)
    with watch_compiles() as log:
        for _ in range(3):
            x = torch.randn(5, 8, generator=g)
            _backward(eager, x)
            eager_opt.step()
            _backward(twin, x)
            step()
    log.assert_whole()
    assert log.externs == [], f"{name}: parts of the step ran as torch calls: {log.externs}"
    for (n, want), got in zip(eager.named_parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6, msg=lambda m, n=n: f"{name}, {n}: {m}")
