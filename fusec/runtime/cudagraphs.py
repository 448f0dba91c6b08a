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
without one, as do shapes past the first ``max_shapes`` of a ``dynamic=True`` graph (each
recording keeps a memory pool of its own); a warning says so once per graph and reason.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import torch

from fusec.base.progress import logger
from fusec.lowering.launcher import reinterpret_tensor

SMALL_OUTPUT_BYTES = 64 * 1024  # a user-visible output this small is copied out rather than pinning its recording
MAX_INSTANCES = 3  # recordings per input shape: a held output makes the next call record another
MAX_SHAPES = 16  # input shapes with recordings (each holds its own memory pool); later shapes run without


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


_storage_use_count = torch._C._storage_Use_Count
_reinterpret = reinterpret_tensor()


def _use_count(storage) -> int:
    return _storage_use_count(storage._cdata)


class _Recording:
    """One recorded instance: where its static inputs were, the buffers its other inputs are copied into, and how
    each of its outputs is handed out (per call: list operations and one C call per input or output, no more)."""

    def __init__(self, replay, pinned: list[tuple[int, int]], copied: list[tuple[int, torch.Tensor]],
                 outputs: list[torch.Tensor], pooled: list[int], copies: list[int], aliases: list[tuple]):
        self.replay = replay
        self.pinned_at = [i for i, _ in pinned]  # inputs read in place, and where
        self.pinned_ptrs = [ptr for _, ptr in pinned]
        self.copied_at = [i for i, _ in copied]  # inputs copied, and into which buffers
        self.buffers = [b for _, b in copied]
        self.outputs = outputs
        self.pooled = pooled  # outputs handed out as new tensors on the pool's storage
        self.copies = copies  # outputs handed out as copies
        self.aliases = aliases  # (output, input, size, stride, offset from the input's): views of the caller's input
        storages = {outputs[n].untyped_storage().data_ptr(): outputs[n].untyped_storage() for n in pooled}
        self.storages = list(storages.values())  # kept: their use counts say whether anyone else holds them
        self.cdatas = [s._cdata for s in self.storages]
        self.bases = [_use_count(s) for s in self.storages]

    def fits(self, inputs: Sequence[torch.Tensor]) -> bool:
        return [inputs[i].data_ptr() for i in self.pinned_at] == self.pinned_ptrs and \
            [_storage_use_count(c) for c in self.cdatas] == self.bases

    def run(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        if self.buffers:
            torch._foreach_copy_(self.buffers, [inputs[i] for i in self.copied_at])
        self.replay(inputs)
        out = list(self.outputs)
        for n in self.pooled:
            out[n] = out[n].detach()  # a new tensor on the pool's storage: the storage's use count says it is held
        for n in self.copies:
            out[n] = out[n].clone()
        for n, i, size, stride, offset in self.aliases:
            out[n] = _reinterpret(inputs[i], size, stride, offset)
        return out


class CudaGraphed:
    """``call`` replayed as CUDA graphs (see the module's doc); ``stats`` counts what each call did."""

    def __init__(self, call: Callable[[list[torch.Tensor]], list[torch.Tensor]], name: str, *,
                 static: frozenset[int] = frozenset(), visible: frozenset[int] | None = None,
                 shapes_vary: bool = True, max_instances: int = MAX_INSTANCES, max_shapes: int = MAX_SHAPES,
                 recorder=None):
        self.call = call
        self.name = name
        self.static = static  # inputs read in place (parameters, buffers, a backward's saved tensors)
        self.visible = visible  # outputs the user sees and may hold (None: all); a forward's others are saved for its backward
        self.shapes_vary = shapes_vary  # False: one shape only (no size symbol), so no key to compute per call
        self.max_instances = max_instances
        self.max_shapes = max_shapes
        self.recorder = recorder or CudaRecorder()
        self.stats = {"plain": 0, "recorded": 0, "replayed": 0}
        self._shapes: dict[tuple | None, list[_Recording] | str] = {}
        self._warned: set[str] = set()

    def __call__(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        # Dtypes and devices are the graph's (Dynamo's guards); copied inputs may come in any layout (the copy
        # takes it), and inputs read in place are at the address they were recorded with: only sizes vary.
        key = tuple([t.shape for t in inputs]) if self.shapes_vary else None
        state = self._shapes.get(key)
        if state is None:  # the first call of a shape: as it is (it compiles, and shows what the graph returns)
            outputs = self.call(list(inputs))
            reason = self.recorder.unsupported(inputs, outputs)
            if reason is None and sum(isinstance(v, list) for v in self._shapes.values()) >= self.max_shapes:
                reason = f"more than {self.max_shapes} input shapes (each recording holds memory of its own)"
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
        copied_at = {i for i, _ in copied}
        pooled: list[int] = []
        copies: list[int] = []
        aliases: list[tuple] = []
        for n, t in enumerate(outputs):
            visible = self.visible is None or n in self.visible
            base = own.get(t.untyped_storage().data_ptr())
            if base is not None and (visible or base[0] not in copied_at):  # a view of an input: on the caller's
                i, b = base
                aliases.append((n, i, tuple(t.shape), t.stride(), t.storage_offset() - b.storage_offset()))
            elif base is None and visible and t.numel() * t.element_size() <= SMALL_OUTPUT_BYTES:
                copies.append(n)
            else:  # in the pool, or a saved view of a copied input: where the backward's recording will read it
                pooled.append(n)
        recording = _Recording(replay, pinned, copied, outputs, pooled, copies, aliases)
        logger.debug("@%s: recorded a CUDA graph (%d inputs read in place, %d copied, %d outputs)",
                     self.name, len(pinned), len(copied), len(outputs))
        return recording

    def _decline(self, reason: str) -> str:
        if reason not in self._warned:
            self._warned.add(reason)
            warnings.warn(f"fusec: graph {self.name} runs without CUDA graphs: {reason}", stacklevel=3)
        return reason
