"""PolyBench 4.2's loop-carried kernels in kdsl: ``kd.fori_loop``, ``kd.scan`` and triangular
reductions (``kd.reduce_axis((0, i))``).

Each kernel keeps PolyBench's argument order and returns the arrays the C code writes.
Time-stepped kernels take the step count as a run-time argument (never unrolled); the
other loops run over the arrays' sizes.  ``python3 examples/polybench.py`` runs each one
against a plain-Python transcription of PolyBench's C loops (tests/polybench/reference.py
holds the same transcriptions; tests/polybench/ checks every kernel on every backend).

How the loops map:

- an outer loop whose steps read all of the previous step (cholesky's row ``i`` reads rows
  ``< i``; a time step reads its neighbours) is a ``kd.fori_loop`` carrying the arrays;
- a recurrence along a row inside a step (a triangular solve, seidel's in-place sweep,
  adi's tridiagonal sweeps, nussinov's row) is a ``kd.scan`` whose update reads its earlier
  steps, at ``j - 1`` or over a triangular reduction ``kd.reduce_axis((0, j))``;
- a loop writing one row of a matrix is ``kd.where(r == i, row[c], A[r, c])`` over the carry.
"""
from __future__ import annotations

import numpy as np

import kdsl as kd


def _set_row(A, i, row):
    """``A`` with row ``i`` replaced by ``row`` (the carry's next value)."""
    return kd.compute(A.shape, lambda r, c: kd.where(r == i, row[c], A[r, c]))


# ----------------------------------------------------------------- linear algebra
@kd.kernel
def cholesky(A):
    """PolyBench ``cholesky``: A's lower triangle becomes L with L L^T = A (upper part kept)."""
    n = A.shape[0]

    def row(i, A):
        def solve(s, j):          # L[i, j] = (A[i, j] - sum_{k<j} L[i, k] L[j, k]) / L[j, j]
            k = kd.reduce_axis((0, j))
            return (A[i, j] - kd.sum(s[k] * A[j, k], axis=k)) / A[j, j]
        low = kd.scan((n,), lambda j: A[i, j] / A[j, j], solve)
        k = kd.reduce_axis((0, i))
        d = np.sqrt(A[i, i] - kd.sum(low[k] * low[k], axis=k))
        new = kd.compute((n,), lambda c: kd.where(c < i, low[c], kd.where(c == i, d, A[i, c])))
        return _set_row(A, i, new)
    return kd.fori_loop(0, n, row, A)


def _lu_rows(A):
    """PolyBench's ``lu`` loop (also the first part of ``ludcmp``)."""
    n = A.shape[0]

    def row(i, A):
        def solve(s, j):          # the multipliers left of the diagonal, in order
            k = kd.reduce_axis((0, j))
            return (A[i, j] - kd.sum(s[k] * A[k, j], axis=k)) / A[j, j]
        low = kd.scan((n,), lambda j: A[i, j] / A[j, j], solve)

        def upper(c):             # the row of U: A[i, c] - sum_{k<i} L[i, k] U[k, c]
            k = kd.reduce_axis((0, i))
            return A[i, c] - kd.sum(low[k] * A[k, c], axis=k)
        up = kd.compute((n,), upper)
        return _set_row(A, i, kd.compute((n,), lambda c: kd.where(c < i, low[c], up[c])))
    return kd.fori_loop(0, n, row, A)


@kd.kernel
def lu(A):
    """PolyBench ``lu``: A becomes L (unit diagonal, below) and U (on and above the diagonal)."""
    return _lu_rows(A)


@kd.kernel
def ludcmp(A, b):
    """PolyBench ``ludcmp``: LU of A, then y = L^-1 b and x = U^-1 y; returns (A, x, y)."""
    n = A.shape[0]
    A = _lu_rows(A)

    def fwd(y, i):
        j = kd.reduce_axis((0, i))
        return b[i] - kd.sum(A[i, j] * y[j], axis=j)
    y = kd.scan((n,), lambda i: b[i], fwd)

    def back(x, t):               # x in reverse: step t is row n - 1 - t
        i = n - 1 - t
        u = kd.reduce_axis((0, t))
        return (y[i] - kd.sum(A[i, n - 1 - u] * x[u], axis=u)) / A[i, i]
    xr = kd.scan((n,), lambda t: y[n - 1 - t] / A[n - 1 - t, n - 1 - t], back)
    x = kd.compute((n,), lambda i: xr[n - 1 - i])
    return A, x, y


@kd.kernel
def durbin(r):
    """PolyBench ``durbin`` (Levinson-Durbin): the solution y of the Toeplitz system."""
    n = r.shape[0]
    y0 = kd.compute((n,), lambda i: kd.where(i == 0, -r[0], 0.0))

    def step(k, c):
        y, alpha, beta = c
        beta = (1.0 - alpha * alpha) * beta
        i = kd.reduce_axis((0, k))
        s = kd.sum(r[k - i - 1] * y[i], axis=i)
        alpha = -(r[k] + s) / beta
        y = kd.compute((n,), lambda i: kd.where(
            i < k, y[i] + alpha * y[kd.maximum(k - i - 1, 0)], kd.where(i == k, alpha, y[i])))
        return y, alpha, beta
    return kd.fori_loop(1, n, step, (y0, -r[0], np.float64(1.0)))[0]


@kd.kernel
def gramschmidt(A, R, Q):
    """PolyBench ``gramschmidt`` (modified Gram-Schmidt, A is m x n): returns (A, R, Q)."""
    m, n = A.shape

    def col(k, c):
        A, R, Q = c
        kk = kd.reduce_axis((0, m))
        rkk = np.sqrt(kd.sum(A[kk, k] * A[kk, k], axis=kk))
        q = kd.compute((m,), lambda i: A[i, k] / rkk)

        def rk(j):
            ii = kd.reduce_axis((0, m))
            return kd.where(j > k, kd.sum(q[ii] * A[ii, j], axis=ii),
                            kd.where(j == k, rkk, R[k, j]))
        r = kd.compute((n,), rk)
        A2 = kd.compute((m, n), lambda i, j: kd.where(j > k, A[i, j] - q[i] * r[j], A[i, j]))
        Q2 = kd.compute((m, n), lambda i, j: kd.where(j == k, q[i], Q[i, j]))
        return A2, _set_row(R, k, r), Q2
    return kd.fori_loop(0, n, col, (A, R, Q))


# ----------------------------------------------------------------- dynamic programming
#: a max whose empty range gives 0 (nussinov's scores are >= 0), where kd.max would raise
_max0 = kd.reducer(lambda a, b: kd.maximum(a, b), identity=0, name="max0")


@kd.kernel
def floyd_warshall(path):
    """PolyBench ``floyd-warshall``: all-pairs shortest paths (step k reads row and column
    k of step k - 1: the same values PolyBench's in-place loop reads, for weights >= 0)."""
    def via(k, P):
        return kd.compute(P.shape, lambda i, j: kd.where(
            P[i, j] < P[i, k] + P[k, j], P[i, j], P[i, k] + P[k, j]))
    return kd.fori_loop(0, path.shape[0], via, path)


@kd.kernel
def nussinov(seq, table):
    """PolyBench ``nussinov`` (RNA folding): rows from the last up, each row a scan along j."""
    n = seq.shape[0]

    def row(t, T):
        i = n - 1 - t
        i1 = kd.minimum(i + 1, n - 1)          # row i + 1 (read only when i + 1 < n)
        below = i + 1 < n

        def cell(s, j):
            v = kd.maximum(T[i, j], s[j - 1])
            v = kd.where(below, kd.maximum(v, T[i1, j]), v)
            pair = kd.where((seq[i] + seq[j]) == 3, 1, 0)
            v = kd.where(below, kd.maximum(v, T[i1, j - 1] + kd.where(i < j - 1, pair, 0)), v)
            k = kd.reduce_axis((i + 1, j))          # empty for j <= i + 1: the identity
            v = kd.maximum(v, _max0(s[k] + T[k + 1, j], axis=k))
            return kd.where(j > i, v, T[i, j])
        new = kd.scan((n,), lambda j: T[i, j], cell, dtype=table.dtype)
        return _set_row(T, i, new)
    return kd.fori_loop(0, n, row, table)


# ----------------------------------------------------------------- stencils (run-time steps)
def _inner(n, *ix):
    ok = None
    for i in ix:
        c = (i >= 1) & (i < n - 1)
        ok = c if ok is None else ok & c
    return ok


def _ping_pong(half):
    """A time step of PolyBench's two-array stencils: B from A, then A from the new B."""
    def step(t, c):
        A, B = c
        B = half(A, B)
        return half(B, A), B
    return step


@kd.kernel
def jacobi_1d(tsteps, A, B):
    """PolyBench ``jacobi-1d`` for ``tsteps`` steps; returns (A, B)."""
    n = A.shape[0]

    def half(X, Y):
        return kd.compute((n,), lambda i: kd.where(
            _inner(n, i), 0.33333 * (X[i - 1] + X[i] + X[i + 1]), Y[i]))

    return kd.fori_loop(0, tsteps, _ping_pong(half), (A, B))


@kd.kernel
def jacobi_2d(tsteps, A, B):
    """PolyBench ``jacobi-2d`` for ``tsteps`` steps; returns (A, B)."""
    n = A.shape[0]

    def half(X, Y):
        return kd.compute(X.shape, lambda i, j: kd.where(
            _inner(n, i, j),
            0.2 * (X[i, j] + X[i, j - 1] + X[i, 1 + j] + X[1 + i, j] + X[i - 1, j]), Y[i, j]))

    return kd.fori_loop(0, tsteps, _ping_pong(half), (A, B))


@kd.kernel
def heat_3d(tsteps, A, B):
    """PolyBench ``heat-3d`` for ``tsteps`` steps; returns (A, B)."""
    n = A.shape[0]

    def half(X, Y):
        def f(i, j, k):
            c = X[i, j, k]
            v = (0.125 * (X[i + 1, j, k] - 2.0 * c + X[i - 1, j, k])
                 + 0.125 * (X[i, j + 1, k] - 2.0 * c + X[i, j - 1, k])
                 + 0.125 * (X[i, j, k + 1] - 2.0 * c + X[i, j, k - 1]) + c)
            return kd.where(_inner(n, i, j, k), v, Y[i, j, k])
        return kd.compute(X.shape, f)

    return kd.fori_loop(1, tsteps + 1, _ping_pong(half), (A, B))


@kd.kernel
def fdtd_2d(tmax, ex, ey, hz, fict):
    """PolyBench ``fdtd-2d`` for ``tmax`` steps (``fict[t]`` drives row 0); returns (ex, ey, hz)."""
    nx, ny = ex.shape

    def step(t, c):
        ex, ey, hz = c
        ey = kd.compute((nx, ny), lambda i, j: kd.where(
            i == 0, fict[t], ey[i, j] - 0.5 * (hz[i, j] - hz[i - 1, j])))
        ex = kd.compute((nx, ny), lambda i, j: kd.where(
            j >= 1, ex[i, j] - 0.5 * (hz[i, j] - hz[i, j - 1]), ex[i, j]))
        hz = kd.compute((nx, ny), lambda i, j: kd.where(
            (i < nx - 1) & (j < ny - 1),
            hz[i, j] - 0.7 * (ex[i, j + 1] - ex[i, j] + ey[i + 1, j] - ey[i, j]), hz[i, j]))
        return ex, ey, hz
    return kd.fori_loop(0, tmax, step, (ex, ey, hz))


@kd.kernel
def seidel_2d(tsteps, A):
    """PolyBench ``seidel-2d`` (Gauss-Seidel, in place) for ``tsteps`` steps: each row is a
    scan along j that reads its own new left neighbour and the new row above."""
    n = A.shape[0]

    def row(i, A):
        def cell(s, j):
            v = (A[i - 1, j - 1] + A[i - 1, j] + A[i - 1, j + 1] + s[j - 1] + A[i, j]
                 + A[i, j + 1] + A[i + 1, j - 1] + A[i + 1, j] + A[i + 1, j + 1]) / 9.0
            return kd.where(j < n - 1, v, A[i, j])
        return _set_row(A, i, kd.scan((n,), lambda j: A[i, j], cell))

    def step(t, A):
        return kd.fori_loop(1, n - 1, row, A)
    return kd.fori_loop(0, tsteps, step, A)


@kd.kernel
def adi(tsteps, u):
    """PolyBench ``adi`` (alternating-direction implicit) for ``tsteps`` steps: each sweep is
    two forward scans (the tridiagonal coefficients p and q) and one backward scan."""
    n = u.shape[0]
    DX = 1.0 / n
    DT = 1.0 / tsteps
    mul1 = 2.0 * DT / (DX * DX)
    mul2 = 1.0 * DT / (DX * DX)
    a, b = -mul1 / 2.0, 1.0 + mul1
    c = a
    d, e = -mul2 / 2.0, 1.0 + mul2
    f = d

    def sweep(src, lo_c, mid_c, hi_c, pa, pb, pc, qd, transposed):
        # p[i, j] = -pc / (pa p[i, j-1] + pb); q likewise from the source's neighbours
        p = kd.scan((n, n), lambda i, j: 0.0, lambda s, i, j: -pc / (pa * s[i, j - 1] + pb), axis=1)

        def rhs(i, j):
            if transposed:            # column sweep: u[j][i-1], u[j][i], u[j][i+1]
                return -lo_c * src[j, i - 1] + mid_c * src[j, i] - hi_c * src[j, i + 1]
            return -lo_c * src[i - 1, j] + mid_c * src[i, j] - hi_c * src[i + 1, j]

        def qupd(s, i, j):
            v = (rhs(i, j) - qd * s[i, j - 1]) / (pa * p[i, j - 1] + pb)
            return kd.where(_inner(n, i), v, 0.0)
        q = kd.scan((n, n), lambda i, j: 1.0, qupd, axis=1)
        # backward: w[i, t] is the value at j = n - 1 - t
        w = kd.scan((n, n), lambda i, t: 1.0,
                    lambda s, i, t: p[i, n - 1 - t] * s[i, t - 1] + q[i, n - 1 - t], axis=1)
        return kd.compute((n, n), lambda i, j: kd.where(j == 0, 1.0, w[i, n - 1 - j]))

    def step(t, u):
        vt = sweep(u, d, 1.0 + 2.0 * d, f, a, b, c, a, True)        # vt[i, j] = v[j][i]
        v = kd.compute((n, n), lambda j, i: vt[i, j])
        un = sweep(v, a, 1.0 + 2.0 * a, c, d, e, f, d, False)
        return kd.compute((n, n), lambda i, j: kd.where(_inner(n, i), un[i, j], u[i, j]))
    return kd.fori_loop(1, tsteps + 1, step, u)


KERNELS = {"cholesky": cholesky, "lu": lu, "ludcmp": ludcmp, "durbin": durbin,
           "gramschmidt": gramschmidt, "floyd-warshall": floyd_warshall, "nussinov": nussinov,
           "seidel-2d": seidel_2d, "adi": adi, "jacobi-1d": jacobi_1d, "jacobi-2d": jacobi_2d,
           "heat-3d": heat_3d, "fdtd-2d": fdtd_2d}


if __name__ == "__main__":
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from tests.polybench import reference as ref
    backend = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    for name, k in KERNELS.items():
        args = ref.inputs(name, 7, np.random.default_rng(0))
        got = k(*args, backend=backend)
        want = ref.REFERENCE[name](*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
        got = got if isinstance(got, tuple) else (got,)
        err = max(float(np.max(np.abs(g - w), initial=0.0)) for g, w in zip(got, want))
        print(f"{name:15s} max |kdsl - PolyBench loops| = {err:.2e}")
