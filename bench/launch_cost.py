"""Host time of one kernel launch (GPU): Triton's ``compiled.run``, fusec's ``KernelRunner.launch``, and the runner
as it was before 124c726 (a generic key, every launch through Triton's Python ``CudaLauncher.__call__``).

    python bench/launch_cost.py

Two small kernels (8 pointers and 2 runtime ints; 20 pointers and 4 ints), 20,000 launches each, best of 5 rounds;
checks that a launch through the runner computes what Triton's own launch did.
"""

from __future__ import annotations

import functools
import time

import torch
import triton
import triton.language as tl

from fusec.runtime import kernel_runner
from fusec.runtime.kernel_runner import KernelRunner, int_class


class RunnerBefore(KernelRunner):
    """KernelRunner.launch before 124c726."""

    __slots__ = ()

    def launch(self, grid, num_warps, *args):
        key = (num_warps, *[args[i].data_ptr() % 16 == 0 for i in self.checked],
               *[int_class(args[i]) for i in self.ints], *[args[i] for i in self.chosen])
        entry = self.compiled.get(key)
        if entry is None or kernel_runner._hooked():
            compiled = self.kernel[(grid,)](*args, num_warps=num_warps)
            self.compiled[key] = (compiled.run, compiled.function, compiled.packed_metadata)
            return
        run, function, metadata = entry
        device, stream = kernel_runner._current()
        run(grid, 1, 1, stream(device()), function, metadata, None, None, None, *args)


@triton.jit
def add8(a0, a1, a2, a3, a4, a5, a6, a7, n, m, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(a7 + i, tl.load(a0 + i, mask=i < n) + tl.load(a1 + i, mask=i < n), mask=i < n)


@triton.jit
def add20(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19,
          n, m, p, q, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(a19 + i, tl.load(a0 + i, mask=i < n) + tl.load(a1 + i, mask=i < n), mask=i < n)


def best_us(fn, launches: int = 20000) -> float:
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(launches // 5):
            fn()
        best = min(best, (time.perf_counter() - start) / (launches // 5))
        torch.cuda.synchronize()
    return best * 1e6


def main() -> None:
    rows = []
    n = 4096
    grid = n // 128
    device, stream = torch._C._cuda_getDevice, torch._C._cuda_getCurrentRawStream
    for kernel, pointers, ints in ((add8, 8, 2), (add20, 20, 4)):
        tensors = [torch.randn(n, device="cuda") for _ in range(pointers)]
        args = (*tensors, n, *[7] * (ints - 1), 128)
        compiled = kernel[(grid,)](*args, num_warps=4)
        run, function, metadata = compiled.run, compiled.function, compiled.packed_metadata
        positions = tuple(range(pointers, pointers + ints))
        before = RunnerBefore(kernel, False, checked=(0,), ints=positions)
        after = KernelRunner(kernel, False, checked=(0,), ints=positions)
        before.launch(grid, 4, *args)
        after.launch(grid, 4, *args)
        direct = all(entry[3] is not None for entry in after.compiled.values())
        label = f"{pointers} pointers, {ints} ints"

        def triton_run(run=run, function=function, metadata=metadata, args=args):  # what the runner adds to: the stream
            run(grid, 1, 1, stream(device()), function, metadata, None, None, None, *args)

        rows.append((f"{label}: compiled.run", best_us(triton_run)))
        rows.append((f"{label}: KernelRunner before", best_us(functools.partial(before.launch, grid, 4, *args))))
        rows.append((f"{label}: KernelRunner (C launch direct: {direct})",
                     best_us(functools.partial(after.launch, grid, 4, *args))))
        want = tensors[-1].clone()
        tensors[-1].zero_()
        after.launch(grid, 4, *args)
        torch.cuda.synchronize()
        assert torch.equal(want, tensors[-1]), label
    for label, us in rows:
        print(f"{label:55s} {us:7.2f} us")


if __name__ == "__main__":
    main()
