"""WMMA-tensorized matmul schedules (seed 001 in kdsl): C = float32(A) @ float32(B) with
16-bit inputs, A and B loaded into wmma.matrix_a / wmma.matrix_b fragments, C accumulated in a
wmma.accumulator fragment and stored out; each of those four stages tensorized.

Shared by the pass tests (golden printout) and tests/gpu_core (runs under the interpreters).
Needs ``handgraph`` (tests/backends) on the path.
"""
import kdsl as kd
from handgraph import Builder, read, sum_
from kdsl import dtypes as dt
from kdsl.ir import nodes as n


def mm16_graph(dtype=dt.float16, trans_a=False, acc=dt.float32, trans_b=False):
    """C[i, j] = sum_r acc(A[i, r]) * acc(B[r, j]) over symbolic (n, k) x (k, m); ``trans_a``:
    A is stored (k, n) and read A[r, i]; ``trans_b``: B is stored (m, k) and read B[j, r]."""
    b = Builder("mm16")
    A = b.input("A", ("k", "n") if trans_a else ("n", "k"), dtype)
    B = b.input("B", ("m", "k") if trans_b else ("k", "m"), dtype)
    i, j, r = b.axis("i", b.dim("n")), b.axis("j", b.dim("m")), b.raxis("r", b.dim("k"))
    a = read(A, r, i) if trans_a else read(A, i, r)
    cast = (lambda x: x) if acc is dtype else (lambda x: n.Cast(acc, x))
    prod = n.Binary(acc, n.BinOp.MUL, cast(a), cast(read(B, j, r) if trans_b else read(B, r, j)))
    return b.graph(b.compute("C", [i, j], sum_(prod, [r], acc), [r]))


def wmma_schedule(warps=(2, 2), tiles=(1, 1), intrin=None, trans_a=False):
    """A schedule function: blocks of ``warps`` (y, x) warps over threadIdx.z / threadIdx.y, each
    warp computing ``tiles`` (y, x) 16x16 tiles of C; K in steps of 16."""
    wy, wx = warps
    ty, tx = tiles

    def sched(s):
        w = intrin or kd.intrin.wmma(16, 16, 16)
        C = s["C"]
        CF = s.cache_write(C, "wmma.accumulator")
        AF = s.cache_read("A", "wmma.matrix_a", [CF])
        BF = s.cache_read("B", "wmma.matrix_b", [CF])
        bi, bj, ii, jj = C.tile(C.axes[0], C.axes[1], 16 * wy * ty, 16 * wx * tx)
        wi, ti = C.split(ii, factor=16 * ty)
        wj, tj = C.split(jj, factor=16 * tx)
        tio, tii = C.split(ti, factor=16)
        tjo, tji = C.split(tj, factor=16)
        C.reorder(bi, bj, wi, wj, tio, tjo, tii, tji)
        C.bind(bi, "blockIdx.y")
        C.bind(bj, "blockIdx.x")
        C.bind(wi, "threadIdx.z")
        C.bind(wj, "threadIdx.y")
        CF.compute_at(C, wj)
        ci, cj = CF.axes
        (ck,) = CF.reduce_axes
        cio, cii = CF.split(ci, factor=16)
        cjo, cji = CF.split(cj, factor=16)
        ko, ki = CF.split(ck, factor=16)
        CF.reorder(ko, cio, cjo, cii, cji, ki)
        AF.compute_at(CF, ko)
        BF.compute_at(CF, ko)
        # A's tile rows run along its axis 0 (axis 1 when A is stored transposed)
        ra = 1 if trans_a else 0
        ao, ai = AF.split(AF.axes[ra], factor=16)
        AF.reorder(ao, *([ai, AF.axes[1]] if ra == 0 else [AF.axes[0], ai]))
        AF.tensorize(ai if ra == 0 else AF.axes[0], w)
        bo, bi_ = BF.split(BF.axes[1], factor=16)
        BF.reorder(bo, BF.axes[0], bi_)
        BF.tensorize(BF.axes[0], w)
        CF.tensorize(cii, w)
        C.tensorize(tii, w)

    return sched


#: one warp per block, one 16x16 tile
wmma_one_warp = wmma_schedule((1, 1), (1, 1))
#: 2x2 warps per 32x32 block, one tile each
wmma_four_warps = wmma_schedule((2, 2), (1, 1))
#: 2x2 warps per 64x64 block, each warp 2x2 tiles (fragments of several tiles)
wmma_64 = wmma_schedule((2, 2), (2, 2))


def wmma_shared(warps=(2, 2)):
    """wmma_schedule with A and B staged in shared memory per K step: each 16-wide tile copied
    by every thread of the block (warps x 32 lanes), then loaded into fragments from there (the
    seed-002 tensor-core step; the sync pass puts the barriers around the fragment loads)."""
    wy, wx = warps
    base = wmma_schedule(warps, (1, 1))

    def sched(s):
        base(s)
        AF, BF, CF = s["A.wmma.matrix_a"], s["B.wmma.matrix_b"], s["C.wmma.accumulator"]
        ko = CF.leaf[0]                     # the K-step loop (reordered outermost)
        for src, F in (("A", AF), ("B", BF)):
            X = s.cache_read(src, "shared", [F])
            X.compute_at(CF, ko)
            f = X.fuse(*X.axes)
            o, t = X.split(f, factor=32 * wx * wy)
            z, t = X.split(t, factor=32 * wx)
            y, x = X.split(t, factor=32)
            X.bind(z, "threadIdx.z")
            X.bind(y, "threadIdx.y")
            X.bind(x, "threadIdx.x")
    return sched



def wgmma_schedule(bm=128, bn=128, bk=64, stages=2, n=None, warp_tag="threadIdx.y", pad=True,
                   fragments=False, intrin=None):
    """A Hopper schedule: ``kd.intrin.wgmma(n)`` (n = bn by default) products of A and B tiles
    cached in shared memory (``pad``: padded caches), ``bm / 16`` warps on ``warp_tag`` of 16
    rows each, K in steps of ``bk`` in ``stages`` ring buffers (0: none).  ``fragments``: feed
    the product from wmma.matrix_a/b fragments instead (which wgmma refuses)."""
    n = n or bn
    warps = bm // 16

    def sched(s):
        w = intrin or kd.intrin.wgmma(n)
        C = s["C"]
        CF = s.cache_write(C, "wmma.accumulator")
        bi, bj, ii, jj = C.tile(C.axes[0], C.axes[1], bm, bn)
        wi, ti = C.split(ii, factor=16)
        tjo, tji = C.split(jj, factor=n)
        C.reorder(bi, bj, wi, tjo, ti, tji)
        C.bind(bi, "blockIdx.y")
        C.bind(bj, "blockIdx.x")
        C.bind(wi, warp_tag)
        CF.compute_at(C, wi)
        ci, cj = CF.axes
        cjo, cji = CF.split(cj, factor=n)
        ko, kr = CF.split(CF.reduce_axes[0], factor=bk)
        kio, ki = CF.split(kr, factor=16)
        CF.reorder(ko, kio, cjo, ci, cji, ki)
        CF.unroll(kio)
        CF.tensorize(ci, w)
        C.tensorize(ti, w)
        readers = [[CF], [CF]]
        if fragments:
            readers = [[s.cache_read("A", "wmma.matrix_a", [CF])], [s.cache_read("B", "wmma.matrix_b", [CF])]]
            for (F,) in readers:
                F.compute_at(CF, kio)
                F.tensorize(F.axes[0], w)
        for src, rd in zip(("A", "B"), readers):
            X = s.cache_read(src, "shared", rd, pad=pad)
            X.compute_at(CF, ko)
            f = X.fuse(*X.axes)
            _, t = X.split(f, factor=32 * warps)
            y, x = X.split(t, factor=32)
            X.bind(y, warp_tag)
            X.bind(x, "threadIdx.x")
            if stages:
                X.pipeline(stages) if stages > 2 else X.double_buffer()

    return sched
