"""Running compiled graphs: a graph lowered to Triton kernels and a launcher, ready to call.

``compile_module(module, size_hints)`` lowers a graph (after form-kernels) to
Triton kernel sources and a launcher, and returns a ``CompiledGraph``: call it
with a list of tensors.  Kernels run compiled by Triton on CUDA tensors and
under Triton's interpreter on CPU tensors (``fusec.runtime.kernel_cache``).
"""

from __future__ import annotations

import linecache
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from xdsl.dialects.builtin import ModuleOp

from fusec.analysis.bind_plan import BindPlan, InputMismatch, UnboundSymbol, bind_plan
from fusec.base import dtypes, origins
from fusec.dialects import fusec as F
from fusec.lowering.launcher import KernelSource, Launcher, lower_graph, runtime_globals
from fusec.lowering.triton_kernel import LoweringOptions
from fusec.runtime.kernel_cache import load_kernel, source_hash
from fusec.runtime.kernel_runner import KernelRunner

# ---------------------------------------------------------------- graphs


class InputTypeMismatch(InputMismatch, TypeError):
    """An input that is not a tensor where the graph takes one (a Python number, None, ...)."""


@dataclass(frozen=True)
class InputSignature:
    """What a graph takes: ``check(inputs)`` raises one clear error naming the first input the types contradict."""

    plan: BindPlan  # count, ranks and every dim against the size symbols
    dtypes: tuple[torch.dtype | None, ...]  # None: a type with no torch dtype, not checked

    @staticmethod
    def of(graph: F.GraphOp) -> InputSignature:
        return InputSignature(bind_plan(graph), tuple(_torch_dtype(a.type) for a in graph.block.args))

    def check(self, inputs: Sequence) -> None:
        name = self.plan.graph
        for i, t in enumerate(inputs):
            if not isinstance(t, torch.Tensor):
                kind = f"a {self.dtypes[i]} tensor" if i < len(self.dtypes) and self.dtypes[i] is not None else "a tensor"
                raise InputTypeMismatch(f"@{name}: input {i} must be {kind}, got {type(t).__name__} {t!r:.40}")
        try:
            self.plan.bind(inputs)
        except UnboundSymbol:  # a symbol no input gives is a graph the launcher refused to build, not a bad call
            pass
        for i, (t, want) in enumerate(zip(inputs, self.dtypes, strict=True)):
            if want is not None and t.dtype != want:
                raise InputMismatch(f"@{name}: input {i} must be {want}, got {t.dtype} (shape {list(t.shape)})")


def _torch_dtype(t) -> torch.dtype | None:
    try:
        return dtypes.of_ir(t.element_type).torch
    except (dtypes.UnknownDType, AttributeError):
        return None


class CompiledGraph:
    """A graph ready to run: ``compiled(inputs) -> outputs`` (lists of tensors).

    How much of the inputs the generated launcher checks is ``compile_module``'s ``input_checks``; where it
    trusts its caller (Dynamo's guards) and a call fails anyway, the inputs are checked against ``signature``
    then, so a wrong input is reported as one ``InputMismatch`` naming it rather than as an error deep inside.
    """

    def __init__(self, launcher: Launcher, default_device: torch.device | None = None,
                 signature: InputSignature | None = None):
        self.launcher = launcher
        self.default_device = default_device or torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.signature = signature
        self._calls: dict[bool, Callable[[Sequence[torch.Tensor]], list[torch.Tensor]]] = {}

    @property
    def kernels(self) -> tuple[KernelSource, ...]:
        return self.launcher.kernels

    @property
    def source(self) -> str:
        return self.launcher.source

    def __call__(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        try:
            interpret = not inputs[0].is_cuda if inputs else self.default_device.type != "cuda"
            call = self._calls.get(interpret)
            if call is None:
                call = self._build(interpret)
            return call(inputs)
        except InputMismatch:
            raise
        except Exception:
            problem = self._input_problem(inputs)
            if problem is None:
                raise
        raise problem from None

    def check_inputs(self, inputs: Sequence) -> None:
        """Raise ``InputMismatch`` if ``inputs`` contradict the graph's dtypes, ranks or size symbols."""
        if self.signature is not None:
            self.signature.check(inputs)

    def _input_problem(self, inputs: Sequence) -> InputMismatch | None:
        try:
            self.check_inputs(inputs)
        except InputMismatch as e:
            return e
        return None

    def _build(self, interpret: bool):
        """The launcher's ``call`` bound to this mode's kernels (once per mode)."""
        from fusec.dialects.extern_calls import resolve_target

        namespace: dict[str, Any] = runtime_globals()  # the exec fills in "call"
        namespace["_default_device"] = self.default_device
        keys = {name: positions for name, *positions in self.launcher.launch_keys}
        for k in self.launcher.kernels:
            namespace[k.name] = KernelRunner(load_kernel(k.source, k.name, interpret), interpret, *keys.get(k.name, ()))
        for name, target in self.launcher.externs:
            namespace[name] = resolve_target(target)
        filename = f"<fusec launcher @{self.launcher.graph_name} {source_hash(self.launcher.source)[:12]}>"
        linecache.cache[filename] = (len(self.launcher.source), None, self.launcher.source.splitlines(True), filename)
        exec(compile(self.launcher.source, filename, "exec"), namespace)
        call = namespace["call"]
        if interpret:
            call = _quiet_numpy(call)
        self._calls[interpret] = call
        return call


def _quiet_numpy(call):
    """Masked-off lanes compute too (log(0) in a padded row): under the interpreter numpy would warn."""
    import numpy as np

    def quiet(inputs):
        with np.errstate(all="ignore"):
            return call(inputs)

    return quiet


def compile_module(module: ModuleOp | F.GraphOp, size_hints: Mapping[str, int] | None = None, *,
                   graph_name: str | None = None, options: LoweringOptions = LoweringOptions(),
                   input_checks: str = "all") -> CompiledGraph:
    """Lower a graph after form-kernels (and any fusion) to Triton and a launcher.

    ``size_hints`` gives an example value per size symbol; the code works for every
    size the symbols' bounds admit, hints only steer choices that are safe anyway.
    ``input_checks``: what the caller leaves to check of the inputs (see ``lower_graph``).
    """
    graph = F.find_graph(module, graph_name)
    try:
        launcher = lower_graph(graph, size_hints, options, input_checks)
    except Exception as e:
        _note_origin(e)
        raise
    return CompiledGraph(launcher, signature=InputSignature.of(graph))


def _note_origin(e: Exception) -> None:
    """Notes under a lowering failure: the op being lowered, its FX node and the user's source line."""
    op = origins.op_in_flight(e.__traceback__)
    if op is None:
        return
    e.add_note(f"while lowering {origins.describe(op)}")
    excerpt = origins.source_excerpt(origins.location_of(op))
    if excerpt:
        e.add_note(excerpt)
