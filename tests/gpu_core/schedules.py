"""Small GPU schedules and graphs shared by the gpu_core tests."""
import numpy as np

from handgraph import Builder, matmul_graph, read, rowsum_graph, sum_  # noqa: F401  (re-exported)
from kdsl import dtypes as dt
from kdsl.ir import nodes as n


def scale_graph():
    """O[i, j] = A[i, j] * 2 + 1 (elementwise, float64)."""
    b = Builder("scale")
    A = b.input("A", ("n", "m"), dt.float64)
    i, j = b.axis("i", b.dim("n")), b.axis("j", b.dim("m"))
    two, one = n.const(2.0, dt.float64), n.const(1.0, dt.float64)
    body = n.Binary(dt.float64, n.BinOp.ADD, n.Binary(dt.float64, n.BinOp.MUL, read(A, i, j), two), one)
    return b.graph(b.compute("O", [i, j], body))


def tile_2d(st, ty, tx):
    """Tile ``st``'s two axes by (ty, tx): the tiles over blockIdx.y/x, each tile's elements
    over threadIdx.y/x (one per thread); returns the four loops."""
    io, jo, ii, ji = st.tile(st.axes[0], st.axes[1], ty, tx)
    for ax, tag in ((io, "blockIdx.y"), (jo, "blockIdx.x"), (ii, "threadIdx.y"), (ji, "threadIdx.x")):
        st.bind(ax, tag)
    return io, jo, ii, ji


def elementwise_2d(s):
    """8x4 threads per block over a 2-D grid of blocks."""
    tile_2d(s["O"], 4, 8)


def row_per_block(s):
    """One row per block, its sum split over 16 threads: rfactor + cross-thread reduction."""
    B = s["B"]
    ko, ki = B.split(B.reduce_axes[0], factor=16)
    BF = s.rfactor(B, ki)
    B.bind(B.axes[0], "blockIdx.x")
    B.bind(B.reduce_axes[0], "threadIdx.x")
    BF.compute_at(B, B.reduce_axes[0])


def mm_threads(s):
    """An 8x8 tile of C per block, one element per thread, no shared memory."""
    tile_2d(s["C"], 8, 8)


def mm_shared_no_sync(s, pad=False):
    """mm_threads with A and B tiles copied to shared memory per K block by the block's
    threads (one element each), read by the compute nest (the sync pass puts the barriers
    between; tests that need a race lower it without that pass).  ``pad``: padded caches."""
    C = s["C"]
    AA = s.cache_read("A", "shared", [C], pad=pad)
    BB = s.cache_read("B", "shared", [C], pad=pad)
    io, jo, ii, ji = C.tile(C.axes[0], C.axes[1], 8, 8)
    ko, ki = C.split(C.reduce_axes[0], factor=8)
    C.reorder(io, jo, ko, ii, ji, ki)
    C.bind(io, "blockIdx.y")
    C.bind(jo, "blockIdx.x")
    C.bind(ii, "threadIdx.y")
    C.bind(ji, "threadIdx.x")
    for X in (AA, BB):
        X.compute_at(C, ko)
        X.bind(X.axes[0], "threadIdx.y")
        X.bind(X.axes[1], "threadIdx.x")


def rand(rng, shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


def mm_vthread(s, block=16, vthreads=2, threads=4):
    """Seed-002 warp tiling, scaled down: a block x block tile of C per block, split over
    vthread.y/x (outermost), threadIdx.y/x, then each thread's own block/(vthreads*threads)
    square; C accumulates in a local cache attached at threadIdx.x (one per virtual thread)."""
    C = s["C"]
    CL = s.cache_write(C, "local")
    by, yi = C.split(C.axes[0], factor=block)
    bx, xi = C.split(C.axes[1], factor=block)
    vy, yi = C.split(yi, nparts=vthreads)
    ty, yi = C.split(yi, nparts=threads)
    vx, xi = C.split(xi, nparts=vthreads)
    tx, xi = C.split(xi, nparts=threads)
    C.reorder(by, bx, vy, vx, ty, tx, yi, xi)
    for ax, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (vy, "vthread.y"), (vx, "vthread.x"),
                    (ty, "threadIdx.y"), (tx, "threadIdx.x")):
        C.bind(ax, tag)
    CL.compute_at(C, tx)


def mm_double_buffer(s, stages=2):
    """mm_shared_no_sync with both shared tiles pipelined over the K-tile loop (``stages=2``:
    double_buffer(), else pipeline(stages))."""
    mm_shared_no_sync(s)
    for name in ("A.shared", "B.shared"):
        if stages == 2:
            s[name].double_buffer()
        else:
            s[name].pipeline(stages)


# ---------------------------------------------------------------- the seed-002 GEMM ladder
# (scaled down: 32x32 block tiles, BK = 8, 8x8 threads, 4x4 elements per thread; the
# full-size thread tiling is 128x128, BK = 8, 16x16 threads, 8x8 per thread)

def ladder_naive(s):
    """Step 0: one row of C per block, 32 columns per block row over threadIdx.x."""
    C = s["C"]
    jo, ji = C.split(C.axes[1], factor=32)
    C.reorder(C.axes[0], jo, ji)
    C.bind(C.axes[0], "blockIdx.x")
    C.bind(jo, "blockIdx.y")
    C.bind(ji, "threadIdx.x")


def _coop_copy(X, ty, tx, vec=1):
    """Copy stage ``X`` (attached inside the block) by all ty*tx threads of the block: its
    region's elements fused, dealt out in turn (serial loop outside), ``vec`` consecutive
    elements per thread and turn (a vectorised inner loop: the seed's float4 copies)."""
    f = X.fuse(*X.axes)
    if vec > 1:
        f, v = X.split(f, factor=vec)
        X.vectorize(v)
    o, t = X.split(f, factor=ty * tx)
    y, x = X.split(t, factor=tx)
    X.bind(y, "threadIdx.y")
    X.bind(x, "threadIdx.x")
    return o


def ladder_blocked(s, tile=8, bk=8):
    """Step 1: a tile x tile block tile, one element of C per thread accumulated in a local
    C.local, A and B tiles of BK columns/rows copied to shared memory per K step."""
    C = s["C"]
    CL = s.cache_write(C, "local")
    AA = s.cache_read("A", "shared", [CL])
    BB = s.cache_read("B", "shared", [CL])
    tile_2d(C, tile, tile)
    CL.compute_at(C, C.leaf[3])
    ko, ki = CL.split(CL.reduce_axes[0], factor=bk)
    CL.reorder(ko, ki, *CL.axes)
    for X in (AA, BB):
        X.compute_at(CL, ko)
        _coop_copy(X, tile, tile)


def ladder_thread_tiling(block=32, bk=8, threads=8, vthreads=1, vec=1, stages=1):
    """Steps 2-5 (a schedule factory): block x block tiles of C per block, threads x threads
    threads each computing a (block/threads)^2 tile in C.local; A/B tiles of BK in shared
    memory (copied by all threads) and their per-thread slices in local memory per k.
    ``vthreads`` > 1 (warp tiling): each thread's tile spread as vthreads x vthreads virtual
    threads (vthread.y/x outermost in the block, one local tile each); ``vec``: copies of
    ``vec`` consecutive elements per thread; ``stages`` >= 2: shared tiles pipelined."""
    per = block // threads

    def sched(s):
        C = s["C"]
        CL = s.cache_write(C, "local")
        AA = s.cache_read("A", "shared", [CL])
        BB = s.cache_read("B", "shared", [CL])
        AL = s.cache_read(AA, "local", [CL])
        BL = s.cache_read(BB, "local", [CL])
        by, bx, yi, xi = C.tile(C.axes[0], C.axes[1], block, block)
        if vthreads > 1:
            vy, yi = C.split(yi, nparts=vthreads)
            ty, yi = C.split(yi, nparts=threads)
            vx, xi = C.split(xi, nparts=vthreads)
            tx, xi = C.split(xi, nparts=threads)
            C.reorder(by, bx, vy, vx, ty, tx, yi, xi)
            C.bind(vy, "vthread.y")
            C.bind(vx, "vthread.x")
        else:
            ty, yi = C.split(yi, factor=per)
            tx, xi = C.split(xi, factor=per)
            C.reorder(by, bx, ty, tx, yi, xi)
        for ax, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y"), (tx, "threadIdx.x")):
            C.bind(ax, tag)
        CL.compute_at(C, tx)
        ko, ki = CL.split(CL.reduce_axes[0], factor=bk)
        CL.reorder(ko, ki, *CL.axes)
        AL.compute_at(CL, ki)
        BL.compute_at(CL, ki)
        for X in (AA, BB):
            X.compute_at(CL, ko)
            _coop_copy(X, threads, threads, vec)
            if stages == 2:
                X.double_buffer()
            elif stages > 2:
                X.pipeline(stages)
    name = f"ladder_thread_tiling_{block}_{bk}_{threads}"
    sched.__name__ = name + "".join(f"_{k}{v}" for k, v in (("vthreads", vthreads), ("vec", vec),
                                                              ("stages", stages)) if v > 1)
    return sched


def conv3x3_graph(dtype=dt.float32):
    """O[i, j] = sum_{di, dj} I[i + di, j + dj] * W[di, dj] over an (h, w) input ('valid':
    O is (h - 2, w - 2))."""
    from kdsl.ir import make as mk
    b = Builder("conv")
    I = b.input("I", ("h", "w"), dtype)
    W = b.input("W", (3, 3), dtype)
    i, j = b.axis("i", mk.sub(b.dim("h"), 2)), b.axis("j", mk.sub(b.dim("w"), 2))
    di, dj = b.raxis("di", 3), b.raxis("dj", 3)
    d = dt.as_dtype(dtype)
    src = n.Binary(d, n.BinOp.MUL, read(I, mk.add(i.var, di.var), mk.add(j.var, dj.var)), read(W, di, dj))
    return b.graph(b.compute("O", [i, j], sum_(src, [di, dj]), [di, dj]))


def conv_shared_tile(s, tile=8):
    """tile x tile outputs per block, one per thread; the (tile+2)^2 input tile copied to
    shared memory by the block's threads (attached inside the thread loops: relaxed to the
    block's tile, allocated at block level); the 3x3 weights read from global memory (a
    shared copy of 9 elements would need other thread extents than the block's)."""
    O = s["O"]
    IS = s.cache_read("I", "shared", [O])
    tile_2d(O, tile, tile)
    IS.compute_at(O, O.leaf[3])
    _coop_copy(IS, tile, tile)
