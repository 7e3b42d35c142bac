"""The default cuda schedule of a convolution written as a contraction (``rules.kind``
"conv"): ``O[.., o, y, x] = sum_{c, ry, rx} X[.., c, y*s + ry, x*s + rx] * W[o, c, ry, rx]``
(NCHW, any stride, 1x1 or any window, a guarded read for padding as the user writes it).

Recognised from the reads, by objects (``find``): the product of an image read ``X`` and a
weight read ``W``; ``o``, the output axis only ``W`` reads (GEMM M); the output's last axis
``x``, read only by ``X`` (GEMM N, with the other pixel axis ``y`` and the batch); the reduce
axes read by both (GEMM K): ``main`` (the channels, an index of their own in ``X``) and the
``window`` (added to a pixel axis in ``X``'s index).  Not (yet) recognised: outputs whose
last axis is the channels (NHWC) and depthwise or grouped convolutions (an axis both read):
they keep the generic schedules.

The CUDA-core recipe (``conv_tile``, for any dtype; 16-bit inputs go to tensor cores instead,
``conv_tc.py``) is the tiled GEMM of gemm.py with the im2col in the loads: a block computes
``bm`` channels x ``ty`` rows x ``tx`` columns (x ``nb`` images) of O; per step of ``bk``
channels the block copies the box of X its outputs read (``bk x (ty*s + kh - 1) x (tx*s + kw
- 1)``: each input element once, not once per window tap) and W's ``bm x bk x kh x kw`` into
shared memory (padded caches: zeros beyond the edges; ``cp.async`` ring buffers, ``stages``);
each thread accumulates ``om`` channels x ``ym`` rows of one column in registers.  Threads
along x (threadIdx.x: a warp reads one shared row, conflict-free, and stores 32 consecutive
outputs), channel groups along threadIdx.y (a warp reads each weight as one broadcast).  Per
channel the thread reads its ``(ym + kh - 1) x kw`` window column once into registers and
each weight tap's ``om`` values (at stride 1: 30 + 72 shared loads for 576 FMAs, 3x3).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from kdsl.ir import nodes as n
from kdsl.ir.simplify import linear
from kdsl.ir.visitor import collect, uses_var

from . import analysis as A
from .gemm import SMS, coop_copy, multi_buffer, size_bound

#: the reduce extents of a window (each at most this many taps)
MAX_TAPS = 16


@dataclass(frozen=True)
class Conv:
    """The roles of a convolution stage's reads and axes (``find``)."""
    img: n.TensorRead          # X (casts and padding guards peeled)
    wgt: n.TensorRead          # W
    o: n.IterVar               # output channels: read by W only
    x: n.IterVar               # the output's last axis, read by X only
    y: n.IterVar | None        # the pixel axis whose X index adds a window axis (rows)
    batch: tuple               # the other output axes
    main: tuple                # reduce axes X reads as indices of their own (channels)
    window: tuple              # the other reduce axes (constant extents)
    stride: int                # the coefficient of y (else x) in X's index
    guarded: bool              # X is read under a condition (padding written as kd.where)


def _uncast(e):
    while type(e) is n.Cast:
        e = e.a
    return e


def _operand(e):
    """(TensorRead, guarded) of a factor: a read (cast), or a Select tree whose leaves are
    constants and one read (``kd.where(inside, X[..], 0)``, ``np.pad``'s)."""
    e = _uncast(e)
    if type(e) is n.TensorRead:
        return e, False
    reads = collect(e, lambda z: type(z) is n.TensorRead)
    if len(reads) != 1:
        return None, False
    todo = [e]
    while todo:
        z = _uncast(todo.pop())
        if type(z) is n.Select:
            todo += [z.t, z.f]
        elif type(z) is not n.Const and z is not reads[0]:
            return None, False
    return reads[0], True


def _uses(read, v) -> bool:
    return any(uses_var(i, v) for i in read.indices)


def find(stage) -> Conv | None:
    """The convolution roles of ``stage`` (module docstring), or None."""
    body = stage.body
    if (not isinstance(body, n.Reduce) or len(stage.values) != 1 or body.condition is not None
            or body.combiner.kind is not n.CombinerKind.SUM or len(body.sources) != 1
            or len(stage.axes) < 3 or not stage.reduce_axes
            or getattr(stage, "scan", None) is not None):
        return None
    src = _uncast(body.sources[0])
    if type(src) is not n.Binary or src.op is not n.BinOp.MUL:
        return None
    (ra, ga), (rb, gb) = _operand(src.a), _operand(src.b)
    if ra is None or rb is None or ra.tensor is rb.tensor:
        return None
    last = stage.axes[-1].var
    if _uses(rb, last) and not _uses(ra, last):
        (ra, ga), (rb, gb) = (rb, gb), (ra, ga)
    img, wgt, guarded = ra, rb, ga
    if gb or not _uses(img, last) or _uses(wgt, last):
        return None
    o = [a for a in stage.axes if _uses(wgt, a.var)]
    if len(o) != 1 or _uses(img, o[0].var):
        return None                 # depthwise / grouped (an axis both read): not this recipe
    o = o[0]
    if not all(_uses(img, a.var) or a is o for a in stage.axes):
        return None
    if not all(_uses(img, r.var) and _uses(wgt, r.var) for r in stage.reduce_axes):
        return None
    main = tuple(r for r in stage.reduce_axes if any(i is r.var for i in img.indices))
    window = tuple(r for r in stage.reduce_axes if r not in main)
    if not main or any((A.const_extent(r) or MAX_TAPS + 1) > MAX_TAPS for r in window):
        return None
    pixels = [a for a in stage.axes if a is not o]
    y = None
    for a in pixels:
        if a.var is last:
            continue
        idx = [i for i in img.indices if uses_var(i, a.var)]
        if len(idx) == 1 and any(uses_var(idx[0], r.var) for r in window):
            y = a
    if y is None and len(pixels) >= 2 and pixels[-2] is not o and stage.axes[-2] is pixels[-2]:
        y = pixels[-2]          # a 1x1 convolution: the rows are the axis before x
    batch = tuple(a for a in stage.axes if a is not o and a is not y and a.var is not last)
    return Conv(img, wgt, o, stage.axes[-1], y, batch, main, window,
                _stride(img, y or stage.axes[-1]), guarded)


def _stride(read, axis) -> int:
    """The coefficient of ``axis`` in the (one) index of ``read`` that uses it (1 when the
    index is not linear: a clamped padded read)."""
    for i in read.indices:
        if uses_var(i, axis.var):
            c = linear(i).terms.get(axis.var)
            return int(c) if isinstance(c, int) and c > 0 else 1
    return 1


# ------------------------------------------------------------------ configuration
@dataclass(frozen=True)
class Config:
    """A block of ``bm`` channels x ``ty`` rows x ``tx`` columns x ``nb`` images; a thread
    ``om`` channels x ``ym`` rows of one column; ``bk`` channels per shared step."""
    bm: int = 64
    om: int = 8
    ty: int = 8
    ym: int = 8
    tx: int = 32
    nb: int = 1
    bk: int = 8
    stages: int = 2
    #: the thread's registers of X: its whole window column per channel ("window"), per
    #: window row ("row") or per tap ("tap")
    xl: str = "window"

    @property
    def threads(self) -> int:
        return (self.bm // self.om) * self.nb * (self.ty // self.ym) * self.tx


#: a block's threads: at least, at most
MIN_THREADS, MAX_THREADS = 64, 512


def _range_hi(sched, iv, default):
    b = size_bound(sched, iv)
    return default if b is None else b


def _range_lo(sched, iv, default):
    r = A.extent_range(sched, iv)
    return default if r is None else r[0]


def choose(sched, h, m: Conv, plan=None) -> Config:
    """The configuration for the stage's sizes (``sched.size_hints``; unknown: 56-wide
    images, 64 channels), adjusted by the hints: ``tile`` on o / y / x (block extents, and
    on the channel axis the step), ``stages``."""
    from kdsl.schedule.plan import reduce_names, spatial_names
    st = h.stage
    c = Config()
    if st.dtype.itemsize > 4:            # 8-byte accumulators: half the register tile
        c = replace(c, om=4)
    width = _range_lo(sched, m.x, 56)
    rows = _range_hi(sched, m.y, 56) if m.y is not None else 1
    chans = _range_lo(sched, m.o, 64)
    # (a size class spans a factor of 2: [14, 29] holds 14 and 28, both 87% of 16-wide tiles)
    if width < 12:
        c = replace(c, tx=8)
    elif width < 24:
        c = replace(c, tx=16)
    if m.y is None or rows <= 4:
        c = replace(c, ty=min(4, max(1, rows)) if m.y is not None else 1,
                    ym=min(4, max(1, rows)) if m.y is not None else 1)
    while c.bm > c.om and c.bm >= 2 * chans:
        c = replace(c, bm=c.bm // 2)
    # a warp of pixel threads: more rows of threads, then more images, for narrow tiles
    pix = c.nb * (c.ty // c.ym) * c.tx
    if pix < 32 and m.y is not None and rows >= 2 * c.ty:
        c = replace(c, ty=c.ty * max(1, min(32 // pix, rows // c.ty)))
    pix = c.nb * (c.ty // c.ym) * c.tx
    if pix < 32 and m.batch:
        c = replace(c, nb=max(1, 32 // pix))
    # blocks for every SM: fewer channels a block where the images are small (512 x 7^2 at
    # batch 32 took 64 blocks of 64 channels for 132 SMs).  A size class spans 2x a dim
    # (output rows of 14 and 28 share one), so by the image's class, then by a count at the
    # class' low end
    small = 1 if width >= 24 else 2 if width >= 12 else 4
    if m.y is not None:
        c = replace(c, bm=max(2 * c.om, c.bm // small))
    while c.bm >= 4 * c.om and _blocks(sched, m, c) < SMS // 2:
        c = replace(c, bm=c.bm // 2)
    hw = sched.backend_hints.get(h.name, {})
    if plan is not None:
        names = dict(zip(spatial_names(st), st.axes))
        rnames = dict(zip(reduce_names(st), st.reduce_axes))
        for nm, v in plan.tile.items():
            ax = names.get(nm) or rnames.get(nm)
            if ax is m.o:
                c = replace(c, bm=v, om=min(c.om, v))
            elif ax is m.y:
                c = replace(c, ty=v, ym=min(c.ym, v))
            elif ax is m.x:
                c = replace(c, tx=v)
            elif ax is m.main[0]:
                c = replace(c, bk=v)
    if hw.get("stages"):
        c = replace(c, stages=hw["stages"])
    while c.threads > MAX_THREADS and c.bm > c.om:
        c = replace(c, bm=c.bm // 2)
    while c.threads < MIN_THREADS and c.om > 1 and c.bm // c.om < 16:
        c = replace(c, om=c.om // 2)
    return c


def _blocks(sched, m: Conv, c: Config) -> float:
    """The blocks of configuration ``c`` at the low end of the size class (inf: unknown)."""
    total = 1.0
    for iv, t in ((m.o, c.bm), (m.x, c.tx), (m.y, c.ty)) + tuple((a, 1) for a in m.batch):
        if iv is None:
            continue
        r = A.extent_range(sched, iv)
        if r is None:
            return float("inf")
        total *= -(-max(1, r[0]) // t)
    return total / c.nb


def fits(stage, m: Conv, c: Config) -> bool:
    """Whether the recipe makes a legal kernel: the thread tiles divide the block tiles, at
    most 1024 threads, and where extents are constants, every thread loop keeps its extent
    (the cooperative copies have a turn for every thread)."""
    if c.bm % c.om or c.ty % c.ym or c.threads > 1024 or c.threads < 1:
        return False
    for iv, t in ((m.o, c.bm), (m.x, c.tx)) + (((m.y, c.ty),) if m.y is not None else ()):
        k = A.const_extent(iv)
        if k is not None and k < t:
            return False
    return True


# ------------------------------------------------------------------ the recipe
def _pos(stage, iv) -> int:
    return list(stage.axes).index(iv)


def conv_tile(sched, O, m: Conv, c: Config, epilogue=None) -> None:
    """Realise the CUDA-core recipe (module docstring) on stage handle ``O``; ``epilogue``:
    the stage casting O (tensorcore.cast_epilogue), computed from the accumulators instead."""
    st = O.stage
    ipos, xpos = _pos(st, m.o), _pos(st, m.x)
    ypos = _pos(st, m.y) if m.y is not None else None
    bpos = [_pos(st, a) for a in m.batch]
    rpos = {id(r): k for k, r in enumerate(st.reduce_axes)}
    main_k = [rpos[id(r)] for r in m.main]
    win_k = [rpos[id(r)] for r in m.window]
    CL = sched.cache_write(O, "local")
    if epilogue is not None:        # O is a copy of CL now: the cast reads CL directly
        O.compute_inline()
        O = epilogue
    XS = sched.cache_read(m.img.tensor, "shared", [CL], pad=True)
    WS = sched.cache_read(m.wgt.tensor, "shared", [CL], pad=True)
    # (a guarded read clamps its indices: their boxes have no constant size, so the
    # thread reads its window straight from the shared tile)
    XL = None if m.guarded else sched.cache_read(XS, "local", [CL])
    WL = sched.cache_read(WS, "local", [CL])
    ax = O.stage.axes
    ob, oi = O.split(ax[ipos], factor=c.bm)
    ot, om = O.split(oi, nparts=c.bm // c.om)
    xb, xt = O.split(ax[xpos], factor=c.tx)
    outer, inner = [], []
    if ypos is not None:
        yb, yi = O.split(ax[ypos], factor=c.ty)
        yt, ym = O.split(yi, nparts=c.ty // c.ym)
    batch = [ax[p] for p in bpos]
    if c.nb > 1 and batch:
        bb, bt = O.split(batch[-1], factor=c.nb)
        outer, inner = batch[:-1] + [bb], [bt]
    else:
        outer = batch
    blocks = outer + [ob] + ([yb] if ypos is not None else []) + [xb]
    pix = inner + ([yt] if ypos is not None else []) + [xt]
    regs = [om] + ([ym] if ypos is not None else [])
    O.reorder(*blocks, ot, *pix, *regs)
    O.bind(O.fuse(*blocks) if len(blocks) > 1 else blocks[0], "blockIdx.x")
    O.bind(ot, "threadIdx.y")
    tx = O.fuse(*pix) if len(pix) > 1 else pix[0]
    O.bind(tx, "threadIdx.x")
    for r in regs:
        O.unroll(r)
    CL.compute_at(O, tx)
    red = CL.stage.reduce_axes
    rc = red[main_k[0]]
    rco, rci = CL.split(rc, factor=c.bk)
    others = [red[k] for k in main_k[1:]]
    win = [red[k] for k in win_k]
    CL.reorder(rco, *others, rci, *win, *CL.stage.axes)
    # (a guarded read's window stays rolled: its clamps and selects on every product, times
    # nine taps unrolled, took NVRTC 37 s for one 3x3 kernel)
    for a in ((*win, *CL.stage.axes) if not m.guarded else CL.stage.axes):
        CL.unroll(a)
    for X in (XS, WS):
        X.compute_at(CL, rco)
    # the thread's window column for a whole channel at stride 1 (each row read once for
    # every tap); at larger strides the rows a tap skips would be read too: per tap row
    if XL is not None:
        level = c.xl if m.stride == 1 else "tap"
        XL.compute_at(CL, {"window": rci, "row": win[0], "tap": win[-1]}[level] if win else rci)
    WL.compute_at(CL, win[-1] if win else rci)
    for L in (XL, WL):
        for a in L.stage.axes if L is not None else ():
            L.unroll(a)
    threads = (("threadIdx.y", c.bm // c.om), ("threadIdx.x", c.threads // (c.bm // c.om)))
    item = m.img.tensor.dtype.itemsize
    coop_copy(XS, 2 if item == 4 and m.stride == 1 else 1, *threads)
    coop_copy(WS, 1, *threads)
    for X in (XS, WS):
        multi_buffer(X, c.stages, rc, c.bk)


__all__ = ["Conv", "Config", "find", "choose", "fits", "conv_tile"]
