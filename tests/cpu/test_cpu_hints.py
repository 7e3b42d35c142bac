"""Hints on the cpu backend: they compose, adjust the default schedule instead of replacing
it, never let LLVM print to stderr, and keep compile time bounded."""
import contextlib
import os
import tempfile
import time
import warnings

import numpy as np
import pytest

import kdsl as kd
from hint_matrix import HINT_SETS, KERNELS, cases, check, hint_id, make_kernel

SPEC2 = kd.TensorSpec(("n", "m"), kd.float32)


@pytest.fixture
def fresh_cache(monkeypatch):
    """Compile for real (an object from the disk cache would hide what LLVM prints)."""
    monkeypatch.setenv("KDSL_CACHE", "0")


@contextlib.contextmanager
def captured_fd2():
    """Everything written to file descriptor 2 (where LLVM prints) inside the block."""
    out = []
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield out
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            out.append(tmp.read().decode(errors="replace"))


def _no_unit_dims(kname):
    _, _, shapes, _ = KERNELS[kname]
    return [s for s in shapes if not any(d == 1 for shape in s for d in shape)]


def _cpu_cases():
    """A fifth of the matrix, every hint set on one or two kinds of kernel (the interpreter runs all
    of it through the same plan machinery; ``KDSL_TEST_FULL_HINTS=1`` runs all of it here)."""
    if os.environ.get("KDSL_TEST_FULL_HINTS") == "1":
        return cases()
    order = list(KERNELS)
    return [(kname, k) for kname, k in cases() if (k + order.index(kname)) % 5 == 0]


@pytest.mark.parametrize("kname, k", _cpu_cases(), ids=lambda x: x if isinstance(x, str) else hint_id(x))
def test_matrix_on_cpu(kname, k, rng, monkeypatch, fresh_cache):
    """Hint sets of the matrix on every kind of kernel, against numpy in float64; LLVM prints
    nothing.  (Shapes with size-1 dimensions compile a specialisation of their own:
    test_unit_dims runs those for the single hints.)"""
    monkeypatch.setitem(KERNELS, kname, KERNELS[kname][:2] + (_no_unit_dims(kname),)
                        + KERNELS[kname][3:])
    with captured_fd2() as err, warnings.catch_warnings():
        warnings.simplefilter("error")
        check(kname, make_kernel(kname, "cpu", k), "cpu", rng)
    assert err[0] == "", err[0]


UNIT_SETS = [k for k, hs in enumerate(HINT_SETS)
             if hs in (dict(parallel=True), dict(vectorize=8), dict(unroll=4), dict(rfactor=3),
                       dict(tile={"SP0": 4}), dict(vectorize="RD0"))]


@pytest.mark.parametrize("kname", list(KERNELS))
def test_unit_dims(kname, rng):
    for k in UNIT_SETS:
        if (kname, k) in cases():
            _, ref, shapes, _ = KERNELS[kname]
            kern = make_kernel(kname, "cpu", k)
            for shape_set in shapes:
                if any(d == 1 for s in shape_set for d in s):
                    args = [rng.standard_normal(s).astype(np.float32) for s in shape_set]
                    np.testing.assert_allclose(np.asarray(kern(*args, backend="cpu"), np.float64),
                                               ref(*[a.astype(np.float64) for a in args]),
                                               rtol=2e-5, atol=2e-4, err_msg=hint_id(k))


# ------------------------------------------------------------------ hints adjust the default
def _lower(fn, *specs, **hints):
    return str(kd.kernel(kd.schedule("cpu", **hints)(fn)).lower(*specs, backend="cpu"))


@pytest.mark.parametrize("fn", [lambda a: a * 2.0 + 1.0, lambda a: a.sum(axis=1),
                                lambda a: a.sum(axis=0), lambda a: kd.exp(a - a.max(axis=1, keepdims=True))],
                         ids=["elementwise", "row", "column", "rowwise-chain"])
def test_vectorize_keeps_the_default_parallel_loop(fn):
    text = _lower(fn, SPEC2, vectorize=8)
    assert "# parallel" in text and "# vectorized" in text, text
    assert text.index("# parallel") < text.index("# vectorized")


def test_hints_keep_the_rest_of_each_default():
    col = _lower(lambda a: a.sum(axis=0), SPEC2, vectorize=8)
    assert "i0.outer in range(ceildiv(m, 256)):  # parallel" in col     # the column strip
    assert "i0.inner.outer in range(32):" in col and "# vectorized" in col
    st = _lower(KERNELS["stencil"][0], SPEC2, tile={"i": 4})
    assert st.count("# unrolled") == 2 and "# parallel" in st          # window still unrolled
    mm = _lower(lambda a, b: a @ b, SPEC2, kd.TensorSpec(("m", "p"), kd.float32),
                tile={"i0": 96, "i1": 32}, unroll=4)
    assert "b.local" in mm and "# parallel" in mm and "range(32):  # vectorized" in mm
    assert "i0 in range(4):  # unrolled" in mm                          # 4-row register block
    full = _lower(lambda a: a.sum(), SPEC2, threads=3)
    assert "range(3):  # parallel" in full                              # 3 partial sums


def test_unroll_of_the_parallel_axis_moves_the_default_parallel_loop(rng):
    text = _lower(lambda a: a * 2.0, kd.TensorSpec((4, "m"), kd.float32), unroll="i0")
    assert "i0 in range(4):  # unrolled" in text and "i1 in range(m):  # parallel" in text


def test_gemm_is_recognised_by_the_combiner_kind_not_its_name(rng):
    prod = kd.reducer(lambda x, y: x * y, identity=1.0, name="sum")

    @kd.kernel
    def f(a, b):
        n, k = a.shape
        _, m = b.shape
        r = kd.reduce_axis(k)
        return kd.compute((n, m), lambda i, j: prod(a[i, r] * b[r, j], axis=r))
    a = rng.uniform(0.5, 1.5, (5, 4)).astype(np.float32)
    b = rng.uniform(0.5, 1.5, (4, 3)).astype(np.float32)
    want = np.prod(a.astype(np.float64)[:, :, None] * b[None], axis=1)
    np.testing.assert_allclose(f(a, b, backend="cpu"), want, rtol=1e-5)
    assert "b.local" not in str(f.lower(a, b, backend="cpu"))


# ------------------------------------------------------------------ nothing raw from LLVM
def test_no_llvm_remark_reaches_stderr(rng, fresh_cache):
    """Schedules that made LLVM print 'loop not unrolled/vectorized' before: unroll of loops of
    unknown extent, vectorized loops around loops, tiny guarded vector loops."""
    def sym_unroll(s):
        b = s.outputs[0]
        b.unroll(b.leaf[1])
        b.unroll(b.leaf[0])

    def outer_vector(s):
        b = s.outputs[0]
        b.vectorize(b.leaf[0])

    a = rng.standard_normal((9, 13)).astype(np.float32)
    with captured_fd2() as err, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        k1 = kd.kernel(lambda x: x * 2.0 + 1.0)
        k1.schedule("cpu")(sym_unroll)
        np.testing.assert_allclose(k1(a, backend="cpu"), a * 2.0 + 1.0)
        k2 = kd.kernel(lambda x: x.T @ x)
        k2.schedule("cpu")(outer_vector)
        np.testing.assert_allclose(k2(a, backend="cpu"), a.T.astype(np.float64) @ a, rtol=1e-4)
        k3 = kd.kernel(kd.schedule("cpu", tile={"i0": 5, "i1": 3}, vectorize=2, unroll=5,
                                   parallel=True)(lambda x: kd.exp(x) + 1.0))
        np.testing.assert_allclose(k3(a, backend="cpu"), np.exp(a.astype(np.float64)) + 1.0, rtol=1e-5)
    assert err[0] == "", err[0]
    said = [str(w.message) for w in caught if issubclass(w.category, kd.ScheduleWarning)]
    assert any("vectorized loop over i0 contains other loops" in m for m in said), said


# ------------------------------------------------------------------ compile time
def test_unrolling_a_loop_around_a_nest_compiles_in_bounded_time(rng, fresh_cache):
    """Extent 500 ran past 200 s when LLVM unrolled it; kdsl caps the copies and says so."""
    @kd.kernel
    def f(a):
        n, m = a.shape
        return kd.compute((500, m), lambda i, j: kd.exp(a[i % n, j]) * 2.0 + a[(i + 1) % n, j])
    f.schedule("cpu")(lambda s: s.outputs[0].unroll(s.outputs[0].leaf[0]))
    a = rng.standard_normal((7, 33)).astype(np.float32)
    t = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = f(a, backend="cpu")
    elapsed = time.perf_counter() - t
    i = np.arange(500)
    want = np.exp(a.astype(np.float64)[i % 7]) * 2.0 + a[(i + 1) % 7]
    np.testing.assert_allclose(got, want, rtol=1e-5)
    msgs = [str(w.message) for w in caught if issubclass(w.category, kd.ScheduleWarning)]
    assert len(msgs) == 1 and "loop over i (extent 500)" in msgs[0], msgs
    assert "unrolled 7 times per iteration instead of fully: its body holds loops" in msgs[0]
    assert elapsed < 10.0, f"compile took {elapsed:.1f} s"   # ~1 s alone; was > 200 s
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        src = f.source(a, backend="cpu")
    assert src.count("call float @") + src.count("exp") < 200   # a handful of copies, not 500


def test_unrolling_small_windows_stays_full(rng):
    """Within the cap, unroll copies every iteration (no warning): a stencil's 3x3 window."""
    kern = make_kernel("stencil", "cpu", next(k for k, h in enumerate(HINT_SETS) if h == dict(unroll=4)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check("stencil", kern, "cpu", rng)


# ------------------------------------------------------------------ 0-d outputs
@pytest.mark.parametrize("hv", [dict(parallel=True), dict(unroll=4), dict(vectorize=8),
                                dict(parallel=True, unroll=4, vectorize=8)])
def test_zero_d_outputs(hv, rng):
    x = rng.standard_normal(37).astype(np.float32)
    k = kd.kernel(kd.schedule("cpu", **hv)(lambda v: kd.compute((), lambda: v[2] * 2.0)))
    np.testing.assert_allclose(k(x, backend="cpu"), x[2] * 2.0)
    s = kd.kernel(kd.schedule("cpu", **hv)(lambda v: v.sum()))
    np.testing.assert_allclose(s(x, backend="cpu"), x.astype(np.float64).sum(), rtol=1e-5)
