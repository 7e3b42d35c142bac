"""The core suite's explicit GPU schedules (tests/gpu_core, tests/seed_schedules.py: what
kdsl_cuda/tests compiles with NVRTC and tests/gpu_core runs on the SIMT interpreter) on traced
kernels, so that they run through the normal call path on a device: each case is a kernel
with its cuda schedule, an input maker, a numpy float64 oracle and shapes that do and do not
divide the tiles, with 0 and 1 sizes.

``test_cuda_core.py`` runs them on ``cuda``; ``test_cuda_lowers.py`` (no device) runs them on
``interp-cuda`` and prints their CUDA C++, so a schedule that stops lowering fails in CI.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import kdsl as kd
import schedules as S                        # tests/gpu_core
from cuda_support import load_suite
from seed_schedules import bind_rows, cross_thread

X = load_suite("gpu_core/test_cross_thread.py", "_kdsl_cuda_gc_cross_thread")
K = load_suite("gpu_core/test_kernels.py", "_kdsl_cuda_gc_kernels")
LADDER = load_suite("gpu_core/test_seed002_ladder.py", "_kdsl_cuda_gc_ladder").LADDER


# ----------------------------------------------------------------- traced twins of the hand graphs
def rowsum_B(A):
    """B[i] = sum_k A[i, k] (handgraph.rowsum_graph)."""
    n, m = A.shape
    k = kd.reduce_axis(m, name="k")
    return kd.compute((n,), lambda i: kd.sum(A[i, k], axis=k), name="B")


def colsum_B(A):
    """B[j] = sum_r A[r, j] (test_cross_thread.colsum_graph)."""
    n, m = A.shape
    r = kd.reduce_axis(n, name="r")
    return kd.compute((m,), lambda j: kd.sum(A[r, j], axis=r), name="B")


def matmul_C(A, B):
    """C[i, j] = sum_r A[i, r] * B[r, j] (handgraph.matmul_graph)."""
    n, k = A.shape
    m = B.shape[1]
    r = kd.reduce_axis(k, name="r")
    return kd.compute((n, m), lambda i, j: kd.sum(A[i, r] * B[r, j], axis=r), name="C")


def scale_O(A):
    """O = A * 2 + 1 (schedules.scale_graph)."""
    n, m = A.shape
    return kd.compute((n, m), lambda i, j: A[i, j] * 2 + 1, name="O")


def conv_O(I, W):
    """The valid 3x3 correlation (schedules.conv3x3_graph)."""
    h, w = I.shape
    di, dj = kd.reduce_axis(3, name="di"), kd.reduce_axis(3, name="dj")
    return kd.compute((h - 2, w - 2),
                      lambda i, j: kd.sum(I[i + di, j + dj] * W[di, dj], axis=(di, dj)), name="O")


# ----------------------------------------------------------------- oracles (float64)
def _f64(*xs):
    return [x.astype(np.float64) for x in xs]


def _rowsum(A):
    return _f64(A)[0].sum(1)


def _conv(I, W):
    I, W = _f64(I, W)
    h, w = I.shape
    out = np.zeros((max(h - 2, 0), max(w - 2, 0)))
    for di in range(3):
        for dj in range(3):
            out += I[di:di + out.shape[0], dj:dj + out.shape[1]] * W[di, dj]
    return out


def _mm(A, B):
    A, B = _f64(A, B)
    return A @ B


# ----------------------------------------------------------------- inputs
def _mat(dtype, ties=False):
    def make(rng, shape):
        if ties:
            return (rng.integers(0, 3, shape).astype(dtype),)
        if np.dtype(dtype).kind == "i":
            return (rng.integers(-50, 50, shape).astype(dtype),)
        return (rng.standard_normal(shape).astype(dtype),)
    return make


def _strided(dtype):
    def make(rng, shape):
        n, m = shape
        big = rng.standard_normal((n, 2 * m + 1)).astype(dtype)
        return (big[:, 1::2],)
    return make


def _mm_inputs(dtype):
    def make(rng, nkm):
        n, k, m = nkm
        return (rng.standard_normal((n, k)).astype(dtype), rng.standard_normal((k, m)).astype(dtype))
    return make


def _conv_inputs(rng, shape):
    return (rng.standard_normal(shape).astype(np.float32), rng.standard_normal((3, 3)).astype(np.float32))


ROWS = ((33, 20), (64, 64), (3, 17), (1, 1), (0, 5), (5, 0))
MM = ((64, 16, 64), (37, 13, 45), (1, 1, 1), (0, 3, 2), (5, 0, 3))
#: pipelined copies: no size 1 (a size-1 dim is specialised as a constant: K = 1 removes the
#: K-tile loop the copy is pipelined over, n = m = 1 gives C 1-thread loops beside the copy's
#: 8: ScheduleErrors on every backend, not the GPU's business)
MM_PIPE = ((64, 16, 64), (37, 13, 45), (2, 9, 3), (0, 3, 2), (5, 0, 3))
CONV = ((18, 18), (11, 29), (3, 3), (2, 2))
TOL32, TOL64 = dict(rtol=1e-4, atol=1e-4), dict(rtol=1e-10, atol=1e-10)


@dataclass(frozen=True)
class Case:
    name: str
    fn: object          # the traced function
    sched: object       # its cuda schedule
    inputs: object      # (rng, shape) -> tuple of arrays
    oracle: object      # (*arrays) -> float64 result (or exact for integer results)
    shapes: tuple
    tol: dict | None = None     # None: exact

    def kernel(self):
        k = kd.kernel(self.fn)
        k.schedule("cuda")(self.sched)
        return k


def _cases():
    c = [
        Case("scale_elementwise_2d", scale_O, S.elementwise_2d, _mat(np.float64),
             lambda A: A * 2.0 + 1.0, ((8, 16), (9, 13), (1, 1), (0, 3)), TOL64),
        Case("rowsum_row_per_block_f32", rowsum_B, S.row_per_block, _mat(np.float32), _rowsum, ROWS, TOL32),
        Case("rowsum_row_per_block_f64", rowsum_B, S.row_per_block, _mat(np.float64), _rowsum, ROWS, TOL64),
        Case("rowsum_row_per_block_i32", rowsum_B, S.row_per_block, _mat(np.int32),
             lambda A: A.sum(1, dtype=np.int32), ROWS),
        Case("rowsum_row_per_block_strided", rowsum_B, S.row_per_block, _strided(np.float32), _rowsum,
             ROWS, TOL32),
        Case("seed_bind_rows", rowsum_B, bind_rows, _mat(np.float32), _rowsum, ROWS, TOL32),
        Case("seed_cross_thread_f64", rowsum_B, cross_thread, _mat(np.float64), _rowsum, ROWS, TOL64),
        Case("seed_cross_thread_strided", rowsum_B, cross_thread, _strided(np.float32), _rowsum, ROWS, TOL32),
        Case("row_threads_32", rowsum_B, X.row_threads(32), _mat(np.float32), _rowsum, ROWS, TOL32),
        Case("row_threads_64_i64", rowsum_B, X.row_threads(64), _mat(np.int64),
             lambda A: A.sum(1), ROWS),
        Case("row_threads_32_xy", rowsum_B, X.row_threads(32, two=True), _mat(np.float32), _rowsum,
             ROWS, TOL32),
        Case("colsum", colsum_B, X.colsum_sched, _mat(np.float32), lambda A: _f64(A)[0].sum(0),
             ((5, 64), (7, 70), (1, 1), (0, 5), (5, 0), (33, 3)), TOL32),
        Case("argmax_ties_f32", X._argmax, X.row_threads(32), _mat(np.float32, ties=True),
             lambda A: A.argmax(1), ((4, 64), (5, 70), (3, 1), (1, 1))),
        Case("argmax_f64", X._argmax, X.row_threads(64), _mat(np.float64),
             lambda A: A.argmax(1), ((4, 64), (5, 70), (1, 1))),
        Case("softmax_unfused_3_kernels", K._softmax, K.unfused, _mat(np.float32),
             lambda A: X.np_softmax(_f64(A)[0]), ((64, 64), (70, 33), (1, 1), (3, 17), (0, 5)), TOL32),
        Case("softmax_fused_local", K._softmax, K.fused, _mat(np.float32),
             lambda A: X.np_softmax(_f64(A)[0]), ((64, 64), (70, 33), (1, 1), (0, 5)), TOL32),
        Case("conv3x3_shared_input_tile", conv_O, S.conv_shared_tile, _conv_inputs, _conv, CONV, TOL32),
        Case("mm_threads", matmul_C, S.mm_threads, _mm_inputs(np.float32), _mm, MM, TOL32),
        Case("mm_shared_f32", matmul_C, S.mm_shared_no_sync, _mm_inputs(np.float32), _mm, MM, TOL32),
        Case("mm_shared_f64", matmul_C, S.mm_shared_no_sync, _mm_inputs(np.float64), _mm, MM, TOL64),
        Case("mm_vthread", matmul_C, S.mm_vthread, _mm_inputs(np.float32), _mm, MM, TOL32),
        Case("mm_double_buffer", matmul_C, S.mm_double_buffer, _mm_inputs(np.float32), _mm, MM_PIPE, TOL32),
        Case("mm_pipeline_3", matmul_C, lambda s: S.mm_double_buffer(s, stages=3),
             _mm_inputs(np.float32), _mm, MM_PIPE, TOL32),
    ]
    for fn, name, npf in ((X.softmax, "softmax", X.np_softmax), (X.layernorm, "layernorm", X.np_layernorm)):
        for T in (32, 64):
            c.append(Case(f"{name}_row_per_block_{T}", fn, X.row_per_block_fused(T, local=False),
                          _mat(np.float32), lambda A, f=npf: f(_f64(A)[0]),
                          ((4, 64), (3, 70), (2, 5), (1, 1), (0, 4)), TOL32))
    c.append(Case("layernorm_row_per_block_f64", X.layernorm, X.row_per_block_fused(32, local=False),
                  _mat(np.float64), lambda A: X.np_layernorm(A), ((4, 64), (3, 70), (1, 1)), TOL64))
    for step in LADDER:
        c.append(Case("ladder_" + step.__name__, matmul_C, step, _mm_inputs(np.float32), _mm,
                      (MM_PIPE if "stages" in step.__name__ else MM) + ((33, 9, 70),), TOL32))
    c.append(Case("ladder_f64_thread_tiling", matmul_C, LADDER[2], _mm_inputs(np.float64), _mm, MM, TOL64))
    return {x.name: x for x in c}


CASES = _cases()


def check(case: Case, got, args):
    """``got`` (numpy) against the case's oracle on ``args``."""
    want = case.oracle(*args)
    assert got.shape == want.shape, (got.shape, want.shape)
    if case.tol is None:
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got.astype(np.float64), want, **case.tol)
