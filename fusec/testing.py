"""Helpers for tests: parse/print IR text, random inputs for a graph, run passes."""

from __future__ import annotations

import io

import torch
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.parser import Parser
from xdsl.printer import Printer

from fusec import interpreter, shapes
from fusec.dialects.fusec import Fusec, GraphOp


def context() -> Context:
    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(Fusec)
    return ctx


def parse(text: str) -> ModuleOp:
    module = Parser(context(), text).parse_module()
    module.verify()
    return module


def print_ir(module) -> str:
    out = io.StringIO()
    Printer(out).print_op(module)
    return out.getvalue()


def random_inputs(module: ModuleOp | GraphOp, sizes: dict[str, int], seed: int = 0, device: str = "cpu") -> list[torch.Tensor]:
    """Random tensors for a graph's inputs (normal floats, small non-negative ints), sizes bound by ``sizes``."""
    graph = interpreter.find_graph(module)
    gen = torch.Generator().manual_seed(seed)
    out = []
    for arg in graph.block.args:
        shape = [shapes.evaluate(d, sizes) for d in arg.type.dims]
        dtype = interpreter.torch_dtype(arg.type)
        if dtype.is_floating_point:
            t = torch.randn(shape, generator=gen).to(dtype)
        elif dtype == torch.bool:
            t = torch.rand(shape, generator=gen) > 0.5
        else:
            t = torch.randint(0, 4, shape, generator=gen).to(dtype)
        out.append(t.to(device))
    return out


def apply_passes(module: ModuleOp, *passes) -> ModuleOp:
    ctx = context()
    for p in passes:
        p.apply(ctx, module)
        module.verify()
    return module


def assert_same_results(before: list[torch.Tensor], after: list[torch.Tensor], **tol) -> None:
    assert len(before) == len(after)
    for a, b in zip(before, after):
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
        torch.testing.assert_close(a, b, **tol)


