"""Element operations in Triton: dtypes, conversions, the pointwise table, reduction pieces.

Values are held in a *compute dtype*: fp16/bf16 in fp32 (rounded at stores, at
explicit conversions and before a jump: ``is_discontinuous``), every other type as itself.  Code is built from operand
*names* (generated variables), never from arbitrary expressions, so an operand
may be repeated in a template without recomputing anything.

Functions that Triton's interpreter cannot run through ``libdevice`` go through
the name ``libdevice``, which a kernel module binds at load time
(see ``fusec.lowering.triton_compat``).
"""

from __future__ import annotations

import math
import re

import torch

from fusec.base import dtypes
from fusec.dialects import fusec as F

FLOATS = {d.name for d in dtypes.DTYPES if d.kind == "float"}
_SMALL_INTS = {"int8", "int16", "uint8"}  # a Python literal beside them may widen the result
INTS = {d.name for d in dtypes.DTYPES if d.kind in ("int", "uint")}
_TORCH = {d.name: d.torch for d in dtypes.DTYPES}


def tl_dtype(name: str) -> str:
    return dtypes.of_name(name).triton


def compute_dtype(name: str) -> str:
    """The dtype a value of IR dtype ``name`` is held in inside a kernel."""
    return "float32" if name in ("float16", "bfloat16") else name


def promote(*names: str) -> str:
    """torch.promote_types over dtype names."""
    out = _TORCH[names[0]]
    for n in names[1:]:
        out = torch.promote_types(out, _TORCH[n])
    return str(out).removeprefix("torch.")


def convert(name: str, held: str, to: str) -> str:
    """Code converting variable ``name`` from compute dtype ``held`` to compute dtype ``to``."""
    if held == to:
        return name
    if to == "bool":
        return f"({name} != 0)"
    return f"{name}.to({tl_dtype(to)})"


def round_to(name: str, ir_dtype: str) -> str:
    """An explicit conversion to fp16/bf16 rounds, then the value is held in fp32 again."""
    return f"{name}.to({tl_dtype(ir_dtype)}).to(tl.float32)"


# Functions whose result jumps where their operand crosses a boundary: a 16-bit operand held unrounded in fp32 is
# rounded to its own type first, so the jump falls where eager's (which rounded it) does.
_DISCONTINUOUS = (F.PREDICATES - {"logical_and", "logical_or", "logical_not", "isnan"}) | {"floor", "ceil", "round", "trunc"}


def is_discontinuous(fn: str, result_dtype: str) -> bool:
    """Whether ``fn`` (giving ``result_dtype``) needs its fp16/bf16 operands rounded first: comparisons, isinf (a
    value past fp16's largest rounds to inf), floor/ceil/round/trunc, and conversions to an int or bool."""
    return fn in _DISCONTINUOUS or (fn == "convert" and result_dtype not in FLOATS)


def literal(value: float | int | bool, ir_dtype: str) -> str:
    """A Python literal that Triton reads as ``value`` (fp16/bf16 values rounded first)."""
    if ir_dtype == "bool":
        return "1" if value else "0"
    if ir_dtype in FLOATS:
        value = float(value)
        if ir_dtype in ("float16", "bfloat16"):
            value = float(torch.tensor(value, dtype=_TORCH[ir_dtype]).item())
        if math.isnan(value):
            return 'float("nan")'
        if math.isinf(value):
            return 'float("inf")' if value > 0 else 'float("-inf")'
        return repr(value)
    return int_literal(int(value))


def int_literal(v: int) -> str:
    # -2**63 does not fit a positive literal: Triton would read 9223372036854775808 as uint64.
    return f"({v + 1} - 1)" if v == -(2**63) else str(v)


def lowest(dtype: str) -> str:
    """The identity of max in compute dtype ``dtype``."""
    if dtype in FLOATS:
        return 'float("-inf")'
    if dtype == "bool":
        return "0"
    return int_literal(int(torch.iinfo(_TORCH[dtype]).min))


def highest(dtype: str) -> str:
    if dtype in FLOATS:
        return 'float("inf")'
    if dtype == "bool":
        return "1"
    return int_literal(int(torch.iinfo(_TORCH[dtype]).max))


# ---------------------------------------------------------------- pointwise


def operand_dtype(fn: str, operand_dtypes: list[str], result_dtype: str) -> list[str]:
    """The IR dtype each operand is converted to before ``fn`` computes (fusec's rules)."""
    if fn in ("logical_and", "logical_or", "logical_not"):
        return ["bool"] * len(operand_dtypes)
    if fn in F.PREDICATES:
        common = promote(*operand_dtypes)
        return [common] * len(operand_dtypes)
    if fn == "where":
        return ["bool", result_dtype, result_dtype]
    if fn == "convert":
        return list(operand_dtypes)
    return [result_dtype] * len(operand_dtypes)


def _float_only(expr: str):
    """A float function: its operand is already converted to the (float) result dtype."""
    return lambda a, t: expr.format(a=a)


def _rounding(expr: str):
    """floor/ceil/round/trunc: the identity on integers, like torch."""
    return lambda a, t: expr.format(a=a) if t in FLOATS else a


UNARY = {
    "neg": lambda a, t: f"-{a}" if t != "bool" else a,
    "abs": lambda a, t: f"tl.abs({a})" if t != "bool" else a,
    "exp": _float_only("tl.exp({a})"),
    "exp2": _float_only("tl.exp2({a})"),
    "expm1": _float_only("libdevice.expm1({a})"),
    "log": _float_only("tl.log({a})"),
    "log2": _float_only("tl.log2({a})"),
    "log1p": _float_only("libdevice.log1p({a})"),
    "sqrt": _float_only("libdevice.sqrt({a})"),
    "rsqrt": _float_only("libdevice.rsqrt({a})"),
    "sin": _float_only("tl.sin({a})"),
    "cos": _float_only("tl.cos({a})"),
    "tan": _float_only("libdevice.tan({a})"),
    "tanh": _float_only("libdevice.tanh({a})"),
    "sigmoid": _float_only("1.0 / (1.0 + tl.exp(-{a}))"),
    "erf": _float_only("libdevice.erf({a})"),
    "erfc": _float_only("libdevice.erfc({a})"),
    "asin": _float_only("libdevice.asin({a})"),
    "acos": _float_only("libdevice.acos({a})"),
    "atan": _float_only("libdevice.atan({a})"),
    "sinh": _float_only("libdevice.sinh({a})"),
    "cosh": _float_only("libdevice.cosh({a})"),
    "floor": _rounding("tl.floor({a})"),
    "ceil": _rounding("tl.ceil({a})"),
    "round": _rounding("libdevice.nearbyint({a})"),  # half to even, like torch.round
    "trunc": _rounding("libdevice.trunc({a})"),
    "sign": lambda a, t: a if t == "bool" else f"({a} > 0).to({tl_dtype(t)}) - ({a} < 0).to({tl_dtype(t)})",  # sign(NaN) is 0 in torch
    "reciprocal": lambda a, t: f"1.0 / {a}" if t in FLOATS else f"1 / {a}",
    # NaN stays NaN
    "relu": lambda a, t: (a if t == "bool" else f"tl.where({a} < 0, 0, {a})" + (f".to({tl_dtype(t)})" if t in _SMALL_INTS else "")),
    "logical_not": lambda a, t: f"({a} == 0)",
    "bitwise_not": lambda a, t: f"({a} == 0)" if t == "bool" else f"~{a}",
    "isnan": lambda a, t: f"({a} != {a})",
    "isinf": lambda a, t: f"(tl.abs({a}) == float(\"inf\"))" if t in FLOATS else f"({a} != {a})",
    "signbit": lambda a, t: f"(libdevice.signbit({a}) != 0)" if t in FLOATS else (f"({a} < 0)" if t != "bool" else f"({a} != {a})"),
    "identity": lambda a, t: a,
}

BINARY = {
    "add": lambda a, b, t: f"{a} | {b}" if t == "bool" else f"{a} + {b}",
    "sub": lambda a, b, t: f"{a} - {b}",
    "mul": lambda a, b, t: f"{a} & {b}" if t == "bool" else f"{a} * {b}",
    "div": lambda a, b, t: f"{a} / {b}" if t in FLOATS else f"{a} // {b}",
    "floordiv": lambda a, b, t: f"_floordiv_float({a}, {b})" if t in FLOATS else f"_floordiv_int({a}, {b})",
    "remainder": lambda a, b, t: f"_remainder({a}, {b})",
    "pow": lambda a, b, t: (f"libdevice.pow({a}, {b})" if t in FLOATS else
                            f"_pow_{'int' if dtypes.of_name(t).kind == 'int' else 'uint'}({a}, {b}, {8 * dtypes.of_name(t).bytes})"),
    "maximum": lambda a, b, t: (f"tl.maximum({a}, {b}, propagate_nan=tl.PropagateNan.ALL)" if t in FLOATS else
                                f"{a} | {b}" if t == "bool" else f"tl.maximum({a}, {b})"),
    "minimum": lambda a, b, t: (f"tl.minimum({a}, {b}, propagate_nan=tl.PropagateNan.ALL)" if t in FLOATS else
                                f"{a} & {b}" if t == "bool" else f"tl.minimum({a}, {b})"),
    "atan2": lambda a, b, t: f"libdevice.atan2({a}, {b})",
    "bitwise_and": lambda a, b, t: f"{a} & {b}",
    "bitwise_or": lambda a, b, t: f"{a} | {b}",
    "bitwise_xor": lambda a, b, t: f"{a} ^ {b}",
    "logical_and": lambda a, b, t: f"{a} & {b}",
    "logical_or": lambda a, b, t: f"{a} | {b}",
    "eq": lambda a, b, t: f"{a} == {b}",
    "ne": lambda a, b, t: f"{a} != {b}",
    "lt": lambda a, b, t: f"{a} < {b}",
    "le": lambda a, b, t: f"{a} <= {b}",
    "gt": lambda a, b, t: f"{a} > {b}",
    "ge": lambda a, b, t: f"{a} >= {b}",
}

# iota never reaches a kernel: form-kernels folds it into a fusec.symbolic over x.
assert set(UNARY) | set(BINARY) | {"convert", "where", "iota"} == set(F.POINTWISE_FUNCTIONS), "every pointwise function needs Triton code"


def pointwise_code(fn: str, args: list[str], dtype: str) -> str:
    """Triton code for ``fn`` on operand names already converted to compute dtype ``dtype``."""
    if fn == "where":
        return f"tl.where({args[0]}, {args[1]}, {args[2]})"
    if fn in UNARY:
        return UNARY[fn](args[0], dtype)
    return BINARY[fn](args[0], args[1], dtype)


# Small @triton.jit helpers a kernel module defines when its body uses them.  Reductions use
# these, not tl.sum/tl.max: Triton's own are @jit functions decorated when triton was first
# imported, so they fail under the interpreter unless TRITON_INTERPRET was set that early
# (a combine function is only compared, never called, so _sum can be Triton's own).
HELPERS: dict[str, str] = {
    # Triton's own combine function: Triton's interpreter sums it with numpy (pairwise, as the GPU's tree
    # does) where a combine function of ours would be folded left to right, one element at a time.
    "_sum": "_sum = tl.standard._sum_combine\n",
    "_max": '''@triton.jit
def _max(a, b):
    return tl.maximum(a, b)
''',
    "_min": '''@triton.jit
def _min(a, b):
    return tl.minimum(a, b)
''',
    "_remainder": '''@triton.jit
def _remainder(a, b):
    # torch.remainder: the result takes the divisor's sign (Triton's % truncates).
    r = a % b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)
''',
    "_floordiv_int": '''@triton.jit
def _floordiv_int(a, b):
    # Floor division of integers (Triton's // truncates toward zero).
    q = a // b
    return tl.where(((a % b) != 0) & ((a < 0) != (b < 0)), q - 1, q)
''',
    "_pow_uint": '''@triton.jit
def _pow_uint(a, b, BITS: tl.constexpr):
    # torch's integer pow: square and multiply over every bit of the exponent, wrapping as torch does.
    result = (a == a).to(a.dtype)
    for _ in tl.static_range(BITS):
        result = tl.where((b & 1) != 0, result * a, result)
        a = a * a
        b = b >> 1
    return result
''',
    "_pow_int": '''@triton.jit
def _pow_int(a, b, BITS: tl.constexpr):
    # As _pow_uint; a negative exponent gives 0, except for the bases 1 and -1 (as torch).
    power = _pow_uint(a, b, BITS)
    one = (a == a).to(a.dtype)
    negative = tl.where(a == one, one, tl.where(a == -one, one - 2 * (b & 1).to(a.dtype), one - one))
    return tl.where(b < 0, negative, power)
''',
    "_floordiv_float": '''@triton.jit
def _floordiv_float(a, b):
    # torch.floor_divide on floats goes through fmod: -0.5 // -0.1 is 4.0, not floor(5.0).
    mod = a % b
    div = (a - mod) / b
    div = tl.where((mod != 0) & ((b < 0) != (mod < 0)), div - 1.0, div)
    whole = tl.floor(div)
    whole = tl.where(div - whole > 0.5, whole + 1.0, whole)
    quotient = tl.where(div != 0, whole, 0.0 * (a / b))
    return tl.where(b == 0, a / b, quotient)
''',
    "_max_nan": '''@triton.jit
def _max_nan(a, b):
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)
''',
    "_min_nan": '''@triton.jit
def _min_nan(a, b):
    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)
''',
    "_prod": '''@triton.jit
def _prod(a, b):
    return a * b
''',
    "_argmax_combine": '''@triton.jit
def _argmax_combine(value1, index1, value2, index2):
    # torch.argmax: NaN is the largest value; ties go to the first index.
    nan1 = value1 != value1
    nan2 = value2 != value2
    equal = (value1 == value2) | (nan1 & nan2)
    pick1 = (value1 > value2) | (nan1 & (nan2 == 0)) | (equal & (index1 < index2))
    return tl.where(pick1, value1, value2), tl.where(pick1, index1, index2)
''',
    "_argmin_combine": '''@triton.jit
def _argmin_combine(value1, index1, value2, index2):
    # torch.argmin: NaN is the smallest value; ties go to the first index.
    nan1 = value1 != value1
    nan2 = value2 != value2
    equal = (value1 == value2) | (nan1 & nan2)
    pick1 = (value1 < value2) | (nan1 & (nan2 == 0)) | (equal & (index1 < index2))
    return tl.where(pick1, value1, value2), tl.where(pick1, index1, index2)
''',
}


def module_source(comment: str, kernel_text: str) -> str:
    """A kernel module: the comment line, imports (libdevice only where used), the helper
    functions ``kernel_text`` calls, then the kernel."""
    head = [f"# {comment}", "import triton", "import triton.language as tl"]
    if "libdevice." in kernel_text:
        head += ["", "from fusec.lowering.triton_compat import libdevice_for_this_load", "",
                 "libdevice = libdevice_for_this_load()  # Triton's libdevice, or numpy under the interpreter"]
    if "tanh_approx(" in kernel_text:
        head += ["", "from fusec.lowering.triton_compat import tanh_approx_for_this_load", "",
                 "tanh_approx = tanh_approx_for_this_load()  # tanh.approx.f32, or numpy under the interpreter"]
    if "DOT_IN_FP32" in kernel_text:
        head += ["", "from fusec.lowering.triton_compat import dot_in_fp32_for_this_load", "",
                 "DOT_IN_FP32 = dot_in_fp32_for_this_load()  # the interpreter's tl.dot takes no 16-bit floats"]
    used = kernel_text
    for _ in HELPERS:  # a helper may call another (_pow_int calls _pow_uint)
        helpers = [HELPERS[h] for h in HELPERS if re.search(rf"\b{h}\b", used)]
        if kernel_text + "".join(helpers) == used:
            break
        used = kernel_text + "".join(helpers)
    return "\n".join(head) + "\n\n\n" + "".join(h + "\n\n" for h in helpers) + kernel_text
