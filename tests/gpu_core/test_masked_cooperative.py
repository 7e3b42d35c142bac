"""Predication of a padded thread loop (kdsl.gpu.predicate) around a cooperative stage: a
thread loop shorter than the block (C's 7 columns over threadIdx.x, the block 8 wide for its
shared-tile copies) that holds a barrier runs to the block's extent with its body masked, but
the mask must not turn off threads inside the copy that binds threadIdx.x again (found by the
fuzzer's interp-cuda backend, case 8:424: every result nan, the tile's last column never
copied).  Checked on the race-checking SIMT executor against numpy in float64."""
import numpy as np
import pytest

import kdsl as kd


def _matmul(a0, a1):
    n0, n1 = a0.shape
    k = kd.reduce_axis(n1, name="k")
    return kd.compute((n0, a1.shape[1]), lambda i, j: kd.sum(a0[i, k] * a1[k, j], axis=k), name="C")


def _tiled(sched, ty=8, tx=8, bk=8):
    """The thread-tiled shared-memory GEMM (one C element per thread here)."""
    C = sched["C"]
    CL = sched.cache_write(C, "local")
    AA = sched.cache_read("a0", "shared", [CL])
    BB = sched.cache_read("a1", "shared", [CL])
    i, j = C.axes
    by, yi = C.split(i, factor=64)
    bx, xi = C.split(j, factor=64)
    tyl, yi = C.split(yi, nparts=ty)
    txl, xi = C.split(xi, nparts=tx)
    C.reorder(by, bx, tyl, txl, yi, xi)
    C.bind(C.fuse(by, bx), "blockIdx.x")
    C.bind(tyl, "threadIdx.y")
    C.bind(txl, "threadIdx.x")
    CL.compute_at(C, txl)
    ko, ki = CL.split(CL.reduce_axes[0], factor=bk)
    ci, cj = CL.axes
    CL.reorder(ko, ki, ci, cj)
    for X in (AA, BB):
        X.compute_at(CL, ko)
        f = X.fuse(*X.axes)
        _, t = X.split(f, factor=ty * tx)
        y, x = X.split(t, factor=tx)
        X.bind(y, "threadIdx.y")
        X.bind(x, "threadIdx.x")


@pytest.mark.parametrize("shapes", [((7, 17), (17, 7)), ((7, 8), (8, 7)), ((7, 30), (30, 7))])
def test_cooperative_copy_inside_a_masked_thread_loop(shapes, rng):
    kern = kd.kernel(specialize=True)(_matmul)   # constant extents: C's thread loops shrink
    kern.schedule("cuda")(_tiled)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in shapes)
    got = kern(a, b, backend="interp-cuda")
    np.testing.assert_allclose(got, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5, atol=1e-5)
