"""Regression tests of the GPU-schedule generator's findings (F34-F38, F45: tests/fuzz/
FINDINGS.md), minimised by hand; the other findings are in test_findings.py and
test_findings_surface.py."""
import numpy as np
import pytest

import kdsl as kd

from tensor_core_gemms import wgmma64_padded_gemm

from .finding_kernels import fresh, kern


# ------------------------------------------------------------------ F34 (GPU-schedule generator)
def _mirror_product(A):
    n, m = A.shape
    B = kd.compute((n, m), lambda i, j: A[i, j] * 2.0, name="B")
    return kd.compute((n, m), lambda i, j: B[i, j] * B[i, m - 1 - j], name="O")


@pytest.mark.parametrize("backend,target", [("interp", "interp"), ("interp-cuda", "cuda")])
# F34 fixed: the buffer was sized to the array width but indexed from the mirrored region's
# start (out-of-bounds load); the region now starts inside the domain (bound.py)
def test_f34_mirrored_read_of_a_stage_attached_at_a_tile_loop(backend, target):
    def sched(s):
        O, B = s["O"], s["B"]
        by, bx, yi, xi = O.tile(O.axes[0], O.axes[1], 4, 32)
        if target == "cuda":
            O.bind(by, "blockIdx.y")
        B.compute_at(O, bx)        # B's tile: columns j and m - 1 - j of the 32-column tile
    rng = np.random.default_rng()
    for shape in [(3, 5), (9, 70), (1, 1)]:
        A = rng.standard_normal(shape).astype(np.float32)
        out = kern(_mirror_product, target, sched)(A, backend=backend)
        a = A.astype(np.float64) * 2
        np.testing.assert_allclose(out, a * a[:, ::-1], rtol=1e-6)


# ------------------------------------------------------------------ F35 (GPU-schedule generator)
def _mm(A, B):
    n, k = A.shape
    _, m = B.shape
    r = kd.reduce_axis(k, name="r")
    return kd.compute((n, m), lambda i, j: kd.sum(A[i, r] * B[r, j], axis=r), name="C")


def _double_buffered_b(s):
    C = s["C"]
    BS = s.cache_read("B", "shared", [C])
    by, bx, yi, xi = C.tile(C.axes[0], C.axes[1], 1, 8)
    ko, ki = C.split(C.reduce_axes[0], factor=1)
    C.reorder(by, bx, yi, xi, ko, ki)
    C.bind(by, "blockIdx.y")
    C.bind(bx, "blockIdx.x")
    C.bind(xi, "threadIdx.x")
    BS.compute_at(C, ko)
    o, x = BS.split(BS.fuse(*BS.axes), factor=8)
    BS.bind(x, "threadIdx.x")
    BS.double_buffer()


def test_f35_double_buffer_over_a_k_loop_runs():
    A, B = np.ones((8, 3), np.float32), np.ones((3, 8), np.float32)
    out = kern(_mm, "cuda", _double_buffered_b)(A, B, backend="interp-cuda")
    np.testing.assert_array_equal(out, A @ B)


# F35 (K = 1 form) fixed: double_buffer over a one-iteration K loop used to be refused
def test_f35_double_buffer_over_a_k_loop_of_one_iteration():
    A, B = np.ones((8, 1), np.float32), np.ones((1, 8), np.float32)
    out = kern(_mm, "cuda", _double_buffered_b)(A, B, backend="interp-cuda")
    np.testing.assert_array_equal(out, A @ B)


# ------------------------------------------------------------------ F36 (GPU-schedule generator)
def _mm_plus_one(A, B):
    n, k = A.shape
    _, m = B.shape
    r = kd.reduce_axis(k, name="r")
    C = kd.compute((n, m), lambda i, j: kd.sum(A[i, r] * B[r, j], axis=r), name="C")
    return kd.compute((n, m), lambda i, j: C[i, j] + 1.0, name="O")


def _double_buffered_in_epilogue(s):
    O, C = s["O"], s["C"]
    BS = s.cache_read("B", "shared", [C])
    AS = s.cache_read("A", "shared", [C])
    by, bx, yr, xr = O.tile(O.axes[0], O.axes[1], 2, 4)
    tx, xi = O.split(xr, factor=2)
    O.bind(bx, "blockIdx.x")
    O.bind(tx, "threadIdx.x")
    C.compute_at(O, tx)
    ko, ki = C.split(C.reduce_axes[0], factor=8)
    for X in (AS, BS):
        X.compute_at(C, ko)
        o, x = X.split(X.fuse(*X.axes), factor=2)
        X.bind(x, "threadIdx.x")
    BS.double_buffer()


@pytest.mark.parametrize("m", [2, 1])   # F36 fixed: m = 1 masked the wait_group (AsyncCopyRace)
def test_f36_double_buffered_copy_under_a_shrunk_thread_loop(m):
    A, B = np.ones((1, 7), np.float32), np.ones((7, m), np.float32)
    out = kern(_mm_plus_one, "cuda", _double_buffered_in_epilogue)(A, B, backend="interp-cuda")
    np.testing.assert_array_equal(out, A @ B + 1)


# F35 (size-0 form) fixed: m = 0 under specialize=True (a constant 0) collapsed the loops around
# the copy and double_buffer was refused ('not copied directly inside the loop it is pipelined
# over'); a pipelined buffer nothing writes now keeps one buffer (software_pipeline)
def test_f35_double_buffer_with_a_constant_empty_output():
    A, B = np.ones((8, 3), np.float32), np.ones((3, 0), np.float32)
    k = kd.kernel(specialize=True)(fresh(_mm))
    k.schedule("cuda")(_double_buffered_b)
    assert k(A, B, backend="interp-cuda").shape == (8, 0)
    for a, b in [((8, 0), (0, 8)), ((0, 3), (3, 8))]:      # K = 0, n = 0: constant empty too
        A, B = np.ones(a, np.float32), np.ones(b, np.float32)
        k = kd.kernel(specialize=True)(fresh(_mm))
        k.schedule("cuda")(_double_buffered_b)
        np.testing.assert_array_equal(k(A, B, backend="interp-cuda"), A @ B)


# ------------------------------------------------------------------ F37 (GPU-schedule generator)
def _mm16(A, B):
    n, k = A.shape
    _, m = B.shape
    r = kd.reduce_axis(k, name="r")
    return kd.compute((n, m), lambda i, j: kd.sum(A[i, r].astype(kd.float32) * B[r, j].astype(kd.float32),
                                                  axis=r), name="C")


def _wgmma_one_operand_pipelined(stages_b):
    return lambda s: wgmma64_padded_gemm(s, {"A": 3, "B": stages_b})


# F37 fixed: with B single-buffered the next K tile's copy overwrote B.shared while the previous
# wgmma still read it (AsyncMmaRace); the loop now waits for all products (software_pipeline)
@pytest.mark.parametrize("stages_b", [3, 1])
def test_f37_wgmma_with_one_operand_pipelined(stages_b):
    rng = np.random.default_rng(37)
    A = (rng.integers(-4, 5, (70, 80)) / 4).astype(np.float16)
    B = (rng.integers(-4, 5, (80, 16)) / 4).astype(np.float16)
    out = kern(_mm16, "cuda", _wgmma_one_operand_pipelined(stages_b))(A, B, backend="interp-cuda")
    np.testing.assert_array_equal(out, A.astype(np.float64) @ B.astype(np.float64))


def test_f38_unspread_shared_copy_in_a_tensor_core_kernel():
    """GPU-schedule fuzz case 26:59: B's shared copy attached at the K loop, left unbound, in a
    block of wmma warps: a write-after-write race on B.shared (SIMT) instead of one writer."""
    from .gpu_runner import _execute, generate, setup
    reason = setup()
    if reason:
        pytest.skip(f"gpu-schedules: {reason}")
    res = {}
    _execute(res, generate(26, 59))
    assert res["outcome"] in ("ok", "fair_refusal"), res.get("detail")


def test_f45_pipelined_copy_whose_readers_are_empty():
    """GPU-schedule fuzz case 101:4537: a pipelined A.shared in a GEMM whose output has 0
    columns under specialize=True: the reader's loops are gone, the K loop holds only the
    copy; it ran as a plain copy (nothing to pipeline) instead of a ScheduleError."""
    from .gpu_runner import _execute, generate, setup
    reason = setup()
    if reason:
        pytest.skip(f"gpu-schedules: {reason}")
    res = {}
    _execute(res, generate(101, 4537))
    assert res["outcome"] == "ok", res.get("detail")
