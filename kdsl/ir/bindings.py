"""How a ``LoweredFunc``'s scalars are filled at a call: its ``bindings`` decoded once.

``scalar_slots(func)`` is the one decoder of ``func.bindings`` (call plans and launchers, the
IR interpreters, the cpu codegen all read the ``Slot``s): each scalar travels in one 8-byte
slot, value first, ``SLOT`` giving its ``struct`` format per dtype.
"""
from __future__ import annotations

from typing import NamedTuple

from .. import dtypes as dt
from ..errors import InternalCompilerError

#: the kinds of ``Slot`` (the values of ``nodes.BindingKind``)
SHAPE, STRIDE, SCALAR = "shape", "stride", "scalar"

#: struct format of one 8-byte scalar slot per dtype (value first, then padding)
SLOT = {dt.int64: "q", dt.float64: "d", dt.float32: "f4x", dt.float16: "e6x",
        dt.int32: "i4x", dt.int16: "h6x", dt.int8: "b7x", dt.uint8: "B7x", dt.bool_: "?7x",
        dt.bfloat16: "H6x", dt.uint16: "H6x", dt.uint32: "I4x", dt.uint64: "Q"}


#: One 8-byte scalar slot of the compiled function, resolved from ``func.bindings``: ``kind``
#: SHAPE/STRIDE (``index`` into ``func.buffers``, dim ``dim``; ``itemsize`` of that buffer:
#: strides travel in elements) or SCALAR (``index``: the graph's scalar parameter number);
#: ``dtype`` and ``code`` (its ``SLOT`` struct format); ``buffer``: the buffer's name, for
#: messages.  (Made by call with real types: the class syntax's annotations are strings here,
#: which ``NamedTuple`` compiles one by one when ``import kdsl`` runs.)
Slot = NamedTuple("Slot", [("kind", str), ("index", int), ("dim", object), ("dtype", object),
                           ("code", str), ("itemsize", int), ("buffer", str)])
Slot.__doc__ = ("One 8-byte scalar slot of the compiled function, resolved from "
                "``func.bindings`` (kind, index, dim, dtype, code, itemsize, buffer).")
Slot.__module__ = __name__


def scalar_slots(func) -> tuple:
    """The ``Slot``s of a LoweredFunc (or ``runtime.slots.LaunchInfo``), in ``func.scalars``
    order."""
    binds = tuple(func.bindings)
    if len(binds) != len(func.scalars):
        raise InternalCompilerError(f"kernel {func.name!r}: {len(func.scalars)} scalars but "
                                    f"{len(binds)} bindings")
    bufs, out = tuple(func.buffers), []
    for v, b in zip(func.scalars, binds):
        code = SLOT.get(v.dtype)
        if code is None:
            raise InternalCompilerError(f"scalar {v.name!r} has unsupported dtype {v.dtype}")
        kind = b.kind.value
        if kind == SCALAR:
            out.append(Slot(SCALAR, b.index, None, v.dtype, code, 0, ""))
        elif kind in (SHAPE, STRIDE):
            buf = bufs[b.index]
            out.append(Slot(kind, b.index, b.dim, v.dtype, code, buf.dtype.itemsize, buf.name))
        else:
            raise InternalCompilerError(f"unknown binding kind {b.kind!r}")
    return tuple(out)


__all__ = ["SHAPE", "STRIDE", "SCALAR", "SLOT", "Slot", "scalar_slots"]
