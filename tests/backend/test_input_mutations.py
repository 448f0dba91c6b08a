"""Inputs a compiled graph writes (AOTAutograd's kept input mutations): a batch norm's running statistics stored
in place by the kernels that compute them, every other write copied after the call; results and the written
inputs as eager's, static and dynamic=True, on the Triton interpreter here (on a GPU: tests/lowering/test_gpu_run)."""

from __future__ import annotations

import re

import pytest
import torch

from fusec.base import remarks

pytestmark = [pytest.mark.usefixtures("fresh_dynamo"),  # tests/conftest.py
              pytest.mark.filterwarnings("error:fusec. graph .* runs with torch")]


def _conv_bn_relu(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU())


@pytest.mark.parametrize("dynamic", [False, True])
def test_batch_norm_running_statistics_are_written_in_place_and_match_eager(tmp_path, dynamic):
    model, reference = _conv_bn_relu(), _conv_bn_relu()
    compiled = torch.compile(model, backend="fusec", dynamic=dynamic, options={"dump_dir": str(tmp_path)})
    gen = torch.Generator().manual_seed(1)
    for step, batch in enumerate([4, 4, 3] if dynamic else [4, 4, 4]):
        x = torch.randn(batch, 3, 12, 12, generator=gen, requires_grad=True)
        got, want = compiled(x), reference(x)
        torch.testing.assert_close(got, want)
        got.square().sum().backward()
        want.square().sum().backward()
        for (name, a), (_, b) in zip(model.named_buffers(), reference.named_buffers(), strict=True):
            torch.testing.assert_close(a, b, msg=f"{name} after step {step}")
        torch.testing.assert_close(model[0].weight.grad, reference[0].weight.grad, atol=1e-4, rtol=1e-3)  # summed in another order
    model.eval()
    reference.eval()
    torch.testing.assert_close(compiled(x), reference(x))
    # The forward's kernels store the running mean, variance and step count into the buffers themselves.
    forward = sorted(tmp_path.glob("forward_*"))[0]  # the first forward compiled (names count on across tests)
    launcher = (forward / "launcher.py").read_text()
    assert len(re.findall(r"^    buf\d+ = arg\d+$", launcher, re.M)) == 3
    mutations = re.search(r"fusec.input_mutations = (\[.*?\]\])", (forward / "final.mlir").read_text())
    assert mutations is not None and mutations.group(1).count(", 1 : i64]") == 3


def _check(fn, make_inputs, dynamic=False):
    compiled = torch.compile(fn, backend="fusec", dynamic=dynamic)
    for seed in (0, 1):
        mine, theirs = make_inputs(seed), make_inputs(seed)
        got, want = compiled(*mine), fn(*theirs)
        torch.testing.assert_close(got, want)
        for a, b in zip(mine, theirs, strict=True):
            torch.testing.assert_close(a, b)


def _randn(*shape, dtype=torch.float32):
    return lambda seed: [torch.randn(*s, generator=torch.Generator().manual_seed(seed + i)).to(dtype)
                         for i, s in enumerate(shape)]


def test_an_input_written_and_read_after_is_copied_after_the_call():
    def fn(x, w):
        y = (x * w).sum(1)  # reads x; the write below must not land before it
        x.mul_(2.0)
        return y + x[:, 0]

    with remarks.collect() as log:
        _check(fn, _randn((6, 5), (6, 5)))
    assert not any(r.code == "copied-mutation" and "type differs" in r.message for r in log.remarks)


def test_a_write_that_casts_or_broadcasts_is_copied():
    def fn(x, y):
        x.copy_(y * 3)  # f32 into bf16, [5] into [4, 5]
        return y + 1

    _check(fn, lambda seed: [torch.zeros(4, 5, dtype=torch.bfloat16), torch.randn(5, generator=torch.Generator().manual_seed(seed))])


@pytest.mark.parametrize("dynamic", [False, True])
def test_an_input_written_in_place_and_returned(dynamic):
    def fn(x, y):
        x.add_(y.sigmoid())
        return x * 2, x

    _check(fn, _randn((7, 3), (7, 3)), dynamic=dynamic)
