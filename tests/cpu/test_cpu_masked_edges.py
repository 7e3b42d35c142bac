"""Edge tiles stay vector code (kdsl_cpu/codegen/vector.py, masked lanes): a vectorized loop whose
extent is a split's run-time tail is emitted at its constant bound under a lane mask, arrays
through llvm.masked.load/store, the thread's own temporaries read whole and written back with a
select.  Checked against numpy in float64 on sizes that do and do not divide the tile, 0 and 1,
strided and reversed views, four dtypes, and a write into a larger array (no lane past the
extent is stored)."""
import dataclasses

import numpy as np
import pytest

import kdsl as kd


def _split16(s):
    h = s.stages[-1]
    _, ji = h.split(h.axes[-1], factor=16)
    h.vectorize(ji)


def _axpy(a, b):
    return a * 3 + b


def _data(rng, shape, dtype):
    if np.dtype(dtype).kind == "i":
        return rng.integers(-50, 50, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_split_tail_is_masked_vector_code_and_exact(dtype):
    k = kd.kernel(kd.schedule("cpu", _split16)(_axpy))
    rng = np.random.default_rng(1)
    src = k.source(np.ones((3, 17), dtype), np.ones((3, 17), dtype), backend="cpu")
    assert "llvm.masked.store" in src and "llvm.masked.load" in src
    for shape in [(3, 0), (0, 5), (1, 1), (2, 15), (3, 16), (3, 17), (4, 33), (5, 48)]:
        a, b = _data(rng, shape, dtype), _data(rng, shape, dtype)
        want = a.astype(np.float64) * 3 + b.astype(np.float64)
        np.testing.assert_allclose(k(a, b, backend="cpu"), want, rtol=1e-6, atol=1e-5)
    big = _data(rng, (4, 2 * 37), dtype)
    a, b = big[:, ::2], big[::-1, 1::2]          # strided and reversed views
    np.testing.assert_allclose(k(a, b, backend="cpu"), a.astype(np.float64) * 3 + b, rtol=1e-6, atol=1e-5)


def test_masked_store_touches_no_lane_past_the_extent():
    k = kd.kernel(kd.schedule("cpu", _split16)(_axpy))
    rng = np.random.default_rng(2)
    for cols in (1, 7, 17, 31):
        out = np.full((3, 64), 7.5, np.float32)
        a = rng.standard_normal((3, cols)).astype(np.float32)
        k(a, a, out=out[:, :cols], backend="cpu")
        np.testing.assert_allclose(out[:, :cols], a.astype(np.float64) * 4, rtol=1e-6)
        assert np.all(out[:, cols:] == 7.5)


@pytest.mark.parametrize("m,nk", [(16, (64, 100)), (13, (130, 129))])
def test_gemm_edge_tiles_exact(m, nk):
    """The packed GEMM's column edge (N not a multiple of 64): the local tile is read whole and
    written back under the mask, C through masked stores."""
    mm = kd.kernel(lambda A, B: A @ B)
    rng = np.random.default_rng(m)
    A = rng.standard_normal((m, nk[0])).astype(np.float32)
    B = rng.standard_normal(nk).astype(np.float32)
    np.testing.assert_allclose(mm(A, B, backend="cpu"), A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4)
    assert "llvm.masked.store" in mm.source(A, B, backend="cpu")


def _conv3(X, W):
    n, c, h, w = X.shape
    rc, ry, rx = kd.reduce_axis(c, name="rc"), kd.reduce_axis(3, name="ry"), kd.reduce_axis(3, name="rx")
    return kd.compute((n, W.shape[0], h - 2, w - 2),
                      lambda b, o, y, x: kd.sum(X[b, rc, y + ry, x + rx] * W[o, rc, ry, rx],
                                                axis=(rc, ry, rx)), name="O")


@pytest.mark.parametrize("k,w", [(5, 30), (3, 19)])
def test_unswitched_row_guards_exact(k, w):
    """A 4 x 16 tile over k output channels (rows: 5 and 3 leave a partial row tile, whose
    guards fail inside the loop: the guarded copy) and w - 2 columns (column-edge tiles: the
    unswitched copy, rows all in range)."""
    from kdsl.schedule import generator as G
    rng = np.random.default_rng(k * w)
    X = rng.standard_normal((2, 3, 4, w)).astype(np.float32)
    W = rng.standard_normal((k, 3, 3, 3)).astype(np.float32)
    f = kd.kernel(_conv3)
    f.schedule("cpu")(lambda s: G.tiled(s, s.stages[-1], G.Params(4, 16, 2)))
    want = sum(np.einsum("bcyx,oc->boyx", X[:, :, ry:ry + 2, rx:rx + w - 2].astype(np.float64),
                         W[:, :, ry, rx].astype(np.float64)) for ry in range(3) for rx in range(3))
    np.testing.assert_allclose(f(X, W, backend="cpu"), want, rtol=1e-4, atol=1e-4)


def test_unswitch_takes_only_invariant_guards():
    from kdsl import dtypes as dt
    from kdsl.ir import make as mk
    from kdsl.ir import nodes as n
    from kdsl_cpu.codegen.unswitch import instances, invariant_guards, without
    I = dt.index
    r, o, x, N, M = (n.Var(I, s) for s in ("r", "o", "x", "N", "M"))
    buf = n.Buffer("t", dt.float32, (mk.as_expr(64, I),), scope=n.Scope.LOCAL)
    row = n.For(x, mk.as_expr(0, I), mk.as_expr(16, I), n.ForKind.VECTORIZED,
                n.Store(buf, (x,), n.Const(dt.float32, 1.0)))
    def nest(cond, kind=n.ForKind.UNROLLED):
        return n.For(r, mk.as_expr(0, I), M, n.ForKind.SERIAL,
                     n.For(o, mk.as_expr(0, I), mk.as_expr(4, I), kind, n.IfThenElse(cond, row)))
    good = nest(mk.lt(mk.add(o, N), M))
    (g,) = invariant_guards(good)
    assert len(instances([g], good)) == 4            # o = 0..3
    assert not collect_ifs(without(good, [g]))
    assert invariant_guards(nest(mk.lt(mk.add(o, r), M))) == []            # uses the loop's var
    assert invariant_guards(nest(mk.lt(o, M), kind=n.ForKind.SERIAL)) == []  # o not unrolled
    ld = n.Load(I, n.Buffer("b", I, (mk.as_expr(4, I),)), (mk.as_expr(0, I),))
    assert invariant_guards(nest(mk.lt(ld, M))) == []                       # data-dependent
    split = dataclasses.replace(good, body=n.IfThenElse(mk.lt(N, M), good.body, good.body))
    assert invariant_guards(split) == []          # a full/edge split inside: its copies' loops


def collect_ifs(s):
    from kdsl.ir import nodes as n
    from kdsl.ir.visitor import collect
    return collect(s, lambda x: type(x) is n.IfThenElse)
