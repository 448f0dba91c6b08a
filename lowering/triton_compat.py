"""``libdevice`` (and ``tl.dot``'s operands) for generated kernels, on the GPU and under Triton's interpreter.

Triton's interpreter cannot run ``triton.language.extra.libdevice`` (its extern
calls raise), yet kernels need erf, tanh, log1p... with libdevice's accuracy on the
GPU.  A kernel module therefore binds ``libdevice = libdevice_for_this_load()`` at
load time: the real module when ``triton.jit`` compiles for a GPU, and
``InterpreterLibdevice`` (numpy on the interpreter's tensors) when the module is
loaded under the interpreter.  fusec.runtime loads each kernel source once per mode.
"""

from __future__ import annotations

import math

import numpy as np
import triton
import triton.language as tl


def interpreting() -> bool:
    """Whether ``triton.jit`` decorates for the interpreter right now (Triton 3.6 to 3.9: ``knobs.runtime.interpret``)."""
    return bool(triton.knobs.runtime.interpret)


def libdevice_for_this_load():
    if interpreting():
        return InterpreterLibdevice
    from triton.language.extra import libdevice

    return libdevice


def dot_in_fp32_for_this_load() -> tl.constexpr:
    """Whether a matmul kernel converts 16-bit operand tiles to fp32 before ``tl.dot``: only under the interpreter,
    whose ``tl.dot`` multiplies bf16 tiles as their raw bits (numpy has no bf16)."""
    return tl.constexpr(interpreting())


@triton.jit
def _tanh_approx_ptx(x):
    return tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1)


def tanh_approx_for_this_load():
    """fp32 tanh by the GPU's one-instruction approximation (``tanh.approx.f32``, relative error below 2**-10.9),
    or numpy's exact tanh under the interpreter, which runs no PTX."""
    return InterpreterLibdevice.tanh if interpreting() else _tanh_approx_ptx


def _np(t):
    return t.handle.data


def _wrap(data: np.ndarray, like, scalar_type=None):
    """A tensor of the interpreter holding ``data``, shaped like ``data``, typed like ``like``."""
    from triton.runtime.interpreter import TensorHandle

    scalar = scalar_type or like.dtype
    data = np.asarray(data).astype(_NP[scalar.name] if scalar.name in _NP else data.dtype, copy=False)
    shape = list(data.shape)
    block = tl.block_type(scalar, shape) if shape else scalar
    return tl.tensor(TensorHandle(data, scalar), block)


_NP = {"fp32": np.float32, "fp64": np.float64, "int32": np.int32, "int1": np.bool_}


def _unary(fn):
    def apply(x):
        with np.errstate(all="ignore"):
            return _wrap(fn(_np(x)), x)

    return staticmethod(apply)


def _binary(fn):
    def apply(x, y):
        a, b = np.broadcast_arrays(_np(x), _np(y))
        with np.errstate(all="ignore"):
            return _wrap(fn(a, b), x)

    return staticmethod(apply)


_erf = np.vectorize(math.erf, otypes=[np.float64])
_erfc = np.vectorize(math.erfc, otypes=[np.float64])


class InterpreterLibdevice:
    """The libdevice functions fusec's kernels use, in numpy, for the interpreter."""

    sqrt = _unary(np.sqrt)
    rsqrt = _unary(lambda a: 1 / np.sqrt(a))
    expm1 = _unary(np.expm1)
    log1p = _unary(np.log1p)
    tan = _unary(np.tan)
    tanh = _unary(np.tanh)
    erf = _unary(_erf)
    erfc = _unary(_erfc)
    asin = _unary(np.arcsin)
    acos = _unary(np.arccos)
    atan = _unary(np.arctan)
    sinh = _unary(np.sinh)
    cosh = _unary(np.cosh)
    nearbyint = _unary(np.rint)
    trunc = _unary(np.trunc)
    pow = _binary(np.power)
    atan2 = _binary(np.arctan2)

    @staticmethod
    def signbit(x):
        return _wrap(np.signbit(_np(x)).astype(np.int32), x, tl.int32)
