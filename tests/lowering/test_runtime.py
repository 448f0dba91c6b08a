"""fusec.runtime: the kernel cache (memory and disk), the interpreter switch, compiled graphs."""

import os

import pytest
import torch
import triton
from kernel_cases import ROW_SUM_TEXT, compile_text, randn

from fusec.runtime import kernel_cache


def _source(tag: str) -> str:
    return f'''# a test kernel ({tag})
import triton
import triton.language as tl


@triton.jit
def double(in_ptr0, out_ptr0, xnumel, XBLOCK: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    xmask = xindex < xnumel
    tl.store(out_ptr0 + xindex, tl.load(in_ptr0 + xindex, xmask) * 2, xmask)
'''


def test_sources_are_cached_by_hash_in_the_configured_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSEC_CACHE_DIR", str(tmp_path))
    source = _source("cache folder")
    path = kernel_cache.kernel_file(source)
    assert path.parent == tmp_path / "kernels" and path.name == f"fusec_{kernel_cache.source_hash(source)}.py"
    assert path.read_text() == source
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left behind


def test_a_corrupt_cache_entry_is_rewritten(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSEC_CACHE_DIR", str(tmp_path))
    source = _source("corrupt entry")
    path = kernel_cache.kernel_file(source)
    path.write_text(source[:40])  # truncated, as by a crash of an older writer
    with pytest.warns(RuntimeWarning, match="was corrupt .* rebuilt it"):
        assert kernel_cache.kernel_file(source) == path and path.read_text() == source
    path.write_bytes(b"\xff\xfe not text")
    with pytest.warns(RuntimeWarning, match="was corrupt .* rebuilt it"):
        module = kernel_cache.load_kernel_module(source, interpret=True)
    a = randn(10)
    out = torch.empty(10)
    module.double[(1,)](a, out, 10, XBLOCK=16)
    torch.testing.assert_close(out, a * 2)


def test_each_mode_loads_a_source_once():
    source = _source("modes")
    interp = kernel_cache.load_kernel_module(source, interpret=True)
    gpu = kernel_cache.load_kernel_module(source, interpret=False)  # decorating needs no GPU
    assert kernel_cache.load_kernel_module(source, interpret=True) is interp
    assert kernel_cache.load_kernel_module(source, interpret=False) is gpu
    assert type(interp.double).__name__ == "InterpretedFunction"
    assert type(gpu.double).__name__ == "JITFunction"


def test_the_interpreter_switch_restores_triton_and_the_environment(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    before = triton.knobs.runtime.interpret
    with kernel_cache.triton_interpret(True):
        assert triton.knobs.runtime.interpret and os.environ["TRITON_INTERPRET"] == "1"
    assert triton.knobs.runtime.interpret == before and "TRITON_INTERPRET" not in os.environ
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with kernel_cache.triton_interpret(True):
        pass
    assert os.environ["TRITON_INTERPRET"] == "0"


def test_compiled_graph_runs_on_cpu_under_the_interpreter_and_keeps_its_launcher():
    module, compiled = compile_text(ROW_SUM_TEXT, {"s0": 4})
    for rows in (1, 4, 7):
        a = randn(rows, 37, seed=rows)
        torch.testing.assert_close(compiled([a])[0], a.sum(1))
    assert list(compiled._calls) == [True]  # one interpreted launcher, built once


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.gpu
def test_compiled_graph_on_the_gpu_matches_the_interpreter():
    module, compiled = compile_text(ROW_SUM_TEXT, {"s0": 4})
    a = randn(33, 37)
    got = compiled([a.cuda()])[0]
    torch.testing.assert_close(got.cpu(), compiled([a])[0], rtol=1e-5, atol=1e-5)
