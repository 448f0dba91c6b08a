"""A small ResNet-style block (convolutions as externs, batch norm, relu, a residual add) through
``torch.compile(backend="fusec")``: results match eager, and batch norm's per-channel [C] scale and
shift are recomputed inside the NCHW pointwise kernels instead of launching kernels of their own
(issue 12.2: ``vertical-fusion: domain-mismatch [64] vs [N*64*H*W]``).

Run as a script to print the launch counts (eval and train) and the remark counts by code.
"""

from __future__ import annotations

import collections
import sys
import tempfile
from pathlib import Path

import pytest
import torch
from torch import nn

from fusec.testing import dumped_launches_and_remarks

N, C, HW = 2, 8, 6
# Measured: eval 2 launches (4 before cross-domain inlining), train 4 (4 before; the 4 domain-mismatch remarks are
# gone, but each batch-statistics reduction stays a kernel of its own: reduction-fusion index-mismatch, issue 12.3).
MAX_LAUNCHES = {"eval": 2, "train": 4}


class BasicBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = (nn.Conv2d(C, C, 3, padding=1, bias=False) for _ in range(2))
        self.bn1, self.bn2 = nn.BatchNorm2d(C), nn.BatchNorm2d(C)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + x)


def _randomise(block: BasicBlock) -> BasicBlock:
    gen = torch.Generator().manual_seed(2)
    for bn in (block.bn1, block.bn2):  # running statistics and affine parameters away from 0 and 1
        bn.running_mean.copy_(torch.randn(C, generator=gen))
        bn.running_var.copy_(torch.rand(C, generator=gen) + 0.5)
        bn.weight.data.copy_(torch.randn(C, generator=gen))
        bn.bias.data.copy_(torch.randn(C, generator=gen))
    return block


def compile_and_count(dump: Path, mode: str) -> tuple[int, collections.Counter]:
    """Compile the block in ``mode`` ("eval"/"train"), check it (and in train the running statistics)
    against eager, and return (launches in the last graph, remark counts by code)."""
    torch.manual_seed(0)
    block = _randomise(BasicBlock())
    twin = _randomise(BasicBlock())
    twin.load_state_dict(block.state_dict())
    block.train(mode == "train")
    twin.train(mode == "train")
    x = torch.randn(N, C, HW, HW)
    torch._dynamo.reset()
    with torch.no_grad():
        got = torch.compile(block, backend="fusec", options={"dump_dir": str(dump)})(x)
        want = twin(x)
    torch._dynamo.reset()
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    for name, value in twin.state_dict().items():
        torch.testing.assert_close(block.state_dict()[name], value, rtol=1e-4, atol=1e-4, msg=name)
    return dumped_launches_and_remarks(dump)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["eval", "train"])
def test_resnet_block_fuses(tmp_path, fresh_dynamo, mode):
    launches, codes = compile_and_count(tmp_path, mode)
    assert launches <= MAX_LAUNCHES[mode], codes
    assert codes["vertical-fusion: domain-mismatch"] == 0, codes


if __name__ == "__main__":
    for mode in ("eval", "train"):
        with tempfile.TemporaryDirectory() as folder:
            n, counts = compile_and_count(Path(folder), mode)
        print(f"{mode}: launches: {n}")
        for code, count in sorted(counts.items()):
            print(f"  {count:3d}  {code}")
    sys.exit(0)
