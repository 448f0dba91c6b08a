"""Compiled functions and compilation from several threads at once: correct results, no crash."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from fusec.passes.form_kernels import FormKernels
from fusec.runtime import compile_module
from fusec.testing import apply_passes, graph_text, parse, tensor_type

pytestmark = pytest.mark.usefixtures("fresh_dynamo")  # tests/conftest.py

THREADS = 4


def _together(fn, count: int = THREADS) -> list:
    """``fn(i)`` in ``count`` threads released at the same moment; their results (a thread's error re-raised)."""
    start = threading.Barrier(count)

    def run(i):
        start.wait()
        return fn(i)

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(run, range(count)))


def _inputs(i: int, rows: int = 7):
    gen = torch.Generator().manual_seed(100 + i)
    return torch.randn(rows, 16, generator=gen), torch.randn(16, generator=gen)


def softmax_rows(x, y):
    z = torch.tanh(x) * y
    return torch.softmax(z, dim=1), z.amax(1)


def test_one_compiled_function_called_from_several_threads():
    compiled = torch.compile(softmax_rows, backend="fusec")
    compiled(*_inputs(0))  # compiled once, then called from every thread at once

    def calls(i):
        for k in range(3):
            x, y = _inputs(10 * i + k)
            for got, want in zip(compiled(x, y), softmax_rows(x, y), strict=True):
                torch.testing.assert_close(got, want)
        return i

    assert _together(calls) == list(range(THREADS))


def test_a_compiled_graph_first_called_from_several_threads_at_once():
    """The first call builds the launcher and loads the kernels: every thread may be the first."""
    t, r = tensor_type("s0, 16"), tensor_type("s0")
    body = f"""    %e = fusec.pointwise "exp" %x : ({t}) -> {t}
    %s = fusec.reduce "sum" %e dims [1] : {t} -> {r}
    fusec.output %e, %s : {t}, {r}"""
    compiled = compile_module(apply_passes(parse(graph_text(f"%x : {t}", f"{t}, {r}", body)), FormKernels()), {"s0": 7})

    def call(i):
        x = _inputs(i, rows=3 + i)[0]
        e, s = compiled([x])
        torch.testing.assert_close(e, x.exp())
        torch.testing.assert_close(s, x.exp().sum(1))

    _together(call)


def test_two_functions_compiled_from_two_threads_at_once():
    def norm_rows(x, y):
        return (x - x.mean(1, keepdim=True)) / (x.var(1, keepdim=True) + 1e-5).sqrt() + y

    functions = [softmax_rows, norm_rows]

    def compile_and_call(i):
        fn = functions[i]
        compiled = torch.compile(fn, backend="fusec", dynamic=i == 1)
        for k in range(2):
            x, y = _inputs(k, rows=5 + 4 * k)
            got, want = compiled(x, y), fn(x, y)
            for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,),
                            strict=True):
                torch.testing.assert_close(g, w)

    _together(compile_and_call, count=2)
