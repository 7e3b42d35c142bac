"""How each kind of stage is mapped onto blocks and threads (the realisations of the plans).

Every function takes the schedule, a stage handle still at its root form (no primitive
applied), and the numbers ``rules`` chose (hints already merged in); it applies primitives
and returns the loop a row-wise producer attaches at (the block loop over the first axis),
or None.  Conventions, which every recipe keeps:

* ``threadIdx.x`` walks the contiguous axis, so that a warp reads consecutive addresses;
  ``V`` consecutive elements per thread form a ``vectorized`` loop (16-byte accesses);
* everything else spatial is fused into ``blockIdx.x`` (no 65535 limit of grid y/z);
* per-thread accumulation happens in local memory (a cache_write or an rfactor'd lane
  stage), cross-thread reductions over ``threadIdx.x`` (warp shuffles in CUDA);
* tiles that do not divide are guarded by the core.
"""
from __future__ import annotations

import math

from kdsl.ir import nodes as n


def _fuse(x, axes):
    axes = list(axes)
    if not axes:
        return None
    return x.fuse(*axes) if len(axes) > 1 else axes[0]


def _reduce_leaf(x):
    """The stage's reduce leaves fused into one loop (they are adjacent at the root form)."""
    red = [a for a in x.leaf if a.kind is n.IterKind.REDUCE]
    return _fuse(x, red)


def _unroll_serial(x, loop, u):
    """Split ``loop`` by ``u`` and unroll the inner part; returns (outer, inner-or-None)."""
    if not u or u <= 1:
        return loop, None
    o, i = x.split(loop, factor=u)
    x.unroll(i)
    return o, i


# ---------------------------------------------------------------- elementwise
def elementwise(sched, x, *, threads: int, vec: int, tiles: dict, unroll: int | None,
                row_tile: int | None = None):
    """Each thread ``vec`` contiguous elements (vectorized), ``threads`` threads per block.

    ``tiles`` (spatial axis name -> elements per block) or ``row_tile`` (the last axis cut
    into tiles of that many elements): the other axes and the tile index go to blockIdx.x and
    each thread loops over its part of the tile; otherwise all axes are fused and cut into
    blocks of ``threads * vec`` (times ``unroll`` vectors per thread, strided by the block)."""
    from kdsl.schedule.plan import spatial_names
    names = spatial_names(x.stage)
    leaves = dict(zip(names, x.stage.axes))
    tiles = dict(tiles)
    if not tiles and row_tile and len(names) >= 2:
        tiles = {names[-1]: row_tile}
    outer, inner = [], []
    for nm in names:
        if nm in tiles:
            o, i = x.split(leaves[nm], factor=tiles[nm])
            outer.append(o)
            inner.append(i)
        elif tiles:
            outer.append(leaves[nm])
        else:
            inner.append(leaves[nm])
    if len(outer) + len(inner) > 1:
        x.reorder(*outer, *inner)
    blk = _fuse(x, outer)
    w = _fuse(x, inner)
    wv = None
    if vec > 1:
        w, wv = x.split(w, factor=vec)
    w, wt = x.split(w, factor=threads)
    if blk is None:
        blk, wu = w, None
        if unroll and unroll > 1:
            blk, wu = x.split(w, factor=unroll)
        x.reorder(*[a for a in (blk, wt, wu, wv) if a is not None])
        if wu is not None:
            x.unroll(wu)
    else:
        x.reorder(*[a for a in (blk, wt, w, wv) if a is not None])
        _unroll_serial(x, w, unroll)
    x.bind(blk, "blockIdx.x")
    x.bind(wt, "threadIdx.x")
    if wv is not None:
        x.vectorize(wv)
    return None


def row_block(sched, x, *, threads: int, vec: int):
    """One block per index of the first axis (the rows of a row-wise chain): the rest of the
    row over ``threads`` threads x ``vec`` contiguous elements.  Returns the row loop."""
    axes = list(x.stage.axes)
    row = axes[0]
    w = _fuse(x, axes[1:])
    wv = None
    if vec > 1:
        w, wv = x.split(w, factor=vec)
    wq, wt = x.split(w, factor=threads)
    x.reorder(*[a for a in (row, wt, wq, wv) if a is not None])
    x.bind(row, "blockIdx.x")
    x.bind(wt, "threadIdx.x")
    if wv is not None:
        x.vectorize(wv)
    return row


def attached_elementwise(sched, x, where, *, threads: int, vec: int):
    """An elementwise stage of a row-wise chain computed at the root's row loop ``where``:
    its second axis over the block's threads (an extent-1 axis: by thread 0)."""
    x.compute_at(*where)
    axes = list(x.stage.axes)
    last = axes[-1]
    if len(axes) == 1 or _const(last) == 1:
        _, t = x.split(last, factor=1)
        x.bind(t, "threadIdx.x")
        return
    wv = None
    if vec > 1:
        last, wv = x.split(last, factor=vec)
    q, t = x.split(last, factor=threads)
    x.reorder(*[a for a in (*axes[:-1], t, q, wv) if a is not None])
    x.bind(t, "threadIdx.x")
    if wv is not None:
        x.vectorize(wv)


def _const(iv):
    e = iv.dom.extent
    return int(e.value) if isinstance(e, n.Const) else None


# ---------------------------------------------------------------- reductions
def row_reduce(sched, x, *, tx: int, ty: int, vec: int, parts: int | None, unroll: int | None,
               attach=None):
    """A reduction along its contiguous (fused) reduce axis.

    ``tx`` threads of a row reduce it cross-thread (threadIdx.x), each first accumulating
    ``vec`` lanes (a local lane stage ``.rf``, vectorized) serially over the row; ``ty`` rows
    per block over threadIdx.y (``tx = 32``: a warp per row), the rest over blockIdx.x.
    ``parts`` > 1: the row is cut into that many contiguous chunks, each reduced by its own
    block into a global partial stage (a first kernel); the partials are then reduced by a
    second kernel (``combine``).  ``attach``: (consumer, loop) of a row-wise chain: the stage
    is computed at that block loop by the block's threads (no blockIdx of its own).
    Returns the row loop (blockIdx.x) when it is a single unsplit axis, else None."""
    k = _reduce_leaf(x)
    nsp = len(x.stage.axes)
    work = x
    kq, kf = x.split(k, factor=tx * vec)
    if parts and parts > 1 and attach is None:
        kp, kq = x.split(kq, nparts=parts)
        work = sched.rfactor(x, kp, nsp)          # work[S..., p]: one block per (row, part)
        kq, kf = work.stage.reduce_axes
        combine(sched, x, parts)
        nsp += 1
    lanes = None
    if vec > 1:
        lanes = sched.rfactor(work, kf, nsp)       # lanes[S..., f]: tx*vec per-thread partials
        kt, kv = work.split(work.reduce_axes[0], factor=vec)
        tail = [kt, kv]
    else:
        kt = kf
        tail = [kt, kq]
    if attach is not None:
        work.compute_at(*attach)
    spatial = [a for a in work.leaf if a.kind is n.IterKind.SPATIAL]
    row = None
    if attach is None and ty == 1 and len(spatial) > 1 and all(_const(a) == 1 for a in spatial[1:]):
        # keepdims rows (n, 1): the row axis alone over blocks, so that a row-wise chain's
        # producers can attach at it; the extent-1 axes stay (one-iteration) serial loops
        work.bind(spatial[0], "blockIdx.x")
        order, row = spatial, spatial[0]
    elif attach is None:
        blk = _fuse(work, spatial)
        order = [blk] if blk is not None else []
        if blk is not None and ty > 1:
            blk, bi = work.split(blk, factor=ty)
            order = [blk, bi]
            work.bind(bi, "threadIdx.y")
        if blk is not None:
            work.bind(blk, "blockIdx.x")
            row = blk if len(spatial) == 1 and ty == 1 else None
    else:
        order = spatial
    work.reorder(*order, *tail)
    work.bind(kt, "threadIdx.x")
    if lanes is not None:
        lanes.compute_at(work, kt)
        lanes.set_scope("local")
        *lsp, lf = lanes.stage.axes
        (lq,) = lanes.stage.reduce_axes
        lanes.reorder(*lsp, lq, lf)
        _unroll_serial(lanes, lq, unroll)
        lanes.vectorize(lf)
    else:
        _unroll_serial(work, kq, unroll)
    return row


def nested_reduce(sched, x, *, threads: int):
    """A 0-d reduction whose reduce loops nest (a range over another reduce axis, so they
    cannot be fused): ``threads`` threads of one block split the outermost reduce loop
    (strided) and reduce cross-thread; the inner loops run serially in each thread."""
    outer = next(a for a in x.leaf if a.kind is n.IterKind.REDUCE)
    kq, kt = x.split(outer, factor=threads)
    x.reorder(kt, kq)
    x.bind(kt, "threadIdx.x")


def combine(sched, x, parts: int):
    """The second pass of a split reduction: ``x`` reduces ``parts`` partials per output."""
    tx = min(32 if x.stage.axes else 256, 1 << max(0, math.ceil(math.log2(max(parts, 1)))))
    ty = max(1, 256 // tx) if x.stage.axes else 1
    row_reduce(sched, x, tx=tx, ty=ty, vec=1, parts=None, unroll=None)


def column_reduce(sched, x, *, threads: int, vec: int, parts: int | None, unroll: int | None):
    """A reduction whose reads walk memory along a spatial axis (the last one): each thread
    owns ``vec`` adjacent outputs (threadIdx.x across them: coalesced rows), accumulated in
    local memory serially over the reduction; ``parts`` > 1 cuts the reduction into chunks
    reduced by separate blocks (a global partial stage) and a second kernel adds them."""
    work = x
    if parts and parts > 1:
        # the reduce axes fused only here: cache_write below must come before any primitive
        # on the stage it caches (a column reduction over several axes: sum(axis=(0, 1)))
        rp, rr = x.split(_reduce_leaf(x), nparts=parts)
        work = sched.rfactor(x, rp, 0)             # work[p, S...]
        column_reduce(sched, x, threads=min(threads, 128), vec=1, parts=None, unroll=None)
    # a partial stage of several values (argmax's index and value) read together by the final
    # pass cannot be cached (a cache copies one value out), nor a tuple reduction whose members
    # are all used: it accumulates in place, each thread in its own elements of the buffer
    local = (sched.cache_write(work, "local")
             if (work is x or len(work.stage.values) == 1) and sched.cacheable(work) else None)
    *rest, j = work.stage.axes
    jv = None
    if vec > 1 and local is None and work.stage.reduce_axes:
        vec = 1     # no local accumulator to vectorize over the outputs of one thread
    if vec > 1:
        j, jv = work.split(j, factor=vec)
    jo, jt = work.split(j, factor=threads)
    own_red = list(work.stage.reduce_axes) if local is None else []
    work.reorder(*[a for a in (*rest, jo, jt, *own_red, jv) if a is not None])
    blk = _fuse(work, [*rest, jo])
    work.bind(blk, "blockIdx.x")
    work.bind(jt, "threadIdx.x")
    if jv is not None:
        work.vectorize(jv)
    if local is None:
        if own_red:
            _unroll_serial(work, own_red[-1], unroll)
        return None
    local.compute_at(work, jt)
    *lrest, lj = local.stage.axes
    red = list(local.stage.reduce_axes)
    local.reorder(*lrest, *red, lj)
    if red:
        _unroll_serial(local, red[-1], unroll)
    if vec > 1:
        local.vectorize(lj)
    return None


#: adjacent output rows per thread of a stencil (thread_per_output with a window)
STENCIL_ROWS = 8


def thread_per_output(sched, x, *, tx: int, ty: int, window: bool, unroll: int | None,
                      tiles: dict | None = None):
    """One output per thread, accumulated in local memory: the last two spatial axes as
    ``ty x tx`` thread tiles (x along the contiguous axis), the tiles and any leading axes
    over blockIdx.x; 1-D outputs over blocks of ``tx * ty`` threads.  ``window``: the
    reduction loops (a stencil's small constant window) are unrolled."""
    from kdsl.schedule.plan import spatial_names
    local = sched.cache_write(x, "local") if x.stage.is_reduction and sched.cacheable(x) else None
    axes = list(x.stage.axes)
    names = spatial_names(x.stage)
    tiles = tiles or {}
    if len(axes) >= 2:
        *rest, yi, xi = axes
        fy = tiles.get(names[-2], ty)
        fx = tiles.get(names[-1], tx)
        rows = 1
        if window and names[-2] not in tiles:
            # a stencil: STENCIL_ROWS adjacent output rows per thread, unrolled, so that the
            # window's input rows shared by neighbouring outputs are loaded once (the compiler
            # merges identical loads) and the block index arithmetic is paid once per rows
            rows = STENCIL_ROWS
            fy = ty * rows
        yo, yi = x.split(yi, factor=fy)
        xo, xi = x.split(xi, factor=fx)
        if rows > 1:
            yi, ys = x.split(yi, factor=rows)
            x.unroll(ys)
        elif fy > ty:
            ys, yi = x.split(yi, factor=ty)
        else:
            ys = None
        if fx > tx:
            xs, xi = x.split(xi, factor=tx)
        else:
            xs = None
        x.reorder(*[a for a in (*rest, yo, xo, yi, xi, ys, xs) if a is not None])
        x.bind(_fuse(x, [*rest, yo, xo]), "blockIdx.x")
        x.bind(yi, "threadIdx.y")
        x.bind(xi, "threadIdx.x")
        inner = xs or ys or xi
    elif axes:
        o, t = x.split(axes[0], factor=tx * ty)
        x.bind(o, "blockIdx.x")
        x.bind(t, "threadIdx.x")
        inner = t
    else:
        raise ValueError("thread_per_output needs spatial axes")
    if local is not None:
        local.compute_at(x, inner)
        red = list(local.stage.reduce_axes)
        if window:
            for a in red:
                local.unroll(a)
        elif red:
            _unroll_serial(local, red[-1], unroll)
    return None

