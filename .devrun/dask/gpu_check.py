"""kdsl on Dask with CuPy chunks (issue 29, GPU part): correctness against numpy float64, then
kdsl chunks against CuPy chunks under the same Dask graph.  Self-contained; run from the
repository root on a GPU host:

    python3 -m pip install -q ".[test]" ./kdsl_cpu ./kdsl_cuda cupy-cuda12x dask-cuda
    PYTHONPATH=. python3 .devrun/dask/gpu_check.py [--size 8192] [--chunk 2048]

Uses dask_cuda.LocalCUDACluster (one worker per GPU) when installed, else Dask's threaded
scheduler on GPU 0.  Prints one line per case: OK/FAIL, max error, and timings.
"""
import argparse
import sys
import time
import traceback

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=8192)
    ap.add_argument("--chunk", type=int, default=2048)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    try:
        import cupy as cp
        import dask
        import dask.array as da
    except ImportError as e:
        print("SKIP: needs cupy and dask[array]:", e)
        return 0
    import kdsl as kd

    @kd.kernel
    def axpy(a, x, y):
        return a * x + y

    @kd.kernel
    def rowsum(A):
        return A.sum(axis=1)

    @kd.kernel
    def colmean(A):
        return A.mean(axis=0)

    @kd.kernel
    def box3(A):
        n, m = A.shape
        return kd.compute((n - 2, m - 2), lambda i, j: A[i, j] + A[i + 1, j + 1] + A[i + 2, j + 2])

    @kd.kernel
    def softmax(A):
        e = np.exp(A - A.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    @kd.kernel
    def matmul(A, B):
        return A @ B

    client = None
    try:
        from dask_cuda import LocalCUDACluster
        from distributed import Client
        cluster = LocalCUDACluster()
        client = Client(cluster)
        print("LocalCUDACluster:", len(client.scheduler_info()["workers"]), "workers")
    except Exception as e:      # noqa: BLE001
        print("no dask_cuda cluster (", e, "): threaded scheduler on GPU 0")
        dask.config.set(scheduler="threads")
    rng = np.random.default_rng(0)
    n, c = 1000, 256
    x = rng.standard_normal((n, 700)).astype(np.float32)
    y = rng.standard_normal(700).astype(np.float32)
    b = rng.standard_normal((700, 300)).astype(np.float32)
    X = da.from_array(cp.asarray(x), chunks=(c, 300), asarray=False)
    Y = da.from_array(cp.asarray(y), chunks=300, asarray=False)
    Bd = da.from_array(cp.asarray(b), chunks=(300, 150), asarray=False)
    x64, b64 = x.astype(np.float64), b.astype(np.float64)
    e = np.exp(x64 - x64.max(1, keepdims=True))
    cases = [
        ("axpy", lambda: axpy(2.0, X, Y), 2 * x64 + y),
        ("rowsum (tree)", lambda: rowsum(X), x64.sum(1)),
        ("colmean (tree + epilogue)", lambda: colmean(X), x64.mean(0)),
        ("box3 (halo)", lambda: box3(X), x64[:-2, :-2] + x64[1:-1, 1:-1] + x64[2:, 2:]),
        ("softmax (rows whole)", lambda: softmax(X.rechunk((c, 700))), e / e.sum(1, keepdims=True)),
        ("matmul (contraction)", lambda: matmul(X, Bd), x64 @ b64),
    ]
    bad = 0
    for name, fn, ref in cases:
        try:
            r = fn()
            meta = type(r._meta).__module__
            v = r.compute()
            v = v.get() if hasattr(v, "get") else np.asarray(v)
            err = float(np.max(np.abs(v - ref) / (1 + np.abs(ref))))
            ok = err < 1e-3
            bad += not ok
            print(f"{'OK  ' if ok else 'FAIL'} {name}: max rel err {err:.2e}, meta {meta}, "
                  f"result {type(r.compute()).__module__}")
        except Exception:       # noqa: BLE001
            bad += 1
            print(f"FAIL {name}:")
            traceback.print_exc()
    # timings: kdsl chunks vs CuPy chunks under the same graph
    N, C = args.size, args.chunk
    A = da.random.default_rng(cp.random.default_rng(1)).standard_normal(
        (N, N), chunks=(C, C), dtype=np.float32).persist()
    R = A.rechunk((C, N)).persist()

    def cp_softmax(blk):
        e = cp.exp(blk - blk.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def tm(f):
        f()
        ts = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t)
        return sorted(ts)[len(ts) // 2]
    for name, fk, fc in [
            ("rowsum", lambda: float(rowsum(A).sum().compute()),
             lambda: float(A.sum(axis=1).sum().compute())),
            ("softmax", lambda: float(softmax(R).sum().compute()),
             lambda: float(R.map_blocks(cp_softmax).sum().compute())),
            ("matmul", lambda: float(matmul(A, A).sum().compute()),
             lambda: float((A @ A).sum().compute()))]:
        try:
            tk, tc = tm(fk), tm(fc)
            print(f"time {name}: kdsl {tk:.3f} s, cupy {tc:.3f} s, kdsl/cupy {tc / tk:.2f}x")
        except Exception:       # noqa: BLE001
            print(f"time {name}: FAILED")
            traceback.print_exc()
    if client is not None:
        client.close()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
