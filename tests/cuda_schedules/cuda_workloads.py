"""The SPEC §2 workload families the cuda default schedules cover, with numpy float64 oracles."""
import math

import numpy as np

import kdsl as kd


def rowsum(A):
    return A.sum(axis=1)


def rowsum_te(A):
    n, m = A.shape
    k = kd.reduce_axis(m, name="k")
    return kd.compute((n,), lambda i: kd.sum(A[i, k], axis=k), name="B")


def rowmax(A):
    return A.max(axis=1)


def colsum(A):
    return A.sum(axis=0)


def total(A):
    return A.sum()


def sum_last2(A):            # 3-D, two trailing reduce axes fused into one row
    return A.sum(axis=(1, 2))


def argmax_rows(A):
    return kd.argmax(A, axis=1)


def argmin_rows(A):
    return kd.argmin(A, axis=1)


def gelu_add(a, b):
    x = a + b
    return 0.5 * x * (1 + kd.erf(x * 0.7071067811865476))


def scale_add(A, B):
    return A * 2 + B


def softmax(X):
    e = kd.exp(X - X.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def layernorm(X):
    mu = X.mean(axis=1, keepdims=True)
    d = X - mu
    return d / kd.sqrt((d * d).mean(axis=1, keepdims=True) + 1e-5)


def logsumexp(X):
    m = X.max(axis=1)
    return kd.log(kd.exp(X - m[:, None]).sum(axis=1)) + m


def conv3x3(I, F):
    n, m = I.shape
    di, dj = kd.reduce_axis(3, name="di"), kd.reduce_axis(3, name="dj")
    return kd.compute((n - 2, m - 2),
                      lambda i, j: kd.sum(I[i + di, j + dj] * F[di, dj], axis=(di, dj)),
                      name="C")


def matmul(A, B):
    return A @ B


def diag_sum(A):             # a reduction that is neither a row nor a column walk
    n, _ = A.shape
    k = kd.reduce_axis(n, name="k")
    return kd.compute((), lambda: kd.sum(A[k, k], axis=k), name="T")


_erf = np.vectorize(math.erf, otypes=[np.float64])


def np_softmax(x):
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def np_layernorm(x):
    d = x - x.mean(1, keepdims=True)
    return d / np.sqrt((d * d).mean(1, keepdims=True) + 1e-5)


def np_conv3x3(i, f):
    n, m = i.shape
    out = np.zeros((max(n - 2, 0), max(m - 2, 0)))
    for di in range(3):
        for dj in range(3):
            out += i[di:di + n - 2, dj:dj + m - 2] * f[di, dj]
    return out


ORACLES = {
    rowsum: lambda a: a.sum(1), rowsum_te: lambda a: a.sum(1), rowmax: lambda a: a.max(1),
    colsum: lambda a: a.sum(0), total: lambda a: a.sum(), sum_last2: lambda a: a.sum((1, 2)),
    argmax_rows: lambda a: a.argmax(1), argmin_rows: lambda a: a.argmin(1),
    gelu_add: lambda a, b: 0.5 * (a + b) * (1 + _erf((a + b) * 0.7071067811865476)),
    scale_add: lambda a, b: a * 2 + b, softmax: np_softmax, layernorm: np_layernorm,
    logsumexp: lambda x: np.log(np.exp(x - x.max(1, keepdims=True)).sum(1)) + x.max(1),
    conv3x3: np_conv3x3, matmul: lambda a, b: a @ b, diag_sum: lambda a: np.trace(a),
}


def matmul16_over_a(A, B):
    """``C[i, j] = sum over r < A.shape[1] of f32(A[i, r]) * f32(B[r, j])``: the sum runs over
    A's columns, so B may have more rows than it uses."""
    r = kd.reduce_axis(A.shape[1], name="r")
    return kd.compute((A.shape[0], B.shape[1]),
                      lambda i, j: kd.sum(A[i, r].astype(kd.float32) * B[r, j].astype(kd.float32), axis=r))


def taller_b(rng, m, kk, n, extra):
    """float16 A (m x kk) and B ((kk + extra) x n) whose rows past kk, which
    ``matmul16_over_a`` never uses, hold infinities."""
    A = rng.standard_normal((m, kk)).astype(np.float16)
    B = rng.standard_normal((kk + extra, n)).astype(np.float16)
    B[kk:] = np.inf
    return A, B
