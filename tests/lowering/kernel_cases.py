"""Hand-written kernel-level IR for the lowering tests, and small helpers to run it."""

from __future__ import annotations

import torch

from fusec.dialects import fusec as F
from fusec.lowering.triton_kernel import LoweringOptions
from fusec.runtime import compile_module
from fusec.testing import parse

# Small enough that a looped reduction takes several steps and a tail over the rows used below.
LOOPED = LoweringOptions(persistent_threshold=0, max_rblock=16)
PERSISTENT = LoweringOptions()


def kernel_module(name: str, domain: str, inputs: list[str], outputs: list[str], body: str,
                  symbols: str = "s0 in [1, inf]") -> str:
    """A graph holding one kernel: inputs ``%in0..``, outputs ``%out0..`` inside its body."""
    ins = ", ".join(f"%a{i} : {t}" for i, t in enumerate(inputs))
    outs = ", ".join(outputs)
    results = f"%k:{len(outputs)}" if len(outputs) > 1 else "%k"
    uses = ", ".join(f"%k#{i}" for i in range(len(outputs))) if len(outputs) > 1 else "%k"
    block_args = ", ".join([f"%in{i} : {t}" for i, t in enumerate(inputs)] + [f"%out{i} : {t}" for i, t in enumerate(outputs)])
    sym = f" symbols({symbols})" if symbols else ""
    return f"""builtin.module {{
  fusec.graph @g({ins}) -> ({outs}){sym} {{
    {results} = fusec.kernel @{name} [{domain}] ({", ".join(f"%a{i}" for i in range(len(inputs)))}) : ({", ".join(inputs)}) -> ({outs}) {{
    ^bb0({block_args}):
{body}
    }}
    fusec.output {uses} : {outs}
  }}
}}"""


def compile_text(text: str, hints: dict[str, int] | None = None, options: LoweringOptions = PERSISTENT):
    module = parse(text)
    return module, compile_module(module, hints or {}, options=options)


def only_kernel(compiled):
    (kernel,) = compiled.kernels
    return kernel


def randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def graph_of(module) -> F.GraphOp:
    return next(op for op in module.walk() if isinstance(op, F.GraphOp))


ROW_SUM_TEXT = kernel_module("fusec_red_sum_0", "s0, 37", ["!fusec.tensor<[s0, 37], f32>"], ["!fusec.tensor<[s0], f32>"], """      %v = fusec.load %in0[37*x + r] : !fusec.tensor<[s0, 37], f32>
      %s = fusec.reduce_r "sum" %v : f32 -> f32
      fusec.store %s, %out0[x] : !fusec.tensor<[s0], f32>""")


# ---------------------------------------------------------------- compiling for Hopper without a GPU

_POINTER_TYPES = {"float32": "*fp32", "float16": "*fp16", "bfloat16": "*bf16", "float64": "*fp64", "bool": "*i1",
                  "int8": "*i8", "int16": "*i16", "int32": "*i32", "int64": "*i64", "uint8": "*u8"}


def compile_for_hopper(kernel_op: F.KernelOp, lowered, xnumel: int = 64, rnumel: int = 37, size_type: str = "i32"):
    """Triton's full GPU pipeline (TTIR .. PTX .. cubin with ptxas) for sm_90, with no GPU needed.

    ``size_type`` is how Triton would specialise the runtime ints: "i32", "i64", or
    "one" (every size equal to 1, which Triton turns into a constexpr).
    """
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from fusec.runtime.kernel_cache import load_kernel

    fn = load_kernel(lowered.source, lowered.name, interpret=False)
    buffers = list(kernel_op.inputs) + list(kernel_op.outputs)
    signature = {name: _POINTER_TYPES[F.dtype_name(b.type.element_type)] for name, b in zip(fn.arg_names[:len(buffers)], buffers, strict=True)}
    constants = {}
    for name, _ in lowered.size_args:
        signature[name] = "constexpr" if size_type == "one" else size_type
        if size_type == "one":
            constants[name] = 1
    cfg = lowered.config(xnumel, rnumel)
    constants["XBLOCK"] = cfg.xblock
    signature["XBLOCK"] = "constexpr"
    if lowered.kind != "pointwise":
        constants["RBLOCK"] = cfg.rblock
        signature["RBLOCK"] = "constexpr"
    return triton.compile(ASTSource(fn, signature, constants), target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": cfg.num_warps})
