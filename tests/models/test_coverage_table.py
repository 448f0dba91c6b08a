"""README's "Operator coverage" table is generated from the importer's tables: this test keeps it in sync.

    python tests/models/test_coverage_table.py     # rewrites the section after a change to the tables

Families come from torch's own op tags (``pointwise``, ``reduction``), the
schemas (a view returns an alias of its input; a factory takes no tensor) and
fusec's tables: ``fusec.frontend.aten_ops.TABLE`` (lowered natively),
``DESIGNED_EXTERNS`` (torch calls by design), ``fusec.frontend.decompositions``
(composite ops taken apart into the native ones) and the tested models.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import torch

from fusec.frontend import aten_ops, decompositions, foreach

README = Path(__file__).resolve().parents[2] / "README.md"
BEGIN, END = "<!-- coverage:begin (tests/models/test_coverage_table.py) -->", "<!-- coverage:end -->"
TESTED_MODELS = ("GPT-2 (`GPT2LMHeadModel`)", "BERT (`BertForMaskedLM`)", "ViT (`ViTModel`)", "ResNet (`ResNetModel`)")


# torch tags most ops of these families; these it does not
POINTWISE_UNTAGGED = {"prims.convert_element_type.default", "prims.fma.default", "_to_copy", "clone", "where", "clamp",
                      "fill", "max.other", "min.other", "floor_divide"}
REDUCTIONS_UNTAGGED = {"argmax", "argmin", "mean", "max", "min"}


def _overloads(key: str) -> list:
    """The torch overloads a table key names: ``add`` (every overload), ``max.dim``, ``prims.fma.default``."""
    parts = key.split(".")
    namespace = parts.pop(0) if parts[0] == "prims" else "aten"
    packet = getattr(getattr(torch.ops, namespace), parts[0], None)
    if packet is None:
        return []
    names = parts[1:2] or packet.overloads()
    ops = [getattr(packet, n) for n in names if n in packet.overloads()]
    return [op for op in ops if not op._schema.is_mutable]  # an out= overload returns its out argument: no view


def family(key: str) -> str:
    if key in aten_ops.ALIASES:  # arccos is acos
        return family(aten_ops.ALIASES[key])
    ops = _overloads(key)
    tags = {t for op in ops for t in op.tags}
    if torch.Tag.pointwise in tags or key in POINTWISE_UNTAGGED:
        return "pointwise"
    if torch.Tag.reduction in tags or key.split(".")[0] in REDUCTIONS_UNTAGGED:
        return "reductions"
    if any(op._schema.returns and op._schema.returns[0].alias_info is not None for op in ops) or torch.Tag.view_copy in tags:
        return "views"
    base = key.split(".")[0]
    takes_tensors = any("Tensor" in str(a.type) for op in ops for a in op._schema.arguments)
    if (ops and not takes_tensors) or base.endswith("_like") or base.startswith("new_"):
        return "factories"
    if base == "_unsafe_view":
        return "views"
    return "copies, concatenation and indexing"


def native_families() -> dict[str, list[str]]:
    families: dict[str, list[str]] = {}
    for key in sorted(aten_ops.TABLE):
        families.setdefault(family(key), []).append(key)
    return families


def decomposed_families() -> dict[str, list[str]]:
    d = decompositions
    return {"normalization": d.NORMALIZATION, "softmax": d.SOFTMAX, "activations": d.ACTIVATIONS, "losses": d.LOSSES,
            "lookups and their backward": d.INDEXING, "dropout": d.RANDOM, "small products": d.SMALL_PRODUCTS,
            "fusec's own (bias epilogues, moments, powers)": sorted(d.FUSEC_OWN),
            "optimizers' `_foreach_*`": [f"_foreach_{n}" for n in foreach.POINTWISE]}


def table() -> str:
    rows = ["| family | how it runs | ops |", "|---|---|---|"]
    for name, keys in native_families().items():
        rows.append(f"| {name} | lowered natively ({len(keys)}) | {', '.join(f'`{k}`' for k in keys)} |")
    for name, keys in decomposed_families().items():
        rows.append(f"| {name} | decomposed into native ops ({len(keys)}) | {', '.join(f'`{k}`' for k in keys)} |")
    externs = sorted(aten_ops.DESIGNED_EXTERNS)
    rows.append(f"| library calls and random numbers | `fusec.extern` by design ({len(externs)}) | "
                f"{', '.join(f'`{k}`' for k in externs)} |")
    rows.append("| anything else | `fusec.extern` with an `extern-fallback` remark | (a torch call at run time) |")
    models = ", ".join(TESTED_MODELS)
    return (BEGIN + "\n" + "\n".join(rows) + "\n\n"
            + f"Tested models (`tests/models`, random weights from `transformers`): {models}; inference in fp32 and bf16, "
            "a training step, `dynamic=True` with a second size, a compiled AdamW step; zero whole-graph fallbacks.\n"
            + END)


def _section(text: str) -> str | None:
    match = re.search(re.escape(BEGIN) + ".*?" + re.escape(END), text, re.S)
    return match.group(0) if match else None


def test_readme_table_is_in_sync():
    assert _section(README.read_text()) == table(), "README's operator coverage is stale: run python " + \
        "tests/models/test_coverage_table.py"


def test_every_native_key_names_a_torch_op():
    # prims ops (prims.fma) are defined lazily, when torch's own code first calls them
    assert not [k for k in aten_ops.TABLE if not k.startswith("prims.") and not _overloads(k)]


if __name__ == "__main__":
    text = README.read_text()
    old = _section(text)
    if old is None:
        sys.exit(f"README.md has no {BEGIN} ... {END} section")
    README.write_text(text.replace(old, table()))
