"""The flash-attention schedule on a GPU (mark ``cuda``; skipped without one): the CUDA kernel
itself against numpy in float64 -- ragged tiles, causal and offset masks (NaN rows), float16
and bfloat16, head dims 64 and 128 (and 80: the padded 128-wide function), strided views.

    python3 -m pytest -q -m cuda tests/cuda_attention/test_flash_device.py
"""
import numpy as np
import pytest

import kdsl as kd

from attention_cases import TOL, attention, causal_attention, rand, reference, shifted_attention


pytestmark = pytest.mark.cuda     # (tests/conftest.py skips it where there is no device)

ATT, CAUSAL, SHIFT = (kd.kernel(f) for f in (attention, causal_attention, shifted_attention))


def _check(got, want, tol):
    got = np.asarray(got).astype(np.float64)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    assert np.abs(got[ok] - want[ok]).max() <= tol * max(1.0, np.abs(want[ok]).max())


@pytest.mark.parametrize("d", [64, 128, 80])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n", [1, 17, 300])
def test_flash_on_device(n, causal, dtype, d):
    if dtype == "bfloat16":
        pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(n + d)
    q, k, v = (rand(rng, (2, 3, n, d), dtype) for _ in range(3))
    kern = CAUSAL if causal else ATT
    _check(kern(q, k, v, backend="cuda"), reference(q, k, v, causal), 2 * TOL[dtype])


def test_offset_mask_strided_and_shared_head_on_device():
    rng = np.random.default_rng(4)
    q = rand(rng, (1, 200, 4, 64), "float16").transpose(0, 2, 1, 3)
    k, v = (rand(rng, (1, 1, 230, 64), "float16") for _ in range(2))
    _check(SHIFT(q, k, v, backend="cuda"),
           reference(q, k, v, causal=True, scale=0.25, shift=3), 2 * TOL["float16"])
    _check(ATT(q, k, v, backend="cuda"), reference(q, k, v), 2 * TOL["float16"])


def test_growing_row_max_and_negative_scale_on_device():
    """Scores growing by far more than 2^8 from one 64-key tile to the next (the lazy rescale
    raises its reference), a negative scale (the kernel's sign-flip branch), Nq != Nk."""
    rng = np.random.default_rng(12)
    q = (np.abs(rand(rng, (1, 2, 150, 64), "float32")) + 0.5).astype(np.float16)
    k = np.abs(rand(rng, (1, 2, 300, 64), "float32")) * 0.1
    k = (k * np.linspace(0.0, 40.0, 300, dtype=np.float32)[None, None, :, None]).astype(np.float16)
    v = rand(rng, (1, 2, 300, 64), "float16")
    _check(ATT(q, k, v, backend="cuda"), reference(q, k, v), 2 * TOL["float16"])

    def neg(q, k, v):
        s = q @ kd.swapaxes(k, -1, -2) * -0.5
        p = kd.exp(s - s.max(axis=-1, keepdims=True))
        return (p / p.sum(axis=-1, keepdims=True)) @ v

    _check(kd.kernel(neg)(q, k, v, backend="cuda"), reference(q, k, v, scale=-0.5),
           2 * TOL["float16"])
