"""The seed-002 ladder at its full tile sizes and the default matmul schedules on the GPU
(``cuda`` mark), against numpy in float64, at dividing and non-dividing shapes."""
import os
import sys

import numpy as np
import pytest

import kdsl as kd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "examples"))
import gemm_ladder  # noqa: E402

pytestmark = pytest.mark.cuda


@pytest.fixture(params=["wgmma", "mma_sync"])
def tc_recipe(request, monkeypatch):
    """Both tensor-core recipes of 16-bit products: Hopper's wgmma (the default on sm_90) and
    the mma.sync one (other GPUs; KDSL_CUDA_WGMMA=0)."""
    if request.param == "mma_sync":
        monkeypatch.setenv("KDSL_CUDA_WGMMA", "0")
    else:
        monkeypatch.delenv("KDSL_CUDA_WGMMA", raising=False)
    return request.param

SHAPES = [(512, 512, 512), (4095, 257, 1023), (130, 20, 129), (1, 1, 1), (3, 1, 200)]
FLOAT_STEPS = [s for s in gemm_ladder.STEPS if gemm_ladder.STEPS[s][2] is np.float32]


def _close(got, a, b):
    want = a.astype(np.float64) @ b.astype(np.float64)
    tol = 1e-4 * max(1.0, np.sqrt(a.shape[-1]))
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-4, atol=tol)


@pytest.mark.parametrize("nkm", SHAPES)
@pytest.mark.parametrize("step", FLOAT_STEPS)
def test_ladder_step_on_the_gpu(step, nkm, rng):
    n, k, m = nkm
    a = rng.standard_normal((n, k)).astype(np.float32)
    b = rng.standard_normal((k, m)).astype(np.float32)
    _close(gemm_ladder.kernel(step)(a, b, backend="cuda"), a, b)


@pytest.mark.parametrize("nkm", SHAPES + [(2048, 64, 2048), (8, 300, 1000), (700, 40, 16)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_default_matmul_on_the_gpu(nkm, dtype, rng):
    n, k, m = nkm
    a = (rng.standard_normal((n, k)) * 3).astype(dtype)
    b = (rng.standard_normal((k, m)) * 3).astype(dtype)
    got = kd.kernel(lambda A, B: A @ B)(a, b, backend="cuda")
    if dtype is np.int32:
        np.testing.assert_array_equal(got, a.astype(np.int64) @ b.astype(np.int64))
    else:
        _close(got, a, b)


def test_batched_default_on_the_gpu(rng):
    a = rng.standard_normal((64, 130, 70)).astype(np.float32)
    b = rng.standard_normal((64, 70, 129)).astype(np.float32)
    _close(kd.kernel(lambda A, B: A @ B)(a, b, backend="cuda"), a, b)


@pytest.mark.parametrize("step", ["tensor_core", "wgmma"])
def test_tensor_core_step_on_the_gpu(step, rng):
    if step == "wgmma":
        import kdsl_cuda.runtime.driver as drv
        if drv.device(0).arch != "sm_90":
            pytest.skip("the wgmma step needs an sm_90 (Hopper) GPU")
    a = rng.standard_normal((512, 272)).astype(np.float16)
    b = rng.standard_normal((272, 200)).astype(np.float16)
    _close(gemm_ladder.kernel(step)(a, b, backend="cuda"), a, b)


TC_SHAPES = [(16, 16, 16), (128, 128, 128), (100, 17, 77), (129, 130, 131), (1, 64, 64),
             (64, 1, 64), (300, 520, 260), (1024, 1024, 1024)]


@pytest.mark.parametrize("nkm", TC_SHAPES)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_tensor_core_hint_on_the_gpu(nkm, dtype, rng, tc_recipe):
    """``tensor_cores=True`` (the schedules/tensorcore.py recipe) on 16-bit inputs, float32
    accumulation, over shapes that do and do not divide its 128x128x32 tiles."""
    torch = pytest.importorskip("torch")
    n, k, m = nkm
    tdt = getattr(torch, dtype)
    gen = torch.Generator().manual_seed(int(rng.integers(2 ** 31)))
    a = torch.randn((n, k), generator=gen).to(tdt).cuda()
    b = torch.randn((k, m), generator=gen).to(tdt).cuda()
    mm = kd.kernel(kd.schedule("cuda", tensor_cores=True)(gemm_ladder.matmul16))
    got = mm(a, b)
    want = a.double().cpu().numpy() @ b.double().cpu().numpy()
    mag = np.abs(a.double().cpu().numpy()) @ np.abs(b.double().cpu().numpy())
    err = np.abs(got.double().cpu().numpy() - want)
    assert (err <= 4 * max(k, 1) * 2.0 ** -24 * mag + 1e-30).all(), float(err.max())


@pytest.mark.parametrize("nkm", [(100, 17, 77), (129, 130, 131), (256, 64, 128), (300, 200, 520)])
def test_tensor_core_taller_b_on_the_gpu(nkm, rng, tc_recipe):
    """B with more rows than A has columns (the sum runs over A's), infinities in the extra
    rows: the whole-tile fragment loads of B zero the rows past the reduction in registers."""
    torch = pytest.importorskip("torch")
    n, k, m = nkm
    gen = torch.Generator().manual_seed(int(rng.integers(2 ** 31)))
    a = torch.randn((n, k), generator=gen).half().cuda()
    b = torch.randn((k + 9, m), generator=gen).half()
    b[k:] = float("inf")
    b = b.cuda()
    mm = kd.kernel(kd.schedule("cuda", tensor_cores=True)(gemm_ladder.matmul16))
    got = mm(a, b).double().cpu().numpy()
    want = a.double().cpu().numpy() @ b[:k].double().cpu().numpy()
    assert np.isfinite(got).all()
    assert np.allclose(got, want, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("shape", [(64, 512, 512, 512), (3, 100, 17, 77), (5, 129, 130, 131)])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_batched_16_bit_default_on_the_gpu(shape, dtype, rng, tc_recipe):
    """A batched 16-bit ``A @ B`` through the default schedule: tensor cores, one matrix per
    blockIdx.z, shapes that do and do not divide the tiles."""
    torch = pytest.importorskip("torch")
    bb, n, k, m = shape
    tdt = getattr(torch, dtype)
    gen = torch.Generator().manual_seed(int(rng.integers(2 ** 31)))
    a = torch.randn((bb, n, k), generator=gen).to(tdt).cuda()
    b = torch.randn((bb, k, m), generator=gen).to(tdt).cuda()
    got = kd.kernel(lambda A, B: A @ B)(a, b).double().cpu().numpy()
    want = a.double().cpu().numpy() @ b.double().cpu().numpy()
    mag = np.abs(a.double().cpu().numpy()) @ np.abs(b.double().cpu().numpy())
    u = 2.0 ** -8 if dtype == "bfloat16" else 2.0 ** -11       # the 16-bit result's rounding
    err = np.abs(got - want)
    assert (err <= 4 * k * 2.0 ** -24 * mag + u * np.abs(want) + 1e-30).all(), float(err.max())
