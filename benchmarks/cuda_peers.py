"""The peers of ``benchmarks/cuda.py`` that are code of our own: Triton kernels, a CuPy
``RawKernel`` and the child script of the cold-compile case.

Loaded by ``cuda.py`` from its path (this folder must not be on ``sys.path``: ``cuda.py``
there would shadow the ``cuda`` namespace package of cuda-python).  Everything here imports
its library lazily or under ``try``, so that the module loads on a machine without them.
"""
from __future__ import annotations

try:
    import triton
    import triton.language as tl
except ImportError:   # the Triton rows say "not installed"
    triton = tl = None


# ----------------------------------------------------------------- Triton
if triton is not None:
    @triton.jit
    def tr_softmax(X, Y, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
        """One program per row: the whole row in registers, max, exp, sum, scale, store."""
        row = tl.program_id(0).to(tl.int64)
        offs = tl.arange(0, BLOCK)
        keep = offs < n_cols
        x = tl.load(X + row * x_stride + offs, mask=keep, other=-float("inf"))
        z = x - tl.max(x, axis=0)
        num = tl.exp(z)
        den = tl.sum(num, axis=0)
        tl.store(Y + row * y_stride + offs, num / den, mask=keep)

    @triton.jit
    def tr_add(A, B, C, n, BLOCK: tl.constexpr):
        """c = a + b, one program per BLOCK elements (the launch-overhead peer)."""
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = i < n
        tl.store(C + i, tl.load(A + i, mask=m) + tl.load(B + i, mask=m), mask=m)


def triton_softmax(x, num_warps: int):
    """Y = softmax(X, axis=1) with ``tr_softmax`` (X: a 2-D float32 CUDA torch tensor)."""
    import torch
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    tr_softmax[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0),
                          BLOCK=triton.next_power_of_2(n_cols), num_warps=num_warps)
    return y


# ----------------------------------------------------------------- CuPy
CUPY_ADD_SRC = r"""
extern "C" __global__ void add(const float* __restrict__ a, const float* __restrict__ b,
                               float* __restrict__ c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""


def cupy_add_kernel():
    """A compiled CuPy RawKernel ``add(a, b, c, n)`` (float32)."""
    import cupy as cp
    return cp.RawKernel(CUPY_ADD_SRC, "add")


# ----------------------------------------------------------------- cold compile (child process)
#: run as a file (Triton reads its kernels' source with inspect), argv: ROOT MODE ROWS COLS.
#: Both modes first warm their library up with an unrelated kernel (driver, context, NVRTC or
#: Triton's backend loaded), then time a *fresh* row-sum kernel's first call to a synchronized
#: result with the cache directories (KDSL_CACHE_DIR / TRITON_CACHE_DIR) new and empty.  Prints
#: one JSON line.
COLD_CHILD = r'''
import json, sys, time
sys.path.insert(0, sys.argv[1])
MODE, ROWS, COLS = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
import torch

def report(**kw):
    print(json.dumps(kw), flush=True)

x = torch.rand((ROWS, COLS), device="cuda", dtype=torch.float32)
want = torch.sum(x, dim=1, dtype=torch.float64)
a = torch.rand(1000, device="cuda"); b = torch.rand(1000, device="cuda")
torch.cuda.synchronize()
try:
    if MODE == "kdsl":
        import kdsl as kd
        if "cuda" not in kd.backends():     # this checkout's, when not pip-installed
            import kdsl_cuda
            kd.register_backend("cuda", kdsl_cuda.backend)

        @kd.kernel
        def warm_add(p, q):
            return p + q
        warm_add(a, b); torch.cuda.synchronize()
        t0 = time.perf_counter()

        @kd.kernel
        def rowsum(A):
            return A.sum(axis=1)
        got = rowsum(x)
        torch.cuda.synchronize()
        t1 = time.perf_counter()
    else:
        import triton
        import triton.language as tl

        @triton.jit
        def warm_add(P, Q, R, n, BLOCK: tl.constexpr):
            i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            m = i < n
            tl.store(R + i, tl.load(P + i, mask=m) + tl.load(Q + i, mask=m), mask=m)

        @triton.jit
        def rowsum(X, Out, n_cols, stride, BLOCK: tl.constexpr):
            row = tl.program_id(0)
            acc = tl.zeros([BLOCK], dtype=tl.float32)
            for start in range(0, n_cols, BLOCK):
                cols = start + tl.arange(0, BLOCK)
                acc += tl.load(X + row * stride + cols, mask=cols < n_cols, other=0.0)
            tl.store(Out + row, tl.sum(acc, axis=0))
        r = torch.empty_like(a)
        warm_add[(4,)](a, b, r, 1000, BLOCK=256); torch.cuda.synchronize()
        t0 = time.perf_counter()
        got = torch.empty(ROWS, device="cuda", dtype=torch.float32)
        rowsum[(ROWS,)](x, got, COLS, x.stride(0), BLOCK=1024)
        torch.cuda.synchronize()
        t1 = time.perf_counter()
    got = torch.as_tensor(got, device="cuda").double()
    err = float((got - want).abs().max() / want.abs().max())
    report(first_s=t1 - t0, err=err)
except Exception as e:
    msg = (str(e).strip().splitlines() or [""])[0]
    report(error=f"{type(e).__name__}: {msg}")
'''
