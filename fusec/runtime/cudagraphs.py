"""Replaying a compiled graph as a CUDA graph: one host call instead of one per launch.

``CudaGraphed(call, static=..., visible=...)`` wraps a graph's ``call(inputs) -> outputs``
(``options={"cudagraphs": True}``, or ``torch.compile(mode="reduce-overhead")``).  Per input
shape (each size of a ``dynamic=True`` graph gets its own graphs):

- the first call runs as it is: it compiles the kernels and shows what the graph returns;
- the second call records the launches once (``torch.cuda.graph``) and replays them;
  every later call replays.

What keeps a replay correct, whatever the caller does between calls:

- **inputs**: a *static* input (a parameter or buffer; in a backward graph, every saved tensor)
  is read where it was when recorded, and a recording is replayed only while each such input
  is still at that address; every other input is copied into a buffer the recording owns.
- **outputs** live in the recording's memory pool and are overwritten by its next replay, so a
  recording is replayed only when nothing outside it still holds one of its outputs (the
  storages' use counts); a held output (the loss of the last step, logits kept in a list) makes
  the next call record another instance, up to ``max_instances``, then run without a graph.
  Small outputs the user sees (a loss, a classifier's logits) are returned as copies, so holding
  them never pins a recording; gradients stay in the pool (autograd drops them at ``zero_grad``).
- an output that aliases an input is rebuilt on the caller's input, not on the copy; but one that a
  forward saves for its backward stays on the copy, the address the backward's recording reads.
- random numbers (dropout) are torch calls, whose CUDA generator advances on every replay.

Graphs that cannot be recorded (inputs or outputs off the GPU, a capture that fails) run
without one; a warning says so once per graph.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from fusec.base.progress import logger

SMALL_OUTPUT_BYTES = 64 * 1024  # a user-visible output this small is copied out rather than pinning its recording
MAX_INSTANCES = 3  # recordings per input shape: a held output makes the next call record another


class CudaRecorder:
    """Records ``call(args)`` as a CUDA graph: (replay, the outputs it writes)."""

    def unsupported(self, inputs: Sequence[torch.Tensor], outputs: Sequence) -> str | None:
        devices = {t.device for t in (*inputs, *outputs) if isinstance(t, torch.Tensor)}
        off = sorted({str(d) for d in devices if d.type != "cuda"})
        if off:
            return f"it has tensors on {', '.join(off)}"
        if not inputs:
            return "it takes no tensor"
        if any(not isinstance(t, torch.Tensor) for t in outputs):
            return "it returns a value that is not a tensor"
        return None

    def record(self, call, args: list[torch.Tensor], pinned: frozenset[int]):
        """(replay, the outputs it writes); ``replay(inputs)`` gets each call's inputs, which a CUDA graph ignores:
        it reads the ``pinned`` ones where they were recorded."""
        with torch.cuda.device(args[0].device):
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # on the recording's own buffers first: lazy init stays out of the capture
                call(list(args))
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                outputs = call(list(args))
        return lambda inputs: graph.replay(), list(outputs)


def _use_count(storage) -> int:
    return torch._C._storage_Use_Count(storage._cdata)


@dataclass
class _Recording:
    """One recorded instance: where its static inputs were, the buffers its other inputs are copied into,
    and how each of its outputs is handed out."""

    replay: Callable[[Sequence[torch.Tensor]], None]
    pinned: tuple[tuple[int, int], ...]  # (input, data_ptr) read in place
    copied: tuple[tuple[int, torch.Tensor], ...]  # (input, the recording's buffer)
    outputs: list[torch.Tensor]
    handout: list[tuple]  # per output: ("pool",) | ("copy",) | ("input", i, size, stride, offset from the input's)
    pool: list = field(default_factory=list)  # (storage, use count when only the recording holds it)

    def fits(self, inputs: Sequence[torch.Tensor]) -> bool:
        return all(inputs[i].data_ptr() == ptr for i, ptr in self.pinned) and \
            all(_use_count(s) <= base for s, base in self.pool)

    def run(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        for i, buffer in self.copied:
            buffer.copy_(inputs[i])
        self.replay(inputs)
        out = []
        for t, how in zip(self.outputs, self.handout, strict=True):
            if how[0] == "pool":
                out.append(t.detach())  # a new tensor on the pool's storage: its use count says it is held
            elif how[0] == "copy":
                out.append(t.clone())
            else:
                src = inputs[how[1]]
                out.append(src.as_strided(how[2], how[3], src.storage_offset() + how[4]))
        return out


class CudaGraphed:
    """``call`` replayed as CUDA graphs (see the module's doc); ``stats`` counts what each call did."""

    def __init__(self, call: Callable[[list[torch.Tensor]], list[torch.Tensor]], name: str, *,
                 static: frozenset[int] = frozenset(), visible: frozenset[int] | None = None,
                 max_instances: int = MAX_INSTANCES, recorder=None):
        self.call = call
        self.name = name
        self.static = static  # inputs read in place (parameters, buffers, a backward's saved tensors)
        self.visible = visible  # outputs the user sees and may hold (None: all); a forward's others are saved for its backward
        self.max_instances = max_instances
        self.recorder = recorder or CudaRecorder()
        self.stats = {"plain": 0, "recorded": 0, "replayed": 0}
        self._shapes: dict[tuple, list[_Recording] | str] = {}
        self._warned: set[str] = set()

    def __getattr__(self, name):  # the wrapped graph's kernels, source, ... (its report and tests read them)
        return getattr(self.__dict__["call"], name)

    def __call__(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        key = tuple((tuple(t.shape), t.stride(), t.dtype, t.device) for t in inputs)
        state = self._shapes.get(key)
        if state is None:  # the first call of a shape: as it is (it compiles, and shows what the graph returns)
            outputs = self.call(list(inputs))
            reason = self.recorder.unsupported(inputs, outputs)
            self._shapes[key] = [] if reason is None else self._decline(reason)
            self.stats["plain"] += 1
            return outputs
        if isinstance(state, str):
            self.stats["plain"] += 1
            return self.call(list(inputs))
        for recording in state:
            if recording.fits(inputs):
                self.stats["replayed"] += 1
                return recording.run(inputs)
        if len(state) >= self.max_instances:
            self._decline(f"{len(state)} recordings of this shape are all held (outputs still alive, or inputs "
                          "read in place moved); such calls run without one")
            self.stats["plain"] += 1
            return self.call(list(inputs))
        try:
            recording = self._record(inputs)
        except Exception as e:  # noqa: BLE001 -- any capture failure: the graph still runs, without recording
            self._shapes[key] = self._decline(f"recording failed ({type(e).__name__}: {str(e)[:200]})")
            self.stats["plain"] += 1
            return self.call(list(inputs))
        state.append(recording)
        self.stats["recorded"] += 1
        return recording.run(inputs)

    def _record(self, inputs: Sequence[torch.Tensor]) -> _Recording:
        pinned, copied, args = [], [], []
        for i, t in enumerate(inputs):
            if i in self.static or isinstance(t, torch.nn.Parameter):
                pinned.append((i, t.data_ptr()))
                args.append(t)
            else:
                buffer = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)
                buffer.copy_(t)
                copied.append((i, buffer))
                args.append(buffer)
        replay, outputs = self.recorder.record(self.call, args, frozenset(i for i, _ in pinned))
        own = {t.untyped_storage().data_ptr(): (i, t) for i, t in enumerate(args) if t.numel()}  # storage -> its input
        handout: list[tuple] = []
        storages: dict[int, torch.UntypedStorage] = {}
        copies = {i for i, _ in copied}
        for n, t in enumerate(outputs):
            visible = self.visible is None or n in self.visible
            base = own.get(t.untyped_storage().data_ptr())
            if base is not None and (visible or base[0] not in copies):  # a view of an input: on the caller's tensor
                i, b = base
                handout.append(("input", i, tuple(t.shape), t.stride(), t.storage_offset() - b.storage_offset()))
            elif base is None and visible and t.numel() * t.element_size() <= SMALL_OUTPUT_BYTES:
                handout.append(("copy",))
            else:  # in the pool, or a saved view of a copied input: where the backward's recording will read it
                handout.append(("pool",))
                storages.setdefault(t.untyped_storage().data_ptr(), t.untyped_storage())
        recording = _Recording(replay, tuple(pinned), tuple(copied), outputs, handout)
        recording.pool = [(s, _use_count(s)) for s in storages.values()]
        logger.debug("@%s: recorded a CUDA graph (%d inputs read in place, %d copied, %d outputs)",
                     self.name, len(pinned), len(copied), len(outputs))
        return recording

    def _decline(self, reason: str) -> str:
        if reason not in self._warned:
            self._warned.add(reason)
            warnings.warn(f"fusec: graph {self.name} runs without CUDA graphs: {reason}", stacklevel=3)
        return reason
