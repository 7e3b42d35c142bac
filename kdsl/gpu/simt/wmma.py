"""Warp-level WMMA statements in the SIMT executor.

A warp is 32 consecutive threads of a block (``tid // 32``, x fastest): a kernel with wmma
statements runs 32 lanes along threadIdx.x (x extent 1 without a threadIdx.x loop becomes 32;
another extent that is not a multiple of 32 is an error).  A fragment buffer is one array per
warp, ``(warps,) + shape``, reachable only through the wmma statements.  A wmma statement is
executed by whole warps: every thread of a warp that reaches it must be active, and its
operands (tiles, origins, extents) must be the same on every thread of the warp; each active
warp then does what ``kdsl.gpu.wmma_defs`` defines.  Shared-memory tiles it reads or
writes go through the race checker, attributed to the warp (an element last touched by a
thread of the same warp does not conflict: the ``_sync`` operations wait for every lane).
"""
from __future__ import annotations

import numpy as np

from ...ir import nodes as n
from ...ir.visitor import collect
from ...numerics import pyexec_rt as rt
from .. import wmma_defs as wd
from . import async_mma
from .races import BarrierDivergence, RaceError, SimtError, SimtOutOfBounds, _Mem

WARP = 32


def has_wmma(kernel: n.Stmt) -> bool:
    return bool(collect(kernel, lambda x: isinstance(x, n.WMMA_STMTS)))


def kernel_dims(ex, kernel: n.Stmt, dims: list) -> list:
    """Block dims of a kernel that holds wmma statements: 32 lanes along x."""
    if dims[0] == 1:
        dims[0] = WARP
    if dims[0] % WARP:
        raise SimtError(f"kernel of {ex.func.name!r}: its threadIdx.x extent is {dims[0]}, but it holds "
                        f"wmma statements, which need whole warps of {WARP} lanes along threadIdx.x",
                        ex.func.name)
    return dims


def alloc_fragment(ex, b: n.Buffer, shape: tuple):
    """One ``shape`` array per warp of the block (zeroed)."""
    warps = max(ex.T // WARP, 1)
    return _Mem(rt.alloc((warps,) + shape, rt.storage_np(b.dtype), b.name))


def scalar_access(ex, b: n.Buffer, what: str):
    """A Load/Store of a fragment (which only wmma statements may touch)."""
    raise SimtError(f"{ex._where()}: {what} of the {b.scope.value} fragment {b.name!r} element by "
                    f"element; fragment data is only accessible through wmma statements:\n"
                    f"    {ex._line(ex.cur)}", ex.kernel or ex.func.name)


def _warps(ex):
    """The active warps (all 32 threads active), after checking no warp is split."""
    if ex.kernel is None:
        raise SimtError(f"{ex._where()}: a wmma statement in host code; it is executed by a warp "
                        f"of a kernel:\n    {ex._line(ex.cur)}", ex.func.name)
    nw = ex.T // WARP
    mask = ex.mask[:nw * WARP].reshape(nw, WARP)
    split = np.flatnonzero(mask.any(1) & ~mask.all(1))
    if split.size:
        w = int(split[0])
        lanes = np.arange(w * WARP, (w + 1) * WARP)
        here = [ex.thread(t) for t in lanes[mask[w]][:4]]
        away = [ex.thread(t) for t in lanes[~mask[w]][:4]]
        raise BarrierDivergence(
            f"{ex._where()}: a wmma statement reached by threads {_few(here, int(mask[w].sum()))} of "
            f"warp {w} and not by its threads {_few(away, int((~mask[w]).sum()))}; every thread of a "
            f"warp must execute it:\n    {ex._line(ex.cur)}", ex.kernel)
    return np.flatnonzero(mask.all(1))


def _few(threads, total):
    text = ", ".join(str(t) for t in threads)
    return text + (f" (and {total - len(threads)} more)" if total > len(threads) else "")


def _per_warp(ex, exprs, warps, what: str) -> list:
    """The values of ``exprs`` for each warp in ``warps`` (the same on all its threads)."""
    cols = []
    for e in exprs:
        v = np.asarray(ex.ev(e))
        if v.ndim == 0:
            cols.append(np.full(warps.size, v.item()))
            continue
        vw = v[:ex.T // WARP * WARP].reshape(-1, WARP)[warps]
        bad = np.flatnonzero((vw != vw[:, :1]).any(1))
        if bad.size:
            w = int(warps[bad[0]])
            raise SimtError(f"{ex._where()}: {what} differs between the threads of warp {w} "
                            f"({vw[bad[0]].tolist()[:4]}...); a wmma operand is one value per warp:\n"
                            f"    {ex._line(ex.cur)}", ex.kernel)
        cols.append(vw[:, 0])
    return [tuple(c[i].item() for c in cols) for i in range(warps.size)]


def _frag(ex, b: n.Buffer, w: int, tile, rows: int, cols: int):
    m = ex.frags.get(b)
    if m is None:
        from ...errors import InternalCompilerError
        raise InternalCompilerError(f"wmma statement on fragment {b.name!r} outside its allocation "
                                    f"(kernel {ex.func.name!r})")
    try:
        return wd.frag_tile(m.data[w], tile, rows, cols)
    except wd.TileOutOfBounds as e:
        raise SimtOutOfBounds(f"{ex._where()}: tile {e.index} of the {b.scope.value} fragment {b.name!r} "
                              f"(shape {m.data.shape[1:]}) is outside it, in warp {w}:\n    "
                              f"{ex._line(ex.cur)}", ex.kernel) from None


def _mem(ex, b: n.Buffer):
    m = ex.mem.get(b)
    if m is None:
        from ...errors import InternalCompilerError
        raise InternalCompilerError(f"wmma access of buffer {b.name!r} outside its allocation "
                                    f"(kernel {ex.func.name!r})")
    if m.per_thread:
        raise SimtError(f"{ex._where()}: a wmma statement on the local buffer {b.name!r}; a warp "
                        f"loads and stores tiles of shared or global memory:\n    {ex._line(ex.cur)}", ex.kernel)
    return m


def _race(ex, m, b: n.Buffer, region, w: int, store: bool):
    """Record a warp's access of ``region`` of shared buffer ``b`` in its shadow."""
    if m.shadow is None:
        return
    grid = np.zeros(m.data.shape, bool)
    grid[region] = True
    flat = np.flatnonzero(grid)
    sh = m.shadow
    tids = np.full(flat.size, w * WARP, np.int64)
    for arr in ((sh.w_tid, sh.r_tid, sh.r_tid2) if store else (sh.w_tid,)):
        prev = arr[flat]
        same = (prev >= 0) & (prev // WARP == w)
        tids[same] = prev[same]
    got = (sh.on_store if store else sh.on_load)(flat, tids, ex.cur)
    if got is None:
        return
    kind, f, (t1, s1), (t2, s2) = got
    element = tuple(int(x) for x in np.unravel_index(int(f), m.data.shape))
    th = (ex.thread(t1), ex.thread(t2))
    first, second = ex._line(s1), ex._line(s2)
    raise RaceError(f"{ex._where()}: {kind} race on {b.scope.value} buffer {b.name!r} element {element}: "
                    f"warp {w} (thread {th[1]}) {'wrote' if store else 'read'} it in\n    {second}\n  after "
                    f"thread {th[0]} accessed it in\n    {first}\n  with no barrier between them",
                    ex.kernel, kind, b.name, element, th, (first, second))


def _region(ex, b, arr, origin, col_major, rows, cols, extents, w, what, dims=(-2, -1)):
    rv = min(max(int(extents[0]), 0), rows)
    cv = min(max(int(extents[1]), 0), cols)
    if not (rv and cv):
        return None
    try:
        return wd._region(arr.shape, origin, col_major, rv, cv, dims)
    except wd.TileOutOfBounds as e:
        raise SimtOutOfBounds(f"{ex._where()}: out-of-bounds {what} of {b.scope.value} buffer {b.name!r} "
                              f"(shape {arr.shape}) at {e.index} by warp {w}:\n    {ex._line(ex.cur)}",
                              ex.kernel) from None


def _warpgroups(ex, s, warps, vals) -> None:
    """A ``WgmmaMma`` runs on whole warpgroups (warps 4g..4g+3): all four reach it, with A
    tiles of consecutive 16-row blocks, one B tile and one accumulator tile."""
    nw = ex.T // WARP
    if nw % 4:
        raise SimtError(f"{ex._where()}: a wgmma statement in a block of {nw} warps; it runs on "
                        f"warpgroups of 4 warps:\n    {ex._line(ex.cur)}", ex.kernel)
    got = dict(zip(warps.tolist(), vals))
    row = len(s.a_origin) - (2 if s.a_layout is n.WmmaLayout.ROW_MAJOR else 1)
    na = len(s.a_origin)
    for g in sorted({w // 4 for w in got}):
        group = [4 * g + i for i in range(4)]
        away = [w for w in group if w not in got]
        if away:
            raise BarrierDivergence(
                f"{ex._where()}: a wgmma statement reached by warps {[w for w in group if w in got]} of "
                f"warpgroup {g} and not by warps {away}; the four warps of a warpgroup run it together:"
                f"\n    {ex._line(ex.cur)}", ex.kernel)
        first = got[group[0]]
        for i, w in enumerate(group[1:], 1):
            v = got[w]
            a0, a = first[4:4 + na], v[4:4 + na]
            want = tuple(x + (16 * i if d == row else 0) for d, x in enumerate(a0))
            if a != want or v[:4] != first[:4] or v[4 + na:] != first[4 + na:]:
                raise SimtError(
                    f"{ex._where()}: warp {w} of warpgroup {g} multiplies A at {a}, B at {v[4 + na:]} into "
                    f"tiles {v[:4]}; the group's warp {group[0]} at {a0}, B at {first[4 + na:]}, tiles "
                    f"{first[:4]}: a warpgroup's warps take consecutive 16-row blocks of one A tile, "
                    f"one B tile and one accumulator tile:\n    {ex._line(ex.cur)}", ex.kernel)


def _wgmma(ex, s, warps) -> None:
    """``WgmmaMma`` for every active warp (after the warpgroup checks)."""
    m, nn, k = s.shape
    vals = _per_warp(ex, s.d_tile + s.c_tile + s.a_origin + s.b_origin, warps, "a wgmma operand")
    _warpgroups(ex, s, warps, vals)
    na = len(s.a_origin)
    ma, mb = _mem(ex, s.a), _mem(ex, s.b)
    for w, v in zip(warps.tolist(), vals):
        tiles, reads = [], []
        for buf, mem, origin, layout, rows, cols in ((s.a, ma, v[4:4 + na], s.a_layout, m, k),
                                                    (s.b, mb, v[4 + na:], s.b_layout, k, nn)):
            col = layout is n.WmmaLayout.COL_MAJOR
            region = _region(ex, buf, mem.data, origin, col, rows, cols, (rows, cols), w, "wgmma read")
            _race(ex, mem, buf, region, w, store=False)
            part = mem.data[region]
            tiles.append(part.T if col else part)
            if ex.async_mma:        # asynchronous kernels: the tiles stay read until a wait
                grid = np.zeros(mem.data.shape, bool)
                grid[region] = True
                reads.append((mem, buf, np.flatnonzero(grid)))
        if reads:
            async_mma.issue(ex, w, reads, s.d)
        wd.mma(_frag(ex, s.d, w, v[0:2], m, nn), tiles[0], tiles[1], _frag(ex, s.c, w, v[2:4], m, nn))


def run(ex, s) -> None:
    """Execute warp statement ``s`` for every active warp of the block."""
    warps = _warps(ex)
    if warps.size == 0:
        return
    t = type(s)
    if t is n.WgmmaMma:
        _wgmma(ex, s, warps)
        return
    if t is n.WmmaMma:
        m, nn, k = s.shape
        tiles = _per_warp(ex, s.d_tile + s.a_tile + s.b_tile + s.c_tile, warps, "a fragment tile")
        for w, tl in zip(warps.tolist(), tiles):
            wd.mma(_frag(ex, s.d, w, tl[0:2], m, nn), _frag(ex, s.a, w, tl[2:4], m, k),
                   _frag(ex, s.b, w, tl[4:6], k, nn), _frag(ex, s.c, w, tl[6:8], m, nn))
        return
    rows, cols = wd.tile_dims(s.frag.scope, s.shape)
    if s.frag.scope is n.Scope.WMMA_ACCUMULATOR:
        async_mma.check_fragment(ex, s.frag, warps)
    if t is n.WmmaFill:
        vals = _per_warp(ex, s.tile + (s.value,), warps, "the fill value or tile")
        for w, v in zip(warps.tolist(), vals):
            wd.fill(_frag(ex, s.frag, w, v[:2], rows, cols), v[2])
        return
    load = t is n.WmmaLoad
    b = s.src if load else s.dst
    mem = _mem(ex, b)
    col = s.layout is n.WmmaLayout.COL_MAJOR
    vals = _per_warp(ex, s.tile + s.origin + s.extents, warps, "a wmma operand")
    nd = len(s.origin)
    for w, v in zip(warps.tolist(), vals):
        tile, origin, ext = v[:2], v[2:2 + nd], v[2 + nd:]
        view = _frag(ex, s.frag, w, tile, rows, cols)
        region = _region(ex, b, mem.data, origin, col, rows, cols, ext, w,
                         "wmma load" if load else "wmma store", s.dims)
        if region is not None:
            _race(ex, mem, b, region, w, store=not load)
        if load:
            wd.load(view, mem.data, origin, col, ext, s.dims)
        else:
            wd.store(mem.data, origin, col, view, ext, wd.to_bf16(s), s.dims)


__all__ = ["WARP", "has_wmma", "kernel_dims", "alloc_fragment", "scalar_access", "run"]
