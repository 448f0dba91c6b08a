"""One ``fusec.combo`` -> one Triton kernel whose programs are routed to its sub-kernels.

Each sub-kernel is lowered alone by ``fusec.lowering.triton_kernel`` (so it keeps its
own kind and its own block sizes, ``XBLOCK_i``/``RBLOCK_i``) and its body is inlined
under a branch on the program id::

    pid = tl.program_id(0)
    num_blocks_0 = (xnumel_0 + XBLOCK_0 - 1) // XBLOCK_0
    num_blocks_1 = num_blocks_0 + (xnumel_1 + XBLOCK_1 - 1) // XBLOCK_1  # a tiled member: x tiles * r tiles
    if pid < num_blocks_0:
        xoffset_0 = pid * XBLOCK_0              # sub-kernel 0, its names suffixed _0
        ...
    elif pid < num_blocks_1:
        xoffset_1 = (pid - num_blocks_0) * XBLOCK_1
        ...

Sizes stay runtime ints (``xnumel_i``, ``rnumel_i``, then the size symbols, shared by the
sub-kernels), so one source serves every size; the grid is the sum of the block counts,
computed on the host from the actual sizes.  A sub-kernel's body comes from its
lowering as statements with slots for its own names (``KernelBody``): the combo fills
the parameters' slots with its arguments, the program id's with the shifted one and
the locals' with suffixed names; Triton's and the helpers' names are no slots and
stay.  Inputs read by several sub-kernels are passed once.

Members over a symbolic row length that ``schedule-kernels`` gave ``persistent_up_to``
(a looped kernel with a persistent form) share one launch, so the combo is lowered
twice: ``<name>`` with every member as scheduled, ``<name>_persistent`` with those
members' persistent forms; the launcher runs the second when every such member's rows
fit (``if s1 <= 4096 and s2 <= 4096:``), the first otherwise.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import sympy
from xdsl.ir import SSAValue

from fusec.analysis import heuristics
from fusec.base import shapes
from fusec.dialects import fusec as F
from fusec.lowering import triton_ops as ops
from fusec.lowering.launching import LaunchSite
from fusec.lowering.triton_kernel import (
    PROGRAM_ID,
    KernelBody,
    LoweringError,
    LoweringOptions,
    TritonKernel,
    lower_kernel,
    symbol_bounds,
)

# Names the combo kernel itself defines; a size symbol spelled like one is passed as sym_<name>.
_COMBO_NAMES = re.compile(r"^(pid|num_blocks_\d+|(in|out)_ptr\d+|[xr]numel_\d+|[XR]BLOCK_\d+)$")
_GLOBALS = {"tl", "triton", "libdevice", "range", "float", "int", "min", "max", "len", "True", "False", "None"}


@dataclass(frozen=True)
class ComboMember:
    """One sub-kernel: how it was lowered alone, and where its arguments come from in the combo."""

    kernel: TritonKernel
    xnumel: sympy.Expr
    rnumel: sympy.Expr | None

    def config(self, xnumel: int, rnumel: int = 1) -> heuristics.LaunchConfig:
        return self.kernel.config(xnumel, rnumel)


@dataclass(frozen=True)
class TritonCombo:
    """A lowered combo: its module source and its calling convention.

    Arguments: ``pointers`` (graph-level values: distinct inputs, then every member's
    outputs), then ``size_args`` (name, value over size symbols), then the constexprs
    ``XBLOCK_i`` (and ``RBLOCK_i`` for reductions) of each member.  Like a
    ``TritonKernel``, ``name`` is the ``@triton.jit`` function of ``source``.
    """

    name: str
    source: str
    members: tuple[ComboMember, ...]
    pointers: tuple[SSAValue, ...]
    size_args: tuple[tuple[str, sympy.Expr], ...]
    # Members that are looped reductions with a persistent form (``persistent_up_to``): the combo whose members run
    # those forms, and (rnumel, up to) for each; a call where every one of them fits launches it.
    persistent_form: TritonCombo | None = None
    persistent_up_to: tuple[tuple[sympy.Expr, int], ...] = ()

    def launch_plan(self, env: Mapping[str, int]) -> tuple[int, dict[str, int], int]:
        """(grid size, constexprs, num_warps) for actual sizes: each member's own block sizes."""
        grid, constexprs, warps = 0, {}, 1
        for i, m in enumerate(self.members):
            x = shapes.evaluate(m.xnumel, env)
            r = shapes.evaluate(m.rnumel, env) if m.rnumel is not None else 1
            cfg = m.config(x, r)
            constexprs[f"XBLOCK_{i}"] = cfg.xblock
            if m.rnumel is not None:
                constexprs[f"RBLOCK_{i}"] = cfg.rblock
            grid += m.kernel.programs(x, r)
            warps = max(warps, cfg.num_warps)
        return grid, constexprs, warps

    def __getstate__(self) -> dict:
        # ``pointers`` are IR values, which reach the whole module: a stored launcher (the warm start's graph
        # cache) keeps the launch, which names its buffers in the host source, not the IR.
        return {**self.__dict__, "pointers": ()}

    def launch(self, fn, buffers: Sequence, env: Mapping[str, int]) -> None:
        """Launch the loaded kernel ``fn`` on ``buffers`` (one tensor per pointer) for sizes ``env``."""
        grid, constexprs, warps = self.launch_plan(env)
        if grid:
            sizes = [shapes.evaluate(e, env) for _, e in self.size_args]
            fn[(grid,)](*buffers, *sizes, **constexprs, num_warps=warps)

    def launch_lines(self, site: LaunchSite, pointers: Sequence[str]) -> list[str]:
        """Host lines sizing every member's blocks and launching the combo once on ``pointers``; with a persistent
        form, launching that form when every member that has one gets rows that fit (else every member loops)."""
        if self.persistent_form is not None:
            fits = dict.fromkeys(f"{site.py(r)} <= {up_to}" for r, up_to in self.persistent_up_to)
            return ([f"if {' and '.join(fits)}:  # whole rows fit: the members' persistent forms"]
                    + ["    " + line for line in self.persistent_form.launch_lines(site, pointers)]
                    + ["else:"] + ["    " + line for line in self._launch_lines(site, pointers)])
        return self._launch_lines(site, pointers)

    def _launch_lines(self, site: LaunchSite, pointers: Sequence[str]) -> list[str]:
        if not any(e.free_symbols for _, e in self.size_args):  # every number is known: the launch line carries them
            return self._static_launch(site, pointers)
        lines, counts, warps, blocks = [], [], [], []
        same: dict[str, str] = {}  # a member sized like an earlier one reuses its variables
        first: dict[tuple, int] = {}
        for i, m in enumerate(self.members):
            k = m.kernel
            j = first.setdefault((k.kind, k.outer, k.max_rblock, m.xnumel, m.rnumel), i)
            if j != i:
                same.update({f"{v}_{i}": f"{v}_{j}" for v in ("xnumel", "rnumel", "XBLOCK", "RBLOCK")})
            else:
                lines.append(site.int_variable(f"xnumel_{i}", m.xnumel))
                if m.rnumel is not None:
                    lines.append(site.int_variable(f"rnumel_{i}", m.rnumel))
                lines.append(f"XBLOCK_{i}, RBLOCK_{i}, num_warps_{i} = {k.config_code(f'xnumel_{i}', f'rnumel_{i}')}")
                warps.append(f"num_warps_{i}")
            counts.append(k.programs_code(f"xnumel_{j}", f"rnumel_{j}", f"XBLOCK_{j}", f"RBLOCK_{j}"))
            blocks += [(f"XBLOCK_{i}", f"XBLOCK_{j}")] + ([(f"RBLOCK_{i}", f"RBLOCK_{j}")] if m.rnumel is not None else [])
        args = list(pointers) + [same.get(n, n) if n.startswith(("xnumel_", "rnumel_")) else site.py(e) for n, e in self.size_args]
        repeats = {c: counts.count(c) for c in counts}  # members sized alike: "4 * (blocks of one)"
        lines.append(f"grid = {' + '.join(c if n == 1 else f'{n} * ({c})' for c, n in repeats.items())}")
        lines.append("if grid:")
        num_warps = warps[0] if len(warps) == 1 else f"max({', '.join(warps)})"
        lines.append("    " + site.launch(self.name, "grid", num_warps, args, len(pointers), blocks))
        return lines

    def _static_launch(self, site: LaunchSite, pointers: Sequence[str]) -> list[str]:
        grid, warps, sizes, blocks = 0, 1, {}, []
        for i, m in enumerate(self.members):
            x, r = int(m.xnumel), int(m.rnumel) if m.rnumel is not None else 1
            cfg = m.config(x, r)
            sizes[f"xnumel_{i}"], sizes[f"rnumel_{i}"] = str(x), str(r)
            blocks += [(f"XBLOCK_{i}", str(cfg.xblock))] + ([(f"RBLOCK_{i}", str(cfg.rblock))] if m.rnumel is not None else [])
            grid, warps = grid + m.kernel.programs(x, r), max(warps, cfg.num_warps)
        args = list(pointers) + [sizes.get(n) or site.py(e) for n, e in self.size_args]
        return [site.launch(self.name, str(grid), str(warps), args, len(pointers), blocks)] if grid else []


def lower_combo(combo: F.ComboOp, size_hints: Mapping[str, int] | None = None,
                bounds: Mapping[str, tuple[float, float]] | None = None,
                options: LoweringOptions = LoweringOptions()) -> TritonCombo:
    """The Triton module source of ``combo``: one kernel, its programs routed to the sub-kernels."""
    if not combo.kernels:
        raise LoweringError(f"fusec.combo @{combo.sym_name.data} holds no kernel")
    return lower_kernels_as_combo(combo.sym_name.data, combo.kernels, size_hints, bounds, options)


def lower_kernels_as_combo(combo_name: str, kernels: Sequence[F.KernelOp], size_hints: Mapping[str, int] | None = None,
                           bounds: Mapping[str, tuple[float, float]] | None = None,
                           options: LoweringOptions = LoweringOptions()) -> TritonCombo:
    """``lower_combo`` for independent kernels not (yet) in a ``fusec.combo`` (e.g. to time them both ways)."""
    bounds = dict(symbol_bounds(kernels[0]) if bounds is None else bounds)
    lowered = [lower_kernel(k, size_hints, bounds, options) for k in kernels]
    combo = _combine(combo_name, kernels, lowered)
    up_to = tuple((dict(tk.size_args)["rnumel"], tk.persistent_up_to) for tk in lowered
                  if tk.persistent_form is not None and tk.persistent_up_to is not None)
    if not up_to:
        return combo
    # One more combo, its looped members with a persistent form running that form: a call whose rows all fit runs it.
    persistent = _combine(f"{combo_name}_persistent", kernels, [tk.persistent_form or tk for tk in lowered])
    return dataclasses.replace(combo, persistent_form=persistent, persistent_up_to=up_to)


def _combine(combo_name: str, kernels: Sequence[F.KernelOp], lowered: Sequence[TritonKernel]) -> TritonCombo:
    """One Triton kernel routing its programs to ``kernels``, lowered as ``lowered``."""
    inputs: list[SSAValue] = []
    for k in kernels:
        inputs += [v for v in k.inputs if v not in inputs]
    outputs: list[SSAValue] = [r for k in kernels for r in k.results]
    pointer_name = {v: f"in_ptr{j}" for j, v in enumerate(inputs)}
    out_name: dict[SSAValue, str] = {r: f"out_ptr{j}" for j, r in enumerate(outputs)}

    symbols: dict[str, str] = {}  # size symbol -> the combo's argument for it
    members, size_params, branches, constexprs, texts = [], [], [], [], []
    for i, (k, tk) in enumerate(zip(kernels, lowered, strict=True)):
        sizes = dict(tk.size_args)
        rnumel = sizes.get("rnumel")
        members.append(ComboMember(tk, sizes["xnumel"], rnumel))
        size_params.append((f"xnumel_{i}", sizes["xnumel"]))
        if rnumel is not None:
            size_params.append((f"rnumel_{i}", rnumel))
        constexprs += [f"{c}_{i}" for c in tk.constexprs]
        args = {}
        for param, v in zip(_body(tk).pointers, list(k.inputs) + list(k.results), strict=True):
            args[param] = pointer_name[v] if v in pointer_name else out_name[v]
        for param, e in tk.size_args:
            if param in ("xnumel", "rnumel"):
                args[param] = f"{param}_{i}"
            else:
                sym = e.name
                symbols.setdefault(sym, f"sym_{sym}" if _COMBO_NAMES.match(sym) or sym in _GLOBALS else sym)
                args[param] = symbols[sym]
        for c in tk.constexprs:
            args[c] = f"{c}_{i}"
        offset = "pid" if i == 0 else f"(pid - num_blocks_{i - 1})"
        body = _inline_body(tk, i, args, offset)
        dom = ", ".join(shapes.print_expr(d) for d in k.domain_exprs)
        branches.append((f"{tk.name}: {tk.kind} over [{dom}]", body))
        texts.append(tk.source)
    size_params += [(arg, shapes.size_symbol(sym)) for sym, arg in sorted(symbols.items(), key=lambda t: shapes.natural_key(t[0]))]

    name = re.sub(r"\W", "_", combo_name)
    params = [*pointer_name.values(), *out_name.values(), *(n for n, _ in size_params), *(f"{c}: tl.constexpr" for c in constexprs)]
    lines = ["@triton.jit", f"def {name}({', '.join(params)}):", "    pid = tl.program_id(0)"]
    for i, tk in enumerate(lowered):
        # not tl.cdiv: a library @jit function the interpreter cannot call
        count = tk.programs_code(f"xnumel_{i}", f"rnumel_{i}", f"XBLOCK_{i}", f"RBLOCK_{i}")
        lines.append(f"    num_blocks_{i} = {count}" if i == 0 else f"    num_blocks_{i} = num_blocks_{i - 1} + {count}")
    for i, (what, body) in enumerate(branches):
        lines.append(f"    {'if' if i == 0 else 'elif'} pid < num_blocks_{i}:")
        lines.append(f"        # sub-kernel {i}: {what}")
        lines += ["        " + line for line in body]
    source = _module(name, lowered, "\n".join(lines) + "\n")
    return TritonCombo(name, source, tuple(members), tuple(inputs + outputs), tuple(size_params))


def _body(tk: TritonKernel) -> KernelBody:
    if tk.body is None:
        raise LoweringError(f"kernel {tk.name} carries no body to inline")
    return tk.body


def _inline_body(tk: TritonKernel, i: int, args: Mapping[str, str], offset: str) -> list[str]:
    """The body of sub-kernel ``tk`` as the ``i``-th branch of a combo: its slots filled with the combo's names."""
    body = _body(tk)
    names: dict[str, str] = {PROGRAM_ID: offset}
    prologue: list[str] = []
    for p in body.params:
        if p in body.rebound:  # rebinding a shared argument inside a branch is an error: a local copy
            names[p] = f"{p}_{i}_v"
            prologue.append(f"{names[p]} = {args[p]}")
        else:
            names[p] = args[p]
    names |= {n: f"{n}_{i}" for n in body.locals}
    return prologue + [line.removeprefix("    ") for line in body.lines(names)]


def _module(name: str, lowered: Sequence[TritonKernel], kernel_text: str) -> str:
    parts = ", ".join(f"{tk.name} ({tk.kind})" for tk in lowered)
    return ops.module_source(f"fusec combo kernel {name}: {len(lowered)} sub-kernels routed by program id: {parts}",
                             kernel_text)
