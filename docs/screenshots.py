"""Regenerate the README's screenshots of fusec-report (needs Graphviz, chromium and Playwright):

    python docs/screenshots.py

Compiles the seed example and a GPT-2-like block (the ones the browser test opens), opens each
report in headless chromium, clicks a kernel and saves ``docs/report-seed.png`` and
``docs/report-block.png``.
"""

import shutil
import sys
import tempfile
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "tools"))
from test_report_browser import Block, compile_into, seed  # noqa: E402 (the same programs the browser test opens)

from fusec.report import picture  # noqa: E402


def shoot(browser, folder: Path, click: str, out: Path) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto((folder / "report.html").as_uri())
    page.locator(f'g.node[id="{picture.anchor(folder.name, click)}"]').click()
    page.locator(f'[id="graph-{folder.name}"]').scroll_into_view_if_needed()
    page.evaluate(f"document.getElementById('graph-{folder.name}').scrollIntoView()")
    page.screenshot(path=str(out))
    page.close()
    print(out, out.stat().st_size, "bytes")


def main() -> None:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    with tempfile.TemporaryDirectory() as tmp:
        torch.manual_seed(0)
        seed_dump = compile_into(Path(tmp) / "seed", seed, *(torch.randn(64, 512) for _ in range(4)))
        block_dump = compile_into(Path(tmp) / "block", Block().eval(), torch.randn(2, 4, 16))
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            shoot(browser, seed_dump, next(k for k in _kernels(seed_dump)), HERE / "report-seed.png")
            shoot(browser, block_dump, _kernels(block_dump)[1], HERE / "report-block.png")
            browser.close()


def _kernels(folder: Path) -> list[str]:
    import re

    return re.findall(r"fusec\.kernel @(\w+)", (folder / "final.mlir").read_text())


if __name__ == "__main__":
    main()
