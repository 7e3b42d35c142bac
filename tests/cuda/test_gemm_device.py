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

SHAPES = [(512, 512, 512), (4095, 257, 1023), (130, 20, 129), (1, 1, 1), (3, 1, 200)]
FLOAT_STEPS = [s for s in gemm_ladder.STEPS if s != "tensor_core"]


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


def test_tensor_core_step_on_the_gpu(rng):
    """Refused with the codegen's message until it prints tensor-core statements; then correct."""
    a = rng.standard_normal((512, 272)).astype(np.float16)
    b = rng.standard_normal((272, 200)).astype(np.float16)
    try:
        got = gemm_ladder.kernel("tensor_core")(a, b, backend="cuda")
    except kd.BackendCompileError as e:
        assert gemm_ladder.refusal(e) is not None, str(e)
        return
    _close(got, a, b)
