"""Timing independent kernels launched one by one and as one combo kernel (combo-grouping's ``benchmark``).

Inputs are random tensors sized by the size hints, on the GPU; each way is timed
with ``triton.testing.do_bench``.  ``device``, ``interpret`` and ``timer`` can be
changed so the launches themselves are testable on a CPU under Triton's interpreter.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from xdsl.ir import SSAValue

from fusec.analysis.cost_model import SizeHints
from fusec.base import shapes
from fusec.dialects import fusec as F
from fusec.dialects.attributes import tensor_type_of
from fusec.lowering.combo_kernel import lower_kernels_as_combo
from fusec.lowering.triton_kernel import TritonKernel, lower_kernel

Timer = Callable[[Callable[[], None]], float]  # runs a launch function, gives milliseconds


def _do_bench(fn: Callable[[], None]) -> float:
    import triton.testing

    return triton.testing.do_bench(fn)


def _tensor(t: F.TensorType, env: dict[str, int], device: str, gen: torch.Generator) -> torch.Tensor:
    size = [shapes.evaluate(d, env) for d in t.dims]
    stride = [shapes.evaluate(s, env) for s in t.layout]
    out = torch.empty_strided(size, stride, dtype=F.torch_dtype(t), device=device)
    if out.dtype.is_floating_point:
        out.copy_(torch.randn(size, generator=gen).to(out.dtype))
    else:
        out.copy_(torch.randint(0, 2, size, generator=gen).to(out.dtype))
    return out


def launch_kernel(tk: TritonKernel, fn, buffers: Sequence[torch.Tensor], env: dict[str, int]) -> None:
    """One kernel alone, as the launcher would launch it."""
    sizes = dict(tk.size_args)
    x = shapes.evaluate(sizes["xnumel"], env)
    r = shapes.evaluate(sizes["rnumel"], env) if "rnumel" in sizes else 1
    cfg = tk.config(x, r)
    blocks = {"XBLOCK": cfg.xblock, **({"RBLOCK": cfg.rblock} if "rnumel" in sizes else {})}
    grid = tk.programs(x, r)
    if grid:
        fn[(grid,)](*buffers, *[shapes.evaluate(e, env) for _, e in tk.size_args], **blocks, num_warps=cfg.num_warps)


def benchmark_launches(kernels: Sequence[F.KernelOp], hints: SizeHints, device: str = "cuda", interpret: bool = False):
    """(launch one by one, launch as a combo, the buffers by graph value) on random inputs sized by ``hints``."""
    from fusec.runtime.kernel_cache import load_kernel_module

    env = dict(hints.values)
    gen = torch.Generator().manual_seed(0)
    buffers: dict[SSAValue, torch.Tensor] = {}
    for k in kernels:
        for v in list(k.inputs) + list(k.results):
            if v not in buffers:
                buffers[v] = _tensor(tensor_type_of(v), env, device, gen)
    singles = [lower_kernel(k, env) for k in kernels]
    fns = [getattr(load_kernel_module(tk.source, interpret), tk.name) for tk in singles]
    combo = lower_kernels_as_combo("fusec_combo_benchmark", kernels, env)
    combo_fn = getattr(load_kernel_module(combo.source, interpret), combo.name)

    def separate() -> None:
        for k, tk, fn in zip(kernels, singles, fns, strict=True):
            launch_kernel(tk, fn, [buffers[v] for v in list(k.inputs) + list(k.results)], env)

    def together() -> None:
        combo.launch(combo_fn, [buffers[v] for v in combo.pointers], env)

    return separate, together, buffers


def time_separate_and_combo(kernels: Sequence[F.KernelOp], hints: SizeHints, *, device: str = "cuda",
                            interpret: bool = False, timer: Timer = _do_bench) -> tuple[float, float]:
    """(microseconds launching ``kernels`` one after another, microseconds as one combo kernel).

    Under ``torch.compile`` the pipeline runs inside AOTAutograd's fake-tensor mode:
    real buffers (and real launches) need that mode lifted while timing.
    """
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with unset_fake_temporarily():
        separate, together, _ = benchmark_launches(kernels, hints, device, interpret)
        return timer(separate) * 1000.0, timer(together) * 1000.0
