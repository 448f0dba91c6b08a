"""A graph after form-kernels -> straight-line host Python ``def call(inputs): ...``.

The generated function binds every size symbol it uses from an input's shape
(or stride), as the graph's bind plan says (``fusec.analysis.bind_plan``),
checks each input's shape and dtype, gives each input the layout its type
declares (a copy when the strides differ: robust against callers passing
transposed or sliced tensors, at the cost of one copy), allocates kernel outputs
with ``torch.empty_strided``, launches kernels with grids computed from the
symbolic sizes, runs views as torch views and externs as direct torch calls, and
returns the outputs.  Buffers are deleted after their last use.

Per-call work is the generated lines themselves: no IR, no parsing, no sympy.
Block sizes are literals when a kernel's domain is static; with a symbolic
domain they come from ``fusec.analysis.heuristics`` for the actual sizes of the
call (memoised; a persistent reduction must size RBLOCK to the actual row).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import sympy
from xdsl.ir import BlockArgument, Operation, OpResult, SSAValue

from fusec.analysis import collectives, heuristics
from fusec.analysis.bind_plan import InputMismatch, bind_plan
from fusec.analysis.buffer_lifetimes import (
    Allocation,
    allocations,
    fits_storage,
    graph_operands,
    graph_results,
    stored_in_place,
)
from fusec.analysis.view_layouts import Layout, dim_order, same_strides, view_layout
from fusec.base import indexing, shapes
from fusec.dialects import extern_calls as externs
from fusec.dialects import fusec as F
from fusec.dialects.attributes import TensorType, tensor_type_of
from fusec.lowering.combo_kernel import TritonCombo, lower_combo
from fusec.lowering.expr_printer import python_expr
from fusec.lowering.launching import CONFIG_HELPERS
from fusec.lowering.triton_kernel import LoweringError, LoweringOptions, TritonKernel, lower_kernel, symbol_bounds


class KernelSource(Protocol):
    """What the runtime loads of a kernel (a ``TritonKernel`` or a ``TritonCombo``): its name and module source."""

    @property
    def name(self) -> str: ...
    @property
    def source(self) -> str: ...


@dataclass(frozen=True)
class Launcher:
    """The host side of a compiled graph.

    ``source`` defines ``call(inputs)``; its free names are the kernels (by
    ``TritonKernel.name``), the extern targets in ``externs`` (name -> target such as
    ``aten.mm.default``), and ``runtime_globals()``.
    """

    graph_name: str
    source: str
    kernels: tuple[TritonKernel | TritonCombo, ...]
    externs: tuple[tuple[str, str], ...]
    # kernel name -> positions of (pointers whose alignment varies, runtime ints, constexprs chosen per call),
    # then what a runner shared between launch sites must also key on: the pointers' element types and the
    # (position, value) of each literal int and constexpr, which Triton compiles in
    launch_keys: tuple[tuple[str, tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[str, ...],
                             tuple[tuple[int, str], ...]], ...] = ()
    # per output: the order of its dims, outermost first, where its layout is dense but not row-major (a
    # channels-last activation saved for the backward: fusec.backend reports its strides to AOTAutograd)
    output_orders: tuple[tuple[int, ...] | None, ...] = ()
    # per output: the order of its dims of size other than 1, outermost first, where its layout is dense (row-major
    # too); None where it is not dense.  The layout every call returns: what the runtime need not check again.
    dense_orders: tuple[tuple[int, ...] | None, ...] = ()
    # per output: its strides where its layout is not dense and every stride is an integer (a column slice of a
    # merged projection saved for the backward: fusec.backend reports them to AOTAutograd); None elsewhere
    strided_outputs: tuple[tuple[int, ...] | None, ...] = ()


def runtime_globals() -> dict[str, object]:
    """The helpers every generated launcher may call."""
    import torch
    import triton

    return {
        "torch": torch,
        "triton": triton,
        "_empty": torch.empty_strided,
        "_reinterpret": reinterpret_tensor(),
        "_slice": torch.ops.aten.slice.Tensor,
        "_as_layout": as_layout,
        "_pick_results": externs.pick_results,
        "_bad_input": bad_input,
        "_bad_input_count": bad_input_count,
        "_broken_fact": broken_fact,
        **{f"_{name}": getattr(heuristics, name) for name in CONFIG_HELPERS},
    }


def reinterpret_tensor():
    """``(t, sizes, strides, offset) -> view`` with ``offset`` counted from ``t``'s own storage offset: the C++
    helper Inductor's wrappers call where torch has it, else ``as_strided``."""
    import torch

    fast = getattr(torch._C._dynamo.guards, "_reinterpret_tensor", None)
    if fast is not None:
        return fast
    return lambda t, sizes, strides, offset: t.as_strided(sizes, strides, t.storage_offset() + offset)


def as_layout(t, strides: tuple[int, ...]):
    """``t`` with ``strides``, starting 16-byte aligned (what kernels are compiled for): itself when only
    size-0/1 dims differ (kernels never step along them), else a copy."""
    if t.numel() == 0 or (t.data_ptr() % 16 == 0 and
                          all(st == want or size == 1 for size, st, want in zip(t.shape, t.stride(), strides, strict=True))):
        return t
    import torch

    out = torch.empty_strided(t.shape, strides, dtype=t.dtype, device=t.device)
    out.copy_(t)
    return out


def bad_input(graph: str, i: int, t, shape: tuple, dtype) -> None:
    raise InputMismatch(f"@{graph}: input {i} must be {dtype} of shape {list(shape)} (bound from the inputs' sizes), "
                        f"got {t.dtype} of shape {list(t.shape)}")


def broken_fact(graph: str, fact: str, left: int, right: int) -> None:
    raise InputMismatch(f"@{graph}: the inputs break the graph's size fact {fact}: {left} != {right}")


def bad_input_count(graph: str, want: int, inputs) -> None:
    raise InputMismatch(f"@{graph} takes {want} tensors, got {len(inputs)}")


# ---------------------------------------------------------------- generation


def lower_graph(graph: F.GraphOp, size_hints: Mapping[str, int] | None = None,
                options: LoweringOptions = LoweringOptions(), input_checks: str = "all") -> Launcher:
    """``input_checks``: what the launcher checks of each input, from what its caller already guarantees.

    ``"all"``: shape and dtype (one clear error for a wrong input), then layout and
    16-byte alignment (a copy where they differ); ``"layout"``: the caller guarantees
    shapes and dtypes; ``"alignment"``: it guarantees strides too (Dynamo's guards).
    """
    if input_checks not in INPUT_CHECKS:
        raise ValueError(f"input_checks must be one of {', '.join(INPUT_CHECKS)}, got {input_checks!r}")
    return _LauncherWriter(graph, dict(size_hints or {}), options, input_checks).write()


INPUT_CHECKS = ("all", "layout", "alignment")


def _tuple(items: list[str]) -> str:
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


class _LauncherWriter:
    def __init__(self, graph: F.GraphOp, size_hints: dict[str, int], options: LoweringOptions, input_checks: str):
        self.graph, self.hints, self.options = graph, size_hints, options
        self.check_shapes, self.check_strides = input_checks == "all", input_checks != "alignment"
        self.gname = graph.sym_name.data
        self.names: dict[SSAValue, str] = {}
        self.used_symbols: set[str] = set()
        self.kernels: dict[str, TritonKernel | TritonCombo] = {}
        self.externs: dict[str, str] = {}
        self.buffers = 0
        self.aligned: set[str] = set()  # launcher variables known to start 16-byte aligned
        self.given: set[str] = set()  # inputs an output aliases: the prologue keeps the caller's tensor
        self.layouts: dict[str, Layout] = {}  # launcher variables whose layout is known when the launcher is written
        # kernel -> (checked pointers, runtime ints, constexprs, the pointers' element types, literal arguments)
        self.sites: dict[str, tuple[set[int], set[int], set[int], tuple[str, ...], dict[int, str]]] = {}
        self.int_values: dict[str, str] = {}  # int variable -> the size expression it holds
        # Views only other views read (a chain of reshapes and permutes): made only if a view of them cannot be
        # one call from their root; each unmade one -> its root (the launcher variable the chain starts from).
        self.absorbed: set[SSAValue] = set()
        self.deferred: dict[str, str] = {}
        # reuse-buffers' plan (fusec.storage): each planned result's storage, the lifetimes it was planned from,
        # the result written into each storage before, and results whose storage a later one takes (kept, not
        # deleted, until it does); ``at``: the index of the op being written.
        self.storage: dict[SSAValue, int] = {}
        self.lifetimes: dict[SSAValue, Allocation] = {}
        self.last_in: dict[int, SSAValue] = {}
        self.handed_on: set[SSAValue] = set()
        self.kept: set[str] = set()  # their launcher names
        self.at = 0
        # A kernel result stored straight into an input (mutate-in-place): result -> the input's index.
        self.in_place: dict[SSAValue, int] = stored_in_place(graph)

    def py(self, e: sympy.Expr) -> str:
        """Host code for a size expression; remembers the symbols it needs bound."""
        self.used_symbols |= shapes.free_size_symbols([e])
        return python_expr(e)

    def shape_tuple(self, dims) -> str:
        return "()" if not dims else _tuple([self.py(d) for d in dims])

    def new_buffer(self, value: SSAValue) -> str:
        name = f"buf{self.buffers}"
        self.buffers += 1
        self.names[value] = name
        if value in self.handed_on:
            self.kept.add(name)
        return name

    def allocate(self, value: SSAValue) -> str:
        """The line allocating a new (aligned) buffer for a kernel's output ``value``: the input itself where the
        kernel stores an input's new value in place (the input as the prologue aligned it; ``in_place_writes``
        copies it back where the prologue had to copy the caller's tensor)."""
        name = self.new_buffer(value)
        self.aligned.add(name)
        t = tensor_type_of(value)
        self.layouts[name] = _declared(t)
        if value in self.in_place:
            self.given.add(f"arg{self.in_place[value]}")
            return f"{name} = arg{self.in_place[value]}"
        slot = self.storage.get(value, -1)
        before = self.last_in.get(slot)
        if slot >= 0:
            self.last_in[slot] = value
        if before is None:
            return (f"{name} = _empty({self.shape_tuple(t.dims)}, {self.shape_tuple(t.layout)}, "
                    f"dtype={externs.source_of(F.torch_dtype(t))}, device=device)")
        self.check_handed_on(before, value, slot)
        old = self.names[before]
        if old not in self.aligned:  # an extern's result: torch's allocation, whose alignment kernels check
            self.aligned.discard(name)
        if before.type == value.type:
            return f"{name} = {old}; del {old}"
        return f"{name} = {self._reinterpret(name, old)}; del {old}"

    def check_handed_on(self, before: SSAValue, value: SSAValue, slot: int) -> None:
        """``value`` may take ``before``'s storage: reuse-buffers' rule, checked again (the plan may be written by
        hand)."""
        owner = value.op.sym_name.data if isinstance(value, OpResult) and isinstance(value.op, F.KernelOp) else "?"
        dies = self.lifetimes[before].dies
        if dies is None or dies >= self.at:
            raise LoweringError(f"@{self.gname}: {F.STORAGE} puts @{owner}'s result into storage {slot} while the "
                                "result written there before is still read (or returned)")
        if not fits_storage(before, value):
            raise LoweringError(f"@{self.gname}: {F.STORAGE} puts @{owner}'s result into storage {slot}, which was "
                                f"allocated for another element type or size ({before.type} -> {value.type})")

    # ------------------------------------------------------------ ops

    def write(self) -> Launcher:
        ops = list(self.graph.block.ops)
        body: list[str] = []
        outputs = set(ops[-1].operands) if ops and isinstance(ops[-1], F.OutputOp) else set()
        last_use = {}
        for i, op in enumerate(ops):
            for v in graph_operands(op):
                last_use[v] = i
        self.absorbed = {op.result for op in ops if isinstance(op, F.VIEW_OPS) and op.result.uses
                         and all(isinstance(u.operation, F.VIEW_OPS) for u in op.result.uses)}
        root: dict[SSAValue, SSAValue] = {}
        for op in ops:  # a chain's root lives as long as any view made from it
            if isinstance(op, F.VIEW_OPS) and op.result in self.absorbed:
                root[op.result] = root.get(op.input, op.input)
                last_use[root[op.result]] = max(last_use[root[op.result]], last_use[op.result])
        ends: dict[int, list[SSAValue]] = {}
        for v, i in last_use.items():
            ends.setdefault(i, []).append(v)
        self.read_storage_plan()
        for i, arg in enumerate(self.graph.block.args):
            self.names[arg] = f"arg{i}"
            self.aligned.add(f"arg{i}")  # the prologue makes every input 16-byte aligned
            # ... and lays it out as declared (or trusts it to be: Dynamo's guards keep the traced strides)
            self.layouts[f"arg{i}"] = _declared(tensor_type_of(arg))
        for i, op in enumerate(ops):
            if isinstance(op, F.OutputOp):
                alias_lines, aliases = self.output_aliases(op.values)
                body += alias_lines + self.in_place_writes(op, aliases)
                body.append(f"return [{', '.join(aliases.get(v, self.names[v]) for v in op.values)}]")
                break
            self.at = i
            body += self.op_lines(op)
            dead = [v for v in ends.get(i, ()) if v not in outputs and not _is_input(v)]
            dead += [r for r in graph_results(op) if r not in last_use and r not in outputs]
            dead_names = sorted({self.names[v] for v in dead} - set(self.deferred) - self.kept,  # kept: handed on later
                                key=lambda n: int(n.removeprefix("buf")))
            if dead_names:
                body.append(f"del {', '.join(dead_names)}")
        prologue = self.prologue()
        lines = ["def call(inputs):", *("    " + line for line in prologue + body)]
        source = f"# fusec launcher for @{self.gname}\n\n\n" + "\n".join(lines) + "\n"
        keys = tuple((k, tuple(sorted(a)), tuple(sorted(b)), tuple(sorted(c)), d, tuple(sorted(lit.items())))
                     for k, (a, b, c, d, lit) in self.sites.items())
        returned = ops[-1].operands if ops and isinstance(ops[-1], F.OutputOp) else ()
        orders = tuple(dim_order(t.dims, t.layout) if isinstance(t := v.type, TensorType) else None
                       for v in returned)
        dense = tuple(_dense_order(v.type) for v in returned)
        strided = tuple(None if d is not None else _static_strides(v.type) for v, d in zip(returned, dense, strict=True))
        return Launcher(self.gname, source, tuple(self.kernels.values()), tuple(self.externs.items()), keys, orders, dense,
                        strided)

    def read_storage_plan(self) -> None:
        """reuse-buffers' ``fusec.storage`` marks, where it ran: which storage each kernel result is written into."""
        if not any(F.STORAGE in op.attributes for op in self.graph.walk()):
            return
        self.lifetimes = {a.value: a for a in allocations(self.graph)}
        users: dict[int, list[SSAValue]] = {}
        for a in self.lifetimes.values():  # in launch order
            marks = F.storage_of(a.value.op)
            slot = marks[a.value.index] if marks is not None else -1
            if slot >= 0:
                self.storage[a.value] = slot
                users.setdefault(slot, []).append(a.value)
        self.handed_on = {v for values in users.values() for v in values[:-1]}

    def op_lines(self, op: Operation) -> list[str]:
        if isinstance(op, F.KernelOp):
            return self.kernel(op)
        if isinstance(op, F.ExternOp):
            return self.extern(op)
        if isinstance(op, F.VIEW_OPS):
            return self.view(op)
        if isinstance(op, F.ComboOp):
            return self.combo(op)
        raise LoweringError(f"@{self.gname}: {op.name} cannot reach the launcher; run form-kernels first "
                            "(after it a graph holds only kernels, combos, externs, views and its output)")

    def kernel(self, op: F.KernelOp) -> list[str]:
        tk = lower_kernel(op, self.hints, symbol_bounds(op), self.options)
        self.add_kernel(tk)
        if tk.persistent_form is not None:
            self.add_kernel(tk.persistent_form)
        lines = [self.allocate(r) for r in op.outputs]
        return lines + tk.launch_lines(self, [self.names[v] for v in list(op.inputs) + list(op.outputs)])

    def add_kernel(self, artifact: TritonKernel | TritonCombo) -> None:
        known = self.kernels.get(artifact.name)
        if known is not None and known.source != artifact.source:
            raise LoweringError(f"@{self.gname}: two different kernels are named @{artifact.name}")
        self.kernels[artifact.name] = artifact

    def int_variable(self, name: str, e: sympy.Expr) -> str:
        """``name = <e>``, remembering which size ``name`` holds (launches key on distinct sizes)."""
        self.int_values[name] = self.py(e)
        return f"{name} = {self.int_values[name]}"

    def pointer_dtypes(self, names: list[str]) -> tuple[str, ...]:
        """The element types behind buffer names: sites that share a kernel body share compiled code only with
        these equal (a body that loads and stores without a cast reads as the same source for f16 and bf16)."""
        types = {name: str(tensor_type_of(v).element_type) for v, name in self.names.items() if name in names}
        return tuple(types.get(n, "?") for n in names)

    def is_aligned(self, pointer: str) -> bool:
        return pointer in self.aligned

    def launch(self, kernel: str, grid: str, warps: str, args: list[str], num_pointers: int,
               constexprs: list[tuple[str, str]]) -> str:
        """``kernel.launch(grid, warps, *args, *constexprs)``; records what its runner must key on.

        Pointers from ``_empty`` and the (aligned) inputs need no alignment check;
        a view or an extern's result might start anywhere.  Literal ints and constexprs
        never vary at a site, but Triton compiles them in (a block size; an int's
        divisibility by 16, its equality to 1): they are the runner's ``literals``, so that
        sites sharing a kernel body share compiled code only where they agree (two graphs
        launching one body at XBLOCK 128 and 256 with the same warps ran each other's
        binary: half the rows, silently).  A second site of this kernel disagreeing with
        the first keys that position per call instead.  Ints holding the same size
        expression are keyed once.  Constexprs chosen per call (block sizes of a symbolic
        domain) are keyed by value: each is a different compiled kernel.
        ``constexprs``: (parameter, value); literal values are named in a comment.
        """
        checked = {i for i, a in enumerate(args[:num_pointers]) if a not in self.aligned}
        ints, seen = set(), set()
        for i, a in enumerate(args[num_pointers:], num_pointers):
            value = self.int_values.get(a, a)
            if not value.isdigit() and value not in seen:
                ints.add(i)
                seen.add(value)
        values = [v for _, v in constexprs]
        chosen, seen = set(), set()
        for i, v in enumerate(values, len(args)):
            if not v.isdigit() and v not in seen:
                chosen.add(i)
                seen.add(v)
        resolved = [self.int_values.get(a, a) for a in args[num_pointers:]] + values
        literals = {i: v for i, v in enumerate(resolved, num_pointers) if v.isdigit()}
        old = self.sites.get(kernel)
        if old is not None:
            checked, ints, chosen = old[0] | checked, old[1] | ints, old[2] | chosen
            for i in [i for i in old[4].keys() | literals.keys() if old[4].get(i) != literals.get(i)]:
                (ints if i < len(args) else chosen).add(i)  # the sites disagree: keyed per call
                literals.pop(i, None)
        dtypes = old[3] if old is not None else self.pointer_dtypes(args[:num_pointers])
        self.sites[kernel] = (checked, ints, chosen, dtypes, literals)
        line = f"{kernel}.launch({grid}, {warps}, {', '.join(args + values)})"
        if all(v.isdigit() for v in values):
            line += f"  # grid {grid}, num_warps {warps}, {', '.join(f'{n}={v}' for n, v in constexprs)}"
        return line

    def combo(self, op: F.ComboOp) -> list[str]:
        """One launch for the combo's kernels: every member's outputs allocated (the combo's results alias them)."""
        tc = lower_combo(op, self.hints, None, self.options)
        self.add_kernel(tc)
        if tc.persistent_form is not None:
            self.add_kernel(tc.persistent_form)
        lines = [self.allocate(r) for k in op.kernels for r in k.results]
        for outer, inner in zip(op.outputs, op.output_op.operands, strict=True):
            self.names[outer] = self.names[inner]
        return lines + tc.launch_lines(self, [self.names[v] for v in tc.pointers])

    def extern(self, op: F.ExternOp) -> list[str]:
        target = op.target.data
        try:
            fn_object = externs.resolve_target(target)
        except LookupError as e:
            raise LoweringError(f"@{self.gname}: fusec.extern: {e}") from None
        operands = [externs.Code(self.names[v]) for v in op.inputs]
        args, kwargs = externs.extern_arguments(op, operands, lambda e: externs.Code(self.py(e)), externs.Code("device"),
                                                lambda name: externs.Code(f"torch.ops.{name}"))
        call = self.call_line(target, args, kwargs)
        outs = [self.new_buffer(r) for r in op.outputs]
        for r in op.outputs:  # a new tensor whose storage a later kernel result takes (reuse-buffers)
            if r in self.storage:
                self.last_in[self.storage[r]] = r
        returns = getattr(fn_object, "_schema", None)
        single = returns is not None and len(returns.returns) == 1 and str(returns.returns[0].type) == "Tensor"
        flat = returns is not None and all(str(r.type) in ("Tensor", "Tensor?") for r in returns.returns)
        if single and op.result_positions == [0]:
            lines = [f"{outs[0]} = {call}"]
        elif flat and len(outs) == 1:  # a tuple of tensors: its positions are the results' (no flattening: ~3 µs)
            lines = [f"{outs[0]} = {call}[{op.result_positions[0]}]"]
        elif flat and outs:
            lines = [f"{outs[0]} = {call}",
                     f"{', '.join(outs)} = {', '.join(f'{outs[0]}[{i}]' for i in op.result_positions)}"]
        else:  # a tuple or list: pick the results out of it
            target_list = f"{outs[0]}," if len(outs) == 1 else ", ".join(outs)
            lines = [f"{target_list} = _pick_results({call}, {tuple(op.result_positions)!r})"] if outs else [call]
        if collectives.kind(op) == collectives.ISSUE:
            # Its buffers are in flight until the wait: no copy to another layout before then (the wait's result gets it).
            return lines
        for name, r in zip(outs, op.outputs, strict=True):
            t = tensor_type_of(r)
            layout = self.shape_tuple(t.layout)
            self.layouts[name] = _declared(t)
            if target in externs.ROW_MAJOR_RESULTS and t.is_contiguous:  # row-major, size-1 dims included
                self.aligned.add(name)  # and a new allocation, as _empty's: kernels need no check of it
                continue
            # An op may return an undefined tensor (None) where its meta function promised an empty one
            # (fused attention's sequence offsets): it passes on as None, as in eager.
            lines.append(f"if {name} is not None and {name}.stride() != {layout}:")
            lines.append(f"    {name} = _as_layout({name}, {layout})")
        return lines

    def call_line(self, target: str, args: list, kwargs: dict) -> str:
        fn = "_" + target.replace(".", "_")
        self.externs[fn] = target
        return f"{fn}({', '.join([externs.source_of(a) for a in args] + [f'{k}={externs.source_of(v)}' for k, v in kwargs.items()])})"

    def view(self, op: F.ReshapeOp | F.PermuteOp | F.ExpandOp | F.SliceOp) -> list[str]:
        src = self.names[op.input]
        out = self.new_buffer(op.result)
        t = tensor_type_of(op.result)
        known = self.layouts.get(src)
        layout = view_layout(op, known) if known is not None else None
        if known is not None and layout is not None and (layout.exact or not _is_graph_output(op.result)):
            # Made in one call from what the launcher knows; a graph output only where its strides are those torch's
            # view would have, size-1 dims included (what eager's are), else it is torch's own view.
            self.layouts[out] = layout
            if op.result in self.absorbed:  # only views read it: made from its root by each of them
                self.deferred[out] = self.deferred.get(src, src)
                return []
            root = self.deferred.get(src, src)
            lines = [f"{out} = {self._reinterpret(out, root)}"]
            if root in self.aligned and indexing.divides(sympy.Integer(16), self._offset_from(out, root) * F.torch_dtype(t).itemsize):
                self.aligned.add(out)  # e.g. a slice of rows of 16-byte multiples: kernels need no check of it
            if any(isinstance(use.operation, (F.KernelOp, F.ComboOp)) for use in op.result.uses) \
                    and not same_strides(layout.dims, layout.strides, t.layout):
                lines.append(f"{out} = _as_layout({out}, {self.shape_tuple(t.layout)})")
                self.layouts[out] = _declared(t)
                self.aligned.add(out)  # _as_layout's copy (or the view itself, checked aligned)
            return lines
        lines = [f"{src} = {self._reinterpret(src, self.deferred.pop(src))}"] if src in self.deferred else []
        lines += [f"{out} = {self.view_expr(op, src)}"]
        if any(isinstance(use.operation, (F.KernelOp, F.ComboOp)) for use in op.result.uses):
            # form-kernels folds views into loads; a kernel reading a view still gets the layout its type says
            declared = self.shape_tuple(t.layout)
            lines += [f"if {out}.stride() != {declared}:", f"    {out} = _as_layout({out}, {declared})"]
        return lines

    def _offset_from(self, name: str, root: str) -> sympy.Expr:
        """Elements from where ``root`` starts to where its view ``name`` starts."""
        return sympy.expand(self.layouts[name].offset - self.layouts[root].offset)

    def _reinterpret(self, name: str, root: str) -> str:
        """``name``'s view as one call on ``root`` (the offset counts from ``root``'s own storage offset)."""
        layout = self.layouts[name]
        args = [root, self.shape_tuple(layout.dims), self.shape_tuple(layout.strides), self.py(self._offset_from(name, root))]
        return f"_reinterpret({', '.join(args)})"

    def view_expr(self, op: F.ReshapeOp | F.PermuteOp | F.ExpandOp | F.SliceOp | F.ExternOp, src: str) -> str:
        if isinstance(op, F.ExternOp):  # a torch view op (unflatten by a symbolic size): called on ``src``
            args, kwargs = externs.extern_arguments(op, [externs.Code(src)], lambda e: externs.Code(self.py(e)),
                                                    externs.Code("device"))
            return self.call_line(op.target.data, args, kwargs)
        t = tensor_type_of(op.result)
        if isinstance(op, F.ReshapeOp):
            return f"{src}.reshape({self.shape_tuple(t.dims)})"  # a copy where no view exists
        if isinstance(op, F.PermuteOp):
            return f"{src}.permute({_tuple([str(p) for p in op.perm_list])})"
        if isinstance(op, F.ExpandOp):
            return f"{src}.expand({self.shape_tuple(t.dims)})"
        d, step = op.dim.data, op.step.data
        start = op.start.data
        end = start + step * (t.dims[d] - 1) + 1
        return f"_slice({src}, {d}, {self.py(start)}, {self.py(end)}, {step})"

    def in_place_writes(self, op: F.OutputOp, aliases: dict[SSAValue, str]) -> list[str]:
        """Outputs stored into inputs in place are returned as the caller's tensors (the backend then copies nothing);
        where the prologue replaced a misaligned input by an aligned copy, the kernel wrote the copy: copied back."""
        lines = []
        for i, o, in_place in self.graph.input_mutations:
            if in_place:
                buffer, given = self.names[op.values[o]], f"given_arg{i}"
                lines += [f"if {buffer} is not {given}:", f"    {given}.copy_({buffer})"]
                aliases[op.values[o]] = given
        return lines

    def output_aliases(self, values) -> tuple[list[str], dict[SSAValue, str]]:
        """Outputs that are views of an input, taken from the input as the caller passed it.

        The prologue may replace a misaligned input by an aligned copy (for kernels); AOTAutograd rebuilds an output
        that aliases an input from the output's strides and storage offset, so those must be the caller's tensor's.
        """
        lines: list[str] = []
        names: dict[SSAValue, str] = {}
        for v in dict.fromkeys(values):
            chain: list = []
            root = v
            while isinstance(root.owner, F.VIEW_OPS) or _is_view_extern(root.owner):
                chain.append(root.owner)
                root = root.owner.input if isinstance(root.owner, F.VIEW_OPS) else root.owner.inputs[0]
            if not _is_input(root):  # an input itself, or views of one
                continue
            src = f"given_{self.names[root]}"
            self.given.add(self.names[root])
            for op in reversed(chain):
                name = f"{self.names[v]}_of_input"
                lines.append(f"{name} = {self.view_expr(op, src)}")
                src = name
            names[v] = src
        return lines, names

    # ------------------------------------------------------------ prologue

    def prologue(self) -> list[str]:
        args: list[SSAValue] = list(self.graph.block.args)
        lines = [f"if len(inputs) != {len(args)}:", f"    _bad_input_count({self.gname!r}, {len(args)}, inputs)"]
        if args:
            lines.append(f"{', '.join(self.names[a] for a in args)} = inputs" if len(args) > 1 else "arg0 = inputs[0]")
            lines.append("device = arg0.device")
        else:
            lines.append("device = _default_device")
        # Checks use every symbol the input types mention (and the size facts), layouts those of the strides.
        facts = [(self.py(lhs), self.py(rhs), shapes.print_fact(lhs, rhs))
                 for lhs, rhs in self.graph.size_facts] if self.check_shapes else []
        for a in args:
            if self.check_shapes:
                self.shape_tuple(tensor_type_of(a).dims)
            self.shape_tuple(tensor_type_of(a).layout)  # every mode copies a misaligned input into its layout
        lines += self.bind_symbols(args)
        for left, right, text in facts:  # Dynamo guards them; a direct caller may not
            lines += [f"if {left} != {right}:", f"    _broken_fact({self.gname!r}, {text!r}, {left}, {right})"]
        # The plan's remaining checks: each input's whole shape (a wrong dim, or one that no integer value of its
        # symbol gives, is a wrong input) and its strides (a different layout is copied into the declared one).
        trusted = self.graph.aligned_inputs if not self.check_strides else frozenset()
        for i, a in enumerate(args):
            t = tensor_type_of(a)
            name = self.names[a]
            if self.check_shapes:
                shape = self.shape_tuple(t.dims)
                dtype = externs.source_of(F.torch_dtype(t))
                lines.append(f"if {name}.shape != {shape} or {name}.dtype != {dtype}:")
                lines.append(f"    _bad_input({self.gname!r}, {i}, {name}, {shape}, {dtype})")
            if name in self.given:  # an output aliases it: views of the caller's tensor, not of the copy
                lines.append(f"given_{name} = {name}")
            if i in trusted:  # laid out as declared (Dynamo's guards) and aligned at one address (ALIGNED_INPUTS)
                self.aligned.add(name)
                continue
            layout = self.shape_tuple(t.layout)
            if self.check_strides:
                lines.append(f"if {name}.stride() != {layout} or {name}.data_ptr() % 16:")
            else:
                lines.append(f"if {name}.data_ptr() % 16:")
            lines.append(f"    {name} = _as_layout({name}, {layout})")
            self.aligned.add(name)
        return lines

    def bind_symbols(self, args: list[SSAValue]) -> list[str]:
        """``s0 = arg0.shape[0]`` for every symbol the code uses, as the graph's bind plan says (and in its order)."""
        lines = []
        for b in bind_plan(self.graph).bindings_for(self.used_symbols):
            if b.place is None:  # a derived symbol: computed from those bound before it
                lines.append(f"{b.symbol} = {python_expr(b.definition)}")
                continue
            arg, d = self.names[args[b.place.input]], b.place.index
            value = f"{arg}.shape[{d}]" if b.place.kind == "dim" else f"{arg}.stride({d})"
            lines.append(f"{b.symbol} = {_solve_linear(value, b.coeff, b.offset)}")
        return lines


def _solve_linear(value: str, a: sympy.Expr, b: sympy.Expr) -> str:
    """Host code for s given ``value == a*s + b``."""
    numerator = value if b == 0 else f"({python_expr(_VALUE - b, {_VALUE.name: value})})"
    return numerator if a == 1 else f"{numerator} // {_atom(a)}"


_VALUE = sympy.Symbol("value")  # stands for the dim or stride read, in the expression printed for it


def _atom(e: sympy.Expr) -> str:
    text = python_expr(e)
    return text if e.is_Symbol or (e.is_Integer and e >= 0) else f"({text})"


def _is_view_extern(op) -> bool:
    """A torch call that returns a view of its one tensor operand (``aten.view`` with a symbolic split):
    an output computed by it aliases that operand, as a fusec view would."""
    if not isinstance(op, F.ExternOp) or len(op.inputs) != 1 or len(op.outputs) != 1 or op.result_positions != [0]:
        return False
    try:
        schema = getattr(externs.resolve_target(op.target.data), "_schema", None)
    except LookupError:
        return False
    if schema is None:
        return False
    alias = schema.returns[0].alias_info if len(schema.returns) == 1 else None
    return alias is not None and not alias.is_write


def _declared(t: F.TensorType) -> Layout:
    return Layout(tuple(t.dims), tuple(t.layout), sympy.Integer(0))


def _is_graph_output(v: SSAValue) -> bool:
    return any(isinstance(use.operation, F.OutputOp) for use in v.uses)


def _is_input(v: SSAValue) -> bool:
    return isinstance(v, BlockArgument)


def _static_strides(t) -> tuple[int, ...] | None:
    if not isinstance(t, TensorType) or not all(isinstance(s, sympy.Integer) for s in t.layout):
        return None
    return tuple(int(s) for s in t.layout)


def _dense_order(t) -> tuple[int, ...] | None:
    """The order of a dense layout's dims of size other than 1, outermost first; None where not dense."""
    if not isinstance(t, TensorType):
        return None
    order = shapes.dense_dim_order(t.dims, t.layout)
    return None if order is None else tuple(d for d in order if t.dims[d] != 1)
