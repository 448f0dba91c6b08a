"""Shared by the importer tests: trace a function to an aten graph, import it, run it, print it."""

from __future__ import annotations

from io import StringIO

import torch
from torch._dynamo.backends.common import aot_autograd
from torch.fx.experimental.proxy_tensor import make_fx
from xdsl.printer import Printer

from fusec.base import remarks
from fusec.frontend.decompositions import fusec_decompositions
from fusec.frontend.importer import import_graph
from fusec.pipeline import parse_module
from fusec.registry import make_context
from fusec.runtime import interpreter


def trace(fn, *inputs, dynamic: bool = False) -> torch.fx.GraphModule:
    """The aten graph of ``fn`` with fusec's decompositions (symbolic sizes when ``dynamic``)."""
    mode = "symbolic" if dynamic else "fake"
    decomposed = make_fx(fn, decomposition_table=fusec_decompositions(), tracing_mode=mode)(*inputs)
    # Decompositions may use in-place ops; AOTAutograd functionalizes them away, and so does this.
    return make_fx(torch.func.functionalize(decomposed, remove="mutations"), tracing_mode=mode)(*inputs)


def capture(fn, *inputs, dynamic: bool = False, backward: bool = False) -> list[tuple[torch.fx.GraphModule, list]]:
    """The aten graphs torch.compile + AOTAutograd hand a backend (forward, then backward if asked)."""
    graphs = []

    def keep(gm, example_inputs):
        graphs.append((gm, list(example_inputs)))
        from functorch.compile import make_boxed_func

        return make_boxed_func(gm.forward)

    backend = aot_autograd(fw_compiler=keep, bw_compiler=keep, decompositions=fusec_decompositions())
    out = torch.compile(fn, backend=backend, dynamic=dynamic, fullgraph=True)(*inputs)
    if backward:
        (out if isinstance(out, torch.Tensor) else out[0]).backward()
    return graphs


def import_and_run(fn, *inputs, dynamic: bool = False):
    """(module, info, remark log, outputs of the interpreter) for ``fn`` on ``inputs``."""
    gm = trace(fn, *inputs, dynamic=dynamic)
    with remarks.collect() as log:
        module, info = import_graph(gm, inputs)
    module.verify()
    symbols = info.bind_symbols(inputs)
    outputs = interpreter.run(module, info.tensor_inputs(inputs, symbols))
    return module, info, log, info.assemble_outputs(outputs, symbols)


def ir_text(module, locations: bool = False) -> str:
    out = StringIO()
    Printer(stream=out, print_debuginfo=locations).print_op(module)
    return out.getvalue()


def reparsed_text(text: str, locations: bool = False) -> str:
    """Parse ``text`` with fusec's context and print it again."""
    return ir_text(parse_module(make_context(), text), locations)


def flat(values) -> list:
    if isinstance(values, (list, tuple)):
        return [v for x in values for v in flat(x)]
    return [values]


def assert_matches_eager(outputs, expected) -> None:
    expected = flat(expected)
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected, strict=True):
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        torch.testing.assert_close(got, want, equal_nan=True, rtol=1e-4, atol=1e-5)
