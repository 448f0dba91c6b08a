"""The report in a real browser (headless chromium through Playwright): real compiles of the seed example and of a
small GPT-2-like block; no console errors, every kernel of the final IR in the picture, a click shows a kernel's
remarks and source.  Skipped where chromium or Playwright is missing (CI installs both, allowed to fail)."""

import re
import shutil
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as Fn

from fusec.report import picture

playwright = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (pip install '.[browser]')")
CHROMIUM = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary (apt-get install chromium)"),
    pytest.mark.skipif(picture.dot_binary() is None, reason="Graphviz's dot is not installed"),
]


def seed(t1, t2, t3, t4):
    return t1.sum(1), t2.max(1).values, t3.min(1).values, t4.sum(1)


class Block(nn.Module):
    """GPT-2's transformer block in plain torch: layer norms, causal attention, a tanh-GELU MLP, residuals."""

    def __init__(self, dim: int = 16, heads: int = 2):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc, self.out = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = (y.view(b, t, self.heads, c // self.heads).transpose(1, 2) for y in self.qkv(self.ln1(x)).split(c, dim=2))
        att = (q @ k.transpose(-2, -1)) / (c // self.heads) ** 0.5
        att = att.masked_fill(~torch.ones(t, t, dtype=torch.bool).tril(), float("-inf")).softmax(-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, c))
        return x + self.out(Fn.gelu(self.fc(self.ln2(x)), approximate="tanh"))


def compile_into(dump: Path, fn, *inputs) -> Path:
    torch._dynamo.reset()
    with torch.no_grad():
        got = torch.compile(fn, backend="fusec", options={"dump_dir": str(dump)})(*inputs)
        torch.testing.assert_close(got, fn(*inputs), rtol=1e-4, atol=1e-4)
    torch._dynamo.reset()
    (folder,) = [p for p in dump.iterdir() if p.is_dir()]
    return folder


@pytest.fixture(scope="module")
def browser():
    with playwright.sync_playwright() as p:
        # --no-sandbox: CI containers run as root, where chromium's sandbox refuses to start.
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


def check_report(browser, folder: Path, screenshot: Path) -> None:
    final = (folder / "final.mlir").read_text()
    kernels = re.findall(r"fusec\.kernel @(\w+)", final)
    combos = re.findall(r"fusec\.combo @(\w+)", final)
    assert kernels
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto((folder / "report.html").as_uri())
    in_picture = set(page.eval_on_selector_all(".picture svg g.node, .picture svg g.cluster", "els => els.map(e => e.id)"))
    assert {picture.anchor(folder.name, k) for k in kernels + combos} <= in_picture
    for name in kernels:
        anchor = picture.anchor(folder.name, name)
        page.locator(f'g.node[id="{anchor}"]').click()
        shown = page.eval_on_selector_all(".details:not([hidden])", "els => els.map(e => e.id)")
        assert shown == [f"details-{anchor}"], (name, shown)
        details = page.locator(f'[id="details-{anchor}"]')
        assert "@triton.jit" in details.locator("pre.source").inner_text()
        assert "Remarks" in details.inner_text() or "No remarks name it." in details.inner_text()
    page.screenshot(path=str(screenshot))
    assert screenshot.stat().st_size > 10_000
    assert not errors, errors
    page.close()


def test_seed_report_in_chromium(browser, tmp_path):
    torch.manual_seed(0)
    folder = compile_into(tmp_path / "dump", seed, *(torch.randn(8, 32) for _ in range(4)))
    check_report(browser, folder, tmp_path / "seed.png")


def test_transformer_block_report_in_chromium(browser, tmp_path):
    torch.manual_seed(0)
    folder = compile_into(tmp_path / "dump", Block().eval(), torch.randn(2, 4, 16))
    check_report(browser, folder, tmp_path / "block.png")
    # A kernel with remarks shows them, by code, after a click.
    page = browser.new_page()
    page.goto((folder / "report.html").as_uri())
    with_remarks = page.eval_on_selector_all(".details", "els => els.filter(e => e.querySelector('table.remarks')).map(e => e.id)")
    assert with_remarks
    anchor = with_remarks[0].removeprefix("details-")
    page.locator(f'g.node[id="{anchor}"], g.cluster[id="{anchor}"]').first.click()
    table = page.locator(f'[id="details-{anchor}"] table.remarks')
    assert table.is_visible() and re.search(r"[a-z]+-[a-z]+", table.inner_text())
    page.close()
