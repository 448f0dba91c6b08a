"""merge-matmuls: matmuls that share an operand, or whose products are summed, run as one matmul on concatenated operands.

A transformer layer projects one input several times -- query, key and value; a gated MLP's gate and up -- and its
backward sums the input's gradients over those projections and computes each weight's gradient from the same saved
input.  At the sizes such layers run (a few thousand tokens, hidden sizes in the hundreds or low thousands) each
cuBLAS call takes more time beyond its flops than the flops themselves, and one call on concatenated operands does
the same work: on an H200 in bf16, Llama's (512 -> 512, 256, 256) projections of 1024 tokens take 9.8 µs as three
calls and 4.1 as one, their input gradient 13.3 against 4.2, their weight gradients 11.1 against 4.1; copying the
three weights into one costs 1.4 µs (``bench/merge_matmuls.py``).  At 7B-model sizes the merged call gains nothing
and the copies cost tens of µs, so a cost rule decides.

In:  a graph before form-kernels.  Out: ``fusec.extern "aten.mm.default"`` ops merged three ways, the concatenated
operands being ``fusec.cat`` ops (kernels that form-kernels makes and vertical-fusion fuses into their producers):

- **one left operand** ``A @ B_i`` (projections of one input): ``A @ cat(B_i, dim 1)``, each result a column slice
  of the product.  Where every product is read only by a row-bias add (``A @ W_i.t() + b_i``), the biases are
  concatenated and added once, so that bias-epilogues can still make it one ``addmm``.  Views reading a slice are
  retyped for its row stride; a graph output or a view that cannot be one of the strided slice reads a contiguous
  copy (``fusec.pointwise "identity"``), except an output a training forward saves for its backward
  (``fusec.saved_outputs``) whose strides are static and that no torch kernel but a matmul reads: AOTAutograd
  compiles the backward for the strides the backend reports;
- **one right operand** ``A_i @ B`` (weight gradients ``dy_i.t() @ x``): ``cat(A_i, dim 0) @ B``, each result a row
  slice (contiguous);
- **a sum of products** ``A_1 @ B_1 + A_2 @ B_2 + ...`` (an input's gradient over its projections, through reshapes):
  ``cat(A_i, dim 1) @ cat(B_i, dim 0)``: one product, fp32 accumulation over the whole sum and one rounding (eager
  rounds each product, then each partial sum).

An operand that is a transpose (``W.t()``, ``dy.t()``) is concatenated before the transpose, so the copy keeps the
source's layout.  A copy made for one merge serves the next (the gradients concatenated for the weight gradients
feed the input's gradient).  Members must not depend on each other; ops between them that read an earlier
member's result move after the merged matmul, except a draw of random numbers (dropout), whose numbers depend on
the draws before it (``merge-reorders-random``: left apart).

Cost rule (``cost-rule``, on by default): a merge must save more than its copies cost.  Each call saved is
``GPU.matmul_latency_us`` (the flops stay); each product no longer stored and re-read by a sum's add is its bytes
twice at ``GPU`` bandwidth.  A copy of graph inputs (weights) reads and writes their bytes, launched with the
graph's other kernels that depend on nothing (combo-grouping); a copy of pointwise results (gradients) writes their
bytes once, computed in their producers' kernel (vertical-fusion); a copy of anything else reads and writes them in
a kernel of its own (its latency counted once a merge); a copy an earlier merge made costs nothing.  A column slice
(or a view of it) that the graph returns in eager's layout (to the user; saved for the backward where its strides
are symbolic or a torch kernel reads it) or that a view cannot read strided costs a copy, read and written.
Symbolic sizes at ``size-hints``.  ``merge-unprofitable`` remarks give both figures where it declines,
``merged-matmuls`` where it merges.  ``when``: ``accelerator`` (default) acts on graphs
marked as running on an accelerator, ``always`` on every graph (tests on CPU), ``never`` on none.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeGuard

import sympy
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue, Use
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from fusec.analysis.cost_model import GPU, SizeHints, element_bytes, parse_size_hints, resolve_size_hints
from fusec.analysis.view_layouts import Layout, view_layout
from fusec.base import remarks, shapes
from fusec.dialects import fusec as F
from fusec.dialects.attributes import TensorType, tensor_type_of
from fusec.passes.bias_epilogues import biased_product
from fusec.passes.pad_matmuls import MATMULS, check_when, graphs_to_change, show_dims

PASS = "merge-matmuls"
MM = "aten.mm.default"
_GPU = GPU()


def _is_mm(op: object) -> TypeGuard[F.ExternOp]:
    """A 2-D ``aten.mm`` of two tensors of one element type with a contiguous product."""
    if not (isinstance(op, F.ExternOp) and op.target.data == MM and len(op.inputs) == 2 and len(op.outputs) == 1
            and not op.kwargs.data):
        return False
    types = [v.type for v in (*op.inputs, op.outputs[0])]
    tensors = [t for t in types if isinstance(t, TensorType) and t.rank == 2]
    return len(tensors) == 3 and len({t.element_type for t in tensors}) == 1 and tensors[-1].is_contiguous


def _transposed(v: SSAValue) -> SSAValue | None:
    """``u`` where ``v`` is ``fusec.permute u [1, 0]`` of a contiguous ``u``."""
    op = v.owner
    if isinstance(op, F.PermuteOp) and op.perm_list == [1, 0] and tensor_type_of(op.input).is_contiguous:
        return op.input
    return None


def _key(v: SSAValue) -> tuple:
    """Equal for one value and for identical views of one value (an operand each matmul views anew)."""
    op = v.owner
    if isinstance(op, F.VIEW_OPS):
        return (op.name, str(op.properties), str(v.type), _key(op.input))
    return ("value", id(v))


def _sources(values: Sequence[SSAValue], dim: int) -> list[SSAValue] | None:
    """``u_i`` where every value is ``u_i.t()`` of a contiguous ``u_i`` (then ``cat(values, dim)`` is
    ``cat(u_i, 1 - dim).t()``, a copy in the sources' own layout); else None."""
    sources = [_transposed(v) for v in values]
    return None if any(s is None for s in sources) else sources  # type: ignore[return-value]


def _cat_type(values: Sequence[SSAValue], dim: int) -> TensorType:
    types = [tensor_type_of(v) for v in values]
    dims = list(types[0].dims)
    dims[dim] = sympy.Add(*[t.dims[dim] for t in types])
    return TensorType(dims, types[0].element_type)


def _producer_kind(v: SSAValue) -> str:
    """"input" (a graph input, through views), "pointwise" (a pointwise op's result, through views) or "other"."""
    op = v.owner
    while isinstance(op, F.VIEW_OPS):
        op = op.input.owner
    if not isinstance(op, Operation):
        return "input"
    return "pointwise" if isinstance(op, F.PointwiseOp) else "other"


def _bytes(t: TensorType, hints: SizeHints) -> int:
    """The bytes of ``t``'s elements (a copy moves these, not the span of a strided view's buffer)."""
    return hints(shapes.numel(t.dims)) * element_bytes(t)


class _Merger:
    """Merges one graph's matmuls; ``cats`` remembers the concatenations made, for later merges to reuse."""

    def __init__(self, graph: F.GraphOp, hints: SizeHints, cost_rule: bool):
        self.graph, self.hints, self.cost_rule = graph, hints, cost_rule
        self.cats: dict[tuple, Operation] = {}
        # outputs from this one on are saved for the backward, handed on strided where their strides are static
        self.saved_from = graph.saved_outputs_from

    # ------------------------------------------------------------ concatenations

    def _cat_at(self, values: Sequence[SSAValue], dim: int, at: Operation) -> SSAValue:
        """``cat(values, dim)`` available before ``at``: transposes are concatenated before the transpose, and a copy
        made for an earlier merge serves again."""
        sources = _sources(values, dim)
        if sources is not None:
            inner = self._plain_cat(sources, 1 - dim, at)
            t = tensor_type_of(inner)
            permuted = TensorType([t.dims[1], t.dims[0]], t.element_type, [t.layout[1], t.layout[0]])
            return self._insert(F.PermuteOp(inner, [1, 0], permuted), at)
        return self._plain_cat(values, dim, at)

    def _plain_cat(self, values: Sequence[SSAValue], dim: int, at: Operation) -> SSAValue:
        made = self._made(values, dim, at)
        if made is not None:
            return made
        cat = F.CatOp(list(values), dim, _cat_type(values, dim))
        Rewriter.insert_op(cat, InsertPoint.before(at))
        self.cats[(tuple(_key(v) for v in values), dim)] = cat
        return cat.result

    def _made(self, values: Sequence[SSAValue], dim: int, at: Operation) -> SSAValue | None:
        made = self.cats.get((tuple(_key(v) for v in values), dim))
        return made.results[0] if made is not None and made.is_before_in_block(at) else None

    @staticmethod
    def _insert(op: Operation, at: Operation) -> SSAValue:
        Rewriter.insert_op(op, InsertPoint.before(at))
        return op.results[0]

    def copy_cost(self, values: Sequence[SSAValue], dim: int, at: Operation) -> tuple[float, bool]:
        """(µs, whether it is a launch of its own) of the copy ``_cat_at`` would make: nothing where an earlier merge
        made it; each graph input's bytes read and written (such copies depend on nothing: combo-grouping launches
        them with the graph's other such kernels); a pointwise result's bytes written once (vertical-fusion computes
        it in the copy's kernel: its reads are the producer's own); anything else read and written by a kernel of
        its own."""
        sources = _sources(values, dim)
        if sources is not None:
            values, dim = sources, 1 - dim
        if self._made(values, dim, at) is not None:
            return 0.0, False
        us, launch = 0.0, False
        for v in values:
            kind = _producer_kind(v)
            us += (1 if kind == "pointwise" else 2) * _bytes(tensor_type_of(v), self.hints) / _GPU.bandwidth_bytes_per_us
            launch = launch or kind == "other"
        return us, launch

    # ------------------------------------------------------------ the cost rule

    def _decide(self, kind: str, members: Sequence[F.ExternOp], copies: Sequence[tuple[float, bool]],
                stored: Sequence[TensorType] = (), returned: int = 0) -> bool:
        """``returned``: how many of ``copies`` are of column slices read where they cannot be strided (said in the remark)."""
        saved = (len(members) - 1) * _GPU.matmul_latency_us
        saved += sum(2 * _bytes(t, self.hints) for t in stored) / _GPU.bandwidth_bytes_per_us
        # a merge's copies that launch on their own are independent of each other: combo-grouping launches them as one
        copies_us = sum(us for us, _ in copies) + (_GPU.kernel_latency_us if any(launch for _, launch in copies) else 0.0)
        shapes = "; ".join(" @ ".join(f"[{show_dims(tensor_type_of(v).dims)}]" for v in m.inputs) for m in members)
        outputs = f", {returned} of them slices copied dense for outputs or views" if returned else ""
        if self.cost_rule and saved <= copies_us:
            remarks.emit(PASS, "merge-unprofitable", f"{len(members)} matmuls with {kind} ({shapes}): one call would "
                         f"save ~{saved:.1f} µs, its operands' copies cost ~{copies_us:.1f} µs{outputs}; they stay apart",
                         *members, saved_us=round(saved, 2), cost_us=round(copies_us, 2), **self.hints.remark_data())
            return False
        remarks.emit(PASS, "merged-matmuls", f"{len(members)} matmuls with {kind} ({shapes}) run as one call on "
                     f"concatenated operands (~{saved:.1f} µs saved, ~{copies_us:.1f} µs of copies{outputs})", *members,
                     saved_us=round(saved, 2), cost_us=round(copies_us, 2))
        return True

    # ------------------------------------------------------------ one shared operand

    def shared(self, side: int) -> None:
        """Merge matmuls sharing operand ``side`` (0: the left, results side by side; 1: the right, stacked)."""
        groups: dict[tuple, list[F.ExternOp]] = defaultdict(list)
        for op in self.graph.block.ops:
            if _is_mm(op):
                inner = tensor_type_of(op.inputs[side]).dims[1 - side]  # K, the dim the other operands must share
                groups[(_key(op.inputs[side]), str(inner))].append(op)
        for group in groups.values():
            members = self._independent(group)
            if len(group) > len(members) >= 1:
                remarks.emit(PASS, "merge-dependent", f"{len(group) - len(members)} of {len(group)} matmuls with one "
                             f"{'left' if side == 0 else 'right'} operand read another's product (through other ops): "
                             "they stay apart", *group[len(members):])
            if len(members) >= 2:
                self._merge_shared(side, members)

    def _independent(self, members: list[F.ExternOp]) -> list[F.ExternOp]:
        """The longest prefix of ``members`` (in block order) none of which reads another's result, even through
        other ops."""
        kept: list[F.ExternOp] = []
        tainted: set[SSAValue] = set()
        op: Operation | None = members[0] if members else None
        pending: dict[Operation, F.ExternOp] = {m: m for m in members}
        while op is not None and pending:
            if op in pending:
                if any(v in tainted for v in op.operands):
                    break
                kept.append(pending.pop(op))
                tainted.update(op.results)
            elif any(v in tainted for v in op.operands):
                tainted.update(op.results)
            op = op.next_op
        return kept

    def _merge_shared(self, side: int, members: list[F.ExternOp]) -> None:
        last = members[-1]
        shared = members[0].inputs[side]  # defined before the first member, so before the last
        others = [m.inputs[1 - side] for m in members]
        cat_dim = 1 if side == 0 else 0  # B_i side by side along N; A_i stacked along M
        biased = self._row_biases(members, last) if side == 0 else None
        adds = [add for add, _ in biased] if biased else []
        biases = [bias for _, bias in biased] if biased else []
        olds = [add.results[0] for add in adds] if adds else [m.outputs[0] for m in members]  # what the slices replace
        copies = [self.copy_cost(others, cat_dim, last)]
        if biases:
            copies.append(self.copy_cost(biases, 0, last))
        returned: list[SSAValue] = []  # what reads a column slice but cannot read it strided gets a dense copy
        if side == 0:
            row = sympy.Add(*[tensor_type_of(v).dims[1] for v in olds])
            for v in olds:
                returned += _copied_on_reread(v, Layout(tuple(tensor_type_of(v).dims), (row, sympy.Integer(1)),
                                                        sympy.Integer(0)), self.saved_from)
        copies += [(2 * _bytes(tensor_type_of(v), self.hints) / _GPU.bandwidth_bytes_per_us, False) for v in returned]
        kind = "one left operand" if side == 0 else "one right operand"
        moving = self._readers_between(members)
        seeded = [op for op in moving if _draws_random_numbers(op)]
        if seeded:  # moving it after another draw would change the numbers each draws (eager's order is kept)
            remarks.emit(PASS, "merge-reorders-random", f"{len(members)} matmuls with {kind}: merging them would move "
                         f"{seeded[0].target.data} (it reads an earlier one's product) after the later ones' "  # type: ignore[attr-defined]
                         "random numbers; they stay apart", *members)
            return
        if not self._decide(kind + (" and row biases" if biases else ""), members, copies, returned=len(returned)):
            return
        other = self._cat_at(others, cat_dim, last)
        a, b = (shared, other) if side == 0 else (other, shared)
        ta, tb = tensor_type_of(a), tensor_type_of(b)
        product_t = TensorType([ta.dims[0], tb.dims[1]], ta.element_type)
        product = self._insert(F.ExternOp(MM, [a, b], None, [product_t]), last)
        if biases:
            bias = self._plain_cat([self._flat(bias, last) for bias in biases], 0, last)
            product = self._insert(F.PointwiseOp("add", [product, bias], product_t), last)
        pieces, start = [], sympy.Integer(0)
        for old in olds:
            t = tensor_type_of(old)
            pieces.append(self._insert(F.SliceOp(product, cat_dim, start, 1, TensorType(t.dims, t.element_type, product_t.layout)),
                                       last))
            start = start + t.dims[cat_dim]
        self._sink(moving, last)  # after the new ops: readers of earlier members' results follow them
        for old, piece in zip(olds, pieces, strict=True):
            _replace_with_view(old, piece, self.saved_from)
        if self.saved_from is not None:  # a saved output may now be a strided slice
            self.graph.declare_returned_types()
        for op in [*adds, *members]:
            Rewriter.erase_op(op)

    def _row_biases(self, members: Sequence[F.ExternOp], at: Operation) -> list[tuple[Operation, SSAValue]] | None:
        """Each member's (add, row bias) where every product's one reader adds one (``x @ W_i.t() + b_i``) and every
        bias is defined before ``at``."""
        biased: list[tuple[Operation, SSAValue]] = []
        for m in members:
            product = m.outputs[0]
            add = next(iter(product.uses)).operation if product.has_one_use() else None
            if not isinstance(add, F.PointwiseOp) or (found := biased_product(add)) is None or found[0] is not m:
                return None
            owner = found[1].owner
            if isinstance(owner, Operation) and not owner.is_before_in_block(at):
                return None
            biased.append((add, found[1]))
        return biased

    def _flat(self, bias: SSAValue, at: Operation) -> SSAValue:
        t = tensor_type_of(bias)
        if t.rank == 1:
            return bias
        return self._insert(F.ReshapeOp(bias, TensorType([t.dims[-1]], t.element_type)), at)

    @staticmethod
    def _readers_between(members: Sequence[F.ExternOp]) -> list[Operation]:
        """The ops between the first and the last member that read an earlier member's result (through other ops):
        they must move after the merged product."""
        tainted: set[SSAValue] = set(members[0].results)
        moving: list[Operation] = []
        op = members[0].next_op
        member_set = set(members)
        while op is not None and op is not members[-1]:
            if op in member_set:
                tainted.update(op.results)
            elif any(v in tainted for v in op.operands):
                tainted.update(op.results)
                moving.append(op)
            op = op.next_op
        return moving

    @staticmethod
    def _sink(moving: Sequence[Operation], last: Operation) -> None:
        for op in moving:
            op.detach()
            Rewriter.insert_op(op, InsertPoint.before(last))

    # ------------------------------------------------------------ sums of products

    def sums(self) -> None:
        for root in list(self.graph.block.ops):
            if root.parent is None or not _is_add(root) or _feeds_an_add(root):
                continue
            terms: list[SSAValue] = []
            _terms(root.results[0], terms, top=True)
            leaves = [(t, _mm_under_reshapes(t)) for t in terms]
            products = [(t, mm) for t, mm in leaves if mm is not None]
            by_shape: dict[tuple, list] = defaultdict(list)
            for t, mm in products:
                by_shape[(str(tensor_type_of(mm.outputs[0]).dims), str(tensor_type_of(mm.outputs[0]).element_type))].append((t, mm))
            group = max(by_shape.values(), key=len, default=[])
            if len(group) >= 2:
                self._merge_sum(root, terms, group)

    def _merge_sum(self, root: Operation, terms: list[SSAValue], group: list) -> None:
        members = [mm for _, mm in group]
        lefts, rights = [m.inputs[0] for m in members], [m.inputs[1] for m in members]
        copies = [self.copy_cost(lefts, 1, root), self.copy_cost(rights, 0, root)]
        stored = [tensor_type_of(m.outputs[0]) for m in members[1:]]
        if not self._decide("summed products", members, copies, stored):
            return
        a = self._cat_at(lefts, 1, root)
        b = self._cat_at(rights, 0, root)
        product_t = tensor_type_of(members[0].outputs[0])
        value = self._insert(F.ExternOp(MM, [a, b], None, [product_t]), root)
        out_t = tensor_type_of(root.results[0])
        if product_t.dims != out_t.dims:
            value = self._insert(F.ReshapeOp(value, TensorType(out_t.dims, out_t.element_type)), root)
        merged = {id(t) for t, _ in group}
        for t in terms:
            if id(t) not in merged:
                value = self._insert(F.PointwiseOp("add", [value, t], out_t), root)
        root.results[0].replace_all_uses_with(value)
        _erase_dead(root)


def _copied_on_reread(value: SSAValue, layout: Layout, saved_from: int | None) -> list[SSAValue]:
    """The values ``_reread`` will copy to their old layout once ``value`` is laid out as ``layout``: ``value`` where
    the graph returns it in eager's layout or a view cannot read it strided, and so on down its views."""
    copied: list[SSAValue] = []
    for use in value.uses:
        reading = _reading(use, layout, saved_from)
        if isinstance(reading, Layout):
            view = use.operation.results[0]
            if list(reading.strides) != list(tensor_type_of(view).layout):
                copied += _copied_on_reread(view, reading, saved_from)
        elif reading and value not in copied:
            copied.append(value)
    return copied


def _reading(use: Use, layout: Layout, saved_from: int | None) -> Layout | bool:
    """How ``use`` reads a value laid out as ``layout`` (what ``_reread`` and its dry run ``_copied_on_reread`` both
    ask): a view that can read it strided gives its own result's layout; True where it needs a copy in the old
    layout (a graph output, but one saved with static strides, or a view that cannot read it strided); False where
    it reads any layout (kernels and externs)."""
    user = use.operation
    if isinstance(user, F.VIEW_OPS):
        inner = view_layout(user, layout)
        return True if inner is None else inner
    return isinstance(user, F.OutputOp) and not _saved_strided(use, saved_from, layout.strides)


def _saved_strided(use: Use, saved_from: int | None, strides: Sequence[sympy.Expr]) -> bool:
    """Whether an output may keep a slice's ``strides``: static ones (AOTAutograd restrides a backward's inputs to
    integers only) of an output saved for the backward (from ``saved_from`` on) that no torch kernel but a matmul
    reads here.  The backward hands such a tensor to that kernel's backward (cuDNN
    attention's query, key and value), which copies operands that are not dense: on an H200, ViT-tiny's training
    step took 2313 µs with its strided q/k/v saved, 2206 with dense copies (36 aten copies more a step)."""
    if saved_from is None or use.index < saved_from or not all(isinstance(s, sympy.Integer) for s in strides):
        return False
    return not any(isinstance(u.operation, F.ExternOp) and u.operation.target.data not in MATMULS
                   for u in use.operation.operands[use.index].uses)


def _draws_random_numbers(op: Operation) -> bool:
    """An extern whose torch op is seeded (dropout's bernoulli, rand): where it runs among others decides its numbers."""
    if not isinstance(op, F.ExternOp):
        return False
    from fusec.dialects.extern_calls import resolve_target  # torch: only for graphs with externs to move

    try:
        target = resolve_target(op.target.data)
    except LookupError:
        return True  # unknown: assume the worst
    import torch

    return torch.Tag.nondeterministic_seeded in getattr(target, "tags", ())


def _is_add(op: Operation) -> bool:
    """A pointwise add of two tensors of its result's type (no broadcast, no type change)."""
    if not (isinstance(op, F.PointwiseOp) and op.fn.data == "add" and len(op.inputs) == 2):
        return False
    t = op.results[0].type
    return all(v.type == t for v in op.inputs) and isinstance(t, TensorType) and t.is_contiguous


def _feeds_an_add(op: Operation) -> bool:
    """Whether ``op``'s result is one term of a larger sum (its only reader an add of the same type)."""
    result = op.results[0]
    return result.has_one_use() and _is_add(next(iter(result.uses)).operation)


def _terms(v: SSAValue, out: list[SSAValue], top: bool = False) -> None:
    """The terms of a sum of adds: an add (the root, or one nothing else reads) splits into its inputs' terms."""
    op = v.owner
    if isinstance(op, Operation) and _is_add(op) and (top or v.has_one_use()):
        for x in op.operands:
            _terms(x, out)
    else:
        out.append(v)


def _mm_under_reshapes(v: SSAValue) -> F.ExternOp | None:
    """The matmul whose product ``v`` is, through reshapes that nothing else reads."""
    op = v.owner
    while isinstance(op, F.ReshapeOp) and v.has_one_use():
        v = op.input
        op = v.owner
    return op if _is_mm(op) and v.has_one_use() else None


def _erase_dead(op: Operation) -> None:
    """Erase ``op`` and, recursively, the producers of its operands that nothing reads any more."""
    producers = [v.owner for v in op.operands if isinstance(v.owner, Operation)]
    Rewriter.erase_op(op)
    for p in producers:
        if p.parent is not None and all(not r.uses for r in p.results) and not isinstance(p, F.OutputOp):
            _erase_dead(p)


def _replace_with_view(old: SSAValue, new: SSAValue, saved_from: int | None) -> None:
    """Make ``old``'s readers read ``new``: the same elements in another layout."""
    old_t = tensor_type_of(old)
    old.replace_all_uses_with(new)
    _reread(new, old_t, saved_from)


def _reread(value: SSAValue, written_for: TensorType, saved_from: int | None) -> None:
    """``value``'s readers were written for ``written_for``, the layout it had: views are retyped for the one it has
    now (their readers in turn, as channels-last retypes values); a graph output, or a view that cannot be one of
    it, reads a copy in the old layout -- but an output saved for the backward (from ``saved_from`` on) with static
    strides, which fusec.backend reports to AOTAutograd.  Kernels and externs read any layout."""
    t = tensor_type_of(value)
    if t == written_for:
        return
    copy: SSAValue | None = None
    for use in list(value.uses):
        reading = _reading(use, Layout(tuple(t.dims), tuple(t.layout), sympy.Integer(0)), saved_from)
        if isinstance(reading, Layout):
            before = tensor_type_of(use.operation.results[0])
            retyped = TensorType(before.dims, before.element_type, list(reading.strides))
            _reread(Rewriter.replace_value_with_new_type(use.operation.results[0], retyped), before, saved_from)
        elif reading:
            if copy is None:
                copy_op = F.PointwiseOp("identity", [value], written_for)
                Rewriter.insert_op(copy_op, InsertPoint.after(value.owner))  # type: ignore[arg-type]
                copy = copy_op.results[0]
            use.operation.operands[use.index] = copy


@dataclass(frozen=True)
class MergeMatmuls(ModulePass):
    """Matmuls sharing an operand, or summed, become one matmul on concatenated operands where the cost rule pays."""

    name = "merge-matmuls"

    when: str = "accelerator"
    size_hints: tuple[str, ...] = ()  # SYMBOL=INTEGER: the sizes the cost rule assumes for symbolic dims
    cost_rule: bool = True  # false: merge wherever legal (tests, experiments)

    def __post_init__(self) -> None:
        parse_size_hints(self.size_hints)
        check_when(self.when)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for graph in graphs_to_change(op, self.when):
            merger = _Merger(graph, resolve_size_hints(graph, parse_size_hints(self.size_hints)), self.cost_rule)
            merger.shared(0)  # projections of one input
            merger.shared(1)  # weight gradients from one input: their gradients' copy serves the sums below
            merger.sums()
