"""fusec's element types: one table for the IR, torch, Triton and the cost model.

Each entry names a dtype as torch does (``"bfloat16"``), its xDSL type in the IR
(``bf16``), its Triton type, its size in bytes and its kind.  Everything that
maps between those worlds reads this table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type, Float64Type, IntegerType, Signedness
from xdsl.ir import Attribute

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class DType:
    name: str  # torch's name: "bfloat16"
    ir: Attribute  # the IR's element type: bf16
    triton: str  # "tl.bfloat16"
    bytes: int
    kind: str  # "bool", "int" (signed), "uint" or "float"

    @property
    def torch(self) -> torch.dtype:
        import torch

        return getattr(torch, self.name)

    @property
    def is_float(self) -> bool:
        return self.kind == "float"


def _uint(bits: int) -> IntegerType:
    return IntegerType(bits, Signedness.UNSIGNED)


DTYPES: tuple[DType, ...] = (
    DType("bool", IntegerType(1), "tl.int1", 1, "bool"),
    DType("int8", IntegerType(8), "tl.int8", 1, "int"),
    DType("int16", IntegerType(16), "tl.int16", 2, "int"),
    DType("int32", IntegerType(32), "tl.int32", 4, "int"),
    DType("int64", IntegerType(64), "tl.int64", 8, "int"),
    DType("uint8", _uint(8), "tl.uint8", 1, "uint"),
    DType("uint16", _uint(16), "tl.uint16", 2, "uint"),
    DType("uint32", _uint(32), "tl.uint32", 4, "uint"),
    DType("uint64", _uint(64), "tl.uint64", 8, "uint"),
    DType("float16", Float16Type(), "tl.float16", 2, "float"),
    DType("bfloat16", BFloat16Type(), "tl.bfloat16", 2, "float"),
    DType("float32", Float32Type(), "tl.float32", 4, "float"),
    DType("float64", Float64Type(), "tl.float64", 8, "float"),
)
BY_NAME: dict[str, DType] = {d.name: d for d in DTYPES}
_BY_IR: dict[Attribute, DType] = {d.ir: d for d in DTYPES}

# torch supports few ops on these ("limited support"): fusec passes them through externs, never computes on them.
PASS_THROUGH_ONLY = frozenset({"uint16", "uint32", "uint64"})


class UnknownDType(ValueError):
    """A dtype (torch's or the IR's) that fusec has no entry for."""


def of_ir(t: Attribute) -> DType:
    """The entry of an IR element type (``f32``)."""
    try:
        return _BY_IR[t]
    except (KeyError, TypeError):
        raise UnknownDType(f"{t} is not a fusec element type") from None


def of_torch(dtype: torch.dtype) -> DType:
    """The entry of a torch dtype."""
    name = str(dtype).removeprefix("torch.")
    if name not in BY_NAME:
        raise UnknownDType(f"dtype {dtype} has no fusec element type")
    return BY_NAME[name]


def of_name(name: str) -> DType:
    if name not in BY_NAME:
        raise UnknownDType(f"'{name}' is not a dtype fusec knows ({', '.join(BY_NAME)})")
    return BY_NAME[name]
