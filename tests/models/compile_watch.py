"""What ``backend="fusec"`` did while a block ran: the graphs it compiled, those that ran with torch, the externs.

    with watch_compiles() as log:
        compiled(x)
    log.assert_whole()            # no graph fell back to "runs with torch"
    assert log.count("inference") == 1

The whole-graph fallback is ``fusec.backend._eager`` (the importer raised
``UnsupportedGraph``); a compiled graph that does match eager would hide it, so
model tests assert it never happened.  Graph counts tell recompilations apart
from reuse of one compiled artifact (``dynamic=True`` with a second size).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from dataclasses import dataclass, field
from unittest import mock

import fusec.backend as backend


@dataclass
class CompileLog:
    graphs: Counter = field(default_factory=Counter)  # graph kind (forward, backward, inference) -> times compiled
    eager: list[str] = field(default_factory=list)  # "graph name: reason" of each graph that ran with torch
    externs: list[str] = field(default_factory=list)  # extern targets the importer fell back to (with a remark)

    def count(self, kind: str | None = None) -> int:
        return sum(self.graphs.values()) if kind is None else self.graphs[kind]

    def assert_whole(self) -> None:
        assert self.count() > 0, "backend='fusec' compiled no graph"
        assert not self.eager, "graphs ran with torch instead of fusec:\n" + "\n".join(self.eager)


@contextlib.contextmanager
def watch_compiles():
    """Records every graph ``fusec.backend.compile_graph`` sees while the block runs (module globals, patched)."""
    log = CompileLog()
    compile_graph, eager, import_graph = backend.compile_graph, backend._eager, backend.import_graph

    def counted(gm, example_inputs, *, kind, options, **more):
        log.graphs[kind] += 1
        return compile_graph(gm, example_inputs, kind=kind, options=options, **more)

    def fell_back(gm, name, reason, dump):
        log.eager.append(f"{name}: {reason}")
        return eager(gm, name, reason, dump)

    def imported(*args, **kwargs):
        module, info = import_graph(*args, **kwargs)
        log.externs += info.externs
        return module, info

    with (mock.patch.object(backend, "compile_graph", counted), mock.patch.object(backend, "_eager", fell_back),
          mock.patch.object(backend, "import_graph", imported)):
        yield log
