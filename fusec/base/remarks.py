"""Remarks: why a pass declined a merge, with a stable reason code.

A pass calls ``emit(...)``; whoever runs the pipeline wraps it in ``collect()``
and decides where remarks go (``fusec-opt --remarks``, the dump folder, the
``expect-fused`` check).  Outside ``collect()`` remarks are dropped.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Operation


@dataclass(frozen=True)
class Remark:
    pass_name: str
    code: str  # stable, e.g. "domain-mismatch", "extern-consumer", "limit"
    message: str  # the numbers behind it, e.g. "[s0, 512] vs [512, s0]"
    subjects: tuple[str, ...] = ()  # kernel names or op descriptions it is about
    data: dict = field(default_factory=dict)
    superseded: bool = False  # every kernel (or graph) it names was merged away by a later pass

    def __str__(self) -> str:
        about = f" [{', '.join(self.subjects)}]" if self.subjects else ""
        return f"remark: {self.pass_name}: {self.code}: {self.message}{about}"

    @property
    def symbols(self) -> tuple[str, ...]:
        """The ``@name``s of the kernels, combos or graphs it names."""
        return tuple(s for s in self.subjects if s.startswith("@"))


@dataclass
class RemarkLog:
    remarks: list[Remark] = field(default_factory=list)

    @property
    def active(self) -> list[Remark]:
        """The remarks about what the final IR still holds."""
        return [r for r in self.remarks if not r.superseded]

    def settle(self, symbols: set[str]) -> None:
        """Mark superseded the remarks all of whose kernels are gone from the final IR (``symbols``: the
        ``@name``s of the kernels, combos and graphs it holds).

        A pass declines a merge that a later pass makes another way (vertical-fusion
        refuses a pointwise producer whose domain differs from its reduction consumer;
        reduction-fusion then fuses it as a prologue): the remark no longer explains
        any boundary of the result.
        """
        self.remarks = [dataclasses.replace(r, superseded=True) if r.symbols and not set(r.symbols) & symbols else r
                        for r in self.remarks]

    def text(self) -> str:
        """Active remarks, then the superseded ones under a heading (they explain the passes, not the result)."""
        lines = [f"{r}\n" for r in self.active]
        old = [r for r in self.remarks if r.superseded]
        if old:
            lines.append(f"// {len(old)} superseded remark(s): their kernels were merged by a later pass\n")
            lines += [f"// {r}\n" for r in old]
        return "".join(lines)

    def json(self) -> str:
        return json.dumps([asdict(r) for r in self.remarks], indent=1)


_current: contextvars.ContextVar[RemarkLog | None] = contextvars.ContextVar("fusec_remarks", default=None)


@contextlib.contextmanager
def collect() -> Iterator[RemarkLog]:
    log = RemarkLog()
    token = _current.set(log)
    try:
        yield log
    finally:
        _current.reset(token)


def describe(op: Operation) -> str:
    """A short name for an op in a remark: a kernel's symbol, else its op name."""
    sym = op.properties.get("sym_name")
    return f"@{sym.data}" if isinstance(sym, StringAttr) else op.name


def emit(pass_name: str, code: str, message: str, *subjects: Operation | str, **data) -> None:
    log = _current.get()
    if log is not None:
        names = tuple(s if isinstance(s, str) else describe(s) for s in subjects)
        log.remarks.append(Remark(pass_name, code, message, names, data))


def current() -> RemarkLog | None:
    """The log that ``collect()`` is filling now, if any (for checks that report remarks so far)."""
    return _current.get()
