"""Small GPU schedules and graphs shared by the gpu_core tests."""
import numpy as np

from handgraph import Builder, read, sum_
from kdsl import dtypes as dt
from kdsl.ir import nodes as n


def rowsum_graph(dtype=dt.float32):
    b = Builder("rowsum")
    A = b.input("A", ("n", "m"), dtype)
    i, k = b.axis("i", b.dim("n")), b.raxis("k", b.dim("m"))
    return b.graph(b.compute("B", [i], sum_(read(A, i, k), [k]), [k]))


def scale_graph():
    """O[i, j] = A[i, j] * 2 + 1 (elementwise, float64)."""
    b = Builder("scale")
    A = b.input("A", ("n", "m"), dt.float64)
    i, j = b.axis("i", b.dim("n")), b.axis("j", b.dim("m"))
    two, one = n.const(2.0, dt.float64), n.const(1.0, dt.float64)
    body = n.Binary(dt.float64, n.BinOp.ADD, n.Binary(dt.float64, n.BinOp.MUL, read(A, i, j), two), one)
    return b.graph(b.compute("O", [i, j], body))


def matmul_graph():
    b = Builder("mm")
    A = b.input("A", ("n", "k"), dt.float32)
    B = b.input("B", ("k", "m"), dt.float32)
    i, j, r = b.axis("i", b.dim("n")), b.axis("j", b.dim("m")), b.raxis("r", b.dim("k"))
    prod = n.Binary(dt.float32, n.BinOp.MUL, read(A, i, r), read(B, r, j))
    return b.graph(b.compute("C", [i, j], sum_(prod, [r]), [r]))


def elementwise_2d(s):
    """8x4 threads per block over a 2-D grid of blocks."""
    O = s["O"]
    io, jo, ii, ji = O.tile(O.axes[0], O.axes[1], 4, 8)
    O.bind(io, "blockIdx.y")
    O.bind(jo, "blockIdx.x")
    O.bind(ii, "threadIdx.y")
    O.bind(ji, "threadIdx.x")


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
    C = s["C"]
    io, jo, ii, ji = C.tile(C.axes[0], C.axes[1], 8, 8)
    C.bind(io, "blockIdx.y")
    C.bind(jo, "blockIdx.x")
    C.bind(ii, "threadIdx.y")
    C.bind(ji, "threadIdx.x")


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
