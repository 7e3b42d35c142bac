"""How a compiled kernel's scalar parameters are encoded, for every backend's launcher.

Each scalar (a shape, a stride in elements, a scalar argument) travels in one 8-byte slot,
value first: ``SLOT`` gives its ``struct`` format per dtype; bfloat16 values travel as their 16
bits (``bf16_bits``); strides are checked to be whole elements (``element_stride``).
"""
from __future__ import annotations

import struct
from typing import NamedTuple

from .. import dtypes as dt
from ..errors import ArgumentError
from ..ir.bindings import SHAPE, SLOT, STRIDE  # noqa: F401 (SLOT re-exported: the launchers' name)


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


def slot_sources(slots, shape: str, strides: str) -> list:
    """The Python expression of each ``Slot``'s value in a generated launcher: ``shape`` and
    ``strides`` format buffer ``k``'s shape and byte strides (``"b{k}.shape"``); strides
    go through ``_stride`` (``element_stride``); scalar arguments are ``scalars[index]``."""
    return [f"{shape.format(k=sl.index)}[{sl.dim}]" if sl.kind == SHAPE else
            f"_stride({strides.format(k=sl.index)}[{sl.dim}], {sl.itemsize}, {sl.buffer!r})"
            if sl.kind == STRIDE else f"scalars[{sl.index}]" for sl in slots]


class BufferInfo(NamedTuple):
    """One array parameter of a lowered kernel: its name (for messages) and dtype."""

    name: str
    dtype: dt.DType


class ScalarInfo(NamedTuple):
    """One scalar slot of a lowered kernel: its name and dtype."""

    name: str
    dtype: dt.DType


class LaunchInfo(NamedTuple):
    """What a launcher needs of a ``LoweredFunc`` -- its name, array parameters (inputs then
    outputs), scalar slots and their ``bindings`` -- and nothing else: small enough to store
    next to the object code in the disk cache, so that a warm process builds the launcher
    without lowering (``to_json``/``from_json``).  It reads like a LoweredFunc for launchers."""

    name: str
    inputs: tuple
    outputs: tuple
    scalars: tuple
    bindings: tuple

    @property
    def buffers(self) -> tuple:
        return self.inputs + self.outputs

    @classmethod
    def of(cls, func) -> "LaunchInfo":
        """The LaunchInfo of a LoweredFunc."""
        return cls(func.name, tuple(BufferInfo(b.name, b.dtype) for b in func.inputs),
                   tuple(BufferInfo(b.name, b.dtype) for b in func.outputs),
                   tuple(ScalarInfo(v.name, v.dtype) for v in func.scalars),
                   tuple(func.bindings))

    def to_json(self) -> dict:
        return {"name": self.name,
                "inputs": [[b.name, b.dtype.name] for b in self.inputs],
                "outputs": [[b.name, b.dtype.name] for b in self.outputs],
                "scalars": [[v.name, v.dtype.name] for v in self.scalars],
                "bindings": [[b.kind.value, b.index, b.dim] for b in self.bindings]}

    @classmethod
    def from_json(cls, d: dict) -> "LaunchInfo":
        """The inverse of ``to_json`` (KeyError/ValueError/TypeError on a malformed entry)."""
        from ..ir import nodes as n
        buf = [tuple(BufferInfo(str(a), dt.as_dtype(b)) for a, b in d[k])
               for k in ("inputs", "outputs")]
        return cls(str(d["name"]), buf[0], buf[1],
                   tuple(ScalarInfo(str(a), dt.as_dtype(b)) for a, b in d["scalars"]),
                   tuple(n.Binding(n.BindingKind(k), int(i), None if j is None else int(j))
                         for k, i, j in d["bindings"]))
