"""fusec as a ``torch.compile`` backend: ``torch.compile(fn, backend="fusec", options={...})``.

The ``torch_dynamo_backends`` entry point (pyproject.toml) registers it, so
``backend="fusec"`` works after ``pip install`` without importing fusec.
Dynamo hands over its FX graph; AOTAutograd, with fusec's decomposition table,
turns it into aten graphs (a forward and a backward, or one inference graph),
and each goes through ``compile_graph``: import, run the pass pipeline, choose
how to execute, and return the function AOTAutograd calls.

Options (``torch.compile`` passes its ``options`` dict to the backend as the
keyword argument ``options``):

``pipeline``
    a pipeline spec (``"form-kernels,canonicalize,dce"``) or the path of a
    ``.pipeline`` file; default: fusec's default pipeline file.
``dump_dir``
    a folder: each compiled graph dumps into ``<dump_dir>/<graph name>/`` (the
    aten graph, the imported IR, the IR after every pass, the remarks, the spec
    to replay it with ``fusec-opt``); default: ``$FUSEC_DUMP_DIR``.
``execute``
    ``"triton"`` (generated kernels, through ``fusec.runtime``; default) or
    ``"interpret"`` (the reference interpreter).
``overlap_collectives``
    ``True``: a graph holding collectives (tensor parallelism, a ``python_reducer``
    backward) is bucketed and rescheduled by PyTorch's overlap scheduler before
    import, so compute runs while data moves (``fusec.frontend.collective_overlap``);
    default ``False``.
``compile_workers``
    how many processes compile Triton kernels on the GPU (1: in-process); default:
    ``$FUSEC_COMPILE_WORKERS``, else min(cpus, 8).  They start when the backend is
    first called, while Dynamo, AOTAutograd and the pipeline run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import inspect
import itertools
import re
import time
import warnings
from collections.abc import Callable, Sequence
from io import StringIO
from pathlib import Path
from typing import Any

import sympy
import torch
import torch.fx
from xdsl.dialects.builtin import ModuleOp
from xdsl.printer import Printer

from fusec.base import env, remarks
from fusec.dialects import fusec as F
from fusec.frontend.decompositions import fusec_decompositions
from fusec.frontend.importer import ImportInfo, UnsupportedGraph, import_graph, size_hint, strided_like_eager

EXECUTE_MODES = ("triton", "interpret")


class BackendOptionError(ValueError):
    """A bad ``options={...}`` entry; the message names it and what is allowed."""


@dataclasses.dataclass(frozen=True)
class BackendOptions:
    pipeline: str | None = None  # spec or .pipeline file; None: the default pipeline
    dump_dir: Path | None = None  # None: $FUSEC_DUMP_DIR (read once, when the options are made)
    execute: str = "triton"
    compile_workers: int | None = None  # None: $FUSEC_COMPILE_WORKERS, else min(cpus, 8)
    # max/avg pooling as fused kernels (fusec.frontend.pooling) instead of torch calls: True, False, or "inference"
    # (inference graphs only: in a training step the unrolled windows' compile time outweighs what they save)
    native_pooling: bool | str = "inference"
    cudagraphs: bool = False  # replay each graph's launches as a CUDA graph (fusec.runtime.cudagraphs)
    overlap_collectives: bool = False  # torch's collective bucketing and overlap scheduling before import
    # sdpa masks laid out for torch's fused kernels (fusec.frontend.attention_masks): True for 16-bit attention,
    # "all" for fp32 attention too, False for none
    dense_attention_masks: bool | str = True

    @staticmethod
    def from_dict(options: dict | None) -> BackendOptions:
        options = dict(options or {})
        known = {f.name for f in dataclasses.fields(BackendOptions)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise BackendOptionError(f"fusec: unknown option(s) {', '.join(map(repr, unknown))} (known: {', '.join(sorted(known))})")
        execute = options.get("execute")
        if execute is not None and execute not in EXECUTE_MODES:
            raise BackendOptionError(f"fusec: option 'execute' must be one of {', '.join(map(repr, EXECUTE_MODES))}, got {execute!r}")
        pipeline = options.get("pipeline")
        if pipeline is not None and not isinstance(pipeline, str):
            raise BackendOptionError("fusec: option 'pipeline' must be a string (a spec or a .pipeline file), "
                                     f"got {type(pipeline).__name__}")
        dump = options.get("dump_dir")
        workers = options.get("compile_workers")
        if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool) or workers < 1):
            raise BackendOptionError(f"fusec: option 'compile_workers' must be a positive int, got {workers!r}")
        graphs, overlap = (_flag(options, name) is True for name in ("cudagraphs", "overlap_collectives"))
        pooling = _flag(options, "native_pooling", "inference", word="inference")
        dense_masks = _flag(options, "dense_attention_masks", True, word="all")
        if graphs and execute == "interpret":
            raise BackendOptionError("fusec: option 'cudagraphs' needs execute='triton' (the interpreter launches nothing)")
        return BackendOptions(pipeline, Path(dump) if dump else env.dump_dir(), execute or "triton", workers, pooling,
                              graphs, overlap, dense_masks)

    def pipeline_spec(self) -> str:
        from fusec.pipeline import default_pipeline_spec, read_pipeline_file

        if self.pipeline is None:
            return default_pipeline_spec()
        if self.pipeline.endswith(".pipeline"):
            return read_pipeline_file(self.pipeline)
        return self.pipeline


def _flag(options: dict, name: str, default: bool | str = False, word: str | None = None) -> bool | str:
    """A boolean option, or ``word`` where the option also takes that one string."""
    value = options.get(name, default)
    if not (isinstance(value, bool) or (word is not None and value == word)):
        allowed = "True or False" if word is None else f"True, False or {word!r}"
        raise BackendOptionError(f"fusec: option {name!r} must be {allowed}, got {value!r}")
    return value


def fusec_backend(gm: torch.fx.GraphModule, example_inputs: Sequence, **kwargs):
    """The Dynamo backend: AOTAutograd with fusec compiling the forward, backward and inference graphs."""
    from fusec.pipeline import parse_pipeline_spec

    options = BackendOptions.from_dict(kwargs.pop("options", None))
    mode = kwargs.pop("mode", None)
    if mode == "reduce-overhead":  # torch.compile passes mode or options, never both
        options = dataclasses.replace(options, cudagraphs=True)
    elif mode not in (None, "default"):
        raise BackendOptionError(f"fusec: torch.compile(mode={mode!r}) is not supported (only 'default' and "
                                 "'reduce-overhead'); fusec takes options={...}")
    if kwargs:
        raise BackendOptionError(f"fusec: unexpected backend argument(s) {', '.join(sorted(kwargs))}")
    parse_pipeline_spec(options.pipeline_spec())  # a bad spec fails here, before any tracing
    config: dict[str, Any] = {
        # A random op that activation checkpointing recomputes replays the forward's RNG state: as a saved state
        # tensor (run_and_save_rng_state / run_with_rng_state, torch calls fusec imports), not as the Generator
        # objects of the CUDA-graph-safe form, which fusec cannot pass; that form only matters for CUDA graphs.
        "graphsafe_rng_functionalization": options.cudagraphs,
    }
    if options.execute == "triton":
        from fusec.runtime.compile_pool import start_early

        # Workers import Triton while Dynamo and the pipeline run.  With workers, the backward graph is compiled
        # right after its forward (not at the first backward call): the forward's kernels compile in the pool
        # meanwhile (_compile_ahead).  Torch before 2.10 has no such switch: the backward then compiles lazily.
        if start_early(options.compile_workers) and hasattr(torch._functorch.config, "force_non_lazy_backward_lowering"):
            config["force_non_lazy_backward_lowering"] = True
    with remarks.collect() as traced_log:  # remarks about Dynamo's graph: reported with the graphs made from it
        if options.dense_attention_masks:
            from fusec.frontend.attention_masks import dense_attention_masks

            gm = dense_attention_masks(gm, include_fp32=options.dense_attention_masks == "all")
    compiler = functools.partial(compile_graph, options=options, traced_remarks=tuple(traced_log.remarks))
    _restart_now_for_specialized_floats(gm, example_inputs)
    with torch._functorch.config.patch(config):
        return _aot_compile(gm, example_inputs, compiler, options)


def _restart_now_for_specialized_floats(gm: torch.fx.GraphModule, example_inputs: Sequence) -> None:
    """Under ``dynamic=True`` Dynamo traces a model's Python floats (an eps, an attention scale, a dropout rate) as
    symbols; one that AOTAutograd's tensorify pass cannot turn into a 0-d tensor input makes it restart Dynamo's
    analysis with that float a constant -- after the whole graph is traced for nothing (5.7 of ViT-tiny's 24 s first
    call on a CPU).  Two kinds never become tensors: a float tracing had to specialize already (a LayerNorm's eps:
    an op that takes a float), and a float input the graph never reads (``nn.Embedding``'s ``norm_type`` without
    ``max_norm``).  One such float makes the restart certain: it is raised here, before the trace, with those floats
    constants; the others (which may still become tensor inputs: an attention scale in a multiply) are left to
    AOTAutograd, which restarts again only if one of them cannot become a tensor either."""
    try:
        from torch._dynamo.exc import TensorifyScalarRestartAnalysis
        from torch._guards import detect_fake_mode
        from torch.fx.passes._tensorify_python_scalars import TensorifyState
        from torch.utils._sympy.symbol import SymT, symbol_is_type
    except ImportError:  # a torch without the pass restarts nothing
        return
    shape_env = getattr(detect_fake_mode(example_inputs), "shape_env", None)
    if shape_env is None:
        return
    # torch 2.13 names the map backed_var_to_val (var_to_val warns); older torches, var_to_val
    values = shape_env.backed_var_to_val if hasattr(shape_env, "backed_var_to_val") else shape_env.var_to_val
    new = [s for s in values if symbol_is_type(s, SymT.FLOAT) and not TensorifyState.should_specialize(str(s))]
    if not new:
        return
    read = _symbols_read(gm)
    certain = [s for s in new if isinstance(shape_env.replacements.get(s), sympy.Number) or s not in read]
    if certain:
        for s in certain:
            TensorifyState.specialize(str(s))
        raise TensorifyScalarRestartAnalysis


def _symbols_read(gm: torch.fx.GraphModule) -> set:
    """The size and float symbols of ``gm``'s values, but for values nothing reads (an unread input, its ``item()``,
    a float passed only where the callee ignores it)."""
    unread: set[torch.fx.Node] = set()
    for node in reversed(gm.graph.nodes):  # users first
        if node.op != "output" and not node.is_impure() and all(u in unread or _ignores(u, node) for u in node.users):
            unread.add(node)
    read: set = set()
    for node in gm.graph.nodes:
        if node in unread:
            continue
        value = node.meta.get("example_value", node.meta.get("val"))
        for v in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
                read |= v.node.expr.free_symbols
            elif isinstance(v, torch.Tensor):
                for e in (*v.shape, *v.stride(), v.storage_offset()):
                    if isinstance(e, torch.SymInt):
                        read |= e.node.expr.free_symbols
    return read


def _ignores(user: torch.fx.Node, value: torch.fx.Node) -> bool:
    """Whether ``user`` reads ``value`` only where it has no effect: ``F.embedding``'s ``norm_type`` without
    ``max_norm`` (every ``nn.Embedding``'s: Dynamo passes it as a float input all the same)."""
    if user.op != "call_function" or user.target is not torch.nn.functional.embedding:
        return False
    args = inspect.signature(torch.nn.functional.embedding).bind(*user.args, **user.kwargs).arguments
    return args.get("max_norm") is None and value is args.get("norm_type") and \
        all(a is not value for name, a in args.items() if name != "norm_type")


def _aot_compile(gm: torch.fx.GraphModule, example_inputs: Sequence, compiler, options: BackendOptions):
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    return aot_autograd(
        fw_compiler=functools.partial(compiler, kind="forward"),
        bw_compiler=functools.partial(compiler, kind="backward"),
        inference_compiler=functools.partial(compiler, kind="inference"),
        decompositions=fusec_decompositions(native_pooling=_native_pooling(options.native_pooling, example_inputs)),
        # Recompute cheap pointwise ops in the backward rather than save them:
        # fusion makes recomputation nearly free and saved tensors cost memory.
        partition_fn=min_cut_rematerialization_partition,
        # Inputs the graph writes (a batch norm's running statistics) stay in the graph as copy_ nodes: their
        # kernels store the new values into the inputs (mutate-in-place), not AOTAutograd's copies after the call.
        keep_inference_input_mutations=True,
    )(gm, example_inputs)


def _native_pooling(option: bool | str, example_inputs: Sequence) -> bool:
    """``"inference"``: native pooling where AOTAutograd will make an inference graph (its own test: grad mode on
    and an input, a parameter included, that requires grad make a training graph)."""
    if option != "inference":
        return bool(option)
    return not (torch.is_grad_enabled()
                and any(isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs))


def compile_graph(gm: torch.fx.GraphModule, example_inputs: Sequence, *, kind: str, options: BackendOptions,
                  traced_remarks: tuple[remarks.Remark, ...] = ()):
    """One aten graph -> a boxed function (a list of arguments in, a list of outputs out)."""
    with _collecting_young_objects_only():
        return _compile_graph(gm, example_inputs, kind=kind, options=options,
                              traced_remarks=traced_remarks if kind != "backward" else ())


@contextlib.contextmanager
def _collecting_young_objects_only():
    """Python's cyclic collector ignores the objects that existed before the compile while it runs (``gc.freeze``):
    its full collections walked the whole process (torch, the model, Dynamo's graphs) again and again, 0.7-0.8 s of
    a 4 s compile of GPT-2's training graphs on the CPU, and only the compile's own objects can be its garbage.
    They go back to the collector afterwards (``gc.unfreeze``); what died among them meanwhile is freed then."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _compile_graph(gm: torch.fx.GraphModule, example_inputs: Sequence, *, kind: str, options: BackendOptions,
                   traced_remarks: tuple[remarks.Remark, ...]):
    from fusec.pipeline import run_pipeline
    from fusec.registry import make_context
    from fusec.report import trace
    from fusec.runtime import CompiledGraph, graph_cache

    name = graph_name(kind)
    dump = options.dump_dir / name if options.dump_dir is not None else None
    started = time.perf_counter()
    caller_log = remarks.current()  # a ``remarks.collect()`` around the torch.compile'd call: told this graph's remarks
    with remarks.collect() as import_log:
        import_log.remarks.extend(traced_remarks)
        if options.overlap_collectives:
            from fusec.frontend.collective_overlap import schedule_collective_overlap

            gm = schedule_collective_overlap(gm)
        spec = options.pipeline_spec()
        # Dynamo's guards hold a forward or inference graph's inputs to the shapes, dtypes and strides it was
        # traced with; a backward graph's tangents come from autograd: their shapes and dtypes hold, layouts may not.
        checks = "layout" if kind == "backward" else "alignment"
        aligned = _aligned_static_inputs(gm, example_inputs, kind)
        cacheable = dump is None and options.execute == "triton"
        fx_key = _fx_key(gm, example_inputs, kind, spec, checks, aligned) if cacheable else None
        warm_import = _warm_import(fx_key, gm, example_inputs, name, options) if fx_key is not None else None
        if warm_import is not None:
            _tell_caller(caller_log, [_cache_hit(name)])
            executor, info, requests = warm_import
            if requests is not None and info.device.type == "cuda":
                executor.compile_known(requests)
            else:
                _compile_ahead(executor, example_inputs, info, skip_cached=True)
            return _runner(gm, info, executor, kind, options)
        try:
            module, info = import_graph(gm, example_inputs, name, guard_sizes=kind != "backward")
        except UnsupportedGraph as e:
            remarks.emit("backend", "graph-runs-with-torch", f"not compiled: {e}", name)
            _tell_caller(caller_log, import_log.remarks)
            return _eager(gm, name, str(e), dump)
    timings = {"import": time.perf_counter() - started}
    saved_from = _saved_outputs_from(info, kind) if options.execute == "triton" else None
    if saved_from is not None:  # their layouts are the pipeline's to choose (channels-last): reported to AOTAutograd
        from xdsl.dialects.builtin import IntegerAttr, i64

        F.find_graph(module).attributes[F.SAVED_OUTPUTS] = IntegerAttr(saved_from, i64)
    aligned_placeholders = set(aligned)
    trusted = sorted(slot.index for j, slot in enumerate(info.inputs) if slot.kind == "tensor" and j in aligned_placeholders)
    if trusted:
        from xdsl.dialects.builtin import DenseArrayBase, i64

        F.find_graph(module).attributes[F.ALIGNED_INPUTS] = DenseArrayBase.from_list(i64, trusted)
    trace.artifact(name, "imported_ir", lambda: module_text_with_locations(module))
    warm = _warm_start(module, info, spec, checks, options) if cacheable else None
    if warm is not None and warm[1] is not None:
        _tell_caller(caller_log, [_cache_hit(name)])
        _compile_ahead(warm[1], example_inputs, info, skip_cached=True)
        if fx_key is not None:
            graph_cache.store_imported(fx_key, warm[1].launcher, info, warm[1].requests)
        return _runner(gm, info, warm[1], kind, options)
    if dump is not None:  # written first: they help most when a pass then fails
        dump.mkdir(parents=True, exist_ok=True)
        (dump / "fx_graph.py").write_text(gm.print_readable(print_output=False))
        (dump / "imported.mlir").write_text(module_text_with_locations(module))
        (dump / "pipeline.txt").write_text(spec + "\n")
    started = time.perf_counter()
    pipeline_log = run_pipeline(make_context(), module, spec, dump_dir=dump)
    timings["passes"] = time.perf_counter() - started
    log = remarks.RemarkLog(import_log.remarks + pipeline_log.remarks)
    _tell_caller(caller_log, log.remarks)
    trace.graph_compiled(name, lambda: module_text_with_locations(module), log)
    if dump is not None:  # the pipeline wrote its own remarks; these add the importer's
        (dump / "remarks.txt").write_text(log.text())
        (dump / "remarks.json").write_text(log.json() + "\n")
    started = time.perf_counter()
    executor = make_executor(module, info, options.execute, dump, checks, options.compile_workers)
    timings["lowering"] = time.perf_counter() - started
    if dump is not None:  # its final IR, compile time by stage and report (fusec.report)
        from fusec.report import write_dump_report

        write_dump_report(dump, module, module_text_with_locations(module), timings)
    if isinstance(executor, CompiledGraph):
        if warm is not None and warm[0] is not None:
            graph_cache.store(warm[0], executor.launcher)
    _compile_ahead(executor, example_inputs, info)
    if isinstance(executor, CompiledGraph) and fx_key is not None:  # with the compiles its first call needs
        graph_cache.store_imported(fx_key, executor.launcher, info, executor.requests)
    return _runner(gm, info, executor, kind, options)


def _compile_ahead(executor, example_inputs: Sequence, info: ImportInfo, skip_cached: bool = False) -> None:
    """Send a graph's Triton compiles to the pool now, from meta tensors laid out as its example inputs: they
    compile while AOTAutograd compiles the next graph (a forward's backward, which fusec asks for eagerly for
    this reason) and Dynamo finishes, instead of when the graph is first called.  Under symbolic sizes the
    example inputs are the first call's (Dynamo compiles on that call; a backward's come from its forward's):
    their sizes, the symbols' hints, give that call's specialisations too.  A size with no hint (data-dependent)
    sends nothing."""
    from fusec.runtime import CompiledGraph

    if not isinstance(executor, CompiledGraph) or info.device.type != "cuda":
        return
    with torch._subclasses.fake_tensor.unset_fake_temporarily():
        try:
            tensors = [_meta_like(example_inputs[i]) for i, slot in enumerate(info.inputs) if slot.kind == "tensor"]
            carriers = [info.size_hints[s] for s in info.carriers]
        except (_NoHint, KeyError):
            return
        tensors += [_meta_like(c) for c in info.constants]
        one = torch.empty(1, dtype=torch.int8, device="meta")
        sent = executor.compile_ahead(tensors + [one.expand(n) for n in carriers], skip_cached)
    if sent:
        from fusec.base.progress import logger

        logger.debug("@%s: %d kernels sent to the compile pool ahead of the first call", info.graph_name, sent)


class _NoHint(Exception):
    pass


def _hint(n) -> int:
    hint = size_hint(n)
    if hint is None:
        raise _NoHint(n)
    return hint


def _meta_like(t: torch.Tensor) -> torch.Tensor:
    """A meta tensor with ``t``'s shape, strides, storage offset and dtype (symbolic ones at their hints)."""
    shape, stride, offset = [_hint(n) for n in t.shape], [_hint(n) for n in t.stride()], _hint(t.storage_offset())
    extent = 1 + sum((n - 1) * s for n, s in zip(shape, stride, strict=True) if n > 0)
    base = torch.empty(offset + (extent if all(shape) else 0), dtype=t.dtype, device="meta")
    return base.as_strided(shape, stride, offset)


def _runner(gm: torch.fx.GraphModule, info: ImportInfo, executor, kind: str, options: BackendOptions):
    """The boxed function Dynamo gets for a compiled graph; a generated launcher's output layouts are reported to
    AOTAutograd first, and those it already returns in eager's dim order are not checked again on each call."""
    from fusec.runtime import CompiledGraph

    if isinstance(executor, CompiledGraph):
        _report_output_strides(gm, info, executor.launcher.output_orders, executor.launcher.strided_outputs,
                               _saved_outputs_from(info, kind))
        info = _laid_out_already(gm, info, executor.launcher.dense_orders)
    return boxed_runner(info, _replayed(executor, gm, kind, info, options))


def _user_outputs(info: ImportInfo, kind: str) -> frozenset[int] | None:
    """The graph outputs a forward hands the user (AOTAutograd's first ``num_forward_returns``: the model's outputs
    and mutated inputs; the rest are saved for the backward), or None outside a forward AOTAutograd compiles."""
    context = torch._guards.TracingContext.try_get()
    if kind != "forward" or context is None or context.fw_metadata is None:
        return None
    return frozenset(slot.index for slot in info.outputs[:context.fw_metadata.num_forward_returns] if slot.kind == "tensor")


def _saved_outputs_from(info: ImportInfo, kind: str) -> int | None:
    """A forward graph's first output that only the backward reads, or None.  The graph's outputs are ordered as
    the FX outputs first name them, so every graph output past the last one the user sees is a saved tensor."""
    user = _user_outputs(info, kind)
    context = torch._guards.TracingContext.try_get()
    if user is None or context is None or context.output_strides is None:
        return None
    return max(user, default=-1) + 1  # under symbolic sizes the channels-last pass moves none of them


def _report_output_strides(gm: torch.fx.GraphModule, info: ImportInfo, orders, strided, saved_from: int | None) -> None:
    """Tell AOTAutograd the strides of outputs the pipeline laid out otherwise than eager -- channels-last
    activations (``orders``: dense in another dim order) and, among those saved for the backward (``saved_from``
    on), column slices of merged projections (``strided``: static strides) -- so that it compiles the backward for
    them (None: eager's)."""
    context = torch._guards.TracingContext.try_get()
    if context is None or context.output_strides is None or not any(o is not None for o in (*orders, *strided)):
        return
    values = list(gm.graph.find_nodes(op="output")[0].args[0])
    strides: list = []
    for slot, node in zip(info.outputs, values, strict=True):
        tensor = slot.kind == "tensor"
        order = orders[slot.index] if tensor and slot.index < len(orders) else None
        saved = tensor and saved_from is not None and slot.index >= saved_from and slot.strides is None
        exact = strided[slot.index] if saved and slot.index < len(strided) else None
        val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
        if slot.dim_order is not None or not isinstance(val, torch.Tensor):
            strides.append(None)
        elif exact is not None:
            strides.append(exact)
        elif order is not None:
            stride: list = [None] * val.dim()
            inner = 1
            for d in reversed(order):
                stride[d] = inner
                inner = inner * val.shape[d]
            strides.append(tuple(stride))
        else:
            strides.append(None)
    context.output_strides.extend(strides)


def _laid_out_already(gm: torch.fx.GraphModule, info: ImportInfo, dense_orders) -> ImportInfo:
    """``info`` without the per-call layout check (``OutputSlot.dim_order``) of outputs that the launcher already
    returns in eager's dim order on every call (its declared layout: a kernel's buffer, a torch view of one, an
    extern's result re-laid out): checking them on every call cost a saved activation ~8 us of Python each."""
    values = list(gm.graph.find_nodes(op="output")[0].args[0])
    slots = []
    for slot, node in zip(info.outputs, values, strict=True):
        val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
        if slot.dim_order and isinstance(val, torch.Tensor) and slot.index < len(dense_orders):
            eager = tuple(d for d in slot.dim_order if not (isinstance(val.shape[d], int) and val.shape[d] == 1))
            if dense_orders[slot.index] == eager:
                slot = dataclasses.replace(slot, dim_order=None)
        slots.append(slot)
    return dataclasses.replace(info, outputs=tuple(slots))


def _replayed(executor, gm: torch.fx.GraphModule, kind: str, info: ImportInfo, options: BackendOptions):
    """``executor`` replayed as CUDA graphs where ``options.cudagraphs`` asks: a forward's parameters and buffers
    (AOTAutograd's static inputs), a backward's saved tensors and every constant are read in place; the user sees a
    forward's first outputs (the rest are saved for the backward) and every output of an inference graph."""
    if not options.cudagraphs or options.execute != "triton":
        return executor
    from fusec.runtime.cudagraphs import CudaGraphed

    static_args = _static_placeholders(gm, kind)
    tensors = sum(slot.kind == "tensor" for slot in info.inputs)
    static = {slot.index for j, slot in enumerate(info.inputs) if slot.kind == "tensor" and j in static_args}
    static |= set(range(tensors, tensors + len(info.constants)))  # constants_on keeps one copy per device
    # an inference graph's outputs are all the user's; a backward's gradients go to autograd (zero_grad drops them)
    visible = frozenset() if kind == "backward" else _user_outputs(info, kind)
    return CudaGraphed(executor, info.graph_name, static=frozenset(static), visible=visible, shapes_vary=bool(info.symbols))


def _static_placeholders(gm: torch.fx.GraphModule, kind: str) -> set[int]:
    """The placeholders whose tensors stay at one address from call to call: a forward's or an inference graph's
    parameters and buffers (AOTAutograd's static inputs), a backward's all but its tangents."""
    if kind == "backward":
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        return {j for j, n in enumerate(placeholders) if not n.name.startswith("tangents")}
    context = torch._guards.TracingContext.try_get()
    meta = context.fw_metadata if context is not None else None
    return set(meta.static_input_indices) if meta is not None else set()


def _aligned_static_inputs(gm: torch.fx.GraphModule, example_inputs: Sequence, kind: str) -> tuple[int, ...]:
    """A forward's or an inference graph's static placeholders (parameters, buffers) that were traced 16-byte
    aligned: their launcher skips the alignment check (``F.ALIGNED_INPUTS``), as Inductor checks only its other
    inputs.  A backward's saved tensors may be views at any offset: checked."""
    if kind == "backward":
        return ()
    aligned = []
    for j in sorted(_static_placeholders(gm, kind)):
        t = example_inputs[j] if j < len(example_inputs) else None
        if isinstance(t, torch.Tensor) and isinstance(offset := t.storage_offset(), int) and offset * t.element_size() % 16 == 0:
            aligned.append(j)
    return tuple(aligned)


def _fx_key(gm: torch.fx.GraphModule, example_inputs: Sequence, kind: str, spec: str, checks: str,
            aligned: tuple[int, ...]) -> str | None:
    """The graph's cache key before import, or None (cache off, or a graph with no FX signature).  Beside the graph,
    the compile reads AOTAutograd's context: how many outputs a forward hands the user, whether it may report
    other output strides (``_saved_outputs_from``), and which static inputs it trusts aligned (``aligned``)."""
    from fusec.frontend.fx_signature import fx_signature
    from fusec.runtime import graph_cache

    signature = fx_signature(gm, example_inputs)
    if signature is None:
        return None
    tracing = torch._guards.TracingContext.try_get()
    returns = tracing.fw_metadata.num_forward_returns if tracing is not None and tracing.fw_metadata is not None else None
    strides = tracing is not None and tracing.output_strides is not None
    return graph_cache.fx_graph_key(signature, spec, checks, f"{kind} returns={returns} strides={strides} aligned={aligned}")


def _tell_caller(caller_log: remarks.RemarkLog | None, graph_remarks: list[remarks.Remark]) -> None:
    """A graph's remarks, added to the log of a ``remarks.collect()`` around the torch.compile'd call, if any (the
    backend's own collections are nested inside it and would hide them)."""
    if caller_log is not None:
        caller_log.remarks.extend(graph_remarks)


def _cache_hit(name: str) -> remarks.Remark:
    return remarks.Remark("backend", "graph-cache-hit", "compiled by an earlier process and loaded from fusec's cache: "
                          "the passes did not run here (their remarks are that compile's; FUSEC_CACHE_DIR)", (name,), {})


def _warm_import(key: str, gm: torch.fx.GraphModule, example_inputs: Sequence, name: str, options: BackendOptions):
    """(compiled graph, import info) a previous process stored under ``key``, or None.  The size guards its import
    had Dynamo add are added again (its kernels index in int32 up to those bounds)."""
    from fusec.frontend import index_guards
    from fusec.runtime import CompiledGraph, graph_cache
    from fusec.runtime.compile_pool import shared_pool

    constants = tuple(getattr(gm, str(n.target)) for n in gm.graph.find_nodes(op="get_attr"))
    hit = graph_cache.load_imported(key, name, constants)
    if hit is None:
        return None
    launcher, info, requests = hit
    if info.size_guards and not index_guards.apply(gm, example_inputs, info.size_guards):
        return None
    return CompiledGraph(launcher, pool=shared_pool(options.compile_workers)), info, requests


def _warm_start(module: ModuleOp, info: ImportInfo, spec: str, checks: str, options: BackendOptions):
    """(cache key or None when the cache is off, the compiled graph a previous process stored or None)."""
    from fusec.runtime import CompiledGraph, graph_cache
    from fusec.runtime.compile_pool import shared_pool

    key = graph_cache.module_key(module, spec, info.size_hints, checks)
    launcher = graph_cache.load(key, info.graph_name) if key is not None else None
    return key, (CompiledGraph(launcher, pool=shared_pool(options.compile_workers)) if launcher is not None else None)


def make_executor(module: ModuleOp, info: ImportInfo, execute: str = "triton", dump: Path | None = None,
                  input_checks: str = "all", compile_workers: int | None = None) -> Callable[[list[torch.Tensor]], list[torch.Tensor]]:
    """How a compiled graph runs (graph inputs -> graph outputs): the one place that decides.

    ``execute``: "triton" (generated kernels) or "interpret" (the reference interpreter);
    ``input_checks``: what the generated launcher checks of its inputs (``fusec.lowering.launcher.lower_graph``).
    """
    if execute == "triton":
        from fusec.report import trace
        from fusec.runtime import compile_module

        compiled = compile_module(module, info.size_hints, input_checks=input_checks, compile_workers=compile_workers)
        trace.sources(F.find_graph(module).sym_name.data, compiled)
        if dump is not None:
            _dump_triton(compiled, dump)
            compiled.dump_dir = dump
        return compiled
    from fusec.runtime import interpreter

    return functools.partial(interpreter.run, module)


def boxed_runner(info: ImportInfo, execute: Callable[[list[torch.Tensor]], list[torch.Tensor]]):
    """AOTAutograd's calling convention: one list of arguments (ours to clear), a list of outputs.  An input the
    graph writes (``info.mutations``) receives its new value here unless the launcher stored it there in place."""
    written = info.mutations

    def write_inputs(targets: list, outputs: Sequence[torch.Tensor]) -> None:
        for target, (_, k) in zip(targets, written, strict=True):
            if outputs[k] is not target:
                target.copy_(outputs[k])

    strided = [(j, slot.strides) for j, slot in enumerate(info.outputs) if slot.strides is not None]
    static_strides = all(e.is_Integer for _, strides in strided for e in strides)  # else the symbols are needed
    fixed_strides = [(j, tuple(int(e) for e in strides)) for j, strides in strided] if static_strides else []
    if info.carriers or not static_strides or any(slot.kind not in ("tensor", "value") or slot.dim_order
                                                  for slot in info.outputs):
        def run(args: list) -> list:
            symbols = info.bind_symbols(args)
            tensors = info.tensor_inputs(args, symbols)
            passed = {i: args[i] for i in info.passed_inputs}
            targets = [args[j] for j, _ in written]
            args.clear()  # let the inputs die as early as the graph allows
            outputs = list(execute(tensors))
            write_inputs(targets, outputs)
            return info.assemble_outputs(outputs, symbols, passed)
    else:  # the common case, kept to a few list operations per call: no symbol is needed outside the graph
        taken = [i for i, slot in enumerate(info.inputs) if slot.kind == "tensor"]
        picked = [slot.index if slot.kind == "tensor" else 0 for slot in info.outputs]
        # Python values among the outputs (a backward's None for an input that needs no gradient)
        values = [(j, slot.value) for j, slot in enumerate(info.outputs) if slot.kind == "value"]
        if values and not any(slot.kind == "tensor" for slot in info.outputs):
            picked = []  # nothing to index: every output is a value

        def run(args: list) -> list:
            tensors = [args[i] for i in taken]
            if info.constants:
                tensors += info.constants_on(tensors[0].device if tensors else info.device)
            targets = [args[j] for j, _ in written] if written else None
            args.clear()
            outputs = execute(tensors)
            if targets:
                write_inputs(targets, outputs)
            result: list = [outputs[i] for i in picked] if picked else [None] * len(values)
            for j, value in values:
                result[j] = value
            for j, strides in fixed_strides:  # strided views of the graph's values: eager's strides (importer)
                result[j] = strided_like_eager(result[j], strides)
            return result

    setattr(run, "_boxed_call", True)  # noqa: B010 -- AOTAutograd's flag on a function object, unknown to the type checker
    return run


def _dump_triton(compiled, dump: Path) -> None:
    """The generated code: the host launcher and each kernel's Triton source."""
    (dump / "launcher.py").write_text(compiled.source)
    for kernel in compiled.kernels:
        (dump / f"{kernel.name}.py").write_text(kernel.source)


def _eager(gm: torch.fx.GraphModule, name: str, reason: str, dump: Path | None):
    """A graph the IR cannot express runs as torch ops, with a warning saying why."""
    from functorch.compile import make_boxed_func

    warnings.warn(f"fusec: graph {name} runs with torch (not compiled): {reason}", stacklevel=2)
    if dump is not None:
        dump.mkdir(parents=True, exist_ok=True)
        (dump / "fx_graph.py").write_text(gm.print_readable(print_output=False))
        (dump / "not-compiled.txt").write_text(reason + "\n")
    return make_boxed_func(gm.forward)


_names: set[str] = set()
_counter = itertools.count()


def graph_name(kind: str) -> str:
    """``forward_0_1``: the kind and Dynamo's compile id (frame, recompile), so a forward and its backward pair up."""
    compile_id = torch._guards.CompileContext.current_compile_id()
    suffix = re.sub(r"\W+", "_", str(compile_id)).strip("_") if compile_id is not None else str(next(_counter))
    name = f"{kind}_{suffix}"
    for n in itertools.count(1):
        if name not in _names:
            break
        name = f"{kind}_{suffix}_{n}"
    _names.add(name)
    return name


def module_text_with_locations(module: ModuleOp) -> str:
    """The IR with each op's FX node and source line: ``loc("mul_3"("model.py":12:9))``."""
    out = StringIO()
    Printer(stream=out, print_debuginfo=True).print_op(module)
    out.write("\n")
    return out.getvalue()
