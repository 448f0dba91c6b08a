"""channels-last through backend="fusec" on the CPU (``when=always``; the default ``auto`` acts on GPU graphs).

A small residual conv net, trained one step and run for inference, static and ``dynamic=True``: outputs
and every gradient against eager; the forward's saved activations are channels-last and the backward
receives them so (AOTAutograd restrides its inputs from the strides fusec reports), so the backward copies
only the images it was given, and the weights (in, and their gradients back out).
"""

import pytest
import torch

from fusec.base import shapes
from fusec.pipeline import default_pipeline_spec

ALWAYS = default_pipeline_spec().replace("channels-last", "channels-last{when=always}")


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.conv = torch.nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(8)
        self.pool = torch.nn.MaxPool2d(2)
        self.head = torch.nn.Linear(8, 5)

    def forward(self, x):
        y = torch.relu(self.bn1(self.stem(x)))
        y = self.pool(torch.relu(y + self.bn2(self.conv(y))))
        return self.head(y.mean((2, 3)))


def rand(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def remarks_in(dump, graph):
    return [line for d in dump.glob(f"{graph}_*") for line in (d / "remarks.txt").read_text().splitlines()
            if "channels-last" in line]


def train_one_step_against_eager(make, tmp_path):
    """One training step of ``make()`` through channels-last{when=always}: loss and every gradient as eager's."""
    torch.manual_seed(0)
    eager, model = make(), make()
    model.load_state_dict(eager.state_dict())
    compiled = torch.compile(model, backend="fusec", options={"pipeline": ALWAYS, "dump_dir": str(tmp_path)})
    x = rand(2, 3, 16, 16, seed=1)
    want = eager(x).square().mean()
    want.backward()
    got = compiled(x).square().mean()
    got.backward()
    torch.testing.assert_close(got, want)
    for (name, p), q in zip(model.named_parameters(), eager.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, msg=name)


def test_a_training_step_matches_eager_and_the_backward_gets_channels_last(fresh_dynamo, tmp_path):
    train_one_step_against_eager(Net, tmp_path)
    forward = (next(tmp_path.glob("forward_*")) / "final.mlir").read_text()
    backward_in = (next(tmp_path.glob("backward_*")) / "imported.mlir").read_text().splitlines()[1]
    assert "fusec.saved_outputs" in forward and "strides [512, 1, 64, 8]" in forward.split("fusec.output")[-1]
    assert "strides [512, 1, 64, 8]" in backward_in  # a saved activation, as the forward returned it
    copies = [r for r in remarks_in(tmp_path, "backward") if "channels-last-copy" in r]
    activations = [r for r in copies if "operand 0" in r or "operand 1" in r]
    assert len(activations) == 1 and "operand 1" in activations[0]  # the images, saved for the stem's weight gradient
    # and for each of the two convolutions, its weight in and its weight's gradient back out
    assert sum("operand 2" in r for r in copies) == 2 and sum("the weight's gradient" in r for r in copies) == 2


@pytest.mark.parametrize("dynamic", [False, True])
def test_inference_matches_eager(fresh_dynamo, tmp_path, dynamic):
    torch.manual_seed(0)
    model = Net().eval()
    compiled = torch.compile(model, backend="fusec", options={"pipeline": ALWAYS, "dump_dir": str(tmp_path)},
                             dynamic=dynamic)
    with torch.no_grad():
        for n, size in [(2, 16), (3, 20)][:2 if dynamic else 1]:
            x = rand(n, 3, size, size, seed=size)
            torch.testing.assert_close(compiled(x), model(x), atol=1e-5, rtol=1e-5)
    assert any("activations channels-last" in r for r in remarks_in(tmp_path, "inference"))


class ConvNeXtBlock(torch.nn.Module):
    """A stem convolution, then ConvNeXt's block: a depthwise convolution viewed NHWC for a LayerNorm and a linear
    layer over channels, viewed back NCHW and added to the block's input."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 8, 2, stride=2)
        self.dwconv = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.norm = torch.nn.LayerNorm(8)
        self.pwconv = torch.nn.Linear(8, 8)

    def forward(self, x):
        x = self.stem(x)
        y = self.pwconv(self.norm(self.dwconv(x).permute(0, 2, 3, 1)))
        return x + y.permute(0, 3, 1, 2)


def test_a_convnext_block_runs_channels_last_through_its_nhwc_views(fresh_dynamo, tmp_path):
    train_one_step_against_eager(ConvNeXtBlock, tmp_path)
    forward = remarks_in(tmp_path, "forward")
    assert sum("activations channels-last" in r for r in forward) == 2, forward  # the stem too: its view follows
    assert not any("read by fusec.permute" in r for r in forward)


def test_dense_dim_order():
    n, c, h, w = (shapes.symbol(f"s{i}") for i in range(4))
    assert shapes.dense_dim_order([n, c, h, w], [c * h * w, 1, w * c, c]) == (0, 2, 3, 1)
    assert shapes.dense_dim_order([2, 3, 4], [12, 4, 1]) == (0, 1, 2)
    assert shapes.dense_dim_order([2, 3, 1, 1], [3, 1, 3, 3]) == (2, 3, 0, 1)  # size-1 dims first
    assert shapes.dense_dim_order([4, 4], [1, 8]) is None  # a gap: not dense
