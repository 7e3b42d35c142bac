"""The seed-002 GEMM optimisation ladder as kdsl schedules on the ``cuda`` backend.

    python3 examples/gemm_ladder.py            # every step at 4096^3 against cuBLAS (torch)
    python3 examples/gemm_ladder.py --big      # ... and at 16384^3 (the seed's size)
    python3 examples/gemm_ladder.py --check    # no GPU: small sizes on the SIMT interpreter
    python3 examples/gemm_ladder.py --only thread_tiling,double_buffer --size 2048

One matrix product, ``C[i, j] = sum_r A[i, r] * B[r, j]`` in float32, and one explicit cuda
schedule per step of the seed's walk (its names; "wrap_tiling" is the seed's spelling):

  native_gemm     one output per thread, A and B read from global memory
  blocked_gemm    16x16 tiles of C per block, A and B tiles staged in shared memory
  thread_tiling   128x128 tiles, BK = 8, 16x16 threads each accumulating 8x8 in registers,
                  per-k slices of the shared tiles in registers (outer products)
  wrap_tiling     the same, each thread's 8x8 spread as 2x2 virtual threads of 4x4 (vthread):
                  neighbouring threads read neighbouring shared-memory words
  vectorize       the shared-tile copies 4 floats per thread and access (float4)
  double_buffer   the shared tiles in rings of 2, filled by cp.async one K step ahead
  tensor_core     float16 inputs, float32 accumulation on tensor cores (kd.intrin.wmma),
                  64x64 tiles per block of 2x2 warps, A and B tiles staged in shared memory
  wgmma           Hopper (sm_90) only: kd.intrin.wgmma products read straight from 128-byte
                  swizzled shared tiles, 128x256 tiles per block of 2 warpgroups (8 warps of
                  16 rows), a 4-stage cp.async ring with each step's products left in flight

Each step is checked against torch's result (cuBLAS, TF32 off) and timed with CUDA events
(median of batches): ms, TFLOP/s and the percentage of cuBLAS's speed on the same problem.
``--check`` runs every step on ``interp-cuda`` (the SIMT interpreter, race-checked) at small
shapes that do and do not divide the tiles, against numpy in float64: what CI runs.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)      # this checkout's kdsl and kdsl_cuda

import kdsl as kd  # noqa: E402


# ----------------------------------------------------------------- the kernels
def matmul(A, B):
    """C = A @ B (float32): the kernel every float step schedules."""
    n, k = A.shape
    _, m = B.shape
    r = kd.reduce_axis(k, name="r")
    return kd.compute((n, m), lambda i, j: kd.sum(A[i, r] * B[r, j], axis=r), name="C")


def matmul16(A, B):
    """C = float32(A) @ float32(B) for 16-bit A and B: the tensor-core step's kernel."""
    n, k = A.shape
    _, m = B.shape
    r = kd.reduce_axis(k, name="r")
    return kd.compute((n, m), lambda i, j: kd.sum(A[i, r].astype(kd.float32)
                                                  * B[r, j].astype(kd.float32), axis=r),
                      name="C")


# ----------------------------------------------------------------- the schedules
def coop_copy(X, threads_y, threads_x, vec=1):
    """All threads of the block copy staged tile ``X``: its last axis cut in ``vec``-element
    vectors, the rest fused and dealt out to the threads in turn (consecutive threads take
    consecutive vectors: coalesced global reads)."""
    *rows, col = X.axes
    v = None
    if vec > 1:
        col, v = X.split(col, factor=vec)
    f = X.fuse(*rows, col) if rows else col
    _, t = X.split(f, factor=threads_y * threads_x)
    y, x = X.split(t, factor=threads_x)
    X.bind(y, "threadIdx.y")
    X.bind(x, "threadIdx.x")
    if v is not None:
        X.vectorize(v)


def const_extent(axis):
    """The extent of a loop when this specialisation makes it a constant (kdsl specialises
    dimensions of size 1), else None."""
    e = axis.dom.extent
    return int(e.value) if hasattr(e, "value") else None


def fits(C, block, bk, threads, vec=1) -> bool:
    """Whether the tiled steps make a legal kernel of stage ``C`` in this specialisation.  A
    split of a constant extent by a larger factor is that extent, so a dimension of size 1
    (a constant in kdsl's trace) shrinks the tiles; every loop bound to a thread index must
    still have the block's extent: C's own (``block`` rows and columns at least ``threads``)
    and the copies (each staged tile at least one ``vec`` vector per thread)."""
    def clamp(tile, axis):
        c = const_extent(axis)
        return tile if c is None or c < 1 else min(tile, c)
    ri, rj, rk = clamp(block, C.axes[0]), clamp(block, C.axes[1]), clamp(bk, C.reduce_axes[0])
    return (ri >= threads and rj >= threads and ri * -(-rk // vec) >= threads * threads
            and rk * -(-rj // vec) >= threads * threads)


def native_gemm(s):
    """Step 0: one output of C per thread, 256 threads along a row, reading global memory."""
    C = s["C"]
    jo, ji = C.split(C.axes[1], factor=256)
    C.reorder(C.axes[0], jo, ji)
    C.bind(C.axes[0], "blockIdx.y")
    C.bind(jo, "blockIdx.x")
    C.bind(ji, "threadIdx.x")


def blocked_gemm(s, tile=16, bk=16):
    """Step 1: a tile x tile block of C per block, one output per thread accumulated in a
    register (C.local); per K step of ``bk``, the A and B tiles copied into shared memory."""
    C = s["C"]
    if not fits(C, tile, bk, tile):       # a dimension of size 1: see fits()
        return native_gemm(s)
    CL = s.cache_write(C, "local")
    AA, BB = s.cache_read("A", "shared", [CL]), s.cache_read("B", "shared", [CL])
    by, bx, ty, tx = C.tile(C.axes[0], C.axes[1], tile, tile)
    for ax, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y"),
                    (tx, "threadIdx.x")):
        C.bind(ax, tag)
    CL.compute_at(C, tx)
    ko, ki = CL.split(CL.reduce_axes[0], factor=bk)
    CL.reorder(ko, ki, *CL.axes)
    for X in (AA, BB):
        X.compute_at(CL, ko)
        coop_copy(X, tile, tile)


def tiled(block=128, bk=8, threads=16, vthreads=1, vec=1, stages=1, unroll=True):
    """Steps 2-5 (a schedule factory): ``block`` x ``block`` tiles of C per block over
    ``threads`` x ``threads`` threads, each accumulating (block/threads)^2 outputs in C.local;
    per K step of ``bk``, A and B tiles in shared memory (copied by all threads, ``vec``
    elements per access) and, per k, the thread's slices of them in registers.  ``vthreads``
    > 1: each thread's outputs spread as vthreads x vthreads virtual threads (vthread.y/x
    outermost: the seed's warp tiling); ``stages`` >= 2: the shared tiles multi-buffered."""
    per = block // threads

    def sched(s):
        C = s["C"]
        if not fits(C, block, bk, threads, vec):
            return native_gemm(s)
        CL = s.cache_write(C, "local")
        AA, BB = s.cache_read("A", "shared", [CL]), s.cache_read("B", "shared", [CL])
        AL, BL = s.cache_read(AA, "local", [CL]), s.cache_read(BB, "local", [CL])
        by, bx, yi, xi = C.tile(C.axes[0], C.axes[1], block, block)
        if vthreads > 1:
            vy, yi = C.split(yi, nparts=vthreads)
            ty, yi = C.split(yi, nparts=threads)
            vx, xi = C.split(xi, nparts=vthreads)
            tx, xi = C.split(xi, nparts=threads)
            C.reorder(by, bx, vy, vx, ty, tx, yi, xi)
            C.bind(vy, "vthread.y")
            C.bind(vx, "vthread.x")
        else:
            ty, yi = C.split(yi, factor=per)
            tx, xi = C.split(xi, factor=per)
            C.reorder(by, bx, ty, tx, yi, xi)
        for ax, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y"),
                        (tx, "threadIdx.x")):
            C.bind(ax, tag)
        CL.compute_at(C, tx)
        ko, ki = CL.split(CL.reduce_axes[0], factor=bk)
        CL.reorder(ko, ki, *CL.axes)
        if unroll:
            CL.unroll(ki)
        AL.compute_at(CL, ki)
        BL.compute_at(CL, ki)
        if vec > 1:        # the thread's B slice: consecutive words of a shared row
            BL.vectorize(BL.axes[-1])
        # a K of one tile (a constant k <= bk, e.g. an array of one column) has no K loop
        # left to overlap copies with: kdsl refuses to pipeline it
        piped = stages > 1 and not (const_extent(CL.reduce_axes[0]) or bk + 1) <= bk
        for X in (AA, BB):
            X.compute_at(CL, ko)
            coop_copy(X, threads, threads, vec)
            if piped and stages == 2:
                X.double_buffer()
            elif piped:
                X.pipeline(stages)
    return sched


thread_tiling = tiled()
wrap_tiling = tiled(vthreads=2)
vectorize = tiled(vthreads=2, vec=4)
double_buffer = tiled(vthreads=2, vec=4, stages=2)


def tensor_cores(warps=(2, 2), tiles=(2, 2), stages=1):
    """The tensor-core step (a schedule factory): ``warps`` (y, x) warps per block
    (threadIdx.z / threadIdx.y; threadIdx.x is the warp's 32 lanes), each computing ``tiles``
    (y, x) 16x16 tiles of C in float32 accumulator fragments; per K step of 16 the A and B
    tiles staged in shared memory by every thread (``stages`` >= 2: rings filled by
    cp.async), then loaded into matrix_a / matrix_b fragments."""
    wy, wx = warps
    ty, tx = tiles
    lanes = 32 * wy * wx

    def sched(s):
        w = kd.intrin.wmma(16, 16, 16)
        C = s["C"]
        CF = s.cache_write(C, "wmma.accumulator")
        AF = s.cache_read("A", "wmma.matrix_a", [CF])
        BF = s.cache_read("B", "wmma.matrix_b", [CF])
        bi, bj, ii, jj = C.tile(C.axes[0], C.axes[1], 16 * wy * ty, 16 * wx * tx)
        wi, ti = C.split(ii, factor=16 * ty)
        wj, tj = C.split(jj, factor=16 * tx)
        tio, tii = C.split(ti, factor=16)
        tjo, tji = C.split(tj, factor=16)
        C.reorder(bi, bj, wi, wj, tio, tjo, tii, tji)
        C.bind(bi, "blockIdx.y")
        C.bind(bj, "blockIdx.x")
        C.bind(wi, "threadIdx.z")
        C.bind(wj, "threadIdx.y")
        CF.compute_at(C, wj)
        ci, cj = CF.axes
        cio, cii = CF.split(ci, factor=16)
        cjo, cji = CF.split(cj, factor=16)
        ko, ki = CF.split(CF.reduce_axes[0], factor=16)
        CF.reorder(ko, cio, cjo, cii, cji, ki)
        AF.compute_at(CF, ko)
        BF.compute_at(CF, ko)
        ao, ai = AF.split(AF.axes[0], factor=16)
        AF.reorder(ao, ai, AF.axes[1])
        AF.tensorize(ai, w)
        bo, bi_ = BF.split(BF.axes[1], factor=16)
        BF.reorder(bo, BF.axes[0], bi_)
        BF.tensorize(BF.axes[0], w)
        CF.tensorize(cii, w)
        C.tensorize(tii, w)
        for src, F in (("A", AF), ("B", BF)):
            X = s.cache_read(src, "shared", [F])
            X.compute_at(CF, ko)
            f = X.fuse(*X.axes)
            _, t = X.split(f, factor=lanes)
            z, t = X.split(t, factor=32 * wx)
            y, x = X.split(t, factor=32)
            X.bind(z, "threadIdx.z")
            X.bind(y, "threadIdx.y")
            X.bind(x, "threadIdx.x")
            if stages == 2:
                X.double_buffer()
            elif stages > 2:
                X.pipeline(stages)
    return sched


tensor_core = tensor_cores()


def wgmma(bm=128, bn=256, bk=64, stages=4):
    """The Hopper step: each warp multiplies its 16 rows of A by the block's B tile with
    ``kd.intrin.wgmma`` (four warps = one warpgroup instruction), both tiles read from shared
    memory (kdsl swizzles them for the tensor cores); padded tiles, so edges need no tests."""
    warps = bm // 16

    def sched(s):
        w = kd.intrin.wgmma(bn)
        C = s["C"]
        CF = s.cache_write(C, "wmma.accumulator")
        bi, bj, ii, jj = C.tile(C.axes[0], C.axes[1], bm, bn)
        wi, ti = C.split(ii, factor=16)
        C.reorder(bi, bj, wi, ti, jj)
        C.bind(bi, "blockIdx.y")
        C.bind(bj, "blockIdx.x")
        C.bind(wi, "threadIdx.y")
        CF.compute_at(C, wi)
        ci, cj = CF.axes
        ko, kr = CF.split(CF.reduce_axes[0], factor=bk)
        kio, ki = CF.split(kr, factor=16)
        CF.reorder(ko, kio, ci, cj, ki)
        CF.unroll(kio)
        CF.tensorize(ci, w)
        C.tensorize(ti, w)
        for src in ("A", "B"):
            X = s.cache_read(src, "shared", [CF], pad=True)
            X.compute_at(CF, ko)
            col, v = X.split(X.axes[-1], factor=8)
            f = X.fuse(X.axes[0], col)
            _, t = X.split(f, factor=32 * warps)
            y, x = X.split(t, factor=32)
            X.bind(y, "threadIdx.y")
            X.bind(x, "threadIdx.x")
            X.vectorize(v)
            X.pipeline(stages)
    return sched


hopper = wgmma()

#: the ladder: step name -> (kernel function, schedule, input dtype)
STEPS = {
    "native_gemm": (matmul, native_gemm, np.float32),
    "blocked_gemm": (matmul, blocked_gemm, np.float32),
    "thread_tiling": (matmul, thread_tiling, np.float32),
    "wrap_tiling": (matmul, wrap_tiling, np.float32),
    "vectorize": (matmul, vectorize, np.float32),
    "double_buffer": (matmul, double_buffer, np.float32),
    "tensor_core": (matmul16, tensor_core, np.float16),
    "wgmma": (matmul16, hopper, np.float16),
}


def kernel(step: str):
    """The kdsl kernel of one ladder step: the matmul with that step's cuda schedule."""
    fn, sched, _ = STEPS[step]
    return kd.kernel(kd.schedule("cuda", sched)(fn))


# ----------------------------------------------------------------- --check (no GPU)
CHECK_SHAPES = [(256, 32, 256), (130, 20, 129), (1, 1, 1), (3, 1, 200), (200, 7, 1), (0, 3, 5),
                (7, 0, 9)]
#: the tensor-core step: kdsl specialises a dimension of 1 to a constant, whose split by 16 is
#: one iteration, which a 16x16x16 tile cannot tensorize (a ScheduleError): no 1s here
CHECK_SHAPES_TC = [(128, 48, 64), (130, 20, 129), (17, 3, 33), (0, 3, 5), (7, 0, 9)]


def check_step(step: str, shapes=None, seed=None) -> list[str]:
    """Run ``step`` on ``interp-cuda`` over ``shapes`` (n, k, m; default CHECK_SHAPES) against
    numpy in float64; the problems found (empty: all correct)."""
    if shapes is None:
        shapes = CHECK_SHAPES_TC if step in ("tensor_core", "wgmma") else CHECK_SHAPES
    k = kernel(step)
    dtype = STEPS[step][2]
    rng = np.random.default_rng(seed)
    bad = []
    for nn, kk, mm in shapes:
        a = rng.standard_normal((nn, kk)).astype(dtype)
        b = rng.standard_normal((kk, mm)).astype(dtype)
        got = np.asarray(k(a, b, backend="interp-cuda"))
        want = a.astype(np.float64) @ b.astype(np.float64)
        if got.shape != want.shape or got.dtype != np.float32:
            bad.append(f"{nn}x{kk}x{mm}: {got.dtype}{got.shape}, expected float32{want.shape}")
        elif not np.allclose(got, want, rtol=1e-4, atol=1e-4 * max(1.0, np.sqrt(kk))):
            err = float(np.abs(got - want).max()) if got.size else 0.0
            bad.append(f"{nn}x{kk}x{mm}: max error {err:.3g}")
    return bad


def check_mode(steps) -> int:
    failed = 0
    for step in steps:
        t0 = time.perf_counter()
        try:
            bad = check_step(step)
        except Exception as e:      # a step that does not lower is a failure too
            bad = [f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}"]
        failed += bool(bad)
        print(f"{step:<14} {'ok' if not bad else 'WRONG: ' + '; '.join(bad)} "
              f"(interp-cuda, {time.perf_counter() - t0:.1f} s)", flush=True)
    return 1 if failed else 0


# ----------------------------------------------------------------- GPU run
def gpu_ms(fn, budget_ms=1500.0):
    """Median milliseconds of ``fn()`` over CUDA-event-timed batches (after a warm-up)."""
    import torch
    fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    fn()
    e.record()
    e.synchronize()
    est = max(s.elapsed_time(e), 1e-3)
    inner = max(1, min(100, int(20.0 / est)))
    reps = max(1, min(7, int(budget_ms / (est * inner))))
    per = []
    for _ in range(reps):
        s.record()
        for _ in range(inner):
            fn()
        e.record()
        e.synchronize()
        per.append(s.elapsed_time(e) / inner)
    return statistics.median(per)


def run_size(size: int, steps, gen) -> list[dict]:
    """Every step at size^3 against cuBLAS: one row each (ms, TFLOP/s, % of cuBLAS)."""
    import torch
    flops = 2.0 * size ** 3
    rows = []
    inputs = {}
    for dtype in (np.float32, np.float16):
        if not any(STEPS[s][2] is dtype for s in steps):
            continue
        tdt = torch.float32 if dtype is np.float32 else torch.float16
        a = torch.randn(size, size, generator=gen, device="cuda").to(tdt)
        b = torch.randn(size, size, generator=gen, device="cuda").to(tdt)
        want = torch.matmul(a.float(), b.float())          # float32 cuBLAS, TF32 off
        # the peer: cuBLAS on the same inputs (float16: float16 out, float32 accumulation)
        inputs[dtype] = (a, b, want, gpu_ms(lambda a=a, b=b: torch.mm(a, b)))
    for step in steps:
        a, b, want, cublas_ms = inputs[STEPS[step][2]]
        row = {"step": step, "size": size, "cublas_ms": cublas_ms}
        out = torch.full((size, size), float("nan"), device="cuda")
        try:
            k = kernel(step)
            k(a, b, out=out)
            torch.cuda.synchronize()
            err = float((out.double() - want.double()).abs().max() / want.abs().max())
            if not err <= 1e-3:
                raise AssertionError(f"wrong result: max error {err:.3g} of the largest value")
            ms = gpu_ms(lambda: k(a, b, out=out))
            row.update(ms=ms, tflops=flops / ms / 1e9, pct=100.0 * cublas_ms / ms, err=err)
        except Exception as e:
            row["error"] = f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}"[:200]
            torch.cuda.synchronize()
        rows.append(row)
        print_row(row)
    return rows


def print_row(row):
    head = f"{row['step']:<14} {row['size']:>6}^3"
    if "ms" in row:
        print(f"{head} {row['ms']:>10.3f} ms {row['tflops']:>7.2f} TFLOP/s "
              f"{row['pct']:>6.1f}% of cuBLAS ({row['cublas_ms']:.3f} ms)", flush=True)
    else:
        print(f"{head} FAILED: {row['error']}", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true",
                    help="no GPU: every step on interp-cuda at small sizes against numpy")
    ap.add_argument("--big", action="store_true", help="also time at 16384^3 (the seed's size)")
    ap.add_argument("--size", type=int, default=4096, help="the n = k = m timed (default 4096)")
    ap.add_argument("--only", default="", help="comma-separated steps: " + ",".join(STEPS))
    args = ap.parse_args(argv)
    steps = [s.strip() for s in args.only.split(",") if s.strip()] or list(STEPS)
    unknown = [s for s in steps if s not in STEPS]
    if unknown:
        ap.error(f"unknown step(s) {', '.join(unknown)}; the steps: {', '.join(STEPS)}")
    if args.check:
        return check_mode(steps)
    try:
        import torch
    except ImportError:
        sys.exit("gemm_ladder.py: the GPU run needs PyTorch with CUDA (--check runs without)")
    if not torch.cuda.is_available():
        sys.exit("gemm_ladder.py: torch finds no CUDA device (--check runs without one)")
    if "cuda" not in kd.backends():
        import kdsl_cuda
        kd.register_backend("cuda", kdsl_cuda.backend)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    gen = torch.Generator(device="cuda").manual_seed(0)
    print(f"# the seed-002 ladder on {torch.cuda.get_device_name()}; cuBLAS through torch "
          f"{torch.__version__} (TF32 off); float16 steps against torch.mm on float16")
    rows = run_size(args.size, steps, gen)
    if args.big:
        rows += run_size(16384, steps, gen)
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
