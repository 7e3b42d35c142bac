"""kdsl kernels on dask arrays (kdsl.dask): each mapping against numpy float64.

Most tests run Dask's synchronous scheduler and kdsl's numpy backend (the mapping is what is
tested; the numpy backend evaluates the same stage graphs as every backend); a few run the
cpu backend.  Chunkings split halos, make one-element, empty and uneven chunks.
Skipped only when dask is not installed.
"""
import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array", reason="dask[array] is not installed")
import dask  # noqa: E402

import kdsl as kd  # noqa: E402
from kdsl.dask import DaskWarning  # noqa: E402

NP = "numpy"


@pytest.fixture(autouse=True)
def _sync():
    with dask.config.set(scheduler="synchronous"):
        yield


@pytest.fixture
def rng():
    return np.random.default_rng()


def _close(r, ref, rtol=1e-10, atol=1e-12):
    assert isinstance(r, da.Array), type(r)
    v = r.compute()
    assert v.shape == np.shape(ref)
    np.testing.assert_allclose(v, ref, rtol=rtol, atol=atol)
    return v


def _quiet(fn, *a, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error", DaskWarning)     # no rechunk expected
        return fn(*a, **kw)


@kd.kernel
def axpy(a, x, y):
    return a * x + y


@kd.kernel
def rowsum(A):
    return A.sum(axis=1)


@kd.kernel
def total(A):
    return A.sum()


@kd.kernel
def colmean(A):
    return A.mean(axis=0)


@kd.kernel
def rowmax(A):
    return A.max(axis=1, keepdims=True)


@kd.kernel
def argmax1(A):
    return np.argmax(A, axis=1)


@kd.kernel
def argmin0(A):
    return np.argmin(A, axis=0)


product = kd.reducer(lambda x, y: x * y, identity=1, name="product")


@kd.kernel
def rowprod(A):
    n, m = A.shape
    k = kd.reduce_axis(m, name="k")
    return kd.compute((n,), lambda i: product(A[i, k], axis=k))


def _lse_combine(a, b):
    (m1, s1), (m2, s2) = a, b
    m = kd.maximum(m1, m2)
    e1 = kd.where(m1 == m, 1.0, kd.exp(m1 - m))
    e2 = kd.where(m2 == m, 1.0, kd.exp(m2 - m))
    return m, s1 * e1 + s2 * e2


lse = kd.reducer(_lse_combine, identity=(-np.inf, 0.0), name="lse")


@kd.kernel
def logsumexp(A):
    n, k_ = A.shape
    k = kd.reduce_axis(k_, name="k")
    m, s = kd.compute((n,), lambda i: lse((A[i, k], 1.0), axis=k))
    return m + kd.log(s)


@kd.kernel
def box3(A):
    n, m = A.shape
    return kd.compute((n - 2, m - 2), lambda i, j: A[i, j] + A[i + 1, j + 1] * 2.0
                      + A[i + 2, j + 2] - A[i, j + 2] + A[i + 1, j])


@kd.kernel
def softmax(A):
    e = np.exp(A - A.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@kd.kernel
def matmul(A, B):
    return A @ B


@kd.kernel
def var1(A):
    return A.var(axis=1)


@kd.kernel
def gather(A, idx):
    return kd.compute((idx.shape[0], A.shape[1]), lambda i, j: A[idx[i], j] * 2.0)


@kd.kernel
def csum(A):
    return np.cumsum(A, axis=0)


def test_elementwise_broadcast_uneven_chunks(rng):
    x = rng.standard_normal((37, 23))
    y = rng.standard_normal(23)
    X = da.from_array(x, chunks=((10, 1, 26), (7, 7, 9)))
    Y = da.from_array(y, chunks=5)            # other chunks: aligned by Dask
    r = _quiet(axpy, 1.5, X, Y, backend=NP)
    _close(r, 1.5 * x + y)
    # a size-1 row broadcast against a chunked one; numpy arrays mixed in
    row = rng.standard_normal((1, 23))
    _close(_quiet(axpy, 2.0, da.from_array(x, chunks=(5, 23)), row, backend=NP), 2 * x + row)


def test_strided_blocks(rng):
    base = rng.standard_normal((40, 30))
    x = base[::2, ::3]                        # a strided view
    X = da.from_array(x, chunks=(7, 4))
    _close(_quiet(axpy, -1.0, X, X.T.T, backend=NP), 0 * x)
    _close(_quiet(rowsum, X, backend=NP), x.sum(axis=1))


def test_result_is_lazy_and_named_by_graph(rng):
    x = rng.standard_normal((20, 8))
    X = da.from_array(x, chunks=5)
    r1, r2 = rowsum(X, backend=NP), rowsum(X, backend=NP)
    assert isinstance(r1, da.Array) and r1.name == r2.name
    assert r1.name.startswith("rowsum-")
    assert rowsum(X + 1, backend=NP).name != r1.name
    assert axpy(2.0, X, X, backend=NP).name != axpy(3.0, X, X, backend=NP).name


@pytest.mark.parametrize("chunks", [((1,) * 9, (1,) * 6), ((0, 4, 0, 5), (2, 0, 4)),
                                    ((9,), (6,)), ((2, 7), (5, 1))])
def test_reductions_one_element_empty_uneven_chunks(rng, chunks):
    x = rng.standard_normal((9, 6))
    X = da.from_array(x, chunks=chunks)
    _close(_quiet(rowsum, X, backend=NP), x.sum(axis=1))
    _close(_quiet(total, X, backend=NP), x.sum())
    _close(_quiet(colmean, X, backend=NP), x.mean(axis=0))
    _close(_quiet(rowmax, X, backend=NP), x.max(axis=1, keepdims=True))
    _close(_quiet(rowprod, X, backend=NP), x.prod(axis=1))
    _close(_quiet(logsumexp, X, backend=NP), np.log(np.exp(x).sum(axis=1)))


def test_argmax_argmin_block_offsets(rng):
    x = rng.integers(0, 5, (11, 13)).astype(np.float64)    # ties: the first index wins
    for chunks in [(3, 4), (11, 1), ((0, 11), (13,)), (2, (5, 0, 8))]:
        X = da.from_array(x, chunks=chunks)
        v = _close(_quiet(argmax1, X, backend=NP), x.argmax(axis=1))
        assert v.dtype == np.int64
        _close(_quiet(argmin0, X, backend=NP), x.argmin(axis=0))


@kd.kernel
def lse_02(A):
    n, m, p = A.shape
    i = kd.reduce_axis(n, name="i")
    k = kd.reduce_axis(p, name="k")
    mx, s = kd.compute((m,), lambda j: lse((A[i, j, k], 1.0), axis=(i, k)))
    return mx + kd.log(s)


def test_partials_of_several_values_are_byte_records(rng):
    # several values per partial travel as bytes (CuPy has no structured dtypes): records of
    # unaligned widths (float32 + int64, int8 + int64), over two chunked reduced axes
    for dt in (np.float32, np.int8):
        x = rng.integers(0, 4, (11, 13)).astype(dt)
        v = _close(_quiet(argmax1, da.from_array(x, chunks=(3, (4, 0, 9))), backend=NP),
                   x.argmax(axis=1))
        assert v.dtype == np.int64
    x = rng.standard_normal((7, 5, 6)).astype(np.float32)
    ref = np.log(np.exp(x.astype(np.float64)).sum(axis=(0, 2)))
    for chunks in [(3, 2, (1, 0, 5)), (1, 5, 1), (7, 5, 6)]:
        _close(_quiet(lse_02, da.from_array(x, chunks=chunks), backend=NP), ref, rtol=1e-6)


def test_records_pack_and_unpack():
    from kdsl.dask.build import Records
    rec = Records([np.float32, np.int64, np.bool_])
    assert rec.nbytes == 13 and len(rec) == 3
    rng = np.random.default_rng()
    for shape in [(4, 3), (0, 2), (2, 0)]:
        vals = [rng.standard_normal(shape).astype(np.float32),
                rng.integers(-2**62, 2**62, shape), rng.random(shape) < 0.5]
        parts = [rec.pack([v[..., k:k + 1] for v in vals]) for k in range(shape[1])]
        assert all(p.dtype == np.uint8 and p.shape == shape[:1] + (13,) for p in parts)
        joined = np.concatenate(parts, axis=-1) if parts else np.empty(shape[:1] + (0,),
                                                                      np.uint8)
        back = rec.unpack(joined)     # what a combine step gets: k records along the axis
        for v, b in zip(vals, back):
            assert b.dtype == v.dtype and b.shape == v.shape and (b == v).all()


def test_records_use_the_chunks_array_module(monkeypatch):
    """Records of CuPy chunks are built with CuPy (numpy's creation functions refuse device
    arrays: this failed on 2 GPUs); a stand-in module checks which functions run."""
    import sys
    import types

    from kdsl.dask.build import Records

    class Dev(np.ndarray):
        """A chunk type numpy must not convert (like cupy.ndarray)."""

    calls = []

    def track(fn):
        def wrapped(*a, **kw):
            calls.append(fn.__name__)
            return fn(*a, **kw).view(Dev)
        return wrapped
    fake = types.ModuleType("cupy")
    fake.ndarray = Dev
    fake.concatenate, fake.ascontiguousarray = track(np.concatenate), track(np.ascontiguousarray)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    rec = Records([np.float32, np.int64])
    vals = [np.ones((3, 1), np.float32).view(Dev), np.arange(3).reshape(3, 1).view(Dev)]
    packed = rec.pack(vals)
    assert type(packed) is Dev and "concatenate" in calls
    calls.clear()
    back = rec.unpack(packed)
    assert calls and set(calls) == {"ascontiguousarray"}
    assert (np.asarray(back[1]) == np.arange(3).reshape(3, 1)).all()


def test_dask_call_leaves_the_backend_to_the_chunks(rng, monkeypatch):
    """Without backend=, a dask call is built with backend None: each task's kernel picks from
    its chunk (CuPy chunks: cuda), not the client's default for a dask array (cpu)."""
    import kdsl.dask as kdask
    seen = []
    real = kdask.call
    monkeypatch.setattr(kdask, "call", lambda k, args, backend=None, out=None:
                        seen.append(backend) or real(k, args, NP, out))
    x = rng.standard_normal((6, 4))
    _close(axpy(2.0, da.from_array(x, chunks=3), da.from_array(x, chunks=3)), 3 * x)
    assert seen == [None]


def test_stencil_halos_split_by_chunks(rng):
    x = rng.standard_normal((17, 12))
    ref = x[:-2, :-2] + 2 * x[1:-1, 1:-1] + x[2:, 2:] - x[:-2, 2:] + x[1:-1, :-2]
    for chunks in [(5, 4), (1, 1), ((2, 1, 14), (11, 1)), (17, 12)]:
        r = _quiet(box3, da.from_array(x, chunks=chunks), backend=NP)
        _close(r, ref)
    assert kd.dask.plan(box3, da.from_array(x, chunks=4)).kind == "stencil"


@kd.kernel
def center(A):
    return A - A.mean(axis=0)


@kd.kernel
def per_col(A):
    return A / A.shape[1]


def test_rowwise_softmax_blockwise_and_staged(rng):
    x = rng.standard_normal((30, 9))
    e = np.exp(x - x.max(axis=1, keepdims=True))
    ref = e / e.sum(axis=1, keepdims=True)
    _close(_quiet(softmax, da.from_array(x, chunks=(7, 9)), backend=NP), ref)
    assert kd.dask.plan(softmax, da.from_array(x, chunks=(7, 9))).kind == "blockwise"
    # rows split: max, then sum(exp(A - max)), each a tree over chunks, then the divide
    x = x[:7, :6]
    e = np.exp(x - x.max(axis=1, keepdims=True))
    ref = e / e.sum(axis=1, keepdims=True)
    for chunks in [(3, 4), (1, 1), (7, (0, 2, 4))]:
        X = da.from_array(x, chunks=chunks)
        _close(_quiet(softmax, X, backend=NP), ref)
        _close(_quiet(var1, X, backend=NP), x.var(axis=1))
        _close(_quiet(center, X, backend=NP), x - x.mean(axis=0))
    assert kd.dask.plan(softmax, da.from_array(x, chunks=(3, 4))).kind == "staged"


def test_sizes_used_as_values_are_the_full_ones(rng):
    x = rng.standard_normal((6, 10))
    for chunks in [(6, 3), (2, 1), (6, 10)]:
        _close(_quiet(per_col, da.from_array(x, chunks=chunks), backend=NP), x / 10)


def test_contraction_over_chunked_k(rng):
    a, b = rng.standard_normal((13, 21)), rng.standard_normal((21, 8))
    A = da.from_array(a, chunks=(5, (1, 10, 0, 10)))
    B = da.from_array(b, chunks=((4, 17), 3))
    p = kd.dask.plan(matmul, A, B)
    assert p.kind == "contraction"
    _close(_quiet(matmul, A, B, backend=NP), a @ b)


def test_not_partitionable_rechunks_with_warning(rng):
    x = rng.standard_normal((12, 7))
    X = da.from_array(x, chunks=(4, 3))
    idx = np.array([3, 0, 11, 5, 5])
    with pytest.warns(DaskWarning, match="computed index"):
        _close(gather(X, idx, backend=NP), x[idx] * 2)
    with pytest.warns(DaskWarning, match="scans"):
        _close(csum(X, backend=NP), np.cumsum(x, axis=0))
    # already one chunk along those axes: no warning
    _close(_quiet(csum, da.from_array(x, chunks=(12, 2)), backend=NP), np.cumsum(x, axis=0))


def test_plan_prints_each_stage(rng, capsys):
    X = da.from_array(rng.standard_normal((10, 6)), chunks=3)
    p = kd.dask.plan(colmean, X)
    text = capsys.readouterr().out
    assert p.kind == "reduction" and "tree reduction" in text and "stage 'mean'" in text
    kd.dask.plan(softmax, X)
    assert "computed first as its own Dask array" in capsys.readouterr().out
    kd.dask.plan(csum, X)
    assert "one chunk (stage 'cumsum' scans along it)" in capsys.readouterr().out


def test_out_refused_and_cpu_backend(rng):
    x = rng.standard_normal((64, 40)).astype(np.float32)
    X = da.from_array(x, chunks=(16, 15))
    with pytest.raises(kd.errors.ArgumentError if hasattr(kd, "errors") else Exception,
                       match="out="):
        rowsum(X, out=np.empty(64, np.float32))
    _close(_quiet(colmean, X, backend="cpu"), x.astype(np.float64).mean(axis=0), rtol=1e-5,
           atol=1e-6)   # float32 sums of 64 terms of size ~1
    _close(_quiet(argmax1, X, backend="cpu"), x.argmax(axis=1))


@kd.kernel
def two(a, b):
    return a + b, a * b


@kd.kernel
def two_shapes(a):
    return a + 1, a.sum()


def test_several_outputs(rng):
    x, y = rng.standard_normal((9, 5)), rng.standard_normal(5)
    s, p = _quiet(two, da.from_array(x, chunks=(4, 2)), da.from_array(y, chunks=3), backend=NP)
    _close(s, x + y)
    _close(p, x * y)
    with pytest.raises(kd.errors.ArgumentError, match="one shape"):
        two_shapes(da.from_array(x, chunks=4), backend=NP)
    X = da.from_array(x, chunks=4)
    with pytest.raises(kd.errors.ArgumentError, match="unknown chunk sizes"):
        rowsum(X[X[:, 0] > 0], backend=NP)


def test_numpy_calls_never_load_dask_support():
    import subprocess
    import sys
    src = ("import sys, numpy as np, kdsl as kd\n"
           "k = kd.kernel(lambda a: a + 1)\n"
           "k(np.ones(3), backend='numpy')\n"
           "print('kdsl.dask' in sys.modules, 'dask' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True,
                         timeout=120, cwd=__file__.rsplit("/tests/", 1)[0])
    assert out.stdout.split() == ["False", "False"], out.stderr[-2000:]


@kd.kernel
def ramp(a):
    return kd.compute((a.shape[0], 4), lambda i, j: a[i] * j)


@kd.kernel
def total_keep(A):
    return A.sum(axis=(0, 1), keepdims=True)


@kd.kernel
def any0(A):
    return (A > 1.0).any(axis=0)


def test_new_axes_keepdims_bool_int_transposed(rng):
    x = rng.standard_normal((13, 11))
    X = da.from_array(x, chunks=(4, 3))
    _close(_quiet(ramp, da.from_array(x[:, 0], chunks=4), backend=NP), x[:, :1] * np.arange(4))
    _close(_quiet(total_keep, X, backend=NP), x.sum(keepdims=True))
    v = _quiet(any0, X, backend=NP).compute()
    assert v.dtype == np.bool_ and (v == (x > 1.0).any(axis=0)).all()
    xi = rng.integers(-5, 5, (13, 11)).astype(np.int32)
    v = _quiet(rowsum, da.from_array(xi, chunks=(1, 4)), backend=NP).compute()
    assert v.dtype == xi.sum(axis=1).dtype and (v == xi.sum(axis=1)).all()
    _close(_quiet(rowsum, X.T, backend=NP), x.T.sum(axis=1))


@kd.kernel
def laplace1(x):
    n = x.shape[0]
    return kd.compute((n,), lambda i: kd.where((i > 0) & (i < n - 1),
                                               x[i - 1] - 2 * x[i] + x[i + 1], x[i]))


@kd.kernel
def first5(x):
    return kd.compute((x.shape[0],), lambda i: kd.where(i < 5, x[i] * 10, x[i]))


@kd.kernel
def laplace2(A):
    n, m = A.shape
    return kd.compute((n, m), lambda i, j: kd.where(
        (i > 0) & (i < n - 1) & (j > 0) & (j < m - 1),
        A[i - 1, j] + A[i + 1, j] + A[i, j - 1] + A[i, j + 1] - 4 * A[i, j], 0.0))


def test_same_shaped_stencils_with_edge_guards(rng):
    x = rng.standard_normal(23)
    ref = x.copy()
    ref[1:-1] = x[:-2] - 2 * x[1:-1] + x[2:]
    ref5 = x.copy()
    ref5[:5] *= 10
    for chunks in [4, 1, (10, 13), ((0, 2, 21),)]:
        X = da.from_array(x, chunks=chunks)
        _close(_quiet(laplace1, X, backend=NP), ref)
        _close(_quiet(first5, X, backend=NP), ref5)     # a halo of 6 before each block
    a = rng.standard_normal((15, 12))
    ref2 = np.zeros_like(a)
    ref2[1:-1, 1:-1] = (a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:]
                        - 4 * a[1:-1, 1:-1])
    for chunks in [(4, 5), (1, 1), ((3, 12), (1, 11))]:
        _close(_quiet(laplace2, da.from_array(a, chunks=chunks), backend=NP), ref2)
    p = kd.dask.plan(laplace1, da.from_array(x, chunks=4))
    assert p.kind == "stencil" and [m for m, _, _ in p.halo.values()] == ["same"]
