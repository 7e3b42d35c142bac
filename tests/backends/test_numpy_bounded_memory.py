"""The numpy backend evaluates in bounded memory (issue 8, item 7).

Peak memory and time on stride-0 ``np.broadcast_to`` views of 1e9+ elements run
in a subprocess (ru_maxrss is per process).  In process, a tiny block budget
forces every stage, reduction and read through many blocks; results must equal
numpy's (float64 oracle) and the one-block evaluation, including tie-breaking
reducers across block boundaries.
"""
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kdsl as kd
from kdsl.backends import numpy_backend as nb

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_HUGE = textwrap.dedent("""
    import resource, sys, time
    import numpy as np
    import kdsl as kd

    def peak_mb():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    @kd.kernel
    def total(A):
        return A.sum()

    @kd.kernel
    def rows(A):
        return A.sum(axis=1)

    @kd.kernel
    def cols(A):
        return A.max(axis=0)

    row = (np.arange(1000, dtype=np.float32) % 7) / 8
    scalar_view = np.broadcast_to(np.float32(1.5), (1_200_000_000,))
    row_view = np.broadcast_to(row, (400_000, 1000))
    small_view = np.broadcast_to(row, (200_000, 1000))
    for k, a in ((total, scalar_view[:10]), (total, row_view[:3]), (rows, row_view[:3]),
                 (cols, row_view[:3])):
        k(a, backend="numpy")                     # trace and compile outside the timing
    base = peak_mb()
    out = []
    for name, k, a, want, ref in (
            ("1-D sum", total, scalar_view, 1.5 * 1.2e9, lambda: scalar_view.sum()),
            ("2-D sum", total, row_view, 4e5 * float(row.sum(dtype=np.float64)),
             lambda: row_view.sum()),
            ("row sums", rows, small_view, float(row.sum(dtype=np.float64)),
             lambda: small_view.sum(axis=1)),
            ("column max", cols, small_view, row.astype(np.float64), lambda: small_view.max(axis=0))):
        t0 = time.perf_counter()
        got = np.asarray(k(a, backend="numpy"), np.float64)
        t_kd = time.perf_counter() - t0
        t0 = time.perf_counter()
        ref()
        t_np = time.perf_counter() - t0
        err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
        out.append((name, t_kd, t_np, err, peak_mb() - base))
    print(repr(out))
""")


def test_broadcast_views_of_a_billion_elements_in_bounded_memory_and_time():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [ROOT] + [p for p in [os.environ.get("PYTHONPATH")] if p])}
    r = subprocess.run([sys.executable, "-c", _HUGE], capture_output=True, text=True, env=env,
                       cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    for name, t_kd, t_np, err, grown_mb in eval(r.stdout.strip().splitlines()[-1]):
        # materialising any of these views takes 0.8 to 4.8 GB (1.2e9 float32s)
        assert grown_mb < 120, f"{name}: peak memory grew by {grown_mb:.0f} MB"
        assert err < 1e-5, f"{name}: relative error {err:.2g}"
        # numpy itself takes ~0.2-1 s; the reference backend stays within a small factor
        assert t_kd < 10 * t_np + 3.0, f"{name}: {t_kd:.2f} s (numpy {t_np:.2f} s)"


# ----------------------------------------------------------------- many blocks, same answers
@pytest.fixture
def tiny_budget(monkeypatch):
    """Blocks of at most 8 points: every grid of the tests below is cut many ways."""
    monkeypatch.setattr(nb, "BUDGET_BYTES", 64)


def _both(kernel, *args):
    """The kernel's numpy-backend result with the tiny budget and with one block."""
    small = kernel(*args, backend="numpy")
    saved = nb.BUDGET_BYTES
    nb.BUDGET_BYTES = 1 << 40
    try:
        whole = kernel(*args, backend="numpy")
    finally:
        nb.BUDGET_BYTES = saved
    return small, whole


@kd.kernel
def _reductions(A):
    return A.sum(), A.sum(axis=0), A.max(axis=1), A.argmax(axis=1), A.argmin(axis=0), A.mean()


@pytest.mark.parametrize("shape", [(1, 1), (7, 5), (13, 17), (0, 4), (3, 0)])
def test_reductions_match_numpy_across_blocks(tiny_budget, shape, rng):
    A = rng.standard_normal(shape).astype(np.float32)
    if 0 in shape:
        got, _ = _both(kd.kernel(lambda A: (A.sum(), A.sum(axis=0), A.sum(axis=1))), A)
        for g, w in zip(got, (A.sum(), A.sum(axis=0), A.sum(axis=1))):
            np.testing.assert_array_equal(g, w)
        return
    small, whole = _both(_reductions, A)
    A64 = A.astype(np.float64)
    want = (A64.sum(), A64.sum(axis=0), A64.max(axis=1), A.argmax(axis=1), A.argmin(axis=0),
            A64.mean())
    for s, w, ref in zip(small, whole, want):
        np.testing.assert_allclose(s, ref, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(s, w, rtol=1e-5, atol=1e-5)


def test_argmax_ties_across_blocks_pick_the_first(tiny_budget):
    A = np.zeros((3, 40), np.float32)
    A[0, [5, 9, 30]] = 2          # ties in different blocks
    A[1, [39]] = 1
    A[2, :] = 7                   # all equal: index 0
    np.testing.assert_array_equal(_both(kd.kernel(lambda A: A.argmax(axis=1)), A)[0], [5, 39, 0])
    B = np.full((40,), 3, np.int32)
    assert int(_both(kd.kernel(lambda B: B.argmin()), B)[0]) == 0


@kd.kernel
def _index_style(A, k):
    n, m = A.shape
    r = kd.reduce_axis(m, name="r")
    shifted = kd.compute((n - 1, m), lambda i, j: A[i + 1, j] - A[i, m - 1 - j], name="S")
    strided = kd.compute(((n + 1) // 2,), lambda i: A[2 * i, 0] * 2, name="T")
    diag = kd.compute((n,), lambda i: A[i, i % m], name="D")
    offset = kd.compute((n,), lambda i: kd.sum(A[i, r] * A[n - 1 - i, (r + k) % m], axis=r),
                        name="O")
    return shifted, strided, diag, offset, A.T.sum(axis=1)


@pytest.mark.parametrize("shape", [(6, 4), (9, 11), (1, 3)])
def test_index_style_reads_views_and_fallbacks_match_numpy(tiny_budget, shape, rng):
    A = rng.standard_normal(shape).astype(np.float32)
    n, m = shape
    k = 3
    small, whole = _both(_index_style, A, k)
    want = (A[1:] - A[:-1, ::-1], A[::2, 0] * 2, A[np.arange(n), np.arange(n) % m],
            np.array([float((A[i].astype(np.float64) * A[n - 1 - i, (np.arange(m) + k) % m]).sum())
                      for i in range(n)]), A.T.astype(np.float64).sum(axis=1))
    for s, w, ref in zip(small, whole, want):
        np.testing.assert_allclose(s, ref, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(s, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("view", ["broadcast", "transposed", "negative", "strided"])
def test_views_of_every_layout(tiny_budget, view, rng):
    base = rng.standard_normal((10, 12)).astype(np.float32)
    A = {"broadcast": np.broadcast_to(base[0], (9, 12)), "transposed": base.T,
         "negative": base[::-1, ::-2], "strided": base[1::3, ::2]}[view]
    f = kd.kernel(lambda A: (A * 2 + 1, (A * A).sum(axis=1), A.sum()))
    small, whole = _both(f, A)
    A64 = A.astype(np.float64)
    for s, w, ref in zip(small, whole, (A64 * 2 + 1, (A64 * A64).sum(axis=1), A64.sum())):
        np.testing.assert_allclose(s, ref, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(s, w, rtol=1e-5, atol=1e-5)


def test_custom_reducer_conditioned_and_nested_reductions(tiny_budget, rng):
    A = rng.integers(-5, 6, size=(7, 9)).astype(np.int64)
    product = kd.reducer(lambda x, y: x * y, identity=1, name="product")

    @kd.kernel
    def f(A):
        n, m = A.shape
        r = kd.reduce_axis(m, name="r")
        s = kd.reduce_axis(n, name="s")
        prod = kd.compute((n,), lambda i: product(kd.where(A[i, r] == 0, 1, A[i, r]), axis=r),
                          name="P")
        # a reduction inside an expression, and one inside another's source
        nested = kd.compute((n,), lambda i: kd.sum(A[i, r], axis=r) * 2 + kd.max(A[s, i % m],
                                                                               axis=s), name="N")
        return prod, nested

    small, whole = _both(f, A)
    nz = np.where(A == 0, 1, A)
    want = (np.prod(nz, axis=1), A.sum(axis=1) * 2 + A[:, np.arange(7) % 9].max(axis=0))
    for s, w, ref in zip(small, whole, want):
        np.testing.assert_array_equal(s, ref)
        np.testing.assert_array_equal(s, w)


def test_blocks_cover_the_grid_in_order():
    from kdsl.numerics.numpy_chunks import blocks
    for ext, budget in (([5, 7, 3], 10), ([4], 3), ([2, 3], 100), ([3, 0, 2], 1), ([], 5),
                        ([1, 1, 9], 2), ([6, 5], 0), ([2, 3, 4], 5)):
        flat = []
        for b in blocks(ext, budget):
            sizes = [hi - lo for lo, hi in b]
            assert math.prod(sizes) <= max(budget, 1) or 0 in ext
            if not ext:
                flat.append(0)
                continue
            idx = np.indices(sizes).reshape(len(sizes), -1) + np.array(
                [lo for lo, _ in b]).reshape(-1, 1)
            flat.extend(np.ravel_multi_index(tuple(idx), ext).tolist())
        assert flat == list(range(math.prod(ext)))     # every point once, in C order
