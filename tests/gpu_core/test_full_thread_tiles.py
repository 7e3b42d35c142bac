"""The full_thread_tiles pass (kdsl.gpu.thread_tiles): a thread's register tile gets a
guard-free copy for interior threads; edge threads keep every guard; bodies with barriers or
few guards are left alone.  Results checked on the race-checking SIMT executor and the
sequential interpreter against numpy in float64."""
import numpy as np
import pytest

from schedules import conv3x3_graph, ladder_thread_tiling, matmul_graph, rand
from kdsl.backends.interpreter import run_lowered
from kdsl.gpu.simt import run_simt
from kdsl.ir import make as mk
from kdsl.ir.evaluate import eval_expr
from kdsl.ir import nodes as n
from kdsl.ir.visitor import collect
from kdsl.gpu.pipeline import PIPELINE
from kdsl.gpu.pipeline import GPU_SEQUENTIAL, lower_sequential as lower
from kdsl.gpu.thread_tiles import _extreme, full_thread_tiles
from kdsl.schedule import Schedule


def register_tile(s, rows=4, cols=4, ty=2, tx=4):
    """The stencil recipe's shape by hand: rows x cols outputs per thread, window and
    weights cached in local memory, every per-thread loop unrolled."""
    O = s["O"]
    OL = s.cache_write(O, "local")
    IL = s.cache_read("I", "local", [OL])
    WL = s.cache_read("W", "local", [OL])
    i, j = O.axes
    yo, yi = O.split(i, factor=ty * rows)
    yt, yr = O.split(yi, factor=rows)
    xo, xi = O.split(j, factor=tx * cols)
    xt, xc = O.split(xi, factor=cols)
    O.reorder(yo, xo, yt, xt, yr, xc)
    O.bind(O.fuse(yo, xo), "blockIdx.x")
    O.bind(yt, "threadIdx.y")
    O.bind(xt, "threadIdx.x")
    O.unroll(yr)
    O.unroll(xc)
    OL.compute_at(O, xt)
    r, c = OL.axes
    di, dj = OL.reduce_axes
    OL.reorder(di, dj, r, c)
    for a in (di, dj, r, c):
        OL.unroll(a)
    for X in (IL, WL):
        X.compute_at(O, xt)
        for a in X.axes:
            X.unroll(a)


def lowered(graph, sched, pipeline=PIPELINE):
    s = Schedule(graph)
    sched(s)
    return lower(s, pipeline=pipeline)


def np_conv(i, w):
    h, v = i.shape
    out = np.zeros((h - 2, v - 2))
    for di in range(3):
        for dj in range(3):
            out += i[di:di + h - 2, dj:dj + v - 2] * w[di, dj]
    return out


def thread_bodies(f):
    loops = collect(f.body, lambda x: type(x) is n.For and x.thread is not None
                    and x.thread.value == "threadIdx.x")
    return [x.body for x in loops]


def test_register_tile_is_versioned():
    f = lowered(conv3x3_graph(), register_tile)
    (body,) = thread_bodies(f)
    assert type(body) is n.IfThenElse and body.otherwise is not None
    fast = body.then
    assert not collect(fast, lambda x: type(x) is n.IfThenElse)     # no guard left inside
    assert collect(body.otherwise, lambda x: type(x) is n.IfThenElse)
    # the copies store the same buffers
    stores = lambda s: sorted(x.buffer.name for x in collect(s, lambda x: type(x) is n.Store))
    assert stores(fast) == stores(body.otherwise)


@pytest.mark.parametrize("shape", [(19, 35), (10, 18), (3, 3), (2, 7), (11, 3)])
def test_versioned_tile_is_correct(shape, rng):
    f = lowered(conv3x3_graph(), register_tile)
    i, w = rand(rng, shape, np.float32), rand(rng, (3, 3), np.float32)
    want = np_conv(i.astype(np.float64), w.astype(np.float64))
    out = np.full(want.shape, -7, np.float32)
    run_simt(f, [i, w], [out], [], block_order=rng)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    seq = np.full(want.shape, -7, np.float32)
    run_lowered(lowered(conv3x3_graph(), register_tile, GPU_SEQUENTIAL), [i, w], [seq], [])
    np.testing.assert_allclose(seq, want, rtol=1e-5, atol=1e-5)


def test_bodies_with_barriers_are_left_alone():
    sched = ladder_thread_tiling()
    with_pass = lowered(matmul_graph(), sched)
    without = lowered(matmul_graph(), sched, PIPELINE.remove("full_thread_tiles"))
    assert str(with_pass) == str(without)


def test_few_guards_are_left_alone():
    def one_per_thread(s):       # one output per thread: 9 guard evaluations, not worth a copy
        O = s["O"]
        OL = s.cache_write(O, "local")
        bo, t = O.split(O.fuse(*O.axes), factor=64)
        O.bind(bo, "blockIdx.x")
        O.bind(t, "threadIdx.x")
        OL.compute_at(O, t)
        for a in OL.reduce_axes:
            OL.unroll(a)
    with_pass = lowered(conv3x3_graph(), one_per_thread)
    without = lowered(conv3x3_graph(), one_per_thread, PIPELINE.remove("full_thread_tiles"))
    assert str(with_pass) == str(without)


def test_extreme_point_of_a_guard():
    x, v, w, k = (n.var(nm) for nm in ("x", "v", "w", "k"))
    ranges = {v: (0, 3), w: (2, 5)}
    # x + v - w < 10 is hardest at v = 3, w = 2
    c = mk.compare(n.CmpOp.LT, mk.sub(mk.add(x, v), w), n.const(10))
    e = _extreme(c, ranges, set())
    assert e is not None and not collect(e, lambda q: q is v or q is w)
    assert eval_expr(e, {x: 8}) == eval_expr(c, {x: 8, v: 3, w: 2})
    # x + v >= 1 is hardest at v = 0
    c2 = mk.compare(n.CmpOp.GE, mk.add(x, v), n.const(1))
    e2 = _extreme(c2, ranges, set())
    assert eval_expr(e2, {x: 1}) and not eval_expr(e2, {x: 0})
    # not linear in v, a let-bound (opaque) variable, a load: never stripped
    assert _extreme(mk.compare(n.CmpOp.LT, mk.floordiv(v, n.const(2)), x), ranges, set()) is None
    assert _extreme(mk.compare(n.CmpOp.LT, mk.add(k, v), x), ranges, {k}) is None
    buf = n.Buffer("B", x.dtype, (4,))
    assert _extreme(mk.compare(n.CmpOp.LT, n.Load(x.dtype, buf, (v,)), x), ranges, set()) is None


def test_no_thread_loops_no_change():
    f = lowered(conv3x3_graph(), lambda s: None, GPU_SEQUENTIAL)
    assert full_thread_tiles(f) is f
