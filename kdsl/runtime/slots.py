"""How a compiled kernel's scalar parameters are encoded, for every backend's launcher.

Each scalar (a shape, a stride in elements, a scalar argument) travels in one 8-byte slot,
value first: ``SLOT`` gives its ``struct`` format per dtype; bfloat16 values travel as their 16
bits (``bf16_bits``); strides are checked to be whole elements (``element_stride``).
"""
from __future__ import annotations

import struct

from .. import dtypes as dt
from ..errors import ArgumentError

#: struct format of one 8-byte scalar slot per dtype (value first, then padding)
SLOT = {dt.int64: "q", dt.float64: "d", dt.float32: "f4x", dt.float16: "e6x",
        dt.int32: "i4x", dt.int16: "h6x", dt.int8: "b7x", dt.uint8: "B7x", dt.bool_: "?7x",
        dt.bfloat16: "H6x", dt.uint16: "H6x", dt.uint32: "I4x", dt.uint64: "Q"}


def bf16_bits(x) -> int:
    """The bits of ``x`` rounded to float32 and then to the nearest bfloat16 (ties to even);
    values beyond float32 become infinities, NaN stays NaN."""
    x = float(x)
    try:
        (u,) = struct.unpack("<I", struct.pack("<f", x))
    except OverflowError:
        return 0x7F80 if x > 0 else 0xFF80
    if x != x:
        return (u >> 16) | 0x40       # a quiet NaN, sign kept
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


def element_stride(nbytes: int, itemsize: int, name: str) -> int:
    """A byte stride in elements; ArgumentError when it is not a whole number of them."""
    q, r = divmod(int(nbytes), itemsize)
    if r:
        raise ArgumentError(f"argument {name!r} has a stride of {nbytes} bytes, which is not a "
                            f"multiple of its item size {itemsize}",
                            hint="pass a copy (np.ascontiguousarray) of this view")
    return q
