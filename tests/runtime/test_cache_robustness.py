"""The kernel cache under trouble: two processes at once, corrupt entries, a read-only folder, a deleted cache.

Each case checks the results against torch and the warnings fusec gives (one, or none): the disk cache is a
convenience, never a reason to crash or to compute something else.
"""

from __future__ import annotations

import inspect
import multiprocessing
import os
import shutil
import time
import warnings
from pathlib import Path

import pytest
import torch

from fusec.passes.form_kernels import FormKernels
from fusec.runtime import compile_module, kernel_cache
from fusec.testing import apply_passes, graph_text, parse, tensor_type


def _graph(scale: float):
    """x * scale + y, then its row sums: two kernels; ``scale`` makes the sources new to this process."""
    t, r = tensor_type("s0, 8"), tensor_type("s0")
    body = f"""    %c = fusec.constant {scale} : !fusec.tensor<[], f32>
    %m = fusec.pointwise "mul" %x, %c : ({t}, !fusec.tensor<[], f32>) -> {t}
    %a = fusec.pointwise "add" %m, %y : ({t}, {t}) -> {t}
    %s = fusec.reduce "sum" %a dims [1] : {t} -> {r}
    fusec.output %a, %s : {t}, {r}"""
    module = parse(graph_text(f"%x : {t}, %y : {t}", f"{t}, {r}", body))
    return apply_passes(module, FormKernels())


def _check_runs(compiled, scale: float, rows: int = 5) -> None:
    gen = torch.Generator().manual_seed(rows)
    x, y = torch.randn(rows, 8, generator=gen), torch.randn(rows, 8, generator=gen)
    a, s = compiled([x, y])
    torch.testing.assert_close(a, x * scale + y)
    torch.testing.assert_close(s, (x * scale + y).sum(1))


def _kernel_files(folder: Path) -> list[Path]:
    return sorted((folder / "kernels").glob("fusec_*.py"))


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """A fresh cache folder, and no kernel module loaded earlier in this process (as in a new process)."""
    monkeypatch.setenv("FUSEC_CACHE_DIR", str(tmp_path / "cache"))
    _as_a_new_process(monkeypatch)
    return tmp_path / "cache"


def _as_a_new_process(monkeypatch) -> None:
    """Forget the kernel modules (by source) and the kernels shared by body that this process loaded."""
    monkeypatch.setattr(kernel_cache, "_modules", {})
    monkeypatch.setattr(kernel_cache, "_shared", {})


# ---------------------------------------------------------------- two processes


def _compile_in_a_process(scale: float, barrier: str, me: int) -> str:
    """In a child: wait for the other child, then compile the same graph, run it, rewrite its cache entries."""
    Path(barrier, f"ready-{me}").touch()
    deadline = time.monotonic() + 120
    while len(list(Path(barrier).glob("ready-*"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.005)
    compiled = compile_module(_graph(scale), {"s0": 5})
    for rows in (1, 5, 33):
        _check_runs(compiled, scale, rows)
    for kernel in compiled.kernels:
        for _ in range(50):  # both processes replace the same files again and again
            kernel_cache._write_atomically(kernel_cache.cache_dir() / "kernels",
                                           kernel_cache.kernel_file(kernel.source), kernel.source)
    return "ok"


@pytest.mark.slow
def test_two_processes_compiling_the_same_graph_at_once(cache, tmp_path):
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        results = pool.starmap(_compile_in_a_process, [(1.25, str(barrier), 0), (1.25, str(barrier), 1)], chunksize=1)
    assert results == ["ok", "ok"]
    files = _kernel_files(cache)
    assert files and all(kernel_cache.source_hash(f.read_text()) == f.stem[6:] for f in files)
    assert not [p for p in (cache / "kernels").iterdir() if p.suffix == ".tmp"]  # no temporary file left behind


# ---------------------------------------------------------------- corrupt entries


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty", "other kernel"])
def test_a_corrupt_entry_is_detected_and_rebuilt_with_one_warning(cache, monkeypatch, damage):
    compile_module(_graph(2.5), {"s0": 5})([torch.randn(3, 8), torch.randn(3, 8)])
    victim = _kernel_files(cache)[0]
    text = victim.read_text()
    victim.write_bytes({"truncated": text[:len(text) // 2].encode(), "garbage": b"\xff\x00\xfe" * 100, "empty": b"",
                        "other kernel": _kernel_files(cache)[1].read_bytes()}[damage])
    _as_a_new_process(monkeypatch)  # as a new process would find the cache
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = compile_module(_graph(2.5), {"s0": 5})
        _check_runs(compiled, 2.5)
    assert [str(w.message) for w in caught] == [str(caught[0].message)] and str(victim) in str(caught[0].message)
    assert "rebuilt it" in str(caught[0].message)
    assert victim.read_text() == text


# ---------------------------------------------------------------- a folder that cannot be written


def _refuse_writes(monkeypatch, cache: Path) -> None:
    """A read-only folder: by its mode where that binds (not for root), else by refusing to create files in it."""
    cache.mkdir(parents=True)
    (cache / "kernels").mkdir()
    if os.geteuid() != 0:
        (cache / "kernels").chmod(0o555)
    else:
        def read_only(*args, **kwargs):
            raise PermissionError(13, "Read-only file system", str(cache / "kernels"))

        monkeypatch.setattr(kernel_cache.tempfile, "mkstemp", read_only)


def test_a_read_only_cache_folder_works_uncached_with_one_warning(cache, monkeypatch):
    _refuse_writes(monkeypatch, cache)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for scale in (3.5, 4.5):  # four kernels, one warning
            compiled = compile_module(_graph(scale), {"s0": 5})
            _check_runs(compiled, scale)
    (cache / "kernels").chmod(0o755)
    assert len(caught) == 1, [str(w.message) for w in caught]
    assert "cannot be written" in str(caught[0].message) and "without caching them" in str(caught[0].message)
    assert _kernel_files(cache) == []
    kernel = compiled.kernels[0]  # tracebacks and triton.jit still find the source
    assert kernel.name in inspect.getsource(getattr(kernel_cache.load_kernel_module(kernel.source, True), kernel.name).fn)


def test_a_cache_folder_that_is_a_file_works_uncached(tmp_path, monkeypatch):
    (tmp_path / "cache").write_text("not a folder")
    monkeypatch.setenv("FUSEC_CACHE_DIR", str(tmp_path / "cache"))
    _as_a_new_process(monkeypatch)
    with pytest.warns(RuntimeWarning, match="cannot be written"):
        _check_runs(compile_module(_graph(5.5), {"s0": 5}), 5.5)


# ---------------------------------------------------------------- a cache deleted while running


def test_the_cache_deleted_while_a_process_runs(cache, monkeypatch):
    compiled = compile_module(_graph(6.5), {"s0": 5})
    _check_runs(compiled, 6.5)
    kernel = compiled.kernels[0]
    shutil.rmtree(cache)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to warn about: a missing cache is an empty one
        _check_runs(compiled, 6.5, rows=17)  # compiled kernels need no file
        fn = getattr(kernel_cache.load_kernel_module(kernel.source, True), kernel.name).fn
        assert kernel.name in inspect.getsource(fn)  # nor do tracebacks and triton.jit's source
        _check_runs(compile_module(_graph(7.5), {"s0": 5}), 7.5)  # new kernels recreate the folder
        _as_a_new_process(monkeypatch)
        _check_runs(compile_module(_graph(6.5), {"s0": 5}), 6.5)  # and old ones are written again
    assert len(_kernel_files(cache)) == 4
