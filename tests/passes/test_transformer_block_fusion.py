"""A 2-layer GPT-2-style block through ``torch.compile(backend="fusec")``: results match eager, and the
fusion passes leave at most a measured number of launches (issue 12: every [B, T, C] <-> [B*T, C] view
between ops used to stop a fusion).

Run as a script to print the launch count and the remark counts by code (the before/after numbers of
the report): ``python tests/passes/test_transformer_block_fusion.py``.
"""

from __future__ import annotations

import collections
import math
import sys
import tempfile
from pathlib import Path

import pytest
import torch
from torch import nn

from fusec.testing import dumped_launches_and_remarks

B, T, C, HEADS, LAYERS = 2, 8, 32, 2, 2
MAX_LAUNCHES = 13  # measured: 13 kernels and combos (15 before cross-domain inlining, 29 before canonical index arithmetic)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc, self.out = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
        self.register_buffer("causal", torch.tril(torch.ones(T, T, dtype=torch.bool)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // HEADS))
        att = torch.softmax(att.masked_fill(~self.causal[:t, :t], float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.proj(y)
        return x + self.out(nn.functional.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Gpt2(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(*[Block() for _ in range(LAYERS)])
        self.ln_f = nn.LayerNorm(C)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln_f(self.blocks(x))


def compile_and_count(dump: Path, fn=None, inputs=None, dynamic: bool = False) -> tuple[int, collections.Counter]:
    """Compile ``fn`` (the model by default), check it against eager, and return (launches, remark counts by code)."""
    torch.manual_seed(0)
    fn = fn or Gpt2().eval()
    inputs = inputs or [torch.randn(B, T, C)]
    torch._dynamo.reset()
    with torch.no_grad():
        got = torch.compile(fn, backend="fusec", dynamic=dynamic, options={"dump_dir": str(dump)})(*inputs)
        want = fn(*inputs)
    torch._dynamo.reset()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    return dumped_launches_and_remarks(dump)


@pytest.mark.slow
def test_gpt2_block_fuses(tmp_path, fresh_dynamo):
    launches, codes = compile_and_count(tmp_path)
    assert launches <= MAX_LAUNCHES, codes
    # A view between two ops no longer hides that they read the same elements.
    assert codes["reduction-fusion: index-mismatch"] == 0, codes


def _ln_after_add(x, y, w, b):
    return nn.functional.layer_norm(x + y, x.shape[-1:], w, b)


def _transformer_tail(x, w1, b1, w2, b2, bias):
    """The issue's "small transformer layer's tail": two layer norms, GELU, a residual, a mean and a max."""
    h = nn.functional.gelu(nn.functional.layer_norm(x, x.shape[-1:], w1, b1) + bias)
    y = nn.functional.layer_norm(h + x, x.shape[-1:], w2, b2)
    return y, h.mean(-1), y.amax(-1)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize(("fn", "activations", "vectors"), [(_ln_after_add, 2, 2), (_transformer_tail, 1, 5)],
                         ids=["ln_after_add", "tail"])
def test_layer_norms_over_b_t_c_are_one_kernel(tmp_path, fresh_dynamo, fn, activations, vectors, dynamic):
    """Over [B, T, C] the statistics are read back through [B, T, 1] views: 3 and 5 kernels before issue 12.1."""
    gen = torch.Generator().manual_seed(1)
    inputs = [torch.randn(B, T, C, generator=gen) for _ in range(activations)]
    inputs += [torch.randn(C, generator=gen) for _ in range(vectors)]
    launches, codes = compile_and_count(tmp_path, fn, inputs, dynamic)
    assert launches == 1, codes


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        n, counts = compile_and_count(Path(folder))
    print(f"launches: {n}")
    for code, count in sorted(counts.items()):
        print(f"  {count:3d}  {code}")
    sys.exit(0)
