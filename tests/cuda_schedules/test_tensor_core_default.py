"""The default cuda schedule of 16-bit matrix products on GPUs before Hopper: tensor cores
(WMMA fragments fed from double-buffered shared tiles), run on the SIMT interpreter
(``interp-cuda``, race-checked) against numpy in float64 over shapes that do and do not divide
the 16x16 fragments and the block tile; the ``tensor_cores`` hint turns it off, and asks for it
with a warning where it cannot apply.  Hopper's wgmma recipe (what an sm_90 device gets, and
what compiling without a device targets) is switched off here (``KDSL_CUDA_WGMMA=0``):
tests/cuda_schedules/test_wgmma_default.py covers it."""
import numpy as np
import pytest

import kdsl as kd
from kdsl.errors import ScheduleWarning
from cuda_workloads import matmul16_over_a, taller_b


@pytest.fixture(autouse=True)
def _mma_sync_recipe(monkeypatch):
    monkeypatch.setenv("KDSL_CUDA_WGMMA", "0")


@kd.kernel
@kd.schedule("cuda", tensor_cores=True)
def mm(A, B):
    return A @ B


@kd.kernel
@kd.schedule("cuda", tensor_cores=True)
def mm_f32_out(A, B):
    return A.astype("float32") @ B.astype("float32")


@kd.kernel
def mm_default(A, B):
    return A @ B


def test_by_default_and_the_opt_out(monkeypatch):
    """A 16-bit ``A @ B`` goes to tensor cores by default; ``KDSL_CUDA_TENSOR_CORES=0`` keeps
    default schedules on the CUDA-core GEMM (an explicit ``tensor_cores=True`` still wins)."""
    spec = kd.TensorSpec((512, 512), "float16")
    assert "wmma" in str(mm_default.lower(spec, spec, backend="cuda"))
    monkeypatch.setenv("KDSL_CUDA_TENSOR_CORES", "0")
    assert "wmma" not in str(kd.kernel(lambda A, B: A @ B).lower(spec, spec, backend="cuda"))
    assert "wmma" in str(mm.lower(spec, spec, backend="cuda"))


def _check(got, A, B):
    want = A.astype(np.float64) @ B.astype(np.float64)
    # products of float16 are exact in float32; float32 sums of K terms, then (for a float16
    # result) one rounding to float16
    k = A.shape[1]
    tol = (np.abs(A).astype(np.float64) @ np.abs(B).astype(np.float64)) * (k * 2.0 ** -23)
    if got.dtype == np.float16:
        tol = tol + np.abs(want) * 2.0 ** -11
    assert got.shape == want.shape
    assert np.all(np.abs(got.astype(np.float64) - want) <= tol + 1e-30)


@pytest.mark.parametrize("shape", [(64, 64, 32), (37, 45, 50), (130, 260, 100), (16, 16, 16),
                                   (200, 17, 3), (0, 16, 16), (16, 16, 0), (33, 129, 47)])
def test_float16_matmul_on_tensor_cores(shape, rng):
    m, nn, k = shape
    A = rng.standard_normal((m, k)).astype(np.float16)
    B = rng.standard_normal((k, nn)).astype(np.float16)
    _check(mm(A, B, backend="interp-cuda"), A, B)


def test_float32_result_and_strided_views(rng):
    A = rng.standard_normal((90, 70)).astype(np.float16)
    B = rng.standard_normal((140, 50)).astype(np.float16)[::2]
    _check(mm_f32_out(A[:, 3:], B[3:], backend="interp-cuda"), A[:, 3:], B[3:])


def test_bfloat16_operands_take_a_bfloat16_intrinsic():
    """The recipe declares its wmma intrinsic in the operands' type (it used to say float16,
    which the tensorize check refused for bfloat16 inputs)."""
    text = str(mm.lower(kd.TensorSpec((256, 96), "bfloat16"), kd.TensorSpec((96, 200), "bfloat16"),
                        backend="cuda"))
    assert "wmma" in text and "bfloat16" in text


def _lowered(kernel, a, b):
    return str(kernel.lower(kd.TensorSpec(a, "float16"), kd.TensorSpec(b, "float16"),
                            backend="cuda"))


def test_default_uses_fragments_and_a_three_stage_pipeline():
    text = _lowered(mm, (4096, 4096), (4096, 4096))
    assert "wmma.mma" in text and "async_copy" in text and "stages=3" in text
    assert "block=(32, 2, 4)" in text          # 8 warps: 4 x 2, each 4 x 4 fragments


def test_one_row_is_not_tensorized():
    # a static size-1 dimension: a matrix-vector product, the float32 recipe
    text = str(mm.lower(np.ones((1, 40), np.float16), np.ones((40, 40), np.float16),
                        backend="cuda"))
    assert "wmma" not in text


def test_hint_off_and_on():
    @kd.kernel
    @kd.schedule("cuda", tensor_cores=False)
    def off(A, B):
        return A @ B
    assert "wmma" not in _lowered(off, (256, 256), (256, 256))

    @kd.kernel
    @kd.schedule("cuda", tensor_cores=True)
    def f32(A, B):
        return A @ B
    with pytest.warns(ScheduleWarning, match="tensor cores take float16 or bfloat16 operands"):
        f32.lower(kd.TensorSpec((64, 64), "float32"), kd.TensorSpec((64, 64), "float32"),
                  backend="cuda")


def test_hinted_tiles(rng):
    @kd.kernel
    @kd.schedule("cuda", tile={"i0": 64, "i1": 32, "r0": 16}, threads=(64, 2), stages=3,
                 tensor_cores=True)  # on the product
    def small(A, B):
        return A @ B
    text = _lowered(small, (512, 512), (512, 512))
    assert "block=(32, 2, 2)" in text and "stages=3" in text
    A = rng.standard_normal((70, 40)).astype(np.float16)
    B = rng.standard_normal((40, 33)).astype(np.float16)
    _check(small(A, B, backend="interp-cuda"), A, B)


def test_block_loop_inside_a_thread_loop_is_a_schedule_error():
    """Not an internal error from the IR verifier (on under pytest) before device_kernels
    reports it in the user's words."""
    from kdsl.errors import ScheduleError

    @kd.kernel
    def mm3(A, B):
        return A.astype("float32") @ B.astype("float32")

    def sched(s):
        C = s["matmul"]
        i, j = C.axes
        bi, ii = C.split(i, factor=64)
        bj, jj = C.split(j, factor=8)
        C.bind(bi, "blockIdx.x")
        C.bind(ii, "threadIdx.y")
        C.bind(bj, "blockIdx.y")
        C.bind(jj, "threadIdx.x")
    mm3.schedule("cuda")(sched)
    with pytest.raises(ScheduleError, match=r"binds i1\.outer to blockIdx\.y inside a loop that "
                                            r"is not a block loop"):
        mm3.lower(kd.TensorSpec((64, 4), "float16"), kd.TensorSpec((4, 64), "float16"),
                  backend="cuda")


def test_copy_over_fewer_thread_rows_than_the_block_is_masked():
    """A shared copy whose thread loops are shorter than the block's (32 rows of threadIdx.y
    where C has 64): once a ScheduleError naming the copy; since issue 24 the shorter loop is
    masked (the block is as tall as its longest loop) and the result is right."""

    @kd.kernel
    def mm2(A, B):
        return A @ B

    def sched(s):
        C = s["matmul"]
        i, j = C.axes
        bi, ii = C.split(i, factor=64)
        bj, jj = C.split(j, factor=8)
        C.reorder(bi, bj, ii, jj)
        C.bind(bi, "blockIdx.x")
        C.bind(ii, "threadIdx.y")
        C.bind(bj, "blockIdx.y")
        C.bind(jj, "threadIdx.x")
        X = s.cache_read("A", "shared", [C])
        X.compute_at(C, bj)
        f = X.fuse(*X.axes)
        o, t = X.split(f, factor=8 * 32)      # 32 rows of threadIdx.y where C has 64
        y, x = X.split(t, factor=8)
        X.bind(y, "threadIdx.y")
        X.bind(x, "threadIdx.x")
        Co = s["matmul_1"]
        fo, fi = Co.split(Co.fuse(*Co.axes), factor=64)
        Co.bind(fo, "blockIdx.x")
        Co.bind(fi, "threadIdx.x")
    mm2.schedule("cuda")(sched)
    f = mm2.lower(kd.TensorSpec((64, 4), "float16"), kd.TensorSpec((4, 64), "float16"), backend="cuda")
    assert f.kernels[0].launch.block == (8, 64, 1)
    rng = np.random.default_rng(24)
    a, b = (rng.standard_normal(s).astype(np.float16) for s in ((64, 4), (4, 64)))
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(mm2(a, b, backend="interp-cuda").astype(np.float64), want, rtol=2e-2, atol=2e-2)


def test_fragment_loads_from_padded_tiles_need_no_test():
    """The recipe's shared tiles are padded caches (zeros beyond the matrix), so fragment loads
    read whole tiles with one unconditional ldmatrix, and the copies into them are single
    cp.async with a source size (no per-lane fallback) behind one kernel-uniform alignment
    test.  A copy that reads nothing passes its own (out-of-bounds) address: cp.async reads
    only the source size's bytes, so no safe address is selected."""
    for size, copy in ((4096, "kd_cp_async<16>("), (4000, "kd_cp_async_n<16>(")):
        spec = kd.TensorSpec((size, size), "float16")
        src = mm_default.source(spec, spec, backend="cuda")
        main = src[src.index("__global__"):]
        loop = main[:main.index('"n"(0)')]         # up to the epilogue's wait_group 0
        assert "kd_ldsm_x4(" in loop and "kd_ldsm_x4_t(" in loop
        assert "kd_wrv >= 16" not in loop
        assert copy in loop
        assert "reinterpret_cast<unsigned long long>(&A_shared" not in loop   # no per-copy test
        assert " ? &A[" not in loop and " ? &B[" not in loop


def test_taller_b_is_exact(rng):
    """``C[i, j] = sum over r < A.shape[1] of A[i, r] * B[r, j]`` with B taller than that: the
    rows of B past the reduction hold infinities, which a whole-tile fragment of B must not
    multiply (its k clip stays: the tile is zeroed past the reduction's end in registers)."""
    k = kd.kernel(kd.schedule("cuda", tensor_cores=True)(matmul16_over_a))
    for m, kk, n, extra in ((40, 20, 36, 12), (33, 48, 17, 5)):
        A, B = taller_b(rng, m, kk, n, extra)
        got = k(A, B, backend="interp-cuda")
        want = A.astype(np.float64) @ B[:kk].astype(np.float64)
        assert np.all(np.isfinite(got))
        assert np.allclose(got, want, rtol=1e-3, atol=1e-3)
        src = k.source(A, B, backend="cuda")
        assert "if (!(kd_wrv >= 16 && kd_wcv >= 16)) {" in src      # the register mask


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_result_is_converted_by_the_fragment_stores(dtype, rng):
    """``A @ B`` of 16-bit matrices is a float32 product and its cast: the fragment stores do
    the cast (one kernel, no float32 intermediate), giving the very bits the cast of the
    float32 product gives, over shapes that do and do not divide the tiles."""
    spec = kd.TensorSpec((300, 200), dtype)
    text = str(mm_default.lower(spec, kd.TensorSpec((200, 70), dtype), backend="cuda"))
    assert text.count("kernel ") == 1 and "float32[" not in text.split("kernel ")[0]
    assert f"{dtype}(matmul.wmma.accumulator[" in text
    src = mm_default.source(spec, kd.TensorSpec((200, 70), dtype), backend="cuda")
    assert src.count("__global__") == 1
    assert f"kd_pack2({'kd_f2h' if dtype == 'float16' else 'kd_f2bf'}(" in src
    from kdsl.numerics.numpy_eval import round_bf16
    npd = np.float16 if dtype == "float16" else kd.bfloat16.np      # bfloat16: ml_dtypes
    for m, k, nn in ((64, 64, 32), (37, 45, 50), (130, 260, 100), (0, 16, 16)):
        A = rng.standard_normal((m, k)).astype(npd)
        B = (rng.standard_normal((k, nn)) * 300).astype(npd)
        got = np.asarray(mm_default(A, B, backend="interp-cuda")).astype(np.float32)
        wide = np.asarray(mm_f32_out(A, B, backend="interp-cuda"), np.float32)
        want = wide.astype(np.float16).astype(np.float32) if dtype == "float16" else round_bf16(wide)
        np.testing.assert_array_equal(got, want)
