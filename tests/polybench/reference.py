"""PolyBench 4.2's reference C loops transcribed into plain Python (float64, in place, in
PolyBench's loop order), and input generators; no kdsl here.  Each function takes the
kernel's arguments (copies: it writes them) and returns what examples/polybench.py returns."""
from __future__ import annotations

import math

import numpy as np


def cholesky(A):
    n = A.shape[0]
    for i in range(n):
        for j in range(i):
            for k in range(j):
                A[i][j] -= A[i][k] * A[j][k]
            A[i][j] /= A[j][j]
        for k in range(i):
            A[i][i] -= A[i][k] * A[i][k]
        A[i][i] = math.sqrt(A[i][i])
    return (A,)


def lu(A):
    n = A.shape[0]
    for i in range(n):
        for j in range(i):
            for k in range(j):
                A[i][j] -= A[i][k] * A[k][j]
            A[i][j] /= A[j][j]
        for j in range(i, n):
            for k in range(i):
                A[i][j] -= A[i][k] * A[k][j]
    return (A,)


def ludcmp(A, b):
    n = A.shape[0]
    x, y = np.zeros(n), np.zeros(n)
    for i in range(n):
        for j in range(i):
            w = A[i][j]
            for k in range(j):
                w -= A[i][k] * A[k][j]
            A[i][j] = w / A[j][j]
        for j in range(i, n):
            w = A[i][j]
            for k in range(i):
                w -= A[i][k] * A[k][j]
            A[i][j] = w
    for i in range(n):
        w = b[i]
        for j in range(i):
            w -= A[i][j] * y[j]
        y[i] = w
    for i in range(n - 1, -1, -1):
        w = y[i]
        for j in range(i + 1, n):
            w -= A[i][j] * x[j]
        x[i] = w / A[i][i]
    return A, x, y


def durbin(r):
    n = r.shape[0]
    y, z = np.zeros(n), np.zeros(n)
    y[0] = -r[0]
    beta, alpha = 1.0, -r[0]
    for k in range(1, n):
        beta = (1 - alpha * alpha) * beta
        s = 0.0
        for i in range(k):
            s += r[k - i - 1] * y[i]
        alpha = -(r[k] + s) / beta
        for i in range(k):
            z[i] = y[i] + alpha * y[k - i - 1]
        for i in range(k):
            y[i] = z[i]
        y[k] = alpha
    return (y,)


def gramschmidt(A, R, Q):
    m, n = A.shape
    for k in range(n):
        nrm = 0.0
        for i in range(m):
            nrm += A[i][k] * A[i][k]
        R[k][k] = math.sqrt(nrm)
        for i in range(m):
            Q[i][k] = A[i][k] / R[k][k]
        for j in range(k + 1, n):
            R[k][j] = 0.0
            for i in range(m):
                R[k][j] += Q[i][k] * A[i][j]
            for i in range(m):
                A[i][j] = A[i][j] - Q[i][k] * R[k][j]
    return A, R, Q


def floyd_warshall(path):
    n = path.shape[0]
    for k in range(n):
        for i in range(n):
            for j in range(n):
                s = path[i][k] + path[k][j]
                path[i][j] = path[i][j] if path[i][j] < s else s
    return (path,)


def nussinov(seq, table):
    n = seq.shape[0]

    def match(b1, b2):
        return 1 if b1 + b2 == 3 else 0
    for i in range(n - 1, -1, -1):
        for j in range(i + 1, n):
            if j - 1 >= 0:
                table[i][j] = max(table[i][j], table[i][j - 1])
            if i + 1 < n:
                table[i][j] = max(table[i][j], table[i + 1][j])
            if j - 1 >= 0 and i + 1 < n:
                if i < j - 1:
                    table[i][j] = max(table[i][j], table[i + 1][j - 1] + match(seq[i], seq[j]))
                else:
                    table[i][j] = max(table[i][j], table[i + 1][j - 1])
            for k in range(i + 1, j):
                table[i][j] = max(table[i][j], table[i][k] + table[k + 1][j])
    return (table,)


def jacobi_1d(tsteps, A, B):
    n = A.shape[0]
    for _ in range(tsteps):
        for i in range(1, n - 1):
            B[i] = 0.33333 * (A[i - 1] + A[i] + A[i + 1])
        for i in range(1, n - 1):
            A[i] = 0.33333 * (B[i - 1] + B[i] + B[i + 1])
    return A, B


def jacobi_2d(tsteps, A, B):
    n = A.shape[0]
    for _ in range(tsteps):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                B[i][j] = 0.2 * (A[i][j] + A[i][j - 1] + A[i][1 + j] + A[1 + i][j] + A[i - 1][j])
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                A[i][j] = 0.2 * (B[i][j] + B[i][j - 1] + B[i][1 + j] + B[1 + i][j] + B[i - 1][j])
    return A, B


def heat_3d(tsteps, A, B):
    n = A.shape[0]
    for _ in range(1, tsteps + 1):
        for X, Y in ((A, B), (B, A)):
            for i in range(1, n - 1):
                for j in range(1, n - 1):
                    for k in range(1, n - 1):
                        Y[i][j][k] = (0.125 * (X[i + 1][j][k] - 2.0 * X[i][j][k] + X[i - 1][j][k])
                                      + 0.125 * (X[i][j + 1][k] - 2.0 * X[i][j][k] + X[i][j - 1][k])
                                      + 0.125 * (X[i][j][k + 1] - 2.0 * X[i][j][k] + X[i][j][k - 1])
                                      + X[i][j][k])
    return A, B


def fdtd_2d(tmax, ex, ey, hz, fict):
    nx, ny = ex.shape
    for t in range(tmax):
        for j in range(ny):
            ey[0][j] = fict[t]
        for i in range(1, nx):
            for j in range(ny):
                ey[i][j] = ey[i][j] - 0.5 * (hz[i][j] - hz[i - 1][j])
        for i in range(nx):
            for j in range(1, ny):
                ex[i][j] = ex[i][j] - 0.5 * (hz[i][j] - hz[i][j - 1])
        for i in range(nx - 1):
            for j in range(ny - 1):
                hz[i][j] = hz[i][j] - 0.7 * (ex[i][j + 1] - ex[i][j] + ey[i + 1][j] - ey[i][j])
    return ex, ey, hz


def seidel_2d(tsteps, A):
    n = A.shape[0]
    for _ in range(tsteps):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                A[i][j] = (A[i - 1][j - 1] + A[i - 1][j] + A[i - 1][j + 1] + A[i][j - 1] + A[i][j]
                           + A[i][j + 1] + A[i + 1][j - 1] + A[i + 1][j] + A[i + 1][j + 1]) / 9.0
    return (A,)


def adi(tsteps, u):
    n = u.shape[0]
    v, p, q = np.zeros((n, n)), np.zeros((n, n)), np.zeros((n, n))
    DX = 1.0 / n
    DY = 1.0 / n
    DT = 1.0 / tsteps
    B1, B2 = 2.0, 1.0
    mul1 = B1 * DT / (DX * DX)
    mul2 = B2 * DT / (DY * DY)
    a = -mul1 / 2.0
    b = 1.0 + mul1
    c = a
    d = -mul2 / 2.0
    e = 1.0 + mul2
    f = d
    for _ in range(1, tsteps + 1):
        for i in range(1, n - 1):
            v[0][i] = 1.0
            p[i][0] = 0.0
            q[i][0] = v[0][i]
            for j in range(1, n - 1):
                p[i][j] = -c / (a * p[i][j - 1] + b)
                q[i][j] = (-d * u[j][i - 1] + (1.0 + 2.0 * d) * u[j][i] - f * u[j][i + 1]
                           - a * q[i][j - 1]) / (a * p[i][j - 1] + b)
            v[n - 1][i] = 1.0
            for j in range(n - 2, 0, -1):
                v[j][i] = p[i][j] * v[j + 1][i] + q[i][j]
        for i in range(1, n - 1):
            u[i][0] = 1.0
            p[i][0] = 0.0
            q[i][0] = u[i][0]
            for j in range(1, n - 1):
                p[i][j] = -f / (d * p[i][j - 1] + e)
                q[i][j] = (-a * v[i - 1][j] + (1.0 + 2.0 * a) * v[i][j] - c * v[i + 1][j]
                           - d * q[i][j - 1]) / (d * p[i][j - 1] + e)
            u[i][n - 1] = 1.0
            for j in range(n - 2, 0, -1):
                u[i][j] = p[i][j] * u[i][j + 1] + q[i][j]
    return (u,)


REFERENCE = {"cholesky": cholesky, "lu": lu, "ludcmp": ludcmp, "durbin": durbin,
             "gramschmidt": gramschmidt, "floyd-warshall": floyd_warshall, "nussinov": nussinov,
             "seidel-2d": seidel_2d, "adi": adi, "jacobi-1d": jacobi_1d, "jacobi-2d": jacobi_2d,
             "heat-3d": heat_3d, "fdtd-2d": fdtd_2d}


def inputs(name: str, n: int, rng, steps: int = 3) -> tuple:
    """Fresh, well-conditioned float64 inputs of size ``n`` (PolyBench's shapes)."""
    if name in ("cholesky", "lu", "ludcmp"):
        M = rng.random((n, n))
        A = M @ M.T + n * np.eye(n)          # symmetric positive definite: no tiny pivots
        return (A,) if name != "ludcmp" else (A, rng.random(n))
    if name == "durbin":
        r = rng.random(n) * 0.5 / max(n, 1)   # |alpha| < 1 throughout
        return (r,)
    if name == "gramschmidt":
        m = n + 2
        return (rng.random((m, n)) + np.eye(m, n), np.zeros((n, n)), np.zeros((m, n)))
    if name == "floyd-warshall":
        return (rng.integers(1, 20, (n, n)).astype(np.float64),)
    if name == "nussinov":
        return (rng.integers(0, 4, n).astype(np.int64), np.zeros((n, n), np.int64))
    if name == "jacobi-1d":
        return (steps, rng.random(n), rng.random(n))
    if name in ("jacobi-2d", "heat-3d"):
        shape = (n,) * (2 if name == "jacobi-2d" else 3)
        return (steps, rng.random(shape), rng.random(shape))
    if name == "fdtd-2d":
        return (steps, rng.random((n, n + 1)), rng.random((n, n + 1)), rng.random((n, n + 1)),
                rng.random(steps))
    if name == "seidel-2d":
        return (steps, rng.random((n, n)))
    if name == "adi":
        return (steps, rng.random((n, n)))
    raise KeyError(name)
