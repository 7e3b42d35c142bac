"""Element offsets of buffer accesses as IR expressions (the kernel printer, vector copies and
wmma tiles share them)."""
from __future__ import annotations

from kdsl.ir import nodes as n


def const_int(e) -> int | None:
    return e.value if type(e) is n.Const and e.dtype.is_int else None


def flat_offset(b: n.Buffer, indices):
    """The element offset of ``b[indices]`` as an int64 expression (explicit strides, else
    row-major in Horner form; zero terms dropped), or None for offset 0."""
    out = None
    if b.strides is not None:
        for i, s in zip(indices, b.strides):
            if const_int(i) != 0:
                term = n.Binary(i.dtype, n.BinOp.MUL, i, s)
                out = term if out is None else n.Binary(i.dtype, n.BinOp.ADD, out, term)
        return out
    for i, ext in zip(indices, b.shape):
        if out is not None:
            out = n.Binary(out.dtype, n.BinOp.MUL, out, ext)
        if const_int(i) != 0:
            out = i if out is None else n.Binary(i.dtype, n.BinOp.ADD, out, i)
    return out
