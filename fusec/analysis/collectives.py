"""PyTorch's functional collectives as ordered ``fusec.extern`` ops.

The importer marks each ``_c10d_functional`` extern with a ``collective`` attribute:
``"issue"`` for a collective (all_reduce, all_gather_into_tensor, ..., their in-place
and coalesced forms) and ``"wait"`` for ``wait_tensor``::

    %4 = fusec.extern "_c10d_functional.all_reduce.default"(%3, "sum", "0") {collective = "issue"} : ...
    %5 = fusec.extern "_c10d_functional.wait_tensor.default"(%4) {collective = "wait"} : ...

Marked ops are side effects with an order: every rank must issue them in the graph's
order, so no pass moves one past another, and no combo spans one.  ``wait_tensor``
returns its input buffer (an alias its schema does not declare): its result is the
collective's buffer, and the collective's inputs stay alive until the wait.
"""

from __future__ import annotations

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Operation, SSAValue

from fusec.dialects import fusec as F

NAMESPACE = "_c10d_functional"
ATTR = "collective"
ISSUE, WAIT = "issue", "wait"
WAIT_OPS = frozenset({"wait_tensor"})


def kind_of_target(namespace: str, opname: str) -> str | None:
    """``"issue"``/``"wait"`` for a functional collective's aten-style target, else None."""
    if namespace != NAMESPACE:
        return None
    return WAIT if opname in WAIT_OPS else ISSUE


def mark(op: F.ExternOp, kind: str) -> None:
    op.attributes[ATTR] = StringAttr(kind)


def kind(op: Operation) -> str | None:
    """The op's collective kind, or None for any other op."""
    if not isinstance(op, F.ExternOp):
        return None
    attr = op.attributes.get(ATTR)
    return attr.data if isinstance(attr, StringAttr) else None


def is_ordered(op: Operation) -> bool:
    """A collective or a wait: its position relative to other such ops is fixed."""
    return kind(op) is not None


def issuer(wait: Operation) -> F.ExternOp | None:
    """The collective whose buffer a wait waits on (None when the input is no collective's result)."""
    if kind(wait) != WAIT or not wait.operands:
        return None
    owner = wait.operands[0].owner
    return owner if isinstance(owner, F.ExternOp) and kind(owner) == ISSUE else None


def aliased_input(value: SSAValue) -> SSAValue | None:
    """The buffer a wait's result is (its input), else None."""
    op = value.owner
    if isinstance(op, Operation) and kind(op) == WAIT and op.operands:
        return op.operands[0]
    return None


def held_until(op: Operation) -> list[SSAValue]:
    """Values an op keeps alive besides its operands: a wait holds its collective's inputs."""
    source = issuer(op)
    return list(source.operands) if source is not None else []
