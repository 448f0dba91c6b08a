"""Where an op came from, for error messages: the FX node and the user's source line, or a place in an IR file.

The importer gives each op ``loc("mul_3"("model.py":12:9))`` (a ``NameLoc`` around a
``FileLineColLoc``); ``fusec-opt`` gives each op it parses the place of its text.  Ops a
pass creates may have no location: they are described by their nearest located parent.
A failure deep inside a pass or the lowering is placed by ``op_in_flight``: the innermost
op the failing code was handling (a local variable of the frames the exception went through).
"""

from __future__ import annotations

import linecache
from types import TracebackType

from xdsl.dialects.builtin import FileLineColLoc, ModuleOp, NameLoc
from xdsl.ir import Operation


def located(op: Operation | None) -> Operation | None:
    """``op`` or its nearest parent whose location is known (None when none is)."""
    while op is not None and not isinstance(op, ModuleOp):
        if isinstance(op.location, (FileLineColLoc, NameLoc)):
            return op
        op = op.parent_op()
    return None


def location_of(op: Operation | None):
    """The location of ``op`` or of its nearest located parent (None when none has one)."""
    where = located(op)
    return where.location if where is not None else None


def location_text(loc) -> str | None:
    """``file:line:col``, ``FX node 'mul_3' at file:line:col`` or ``FX node 'mul_3'``; None for an unknown location."""
    if isinstance(loc, FileLineColLoc):
        return f"{loc.filename.data}:{loc.line.data}:{loc.column.data}"
    if isinstance(loc, NameLoc):
        inner = location_text(loc.location)
        return f"FX node '{loc.desc.data}'" + (f" at {inner}" if inner else "")
    return None


def file_position(loc) -> FileLineColLoc | None:
    """The file position inside ``loc``, if it has one."""
    if isinstance(loc, NameLoc):
        return file_position(loc.location)
    return loc if isinstance(loc, FileLineColLoc) else None


def source_excerpt(loc, indent: str | None = None) -> str:
    """The source line ``loc`` points at with a caret under its column ("" when the file cannot be read).

    By default a line of an IR file shows as it is (as xDSL shows parse errors), a user's Python line indented
    under the message (as Python's tracebacks show it).
    """
    pos = file_position(loc)
    indent = ("    " if isinstance(loc, NameLoc) else "") if indent is None else indent
    if pos is None:
        return ""
    line = linecache.getline(pos.filename.data, pos.line.data).rstrip("\n")
    if not line.strip():
        return ""
    caret = f"\n{indent}{' ' * (pos.column.data - 1)}^" if 0 < pos.column.data <= len(line) + 1 else ""
    return f"{indent}{line}{caret}"


def describe(op: Operation) -> str:
    """``'fusec.pointwise' op (FX node 'mul_3' at model.py:12:9)``, naming the located parent where ``op`` has no location."""
    where = located(op)
    if where is None:
        return f"'{op.name}' op"
    text = location_text(where.location)
    if where is op:
        return f"'{op.name}' op ({text})"
    return f"'{op.name}' op (in '{where.name}' op, {text})"


def op_in_flight(tb: TracebackType | None) -> Operation | None:
    """The op held by the innermost frame of ``tb`` that holds one with a known (or inherited) location."""
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames):
        for value in frame.f_locals.values():
            if isinstance(value, Operation) and not isinstance(value, ModuleOp) and located(value) is not None:
                return value
    return None

