"""The default cuda schedule of 16-bit matrix products on Hopper (sm_90, what kdsl compiles for
without a device): ``kd.intrin.wgmma`` products read from 128-byte swizzled shared tiles
(schedules/hopper.py), run on the SIMT interpreter (``interp-cuda``, race-checked, warpgroups
checked) and the sequential interpreter against numpy in float64, over shapes that do and do
not divide the 128 x 256 x 64 tiles; its hints, its opt-out, and where it hands over to the
mma.sync recipe."""
import numpy as np
import pytest

import kdsl as kd
from kdsl_cuda.schedules import hopper
from cuda_workloads import matmul16_over_a, taller_b


@pytest.fixture(autouse=True)
def _hopper(monkeypatch):
    monkeypatch.setattr(hopper, "_arch", "sm_90")     # as on an H100/H200, or with no device
    monkeypatch.delenv("KDSL_CUDA_WGMMA", raising=False)


@kd.kernel
def mm(A, B):
    return A @ B


@kd.kernel
@kd.schedule("cuda", tensor_cores=True)
def mm32(A, B):
    return A.astype("float32") @ B.astype("float32")


def _text(kernel, a, b, dtype="float16"):
    return str(kernel.lower(kd.TensorSpec(a, dtype), kd.TensorSpec(b, dtype), backend="cuda"))


def _close(got, A, B):
    want = A.astype(np.float64) @ B.astype(np.float64)
    k = A.shape[-1]
    tol = (np.abs(A).astype(np.float64) @ np.abs(B).astype(np.float64)) * (k * 2.0 ** -23)
    assert got.shape == want.shape and got.dtype == np.float32
    assert np.all(np.abs(np.asarray(got, np.float64) - want) <= tol + 1e-30)


def test_default_on_hopper_is_wgmma():
    text = _text(mm, (4096, 4096), (4096, 4096))
    assert "wgmma.mma(" in text and "wmma.mma(" not in text
    assert "block=(32, 8, 1)" in text and "stages=4" in text        # 128 x 256 tiles, 8 warps
    assert "A.shared: float16[4, 128, 64] shared" in text           # compact: swizzled, not padded
    src = mm.source(kd.TensorSpec((4096, 4096), "float16"), kd.TensorSpec((4096, 4096), "float16"),
                    backend="cuda")
    assert "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16" in src
    assert "#define KD_NEEDS_SM90A 1" in src and "kd_swz<128u, 64u>" in src


@pytest.mark.parametrize("shape", [(64, 64, 64), (130, 100, 70), (150, 130, 270), (0, 64, 80),
                                   (70, 0, 90)])
def test_float32_product_matches_numpy(shape, rng):
    m, k, nn = shape
    A = rng.standard_normal((m, k)).astype(np.float16)
    B = rng.standard_normal((k, nn)).astype(np.float16)
    _close(np.asarray(mm32(A, B, backend="interp-cuda")), A, B)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_result_is_the_cast_of_the_product(dtype, rng):
    """``A @ B`` of 16-bit matrices: the accumulator's stores round to the 16-bit type, the
    very bits of the cast of the float32 product."""
    from kdsl.numerics.numpy_eval import round_bf16
    npd = np.float16 if dtype == "float16" else kd.bfloat16.np
    assert f"{dtype}(matmul.wmma.accumulator[" in _text(mm, (300, 200), (200, 70), dtype)
    for m, k, nn in ((64, 128, 64), (77, 130, 150)):
        A = rng.standard_normal((m, k)).astype(npd)
        B = (rng.standard_normal((k, nn)) * 300).astype(npd)
        got = np.asarray(mm(A, B, backend="interp-cuda")).astype(np.float32)
        wide = np.asarray(mm32(A.astype(npd), B, backend="interp-cuda"), np.float32)
        want = wide.astype(np.float16).astype(np.float32) if dtype == "float16" else round_bf16(wide)
        np.testing.assert_array_equal(got, want)


def test_taller_b_is_exact(rng):
    """``sum over r < A.shape[1] of A[i, r] * B[r, j]`` with B taller: wgmma multiplies whole
    16-deep tiles, so B's copy into shared memory is clipped at the reduction's end (B's rows
    past it hold infinities, which must not meet A's zero padding)."""
    k = kd.kernel(kd.schedule("cuda", tensor_cores=True)(matmul16_over_a))
    for m, kk, n, extra in ((70, 40, 90, 12), (64, 100, 64, 30)):
        A, B = taller_b(rng, m, kk, n, extra)
        got = k(A, B, backend="interp-cuda")
        assert np.all(np.isfinite(got))
        _close(got, A, B[:kk])
    assert "wgmma.mma(" in str(k.lower(A, B, backend="cuda"))


def test_batched(rng):
    A = rng.standard_normal((3, 70, 90)).astype(np.float16)
    B = rng.standard_normal((3, 90, 130)).astype(np.float16)
    assert "wgmma.mma(" in str(mm32.lower(A, B, backend="cuda"))
    _close(mm32(A, B, backend="interp-cuda"), A, B)


def test_hints_set_the_tiles(rng):
    @kd.kernel
    @kd.schedule("cuda", tile={"i0": 64, "i1": 128, "r0": 128}, stages=2, tensor_cores=True)
    def small(A, B):
        return A.astype("float32") @ B.astype("float32")
    text = _text(small, (512, 512), (512, 512))
    assert "block=(32, 4, 1)" in text and "stages=2" in text and "wgmma.mma(" in text
    assert "A.shared: float16[2, 64, 128]" in text
    A = rng.standard_normal((100, 150)).astype(np.float16)
    B = rng.standard_normal((150, 140)).astype(np.float16)
    _close(small(A, B, backend="interp-cuda"), A, B)


def test_opt_out_and_other_devices(monkeypatch):
    monkeypatch.setenv("KDSL_CUDA_WGMMA", "0")
    text = _text(kd.kernel(lambda A, B: A @ B), (512, 512), (512, 512))
    assert "wmma.mma(" in text and "wgmma" not in text
    monkeypatch.delenv("KDSL_CUDA_WGMMA")
    monkeypatch.setattr(hopper, "_arch", "sm_80")
    text = _text(kd.kernel(lambda A, B: A @ B), (512, 512), (512, 512))
    assert "wmma.mma(" in text and "wgmma" not in text


def test_constant_extents_below_a_warpgroup_use_mma_sync(rng):
    """A constant extent under 64 (a warpgroup's rows, a swizzle line) goes to the mma.sync
    recipe, whose 16-wide fragments fit it.  Regressions of that recipe: M = 48 under 64-row
    blocks gave 3 warps against the copies' 4; K = 32, one k step, pipelined a loop that was
    not there; K = 64 in the wgmma recipe likewise."""
    from kdsl.gpu.simt import run_simt
    for a, b, kind in (((48, 128), (128, 96), "wmma.mma("), ((96, 32), (32, 80), "wmma.mma("),
                       ((64, 64), (64, 40), "wmma.mma("), ((64, 64), (64, 64), "wgmma.mma(")):
        f = mm32.lower(kd.TensorSpec(a, "float16"), kd.TensorSpec(b, "float16"), backend="cuda")
        text = str(f)
        assert kind in text and (kind == "wgmma.mma(" or "wgmma" not in text)
        A = rng.standard_normal(a).astype(np.float16)
        B = rng.standard_normal(b).astype(np.float16)
        got = np.full((a[0], b[1]), np.nan, np.float32)
        run_simt(f, [A, B], [got], [])
        _close(got, A, B)
