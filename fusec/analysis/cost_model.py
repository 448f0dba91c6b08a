"""A static cost model for launching kernels alone or as one combo kernel.

No benchmarking: it estimates from the IR alone.  Sizes are symbolic, so every
estimate goes through ``SizeHints`` (a value per size symbol, whose origin is
recorded so that a remark can say when a value was assumed).

The model, per kernel ``i`` on a GPU with ``W = sm_count`` block slots::

    B_i   bytes moved: each distinct input buffer read once over the elements its
          loads touch (at most the buffer's size), each output buffer written once
    N_i   thread blocks: cdiv(xnumel, XBLOCK) with the block sizes of ``block_shape``
    tau_i time of one block = (B_i / N_i) / (BW / W)   (a block gets one SM's share of
          the bandwidth: a kernel with few blocks cannot saturate HBM)

    alone:  T_i      = L + ceil(N_i / W) * tau_i                (whole waves)
    combo:  T_combo  = L + max_i tau_i                           if sum N_i <= W (one wave)
                     = L + sum_i N_i * tau_i / W + max_i tau_i   otherwise (list scheduling:
                       the work spread over W slots plus a tail of the longest block)

A combo pays one launch overhead ``L`` instead of ``n``; it loses when the tail of
its longest blocks costs more than the launches it saves.  Joining kernel ``k`` to a
group ``G`` is profitable iff ``T(G + k) < T(G) + T(k)``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import sympy
from xdsl.ir import SSAValue

from fusec.analysis import heuristics, register_pressure
from fusec.base import dtypes, shapes
from fusec.dialects import fusec as F
from fusec.dialects.attributes import tensor_type_of

# Used for a size symbol with neither a hint option nor a declared lower bound above 1.
DEFAULT_SIZE_HINT = 8192



# ---------------------------------------------------------------- size hints


@dataclass(frozen=True)
class SizeHints:
    """A value for each size symbol, and where it came from ("option", "example", "derived", "lower-bound", "default")."""

    values: Mapping[str, int]
    origin: Mapping[str, str] = field(default_factory=dict)

    def __call__(self, expr: sympy.Basic | int) -> int:
        """The hinted value of a size expression (symbols missing from ``values`` take the default)."""
        e = sympy.sympify(expr)
        if e.is_Integer:
            return max(0, int(e))
        env = {name: self.values.get(name, DEFAULT_SIZE_HINT) for name in shapes.free_size_symbols([e])}
        return max(0, shapes.evaluate(e, env))

    @property
    def defaulted(self) -> list[str]:
        return sorted(s for s, o in self.origin.items() if o == "default")

    def remark_data(self) -> dict:
        data: dict = {"size_hints": dict(self.values)}
        if self.defaulted:
            data["defaulted_size_hints"] = {s: DEFAULT_SIZE_HINT for s in self.defaulted}
        return data


def parse_size_hints(entries: Iterable[str]) -> dict[str, int]:
    """``("s0=1024", "s1=64")`` -> ``{"s0": 1024, "s1": 64}``; ValueError naming the bad entry."""
    out: dict[str, int] = {}
    for entry in entries:
        name, sep, value = entry.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not shapes._SYMBOL_NAME.match(name) or name in shapes.INDEX_VARS or not value.isdigit():
            raise ValueError(f"size hint '{entry}' is not of the form SYMBOL=INTEGER (e.g. s0=1024)")
        out[name] = int(value)
    return out


def resolve_size_hints(graph: F.GraphOp, overrides: Mapping[str, int] | None = None) -> SizeHints:
    """Hints for every symbol the graph declares or uses: the option's value, else the example size the
    graph was traced with (``s0 in [2, inf] hint 16``), else a derived size's value from its symbols', else
    the declared lower bound when it is above 1, else ``DEFAULT_SIZE_HINT`` (recorded as "default")."""
    overrides = dict(overrides or {})
    declared = graph.declared_symbols
    used = set(declared)
    for arg in graph.block.args:
        used |= shapes.free_size_symbols(tensor_type_of(arg).dims)
    for op in graph.walk():
        for prop in op.properties.values():
            if isinstance(prop, F.ExprAttr):
                used |= shapes.free_size_symbols([prop.data])
        if isinstance(op, F.KernelOp):
            used |= shapes.free_size_symbols(op.domain_exprs)
        for r in op.results:
            if isinstance(r.type, F.TensorType):
                used |= shapes.free_size_symbols(r.type.dims)
    values: dict[str, int] = {}
    origin: dict[str, str] = {}
    definitions = graph.symbol_definitions
    used |= shapes.free_size_symbols(definitions.values())
    # Derived sizes after the sizes they are computed from, each after those named before it (d0 before d1).
    for s in sorted(used, key=lambda s: (s in definitions, shapes.natural_key(s))):
        if s in overrides:
            values[s], origin[s] = overrides[s], "option"
        elif s in declared and (example := declared[s].example) is not None:
            values[s], origin[s] = example, "example"
        elif s in definitions and shapes.free_size_symbols([definitions[s]]) <= set(values):
            values[s], origin[s] = max(shapes.evaluate(definitions[s], values), 1), "derived"
        elif s in declared and declared[s].lower.data > 1:
            values[s], origin[s] = declared[s].lower.data, "lower-bound"
        else:
            values[s], origin[s] = DEFAULT_SIZE_HINT, "default"
    return SizeHints(values, origin)


# ---------------------------------------------------------------- per-kernel numbers


def element_bytes(t) -> int:
    return dtypes.of_ir(F.element_of(t)).bytes


@functools.lru_cache(maxsize=4096)  # types repeat: the combo and liveness analyses ask for every live set
def storage_numel(t: F.TensorType) -> sympy.Expr:
    """Elements a buffer of this type spans (its strides included)."""
    if any(d == 0 for d in t.dims):
        return sympy.Integer(0)
    return sympy.Integer(1) + sum(((d - 1) * s for d, s in zip(t.dims, t.layout, strict=True)), sympy.Integer(0))


def buffer_bytes(t: F.TensorType, hints: SizeHints) -> int:
    return hints(storage_numel(t)) * element_bytes(t)


def _uses_r(expr: sympy.Basic) -> bool:
    return "r" in {s.name for s in sympy.sympify(expr).free_symbols}


def kernel_bytes(kernel: F.KernelOp, hints: SizeHints) -> int:
    """Bytes a kernel moves: each buffer once, over the elements its accesses touch."""
    xnumel = hints(kernel.domain_exprs[0])
    rnumel = hints(kernel.domain_exprs[1]) if kernel.is_reduction else 1
    touched: dict[SSAValue, int] = {}
    for op in kernel.block.ops:
        if isinstance(op, (F.LoadOp, F.StoreOp)):
            iterations = xnumel * rnumel if _uses_r(op.index.data) else xnumel
            if not {s.name for s in op.index.data.free_symbols} & {"x", "r"} and getattr(op, "offset", None) is None:
                iterations = 1  # one element for the whole kernel
            touched[op.buffer] = max(touched.get(op.buffer, 0), iterations)
    total = 0
    for buf, iterations in touched.items():
        total += min(iterations, hints(storage_numel(tensor_type_of(buf)))) * element_bytes(buf.type)
    return total


@dataclass(frozen=True)
class BlockShape:
    """How a kernel is tiled: XBLOCK rows per block, RBLOCK (None: pointwise), persistent or looped;
    a tiled pointwise kernel has a block per XBLOCK x RBLOCK tile."""

    xblock: int
    rblock: int | None
    persistent: bool
    tiled: bool = False

    def blocks(self, xnumel: int, rnumel: int = 1) -> int:
        rows = shapes.ceil_div(xnumel, self.xblock)
        return max(1, rows * shapes.ceil_div(rnumel, self.rblock) if self.tiled and self.rblock else rows)


def block_shape(kernel: F.KernelOp, hints: SizeHints) -> BlockShape:
    """The block sizes the lowering's heuristics (fusec.analysis.heuristics) choose for the hinted sizes.

    A reduction counts as persistent when its hinted rnumel fits (the lowering asks for its bound).  A heavy body's
    limit on elements a thread holds is the recorded schedule's, or before ``schedule-kernels`` its default."""
    xnumel = max(hints(kernel.domain_exprs[0]), 1)
    if not kernel.is_reduction:
        return BlockShape(heuristics.pointwise_config(xnumel, _per_thread(kernel, "pointwise")).xblock, None, False)
    rnumel = max(hints(kernel.domain_exprs[1]), 1)
    if kernel.is_tiled:
        cfg = heuristics.tiled_config(xnumel, rnumel, _per_thread(kernel, "tiled"))
        return BlockShape(cfg.xblock, cfg.rblock, False, tiled=True)
    if rnumel <= heuristics.PERSISTENT_THRESHOLD:
        cfg = heuristics.persistent_config(xnumel, rnumel, per_thread=_per_thread(kernel, "persistent"))
        return BlockShape(cfg.xblock, cfg.rblock, True)
    cfg = heuristics.looped_config(xnumel, rnumel, per_thread=_per_thread(kernel, "looped"))
    return BlockShape(cfg.xblock, cfg.rblock, False)


def _per_thread(kernel: F.KernelOp, kind: str) -> int:
    if (schedule := kernel.schedule) is not None:
        return schedule.per_thread or 0
    return register_pressure.per_thread_limit(kernel, kind) or 0


# ---------------------------------------------------------------- time estimates


@dataclass(frozen=True)
class GPU:
    """The machine the estimates are for (defaults: an H100 SXM)."""

    sm_count: int = 132
    bandwidth_bytes_per_us: float = 3.0e6  # ~3 TB/s of achievable HBM bandwidth
    launch_overhead_us: float = 4.5
    # fp32 instructions issued outside the tensor cores: 132 SMs x 128 lanes x ~1.98 GHz (an FMA is one, 2 FLOPs);
    # ops are counted as instructions (FUNCTION_INSTRUCTIONS).  Was 6.0e7 (FLOPs) before 2026-11-27.
    ops_per_us: float = 3.3e7
    # 16-bit matmuls in cuBLAS (bench/matmul_alignment.py, GPT-2's LM head on an H100): 632 TFLOP/s when every
    # row is 16-byte aligned, 95 TFLOP/s in the kernel it falls back to when one is not.
    matmul_ops_per_us: float = 6.0e8
    misaligned_matmul_ops_per_us: float = 9.5e7
    # Device time a call takes beyond its work (H200, 2026-11-27, scratch sweep of matmul epilogues): cuBLAS took
    # 4.1-4.7 us for 1-1.5 GFLOP products that its rate gives 1.5-2.4 us; a small memory-bound kernel ~1.5 us.
    matmul_latency_us: float = 2.5
    kernel_latency_us: float = 1.5


@dataclass(frozen=True)
class KernelCost:
    bytes: int
    blocks: int

    def block_time_us(self, gpu: GPU) -> float:
        return (self.bytes / self.blocks) / (gpu.bandwidth_bytes_per_us / gpu.sm_count)


def kernel_cost(kernel: F.KernelOp, hints: SizeHints) -> KernelCost:
    rnumel = hints(kernel.domain_exprs[1]) if kernel.is_reduction else 1
    return KernelCost(kernel_bytes(kernel, hints), block_shape(kernel, hints).blocks(hints(kernel.domain_exprs[0]), rnumel))


def launch_time_us(costs: Sequence[KernelCost], gpu: GPU) -> float:
    """Estimated time of launching ``costs`` as one kernel (one member: the kernel alone)."""
    if not costs:
        return 0.0
    taus = [c.block_time_us(gpu) for c in costs]
    if len(costs) == 1:
        return gpu.launch_overhead_us + math.ceil(costs[0].blocks / gpu.sm_count) * taus[0]
    total_blocks = sum(c.blocks for c in costs)
    if total_blocks <= gpu.sm_count:
        return gpu.launch_overhead_us + max(taus)
    work = sum(c.blocks * t for c, t in zip(costs, taus, strict=True)) / gpu.sm_count
    return gpu.launch_overhead_us + work + max(taus)


def join_gain_us(group: Sequence[KernelCost], kernel: KernelCost, gpu: GPU) -> float:
    """Time saved by launching ``kernel`` inside the combo ``group`` rather than on its own (> 0: join)."""
    return launch_time_us(group, gpu) + launch_time_us([kernel], gpu) - launch_time_us([*group, kernel], gpu)


# ---------------------------------------------------------------- arguments


def kernel_size_symbols(kernel: F.KernelOp) -> set[str]:
    """Size symbols the kernel's source takes as arguments (domain, indices, symbolic values)."""
    syms = shapes.free_size_symbols(kernel.domain_exprs)
    for op in kernel.block.ops:
        for prop in op.properties.values():
            if isinstance(prop, F.ExprAttr):
                syms |= shapes.free_size_symbols([prop.data])
    return syms


def combo_arg_count(kernels: Sequence[F.KernelOp],
                    size_symbols: Callable[[F.KernelOp], set[str]] = kernel_size_symbols) -> int:
    """Pointer arguments (distinct inputs, every output) plus size arguments of one combined kernel;
    ``size_symbols``: ``kernel_size_symbols`` or a memo of it (a pass asking about the same kernels again)."""
    inputs = {v for k in kernels for v in k.inputs}
    outputs = sum(len(k.outputs) for k in kernels)
    sizes = set().union(*(size_symbols(k) for k in kernels)) if kernels else set()
    return len(inputs) + outputs + len(sizes)


# ---------------------------------------------------------------- recomputing a producer in its consumer

# Instructions one fp32 element of a pointwise function takes where an add takes 1: static SASS counts of a
# Triton kernel for sm_90 compiled by Triton's ptxas (2026-11-27, on the CPU), less a plain copy's.  Upper bounds
# for sin, cos and tan, whose count includes their large-argument path.  A function not listed counts 1.
FUNCTION_INSTRUCTIONS = {
    "div": 9, "exp": 5, "log": 28, "log2": 30, "sigmoid": 12, "sin": 117, "cos": 119, "tan": 115, "tanh": 18,
    "erf": 30, "erfc": 30, "pow": 81, "log1p": 32, "expm1": 26, "atan": 22, "asin": 30, "acos": 30, "sinh": 26,
    "cosh": 26,
}


def body_instructions(kernel: F.KernelOp) -> int:
    """A kernel body's ops weighted by ``FUNCTION_INSTRUCTIONS`` (what recomputing it costs an element)."""
    return sum(FUNCTION_INSTRUCTIONS.get(op.fn.data, 1) if isinstance(op, F.PointwiseOp) else 1
               for op in kernel.block.ops)



@dataclass(frozen=True)
class Recompute:
    """Inlining a pointwise producer into a consumer over another domain (a broadcast, a slice, a gather),
    in whole-kernel totals.  The consumer runs at the roofline, ``max(bytes / BW, ops / FLOPS)``: the
    producer's ops run again at each consumer point that reads it, which costs only what they add beyond
    the time the consumer's memory traffic takes anyway; against that, the producer's store and the
    consumer's load of it, and the producer's launch."""

    ops: int  # producer ops run beyond computing each of its elements once
    consumer_ops: int  # the consumer's own ops, over its domain
    consumer_bytes: int  # the consumer's own traffic
    bytes_saved: int  # the producer's store (when it disappears) and the consumer's load of it
    launch_share: float  # 1 when the producer disappears, 1/k when it is one of k readers that may each inline it

    def cost_us(self, gpu: GPU) -> float:
        before = max(self.consumer_bytes / gpu.bandwidth_bytes_per_us, self.consumer_ops / gpu.ops_per_us)
        return max(0.0, (self.consumer_ops + self.ops) / gpu.ops_per_us - before)

    def gain_us(self, gpu: GPU) -> float:
        return self.bytes_saved / gpu.bandwidth_bytes_per_us + self.launch_share * gpu.launch_overhead_us


def recompute(consumer: F.KernelOp, producer: F.KernelOp, producer_ops: int, hints: SizeHints,
              producer_erased: bool, readers: int) -> Recompute:
    """The estimate for ``consumer`` recomputing ``producer`` (``producer_ops`` per point it reads, distinct
    read indices included, in ``FUNCTION_INSTRUCTIONS`` units); ``readers``: how many kernels read the producer (0:
    an extern or output does)."""
    consumer_points, producer_points = hints(shapes.numel(consumer.domain_exprs)), hints(producer.domain_exprs[0])
    item = sum(element_bytes(r.type) for r in producer.results)
    once = producer_ops * producer_points if producer_erased else 0
    read = min(consumer_points, producer_points) * item
    stored = producer_points * item if producer_erased else 0
    share = 1.0 if producer_erased else (1.0 / readers if readers else 0.0)
    return Recompute(max(0, producer_ops * consumer_points - once), body_instructions(consumer) * consumer_points,
                     kernel_bytes(consumer, hints), read + stored, share)
