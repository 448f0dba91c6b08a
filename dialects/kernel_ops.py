"""Kernel-level ops of the fusec dialect: kernels over element values, and combos of kernels.

The IR's rules (what ``x``, ``r``, loads, ``reduce_r`` and stores mean) are in
the module docstring of ``fusec.dialects.fusec``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import sympy
from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, IntegerAttr, StringAttr, SymbolNameConstraint, UnitAttr, i32, i64
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.traits import HasCanonicalizationPatternsTrait, IsolatedFromAbove, NoTerminator, Pure
from xdsl.utils.exceptions import VerifyException

from fusec.base import shapes
from fusec.dialects.attributes import BOOL, I64, ExprAttr, TensorType, element_of, parse_expr_list, print_expr_list
from fusec.dialects.directives import BufferType, Expr
from fusec.dialects.graph_ops import ConstantOp, OutputOp, PointwiseOp, SymbolicOp
from fusec.dialects.pointwise import REDUCTIONS, reduction_result_type

__all__ = ["STORAGE", "ComboOp", "KernelOp", "KernelSchedule", "LoadOp", "MatmulTiles", "ReduceROp", "StoreOp", "mark_storage",
           "storage_of"]

SCHEDULE_KINDS = ("pointwise", "tiled", "persistent", "looped", "matmul")
INDEX_TYPES = ("int32", "int64")


@dataclass(frozen=True)
class MatmulTiles:
    """How a matmul kernel's programs tile its product, as ``schedule-kernels`` chose them (a ``matmul`` schedule).

    block_m, block_n, block_k: a program's [block_m, block_n] tile of the product, accumulated block_k at a time.
    warps, stages: Triton's warps a program, and the software pipeline's depth over k.
    group_m: programs that share a column of B's tiles run block_m-row groups this tall (L2 reuse).
    tf32: fp32 operands multiply as TF32 (torch's ``float32_matmul_precision`` allowed it), else exactly.
    approx_tanh: the epilogue's tanh is the GPU's one-instruction approximation (relative error below 2**-10.9):
        every float the kernel stores is rounded to 16 bits, which loses more.  libdevice's exact tanh ran
        serialized after the main loop at 1.6x the matmul's time (8192x1024x4096 bf16, H200).
    programs: 0 for a program per tile; else at most this many programs (the GPU's SMs), each looping over the
        tiles (a persistent matmul: the next tile's loads overlap this one's epilogue).
    tma: the operands' tiles are loaded through tensor descriptors (Hopper's TMA unit) where their pointers are
        16-byte aligned at the call (the launcher checks those it cannot know); else through pointers.
    """

    block_m: int
    block_n: int
    block_k: int
    warps: int
    stages: int
    group_m: int
    tf32: bool = False
    approx_tanh: bool = False
    programs: int = 0
    tma: bool = False

    def items(self) -> list[str]:
        """As ``schedule(...)`` prints them."""
        return ([f"tile = [{self.block_m}, {self.block_n}, {self.block_k}]", f"warps = {self.warps}",
                 f"stages = {self.stages}", f"group_m = {self.group_m}"] + (["tf32"] if self.tf32 else [])
                + (["approx_tanh"] if self.approx_tanh else [])
                + ([f"programs = {self.programs}"] if self.programs else []) + (["tma"] if self.tma else []))


@dataclass(frozen=True)
class KernelSchedule:
    """How a kernel runs, as ``schedule-kernels`` records it on a ``fusec.kernel`` and the lowering obeys it.

    kind: "pointwise" (1-D blocks), "tiled" (2-D tiles of a pointwise kernel), "persistent"
        (whole rows in registers), "looped" (RBLOCK-wide steps over r) or "matmul" (a ``matmul`` kernel's
        tiles of the product, its k-loop on tensor cores).
    index: the integer type of index arithmetic, "int32" or "int64".
    outer: a reduction whose loads are contiguous along x (a column reduction).
    max_rblock: a looped reduction's largest RBLOCK (None for other kinds).
    persistent_up_to: a looped reduction over a symbolic rnumel that runs persistent (whole rows in RBLOCK)
        for a call whose rnumel is at most this, chosen by the launcher per call (None: always looped).
    tiles: a matmul schedule's tiles (None for other kinds).
    per_thread: the most elements a thread of the kernel's programs may hold (a power of 2), where its body needs
        many registers an element (None: the launch heuristics' own tiles; not for matmul kernels).
    warps: a looped outer reduction's warps a program, where its body decides them (None: the launch heuristics'
        ``OUTER_LOOP_WARPS``); printed ``warps = N`` as a matmul's tiles print theirs.
    """

    kind: str
    index: str = "int32"
    outer: bool = False
    max_rblock: int | None = None
    persistent_up_to: int | None = None
    tiles: MatmulTiles | None = None
    per_thread: int | None = None
    warps: int | None = None


def _parse_domain(parser: AttrParser) -> list[sympy.Expr]:
    return parse_expr_list(parser)


# ``array<i64: ...>``, one per result, set by reuse-buffers: the storage each result is written into.  Results of
# one graph with the same number share one allocation, each written after the one before it is read for the last
# time; -1: a result stored into an input in place (not allocated).  Absent: a fresh buffer each.
STORAGE = "fusec.storage"


def storage_of(op: Operation) -> list[int] | None:
    """Each result's storage (``STORAGE``) on a kernel or an extern, or None where reuse-buffers did not plan them."""
    attr = op.attributes.get(STORAGE)
    return list(attr.get_values()) if isinstance(attr, DenseArrayBase) else None


def mark_storage(op: Operation, slots: Sequence[int]) -> None:
    op.attributes[STORAGE] = DenseArrayBase.from_list(i64, list(slots))


@irdl_op_definition
class KernelOp(IRDLOperation):
    """One GPU kernel: a body over element values iterated over ``domain`` = [xnumel] or [xnumel, rnumel].

    The body's block arguments are the input buffers then the output buffers.
    ``tiled`` (printed after the domain) marks a pointwise kernel over a 2-D domain:
    no ``reduce_r``, every (x, r) point computed independently, lowered as 2-D tiles
    (``tile-pointwise`` makes them: ``fusec.kernel @k [s1, s0] tiled (%a) ...``).
    ``schedule(...)`` (printed after that) is the ``KernelSchedule`` that ``schedule-kernels``
    chose: ``fusec.kernel @fusec_red_sum_0 [s0, s1] schedule(looped, int64, outer, max_rblock = 1024) (%a)``,
    and over a symbolic rnumel ``schedule(looped, int32, max_rblock = 4096, persistent_up_to = 4096)``.

    ``matmul [B, M, N]`` (printed after the domain) marks a matmul kernel, which ``matmul-epilogues`` makes:
    its domain is ``[B*M*N, K]``, ``x`` is the flat index of the product's element (b, m, n) and ``r`` is k;
    its body reduces over r the product of two loads (each maybe converted to f32), A's first, read at
    (b, m, r), then B's, read at (b, r, n), and what follows the reduction is its epilogue; several such sums may
    share A's load (sibling products: SwiGLU's gate and up projections), each its own accumulator.  The
    interpreter runs it as the reduction it is; the lowering runs each reduction as ``tl.dot`` over [block_m,
    block_n] tiles (a ``matmul`` schedule), in one loop over k.
    """

    name = "fusec.kernel"
    sym_name = prop_def(StringAttr)
    domain = prop_def(ArrayAttr[ExprAttr])
    tiled = opt_prop_def(UnitAttr)
    schedule_kind = opt_prop_def(StringAttr)
    index_type = opt_prop_def(StringAttr)
    outer = opt_prop_def(UnitAttr)
    max_rblock = opt_prop_def(IntegerAttr)
    persistent_up_to = opt_prop_def(IntegerAttr)
    per_thread = opt_prop_def(IntegerAttr)
    matmul = opt_prop_def(ArrayAttr[ExprAttr])
    tile = opt_prop_def(ArrayAttr[IntegerAttr])
    num_warps = opt_prop_def(IntegerAttr)
    num_stages = opt_prop_def(IntegerAttr)
    group_m = opt_prop_def(IntegerAttr)
    tf32 = opt_prop_def(UnitAttr)
    approx_tanh = opt_prop_def(UnitAttr)
    programs = opt_prop_def(IntegerAttr)
    tma = opt_prop_def(UnitAttr)
    inputs = var_operand_def()
    outputs = var_result_def()
    body = region_def("single_block")
    # Pure: a kernel writes only the buffers it returns, so an unused kernel can go (dce).
    traits = traits_def(IsolatedFromAbove(), NoTerminator(), Pure())

    def __init__(self, name: str, domain: Sequence[int | sympy.Basic], inputs: Sequence[SSAValue], output_types: Sequence[Attribute],
                 body: Region | None = None,
                 *, tiled: bool = False, schedule: KernelSchedule | None = None,
                 matmul: Sequence[int | sympy.Basic] | None = None):
        if body is None:
            body = Region(Block(arg_types=[v.type for v in inputs] + list(output_types)))
        props: dict[str, Attribute] = {"sym_name": StringAttr(name), "domain": ArrayAttr([ExprAttr.of(d) for d in domain])}
        if tiled:
            props["tiled"] = UnitAttr()
        # Built directly, as loads are (see LoadOp.__init__): merging builds a kernel for every merge it tries.
        Operation.__init__(self, operands=list(inputs), result_types=list(output_types), regions=[body], properties=props)
        if matmul is not None:
            self.mark_matmul(matmul)
        if schedule is not None:
            self.record_schedule(schedule)

    @property
    def schedule(self) -> KernelSchedule | None:
        """The schedule ``schedule-kernels`` recorded, or None before it ran."""
        if self.schedule_kind is None:
            return None
        index = self.index_type.data if self.index_type is not None else "int32"
        rblock = self.max_rblock.value.data if self.max_rblock is not None else None
        up_to = self.persistent_up_to.value.data if self.persistent_up_to is not None else None
        per_thread = self.per_thread.value.data if self.per_thread is not None else None
        tiles, warps = None, None
        if self.tile is not None and self.num_warps is not None and self.num_stages is not None and self.group_m is not None:
            m, n, k = (a.value.data for a in self.tile.data)
            tiles = MatmulTiles(m, n, k, self.num_warps.value.data, self.num_stages.value.data, self.group_m.value.data,
                                self.tf32 is not None, self.approx_tanh is not None,
                                self.programs.value.data if self.programs is not None else 0, self.tma is not None)
        elif self.num_warps is not None:
            warps = self.num_warps.value.data
        return KernelSchedule(self.schedule_kind.data, index, self.outer is not None, rblock, up_to, tiles, per_thread,
                              warps)

    @property
    def matmul_dims(self) -> list[sympy.Expr] | None:
        """[B, M, N] of a matmul kernel (see the class docstring), None for any other kernel."""
        return None if self.matmul is None else [d.data for d in self.matmul.data]

    @property
    def is_matmul(self) -> bool:
        return self.matmul is not None

    def mark_matmul(self, dims: Sequence[int | sympy.Basic]) -> None:
        """Make this a matmul kernel of product [B, M, N] (see the class docstring)."""
        self.properties["matmul"] = ArrayAttr([ExprAttr.of(d) for d in dims])

    def record_schedule(self, schedule: KernelSchedule) -> None:
        self.properties["schedule_kind"] = StringAttr(schedule.kind)
        self.properties["index_type"] = StringAttr(schedule.index)
        for key in ("outer", "max_rblock", "persistent_up_to", "per_thread", "tile", "num_warps", "num_stages", "group_m", "tf32",
                    "approx_tanh", "programs", "tma"):
            self.properties.pop(key, None)
        if (t := schedule.tiles) is not None:
            self.properties["tile"] = ArrayAttr([IntegerAttr(v, 64) for v in (t.block_m, t.block_n, t.block_k)])
            self.properties["num_warps"] = IntegerAttr(t.warps, 64)
            self.properties["num_stages"] = IntegerAttr(t.stages, 64)
            self.properties["group_m"] = IntegerAttr(t.group_m, 64)
            if t.tf32:
                self.properties["tf32"] = UnitAttr()
            if t.approx_tanh:
                self.properties["approx_tanh"] = UnitAttr()
            if t.programs:
                self.properties["programs"] = IntegerAttr(t.programs, 64)
            if t.tma:
                self.properties["tma"] = UnitAttr()
        if schedule.outer:
            self.properties["outer"] = UnitAttr()
        if schedule.max_rblock is not None:
            self.properties["max_rblock"] = IntegerAttr(schedule.max_rblock, 64)
        if schedule.persistent_up_to is not None:
            self.properties["persistent_up_to"] = IntegerAttr(schedule.persistent_up_to, 64)
        if schedule.per_thread is not None:
            self.properties["per_thread"] = IntegerAttr(schedule.per_thread, 64)
        if schedule.warps is not None:
            self.properties["num_warps"] = IntegerAttr(schedule.warps, 64)

    @property
    def block(self) -> Block:
        return self.body.block

    @property
    def domain_exprs(self) -> list[sympy.Expr]:
        return [d.data for d in self.domain.data]

    @property
    def is_reduction(self) -> bool:
        """The domain has an r extent: a reduction, or a tiled pointwise kernel (see ``is_tiled``)."""
        return len(self.domain.data) == 2

    @property
    def is_outer_reduction(self) -> bool:
        """A reduction whose loads are contiguous along x, not r (a column reduction: ``x.sum(0)``).

        Steps are measured at a point away from any wrap (x and r small, size symbols
        large and distinct), so ``mod(x, s0)`` steps by 1 as it does almost everywhere.
        A load that does not move with x (a per-row statistic every column reads, as in a
        LayerNorm weight's gradient) has no layout for the schedule to follow: it is not counted.
        A store of a full-size value contiguous along x and not along r makes it a column reduction
        whatever its loads (ViT's attention bias gradient stored its [tokens, 192] gradient at
        ``192*r + x`` from rows of 3152 tokens, one column a program: 12.4 us, Inductor's 6.5 us).
        """
        if not self.is_reduction or self.is_tiled:
            return False
        x, r = shapes.index_symbol("x"), shapes.index_symbol("r")
        r_steps, x_steps, transposing_store = [], [], False
        for op in self.block.ops:
            if isinstance(op, (LoadOp, StoreOp)) and r in op.index.data.free_symbols:
                e = op.index.data
                point = {s: sympy.Integer(100003 + 2 * i) for i, s in enumerate(sorted(e.free_symbols - {x, r}, key=str))}
                at = {(dx, dr): int(e.xreplace({**point, x: sympy.Integer(1 + dx), r: sympy.Integer(1 + dr)}))
                      for dx, dr in ((0, 0), (0, 1), (1, 0))}  # xreplace: a tenth of subs' time, same integers
                if at[1, 0] == at[0, 0]:
                    continue
                if isinstance(op, StoreOp):
                    transposing_store |= at[1, 0] - at[0, 0] == 1 and at[0, 1] - at[0, 0] != 1
                    continue
                r_steps.append(at[0, 1] - at[0, 0])
                x_steps.append(at[1, 0] - at[0, 0])
        if transposing_store:
            # A full-size store contiguous along x (a gradient stored transposed beside its bias-gradient sum):
            # under rows of whole r a program stores one lane per row, every lane a row apart; column blocks
            # store it coalesced and still read r-contiguous loads in RBLOCK-long runs.
            return True
        return bool(r_steps) and all(s != 1 for s in r_steps) and any(s == 1 for s in x_steps)

    @property
    def is_tiled(self) -> bool:
        """A pointwise kernel over a 2-D domain [xnumel, rnumel], lowered as 2-D tiles."""
        return self.tiled is not None

    @property
    def input_args(self):
        return self.block.args[: len(self.inputs)]

    @property
    def output_args(self):
        return self.block.args[len(self.inputs):]

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        printer.print_string(" ")
        print_expr_list(printer, self.domain_exprs)
        if (dims := self.matmul_dims) is not None:
            printer.print_string(" matmul ")
            print_expr_list(printer, dims)
        if self.is_tiled:
            printer.print_string(" tiled")
        if (schedule := self.schedule) is not None:
            items = [schedule.kind, schedule.index] + (["outer"] if schedule.outer else [])
            items += [f"max_rblock = {schedule.max_rblock}"] if schedule.max_rblock is not None else []
            items += [f"persistent_up_to = {schedule.persistent_up_to}"] if schedule.persistent_up_to is not None else []
            items += [f"per_thread = {schedule.per_thread}"] if schedule.per_thread is not None else []
            items += [f"warps = {schedule.warps}"] if schedule.warps is not None else []
            items += schedule.tiles.items() if schedule.tiles is not None else []
            printer.print_string(f" schedule({', '.join(items)})")
        printer.print_string(" (")
        printer.print_list(self.inputs, printer.print_operand)
        printer.print_string(")")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : (")
        printer.print_list([v.type for v in self.inputs], printer.print_attribute)
        printer.print_string(") -> (")
        printer.print_list([r.type for r in self.outputs], printer.print_attribute)
        printer.print_string(") ")
        printer.print_region(self.body, print_entry_block_args=True)

    @classmethod
    def parse(cls, parser: Parser) -> KernelOp:
        name = parser.parse_symbol_name().data
        domain = _parse_domain(parser)
        matmul = _parse_domain(parser) if parser.parse_optional_keyword("matmul") is not None else None
        tiled = parser.parse_optional_keyword("tiled") is not None
        schedule = _parse_schedule(parser) if parser.parse_optional_keyword("schedule") is not None else None
        operands = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_unresolved_operand)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        in_types = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_type)
        parser.parse_punctuation("->")
        out_types = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_type)
        inputs = parser.resolve_operands(operands, in_types, parser.pos)
        body = parser.parse_region()
        op = KernelOp(name, domain, inputs, out_types, body, tiled=tiled, schedule=schedule, matmul=matmul)
        op.attributes.update(attrs)
        return op

    def _verify_schedule(self, where: str) -> None:
        schedule = self.schedule
        if schedule is None:
            if any(p is not None for p in (self.index_type, self.outer, self.max_rblock, self.persistent_up_to,
                                           self.per_thread, self.tile,
                                           self.num_warps, self.num_stages, self.group_m, self.tf32,
                                           self.approx_tanh, self.programs, self.tma)):
                raise VerifyException(f"{where}: index_type, outer, max_rblock, persistent_up_to, per_thread and a matmul's tiles "
                                      "belong to a schedule; it has none")
            return
        if schedule.kind not in SCHEDULE_KINDS:
            raise VerifyException(f"{where}: unknown schedule '{schedule.kind}' (one of {', '.join(SCHEDULE_KINDS)})")
        if schedule.index not in INDEX_TYPES:
            raise VerifyException(f"{where}: index type must be int32 or int64, got '{schedule.index}'")
        if (schedule.kind == "pointwise") != (not self.is_reduction):
            raise VerifyException(f"{where}: the pointwise schedule is for, and only for, a 1-D domain")
        if schedule.kind == "tiled" and not self.is_tiled:
            raise VerifyException(f"{where}: the tiled schedule needs a tiled kernel")
        if schedule.outer and schedule.kind not in ("persistent", "looped"):
            raise VerifyException(f"{where}: only a reduction (persistent or looped) can be outer")
        if (schedule.max_rblock is not None) != (schedule.kind == "looped"):
            raise VerifyException(f"{where}: a looped schedule, and only it, has a max_rblock")
        rblock = schedule.max_rblock
        if rblock is not None and (rblock < 2 or rblock & (rblock - 1)):
            raise VerifyException(f"{where}: max_rblock must be a power of 2 of at least 2, got {rblock}")
        if schedule.persistent_up_to is not None and (schedule.kind != "looped" or schedule.persistent_up_to < 1):
            raise VerifyException(f"{where}: persistent_up_to (a positive rnumel) belongs to a looped schedule only")
        if (n := schedule.per_thread) is not None and (n < 1 or n & (n - 1) or schedule.kind == "matmul"):
            raise VerifyException(f"{where}: per_thread must be a power of 2 of at least 1, and not on a matmul schedule")
        if (n := schedule.warps) is not None and (n < 1 or n > 16 or n & (n - 1) or schedule.kind != "looped"
                                                  or not schedule.outer):
            raise VerifyException(f"{where}: warps without a matmul's tiles belong to a looped outer schedule, "
                                  f"a power of 2 from 1 to 16")
        self._verify_matmul_schedule(where, schedule)

    def _verify_matmul_schedule(self, where: str, schedule: KernelSchedule) -> None:
        if (schedule.kind == "matmul") != self.is_matmul:
            raise VerifyException(f"{where}: the matmul schedule is for, and only for, a matmul kernel")
        if (schedule.tiles is not None) != (schedule.kind == "matmul"):
            raise VerifyException(f"{where}: a matmul schedule, and only it, has tile, warps, stages and group_m")
        if (t := schedule.tiles) is not None:
            if any(b < 16 or b & (b - 1) for b in (t.block_m, t.block_n, t.block_k)):
                raise VerifyException(f"{where}: a matmul's tile sizes must be powers of 2 of at least 16 (tl.dot)")
            if t.warps not in (1, 2, 4, 8, 16) or t.stages < 1 or t.group_m < 1:
                raise VerifyException(f"{where}: warps must be 1, 2, 4, 8 or 16; stages and group_m at least 1")
            if t.programs < 0:
                raise VerifyException(f"{where}: a matmul's programs must be positive (or absent: a program a tile)")

    def _verify_matmul_dims(self, where: str) -> None:
        if (dims := self.matmul_dims) is None:
            return
        if len(dims) != 3 or len(self.domain.data) != 2 or self.is_tiled:
            raise VerifyException(f"{where}: a matmul kernel has matmul [B, M, N] and a domain [B*M*N, K]")
        if sympy.expand(dims[0] * dims[1] * dims[2] - self.domain_exprs[0]) != 0:
            raise VerifyException(f"{where}: a matmul kernel's xnumel must be B*M*N of its matmul [B, M, N]")

    def verify_(self) -> None:
        where = f"fusec.kernel @{self.sym_name.data}"
        if len(self.domain.data) not in (1, 2):
            raise VerifyException(f"{where}: domain must be [xnumel] or [xnumel, rnumel]")
        if self.is_tiled and len(self.domain.data) != 2:
            raise VerifyException(f"{where}: a tiled kernel has a 2-D domain [xnumel, rnumel]")
        self._verify_matmul_dims(where)
        self._verify_schedule(where)
        storage = storage_of(self)
        if STORAGE in self.attributes and (storage is None or len(storage) != len(self.outputs) or min(storage, default=0) < -1):
            raise VerifyException(f"{where}: {STORAGE} must be an array<i64> with a storage (or -1) per result")
        want = [v.type for v in self.inputs] + [r.type for r in self.outputs]
        if list(self.block.arg_types) != want:
            raise VerifyException(f"{where}: block arguments must be the input then the output buffer types")
        outputs = set(self.output_args)
        for op in self.block.ops:
            if not isinstance(op, (LoadOp, StoreOp, PointwiseOp, ConstantOp, SymbolicOp, ReduceROp)):
                raise VerifyException(f"{where}: {op.name} cannot appear in a kernel body")
            if isinstance(op, ReduceROp) and not self.is_reduction:
                raise VerifyException(f"{where}: fusec.reduce_r in a kernel without a reduction domain")
            if isinstance(op, ReduceROp) and self.is_tiled:
                raise VerifyException(f"{where}: fusec.reduce_r in a tiled (pointwise) kernel")
            if isinstance(op, LoadOp) and op.buffer in outputs:
                raise VerifyException(f"{where}: loads from output buffer {op.buffer}")
            if isinstance(op, StoreOp) and op.buffer not in outputs:
                raise VerifyException(f"{where}: stores into {op.buffer}, which is not an output buffer")
            for expr_attr in [p for p in op.properties.values() if isinstance(p, ExprAttr)]:
                if not self.is_reduction and "r" in {s.name for s in expr_attr.data.free_symbols}:
                    raise VerifyException(f"{where}: {op.name} uses r in a kernel without a reduction domain")
        for arg in self.output_args:
            if not any(isinstance(u.operation, StoreOp) for u in arg.uses):
                raise VerifyException(f"{where}: output buffer {arg} is never stored")


def _parse_schedule(parser: Parser) -> KernelSchedule:
    """``(kind, index[, outer][, max_rblock = N][, persistent_up_to = N][, per_thread = N][, warps = N])`` after the
    ``schedule`` keyword (a matmul's: its tiles)."""
    parser.parse_punctuation("(")
    kind = parser.parse_identifier()
    parser.parse_punctuation(",")
    index = parser.parse_identifier()
    outer = tf32 = approx_tanh = tma = False
    tile: list[int] | None = None
    numbers: dict[str, int | None] = dict.fromkeys(("max_rblock", "persistent_up_to", "per_thread", "warps", "stages",
                                                    "group_m", "programs"))
    while parser.parse_optional_punctuation(",") is not None:
        if parser.parse_optional_keyword("outer") is not None:
            outer = True
            continue
        if parser.parse_optional_keyword("tf32") is not None:
            tf32 = True
            continue
        if parser.parse_optional_keyword("approx_tanh") is not None:
            approx_tanh = True
            continue
        if parser.parse_optional_keyword("tma") is not None:
            tma = True
            continue
        if parser.parse_optional_keyword("tile") is not None:
            parser.parse_punctuation("=")
            tile = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, lambda: parser.parse_integer(allow_boolean=False))
            if len(tile) != 3:
                parser.raise_error("a matmul's tile is [block_m, block_n, block_k]")
            continue
        key = next((k for k in numbers if parser.parse_optional_keyword(k) is not None), None)
        if key is None:
            parser.raise_error("expected outer, max_rblock, persistent_up_to, per_thread, or a matmul's tile, warps, stages, group_m, "
                               "tf32, approx_tanh, programs, tma")
        parser.parse_punctuation("=")
        numbers[key] = parser.parse_integer(allow_boolean=False, allow_negative=False)
    parser.parse_punctuation(")")
    matmul = (numbers["warps"], numbers["stages"], numbers["group_m"])
    tiles, loop_warps = None, None
    if tile is not None or any(v is not None for v in matmul[1:]) or tf32 or approx_tanh or tma \
            or numbers["programs"] is not None:
        if tile is None or any(v is None for v in matmul):
            parser.raise_error("a matmul schedule needs tile, warps, stages and group_m")
        warps, stages, group_m = (int(v or 0) for v in matmul)
        tiles = MatmulTiles(tile[0], tile[1], tile[2], warps, stages, group_m, tf32, approx_tanh,
                            int(numbers["programs"] or 0), tma)
    else:
        loop_warps = numbers["warps"]  # a looped outer reduction's (the verifier says where it may stand)
    return KernelSchedule(kind, index, outer, numbers["max_rblock"], numbers["persistent_up_to"], tiles,
                          numbers["per_thread"], loop_warps)


# A load's operandSegmentSizes (buffer, offset, mask) by (has offset, has mask); attributes are immutable, so shared.
_LOAD_SEGMENTS = {(offset, mask): DenseArrayBase.from_list(i32, [1, int(offset), int(mask)])
                  for offset in (False, True) for mask in (False, True)}


@irdl_op_definition
class LoadOp(IRDLOperation):
    """An element of a buffer at a flat storage index: ``fusec.load %a[512*x + r] : f32``.

    ``[%o + expr]`` adds an i64 element value to the index (gathers); with
    ``mask %m`` the load happens only where ``%m`` is true and gives 0 elsewhere.
    """

    name = "fusec.load"
    buffer = operand_def(TensorType)
    offset = opt_operand_def(I64)
    mask = opt_operand_def(BOOL)
    index = prop_def(ExprAttr)
    result = result_def()
    traits = traits_def(Pure())
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    custom_directives = (Expr, BufferType)
    assembly_format = ("$buffer `[` ($offset^ `+`)? custom<Expr>($index) `]` (`mask` $mask^)? attr-dict "
                       "`:` custom<BufferType>(type($buffer), type($result))")

    def __init__(self, buffer: SSAValue, index: int | sympy.Basic, mask: SSAValue | None = None, offset: SSAValue | None = None):
        assert isinstance(buffer.type, TensorType)
        # What irdl_op_init builds, built directly: merging builds thousands of loads, and irdl_op_init (operand
        # groups re-derived, a new segment-sizes array each time) took about an eighth of the pipeline's time on
        # GPT-2's backward graph (3,226 loads).
        offsets, masks = [offset] if offset else [], [mask] if mask else []
        Operation.__init__(self, operands=[buffer, *offsets, *masks], result_types=[buffer.type.element_type],
                           properties={"index": ExprAttr.of(index),
                                       AttrSizedOperandSegments.attribute_name: _LOAD_SEGMENTS[bool(offsets), bool(masks)]})

    def verify_(self) -> None:
        if self.result.type != element_of(self.buffer.type):
            raise VerifyException("fusec.load: result type must be the buffer's element type")


@irdl_op_definition
class StoreOp(IRDLOperation):
    """Writes an element value into an output buffer: ``fusec.store %v, %out[x] : !fusec.tensor<...>``."""

    name = "fusec.store"
    value = operand_def()
    buffer = operand_def(TensorType)
    mask = opt_operand_def(BOOL)
    index = prop_def(ExprAttr)
    custom_directives = (Expr, BufferType)
    assembly_format = ("$value `,` $buffer `[` custom<Expr>($index) `]` (`mask` $mask^)? attr-dict "
                       "`:` custom<BufferType>(type($buffer), type($value))")

    def __init__(self, value: SSAValue, buffer: SSAValue, index: int | sympy.Basic, mask: SSAValue | None = None):
        # Built directly, as loads are (see LoadOp.__init__).
        Operation.__init__(self, operands=[value, buffer, *([mask] if mask else [])], properties={"index": ExprAttr.of(index)})

    def verify_(self) -> None:
        if self.value.type != element_of(self.buffer.type):
            raise VerifyException(f"fusec.store: value type {self.value.type} differs from the buffer's {element_of(self.buffer.type)}")


class ReduceRCanonicalization(HasCanonicalizationPatternsTrait):
    @classmethod
    def get_canonicalization_patterns(cls):
        from fusec.dialects.canonicalization import AnyAboveMinusInfinity  # the pattern builds ops of this dialect

        return (AnyAboveMinusInfinity(),)


@irdl_op_definition
class ReduceROp(IRDLOperation):
    """Reduces an element value over the kernel's ``r`` domain: ``fusec.reduce_r "sum" %v : f32 -> f32``.

    argmax/argmin give the ``r`` of the first extreme element (i64).
    """

    name = "fusec.reduce_r"
    kind = prop_def(StringAttr)
    input = operand_def()
    result = result_def()
    traits = traits_def(Pure(), ReduceRCanonicalization())
    assembly_format = "$kind $input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, kind: str, input: SSAValue, result_type: Attribute):
        super().__init__(operands=[input], result_types=[result_type], properties={"kind": StringAttr(kind)})

    def verify_(self) -> None:
        kind = self.kind.data
        if kind not in REDUCTIONS:
            raise VerifyException(f"fusec.reduce_r: unknown reduction '{kind}'")
        want = reduction_result_type(kind, self.input.type)
        if self.result.type != want:
            raise VerifyException(f"fusec.reduce_r \"{kind}\": result must be {want}, got {self.result.type}")


@irdl_op_definition
class ComboOp(IRDLOperation):
    """Independent kernels launched as one; thread blocks are routed to them by program id."""

    name = "fusec.combo"
    sym_name = prop_def(SymbolNameConstraint())
    outputs = var_result_def()
    body = region_def("single_block")
    assembly_format = "$sym_name attr-dict `:` `(` type($outputs) `)` $body"

    def __init__(self, name: str, output_types: Sequence[Attribute], body: Region):
        super().__init__(result_types=[output_types], regions=[body], properties={"sym_name": StringAttr(name)})

    @property
    def kernels(self) -> list[KernelOp]:
        return [op for op in self.body.block.ops if isinstance(op, KernelOp)]

    @property
    def output_op(self) -> OutputOp:
        """The terminator, which the verifier made a fusec.output."""
        last = self.body.block.last_op
        assert isinstance(last, OutputOp), "fusec.combo ends with fusec.output"
        return last

    def member_result(self, index: int) -> SSAValue:
        """The member kernel's result that this combo's result ``index`` stands for (a combo yields its kernels' results)."""
        return self.output_op.operands[index]

    def verify_(self) -> None:
        where = f"fusec.combo @{self.sym_name.data}"
        ops = list(self.body.block.ops)
        if not ops or not isinstance(ops[-1], OutputOp):
            raise VerifyException(f"{where}: must end with fusec.output")
        if any(not isinstance(k, KernelOp) for k in ops[:-1]):
            raise VerifyException(f"{where}: holds only fusec.kernel ops")
        kernels = [k for k in ops[:-1] if isinstance(k, KernelOp)]
        produced = {r for k in kernels for r in k.results}
        for k in kernels:
            if any(v in produced for v in k.operands):
                raise VerifyException(f"{where}: kernel @{k.sym_name.data} depends on another kernel of the combo")
        if [v.type for v in ops[-1].operands] != [r.type for r in self.outputs]:
            raise VerifyException(f"{where}: fusec.output types do not match the combo's results")
