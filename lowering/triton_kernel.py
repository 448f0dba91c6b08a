"""One ``fusec.kernel`` -> the source of a Triton kernel module, and what a launcher needs to call it.

The kernel's arguments are its buffers (inputs then outputs), then the sizes as
runtime ints (``xnumel``, ``rnumel``, then every size symbol its body reads), then
the constexprs ``XBLOCK`` (and ``RBLOCK``): one source serves every size.

Four shapes of kernel, as the kernel's recorded schedule says (``schedule-kernels``
records it; for IR without one, ``kernel_schedule`` runs the same decision, from
``fusec.passes.schedule_kernels``, with this lowering's options):

* pointwise (domain ``[xnumel]``): 1-D blocks of ``XBLOCK`` elements.
* tiled pointwise (a ``tiled`` kernel, domain ``[xnumel, rnumel]``, no reductions):
  a program owns one ``[XBLOCK, RBLOCK]`` tile, both offsets from its program id on a
  1-D grid of ``cdiv(xnumel, XBLOCK) * cdiv(rnumel, RBLOCK)`` programs; the body is
  straight-line like a persistent reduction's.  Loads contiguous along x and loads
  contiguous along r (a transpose) both coalesce; broadcast operands load once per
  tile row or column.  Inside a combo a tiled kernel keeps its tiles: the combo gives it
  a range of program ids, a tile each.
* persistent reduction: a program holds ``XBLOCK`` whole rows, ``RBLOCK`` >= rnumel;
  the body is one straight block, reductions are ``tl.sum(..., 1)`` and friends.
* looped reduction: each reduction *phase* is one ``for roffset`` loop that
  accumulates in ``[XBLOCK, RBLOCK]`` registers and reduces across lanes after the
  loop.  A reduction whose input needs an earlier reduction is in a later phase; values
  per (x, r) are recomputed (loads re-issued) in each loop that needs them, and per-(x, r)
  stores of the last phase's values get a final loop of their own.  Softmax's sum of
  ``exp(v - max(v))`` is the exception: it is kept online in the max's loop (a running
  max per lane, the sum rescaled by ``exp(old - new)`` as the max grows), as Inductor's
  online softmax does, so a log-softmax's statistics read ``v`` once.

Values per x are ``[XBLOCK, 1]`` and values per (x, r) ``[XBLOCK, RBLOCK]`` (or
``[1, RBLOCK]`` when they do not depend on x), so they broadcast like the
reference interpreter's columns and rows.  Index arithmetic is the schedule's index
type; with int64 the program offset, ``rindex`` and the size arguments are int64.

The function's body is built as a ``KernelBody``: statements whose own names are
slots, printed once with the names as they are, or inlined into a combo with the
combo's names (``fusec.lowering.combo_kernel``).  Each lowered kernel writes its own
launch lines (``TritonKernel.launch_lines``) for the launcher.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from string import Template

import sympy
from xdsl.ir import Operation, SSAValue

from fusec.analysis import heuristics
from fusec.base import shapes
from fusec.dialects import fusec as F
from fusec.dialects.attributes import tensor_type_of
from fusec.lowering import triton_ops as ops
from fusec.lowering.expr_printer import triton_expr
from fusec.lowering.launching import LaunchSite, config_code, launch_config
from fusec.passes.kernel_index import matmul_coordinates, matmul_products, tile_operands
from fusec.passes.schedule_kernels import DEFAULT_MAX_RBLOCK, decide_schedule, kernel_name, symbol_bounds

DEFAULT_HINT = 8192  # a symbol with no hint: Inductor's guess for unbacked sizes


@dataclass(frozen=True)
class LoweringOptions:
    """Choices of the Triton lowering.

    persistent_threshold: a reduction whose rnumel is provably at most this many
        elements keeps whole rows in registers (0 forces the looped form).
    max_rblock: the largest RBLOCK of a looped reduction (small values test the loop).
    runtime_persistent: a looped kernel over a symbolic rnumel also gets a persistent form, which a call
        whose rows fit runs (``persistent_up_to``).
    """

    persistent_threshold: int = heuristics.PERSISTENT_THRESHOLD
    max_rblock: int = DEFAULT_MAX_RBLOCK
    runtime_persistent: bool = True


@dataclass(frozen=True)
class TritonKernel:
    """A lowered kernel: its module source and its calling convention."""

    name: str
    source: str
    kind: str  # "pointwise" | "tiled" | "persistent" | "looped"
    num_inputs: int
    num_outputs: int
    size_args: tuple[tuple[str, sympy.Expr], ...]  # runtime ints after the pointers: (argument, value over size symbols)
    outer: bool  # a reduction whose loads are contiguous along x, not r
    index_dtype: str  # "int32" | "int64"
    max_rblock: int = DEFAULT_MAX_RBLOCK
    body: KernelBody | None = None  # its function's body, for combos to inline
    # A looped kernel's persistent form and the rnumel up to which a call runs it (``persistent_up_to``).
    persistent_form: TritonKernel | None = None
    persistent_up_to: int | None = None
    tiles: F.MatmulTiles | None = None  # a matmul's (its schedule's)
    matmul_dims: tuple[sympy.Expr, sympy.Expr, sympy.Expr] | None = None  # a matmul's [B, M, N]
    tma_pointers: tuple[int, ...] = ()  # a tensor-descriptor matmul's operand pointers (positions among its pointers)
    per_thread: int = 0  # the schedule's limit on elements a thread holds (0: none)
    warps: int = 0  # a looped outer schedule's warps a program (0: the heuristic's)

    @property
    def constexprs(self) -> tuple[str, ...]:
        if self.kind == "matmul":
            return matmul_constexprs(self.tiles)
        return ("XBLOCK",) if self.kind == "pointwise" else ("XBLOCK", "RBLOCK")

    def config(self, xnumel: int, rnumel: int = 1) -> heuristics.LaunchConfig:
        """Block sizes and warps for these sizes."""
        return launch_config(self.kind, self.outer, self.max_rblock, xnumel, rnumel, self.per_thread, self.warps)

    def config_code(self, xnumel: str, rnumel: str) -> str:
        """Host code for ``config`` of the sizes in variables ``xnumel`` and ``rnumel``."""
        return config_code(self.kind, self.outer, self.max_rblock, xnumel, rnumel, self.per_thread, self.warps)

    def programs_code(self, xnumel: str, rnumel: str, xblock: str, rblock: str) -> str:
        """Host (and Triton) code for ``programs`` of sizes and blocks in these variables."""
        rows = f"({xnumel} + {xblock} - 1) // {xblock}"
        return f"{rows} * (({rnumel} + {rblock} - 1) // {rblock})" if self.kind == "tiled" else rows

    def programs(self, xnumel: int, rnumel: int = 1) -> int:
        """Programs one launch runs for these sizes (its 1-D grid): a row block each, a tile each when tiled."""
        cfg = self.config(xnumel, rnumel)
        rows = shapes.ceil_div(xnumel, cfg.xblock)
        return rows * shapes.ceil_div(rnumel, cfg.rblock) if self.kind == "tiled" else rows

    def launch_lines(self, site: LaunchSite, pointers: Sequence[str]) -> list[str]:
        """Host lines launching this kernel on ``pointers`` (its buffers): literal block sizes for a static
        domain, else sizes chosen per call by the same heuristic; with a persistent form, the call's rnumel
        picks the form."""
        if self.persistent_form is not None:
            rnumel = site.py(dict(self.size_args)["rnumel"])
            return ([f"if {rnumel} <= {self.persistent_up_to}:  # whole rows fit: the persistent form"]
                    + ["    " + line for line in self.persistent_form.launch_lines(site, pointers)]
                    + ["else:"] + ["    " + line for line in self._launch_lines(site, pointers)])
        return self._launch_lines(site, pointers)

    def _launch_lines(self, site: LaunchSite, pointers: Sequence[str]) -> list[str]:
        if self.kind == "matmul":
            return self._matmul_launch_lines(site, pointers)
        sizes = dict(self.size_args)
        reduction = "rnumel" in sizes
        xnumel, rnumel = sizes["xnumel"], sizes.get("rnumel", sympy.Integer(1))
        args, lines = list(pointers), []
        if not (xnumel.free_symbols or rnumel.free_symbols):
            x, r = int(xnumel), int(rnumel)
            cfg = self.config(x, r)
            args += [str(x)] + ([str(r)] if reduction else [])
            blocks = [("XBLOCK", str(cfg.xblock))] + ([("RBLOCK", str(cfg.rblock))] if reduction else [])
            grid, warps = str(self.programs(x, r)), str(cfg.num_warps)
        else:
            lines.append(site.int_variable("xnumel", xnumel))
            if reduction:
                lines.append(site.int_variable("rnumel", rnumel))
            args += ["xnumel"] + (["rnumel"] if reduction else [])
            targets = "XBLOCK, _, num_warps" if self.kind == "pointwise" else "XBLOCK, RBLOCK, num_warps"
            lines.append(f"{targets} = {self.config_code('xnumel', 'rnumel')}")
            blocks = [("XBLOCK", "XBLOCK")] + ([("RBLOCK", "RBLOCK")] if reduction else [])
            grid, warps = self.programs_code("xnumel", "rnumel", "XBLOCK", "RBLOCK"), "num_warps"  # a program a tile
        args += [site.py(e) for name, e in self.size_args if name not in ("xnumel", "rnumel")]
        lines.append(site.launch(self.name, grid, warps, args, len(pointers), blocks))
        return lines


    def _matmul_launch_lines(self, site: LaunchSite, pointers: Sequence[str]) -> list[str]:
        """A program per [block_m, block_n] tile of each batch's product: literal sizes where static."""
        assert self.tiles is not None and self.matmul_dims is not None
        t = self.tiles
        batch, m, n = self.matmul_dims
        lines: list[str] = []
        if not any(d.free_symbols for d in (batch, m, n)):
            grid = str(int(batch) * shapes.ceil_div(int(m), t.block_m) * shapes.ceil_div(int(n), t.block_n))
        else:
            tiles = f"(({site.py(m)} + {t.block_m - 1}) // {t.block_m}) * (({site.py(n)} + {t.block_n - 1}) // {t.block_n})"
            grid = tiles if batch == 1 else f"{site.py(batch)} * {tiles}"
        if t.programs:  # persistent: at most that many programs, each looping over tiles
            grid = str(min(t.programs, int(grid))) if grid.isdigit() else f"min({t.programs}, {grid})"
        args = list(pointers) + [site.py(e) if e.free_symbols else str(int(e)) for _, e in self.size_args]
        blocks = [("BLOCK_M", str(t.block_m)), ("BLOCK_N", str(t.block_n)), ("BLOCK_K", str(t.block_k)), ("GROUP_M", str(t.group_m))]
        if t.tma:  # tensor descriptors: 16-byte aligned operands, int32 sizes; checked per call where not known
            sizes = (m, n, dict(self.size_args)["rnumel"])
            checks = [f"{pointers[i]}.data_ptr() % 16 == 0" for i in self.tma_pointers if not site.is_aligned(pointers[i])]
            checks += [f"{site.py(d)} < {2**31}" for d in sizes if d.free_symbols]
            fits = all(int(d) < 2**31 for d in sizes if not d.free_symbols)
            blocks.append(("TMA", "0" if not fits else f"int({' and '.join(checks)})" if checks else "1"))
        lines.append(site.launch(self.name, grid, str(t.warps), args, len(pointers), blocks))
        return lines


MATMUL_CONSTEXPRS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")


def matmul_constexprs(tiles: F.MatmulTiles | None) -> tuple[str, ...]:
    """A matmul kernel's constexprs: its tile, and ``TMA`` (whether this call's operands load through tensor
    descriptors) where its schedule has them."""
    return MATMUL_CONSTEXPRS + (("TMA",) if tiles is not None and tiles.tma else ())


class LoweringError(ValueError):
    """A kernel the Triton lowering cannot express; the message names the kernel and op."""


PROGRAM_ID = "program_id"  # the slot a body reads its program's index from


@dataclass(frozen=True)
class KernelBody:
    """A kernel function's body as statements with named slots, for printing alone or inlining into a combo.

    Each statement is a line of code (indented for the function body) in which every
    name of the kernel's own is a ``string.Template`` slot: ``$xindex``, ``$in_ptr0``,
    ``$tmp3``.  Slots are the parameters (pointers, sizes, constexprs), ``$program_id``
    (the program's index) and the names the body binds (``locals``); Triton's and the
    helpers' names (``tl``, ``_sum``) are plain text.  ``rebound``: size parameters the
    body assigns (int64 casts).
    """

    pointers: tuple[str, ...]
    sizes: tuple[str, ...]
    constexprs: tuple[str, ...]
    rebound: tuple[str, ...]
    statements: tuple[str, ...]

    @property
    def params(self) -> tuple[str, ...]:
        return self.pointers + self.sizes + self.constexprs

    @property
    def locals(self) -> tuple[str, ...]:
        """The names the body binds, in order of first use."""
        seen = dict.fromkeys(n for line in self.statements for n in Template(line).get_identifiers())
        return tuple(n for n in seen if n not in self.params and n != PROGRAM_ID)

    def lines(self, names: Mapping[str, str]) -> list[str]:
        """The statements with every slot filled from ``names`` (all of them: a missing one is an error)."""
        return [Template(line).substitute(names) for line in self.statements]

    def function(self, name: str) -> str:
        """The ``@triton.jit`` function ``name`` with this body, its names as they are."""
        params = [*self.pointers, *self.sizes, *(f"{c}: tl.constexpr" for c in self.constexprs)]
        names = {n: n for n in self.params + self.locals} | {PROGRAM_ID: "tl.program_id(0)"}
        return "\n".join(["@triton.jit", f"def {name}({', '.join(params)}):", *self.lines(names)]) + "\n"


def kernel_schedule(kernel: F.KernelOp, size_hints: Mapping[str, int] | None = None,
                    bounds: Mapping[str, tuple[float, float]] | None = None,
                    options: LoweringOptions = LoweringOptions()) -> tuple[F.KernelSchedule, str]:
    """The schedule and name ``kernel`` is lowered with: what ``schedule-kernels`` recorded, else its decision now.

    Options, hints and bounds serve only the decision for a kernel without a recorded
    schedule (IR that did not run the pass); a hint past a declared bound widens it.
    """
    recorded = kernel.schedule
    if recorded is not None:
        name = kernel.sym_name.data
        if not name.isidentifier():
            raise LoweringError(f"fusec.kernel @{name}: a scheduled kernel's name must be a Python identifier")
        return recorded, name
    bounds = dict(symbol_bounds(kernel) if bounds is None else bounds)
    for sym, hint in (size_hints or {}).items():
        lo, hi = bounds.get(sym, (1, math.inf))
        bounds[sym] = (lo, max(hi, hint))  # stay correct for the example sizes
    return decide_schedule(kernel, bounds, options.persistent_threshold, options.max_rblock, options.runtime_persistent)


def lower_kernel(kernel: F.KernelOp, size_hints: Mapping[str, int] | None = None,
                 bounds: Mapping[str, tuple[float, float]] | None = None,
                 options: LoweringOptions = LoweringOptions()) -> TritonKernel:
    """The Triton module source for ``kernel``, as its recorded schedule says (see ``kernel_schedule``).

    ``bounds`` default to the enclosing graph's symbol declarations.  ``size_hints``
    (symbol -> example value) are used only where a decision may not depend on them
    for correctness: nothing in the source is sized from a hint.
    """
    schedule, name = kernel_schedule(kernel, size_hints, bounds, options)
    if schedule.kind == "matmul":
        return _MatmulWriter(kernel, schedule, name).lower()
    lowered = _KernelWriter(kernel, schedule, name).lower()
    if schedule.persistent_up_to is None:
        return lowered
    persistent = F.KernelSchedule("persistent", schedule.index, schedule.outer, per_thread=schedule.per_thread)
    per_name = kernel_name(name, "persistent")
    per_name = per_name if per_name != name else f"{name}_persistent"
    form = _KernelWriter(kernel, persistent, per_name).lower()
    return dataclasses.replace(lowered, persistent_form=form, persistent_up_to=schedule.persistent_up_to)


# ---------------------------------------------------------------- code generation


@dataclass
class _Value:
    name: str
    dtype: str  # compute dtype
    has_x: bool
    has_r: bool
    phase: int = 0  # how many reduction loops must run before it is known


@dataclass
class _Stmt:
    """Code for one body op, split by where it goes in a looped kernel."""

    op: Operation
    lines: list[str] = field(default_factory=list)  # the op itself (persistent/pointwise: everything)
    init: list[str] = field(default_factory=list)  # looped reductions: accumulators, before the loop
    update: list[str] = field(default_factory=list)  # looped reductions: in the loop
    final: list[str] = field(default_factory=list)  # looped reductions: after the loop
    has_r: bool = False
    phase: int = 0
    deps: tuple[SSAValue, ...] = ()
    evicting: Callable[[str], list[str]] | None = None  # loads: the line with an L2 eviction policy


_RESERVED = {"xoffset", "xindex", "xmask", "rindex", "rmask", "roffset", "rbase", "xnumel", "rnumel", "XBLOCK",
             "RBLOCK", "pid", "rtiles", "tl", "triton", "libdevice", PROGRAM_ID}


class _KernelWriter:
    def __init__(self, kernel: F.KernelOp, schedule: F.KernelSchedule, name: str):
        self.kernel, self.schedule, self.kind, self.name = kernel, schedule, schedule.kind, name
        self.reduction = kernel.is_reduction
        self.values: dict[SSAValue, _Value] = {}
        self.pointers = [f"in_ptr{i}" for i in range(len(kernel.inputs))] + [f"out_ptr{i}" for i in range(len(kernel.outputs))]
        self.buffers: dict[SSAValue, str] = {a: "$" + p for a, p in zip(kernel.block.args, self.pointers, strict=True)}
        self.symbols = sorted(_body_symbols(kernel), key=shapes.natural_key)
        self.params = {s: (s if s not in _RESERVED else f"sym_{s}") for s in self.symbols}  # symbol -> its parameter
        self.names = {"x": "$xindex", "r": "$rindex", **{s: "$" + p for s, p in self.params.items()}}
        self.index64 = schedule.index == "int64"
        self.count = 0

    def where(self, op: Operation) -> str:
        return f"fusec.kernel @{self.kernel.sym_name.data}: {op.name}"

    # ------------------------------------------------------------ helpers

    def fresh(self) -> str:
        name = f"$tmp{self.count}"
        self.count += 1
        return name

    def shape(self, has_x: bool, has_r: bool) -> str:
        if not self.reduction:
            return "[$XBLOCK]"
        return {(True, True): "[$XBLOCK, $RBLOCK]", (True, False): "[$XBLOCK, 1]", (False, True): "[1, $RBLOCK]"}[(has_x, has_r)]

    def mask(self, has_x: bool, has_r: bool, extra: SSAValue | None) -> str | None:
        parts = (["$rmask"] if has_r else []) + (["$xmask"] if has_x else [])
        if extra is not None:
            parts.append(self.values[extra].name)
        return " & ".join(parts) or None

    def index(self, e: sympy.Expr) -> tuple[str, bool, bool]:
        names = {s.name for s in e.free_symbols}
        return triton_expr(e, self.names), "x" in names, "r" in names

    def full(self, v: _Value) -> str:
        """A value broadcast to the whole reduction tile."""
        return v.name if (v.has_x and v.has_r) else f"tl.broadcast_to({v.name}, [$XBLOCK, $RBLOCK])"

    # ------------------------------------------------------------ ops

    def stmt(self, op: Operation) -> _Stmt:
        if isinstance(op, F.LoadOp):
            return self.load(op)
        if isinstance(op, F.StoreOp):
            return self.store(op)
        if isinstance(op, F.PointwiseOp):
            return self.pointwise(op)
        if isinstance(op, F.ConstantOp):
            return self.constant(op)
        if isinstance(op, F.SymbolicOp):
            return self.symbolic(op)
        if isinstance(op, F.ReduceROp):
            return self.reduce(op)
        raise LoweringError(f"{self.where(op)} has no Triton lowering")

    def define(self, op: Operation, value: _Value, lines: list[str], deps: tuple[SSAValue, ...]) -> _Stmt:
        self.values[op.results[0]] = value
        return _Stmt(op, lines, has_r=value.has_r, phase=value.phase, deps=deps)

    def _phase(self, deps) -> int:
        return max((self.values[d].phase for d in deps), default=0)

    def load(self, op: F.LoadOp) -> _Stmt:
        idx, hx, hr = self.index(op.index.data)
        ptr = f"{self.buffers[op.buffer]} + ({idx})"
        deps = tuple(v for v in (op.offset, op.mask) if v is not None)
        if op.offset is not None:
            off = self.values[op.offset]
            ptr = f"{self.buffers[op.buffer]} + ({off.name} + {idx})" if idx != "0" else f"{self.buffers[op.buffer]} + {off.name}"
            hx, hr = hx or off.has_x, hr or off.has_r
        ptr_dims = (hx, hr)
        if op.mask is not None:
            m = self.values[op.mask]
            hx, hr = hx or m.has_x, hr or m.has_r
        if not self.reduction or (not hx and not hr):
            hx = True  # every value of a pointwise kernel is [XBLOCK]; a scalar load is broadcast to the rows
        if ptr_dims != (hx, hr):
            ptr = f"tl.broadcast_to({ptr}, {self.shape(hx, hr)})"
        mask = self.mask(hx, hr, op.mask)
        return self.load_stmt(op, f"{ptr}, {mask}, other=0" if mask else ptr, hx, hr, deps)

    def load_stmt(self, op: F.LoadOp, args: str, hx: bool, hr: bool, deps: tuple[SSAValue, ...]) -> _Stmt:
        """``op`` as ``tl.load(args)``, widened to f32 from 16-bit floats, with its eviction-policy variant."""
        dtype = F.dtype_name(op.result.type)
        name = self.fresh()
        widen = ".to(tl.float32)" if dtype in ("float16", "bfloat16") else ""
        value = _Value(name, ops.compute_dtype(dtype), hx, hr, self._phase(deps))
        stmt = self.define(op, value, [f"{name} = tl.load({args}){widen}"], deps)
        stmt.evicting = lambda policy: [f"{name} = tl.load({args}, eviction_policy='{policy}'){widen}"]
        return stmt

    def constant(self, op: F.ConstantOp) -> _Stmt:
        dtype = F.dtype_name(op.result.type)
        name = self.fresh()
        code = f"tl.full({self.shape(True, False)}, {ops.literal(op.value.data, dtype)}, {ops.tl_dtype(ops.compute_dtype(dtype))})"
        return self.define(op, _Value(name, ops.compute_dtype(dtype), True, False), [f"{name} = {code}"], ())

    def symbolic(self, op: F.SymbolicOp) -> _Stmt:
        dtype = F.dtype_name(op.result.type)
        expr, hx, hr = self.index(op.expr.data)
        name = self.fresh()
        if hx or hr:
            code = f"({expr}).to({ops.tl_dtype(dtype)})"
            if not self.reduction:
                hx = True
        else:
            hx = True
            code = f"tl.full({self.shape(True, False)}, {expr}, {ops.tl_dtype(dtype)})"
        return self.define(op, _Value(name, dtype, hx, hr), [f"{name} = {code}"], ())

    def pointwise(self, op: F.PointwiseOp) -> _Stmt:
        fn = op.fn.data
        operands = [self.values[v] for v in op.inputs]
        result = F.dtype_name(op.result.type)
        declared = [F.dtype_name(v.type) for v in op.inputs]
        wanted = ops.operand_dtype(fn, declared, result)
        held = [v.name for v in operands]
        if ops.is_discontinuous(fn, result):
            # A 16-bit value is held in fp32 unrounded; where a jump in the result (a truncation to an int, a
            # comparison, a floor) sits between that value and its rounding, eager's answer is the rounded one's.
            held = [ops.round_to(n, d) if d in ("float16", "bfloat16") else n for n, d in zip(held, declared, strict=True)]
        args = [ops.convert(n, v.dtype, ops.compute_dtype(w)) for n, v, w in zip(held, operands, wanted, strict=True)]
        name = self.fresh()
        if fn == "convert":
            v, src = operands[0], declared[0]
            if src == result:
                code = v.name
            elif result in ("float16", "bfloat16"):
                code = ops.round_to(v.name, result)  # straight from the held value: one rounding
            else:
                code = ops.convert(held[0], v.dtype, ops.compute_dtype(result))
        else:
            op_dtype = ops.compute_dtype(wanted[-1] if fn != "where" else result)
            code = ops.pointwise_code(fn, args, op_dtype)
            if fn == "reciprocal" and op_dtype not in ops.FLOATS:
                code = f"({code}).to({ops.tl_dtype(op_dtype)})"
        out_dtype = "bool" if fn in F.PREDICATES else ops.compute_dtype(result)
        hx = any(v.has_x for v in operands) or not self.reduction
        hr = any(v.has_r for v in operands)
        if not hx and not hr:
            hx = True
        return self.define(op, _Value(name, out_dtype, hx, hr, self._phase(op.inputs)), [f"{name} = {code}"], tuple(op.inputs))

    def _online_softmax_input(self, op: F.ReduceROp) -> SSAValue | None:
        """``a`` where ``op`` is a looped kernel's ``sum(exp(a - max(a)))`` over fp32 ``a``: the sum is then kept online
        (a running max per lane, the sum rescaled when it grows) in the max's own loop, so ``a`` is read once where
        the phases would read it twice (a loss over a vocabulary: 512x32000 fp32 logits read twice ran at 1.7x
        Inductor's time, which also sums online)."""
        if self.kind != "looped" or op.kind.data != "sum" or F.dtype_name(op.result.type) != "float32":
            return None
        exp = op.input.owner
        sub = exp.inputs[0].owner if isinstance(exp, F.PointwiseOp) and exp.fn.data == "exp" else None
        if not (isinstance(sub, F.PointwiseOp) and sub.fn.data == "sub"):
            return None
        a, m = sub.inputs
        biggest = m.owner
        if not (isinstance(biggest, F.ReduceROp) and biggest.kind.data == "max" and biggest.input == a):
            return None
        v = self.values[a]
        return a if v.has_r and v.dtype == "float32" else None

    def _online_sum(self, op: F.ReduceROp, a: SSAValue) -> _Stmt:
        v = self.values[a]
        name = self.fresh()
        acc = f"$_acc{name.removeprefix('$tmp')}"
        tile = v.name if v.has_x else f"tl.broadcast_to({v.name}, [$XBLOCK, $RBLOCK])"
        # A lane that has seen only -inf (or nothing) keeps max -inf and sum 0; exp(-inf - 0) is 0, never nan.
        stmt = _Stmt(op, has_r=False, phase=v.phase + 1, deps=(a,))
        stmt.init = [f"{acc} = tl.full([$XBLOCK, $RBLOCK], 0.0, tl.float32)",
                     f"{acc}_max = tl.full([$XBLOCK, $RBLOCK], float('-inf'), tl.float32)"]
        stmt.update = [f"{acc}_in = tl.where($rmask & $xmask, {tile}, float('-inf'))",
                       f"{acc}_new = _max_nan({acc}_max, {acc}_in)",
                       f"{acc}_shift = tl.where({acc}_new == float('-inf'), 0.0, {acc}_new)",
                       f"{acc} = {acc} * tl.exp({acc}_max - {acc}_shift) + tl.exp({acc}_in - {acc}_shift)",
                       f"{acc}_max = {acc}_new"]
        stmt.final = [f"{acc}_row = tl.reduce({acc}_max, 1, _max_nan)[:, None]",
                      f"{acc}_row = tl.where({acc}_row == float('-inf'), 0.0, {acc}_row)",
                      f"{name} = tl.reduce({acc} * tl.exp({acc}_max - {acc}_row), 1, _sum)[:, None]"]
        self.values[op.result] = _Value(name, "float32", True, False, stmt.phase)
        return stmt

    def reduce(self, op: F.ReduceROp) -> _Stmt:
        online = self._online_softmax_input(op)
        if online is not None:
            return self._online_sum(op, online)
        kind = op.kind.data
        v = self.values[op.input]
        result = ops.compute_dtype(F.dtype_name(op.result.type))
        name = self.fresh()
        # Bools and small ints reduce in int32: no Triton promotion rules to second-guess in the loop.
        src, dtype = v.name, v.dtype
        if kind in ("any", "all") or (v.dtype == "bool" and kind in ("sum", "prod")):
            kind = {"sum": "any", "prod": "all"}.get(kind, kind)
            src, dtype = f"{ops.convert(v.name, v.dtype, 'bool')}.to(tl.int32)", "int32"
        elif v.dtype in ("bool", "int8", "int16", "uint8"):
            src, dtype = f"{v.name}.to(tl.int32)", "int32"
        tile = src if (v.has_x and v.has_r) else f"tl.broadcast_to({src}, [$XBLOCK, $RBLOCK])"
        fill = {"sum": "0", "prod": "1", "any": "0", "all": "1", "max": ops.lowest(dtype), "argmax": ops.lowest(dtype),
                "min": ops.highest(dtype), "argmin": ops.highest(dtype)}[kind]
        masked = f"tl.where($rmask & $xmask, {tile}, {fill})"
        rindex_tile = "tl.broadcast_to($rindex, [$XBLOCK, $RBLOCK])"
        floats = dtype in ops.FLOATS
        combine = {"sum": "_sum", "prod": "_prod", "max": "_max_nan" if floats else "_max", "min": "_min_nan" if floats else "_min",
                   "any": "_max", "all": "_min", "argmax": "_argmax_combine", "argmin": "_argmin_combine"}[kind]
        back = "" if dtype == result else " != 0" if result == "bool" else f".to({ops.tl_dtype(result)})"

        def across(acc: str, acc_index: str) -> list[str]:
            """The lane reduction of a [XBLOCK, RBLOCK] tile to a [XBLOCK, 1] column."""
            if kind in ("argmax", "argmin"):
                return [f"{name}_value, {name}_index = tl.reduce(({acc}, {acc_index}), 1, {combine})",
                        f"{name} = {name}_index[:, None].to(tl.int64)"]
            return [f"{name} = tl.reduce({acc}, 1, {combine})[:, None]{back}"]

        stmt = _Stmt(op, has_r=False, phase=v.phase + 1, deps=(op.input,))
        if self.kind == "tiled":
            raise LoweringError(f"{self.where(op)}: a tiled kernel holds no reduction")
        if self.kind == "persistent":
            stmt.lines = across(masked, rindex_tile)
        else:
            acc = f"$_acc{name.removeprefix('$tmp')}"
            stmt.init = [f"{acc} = tl.full([$XBLOCK, $RBLOCK], {fill}, {ops.tl_dtype(dtype)})"]
            if kind in ("argmax", "argmin"):
                # Lanes start at the identity with an index past every real one: a real value always wins a tie.
                stmt.init.append(f"{acc}_index = tl.full([$XBLOCK, $RBLOCK], {2**31 - 1}, {self.index_tl})")
                stmt.update = [f"{acc}, {acc}_index = {combine}({acc}, {acc}_index, {masked}, {rindex_tile})"]
            elif kind in ("sum", "prod"):
                stmt.update = [f"{acc} = {acc} {'+' if kind == 'sum' else '*'} {masked}"]
            else:
                stmt.update = [f"{acc} = {combine}({acc}, {masked})"]
            stmt.final = across(acc, f"{acc}_index")
        self.values[op.result] = _Value(name, result, True, False, stmt.phase)
        return stmt

    def store(self, op: F.StoreOp) -> _Stmt:
        idx, ix, ir = self.index(op.index.data)
        v = self.values[op.value]
        hx, hr = ix or v.has_x, ir or v.has_r
        deps: tuple[SSAValue, ...] = (op.value,)
        if op.mask is not None:
            m = self.values[op.mask]
            hx, hr = hx or m.has_x, hr or m.has_r
            deps += (op.mask,)
        if not self.reduction:
            hx = True
        if not hx and not hr:
            hx = True
        ptr = f"{self.buffers[op.buffer]} + ({idx})"
        if (ix, ir) != (hx, hr):
            ptr = f"tl.broadcast_to({ptr}, {self.shape(hx, hr)})"
        out_dtype = F.dtype_name(tensor_type_of(op.buffer).element_type)
        value = v.name if out_dtype == v.dtype else ops.convert(v.name, v.dtype, out_dtype)
        mask = self.mask(hx, hr, op.mask)
        line = f"tl.store({ptr}, {value}, {mask})" if mask else f"tl.store({ptr}, {value})"
        return _Stmt(op, [line], has_r=hr, phase=self._phase(deps), deps=deps)

    # ------------------------------------------------------------ assembly

    @property
    def index_tl(self) -> str:
        return "tl.int64" if self.index64 else "tl.int32"

    def lower(self) -> TritonKernel:
        stmts = [self.stmt(op) for op in self.kernel.block.ops]
        sizes = ["xnumel"] + (["rnumel"] if self.reduction else []) + [self.params[s] for s in self.symbols]
        constexprs = ["XBLOCK"] + (["RBLOCK"] if self.reduction else [])
        statements = self._prologue(sizes) + self._assemble(stmts)
        rebound = [s for s in sizes if s != "xnumel"] if self.index64 else []
        body = KernelBody(tuple(self.pointers), tuple(sizes), tuple(constexprs), tuple(rebound), tuple(statements))
        source = self._module(body.function(self.name))
        dom = self.kernel.domain_exprs
        size_args = [("xnumel", dom[0])] + ([("rnumel", dom[1])] if self.reduction else [])
        size_args += [(self.params[s], shapes.size_symbol(s)) for s in self.symbols]
        return TritonKernel(self.name, source, self.kind, len(self.kernel.inputs), len(self.kernel.outputs),
                            tuple(size_args), self.schedule.outer, self.schedule.index,
                            self.schedule.max_rblock or DEFAULT_MAX_RBLOCK, body, per_thread=self.schedule.per_thread or 0,
                            warps=self.schedule.warps or 0)

    def _prologue(self, sizes: list[str]) -> list[str]:
        """Statements placing the program's block: its offsets, indices and masks."""
        body: list[str] = []
        wide = ".to(tl.int64)" if self.index64 else ""
        if self.index64:
            body += [f"${s} = tl.cast(${s}, tl.int64)" for s in sizes if s != "xnumel"]
        if self.kind == "tiled":
            # One tile a program, tiles of a row of tiles at consecutive program ids.  A static row length is
            # written in, so the tile count is a constant and `pid // rtiles` a shift, not an integer division by a
            # runtime value (on the critical path of a kernel of one wave).
            cols = self.kernel.domain_exprs[1]
            rnumel = str(int(cols)) if isinstance(cols, sympy.Integer) else "$rnumel"
            body += [f"$pid = $program_id{wide}", f"$rtiles = ({rnumel} + $RBLOCK - 1) // $RBLOCK",
                     "$xoffset = ($pid // $rtiles) * $XBLOCK", "$roffset = ($pid % $rtiles) * $RBLOCK"]
        else:
            body.append(f"$xoffset = $program_id{wide} * $XBLOCK")
        rows = "[:, None]" if self.reduction else ""
        body += [f"$xindex = $xoffset + tl.arange(0, $XBLOCK){rows}", f"$xmask = {self._bound('x')}"]
        if self.kind == "tiled":
            body += ["$rindex = $roffset + tl.arange(0, $RBLOCK)[None, :]", f"$rmask = {self._bound('r')}"]
        elif self.kind == "persistent":
            body += [f"$rindex = tl.arange(0, $RBLOCK)[None, :]{wide}", f"$rmask = {self._bound('r')}"]
        elif self.kind == "looped":
            body += [f"$rbase = tl.arange(0, $RBLOCK)[None, :]{wide}"]
        return ["    " + b for b in body]

    def _bound(self, axis: str) -> str:
        """The mask of axis x or r.  A static size that the block divides needs none: a constant true mask, chosen
        when Triton specializes the block size, which Triton folds away with the loads' and reductions' selects
        (as Inductor drops its masks; 5% of a persistent RMSNorm over [4096, 2048] fp32, H200 2026-11-28)."""
        size = self.kernel.domain_exprs[0 if axis == "x" else 1]
        test = f"${axis}index < ${axis}numel"
        if not isinstance(size, sympy.Integer) or size <= 0:  # an empty axis masks everything
            return test
        shape = {"x": "[$XBLOCK, 1]" if self.reduction else "[$XBLOCK]", "r": "[1, $RBLOCK]"}[axis]
        block = "$XBLOCK" if axis == "x" else "$RBLOCK"
        return f"tl.full({shape}, True, tl.int1) if {int(size)} % {block} == 0 else {test}"

    def _assemble(self, stmts: list[_Stmt]) -> list[str]:
        if self.kind != "looped":
            return ["    " + line for s in stmts for line in s.lines]
        by_value: dict[SSAValue, _Stmt] = {r: s for s in stmts for r in s.op.results}
        reductions = [s for s in stmts if isinstance(s.op, F.ReduceROp)]
        phases = max((s.phase for s in reductions), default=0)
        r_stores = [s for s in stmts if isinstance(s.op, F.StoreOp) and s.has_r]
        store_loop = {id(s): (s.phase + 1 if s.phase + 1 <= phases else phases + 1) for s in r_stores}
        loops = max([phases] + list(store_loop.values()))
        out: list[str] = []
        emit = lambda lines, depth=1: out.extend("    " * depth + line for line in lines)  # noqa: E731
        per_x = [s for s in stmts if not s.has_r and not isinstance(s.op, (F.ReduceROp, F.StoreOp))]
        roots = {k: [s for s in reductions if s.phase == k] + [s for s in r_stores if store_loop[id(s)] == k] for k in range(1, loops + 1)}
        needed = {k: self._closure(roots[k], by_value) for k in roots}
        # A load that a later loop reads again should stay in L2 until then; its last read may go first (a
        # loop streams its rows through L2 once: 14% of an online softmax over 512 x 32000 fp32, bench 2026-11-27).
        last_loop = {i: max(k for k in needed if i in needed[k]) for k in needed for i in needed[k]}
        reread = {i for i in last_loop if sum(i in needed[k] for k in needed) > 1}
        emit([line for s in per_x if s.phase == 0 for line in s.lines])
        for k in range(1, loops + 1):
            emit([line for s in roots[k] if isinstance(s.op, F.ReduceROp) for line in s.init])
            out.append("    for $roffset in range(0, $rnumel, $RBLOCK):")
            emit(["$rindex = $roffset + $rbase", f"$rmask = {self._bound('r')}"], 2)
            for s in stmts:
                if id(s) in needed[k]:
                    if s.evicting is not None and (s.has_r or id(s) in reread):
                        emit(s.evicting("evict_first" if last_loop[id(s)] == k else "evict_last"), 2)
                    else:
                        emit(s.lines, 2)
                if isinstance(s.op, F.ReduceROp) and s.phase == k:
                    emit(s.update, 2)
                if isinstance(s.op, F.StoreOp) and store_loop.get(id(s)) == k:
                    emit(s.lines, 2)
            emit([line for s in roots[k] if isinstance(s.op, F.ReduceROp) for line in s.final])
            emit([line for s in per_x if s.phase == k for line in s.lines])
        emit([line for s in stmts if isinstance(s.op, F.StoreOp) and not s.has_r for line in s.lines])
        return out

    @staticmethod
    def _closure(roots: list[_Stmt], by_value: dict[SSAValue, _Stmt]) -> set[int]:
        """The per-(x, r) statements the roots read, transitively (they are recomputed in the loop)."""
        needed: set[int] = set()
        work = [d for s in roots for d in s.deps]
        while work:
            s = by_value.get(work.pop())
            if s is None or not s.has_r or id(s) in needed or isinstance(s.op, F.ReduceROp):
                continue
            needed.add(id(s))
            work.extend(s.deps)
        return needed

    def _module(self, text: str) -> str:
        dom = ", ".join(shapes.print_expr(d) for d in self.kernel.domain_exprs)
        what = {"pointwise": "pointwise", "tiled": "tiled pointwise ([XBLOCK, RBLOCK] tiles)",
                "persistent": "persistent reduction (whole rows in RBLOCK)",
                "looped": "looped reduction (RBLOCK-wide steps over r)"}[self.kind]
        index = "int64" if self.index64 else "int32"
        return ops.module_source(f"fusec kernel {self.name}: {what} over [{dom}], {index} indexing", text)


def _body_symbols(kernel: F.KernelOp) -> set[str]:
    exprs = [op.index.data for op in kernel.block.ops if isinstance(op, (F.LoadOp, F.StoreOp))]
    exprs += [op.expr.data for op in kernel.block.ops if isinstance(op, F.SymbolicOp)]
    return shapes.free_size_symbols(exprs)


class _MatmulWriter(_KernelWriter):
    """A matmul kernel (``fusec.kernel ... matmul [B, M, N]``, a ``matmul`` schedule): a program per tile of the
    product, its k-loop ``tl.dot`` on tiles of A and B, then the epilogue on the [BLOCK_M, BLOCK_N] accumulator.

    Every index is rewritten over the product's coordinates (``matmul_coordinates``: x = (b*M + m)*N + n), so A's
    loads read (b, m, r), B's (b, r, n) and the epilogue's (b, m, n): a bias is read at ``n``, not at
    ``x % N``.  Epilogue values are full tiles; the operand rows and columns wrap (``% M``, ``% N``) instead of
    being masked, as Triton's tutorial matmul does, so only a ragged k needs a mask in the loop."""

    def __init__(self, kernel: F.KernelOp, schedule: F.KernelSchedule, name: str):
        super().__init__(kernel, schedule, name)
        assert schedule.tiles is not None and kernel.matmul_dims is not None
        self.tiles = schedule.tiles
        self.dims = kernel.matmul_dims
        self.k = kernel.domain_exprs[1]
        self.reduction = False  # the epilogue is pointwise over the tile
        sizes = {s: "$" + p for s, p in self.params.items()}
        self.names = {"mm_b": "$mm_b", "mm_m": "$mm_m", "mm_n": "$mm_n", **sizes}
        self.size_names = sizes
        self.dots, self.dot_ops = self._find_dots()
        self.tile_operands = tile_operands(kernel) if self.tiles.tma else None
        if self.tiles.tma and self.tile_operands is None:
            raise LoweringError(f"fusec.kernel @{kernel.sym_name.data}: a tma schedule needs each operand a 2-D tensor "
                                "with 16-byte aligned rows, contiguous along k or along m (A) or n (B), of an unbatched product")

    def where(self, op) -> str:
        return f"fusec.kernel @{self.kernel.sym_name.data} (matmul): {op.name}"

    def shape(self, has_x: bool, has_r: bool) -> str:
        return "[$BLOCK_M, $BLOCK_N]"

    def mask(self, has_x: bool, has_r: bool, extra: SSAValue | None) -> str | None:
        return "$xmask" if extra is None else f"$xmask & {self.values[extra].name}"

    def coordinates(self, e: sympy.Expr) -> sympy.Expr:
        return matmul_coordinates(e, self.dims, self.k)

    def index(self, e: sympy.Expr) -> tuple[str, bool, bool]:
        e = self.coordinates(e)
        if "r" in {s.name for s in e.free_symbols}:
            raise LoweringError(f"fusec.kernel @{self.kernel.sym_name.data}: an epilogue index uses r: {shapes.print_expr(e)}")
        return triton_expr(e, self.names), False, False

    def load(self, op: F.LoadOp) -> _Stmt:
        """An epilogue load that reads along the product's columns only (a bias, a per-column scale) is one
        [1, BLOCK_N] row, along its rows only one [BLOCK_M, 1] column, broadcast where used: a tile's worth of
        loads (32768 for [128, 256]) would re-read the same few hundred elements."""
        if op in self.dot_ops or op.offset is not None or op.mask is not None:
            return super().load(op)
        e = self.coordinates(op.index.data)
        used = {s.name for s in e.free_symbols} & {"mm_b", "mm_m", "mm_n"}
        shape = {frozenset({"mm_n"}): "$nmask", frozenset({"mm_m"}): "$mmask"}.get(frozenset(used))
        if shape is None:
            return super().load(op)
        return self.load_stmt(op, f"{self.buffers[op.buffer]} + ({triton_expr(e, self.names)}), {shape}, other=0", True,
                              False, ())

    def symbolic(self, op: F.SymbolicOp) -> _Stmt:
        """A size, or the product coordinate of each lane (a padded product's column mask)."""
        dtype = F.dtype_name(op.result.type)
        e = self.coordinates(op.expr.data)
        code, name = triton_expr(e, self.names), self.fresh()
        if {s.name for s in e.free_symbols} & {"mm_b", "mm_m", "mm_n"}:
            line = f"{name} = tl.broadcast_to(({code}).to({ops.tl_dtype(dtype)}), [$BLOCK_M, $BLOCK_N])"
        else:
            line = f"{name} = tl.full([$BLOCK_M, $BLOCK_N], {code}, {ops.tl_dtype(dtype)})"
        return self.define(op, _Value(name, dtype, True, False), [line], ())

    def _find_dots(self) -> tuple[list[F.ReduceROp], dict]:
        """The ``reduce_r "sum"`` of each product of A's load and a B load (``kernel_index.matmul_products``: one, or
        several sharing A's tile, each its own accumulator), and the ops the main loop computes: each by its role
        (``a``, ``b0``, ``b1``, ...)."""
        products = matmul_products(self.kernel)
        if products is None:
            raise LoweringError(f"fusec.kernel @{self.kernel.sym_name.data}: a matmul kernel reduces products of one A "
                                "load and a B load each, in f32")
        ops: dict[Operation, str] = {}
        for i, product in enumerate(products):
            ops.update({product.reduce: "reduce", **dict.fromkeys(product.ops, "product")})
            # The product's first operand is A's element, its second B's (the IR's rule); each reads only its own
            # coordinates.
            for load, side, other in zip(product.loads, ("a", f"b{i}"), ("mm_n", "mm_m"), strict=True):
                if other in {s.name for s in self.coordinates(load.index.data).free_symbols}:
                    raise LoweringError(f"fusec.kernel @{self.kernel.sym_name.data}: the matmul's loads must read A at "
                                        "(b, m, r) and B at (b, r, n), A's first")
                ops[load] = side
        others = [op for op in self.kernel.block.ops if op not in ops and "r" in {
            s.name for p in op.properties.values() if isinstance(p, F.ExprAttr) for s in p.data.free_symbols}]
        if others:
            raise LoweringError(f"{self.where(others[0])}: only the matmul's own loads may read along r")
        dots = [p.reduce for p in products]
        if any(u.operation not in ops for op in ops if op not in dots for r in op.results for u in r.uses):
            raise LoweringError(f"fusec.kernel @{self.kernel.sym_name.data}: the matmul's operands feed only its product")
        return dots, ops

    def stmt(self, op: Operation) -> _Stmt:
        if op is self.dots[0]:  # one loop computes every product's accumulator
            return self.main_loop()
        if op in self.dot_ops:
            return _Stmt(op)
        if self.tiles.approx_tanh and isinstance(op, F.PointwiseOp) and op.fn.data == "tanh" \
                and F.dtype_name(op.result.type) in ("float32", "bfloat16", "float16"):
            v = self.values[op.inputs[0]]
            name = self.fresh()
            value = _Value(name, "float32", True, False)
            return self.define(op, value, [f"{name} = tanh_approx({ops.convert(v.name, v.dtype, 'float32')})"], tuple(op.inputs))
        return super().stmt(op)

    def operand(self, side: str) -> tuple[str, str]:
        """(the load of one k step's tile of A or B, its element dtype)."""
        load = self.operand_load(side)
        k_name = "$k_row" if side == "a" else "$k_col"
        names = {**self.size_names, "mm_b": "$mm_b", "mm_m": "$a_rows", "mm_n": "$b_cols", "r": k_name}
        index = triton_expr(self.coordinates(load.index.data), names)
        mask = "" if self.even_k else f", mask={k_name} < $rnumel, other=0.0"
        # A tile is [BLOCK_M, BLOCK_K] and B's [BLOCK_K, BLOCK_N] even where an operand does not vary along m or n
        # (a product of one row or one column: the index simplified m or n away).
        tile = "[$BLOCK_M, $BLOCK_K]" if side == "a" else "[$BLOCK_K, $BLOCK_N]"
        pointer = f"tl.broadcast_to({self.buffers[load.buffer]} + ({index}), {tile})"
        return f"tl.load({pointer}{mask})", F.dtype_name(load.result.type)

    @property
    def even_k(self) -> bool:
        return not self.k.free_symbols and int(self.k) % self.tiles.block_k == 0

    def main_loop(self) -> _Stmt:
        t = self.tiles
        a, a_dtype = self.operand("a")
        bs = [self.operand(f"b{i}")[0] for i in range(len(self.dots))]
        # One product keeps the names $acc and $b_tile; several (gate and up of one input) number theirs.
        accs = ["$acc"] if len(bs) == 1 else [f"$acc{i}" for i in range(len(bs))]
        b_tiles = ["$b_tile"] if len(bs) == 1 else [f"$b_tile{i}" for i in range(len(bs))]
        precision = "" if a_dtype != "float32" else ', input_precision="tf32"' if t.tf32 else ', input_precision="ieee"'
        lines = [f"{acc} = tl.full([$BLOCK_M, $BLOCK_N], 0.0, tl.float32)" for acc in accs]
        # A persistent kernel pipelines its loop over tiles (flattened with this one); a program a tile, this loop.
        steps = "range(0, $rnumel, $BLOCK_K)" if t.programs else f"tl.range(0, $rnumel, $BLOCK_K, num_stages={t.stages})"
        loads = ["$k_row = $k0 + tl.arange(0, $BLOCK_K)[None, :]", "$k_col = $k0 + tl.arange(0, $BLOCK_K)[:, None]",
                 f"$a_tile = {a}"] + [f"{tile} = {b}" for tile, b in zip(b_tiles, bs, strict=True)]
        if t.tma:
            loads = (["if TMA:"] + ["    " + line for line in self.descriptor_loads(b_tiles)] + ["else:"]
                     + ["    " + line for line in loads])
        lines += [f"for $k0 in {steps}:"] + ["    " + line for line in loads]
        if a_dtype != "float32":
            lines += ["    if DOT_IN_FP32:", "        $a_tile = $a_tile.to(tl.float32)"]
            lines += [f"        {tile} = {tile}.to(tl.float32)" for tile in b_tiles]
        lines += [f"    {acc} = tl.dot($a_tile, {tile}, {acc}{precision})" for acc, tile in zip(accs, b_tiles, strict=True)]
        for dot, acc in zip(self.dots, accs, strict=True):
            self.values[dot.result] = _Value(acc, "float32", True, False)
        return _Stmt(self.dots[0], lines)

    def descriptor_loads(self, b_tiles: list[str]) -> list[str]:
        """One k step's tiles of A and B through the tensor descriptors ``descriptors`` made: rows, columns and k
        past the tensor's end read as zeros (the unit pads them), so nothing wraps or masks."""
        assert self.tile_operands is not None
        lines = []
        for i, (tile, operand) in enumerate(zip(["$a_tile", *b_tiles], self.tile_operands, strict=True)):
            start = "$tile_m * $BLOCK_M" if i == 0 else "$tile_n * $BLOCK_N"
            k = "$k0"
            if self.index64:  # a descriptor's offsets are 32-bit (its sizes were checked to fit)
                start, k = f"tl.cast({start}, tl.int32)", "tl.cast($k0, tl.int32)"
            load = f"$desc{i}.load([{start}, {k}])" if operand.k_inner else f"$desc{i}.load([{k}, {start}])"
            # tl.dot takes A as [BLOCK_M, BLOCK_K] and B as [BLOCK_K, BLOCK_N]: transposed where the layout is the other.
            flipped = operand.k_inner != (i == 0)
            lines.append(f"{tile} = {load}{'.T' if flipped else ''}")
        return lines

    def descriptors(self) -> list[str]:
        """The operands' tensor descriptors (under ``TMA``: this call's operands are 16-byte aligned): A as [M, K]
        (or [K, M]), each B as [N, K] (or [K, N]), contiguous along the second dim; tiles of the program's block."""
        assert self.tile_operands is not None
        lines = ["if TMA:"]
        for i, (load, operand) in enumerate(zip(self.operand_loads(), self.tile_operands, strict=True)):
            outer, block = ("$mnumel", "$BLOCK_M") if i == 0 else ("$nnumel", "$BLOCK_N")
            if self.index64:  # the launcher checked that they fit (TMA's sizes are 32-bit)
                outer, k = f"tl.cast({outer}, tl.int32)", "tl.cast($rnumel, tl.int32)"
            else:
                k = "$rnumel"
            shape, blocks = ([outer, k], [block, "$BLOCK_K"]) if operand.k_inner else ([k, outer], ["$BLOCK_K", block])
            base = self.buffers[load.buffer]
            if operand.offset != 0:
                base = f"{base} + ({triton_expr(operand.offset, self.size_names)})"
            stride = triton_expr(operand.stride, self.size_names)
            lines.append(f"    $desc{i} = tl.make_tensor_descriptor({base}, shape=[{', '.join(shape)}], "
                         f"strides=[{stride}, 1], block_shape=[{', '.join(blocks)}])")
        return lines

    def operand_loads(self) -> list[F.LoadOp]:
        """A's load, then each B's."""
        return [self.operand_load("a")] + [self.operand_load(f"b{i}") for i in range(len(self.dots))]

    def operand_load(self, side: str) -> F.LoadOp:
        """The load of A (``a``) or of the i-th B (``b<i>``)."""
        load = next(op for op, s in self.dot_ops.items() if s == side)
        assert isinstance(load, F.LoadOp)
        return load

    def _prologue(self, sizes: list[str]) -> list[str]:
        """What a program computes once: int64 sizes, the tile counts, a tensor-descriptor kernel's descriptors."""
        body = [f"${s} = tl.cast(${s}, tl.int64)" for s in sizes] if self.index64 else []
        body += ["$tiles_m = ($mnumel + $BLOCK_M - 1) // $BLOCK_M", "$tiles_n = ($nnumel + $BLOCK_N - 1) // $BLOCK_N"]
        return body + (self.descriptors() if self.tiles.tma else [])

    def _tile(self, tile: str) -> tuple[list[str], list[str]]:
        """The coordinates of tile ``tile``: what the main loop reads (its batch, its row and column blocks, the
        operands' rows), and what only the epilogue reads (the product's coordinates and mask)."""
        batch, _, _ = self.dims
        # A persistent loop's tile is a Python int under Triton's interpreter: no .to() there.
        body = [f"$pid = tl.cast({tile}, tl.int64)" if self.index64 and tile != "$program_id"
                else f"$pid = {tile}.to(tl.int64)" if self.index64 else f"$pid = {tile}"]
        if batch != 1:
            body += ["$mm_b = $pid // ($tiles_m * $tiles_n)", "$pid = $pid % ($tiles_m * $tiles_n)"]
        # Tiles in groups of GROUP_M rows, column by column: a group's programs share B's column tiles in L2.
        body += ["$group = $GROUP_M * $tiles_n",
                 "$first_m = ($pid // $group) * $GROUP_M",
                 "$group_m = tl.minimum($tiles_m - $first_m, $GROUP_M)",
                 "$tile_m = $first_m + ($pid % $group) % $group_m",
                 "$tile_n = ($pid % $group) // $group_m",
                 "$a_rows = (($tile_m * $BLOCK_M + tl.arange(0, $BLOCK_M)) % $mnumel)[:, None]",
                 "$b_cols = (($tile_n * $BLOCK_N + tl.arange(0, $BLOCK_N)) % $nnumel)[None, :]"]
        epilogue = ["$mm_m = $tile_m * $BLOCK_M + tl.arange(0, $BLOCK_M)[:, None]",
                    "$mm_n = $tile_n * $BLOCK_N + tl.arange(0, $BLOCK_N)[None, :]",
                    "$mmask = $mm_m < $mnumel", "$nmask = $mm_n < $nnumel", "$xmask = $mmask & $nmask"]
        return body, epilogue

    def lower(self) -> TritonKernel:
        t = self.tiles
        stmts = [self.stmt(op) for op in self.kernel.block.ops]
        sizes = ["xnumel", "rnumel", "mnumel", "nnumel"] + [self.params[s] for s in self.symbols]
        # The main loop first, then the epilogue's coordinates and statements (in body order: none feeds the loop),
        # so that no epilogue value (a [BLOCK_M, BLOCK_N] mask) is held in registers across the loop.
        main = next(st for st in stmts if st.op is self.dots[0])
        epilogue = [line for st in stmts if st is not main for line in st.lines]
        batch, m, n = self.dims
        loop_tile = "$tile" if t.programs else "$program_id"
        coordinates, epilogue_coordinates = self._tile(loop_tile)
        body = coordinates + main.lines + epilogue_coordinates + epilogue
        if t.programs:  # persistent: each of (at most) ``programs`` programs loops over the tiles
            tiles = "$tiles_m * $tiles_n" + ("" if batch == 1 else f" * ({triton_expr(batch, self.size_names)})")
            loop = f"for $tile in tl.range($program_id, {tiles}, {t.programs}, flatten=True, num_stages={t.stages}):"
            lines = self._prologue(sizes) + [loop] + ["    " + line for line in body]
        else:
            lines = self._prologue(sizes) + body
        kernel_body = KernelBody(tuple(self.pointers), tuple(sizes), matmul_constexprs(t),
                                 tuple(sizes) if self.index64 else (), tuple("    " + line for line in lines))
        source = self._module(kernel_body.function(self.name))
        size_args = [("xnumel", self.kernel.domain_exprs[0]), ("rnumel", self.k), ("mnumel", m), ("nnumel", n)]
        size_args += [(self.params[s], shapes.size_symbol(s)) for s in self.symbols]
        position: dict[SSAValue, int] = {arg: i for i, arg in enumerate(self.kernel.block.args)}
        tma_pointers = tuple(dict.fromkeys(position[ld.buffer] for ld in self.operand_loads())) if t.tma else ()
        return TritonKernel(self.name, source, "matmul", len(self.kernel.inputs), len(self.kernel.outputs),
                            tuple(size_args), False, self.schedule.index, DEFAULT_MAX_RBLOCK, kernel_body,
                            tiles=self.tiles, matmul_dims=(batch, m, n), tma_pointers=tma_pointers)

    def _module(self, text: str) -> str:
        t = self.tiles
        dims = ", ".join(shapes.print_expr(d) for d in (*self.dims, self.k))
        what = (f"matmul [B, M, N, K] = [{dims}] and its epilogue, [{t.block_m}, {t.block_n}] tiles, k by {t.block_k}, "
                f"{t.warps} warps, {t.stages} stages" + (f", persistent over {t.programs} programs" if t.programs else "")
                + (", tensor-descriptor loads where aligned (TMA)" if t.tma else ""))
        index = "int64" if self.index64 else "int32"
        return ops.module_source(f"fusec kernel {self.name}: {what}, {index} indexing", text)
