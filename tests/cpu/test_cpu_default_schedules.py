"""The cpu backend's default schedules (kdsl_cpu/schedules): which one each kind of kernel gets
(read from the lowered IR) and that it computes numpy's result, on shapes around the tile edges
(GEMM 6x64 in blocks of 48 rows, column tile 256, 1-D chunk 16384), 0- and 1-sized dims, views,
dtypes, and on one CPU (no rfactor) as well as the default count.
Also: codegen/vector.py's explicit ``<W x T>`` code for the GEMM register block, and its fallbacks."""
import re

import numpy as np
import pytest

import kdsl as kd


def make_kernels():
    """Fresh kernel objects (the thread count is read when a kernel compiles)."""

    @kd.kernel
    def matmul(A, B):
        return A @ B

    @kd.kernel
    def total(A):
        return A.sum()

    @kd.kernel
    def sum0(A):
        return A.sum(axis=0)

    @kd.kernel
    def sum1(A):
        return A.sum(axis=1)

    @kd.kernel
    def max0(A):
        return A.max(axis=0)

    @kd.kernel
    def max1(A):
        return A.max(axis=1)

    @kd.kernel
    def maxall(A):
        return A.max()

    @kd.kernel
    def argmax1(A):
        return A.argmax(axis=1)

    @kd.kernel
    def axpy(A, B):
        return A * 2 + B

    @kd.kernel
    def softmax(X):
        e = kd.exp(X - X.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    @kd.kernel
    def layernorm(X):
        mu = X.mean(axis=1, keepdims=True)
        d = X - mu
        v = (d * d).mean(axis=1, keepdims=True)
        return d * kd.rsqrt(v + 1e-5)

    @kd.kernel
    def conv3x3(I, F):
        n, m = I.shape
        di, dj = kd.reduce_axis(3, name="di"), kd.reduce_axis(3, name="dj")
        return kd.compute((n - 2, m - 2),
                          lambda i, j: kd.sum(I[i + di, j + dj] * F[di, dj], axis=(di, dj)))

    return dict(matmul=matmul, total=total, sum0=sum0, sum1=sum1, max0=max0, max1=max1,
                maxall=maxall, argmax1=argmax1, axpy=axpy, softmax=softmax, layernorm=layernorm,
                conv3x3=conv3x3)


K = make_kernels()


def _ir(name, *args, kernels=K):
    return str(kernels[name].lower(*args, backend="cpu"))


def _loop_line(text, var):
    """The ``for <var> in ...`` line of the printed IR."""
    m = re.search(rf"^\s*for {re.escape(var)} in .*$", text, re.M)
    assert m, f"no loop {var} in\n{text}"
    return m.group(0)


def _rand(rng, shape, dtype):
    if np.dtype(dtype).kind == "i":
        return rng.integers(-50, 50, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _views(a):
    """a and views of a's values that read it in place (strided, transposed, negative strides)."""
    yield a
    yield np.ascontiguousarray(a.T).T                       # Fortran order
    if a.ndim == 2:
        b = np.zeros((a.shape[0], 2 * a.shape[1]), a.dtype)[::-1, ::-2]
        b[...] = a
        yield b                                             # negative, non-unit strides


# ------------------------------------------------------------------ which schedule is chosen
F32 = np.float32


def test_schedule_elementwise():
    t = _ir("axpy", np.ones(5, F32), np.ones(5, F32))
    assert "range(ceildiv(A_0, 16384)):  # parallel" in t
    t = _ir("axpy", np.ones((5, 3), F32), np.ones((5, 3), F32))
    assert _loop_line(t, "i0").endswith("# parallel")


def test_schedule_row_and_column_reductions():
    t = _ir("sum1", np.ones((5, 3), F32))
    assert _loop_line(t, "i0").endswith("# parallel")
    # reduce innermost (blocked_sums wraps it in allocations and an ``if A_1 <= 1024``)
    assert re.search(r"for i0 in .*\n(?:.*\n)*?\s+for r0 in range\(A_1\):", t)
    t = _ir("sum0", np.ones((5, 3), F32))
    assert "for i0.outer in range(ceildiv(A_1, 256)):  # parallel" in t
    # jo, r, ji: the reduction runs over rows outside a strip of 256 adjacent outputs
    assert re.search(r"for r0 in range\(A_0\):\n\s+for i0.inner in range\(256\):", t)
    t = _ir("max0", np.ones((5, 3), F32))
    assert "range(ceildiv(A_1, 256)):  # parallel" in t


def test_schedule_full_sum_rfactor():
    t = _ir("total", np.ones((5, 3), F32))
    assert "allocate sum.rf" in t
    assert re.search(r"for r0.outer in range\(\d+\):  # parallel", t)


def test_schedule_matmul_gemm():
    t = _ir("matmul", np.ones((5, 3), F32), np.ones((3, 4), F32))
    # the 6x64 partial product of one reduction block lives in a local tile
    assert "allocate matmul.rf: float32[1, 6, 64] local" in t
    # each thread's KC x 64 panel of B: allocated once per parallel iteration (hoisted),
    # filled inside the reduction-block loop of C
    assert re.search(r"for i0.outer.outer.i1.outer.fused in range\(.*\):  # parallel\n"
                     r"\s+allocate B.local: float32\[256, 64\]", t)
    assert re.search(r"for r0.outer.v in range\(ceildiv\(A_1, 256\)\):\n(.*\n)*?"
                     r"\s+B.local\[ax0, ax1\] = B\[r0.outer.v\*256 \+ ax0, ", t)
    assert "for i0 in range(6):  # unrolled" in t and "for i1 in range(64):  # vectorized" in t
    # full_tiles: the reduction over full 6x64 blocks runs without guards
    assert re.search(r"if 6 <= A_0 - .* and 64 <= B_1 - .*:\n\s+for r0.inner in range\(.*\):\n"
                     r"\s+for i0 in range\(6\):  # unrolled\n\s+for i1 in range\(64\):  # vectorized\n"
                     r"\s+matmul.rf\[0, i0, i1\] = matmul.rf\[0, i0, i1\] \+ A\[.*\]\*B.local\[r0.inner, i1\]", t)
    t = _ir("matmul", np.ones((2, 5, 3), F32), np.ones((2, 3, 4), F32))
    assert "matmul.rf" in t and "B.local" in t


def test_schedule_stencil_unrolled():
    t = _ir("conv3x3", np.ones((6, 6), F32), np.ones((3, 3), F32))
    assert "for di in range(3):  # unrolled" in t and "for dj in range(3):  # unrolled" in t
    assert _loop_line(t, "i").endswith("# parallel")


@pytest.mark.parametrize("name", ["softmax", "layernorm"])
def test_schedule_rowwise_stages_inside_row_loop(name):
    t = _ir(name, np.ones((5, 3), F32))
    head = t.splitlines()
    assert head[1].strip().startswith("for i0 in range(X_0):  # parallel")
    # (not counting blocked_sums' accumulators of long sums)
    allocs = [ln for ln in head if "allocate" in ln and not re.search(r"\.(acc|comp): ", ln)]
    assert len(allocs) == 2 and all(ln.endswith("local") and "[1, 1]" in ln for ln in allocs)
    # allocated inside the row loop, not at the top
    assert all(len(ln) - len(ln.lstrip()) > 2 for ln in allocs)


# ------------------------------------------------------------------ correctness
MM_SHAPES = [(0, 3, 5), (4, 0, 6), (3, 5, 0), (1, 1, 1), (6, 7, 64), (48, 5, 64), (47, 9, 63),
             (49, 4, 65), (13, 17, 130), (97, 3, 70),
             (200, 300, 70), (7, 513, 129)]   # several and uneven reduction blocks, row chunks
MM_DTYPES = [np.float32, np.float64, np.int32, np.int64, np.float16]


def _close(got, want, dtype, k=1):
    dtype = np.dtype(dtype)
    assert got.shape == want.shape
    if dtype.kind == "i":
        np.testing.assert_array_equal(got, want)
    else:
        rtol = {2: 2e-2, 4: 2e-5, 8: 1e-12}[dtype.itemsize]
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol,
                                   atol=rtol * max(1, k) ** 0.5 * 4)


@pytest.mark.parametrize("dtype", MM_DTYPES, ids=lambda d: np.dtype(d).name)
def test_matmul(dtype, rng):
    shapes = MM_SHAPES if dtype in (np.float32, np.float64) else MM_SHAPES[::3]
    for n, k, m in shapes:
        a, b = _rand(rng, (n, k), dtype), _rand(rng, (k, m), dtype)
        want = a.astype(np.float64) @ b.astype(np.float64)
        got = K["matmul"](a, b, backend="cpu")
        assert got.dtype == dtype
        _close(got, want, dtype, k)


def test_matmul_views(rng):
    a, b = rng.standard_normal((50, 9)), rng.standard_normal((9, 67))
    want = a @ b
    for va in _views(a):
        for vb in _views(b):
            _close(K["matmul"](va, vb, backend="cpu"), want, np.float64, 9)
    # a transposed read of a (9, 50) array
    at = np.ascontiguousarray(a.T)
    _close(K["matmul"](at.T, b[:, ::-1], backend="cpu"), a @ b[:, ::-1], np.float64, 9)


def test_batched_matmul_and_matvec(rng):
    for bsz, n, k, m in [(2, 7, 5, 66), (3, 1, 1, 1), (0, 3, 4, 5), (1, 49, 3, 64)]:
        a, b = rng.standard_normal((bsz, n, k)), rng.standard_normal((bsz, k, m))
        _close(K["matmul"](a, b, backend="cpu"), a @ b, np.float64, k)
    for n, k in [(0, 3), (3, 0), (1, 1), (7, 19), (50, 33)]:
        a, x = rng.standard_normal((n, k)).astype(F32), rng.standard_normal(k).astype(F32)
        _close(K["matmul"](a, x, backend="cpu"), a.astype(np.float64) @ x, F32, k)
        _close(K["matmul"](a[::-1], x[::-1], backend="cpu"),
               a[::-1].astype(np.float64) @ x[::-1], F32, k)


RED_SHAPES = [(0, 5), (5, 0), (1, 1), (3, 257), (300, 2), (7, 513), (33, 255), (2, 256)]
RED_DTYPES = [np.float32, np.float64, np.int32, np.int64]


@pytest.mark.parametrize("dtype", RED_DTYPES, ids=lambda d: np.dtype(d).name)
def test_sums(dtype, rng):
    for shape in RED_SHAPES:
        a = _rand(rng, shape, dtype)
        for v in _views(a) if dtype == np.float32 else [a]:
            a64 = v.astype(np.float64)
            _close(np.asarray(K["total"](v, backend="cpu")), np.asarray(a64.sum()), dtype, v.size)
            _close(K["sum0"](v, backend="cpu"), a64.sum(axis=0), dtype, shape[0])
            _close(K["sum1"](v, backend="cpu"), a64.sum(axis=1), dtype, shape[1])


def test_sums_float16(rng):
    for shape in [(1, 1), (5, 9), (3, 257)]:
        a = (rng.random(shape) * 2).astype(np.float16)
        a64 = a.astype(np.float64)
        _close(K["sum0"](a, backend="cpu"), a64.sum(axis=0), np.float16, shape[0])
        _close(K["sum1"](a, backend="cpu"), a64.sum(axis=1), np.float16, shape[1])
        _close(np.asarray(K["total"](a, backend="cpu")), np.asarray(a64.sum()), np.float16, a.size)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.float16],
                         ids=lambda d: np.dtype(d).name)
def test_max_and_argmax(dtype, rng):
    for shape in [(1, 1), (3, 257), (300, 2), (7, 9)]:
        a = _rand(rng, shape, dtype)
        for v in _views(a) if dtype == np.float32 else [a]:
            np.testing.assert_array_equal(K["max0"](v, backend="cpu"), v.max(axis=0))
            np.testing.assert_array_equal(K["max1"](v, backend="cpu"), v.max(axis=1))
            np.testing.assert_array_equal(K["maxall"](v, backend="cpu"), v.max())
            np.testing.assert_array_equal(K["argmax1"](v, backend="cpu"), v.argmax(axis=1))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_max_propagates_nan(dtype, rng):
    for shape in [(4, 5), (3, 300), (260, 3)]:
        a = rng.standard_normal(shape).astype(dtype)
        a[1, 2] = np.nan
        a[-1, -1] = np.nan
        a[2, 0] = np.nan           # NaN first in a column... and not first in its row
        with np.errstate(invalid="ignore"):
            np.testing.assert_array_equal(K["max0"](a, backend="cpu"), a.max(axis=0))
            np.testing.assert_array_equal(K["max1"](a, backend="cpu"), a.max(axis=1))
            assert np.isnan(K["maxall"](a, backend="cpu"))
            np.testing.assert_array_equal(K["argmax1"](a, backend="cpu"), a.argmax(axis=1))
            s = K["softmax"](a, backend="cpu")
            assert np.isnan(s[1]).all() and not np.isnan(s[0]).any()


def test_large_full_sum_float32(rng):
    a = (np.ones(1 << 22) + rng.random(1 << 22)).astype(F32).reshape(1 << 11, 1 << 11)
    got = float(K["total"](a, backend="cpu"))
    want = a.astype(np.float64).sum()
    assert abs(got - want) <= 1e-5 * abs(want)


def test_elementwise_chunks(rng):
    for n in [0, 1, 16383, 16384, 16385, 40000]:
        a, b = rng.standard_normal(n), rng.standard_normal(n)
        np.testing.assert_allclose(K["axpy"](a, b, backend="cpu"), a * 2 + b, rtol=1e-15)
        np.testing.assert_allclose(K["axpy"](a[::-1], b, backend="cpu"), a[::-1] * 2 + b, rtol=1e-15)
    a, b = rng.standard_normal((70, 301)).astype(F32), rng.standard_normal((70, 301)).astype(F32)
    for va in _views(a):
        np.testing.assert_allclose(K["axpy"](va, b, backend="cpu"), va * 2 + b, rtol=1e-6)


def _softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _layernorm(x):
    d = x - x.mean(axis=1, keepdims=True)
    return d / np.sqrt((d * d).mean(axis=1, keepdims=True) + 1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_layernorm(dtype, rng):
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    for shape in [(0, 4), (1, 1), (3, 257), (65, 33)]:
        x = rng.standard_normal(shape).astype(dtype)
        x64 = x.astype(np.float64)
        for v, v64 in [(x, x64), (x[::-1, ::-1], x64[::-1, ::-1])]:
            np.testing.assert_allclose(K["softmax"](v, backend="cpu"), _softmax(v64), rtol=rtol, atol=rtol)
            np.testing.assert_allclose(K["layernorm"](v, backend="cpu"), _layernorm(v64),
                                       rtol=rtol * 10, atol=rtol * 10)


def _conv_ref(I, F):
    n, m = I.shape
    out = np.zeros((n - 2, m - 2))
    for di in range(3):
        for dj in range(3):
            out += I[di:di + n - 2, dj:dj + m - 2] * F[di, dj]
    return out


def test_conv3x3(rng):
    for shape in [(2, 2), (3, 3), (4, 9), (40, 37)]:
        I, F = rng.standard_normal(shape), rng.standard_normal((3, 3))
        np.testing.assert_allclose(K["conv3x3"](I, F, backend="cpu"), _conv_ref(I, F), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(K["conv3x3"](I[::-1], F.T, backend="cpu"), _conv_ref(I[::-1], F.T),
                                   rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------ one thread
def test_one_thread_no_rfactor(monkeypatch, rng):
    # default schedules plan for the CPUs the process may use, not for the runtime count
    # (KDSL_NUM_THREADS is read at every call since issue 26): a one-CPU process
    from kdsl import config
    monkeypatch.setattr(config, "usable_cores", lambda: 1)
    k1 = make_kernels()
    a = rng.standard_normal((37, 300)).astype(F32)
    t = _ir("total", a, kernels=k1)
    assert ".rf" not in t
    a64 = a.astype(np.float64)
    _close(np.asarray(k1["total"](a, backend="cpu")), np.asarray(a64.sum()), F32, a.size)
    _close(k1["sum0"](a[::-1], backend="cpu"), a64[::-1].sum(axis=0), F32, 37)
    _close(k1["sum1"](a, backend="cpu"), a64.sum(axis=1), F32, 300)
    np.testing.assert_array_equal(k1["maxall"](a, backend="cpu"), a.max())
    for n, k, m in [(0, 2, 3), (1, 1, 1), (49, 7, 65)]:
        x, y = rng.standard_normal((n, k)), rng.standard_normal((k, m))
        _close(k1["matmul"](x, y, backend="cpu"), x @ y, np.float64, k)
    x = rng.standard_normal((5, 7))
    np.testing.assert_allclose(k1["softmax"](x, backend="cpu"), _softmax(x), rtol=1e-12)
    big = (np.ones(1 << 20) + rng.random(1 << 20)).astype(F32).reshape(1 << 10, 1 << 10)
    want = big.astype(np.float64).sum()
    assert abs(float(k1["total"](big, backend="cpu")) - want) <= 1e-5 * want


# ------------------------------------------------------------------ explicit vectors
def test_gemm_emits_explicit_vectors(rng):
    a, b = np.ones((5, 3), F32), np.ones((3, 4), F32)
    src = K["matmul"].source(a, b, backend="cpu")
    assert re.search(r"load <64 x float>", src), "no <64 x float> load in the GEMM's LLVM IR"
    assert re.search(r"fmul( \w+)* <64 x float>", src)
    src64 = K["matmul"].source(a.astype(np.float64), b.astype(np.float64), backend="cpu")
    assert "<64 x double>" in src64


def test_vector_fallbacks_are_correct(rng):
    # a strided B (non-unit last stride) and float16: no explicit vectors, same results
    a, b = rng.standard_normal((13, 6)).astype(F32), rng.standard_normal((6, 140)).astype(F32)
    bs = b[:, ::2]
    _close(K["matmul"](a, bs, backend="cpu"), a.astype(np.float64) @ bs.astype(np.float64), F32, 6)
    h = lambda x: x.astype(np.float16)          # noqa: E731
    src16 = K["matmul"].source(h(a), h(b), backend="cpu")
    assert "<64 x half>" not in src16
    _close(K["matmul"](h(a), h(b), backend="cpu"), h(a).astype(np.float64) @ h(b).astype(np.float64),
           np.float16, 6)
