"""pad-matmuls: which graphs it pads (the device the importer records), its cost rule, and bad options."""

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx
from xdsl.dialects.builtin import StringAttr

from fusec.dialects import fusec as F
from fusec.frontend.importer import import_graph
from fusec.passes.pad_matmuls import PadMatmuls
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


def mm_product(device: str | None, graph_text: str = GRAPH, **options) -> list[str]:
    """The dims of the matmul the graph computes after the pass (padded or not)."""
    module = parse(graph_text)
    graph = F.find_graph(module)
    if device is not None:
        graph.attributes[F.DEVICE_MARK] = StringAttr(device)
    apply_passes(module, PadMatmuls(**options))
    [mm] = [op for op in graph.block.ops if isinstance(op, F.ExternOp)]
    return [str(s) for s in mm.outputs[0].type.dims]


@pytest.mark.parametrize(("device", "options", "dims"), [
    ("cuda", {}, ["8", "1008"]),
    ("cpu", {}, ["8", "1001"]),
    (None, {}, ["8", "1001"]),
    ("cpu", {"when": "always"}, ["8", "1008"]),
    ("cuda", {"when": "never"}, ["8", "1001"]),
    ("cuda", {"alignment_bytes": 64}, ["8", "1024"]),
])
def test_which_graphs_are_padded(device, options, dims):
    assert mm_product(device, cost_rule=False, **options) == dims


def lm_head(tokens: int | str, vocab: int, dtype: str = "bf16") -> str:
    symbols = " symbols(s0 in [2, inf])" if isinstance(tokens, str) else ""
    h, w, o = (f"!fusec.tensor<[{tokens}, 768], {dtype}>", f"!fusec.tensor<[{vocab}, 768], {dtype}>",
               f"!fusec.tensor<[{tokens}, {vocab}], {dtype}>")
    wt = f"!fusec.tensor<[768, {vocab}], {dtype}, strides [1, 768]>"
    return f"""
builtin.module {{
  fusec.graph @g(%h : {h}, %w : {w}) -> ({o}){symbols} {{
    %wt = fusec.permute %w [1, 0] : {w} -> {wt}
    %y = fusec.extern "aten.mm.default"(%h, %wt) : ({h}, {wt}) -> {o}
    fusec.output %y : {o}
  }}
}}"""


@pytest.mark.parametrize(("tokens", "vocab", "options", "dims"), [
    (1024, 50257, {}, ["1024", "50264"]),  # GPT-2's LM head: ~700 µs saved for ~130 µs of copies
    (8, 50257, {}, ["8", "50257"]),  # one decoding step: the weight copy costs more than the kernel saves
    (8, 1001, {}, ["8", "1001"]),
    ("s0", 50257, {}, ["s0", "50257"]),  # tokens unknown: the declared lower bound (2) is the hint, too few to pay
    ("s0", 50257, {"size_hints": ("s0=1024",)}, ["s0", "50264"]),
    ("s0", 50257, {"size_hints": ("s0=8",)}, ["s0", "50257"]),
])
def test_the_cost_rule_pads_only_where_the_aligned_kernel_pays_for_the_copies(tokens, vocab, options, dims):
    assert mm_product("cuda", lm_head(tokens, vocab), **options) == dims
def test_bad_options_say_what_is_allowed():
    with pytest.raises(ValueError, match="when must be one of accelerator, always, never"):
        mm_product("cuda", when="gpu")
    with pytest.raises(ValueError, match="alignment-bytes must be positive"):
        mm_product("cuda", alignment_bytes=0)
    with pytest.raises(ValueError, match="size hint 's0' is not of the form SYMBOL=INTEGER"):
        mm_product("cuda", size_hints=("s0",))


def test_the_importer_records_the_graph_device():
    gm = make_fx(lambda a, b: torch.mm(a, b))(torch.randn(3, 4), torch.randn(4, 5))
    module, info = import_graph(gm, [torch.randn(3, 4), torch.randn(4, 5)])
    assert info.device.type == "cpu"
    assert F.find_graph(module).attributes[F.DEVICE_MARK] == StringAttr("cpu")


def test_the_graph_cache_keys_on_the_device_mark(monkeypatch):
    """The mark is not printed, but the compiled launcher depends on it: a CPU entry must not serve a CUDA graph."""
    from fusec.runtime import graph_cache

    monkeypatch.setenv("FUSEC_GRAPH_CACHE", "1")
    keys = []
    for device in ("cpu", "cuda"):
        module = parse(GRAPH)
        F.find_graph(module).attributes[F.DEVICE_MARK] = StringAttr(device)
        keys.append(graph_cache.module_key(module, "pad-matmuls", {}, "all"))
    assert None not in keys and keys[0] != keys[1]
