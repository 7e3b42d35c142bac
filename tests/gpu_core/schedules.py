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


def mm_shared_no_sync(s):
    """mm_threads with A and B tiles copied to shared memory per K block by the block's
    threads (one element each), read by the compute nest: today's lowering emits no barrier."""
    C = s["C"]
    AA = s.cache_read("A", "shared", [C])
    BB = s.cache_read("B", "shared", [C])
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
