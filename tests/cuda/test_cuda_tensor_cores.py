"""Tensor cores on the GPU (issue 11 item 2): WMMA-tensorized matmuls (mma.sync.m16n8k16 +
ldmatrix, kdsl_cuda/codegen/wmma.py) against numpy in float64 over float16 and bfloat16
inputs, float32 and float16 accumulation/output, row- and col-major operands, the three
WMMA shapes, fragments from global memory or from shared tiles (plain or pipelined, whose
commit/wait groups the cuda backend emits), sizes 16..128 that divide the tiles and that
do not, strided views (the element path), and numpy in/out.

Tolerances: the inputs are 16-bit values and the reference multiplies exactly those values
in float64, so input rounding is not an error here.  A product of two float16 (11-bit) or
bfloat16 (8-bit) significands is exact in float32; the error is the accumulation's: at most
about one rounding of the accumulator's type per addition, k additions, each bounded by the
magnitudes summed, so |got - ref| <= c * k * u * (|A| @ |B|) with u = 2**-24 (float32) or
2**-11 (float16).  c = 4 covers the tensor core's alignment truncation of partial sums
(round toward zero inside an instruction, a few ulp per 16-long k block).
"""
import numpy as np
import pytest

import wmma_cuda_cases
from wmma_cuda_cases import CASES, reference

pytestmark = pytest.mark.cuda

#: Regression (session 10): NVRTC 13.0 miscompiled ``clamp(extent, 0, 16) == 16`` (VIMNMX with
#: predicate outputs), so warps whose tiles lay outside the matrix stored a whole tile one row
#: down: n or m = 16 with 32x32 blocks (16x16x16) caught it; wmma.py no longer clamps.

SIZES = [(16, 16, 16), (64, 32, 128), (128, 128, 128), (33, 47, 65), (100, 17, 77), (16, 130, 8)]


_KERNELS: dict = {}


def kernel(case):
    """One kernel object per case for the module (each compiles once per size class)."""
    if case not in _KERNELS:
        _KERNELS[case] = wmma_cuda_cases.kernel(case)
    return _KERNELS[case]


def _torch():
    return pytest.importorskip("torch")


def _inputs(torch, mm, n_, k, m, gen):
    cfg = mm.tc_config
    dt = getattr(torch, cfg["dtype"])
    sa = (k, n_) if cfg["trans_a"] else (n_, k)
    sb = (m, k) if cfg["trans_b"] else (k, m)
    A = torch.randn(sa, generator=gen, dtype=torch.float32).to(dt).cuda()
    B = torch.randn(sb, generator=gen, dtype=torch.float32).to(dt).cuda()
    return A, B


def _check(mm, got, A, B):
    """``got`` (a device tensor) against float64 numpy, within the module docstring's bound."""
    a = A.double().cpu().numpy()
    b = B.double().cpu().numpy()
    ref = reference(mm, a, b)
    mag = reference(mm, np.abs(a), np.abs(b))
    k = a.shape[0] if mm.tc_config["trans_a"] else a.shape[1]
    u = 2.0 ** -11 if mm.tc_config["out"] == "float16" else 2.0 ** -24
    out = got.double().cpu().numpy()
    assert out.shape == ref.shape
    bound = 4 * max(k, 1) * u * mag + 1e-30
    bad = np.abs(out - ref) > bound
    assert not bad.any(), (f"{int(bad.sum())} of {bad.size} elements off; worst at "
                           f"{np.unravel_index(np.argmax(np.abs(out - ref) - bound), ref.shape)}")


@pytest.mark.parametrize("nkm", SIZES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("case", sorted(CASES))
def test_tensor_core_matmul(case, nkm, rng):
    torch = _torch()
    mm = kernel(case)
    gen = torch.Generator().manual_seed(int(rng.integers(2 ** 31)))
    A, B = _inputs(torch, mm, *nkm, gen)
    got = mm(A, B)
    assert got.is_cuda and str(got.dtype) == f"torch.{mm.tc_config['out']}"
    _check(mm, got, A, B)


@pytest.mark.parametrize("case", ["f16_shared", "f16_cp_async", "f16_global_64"])
def test_strided_views_take_the_element_path(case):
    """Operands that are views with a row stride not a multiple of 8 elements and a column
    step of 2: ldmatrix's alignment test fails, the fragments load element by element."""
    torch = _torch()
    mm = kernel(case)
    gen = torch.Generator().manual_seed(7)
    big_a = torch.randn((45, 2 * 37 + 3), generator=gen).half().cuda()
    big_b = torch.randn((37, 2 * 50 + 1), generator=gen).half().cuda()
    A, B = big_a[3:, 1:2 * 37:2], big_b[:, ::2]
    assert A.stride() == (77, 2) and B.stride() == (101, 2)
    _check(mm, mm(A, B), A, B)


def test_odd_offset_output_and_numpy_in_out(rng):
    """numpy in, numpy out (copied); ``out=`` a view at an odd element offset (no pair stores)."""
    torch = _torch()
    mm = kernel("f16_cp_async")
    A = rng.standard_normal((70, 45)).astype(np.float16)
    B = rng.standard_normal((45, 33)).astype(np.float16)
    got = mm(A, B, backend="cuda")
    assert isinstance(got, np.ndarray)
    _check(mm, torch.from_numpy(got), torch.from_numpy(A), torch.from_numpy(B))
    base = torch.full((70 * 33 + 1,), float("nan"), device="cuda")
    out = base[1:].view(70, 33)
    mm(torch.from_numpy(A).cuda(), torch.from_numpy(B).cuda(), out=out)
    _check(mm, out, torch.from_numpy(A), torch.from_numpy(B))
    assert torch.isnan(base[0])


def test_empty_and_repeated_calls():
    """Sizes 0 (no blocks; an empty k: the fill's zeros stored) and a cached second call."""
    torch = _torch()
    mm = kernel("f16_shared")
    for nkm in [(0, 16, 16), (16, 0, 16), (32, 48, 16)]:
        gen = torch.Generator().manual_seed(sum(nkm))
        A, B = _inputs(torch, mm, *nkm, gen)
        for _ in range(2):
            got = mm(A, B)
            torch.cuda.synchronize()
            if nkm[1] == 0:         # an empty sum: zeros
                assert got.shape == (16, 16) and not got.abs().max().item()
            elif got.numel():
                _check(mm, got, A, B)
