"""What the warp-level WMMA statements mean, on numpy arrays (the definition both loop-IR
executors run: ``pyexec`` for the sequential interpreter, ``simt.wmma`` per warp).

A fragment is a 2-d array of whole tiles in the canonical orientation (``kdsl.ir.nodes``);
``tile`` picks one tile by its first (row, col).  Memory tiles span the last two dimensions of
their buffer: ROW_MAJOR puts tile row r at index ``origin[-2] + r``, COL_MAJOR at
``origin[-1] + r``.  Valid extents are clamped to [0, tile size]; a load zero-fills the rest
of the tile and reads nothing there, a store writes only the valid part.  ``mma`` multiplies
exactly (float64 holds every product of two 16-bit floats) and rounds once per tile into the
accumulator's dtype, like a tensor core's fused accumulation.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..ir import nodes as n
from ..numerics.numpy_eval import round_bf16


class TileOutOfBounds(Exception):
    """A tile reaches outside its buffer: ``index`` is the first element outside."""

    def __init__(self, index: tuple):
        self.index = index
        super().__init__(f"element {index}")


def tile_dims(scope: n.Scope, shape: tuple) -> tuple:
    """(rows, cols) of one tile of a fragment of ``scope`` for intrinsic ``shape`` (m, n, k)."""
    m, nn, k = shape
    if scope is n.Scope.WMMA_MATRIX_A:
        return m, k
    if scope is n.Scope.WMMA_MATRIX_B:
        return k, nn
    return m, nn


def frag_tile(arr: np.ndarray, tile, rows: int, cols: int) -> np.ndarray:
    """The view of tile ``tile`` = (row, col) of fragment array ``arr``."""
    r, c = int(tile[0]), int(tile[1])
    if r % rows or c % cols or not (0 <= r and r + rows <= arr.shape[0] and 0 <= c and c + cols <= arr.shape[1]):
        raise TileOutOfBounds((r, c))
    return arr[r:r + rows, c:c + cols]


def _clamp(x, size: int) -> int:
    return min(max(int(x), 0), size)


def _region(shape: tuple, origin, col_major: bool, rv: int, cv: int, dims=(-2, -1)) -> tuple:
    """The index tuple of the valid rv x cv part of a tile in an array of ``shape``, spanning
    its dimensions ``dims`` (``WmmaLoad.dims``)."""
    origin = [int(o) for o in origin]
    span = [1] * len(shape)
    d0, d1 = (len(shape) + d for d in dims)
    span[d0], span[d1] = (cv, rv) if col_major else (rv, cv)
    for d, (o, s, size) in enumerate(zip(origin, span, shape)):
        if o < 0 or o + s > size:
            bad = list(origin)
            bad[d] = o if o < 0 else max(o, size)
            raise TileOutOfBounds(tuple(bad))
    return tuple(slice(o, o + s) if d in (d0, d1) else o
                 for d, (o, s) in enumerate(zip(origin, span)))


def load(view: np.ndarray, src: np.ndarray, origin, col_major: bool, extents, dims=(-2, -1)) -> None:
    """``view`` (one fragment tile) = the tile of ``src`` at ``origin``, zero outside ``extents``."""
    rows, cols = view.shape
    rv, cv = _clamp(extents[0], rows), _clamp(extents[1], cols)
    block = np.zeros(view.shape, view.dtype)
    if rv and cv:
        part = src[_region(src.shape, origin, col_major, rv, cv, dims)]
        block[:rv, :cv] = part.T if col_major else part
    view[...] = block


def store(dst: np.ndarray, origin, col_major: bool, view: np.ndarray, extents, to_bf16=False,
          dims=(-2, -1)) -> None:
    """The valid part of fragment tile ``view`` into ``dst`` at ``origin``; a float16 ``dst``
    rounds float32 values to nearest even (numpy's cast), ``to_bf16`` rounds them to bfloat16
    (held in float32 storage)."""
    rows, cols = view.shape
    rv, cv = _clamp(extents[0], rows), _clamp(extents[1], cols)
    if rv and cv:
        part = view[:rv, :cv]
        if to_bf16:
            part = round_bf16(part)
        dst[_region(dst.shape, origin, col_major, rv, cv, dims)] = part.T if col_major else part


def mma(d: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    """``d = a @ b + c`` (tiles), exact products, one rounding into d's dtype."""
    acc = c.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)
    d[...] = acc.astype(d.dtype)


def fill(view: np.ndarray, value) -> None:
    view[...] = value


# ------------------------------------------------------------------ the sequential interpreter
def _frag(F, tile, rows, cols, kernel, name, what):
    try:
        return frag_tile(F, tile, rows, cols)
    except TileOutOfBounds as e:
        from ..numerics import pyexec_rt as rt
        rt.oob(kernel, what + " (tile)", name, e.index, F.shape)


def _mem_oob(kernel, what, name, e, arr):
    from ..numerics import pyexec_rt as rt
    rt.oob(kernel, what, name, e.index, arr.shape)


def _py_load(F, tile, rows, cols, src, origin, col_major, extents, dims, names):
    kernel, fname, sname = names
    view = _frag(F, tile, rows, cols, kernel, fname, "wmma load")
    try:
        load(view, src, origin, col_major, extents, dims)
    except TileOutOfBounds as e:
        _mem_oob(kernel, "wmma load", sname, e, src)


def _py_store(dst, origin, col_major, F, tile, rows, cols, extents, to_bf16, dims, names):
    kernel, fname, dname = names
    view = _frag(F, tile, rows, cols, kernel, fname, "wmma store")
    try:
        store(dst, origin, col_major, view, extents, to_bf16, dims)
    except TileOutOfBounds as e:
        _mem_oob(kernel, "wmma store", dname, e, dst)


def _py_mma(D, dt, A, at, B, bt, C, ct, shape, names):
    m, nn, k = shape
    kernel, dname, aname, bname, cname = names
    mma(_frag(D, dt, m, nn, kernel, dname, "wmma mma"), _frag(A, at, m, k, kernel, aname, "wmma mma"),
        _frag(B, bt, k, nn, kernel, bname, "wmma mma"), _frag(C, ct, m, nn, kernel, cname, "wmma mma"))


def _py_wgmma(D, dt, A, a_origin, a_col, B, b_origin, b_col, C, ct, shape, names):
    m, nn, k = shape
    kernel, dname, aname, bname, cname = names
    tiles = []
    for X, origin, col, rows, cols, name in ((A, a_origin, a_col, m, k, aname), (B, b_origin, b_col, k, nn, bname)):
        try:
            part = X[_region(X.shape, origin, col, rows, cols)]
        except TileOutOfBounds as e:
            _mem_oob(kernel, "wgmma read", name, e, X)
        tiles.append(part.T if col else part)
    mma(_frag(D, dt, m, nn, kernel, dname, "wgmma mma"), tiles[0], tiles[1],
        _frag(C, ct, m, nn, kernel, cname, "wgmma mma"))


def _py_fill(F, tile, rows, cols, value, names):
    kernel, fname, _ = names
    fill(_frag(F, tile, rows, cols, kernel, fname, "wmma fill"), value)


def to_bf16(s: n.WmmaStore) -> bool:
    """Whether store ``s`` rounds its float32 values to bfloat16 (whose storage here is float32:
    the assignment alone would not round)."""
    return s.is_converting and s.dst.dtype is dt.bfloat16


def emit_python(gen, s) -> None:
    """Emit the interpreter's line for warp statement ``s`` (``gen``: pyexec's code generator);
    the sequential interpreter is one warp at a time, so the statement runs once."""
    ex = gen.expr
    buf = lambda b, what: gen._buffer(b, what)[0]          # noqa: E731
    tup = lambda xs: "(" + "".join(f"{ex(x)}, " for x in xs) + ")"  # noqa: E731
    fn = gen.helper(("wmma", type(s).__name__), lambda: _PY[type(s)], "wmma")
    if type(s) is n.WgmmaMma:
        names = (gen.func.name, s.d.name, s.a.name, s.b.name, s.c.name)
        col = lambda lay: str(lay is n.WmmaLayout.COL_MAJOR)      # noqa: E731
        args = [buf(s.d, "wgmma mma"), tup(s.d_tile), buf(s.a, "wgmma mma"), tup(s.a_origin), col(s.a_layout),
                buf(s.b, "wgmma mma"), tup(s.b_origin), col(s.b_layout), buf(s.c, "wgmma mma"), tup(s.c_tile),
                repr(tuple(s.shape))]
    elif type(s) is n.WmmaMma:
        names = (gen.func.name, s.d.name, s.a.name, s.b.name, s.c.name)
        args = [buf(s.d, "wmma mma"), tup(s.d_tile), buf(s.a, "wmma mma"), tup(s.a_tile),
                buf(s.b, "wmma mma"), tup(s.b_tile), buf(s.c, "wmma mma"), tup(s.c_tile), repr(tuple(s.shape))]
    else:
        rows, cols = tile_dims(s.frag.scope, s.shape)
        frag = [buf(s.frag, "wmma"), tup(s.tile), str(rows), str(cols)]
        if type(s) is n.WmmaFill:
            names = (gen.func.name, s.frag.name, None)
            args = frag + [ex(s.value)]
        elif type(s) is n.WmmaLoad:
            names = (gen.func.name, s.frag.name, s.src.name)
            args = frag + [buf(s.src, "wmma load"), tup(s.origin), str(s.layout is n.WmmaLayout.COL_MAJOR),
                           tup(s.extents), repr(tuple(s.dims))]
        else:
            names = (gen.func.name, s.frag.name, s.dst.name)
            args = [buf(s.dst, "wmma store"), tup(s.origin), str(s.layout is n.WmmaLayout.COL_MAJOR)] + frag \
                + [tup(s.extents), str(to_bf16(s)), repr(tuple(s.dims))]
    gen.emit(f"{fn}({', '.join(args)}, {names!r})")


_PY = {n.WmmaLoad: _py_load, n.WmmaStore: _py_store, n.WmmaMma: _py_mma, n.WmmaFill: _py_fill,
       n.WgmmaMma: _py_wgmma}

__all__ = ["TileOutOfBounds", "tile_dims", "frag_tile", "load", "store", "mma", "fill", "emit_python"]
