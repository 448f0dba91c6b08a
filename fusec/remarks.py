"""Remarks: why a pass declined a merge, with a stable reason code.

A pass calls ``emit(...)``; whoever runs the pipeline wraps it in ``collect()``
and decides where remarks go (``fusec-opt --remarks``, the dump folder, the
``expect-fused`` check).  Outside ``collect()`` remarks are dropped.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field

from xdsl.ir import Operation


@dataclass(frozen=True)
class Remark:
    pass_name: str
    code: str  # stable, e.g. "domain-mismatch", "extern-consumer", "limit"
    message: str  # the numbers behind it, e.g. "[s0, 512] vs [512, s0]"
    subjects: tuple[str, ...] = ()  # kernel names or op descriptions it is about
    data: dict = field(default_factory=dict)

    def __str__(self) -> str:
        about = f" [{', '.join(self.subjects)}]" if self.subjects else ""
        return f"remark: {self.pass_name}: {self.code}: {self.message}{about}"


@dataclass
class RemarkLog:
    remarks: list[Remark] = field(default_factory=list)

    def text(self) -> str:
        return "".join(f"{r}\n" for r in self.remarks)

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
    return f"@{sym.data}" if sym is not None else op.name


def emit(pass_name: str, code: str, message: str, *subjects: Operation | str, **data) -> None:
    log = _current.get()
    if log is not None:
        names = tuple(s if isinstance(s, str) else describe(s) for s in subjects)
        log.remarks.append(Remark(pass_name, code, message, names, data))


def current() -> RemarkLog | None:
    """The log that ``collect()`` is filling now, if any (for checks that report remarks so far)."""
    return _current.get()
