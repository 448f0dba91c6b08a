"""Ops whose results mix tensors with SymInts, ints and None compile whole: the sizes are symbols the graph uses.

On the GPU, eager attention calls ``aten._scaled_dot_product_cudnn_attention`` (and
the flash and memory-efficient kernels), which return ``(Tensor, Tensor, ...,
SymInt max_q, SymInt max_k, ...)``.  These CPU stand-ins, registered with
``torch.library`` (a CPU kernel and a fake one), have the same kind of schema; the
compiled functions use their int results in shapes and arithmetic.
"""

from __future__ import annotations

import pytest
import torch
from compile_watch import watch_compiles

from fusec.dialects import fusec as F
from fusec.frontend.importer import import_graph

pytestmark = pytest.mark.usefixtures("fresh_dynamo")

_LIB = torch.library.Library("fusec_mixed", "DEF")
_LIB.define("attention(Tensor q, Tensor k, Tensor v) -> (Tensor, Tensor, SymInt, SymInt, Tensor?)")
_LIB.define("chunks(Tensor x, int parts) -> (Tensor[], SymInt, int, Tensor?)")


def _attention(q, k, v):
    s = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5
    return s.softmax(-1) @ v, s.logsumexp(-1), q.shape[-2], k.shape[-2], None


def _attention_fake(q, k, v):
    return q.new_empty(q.shape[:-1] + v.shape[-1:]), q.new_empty(q.shape[:-1]), q.shape[-2], k.shape[-2], None


def _chunks(x, parts):
    return [c.clone() for c in x.chunk(parts, -1)], x.shape[-1] // parts, parts, None


def _chunks_fake(x, parts):
    width = x.shape[-1] // parts
    return [x.new_empty(x.shape[:-1] + (width,)) for _ in range(parts)], width, parts, None


for _name, _cpu, _fake in (("attention", _attention, _attention_fake), ("chunks", _chunks, _chunks_fake)):
    _LIB.impl(_name, _cpu, "CPU")
    torch.library.register_fake(f"fusec_mixed::{_name}", _fake, lib=_LIB)


def attention_then_sizes(q, k, v):
    out, lse, max_q, max_k, nothing = torch.ops.fusec_mixed.attention(q, k, v)
    assert nothing is None
    # max_q in a shape, max_k in arithmetic
    return out.reshape(q.shape[0], max_q * out.shape[-1]) * max_k + lse.sum(-1, keepdim=True) / max_q


def chunks_then_sizes(x):
    (a, b), width, parts, nothing = torch.ops.fusec_mixed.chunks(x.sin(), 2)
    assert nothing is None and parts == 2
    return (a * b).reshape(-1, width * parts // 2) + width


def _inputs(seed, *shapes):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*s, generator=g) for s in shapes]


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_sizes_from_an_attention_like_op_flow_into_the_graph(dynamic):
    compiled = torch.compile(attention_then_sizes, backend="fusec", dynamic=dynamic)
    with watch_compiles() as log:
        for seed, (b, m, n) in enumerate([(2, 5, 6), (3, 7, 4)]):
            q, k, v = _inputs(seed, (b, m, 8), (b, n, 8), (b, n, 8))
            torch.testing.assert_close(compiled(q, k, v), attention_then_sizes(q, k, v))
    log.assert_whole()
    assert log.count("inference") == (1 if dynamic else 2)  # the second size reuses the dynamic artifact


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_a_list_of_tensors_beside_sizes_and_none(dynamic):
    compiled = torch.compile(chunks_then_sizes, backend="fusec", dynamic=dynamic)
    with watch_compiles() as log:
        for seed, shape in enumerate([(3, 8), (5, 12)]):
            (x,) = _inputs(seed, shape)
            torch.testing.assert_close(compiled(x), chunks_then_sizes(x))
    log.assert_whole()


def test_the_int_results_import_as_size_expressions():
    """No extern result stands for an int: the SymInts are expressions over the inputs' size symbols."""
    gm = torch.fx.experimental.proxy_tensor.make_fx(attention_then_sizes, tracing_mode="symbolic")(
        *_inputs(0, (2, 5, 8), (2, 6, 8), (2, 6, 8)))
    module, info = import_graph(gm, [], "mixed")
    externs = [op for op in module.walk() if isinstance(op, F.ExternOp)]
    assert [e.target.data for e in externs] == ["fusec_mixed.attention.default"]
    assert list(externs[0].result_positions) == [0, 1]  # out and lse; max_q, max_k and None are not results
    assert all(isinstance(r.type, F.TensorType) for r in externs[0].results)
    # every symbol is an input's size: none was made for the int results
    assert set(info.symbols) == {str(s) for t in info.input_types for d in t.dims for s in d.free_symbols}


@torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True)
def test_a_data_dependent_size_is_the_one_fallback_and_the_watch_sees_it():
    def positives(x):
        return x[torch.nonzero(x > 0).squeeze(1)] * 2  # how many: known only at run time

    compiled = torch.compile(positives, backend="fusec")
    (x,) = _inputs(0, (12,))
    with watch_compiles() as log, pytest.warns(UserWarning, match="runs with torch.*data-dependent"):
        torch.testing.assert_close(compiled(x), positives(x))
    assert len(log.eager) == 1 and "data-dependent" in log.eager[0]
    with pytest.raises(AssertionError, match="ran with torch"):
        log.assert_whole()
