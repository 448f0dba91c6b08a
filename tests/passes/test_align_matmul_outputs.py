"""align-matmul-outputs: which graphs it pads (the device the importer records), and bad options."""

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx
from xdsl.dialects.builtin import StringAttr

from fusec.dialects import fusec as F
from fusec.frontend.importer import import_graph
from fusec.passes.align_matmul_outputs import DEVICE_ATTR, AlignMatmulOutputs
from fusec.testing import apply_passes, parse

GRAPH = """
builtin.module {
  fusec.graph @g(%x : !fusec.tensor<[8, 64], f16>, %w : !fusec.tensor<[64, 1001], f16>) -> (!fusec.tensor<[8, 1001], f16>) {
    %y = fusec.extern "aten.mm.default"(%x, %w) : (!fusec.tensor<[8, 64], f16>, !fusec.tensor<[64, 1001], f16>) -> !fusec.tensor<[8, 1001], f16>
    %r = fusec.pointwise "relu" %y : (!fusec.tensor<[8, 1001], f16>) -> !fusec.tensor<[8, 1001], f16>
    fusec.output %r : !fusec.tensor<[8, 1001], f16>
  }
}
"""


def mm_strides(device: str | None, **options) -> list[str]:
    module = parse(GRAPH)
    graph = F.find_graph(module)
    if device is not None:
        graph.attributes[DEVICE_ATTR] = StringAttr(device)
    apply_passes(module, AlignMatmulOutputs(**options))
    [mm] = [op for op in graph.block.ops if isinstance(op, F.ExternOp)]
    return [str(s) for s in mm.outputs[0].type.layout]


@pytest.mark.parametrize(("device", "options", "strides"), [
    ("cuda", {}, ["1008", "1"]),
    ("cpu", {}, ["1001", "1"]),
    (None, {}, ["1001", "1"]),
    ("cpu", {"when": "always"}, ["1008", "1"]),
    ("cuda", {"when": "never"}, ["1001", "1"]),
    ("cuda", {"alignment_bytes": 64}, ["1024", "1"]),
])
def test_which_graphs_are_padded(device, options, strides):
    assert mm_strides(device, **options) == strides


def test_bad_options_say_what_is_allowed():
    with pytest.raises(ValueError, match="when must be one of accelerator, always, never"):
        mm_strides("cuda", when="gpu")
    with pytest.raises(ValueError, match="alignment-bytes must be positive"):
        mm_strides("cuda", alignment_bytes=0)


def test_the_importer_records_the_graph_device():
    gm = make_fx(lambda a, b: torch.mm(a, b))(torch.randn(3, 4), torch.randn(4, 5))
    module, info = import_graph(gm, [torch.randn(3, 4), torch.randn(4, 5)])
    assert info.device.type == "cpu"
    assert F.find_graph(module).attributes[DEVICE_ATTR] == StringAttr("cpu")


def test_the_graph_cache_keys_on_the_device_mark(monkeypatch):
    """The mark is not printed, but the compiled launcher depends on it: a CPU entry must not serve a CUDA graph."""
    from fusec.runtime import graph_cache

    monkeypatch.setenv("FUSEC_GRAPH_CACHE", "1")
    keys = []
    for device in ("cpu", "cuda"):
        module = parse(GRAPH)
        F.find_graph(module).attributes[DEVICE_ATTR] = StringAttr(device)
        keys.append(graph_cache.module_key(module, "align-matmul-outputs", {}, "all"))
    assert None not in keys and keys[0] != keys[1]
