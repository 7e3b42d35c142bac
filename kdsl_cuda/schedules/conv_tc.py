"""The default cuda schedule of a 16-bit convolution on tensor cores (conv.py recognises it):
``O[.., o, y, x] = sum_{c, ry, rx} f32(X[.., c, y + ry, x + rx]) * f32(W[o, c, ry, rx])``
with X and W both float16 or both bfloat16, stride 1 along the columns, tensorized with
``kd.intrin.wmma(16, 16, 16)`` (mma.sync; tensorcore.py's fragments) as an implicit GEMM:
M = output channels, N = the columns of one output row, K = the channels, 16 at a time, for
each window tap.

* a block computes ``16 * wo * to`` channels x ``wy`` rows x ``16 * tx`` columns of O: ``wo``
  warps along the channels (threadIdx.y) times ``wy`` warps along the rows (threadIdx.z, a
  row each), every warp a ``to x tx`` grid of 16 x 16 accumulator fragments;
* with a window (3x3): per step of 16 channels the block copies the box of X its outputs
  read, ``wy + kh - 1`` rows x ``16 * tx + kw - 1`` columns x 16 channels, into shared memory
  as channels-last panels (``Schedule.pack(.., lanes_last=True)``; each element once, not
  once per tap), and W's ``16 * wo * to`` x ``kh x kw`` x 16 tile from W's panels, made once
  per call in global memory by a small kernel and copied with ``cp.async``, double-buffered.
  Every fragment is then 16 rows of 16 consecutive channels (one ``ldmatrix``), the im2col in
  its origin: the tap shifts the rows it starts at;
* a 1x1 convolution is W times each image row: X's and W's tiles as they are (padded caches,
  ``cp.async`` rings, 32 channels a step), B's fragments channels x columns of one row;
* per tap and warp: ``to`` A fragments (weights), ``tx`` B fragments (X at the tap's row and
  column offset), ``to * tx`` fragment products;
* the accumulators are stored into O (an NCHW tile of channels x columns: ``WmmaStore.dims``),
  or cast to 16 bits on the way (the ``epilogue``, as tensorcore.py's).

Correct for any sizes (channels not a multiple of 16: the last panel's loads stop at the
reduction's end; edges: partial fragments are clipped), window and batch.  The 16-column
fragments of one row waste what a narrow image leaves (7 of 16 columns at 7 x 7).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import kdsl as kd
from kdsl import dtypes as dt
from kdsl.ir.visitor import uses_var

from . import analysis as A, recipes
from .conv import Conv, _pos, _range_lo
from .gemm import coop_copy, multi_buffer
from .recipes import _fuse


@dataclass(frozen=True)
class TCConfig:
    """``wo x wy`` warps, each ``to x tx`` fragments (channels x columns, one row); ``kc``
    panels of 16 channels per shared step; ``stages`` buffers of W's tiles."""
    wo: int = 1
    to: int = 4
    wy: int = 8
    tx: int = 4
    kc: int = 1
    stages: int = 2
    #: X's panels made in global memory once per call by a kernel of their own (then copied
    #: like W's: cp.async, double-buffered) instead of in each block's shared memory
    xglobal: bool = False

    @property
    def threads(self) -> int:
        return 32 * self.wo * self.wy


#: warps per block
WARPS = 8


def eligible(sched, h, m: Conv) -> bool:
    """Whether convolution stage handle ``h`` takes the tensor-core recipe: 16-bit X and W of
    one type accumulated in float32, unit stride along the columns, unguarded reads (a padded
    read clamps its indices: the CUDA-core recipe serves it), no extent a constant below 16;
    unless ``tensor_cores=False`` (or, without the hint, ``KDSL_CUDA_TENSOR_CORES=0``)."""
    from kdsl import config
    from .tensorcore import tensor_cores_hint
    want = tensor_cores_hint(sched, h)
    if not (config.cuda_tensor_cores() if want is None else want):
        return False
    st = h.stage
    x_t, w_t = m.img.tensor, m.wgt.tensor
    if (st.dtype is not dt.float32 or x_t.dtype not in (dt.float16, dt.bfloat16)
            or w_t.dtype is not x_t.dtype or m.guarded or len(m.main) != 1):
        return False
    if _coeff(m.img, m.x) != 1 or (m.y is not None and _coeff(m.img, m.y) != 1):
        return False
    # the channel axis indexes one dimension of each operand on its own
    if sum(i is m.main[0].var for i in m.img.indices) != 1 or \
            sum(i is m.main[0].var for i in m.wgt.indices) != 1 or \
            not any(i is m.o.var for i in m.wgt.indices):
        return False
    return not any((c := A.const_extent(iv)) is not None and c < 16 for iv in (m.o, m.x))


def _coeff(read, axis) -> int | None:
    from kdsl.ir.simplify import linear
    from kdsl.ir.visitor import uses_var
    for i in read.indices:
        if uses_var(i, axis.var):
            c = linear(i).terms.get(axis.var)
            return c if isinstance(c, int) else None
    return None


def choose(sched, h, m: Conv, plan=None) -> TCConfig:
    """The block for the stage's sizes (``sched.size_hints``: a class spans a factor of 2, so
    by its lower end): 64 columns of a row per warp for rows of 30 and more, else 16 (rows of
    14 and 28 share a class: 16-wide tiles waste 12% of either); 64 channels per warp, fewer
    for fewer channels; 8 warps, along the rows (one each); 4 panels of 16 channels per step
    without a window (a 1x1 convolution's step is 9x shorter).  ``tile`` hints on o / y / x
    set the block's extents, ``stages`` W's buffers."""
    from kdsl.schedule.plan import spatial_names
    width = _range_lo(sched, m.x, 56)
    chans = _range_lo(sched, m.o, 64)
    tx = 4 if width >= 30 else 2 if width >= 20 else 1
    to = 4
    while to > 1 and 16 * to > max(16, chans):
        to //= 2
    wy = WARPS if m.y is not None else 1
    wo = 1 if m.y is not None else WARPS
    c = TCConfig(wo=wo, to=to, wy=wy, tx=tx, kc=1 if m.window else 2)
    if plan is not None:
        names = dict(zip(spatial_names(h.stage), h.stage.axes))
        for nm, v in plan.tile.items():
            ax = names.get(nm)
            if ax is m.o:
                c = replace(c, to=max(1, v // (16 * c.wo)))
            elif ax is m.y and m.y is not None:
                c = replace(c, wy=max(1, v))
            elif ax is m.x:
                c = replace(c, tx=max(1, v // 16))
    hw = sched.backend_hints.get(h.name, {})
    if hw.get("stages"):
        c = replace(c, stages=hw["stages"])
    return c


def conv_tc(sched, C, m: Conv, c: TCConfig, epilogue=None) -> None:
    """Realise the tensor-core recipe (module docstring) on convolution stage handle ``C``.
    ``epilogue``: C's cast to 16 bits, done by the fragment stores."""
    st = C.stage
    x_t, w_t = m.img.tensor, m.wgt.tensor
    opos, xpos = _pos(st, m.o), _pos(st, m.x)
    ypos = _pos(st, m.y) if m.y is not None else None
    bpos = [_pos(st, a) for a in m.batch]
    rpos = {id(r): k for k, r in enumerate(st.reduce_axes)}
    main_k = rpos[id(m.main[0])]
    win_k = [rpos[id(r)] for r in m.window]
    xc = _dim(m.img, m.main[0])
    wc = _dim(m.wgt, m.main[0])
    packed = bool(m.window)
    # packed: fragments of channels-last panels, B's rows along its last dimension
    w = kd.intrin.wmma(16, 16, 16, dtype=x_t.dtype, layout_b="col_major" if packed else "row_major")
    CF = sched.cache_write(C, "wmma.accumulator")
    if epilogue is not None:     # C is now a copy of the accumulator: the cast reads it directly
        C.compute_inline()
        C = epilogue
    step = 16 * c.kc
    if packed:
        # a window shifts B's columns by the tap: X and W in channels-last panels of 16, so
        # that every fragment is 16 rows of 16 consecutive channels, at any shift (one
        # ldmatrix); X's box once per step, each element once (not once per tap)
        if c.xglobal:
            XG = sched.pack(x_t, [CF], axis=xc, factor=16, scope="global", lanes_last=True)
            recipes.elementwise(sched, XG, threads=256, vec=1, tiles={}, unroll=None)
            XS = sched.cache_read(XG, "shared", [CF])
        else:
            XS = sched.pack(x_t, [CF], axis=xc, factor=16, scope="shared", lanes_last=True)
        # W's panels once per call in global memory (a small kernel of its own), each
        # step's tile then one contiguous run that cp.async copies 16 bytes at a time,
        # double-buffered (a panel copy in the kernel took a barrier per turn: its flat
        # index is not linear in the threads)
        WP = sched.pack(w_t, [CF], axis=wc, factor=16, scope="global", lanes_last=True)
        recipes.elementwise(sched, WP, threads=256, vec=1, tiles={}, unroll=None)
        WS = sched.cache_read(WP, "shared", [CF])
    else:
        # a 1x1 convolution is a product of W with each image's rows: both operands as they
        # are (padded caches, cp.async rings), B's fragments channels x columns of one row
        XS = sched.cache_read(x_t, "shared", [CF], pad=True)
        WS = sched.cache_read(w_t, "shared", [CF], pad=True)
    AF = sched.cache_read(WS, "wmma.matrix_a", [CF])
    BF = sched.cache_read(XS, "wmma.matrix_b", [CF])
    ax = C.stage.axes
    ob, oi = C.split(ax[opos], factor=16 * c.wo * c.to)
    ow, ot = C.split(oi, factor=16 * c.to)
    tio, tii = C.split(ot, factor=16)
    xb, xi = C.split(ax[xpos], factor=16 * c.tx)
    tjo, tji = C.split(xi, factor=16)
    batch = [ax[p] for p in bpos]
    if ypos is not None:
        yb, yw = C.split(ax[ypos], factor=c.wy)
        C.reorder(*batch, ob, yb, xb, yw, ow, tio, tjo, tii, tji)
        blocks = [*batch, ob, yb, xb]
    else:
        yw = None
        C.reorder(*batch, ob, xb, ow, tio, tjo, tii, tji)
        blocks = [*batch, ob, xb]
    C.bind(_fuse(C, blocks), "blockIdx.x")
    if yw is not None:
        C.bind(yw, "threadIdx.z")
    C.bind(ow, "threadIdx.y")
    CF.compute_at(C, ow)
    cax = CF.stage.axes
    red = CF.stage.reduce_axes
    cio, cii = CF.split(cax[opos], factor=16)
    cjo, cji = CF.split(cax[xpos], factor=16)
    # packed: one panel a step (panels of 16 and steps of more would leave the loads of
    # panels past the channels out altogether, their fragments unset)
    ko, kr = CF.split(red[main_k], factor=16 if packed else step)
    kio, ki = CF.split(kr, factor=16)
    win = [red[k] for k in win_k]
    CF.reorder(ko, *win, kio, cio, cjo, cii, cji, ki)
    # the tile loops unrolled: a fragment indexed by a loop variable lives in local memory
    # (1.5 KB of stack a thread, the mma.sync GEMM's 1 KB likewise)
    for a in (cio, cjo):
        CF.unroll(a)
    for a in (tio, tjo):
        C.unroll(a)
    AF.compute_at(CF, kio)
    BF.compute_at(CF, kio)
    wo_ = _dim(m.wgt, m.o)
    if packed:      # (panel, W's dimensions without the channels, channels)
        _fragment_loads(AF, 1 + wo_ - (wo_ > wc), len(AF.stage.axes) - 1, w)
        _fragment_loads(BF, len(BF.stage.axes) - 2, len(BF.stage.axes) - 1, w)
    else:           # W and X as they are: (o, c), (c, x)
        _fragment_loads(AF, wo_, wc, w)
        _fragment_loads(BF, xc, _dim(m.img, m.x), w)
    CF.tensorize(cii, w)
    C.tensorize(tii, w)
    threads = (("threadIdx.z", c.wy if yw is not None else 1), ("threadIdx.y", c.wo),
               ("threadIdx.x", 32))
    threads = tuple(t for t in threads if t[1] > 1 or t[0] == "threadIdx.x")
    XS.compute_at(CF, ko)
    WS.compute_at(CF, ko)
    if packed and c.xglobal:
        coop_copy(XS, 8, *threads)
        multi_buffer(XS, c.stages, red[main_k], 16)
    elif packed:
        # X's panel: (panel, X's dimensions without the channels, channels); those indexed
        # by the batch alone come first (one image per block)
        xlead = 1
        for k, i in enumerate(m.img.indices):
            if k == xc:
                continue
            if not any(uses_var(i, a.var) for a in m.batch) or \
                    any(uses_var(i, a.var) for a in st.axes if a not in m.batch):
                break
            xlead += 1
        _copy(XS, threads, xlead)
    else:
        coop_copy(XS, 8, *threads)
        multi_buffer(XS, c.stages, red[main_k], step)
    coop_copy(WS, 8, *threads)
    multi_buffer(WS, c.stages, red[main_k], 16 if packed else step)


def _dim(read, axis) -> int:
    """The dimension of ``read``'s tensor indexed by ``axis`` alone."""
    return [k for k, i in enumerate(read.indices) if i is axis.var][0]


def _fragment_loads(F, rows: int, cols: int, w) -> None:
    """Tensorize fragment stage ``F`` (a copy of W's or X's tile in shared memory): its axes
    ``rows`` and ``cols`` (the fragment's, in memory: W's channels x its input channels, X's
    input channels x columns) cut in 16s, each 16 x 16 tile one load; the other axes (extent
    1 where ``F`` is attached) outside."""
    axes = list(F.stage.axes)
    ro, ri = F.split(axes[rows], factor=16)
    co, ci = F.split(axes[cols], factor=16)
    others = [a for a in F.leaf if a not in (ro, ri, co, ci)]
    F.reorder(*others, ro, co, ri, ci)
    F.unroll(ro)
    F.unroll(co)
    F.tensorize(ri, w)


def _copy(P, threads, lead: int) -> None:
    """All the block's threads copy pack ``P``'s region in its own order (channels fastest):
    the axes after the first ``lead`` (the panel and the batch: one each per block) fused
    and dealt out in turn, so that its flat index is linear in the threads with one serial
    digit (the barrier pass then sees one thread per element: with the rows' axis serial
    or fused under a panel axis, ``% rows`` or a turn not dividing the row left a barrier
    per turn; a transposing order, columns fastest, reads coalesced but has no linear flat
    index either).  The reads of neighbouring turns hit L1."""
    total = 1
    for _, e in threads:
        total *= e
    tail = list(P.stage.axes)[lead:]
    f = P.fuse(*tail) if len(tail) > 1 else tail[0]
    _, t = P.split(f, factor=total)
    for tag, e in threads[:-1]:
        total //= e
        o, t = P.split(t, factor=total)
        P.bind(o, tag)
    P.bind(t, threads[-1][0])


__all__ = ["TCConfig", "eligible", "choose", "conv_tc"]
