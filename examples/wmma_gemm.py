"""Seed 001's tensor-core example as a kdsl kernel: C = alpha * A @ B + beta * C.

    python3 examples/wmma_gemm.py            # 4096^3 on the GPU against torch (cuBLAS)
    python3 examples/wmma_gemm.py --check    # no GPU: small sizes on the SIMT interpreter

As in the seed, A (M x K), B (K x N) and C (M x N) are float16/float16/float32 matrices stored
column-major ("packed with no transpositions": lda = M, ldb = K, ldc = M).  A column-major
M x K matrix is, in memory, a row-major K x M array, so the kernel takes ``a`` (K, M), ``b``
(N, K) and ``c`` (N, M) and computes ``out[j, i] = alpha * sum_r b[j, r] * a[r, i] + beta *
c[j, i]``: the product of the transposes, which is a plain matrix product on the arrays.
``tensor_cores=True`` puts it on 16x16x16 tensor-core tiles (float32 accumulation), the
epilogue is an elementwise stage.  The seed updates C in place; kdsl returns a new array
(``out=`` may not alias an input).
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import kdsl as kd  # noqa: E402


@kd.kernel
@kd.schedule("cuda", tensor_cores=True, stage="acc")
def wmma_example(a, b, c, alpha, beta):
    """a: A column-major (K, M) float16; b: B column-major (N, K) float16; c: C column-major
    (N, M) float32; returns alpha * A @ B + beta * C, column-major (N, M) float32."""
    K, M = a.shape
    N = b.shape[0]
    r = kd.reduce_axis(K, name="r")
    acc = kd.compute((N, M), lambda j, i: kd.sum(b[j, r].astype(kd.float32)
                                                 * a[r, i].astype(kd.float32), axis=r),
                     name="acc")
    return kd.compute((N, M), lambda j, i: alpha * acc[j, i] + beta * c[j, i], name="out")


def reference(a, b, c, alpha, beta):
    """numpy, float64: the same column-major arrays."""
    return alpha * (b.astype(np.float64) @ a.astype(np.float64)) + beta * c.astype(np.float64)


def inputs(rng, M, N, K):
    a = rng.standard_normal((K, M)).astype(np.float16)
    b = rng.standard_normal((N, K)).astype(np.float16)
    c = rng.standard_normal((N, M)).astype(np.float32)
    return a, b, c


def check(seed=None) -> list[str]:
    """interp-cuda (the SIMT interpreter) at small sizes, dividing the 16x16 tiles and not;
    the problems found."""
    rng = np.random.default_rng(seed)
    bad = []
    for M, N, K in [(64, 48, 32), (33, 17, 20), (16, 70, 5), (0, 16, 16)]:
        a, b, c = inputs(rng, M, N, K)
        got = np.asarray(wmma_example(a, b, c, 2.0, 0.5, backend="interp-cuda"))
        want = reference(a, b, c, 2.0, 0.5)
        if got.shape != want.shape or got.dtype != np.float32 or \
                not np.allclose(got, want, rtol=1e-4, atol=1e-3):
            bad.append(f"M={M} N={N} K={K}: wrong result")
    return bad


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="no GPU: the SIMT interpreter")
    ap.add_argument("--size", type=int, default=4096)
    args = ap.parse_args(argv)
    if args.check:
        bad = check()
        print("wmma_example on interp-cuda: " + ("ok" if not bad else "; ".join(bad)))
        return 1 if bad else 0
    import torch
    if "cuda" not in kd.backends():
        import kdsl_cuda
        kd.register_backend("cuda", kdsl_cuda.backend)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from gemm_ladder import gpu_ms
    M = N = K = args.size
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(K, M, generator=g, device="cuda").half()
    b = torch.randn(N, K, generator=g, device="cuda").half()
    c = torch.randn(N, M, generator=g, device="cuda")
    alpha, beta = 2.0, 0.5
    want = torch.addmm(c, b.float(), a.float(), beta=beta, alpha=alpha)
    got = wmma_example(a, b, c, alpha, beta)
    err = float((got - want).abs().max() / want.abs().max())
    ms = gpu_ms(lambda: wmma_example(a, b, c, alpha, beta))
    peer = gpu_ms(lambda: torch.addmm(c.half(), b, a, beta=beta, alpha=alpha))
    print(f"wmma_example {M}x{N}x{K}: {ms:.3f} ms, {2 * M * N * K / ms / 1e9:.1f} TFLOP/s, "
          f"max error {err:.2g}; cuBLAS (float16 addmm) {peer:.3f} ms: {100 * peer / ms:.0f}%")
    return 0 if err <= 1e-2 else 1


if __name__ == "__main__":
    sys.exit(main())
