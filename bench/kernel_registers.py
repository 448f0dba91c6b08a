"""Registers and spills of every kernel in an IR file, compiled by Triton for sm_90 on the CPU (no GPU needed).

    python bench/kernel_registers.py DUMP/final.mlir [--arch 90]

Reads IR after ``schedule-kernels`` with static sizes (a dump's ``final.mlir``), lowers each non-matmul kernel
(combo members alone), compiles it with Triton's own ptxas at the launch configuration the heuristics give its
sizes, and prints ptxas's registers and stack (spill) bytes beside ``fusec.analysis.register_pressure``'s
estimate (registers an element times elements a thread).  How the register budget was checked (2026-11-27):
Llama's rotary kernel at 64x64 tiles of 4 warps compiled to 255 registers and 144 bytes of stack.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import warnings

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from fusec.analysis.register_pressure import registers_per_element
from fusec.dialects import fusec as F
from fusec.lowering.triton_kernel import lower_kernel
from fusec.pipeline import parse_module
from fusec.registry import make_context

POINTERS = {"bf16": "*bf16", "f32": "*fp32", "f16": "*fp16", "f64": "*fp64", "i64": "*i64", "i32": "*i32",
            "i1": "*i1", "i8": "*i8", "ui8": "*u8"}


def usage(kernel: F.KernelOp, arch: int) -> tuple[int, int, object]:
    """(registers, stack bytes, launch config) of ``kernel`` at its static sizes."""
    lowered = lower_kernel(kernel)
    folder = tempfile.mkdtemp()
    path = os.path.join(folder, f"{lowered.name}.py")
    with open(path, "w") as f:
        f.write(lowered.source)
    spec = importlib.util.spec_from_file_location(lowered.name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, lowered.name)
    dims = [int(d) for d in kernel.domain_exprs]
    cfg = lowered.config(dims[0], dims[1] if len(dims) > 1 else 1)
    buffers = iter(str(t.element_type) for t in [v.type for v in kernel.inputs] + [r.type for r in kernel.outputs])
    sizes = {name for name, _ in lowered.size_args}
    signature, constants = {}, {}
    for name, param in zip(fn.arg_names, fn.params, strict=True):
        if param.is_constexpr:
            constants[name] = cfg.xblock if name == "XBLOCK" else cfg.rblock
            signature[name] = "constexpr"
        else:
            signature[name] = "i32" if name in sizes else POINTERS[next(buffers)]
    compiled = triton.compile(ASTSource(fn, signature, constants), target=GPUTarget("cuda", arch, 32),
                              options={"num_warps": cfg.num_warps})
    tools = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
        cubin.write(compiled.asm["cubin"])
        cubin.flush()
        out = subprocess.run([os.path.join(tools, "cuobjdump"), "-res-usage", cubin.name], capture_output=True,
                             text=True, check=True).stdout
    found = re.search(r"REG:(\d+).*?STACK:(\d+)", out)
    assert found is not None, out
    return int(found.group(1)), int(found.group(2)), cfg


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("ir")
    p.add_argument("--arch", type=int, default=90)
    args = p.parse_args()
    warnings.filterwarnings("ignore")
    with open(args.ir) as f:
        module = parse_module(make_context(), f.read(), args.ir)
    for kernel in module.walk():
        if not isinstance(kernel, F.KernelOp) or kernel.is_matmul:
            continue
        name = kernel.sym_name.data
        try:
            registers, stack, cfg = usage(kernel, args.arch)
        except Exception as e:  # a symbolic domain, a dtype the table lacks: say so and go on
            print(f"{name}: skipped ({type(e).__name__}: {str(e)[:80]})", file=sys.stderr)
            continue
        per_element = registers_per_element(kernel)
        held = max(1, cfg.xblock * max(cfg.rblock, 1) // (32 * cfg.num_warps))
        limit = kernel.schedule.per_thread if kernel.schedule is not None else None
        print(f"{name:56s} estimate {per_element:2d} x {held:2d} = {per_element * held:4d}  ptxas {registers:3d} registers, "
              f"{stack:4d} B stack  (xblock {cfg.xblock}, rblock {cfg.rblock}, {cfg.num_warps} warps, per_thread {limit})")


if __name__ == "__main__":
    main()
