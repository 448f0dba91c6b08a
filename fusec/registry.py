"""The one pass registry: every pass fusec can run, by name, as lazy factories.

``fusec-opt``, the backend and plain ``xdsl-opt`` (through ``FUSEC_UNIVERSE``) all
read this table, so a pipeline spec means the same thing everywhere.  Factories
import their pass only when called: listing passes costs nothing, and one
broken pass file cannot stop the others from running.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from xdsl.context import Context
from xdsl.ir import Dialect
from xdsl.passes import ModulePass
from xdsl.universe import Universe

PassFactory = Callable[[], type[ModulePass]]


def _lazy(module: str, cls: str) -> PassFactory:
    def factory() -> type[ModulePass]:
        return getattr(importlib.import_module(module), cls)

    factory.__qualname__ = f"load_{cls}"
    return factory


# fusec's own passes, in pipeline order.  form-kernels is the correctness baseline every pipeline starts with.
_FUSEC_PASSES: dict[str, tuple[str, str]] = {
    "channels-last": ("fusec.passes.channels_last", "ChannelsLast"),
    "attention-layouts": ("fusec.passes.attention_layouts", "AttentionLayouts"),
    "merge-matmuls": ("fusec.passes.merge_matmuls", "MergeMatmuls"),
    "pad-matmuls": ("fusec.passes.pad_matmuls", "PadMatmuls"),
    "bias-epilogues": ("fusec.passes.bias_epilogues", "BiasEpilogues"),
    "activation-epilogues": ("fusec.passes.activation_epilogues", "ActivationEpilogues"),
    "embedding-gradients": ("fusec.passes.embedding_gradients", "EmbeddingGradients"),
    "sink-gathers": ("fusec.passes.sink_gathers", "SinkGathers"),
    "form-kernels": ("fusec.passes.form_kernels", "FormKernels"),
    "vertical-fusion": ("fusec.passes.vertical_fusion", "VerticalFusion"),
    "matmul-epilogues": ("fusec.passes.matmul_epilogues", "MatmulEpilogues"),
    "reduction-fusion": ("fusec.passes.reduction_fusion", "ReductionFusion"),
    "split-reductions": ("fusec.passes.split_reductions", "SplitReductions"),
    "combo-grouping": ("fusec.passes.combo_grouping", "ComboGrouping"),
    "tile-pointwise": ("fusec.passes.tile_pointwise", "TilePointwise"),
    "schedule-kernels": ("fusec.passes.schedule_kernels", "ScheduleKernels"),
    "autotune-matmuls": ("fusec.passes.autotune_matmuls", "AutotuneMatmuls"),
    "mutate-in-place": ("fusec.passes.mutate_in_place", "MutateInPlace"),
    "reuse-buffers": ("fusec.passes.reuse_buffers", "ReuseBuffers"),
    "expect-fused": ("fusec.passes.expect_fused", "ExpectFused"),
}

# Generic cleanups borrowed from xDSL (they are in xDSL's own universe already).
_XDSL_PASSES: dict[str, tuple[str, str]] = {
    "canonicalize": ("xdsl.transforms.canonicalize", "CanonicalizePass"),
    "dce": ("xdsl.transforms.dead_code_elimination", "DeadCodeElimination"),
}


def _fusec_owned() -> dict[str, PassFactory]:
    return {name: _lazy(*where) for name, where in _FUSEC_PASSES.items()}


PASSES: dict[str, PassFactory] = {
    **_fusec_owned(),
    **{name: _lazy(*where) for name, where in _XDSL_PASSES.items()},
}
"""Pass name -> factory returning the pass class (a frozen-dataclass ModulePass)."""

# One-line summaries for passes whose class has no docstring.
PASS_SUMMARIES: dict[str, str] = {
    "dce": "Erases operations whose results are unused and that have no side effects.",
}


def pass_summary(name: str, cls: type[ModulePass]) -> str:
    """The first line of a pass's docstring (or its summary above)."""
    doc = (cls.__doc__ or "").strip()
    if doc and not doc.startswith(f"{cls.__name__}("):  # dataclasses invent a signature as doc
        return doc.splitlines()[0].strip()
    return PASS_SUMMARIES.get(name, "(no description)")


def _fusec_dialect() -> Dialect:
    from fusec.dialects.fusec import Fusec

    return Fusec


def make_context() -> Context:
    """A context that parses everything fusec produces: builtin, arith, math and fusec."""
    from xdsl.dialects.arith import Arith
    from xdsl.dialects.builtin import Builtin
    from xdsl.dialects.math import Math

    ctx = Context()
    for dialect in (Builtin, Arith, Math, _fusec_dialect()):
        ctx.load_dialect(dialect)
    return ctx


# Plain `xdsl-opt` finds this through the `xdsl.universe` entry point.  Only what
# fusec owns goes in: xDSL's universe already has builtin/arith/math, canonicalize
# and dce, and a name defined twice across universes is an error.
FUSEC_UNIVERSE = Universe(
    all_dialects={"fusec": _fusec_dialect},
    all_passes=_fusec_owned(),
)
