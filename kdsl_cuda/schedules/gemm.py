"""The default cuda schedules of a matrix product ``C[.., i, j] = sum_k A[.., i, k] * B[.., k, j]``.

The seed-002 ladder's best step (examples/gemm_ladder.py): a ``bm x bn`` tile of C per block,
``ty x tx`` threads each accumulating ``bm/ty x bn/tx`` outputs in registers (``C.local``),
spread as ``vthreads x vthreads`` virtual threads (warp tiling: neighbouring threads read
neighbouring shared words); the reduction cut into ``bk``-long steps whose A and B tiles are
copied into shared memory by all the block's threads, ``vec`` elements per access (float4),
multi-buffered over the K loop with ``cp.async`` when ``stages`` >= 2; per k, each thread's
slices of the tiles read into registers.  The shared tiles are padded caches (zeros beyond the
matrix), so the copies' bounds are all in their predicates, which the ``interior_blocks`` pass
drops for blocks inside the matrices (with the k loop's prefetch test narrowing the k bound).  Batch axes go to blockIdx.z (fused into blockIdx.x
when there may be more than 65535 of them).

Configurations by size (``sched.size_hints``; unknown sizes get the large one):

* large  (enough 128x128 tiles for every SM): 128x128x8, 16x16 threads, 8x8 outputs each as
  2x2 vthreads of 4x4, float4 copies, double-buffered;
* medium: 64x64x8, 8x8 threads, 8x8 outputs each as 2x2 vthreads, float4, double-buffered;
* small:  32x32x8, 8x8 threads of 4x4, single-buffered (few K steps, few blocks);
* skinny (one of ``i``/``j`` at most 32, the other long): 16x128 (or 128x16) tiles, 4x32 (or
  32x4) threads of 4x4.

Hints: ``tile`` (``i``, ``j``, ``k`` steps), ``threads`` ((x, y) block shape), ``vectorize``
(elements per copy access), ``stages`` (>= 2: multi-buffered; the default's 2 otherwise),
``unroll`` (the k loop of each step), ``cache`` (``{"A": "local"}``: read that operand's slices
straight from global memory into registers, no shared tile; ``"shared"`` is the default),
``tensor_cores=True`` (16-bit inputs: warp-level 16x16x16 tensor-core tiles, ``wmma``).
Every choice is checked against the block's rules (``fits``) and shrunk where it would break
them; sizes that do not divide the tiles are guarded by the core.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from kdsl.schedule import patterns

from . import analysis as A

factors = patterns.matmul_factors


@dataclass(frozen=True)
class Config:
    """One GEMM configuration (see the module docstring)."""
    bm: int
    bn: int
    bk: int = 8
    ty: int = 8
    tx: int = 8
    vthreads: int = 1
    vec: int = 1
    stages: int | None = None
    unroll: int | None = None


LARGE = Config(128, 128, 8, 16, 16, vthreads=2, vec=4, stages=2)
MEDIUM = Config(64, 64, 8, 8, 8, vthreads=2, vec=4, stages=2)
SMALL = Config(32, 32, 8, 8, 8)
SKINNY_I = Config(16, 128, 8, 4, 32)     # few rows: a row tile of 16, threads across columns
SKINNY_J = Config(128, 16, 8, 32, 4)
#: back-compatible names (the medium tile)
BM = BN = 64
BK = 8
TY = TX = 8
SMS = 132
#: at most this many blocks along blockIdx.y / z (CUDA's limit)
GRID_YZ = 65535


def is_matmul(stage) -> bool:
    """``sum_k X[.., i, k] * Y[.., k, j]`` of two different tensors (kdsl.schedule.patterns):
    the tiled recipe caches each in shared memory."""
    return patterns.is_matmul(stage, distinct=True)


def _clamp(tile, axis):
    """A split of a constant extent by a larger factor is that extent (kdsl's schedules)."""
    c = A.const_extent(axis)
    return tile if c is None or c < 1 else min(tile, c)


def fits(stage, *, bm=BM, bn=BN, bk=BK, ty=TY, tx=TX, vec=1, cache=None, vthreads=1, **_) -> bool:
    """Whether the tiled GEMM is a legal GPU kernel for ``stage``'s constant extents: every loop
    bound to a thread index must have the block's extent, i.e. C's thread loops (``i`` and ``j``
    at least ``ty`` and ``tx``, per virtual thread) and the cooperative copies (each shared
    tile at least ``ty * tx`` vectors of ``vec``).  Symbolic extents keep the full tiles."""
    *_, i, j = stage.axes
    (k,) = stage.reduce_axes
    bm, bn = max(bm, ty), max(bn, tx)
    ri, rj, rk = _clamp(bm, i), _clamp(bn, j), _clamp(bk, k)
    threads = ty * tx
    cache = cache or {}
    a_t, b_t = (r.tensor.name for r in factors(stage))
    ok = ri >= ty * vthreads and rj >= tx * vthreads
    if cache.get(a_t, "shared") == "shared":
        ok = ok and ri * -(-rk // vec) >= threads
    if cache.get(b_t, "shared") == "shared":
        ok = ok and rk * -(-rj // vec) >= threads
    return ok


def default_config(sched, stage) -> Config:
    """The configuration for the stage's sizes (module docstring), before hints."""
    *_, i, j = stage.axes
    ri, rj = A.extent_range(sched, i), A.extent_range(sched, j)
    if ri is None or rj is None:
        return LARGE
    ni, nj = A.typical(sched, [i]), A.typical(sched, [j])
    if ni <= 32 and nj >= 256:
        return SKINNY_I
    if nj <= 32 and ni >= 256:
        return SKINNY_J
    batch = A.typical(sched, stage.axes[:-2]) or 1 if len(stage.axes) > 2 else 1
    tiles = lambda b: batch * -(-ni // b) * -(-nj // b)    # noqa: E731
    if tiles(128) >= SMS:
        return LARGE
    if tiles(64) >= SMS:
        return MEDIUM
    return SMALL


def _vec_default(stage) -> int:
    """float4-sized copies: 4 elements of 4 bytes, 2 of 8; 16-bit and smaller copy singly (the
    codegen has no vector form for them)."""
    size = A.item_bytes(stage)
    return {4: 4, 8: 2}.get(size, 1)


def choose(sched, h, plan, hw: dict, threads) -> dict:
    """gemm() keywords: the size class's configuration adjusted by the hints, then shrunk
    (vector width, virtual threads, threads) until ``fits`` holds; None fields unset."""
    from kdsl.schedule.plan import reduce_names, spatial_names
    st = h.stage
    *_, i, j = spatial_names(st)
    (k,) = reduce_names(st)
    c = default_config(sched, st)
    c = replace(c, vec=min(c.vec, _vec_default(st)) if c.vec > 1 else 1)
    tiled = any(x in plan.tile for x in (i, j, k))
    c = replace(c, bm=plan.tile.get(i, c.bm), bn=plan.tile.get(j, c.bn), bk=plan.tile.get(k, c.bk))
    if threads is not None:
        c = replace(c, tx=threads[0], ty=threads[1])
    if "vectorize" in plan.explicit:
        c = replace(c, vec=plan.vectorize or 1)
    if hw.get("stages"):
        c = replace(c, stages=hw["stages"])
    if plan.unroll:
        c = replace(c, unroll=plan.unroll)
    cache = dict(hw.get("cache") or {})
    # virtual threads need an even per-thread tile of at least 2x2 per virtual thread
    if c.vthreads > 1 and ((c.bm // c.ty) % (2 * c.vthreads) or (c.bn // c.tx) % (2 * c.vthreads)):
        c = replace(c, vthreads=1)

    def ok(cfg):
        return fits(st, **vars(cfg), cache=cache)
    while not ok(c) and c.vec > 1 and "vectorize" not in plan.explicit:
        c = replace(c, vec=c.vec // 2)
    if not ok(c) and c.vthreads > 1:
        c = replace(c, vthreads=1)
    while not ok(c) and threads is None and tiled and c.ty * c.tx > 32:
        # a hinted small tile: fewer threads, so that the copies still cover the block
        c = replace(c, ty=max(1, c.ty // 2), tx=max(1, c.tx // 2))
    return dict(vars(c), cache=cache)


def gemm(sched, C, *, bm=BM, bn=BN, bk=BK, ty=TY, tx=TX, vec=1, stages=None, unroll=None,
         vthreads=1, cache=None):
    """Realise the tiled shared-memory matmul on stage handle ``C`` (see the module docstring)."""
    a_t, b_t = (r.tensor for r in factors(C.stage))
    cache = cache or {}
    bm, bn = max(bm, ty), max(bn, tx)
    CL = sched.cache_write(C, "local")
    shared = {t.name: cache.get(t.name, "shared") == "shared" for t in (a_t, b_t)}
    staged = [sched.cache_read(t, "shared", [CL], pad=True) if shared[t.name] else None
              for t in (a_t, b_t)]
    # per k, each thread's slices in registers: from the shared tile, or straight from global
    locals_ = [sched.cache_read(X if X is not None else t, "local", [CL])
               for X, t in zip(staged, (a_t, b_t))]
    *batch, i, j = C.stage.axes
    by, yi = C.split(i, factor=bm)
    bx, xi = C.split(j, factor=bn)
    if vthreads > 1:
        vy, yi = C.split(yi, nparts=vthreads)
        tyl, yi = C.split(yi, nparts=ty)
        vx, xi = C.split(xi, nparts=vthreads)
        txl, xi = C.split(xi, nparts=tx)
        C.reorder(*batch, by, bx, vy, vx, tyl, txl, yi, xi)
        C.bind(vy, "vthread.y")
        C.bind(vx, "vthread.x")
    else:
        tyl, yi = C.split(yi, nparts=ty)
        txl, xi = C.split(xi, nparts=tx)
        C.reorder(*batch, by, bx, tyl, txl, yi, xi)
    bind_blocks(sched, C, batch, by, bx)
    C.bind(tyl, "threadIdx.y")
    C.bind(txl, "threadIdx.x")
    if vec > 1:     # (vectorize=1: no vector access at all)
        _vector_stores(C, xi, bn // (tx * vthreads))
    CL.compute_at(C, txl)
    (k,) = CL.stage.reduce_axes
    ko, ki = CL.split(k, factor=bk)
    *cb, ci, cj = CL.stage.axes
    CL.reorder(*cb, ko, ki, ci, cj)
    if unroll and unroll > 1:
        CL.unroll(ki)
    for L in locals_:
        L.compute_at(CL, ki)
    for X in staged:
        if X is None:
            continue
        X.compute_at(CL, ko)
        coop_copy(X, vec, ("threadIdx.y", ty), ("threadIdx.x", tx))
        multi_buffer(X, stages, k, bk)


def _vector_stores(C, xi, run: int) -> None:
    """Store each thread's run of ``run`` adjacent outputs of a row as one 16-byte (or 8-byte)
    vector where it is one (4-byte elements: 4; 8-byte: 2): a skinny product's output is most
    of its traffic, and scalar stores of 4 bytes at a 16-byte stride left three quarters of
    each warp store's sectors to later instructions (8192 x 64 x 8192 float32: 0.69x cuBLAS)."""
    item = C.stage.dtype.itemsize
    if run * item in (8, 16) and (A.const_extent(C.stage.axes[-1]) or run) >= run:
        C.vectorize(xi)


def multi_buffer(X, stages, k, bk) -> None:
    """Stage X's copy (attached at the k-step loop of reduce axis ``k``, steps of ``bk``) in
    ``stages`` ring buffers: 2 ``double_buffer()``, more ``pipeline(stages)``, fewer none; none
    either where ``k`` is a constant of one step (no k loop is left to overlap the copies
    with, and a pipelined stage needs one)."""
    if stages and stages >= 2 and (A.const_extent(k) or bk + 1) > bk:
        X.double_buffer() if stages == 2 else X.pipeline(stages)


def size_bound(sched, iv) -> int | None:
    """The largest size axis ``iv`` may have: its constant extent, or the top of its hinted
    range (``sched.size_hints``); None when unknown."""
    c = A.const_extent(iv)
    if c is not None:
        return c
    rng = A.extent_range(sched, iv)
    return rng[1] if rng else None


def bind_blocks(sched, C, batch, by, bx):
    """Row and column tiles fused on blockIdx.x (column tiles fastest: neighbouring blocks share
    an A panel); batch axes on blockIdx.z when there are at most 65535 of them, else fused
    into blockIdx.x too."""
    hi = 1 if batch else None
    for a in C.stage.axes[:-2]:
        r = A.extent_range(sched, a)
        hi = None if r is None or hi is None else hi * r[1]
    if batch and hi is not None and hi <= GRID_YZ:
        C.bind(C.fuse(*batch) if len(batch) > 1 else batch[0], "blockIdx.z")
        C.bind(C.fuse(by, bx), "blockIdx.x")
    else:
        C.bind(C.fuse(*batch, by, bx), "blockIdx.x")


def coop_copy(X, vec, *threads):
    """All the block's threads copy stage X's region: its last axis cut in ``vec``-element
    vectors (vectorized: one 16-byte access or cp.async each), the rest fused and dealt out in
    turn over ``threads``, (thread tag, extent) pairs from the slowest to the fastest
    (consecutive threads take consecutive vectors: coalesced reads)."""
    *rows, col = X.axes
    v = None
    if vec > 1:
        col, v = X.split(col, factor=vec)
    f = X.fuse(*rows, col) if rows else col
    total = 1
    for _, ext in threads:
        total *= ext
    _, t = X.split(f, factor=total)
    for tag, ext in threads[:-1]:
        total //= ext
        o, t = X.split(t, factor=total)
        X.bind(o, tag)
    X.bind(t, threads[-1][0])
    if v is not None:
        X.vectorize(v)
