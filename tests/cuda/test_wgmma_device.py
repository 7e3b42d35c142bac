"""Hopper's wgmma products on the GPU (``cuda`` mark; the default 16-bit matmul on sm_90):
large and odd shapes, 16-bit results (the fused cast), a K-major B through an explicit
``kd.intrin.wgmma`` schedule, against float64 on the host."""
import os
import sys

import numpy as np
import pytest

import kdsl as kd

_TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _p in (_TESTS, os.path.join(_TESTS, "backends")):
    if _p not in sys.path:
        sys.path.insert(0, _p)
from wmma_schedules import wgmma_schedule  # noqa: E402

pytestmark = pytest.mark.cuda


def _torch():
    torch = pytest.importorskip("torch")
    major, _ = torch.cuda.get_device_capability()
    if major != 9:
        pytest.skip("wgmma needs an sm_90 (Hopper) GPU")
    return torch


def _err_ok(got, a, b, k, u=0.0):
    want = a @ b
    mag = np.abs(a) @ np.abs(b)
    err = np.abs(got - want)
    return bool((err <= 4 * max(k, 1) * 2.0 ** -24 * mag + u * np.abs(want) + 1e-30).all()), float(err.max())


@pytest.mark.parametrize("nkm", [(64, 64, 64), (1024, 1024, 1024), (1000, 1000, 999), (4095, 4097, 1023),
                                 (130, 100, 70), (256, 8192, 256)])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_default_16_bit_matmul(nkm, dtype, rng):
    torch = _torch()
    n, k, m = nkm
    tdt = getattr(torch, dtype)
    gen = torch.Generator().manual_seed(int(rng.integers(2 ** 31)))
    a = torch.randn((n, k), generator=gen).to(tdt)
    b = torch.randn((k, m), generator=gen).to(tdt)
    mm = kd.kernel(lambda A, B: A @ B)
    assert "wgmma" in mm.source(kd.TensorSpec((n, k), dtype), kd.TensorSpec((k, m), dtype), backend="cuda")
    got = mm(a.cuda(), b.cuda()).double().cpu().numpy()
    u = 2.0 ** -8 if dtype == "bfloat16" else 2.0 ** -11
    ok, worst = _err_ok(got, a.double().numpy(), b.double().numpy(), k, u)
    assert ok, worst


@pytest.mark.parametrize("nkm", [(64, 64, 64), (100, 130, 70), (512, 1000, 384)])
def test_k_major_b_schedule(nkm, rng):
    """``C[i, j] = sum_r A[i, r] * B[j, r]`` (B stored m x k) with a hand schedule declaring
    ``layout_b='col_major'``: the tensor cores read B K-major (imm-trans-b 0)."""
    torch = _torch()
    n, k, m = nkm

    @kd.kernel
    def abt(A, B):
        r = kd.reduce_axis(A.shape[1], name="r")
        return kd.compute((A.shape[0], B.shape[0]),
                          lambda i, j: kd.sum(A[i, r].astype(kd.float32) * B[j, r].astype(kd.float32), axis=r),
                          name="C")
    abt.schedule("cuda")(wgmma_schedule(bm=64, bn=128, stages=3,
                                        intrin=kd.intrin.wgmma(128, layout_b="col_major")))
    gen = torch.Generator().manual_seed(int(rng.integers(2 ** 31)))
    a = torch.randn((n, k), generator=gen).half()
    b = torch.randn((m, k), generator=gen).half()
    got = abt(a.cuda(), b.cuda()).double().cpu().numpy()
    ok, worst = _err_ok(got, a.double().numpy(), b.double().numpy().T, k)
    assert ok, worst
