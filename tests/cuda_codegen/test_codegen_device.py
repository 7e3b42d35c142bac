"""The generated CUDA run on a device (mark ``cuda``; skipped without one).  Needs the lead's
runtime (``kernel(np_array, backend=BACKEND)``, ``kdsl_cuda.is_available()``); until it lands
every test here skips.  Kept simple on purpose: each case is a kernel with a cuda schedule,
called on numpy arrays, compared with numpy in float64.

    python3 -m pytest -q -m cuda tests/cuda_codegen/test_codegen_device.py

Covers: warp-shuffle reductions (every combiner, partial warps, groups inside a warp, 2-D and
strided groups), float16/bfloat16 kernels, cp.async pipelines (double buffering and 3 stages,
the seed-002 ladder's pipelined steps) and every math function of SPEC §2.
"""
import os

import numpy as np
import pytest

import kdsl as kd
import schedules as S
from ctr_cases import REDUCTIONS, SCHEDULES, data, reduction_fn
from test_half_async import PIPELINED, chain, tile


def _device():
    try:
        import kdsl_cuda
    except ImportError:
        return False
    avail = getattr(kdsl_cuda, "is_available", None)
    try:
        return bool(avail and avail())
    except Exception:
        return False


#: the backend under test; KDSL_DEVICE_TEST_BACKEND=interp-cuda runs the same tests on the SIMT
#: interpreter (slow; checks the tests themselves without a device)
BACKEND = os.environ.get("KDSL_DEVICE_TEST_BACKEND", "cuda")

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(BACKEND == "cuda" and not _device(),
                                 reason="no CUDA device (or kdsl_cuda's runtime)")]


def scheduled(fn, sched):
    k = kd.kernel(fn)
    k.schedule("cuda")(sched)
    return k


# ------------------------------------------------------------------ shuffle reductions
@pytest.mark.parametrize("sched,axis,path", SCHEDULES, ids=[s[0].__name__ for s in SCHEDULES])
@pytest.mark.parametrize("kind", sorted(REDUCTIONS))
def test_cross_thread_reductions(sched, axis, path, kind, rng):
    dtype = REDUCTIONS[kind][1][0]
    k = scheduled(reduction_fn(kind, axis), sched)
    for shape in ((67, 300), (5, 1), (1, 1500), (33, 64)):
        A = data(rng, shape, dtype)
        want = REDUCTIONS[kind][0](A, axis)
        got = np.asarray(k(A, backend=BACKEND))
        if kind in ("sum", "prod") and A.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        else:
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kind,dtype", [(k, d) for k, (_, ds) in REDUCTIONS.items() for d in ds])
def test_every_combiner_and_dtype(kind, dtype, rng):
    for sched, axis, _ in (SCHEDULES[1], SCHEDULES[4], SCHEDULES[9], SCHEDULES[11]):
        k = scheduled(reduction_fn(kind, axis), sched)
        A = data(rng, (40, 130), dtype)
        want = REDUCTIONS[kind][0](A, axis)
        got = np.asarray(k(A, backend=BACKEND))
        if kind in ("sum", "prod") and A.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        else:
            np.testing.assert_array_equal(got, want)


def test_argmax_ties_and_nans_go_to_the_smallest_index(rng):
    k = scheduled(reduction_fn("argmax", 1), SCHEDULES[4][0])
    A = np.zeros((6, 200), np.float32)
    A[1, 150] = A[1, 3] = 1.0
    A[2, 170] = np.nan
    A[3, 50] = A[3, 20] = np.nan
    A[4] = -np.inf
    np.testing.assert_array_equal(np.asarray(k(A, backend=BACKEND)), A.argmax(1))


# ------------------------------------------------------------------ 16-bit floats
def test_float16_chain(rng):
    k = scheduled(chain, tile)
    X = rng.standard_normal((70, 333)).astype(np.float16)
    Y = rng.standard_normal((70, 333)).astype(np.float16)
    want = k(X, Y, backend="interp-cuda")
    got = np.asarray(k(X, Y, backend=BACKEND))
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), np.asarray(want).astype(np.float32),
                               rtol=2e-3, atol=2e-3)


def test_bfloat16_chain(rng):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    k = scheduled(chain, tile)
    X = rng.standard_normal((70, 333)).astype(ml_dtypes.bfloat16)
    Y = rng.standard_normal((70, 333)).astype(ml_dtypes.bfloat16)
    want = np.asarray(k(X, Y, backend="numpy")).astype(np.float32)
    got = np.asarray(k(X, Y, backend=BACKEND)).astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)


# ------------------------------------------------------------------ cp.async pipelines
def _matmul(A, B):
    """C[i, j] = sum_r A[i, r] * B[r, j]: the stage the gpu_core schedules name "C"."""
    n_, kk = A.shape
    r = kd.reduce_axis(kk, name="r")
    return kd.compute((n_, B.shape[1]), lambda i, j: kd.sum(A[i, r] * B[r, j], axis=r), name="C")


@pytest.mark.parametrize("name,sched,stages", PIPELINED, ids=[p[0] for p in PIPELINED])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cp_async_pipelines(name, sched, stages, dtype, rng):
    k = scheduled(_matmul, sched)
    # (sizes of 1 become static dims: these explicit schedules' thread splits need them > 1)
    for n_, kk, m in ((64, 64, 64), (100, 37, 75), (3, 9, 2), (256, 512, 128)):
        A, B = S.rand(rng, (n_, kk), dtype), S.rand(rng, (kk, m), dtype)
        got = np.asarray(k(A, B, backend=BACKEND))
        np.testing.assert_allclose(got, A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------------ math functions
UNARY = {"exp": (kd.exp, np.exp), "log": (kd.log, np.log), "sqrt": (kd.sqrt, np.sqrt),
         "rsqrt": (kd.rsqrt, lambda x: 1 / np.sqrt(x)), "sin": (kd.sin, np.sin),
         "cos": (kd.cos, np.cos), "tanh": (kd.tanh, np.tanh),
         "sigmoid": (kd.sigmoid, lambda x: 1 / (1 + np.exp(-x))), "abs": (abs, np.abs)}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("name", sorted(UNARY) + ["erf", "pow", "floordiv", "mod", "minmax_nan"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_math_functions(name, dtype, rng):
    X = (rng.standard_normal((33, 130)) * 3).astype(dtype)
    Y = (rng.standard_normal((33, 130)) * 3).astype(dtype)
    X[0, :4] = [np.nan, np.inf, -np.inf, 0.0]
    if name in UNARY:
        f, ref = UNARY[name]
        fn = lambda X, Y: kd.compute(X.shape, lambda i, j: f(X[i, j]), name="O")  # noqa: E731
        want = ref(X.astype(np.float64))
    elif name == "erf":
        import math
        fn = lambda X, Y: kd.compute(X.shape, lambda i, j: kd.erf(X[i, j]), name="O")  # noqa: E731
        want = np.vectorize(math.erf)(X.astype(np.float64))
    elif name == "pow":
        fn = lambda X, Y: kd.compute(X.shape, lambda i, j: abs(X[i, j]) ** Y[i, j], name="O")  # noqa: E731
        want = np.abs(X.astype(np.float64)) ** Y
    elif name == "floordiv":
        fn = lambda X, Y: kd.compute(X.shape, lambda i, j: X[i, j] // Y[i, j], name="O")  # noqa: E731
        want = X // Y
    elif name == "mod":
        fn = lambda X, Y: kd.compute(X.shape, lambda i, j: X[i, j] % Y[i, j], name="O")  # noqa: E731
        want = X % Y
    else:
        fn = lambda X, Y: kd.compute(X.shape, lambda i, j: kd.maximum(X[i, j], Y[i, j])  # noqa: E731
                                     - kd.minimum(X[i, j], Y[i, j]), name="O")
        want = np.maximum(X, Y) - np.minimum(X, Y)
    k = scheduled(fn, tile)
    with np.errstate(all="ignore"):
        got = np.asarray(k(X, Y, backend=BACKEND))
        rtol = 1e-5 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got, np.asarray(want, dtype=np.float64), rtol=rtol, atol=rtol)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.int8, np.uint8])
def test_integer_division_and_casts(dtype, rng):
    X = rng.integers(-100 if np.dtype(dtype).kind == "i" else 0, 100, (33, 130)).astype(dtype)
    Y = rng.integers(-7 if np.dtype(dtype).kind == "i" else 0, 8, (33, 130)).astype(dtype)
    fn = lambda X, Y: kd.compute(X.shape, lambda i, j: X[i, j] // Y[i, j] + X[i, j] % Y[i, j], name="O")  # noqa: E731
    k = scheduled(fn, tile)
    np.testing.assert_array_equal(np.asarray(k(X, Y, backend=BACKEND)),
                                  np.asarray(k(X, Y, backend="numpy")))
    F = (rng.standard_normal((33, 130)) * 1e3).astype(np.float32)
    cast = scheduled(lambda X: kd.compute(X.shape, lambda i, j: X[i, j].astype("int32"), name="O"), tile)
    np.testing.assert_array_equal(np.asarray(cast(F, backend=BACKEND)), F.astype(np.int32))


# ------------------------------------------------------------------ 16-byte vector accesses
def _add3(a, b):
    return a + b * 3


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float64, np.int64])
def test_vectorized_accesses_aligned_or_not(dtype, rng):
    """Default schedules vectorise by 16 bytes; sizes that do not divide, views at odd offsets
    and strided views take the scalar fallback: every result still exact."""
    k = kd.kernel(_add3)
    base = (rng.standard_normal(5003) * 100).astype(dtype)
    other = (rng.standard_normal(5003) * 100).astype(dtype)
    for sl in (slice(0, 4096), slice(0, 4099), slice(1, 4097), slice(3, 5003), slice(0, 1),
               slice(0, 0), slice(2, 5000, 3)):
        a, b = base[sl], other[sl]
        got = np.asarray(k(a, b, backend=BACKEND))
        if np.dtype(dtype).kind == "f":   # CUDA contracts a + b * 3 into one FMA (one rounding)
            eps = np.finfo(dtype).eps
            np.testing.assert_allclose(got, a + b * 3, rtol=0, atol=4 * eps * float(
                np.abs(b * 3).max(initial=0) + np.abs(a).max(initial=0)))
        else:
            np.testing.assert_array_equal(got, a + b * 3)


def test_vectorized_row_sums_with_odd_rows(rng):
    k = kd.kernel(lambda A: A.sum(axis=1))
    for shape in ((64, 4096), (37, 1027), (5, 3), (300, 4098)):
        A = rng.standard_normal(shape).astype(np.float32)
        got = np.asarray(k(A, backend=BACKEND))
        np.testing.assert_allclose(got, A.astype(np.float64).sum(1), rtol=1e-4, atol=1e-3)
        sub = A[:, 1:]          # rows start at odd offsets: the scalar path
        np.testing.assert_allclose(np.asarray(k(sub, backend=BACKEND)),
                                   sub.astype(np.float64).sum(1), rtol=1e-4, atol=1e-3)
