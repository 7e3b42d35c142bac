"""The stencil recipe: a register tile of outputs per thread (``stencil_tile``) for stages
with a small constant window (``rules.kind`` "stencil": the 3x3 convolution, 5x5, 1x3, ...).

Chosen from the reads of the stage: which tensors a thread caches (``_window_reads``), how
big its boxes are (``_box``), how many outputs a thread computes (``stencil_shape``) and how
wide the vector loads of its window rows are (``_lanes``).
"""
from __future__ import annotations

from kdsl.ir import nodes as n
from kdsl.ir.visitor import collect, uses_var

from .analysis import reads_of
from .recipes import _const, _fuse

#: 4-byte registers a stencil thread may spend on its outputs, window and weights
STENCIL_REGS = 112


def stencil_shape(stage, rows: int | None, cols: int | None) -> tuple:
    """(R, C): output rows and columns per thread of ``stencil_tile``.  C makes one 16-byte
    store of a row (4 floats, 2 doubles; at most 4); R as many rows (at most 8) as the
    registers allow: R*C accumulators + the cached boxes (``_box``: the (R+kh-1) x (C+kw-1)
    window, the kh*kw weights) within ``STENCIL_REGS`` (3x3 float32: 8 x 4; 5x5: 4 x 4)."""
    if cols is None:
        cols = max(1, min(4, 16 // max(1, stage.dtype.itemsize)))
    if rows is None:
        rows = 8
        while rows > 1 and _tile_words(stage, rows, cols) > STENCIL_REGS:
            rows //= 2
    return rows, cols


def _tile_words(stage, rows: int, cols: int) -> int:
    """4-byte registers of a thread's accumulators and cached boxes."""
    words = rows * cols * max(1, stage.dtype.itemsize // 4)
    for t in _window_reads(stage):
        words += _box(stage, t, rows, cols) * max(1, t.dtype.itemsize // 4)
    return words


def _index_extent(stage, e, rows: int, cols: int) -> int:
    """How many values index ``e`` (a sum of variables and constants) takes over one thread's
    tile: the tile's extent for the last two spatial axes (R, C), the window's for reduce
    axes, 1 for the other spatial axes (one block each)."""
    *_, yi, xi = stage.axes
    red = {a.var: _const(a) or 1 for a in stage.reduce_axes}
    ext = 1
    for v in collect(e, lambda x: isinstance(x, n.Var)):
        if v is yi.var:
            ext += rows - 1
        elif v is xi.var:
            ext += cols - 1
        elif v in red:
            ext += red[v] - 1
    return ext


def _box(stage, tensor, rows: int, cols: int) -> int:
    """Elements of a thread's cache of ``tensor`` (its box over every read)."""
    dims = None
    for r in reads_of(stage):
        if r.tensor is tensor:
            ext = [_index_extent(stage, e, rows, cols) for e in r.indices]
            dims = ext if dims is None else [max(a, b) for a, b in zip(dims, ext)]
    total = 1
    for d in dims or ():
        total *= d
    return total


def _window_width(stage, cols: int) -> int:
    """Elements of a window row: the extent of the output's last axis plus the window's."""
    xi = stage.axes[-1].var
    best = 1
    for r in reads_of(stage):
        if r.indices and uses_var(r.indices[-1], xi):
            best = max(best, _index_extent(stage, r.indices[-1], 1, cols))
    return best


def _plain_index(e, allowed: set) -> bool:
    """``e`` is a sum of allowed variables (coefficient 1) and constants."""
    t = type(e)
    if t is n.Const:
        return True
    if t is n.Var:
        return e in allowed
    if t is n.Binary and e.op in (n.BinOp.ADD, n.BinOp.SUB):
        if e.op is n.BinOp.SUB and type(e.b) is not n.Const:
            return False
        return _plain_index(e.a, allowed) and _plain_index(e.b, allowed)
    return False


def _window_reads(stage) -> list:
    """The tensors a thread's window is cached for: every tensor all of whose reads index each
    dimension by a sum of spatial or reduce variables and constants (``I[i + di, j + dj]``,
    ``W[di, dj]``, ``I[b, i + di - 1, j]``), so that its cache is a small box per thread."""
    allowed = {a.var for a in stage.axes} | {a.var for a in stage.reduce_axes}
    ok, bad = [], set()
    for r in reads_of(stage):
        if not all(_plain_index(e, allowed) for e in r.indices):
            bad.add(id(r.tensor))
        elif all(t is not r.tensor for t in ok):
            ok.append(r.tensor)
    return [t for t in ok if id(t) not in bad]


def _lanes(stage, tensor, cols: int) -> int:
    """Lanes of the vector loads of ``tensor``'s window rows: its last index walks the output's
    last axis and the window row splits into 4- or 2-element vectors of at most 16 bytes of a
    4- or 8-byte type; 1 (scalar) otherwise."""
    xi = stage.axes[-1].var
    reads = [r for r in reads_of(stage) if r.tensor is tensor]
    if not reads or not all(r.indices and uses_var(r.indices[-1], xi) for r in reads):
        return 1
    width = _window_width(stage, cols)
    size = tensor.dtype.itemsize
    for lanes in (4, 2):
        if width % lanes == 0 and lanes * size <= 16 and size in (4, 8):
            return lanes
    return 1

def stencil_tile(sched, x, *, tx: int, ty: int, rows: int, cols: int):
    """A register tile per thread: ``rows x cols`` outputs of the last two axes, ``ty x tx``
    threads per block (x along the contiguous axis), tiles and leading axes over blockIdx.x.

    Each thread reads its input window (``(rows + kh - 1) x (cols + kw - 1)``) once into
    registers (a local cache_read; rows as 8- or 16-byte vector loads where the layout
    allows), the weights once (a local cache too), accumulates its outputs in registers
    (cache_write local, every loop unrolled) and stores each output row with one 16-byte
    store (``cols = 4`` floats).  Why not a shared tile per block: every input byte still
    comes from DRAM once (the halo rows and columns a thread shares with its neighbours are
    L1/L2 hits), and the thread's window costs (R+kh-1)*ceil((C+kw-1)/lanes) vector loads per
    R*C outputs (3x3, 8x4: 30 float2 loads per 32 outputs), while a shared tile adds a store
    and a barrier per element staged plus the same number of shared loads to fill the
    registers from it.  What the tile costs instead is registers (``stencil_shape``).
    Tiles that do not divide are guarded by the core; its ``full_thread_tiles`` pass gives
    interior threads a guard-free copy."""
    local = sched.cache_write(x, "local")
    words = rows * cols * max(1, x.stage.dtype.itemsize // 4)
    tensors = []
    for t in _window_reads(local.stage):     # boxes past the register budget: read in place
        w = _box(local.stage, t, rows, cols) * max(1, t.dtype.itemsize // 4)
        if words + w <= 2 * STENCIL_REGS:
            tensors.append(t)
            words += w
    lanes = {id(t): _lanes(local.stage, t, cols) for t in tensors}    # before the reads move
    caches = [(t, sched.cache_read(t, "local", [local])) for t in tensors]
    *rest, yi, xi = list(x.stage.axes)
    yo, yi = x.split(yi, factor=ty * rows)
    yt, yr = x.split(yi, factor=rows)
    xo, xi = x.split(xi, factor=tx * cols)
    xt, xc = x.split(xi, factor=cols)
    x.reorder(*rest, yo, xo, yt, xt, yr, xc)
    x.bind(_fuse(x, [*rest, yo, xo]), "blockIdx.x")
    x.bind(yt, "threadIdx.y")
    x.bind(xt, "threadIdx.x")
    x.unroll(yr)
    if cols > 1:
        x.vectorize(xc)
    local.compute_at(x, xt)
    *lsp, lr, lc = local.stage.axes
    red = list(local.stage.reduce_axes)
    local.reorder(*red, lr, lc)
    for a in (*red, lr, lc):
        local.unroll(a)
    for t, c in caches:
        c.compute_at(x, xt)
        *outer, last = c.stage.axes
        for a in outer:
            c.unroll(a)
        if lanes[id(t)] > 1:
            lo, li = c.split(last, factor=lanes[id(t)])
            c.unroll(lo)
            c.vectorize(li)
        else:
            c.unroll(last)
    return None
