"""Issue 29 (b): kdsl on Dask with CuPy chunks on a dask_cuda.LocalCUDACluster (one worker per
GPU), helper dask29.  Self-checking; JSON to --json.  Run through .devrun/dask/gpu2.sh.

1. correctness of each mapping on CuPy chunks on 2 GPUs, against numpy float64: blockwise with
   broadcasting, tree reductions (sum, mean's epilogue, argmax: partials of several values),
   a stencil with a halo, a same-shaped stencil with edge guards, a row-wise softmax (rows
   whole: blockwise; rows split: staged), var, a contraction over a chunked K; the result
   must be CuPy (meta and computed), and the tasks must have run on both GPUs;
2. 1 GPU against 2 GPUs on workloads that fit one GPU, arrays generated chunk by chunk on the
   GPUs and kept there (each GPU its share): a blockwise matmul (row blocks of X times a W
   every worker holds), a row-wise softmax, a 3x3 box stencil (halos cross GPUs); kdsl chunks against CuPy chunks
   under the same graph (cuBLAS for the matmul); median of --repeat after a warm run;
3. an array larger than one GPU's memory (--big-frac x one GPU's memory, generated on the
   GPUs, persisted across both, never on a host): kdsl row-wise softmax, rowsum and box3x3
   over it, each reduced by .sum(), checked against CuPy float64 per chunk; where the chunks
   and the GPU memory went.  Spilling to host is off (device_memory_limit=None): a kernel
   that does not fit fails instead of copying to the host.

--dry-run: the same on numpy chunks, a distributed.LocalCluster and the cpu backend, tiny
sizes (to check the script where there is no GPU).
"""
import argparse
import json
import statistics
import sys
import time
import traceback

import numpy as np

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
def argmax1(A):
    return np.argmax(A, axis=1)


@kd.kernel
def box3(A):
    n, m = A.shape
    return kd.compute((n - 2, m - 2),
                      lambda i, j: A[i, j] + A[i + 1, j + 1] * 2.0 + A[i + 2, j + 2])


@kd.kernel
def box3x3(A):
    n, m = A.shape
    return kd.compute((n - 2, m - 2), lambda i, j: (
        A[i, j] + A[i, j + 1] + A[i, j + 2] + A[i + 1, j] + A[i + 1, j + 1] + A[i + 1, j + 2]
        + A[i + 2, j] + A[i + 2, j + 1] + A[i + 2, j + 2]))


@kd.kernel
def laplace2(A):
    n, m = A.shape
    return kd.compute((n, m), lambda i, j: kd.where(
        (i > 0) & (i < n - 1) & (j > 0) & (j < m - 1),
        A[i - 1, j] + A[i + 1, j] + A[i, j - 1] + A[i, j + 1] - 4 * A[i, j], 0.0))


@kd.kernel
def softmax(A):
    e = np.exp(A - A.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@kd.kernel
def var1(A):
    return A.var(axis=1)


@kd.kernel
def matmul(A, B):
    return A @ B


# ------------------------------------------------------------------ chunks made on the workers
def _gen(seed, flat, shape, dtype, xp_name):
    """A chunk of uniform [0, 1) numbers made where the task runs (on its GPU for CuPy),
    seeded by the chunk's number: the same array on any cluster."""
    import importlib
    xp = importlib.import_module(xp_name)
    return xp.random.default_rng(seed * 1000003 + flat).random(shape, dtype=dtype)


def placed(client, shape, chunks, seed, xp_name, dtype=np.float32):
    """A dask array whose chunks are generated on the workers and kept there, in contiguous
    runs of chunks per worker (row-major: the halos of a stencil cross workers only at the
    runs' edges), each worker holding its share (Dask's own placement of root tasks can give
    one worker most of them).  Nothing is held by the client."""
    import dask.array as da
    import importlib
    from dask.array.core import normalize_chunks
    xp = importlib.import_module(xp_name)
    ch = normalize_chunks(chunks, shape, dtype=np.dtype(dtype))
    workers = sorted(client.scheduler_info()["workers"])
    nb = tuple(len(c) for c in ch)
    total = int(np.prod(nb))
    meta = xp.empty((0,) * len(shape), dtype=dtype)
    blocks = np.empty(nb, dtype=object)
    for flat, loc in enumerate(np.ndindex(*nb)):
        cs = tuple(c[i] for c, i in zip(ch, loc))
        w = workers[flat * len(workers) // total]
        f = client.submit(_gen, seed, flat, cs, np.dtype(dtype), xp_name, workers=[w],
                          allow_other_workers=False, pure=False)
        blocks[loc] = da.from_delayed(f, shape=cs, dtype=dtype, meta=meta)
    # persisted: the graph's own keys hold the chunks, on the workers that made them (a graph
    # over the from_delayed wrappers would copy each chunk to a new key on one worker: a
    # replicated W then lived on one worker only, and every other worker fetched it through
    # the host before its first product -- session 21's diagnosis, .devrun/dask/diag2.py)
    from distributed import wait
    arr = da.block(blocks.tolist()).persist()
    wait(client.futures_of(arr))
    return arr


def _np_box(b):
    return (b[:-2, :-2] + b[:-2, 1:-1] + b[:-2, 2:] + b[1:-1, :-2] + b[1:-1, 1:-1]
            + b[1:-1, 2:] + b[2:, :-2] + b[2:, 1:-1] + b[2:, 2:])


def _xp_softmax(b):
    e = np.exp(b - b.max(axis=1, keepdims=True))       # numpy functions dispatch to CuPy
    return e / e.sum(axis=1, keepdims=True)


def _box_graph(X, fn, dtype):
    """``fn`` on X's blocks extended by a halo of 2 after each (kdsl.dask's stencil graph)."""
    import dask.array as da
    from dask.array.overlap import overlap
    ext = overlap(X, depth={0: (0, 2), 1: (0, 2)}, boundary="none")
    chunks = tuple(c[:-1] + (c[-1] - 2,) for c in X.chunks)
    return da.map_blocks(fn, ext, chunks=chunks, dtype=dtype)


def _f64_box(b):
    """The box sum in float64 with one temporary (the big array's blocks are ~1 GB)."""
    n, m = b.shape
    acc = b[:-2, :-2].astype(np.float64)
    for di in range(3):
        for dj in range(3):
            if di or dj:
                acc += b[di:n - 2 + di, dj:m - 2 + dj]
    return acc


# ------------------------------------------------------------------ the parts
def _host(v):
    return v.get() if hasattr(v, "get") else np.asarray(v)


def correctness(client, xp, backend, res):
    """Each mapping on chunks of ``xp`` arrays, against numpy float64."""
    import dask.array as da
    from distributed import get_task_stream
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1000, 700)).astype(np.float32)
    y = rng.standard_normal(700).astype(np.float32)
    b = rng.standard_normal((700, 300)).astype(np.float32)
    X = da.from_array(xp.asarray(x), chunks=(256, 300), asarray=False)
    Xr = da.from_array(xp.asarray(x), chunks=(256, 700), asarray=False)     # rows whole
    Xu = da.from_array(xp.asarray(x), chunks=((100, 1, 899), (350, 0, 350)), asarray=False)
    Y = da.from_array(xp.asarray(y), chunks=300, asarray=False)
    B = da.from_array(xp.asarray(b), chunks=(300, 150), asarray=False)
    x64, y64, b64 = (v.astype(np.float64) for v in (x, y, b))
    e = np.exp(x64 - x64.max(1, keepdims=True))
    lap = np.zeros_like(x64)
    lap[1:-1, 1:-1] = (x64[:-2, 1:-1] + x64[2:, 1:-1] + x64[1:-1, :-2] + x64[1:-1, 2:]
                       - 4 * x64[1:-1, 1:-1])
    be = backend
    cases = [
        ("axpy: blockwise, broadcast", lambda: axpy(2.0, X, Y, backend=be), 2 * x64 + y64),
        ("axpy: the backend picked from the chunks", lambda: axpy(2.0, X, Y), 2 * x64 + y64),
        ("rowsum: tree", lambda: rowsum(X, backend=be), x64.sum(1)),
        ("rowsum: tree, uneven and empty chunks", lambda: rowsum(Xu, backend=be), x64.sum(1)),
        ("colmean: tree + epilogue", lambda: colmean(X, backend=be), x64.mean(0)),
        ("argmax: tree of (value, index) partials (byte records)",
         lambda: argmax1(X, backend=be), x64.argmax(1)),
        ("box3: stencil, halo after each block", lambda: box3(X, backend=be),
         x64[:-2, :-2] + 2 * x64[1:-1, 1:-1] + x64[2:, 2:]),
        ("laplace2: same-shaped stencil, edge guards", lambda: laplace2(X, backend=be), lap),
        ("softmax: rows whole (blockwise)", lambda: softmax(Xr, backend=be),
         e / e.sum(1, keepdims=True)),
        ("softmax: rows split (staged)", lambda: softmax(X, backend=be),
         e / e.sum(1, keepdims=True)),
        ("var: staged", lambda: var1(X, backend=be), x64.var(1)),
        ("matmul: contraction over chunked K", lambda: matmul(X, B, backend=be), x64 @ b64),
    ]
    out = []
    with get_task_stream() as ts:
        for name, fn, ref in cases:
            r = {"case": name}
            try:
                arr = fn()
                r["meta"] = type(arr._meta).__module__.split(".")[0]
                v = arr.compute()
                r["result"] = type(v).__module__.split(".")[0]
                v = _host(v)
                err = float(np.max(np.abs(v - ref) / (1 + np.abs(ref)))) if v.size else 0.0
                r["max_rel_err"] = err
                r["ok"] = bool(v.shape == ref.shape and err < 1e-4
                               and r["result"] == xp.__name__ and r["meta"] == xp.__name__)
            except Exception as ex:     # noqa: BLE001
                r["ok"] = False
                r["error"] = f"{type(ex).__name__}: {ex}"[:500]
                r["traceback"] = traceback.format_exc()[-2500:]
            out.append(r)
            print(f"  {'OK  ' if r['ok'] else 'FAIL'} {name}: "
                  + (f"err {r['max_rel_err']:.1e}, meta {r['meta']}, result {r['result']}"
                     if "max_rel_err" in r else r.get("error", "")), flush=True)
    per = {}
    for t in ts.data:
        per[t["worker"]] = per.get(t["worker"], 0) + 1
    res["correctness"] = out
    res["correctness_tasks_per_worker"] = per
    print(f"  tasks per worker: {sorted(per.values())}")


def _time(fn, repeat):
    v = fn()
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts), float(v)


def speed(client, xp, backend, sz, repeat, res, key):
    """The workloads that fit one GPU: kdsl chunks and ``xp`` chunks, seconds."""
    from distributed import wait
    xn = xp.__name__
    be = backend
    out = {}
    rows, K, rc = sz["mm_rows"], sz["mm_k"], sz["mm_chunk"]
    X = placed(client, (rows, K), (rc, K), 1, xn)
    W = placed(client, (K, K), (K, K), 2, xn)
    wait(client.futures_of(W))
    client.replicate(client.futures_of(W))          # every worker holds W (no transfer timed)
    nw = len(client.scheduler_info()["workers"])
    held = set(sum(client.who_has(client.futures_of(W)).values(), ()))
    if len(held) < nw:      # replicate left it on fewer workers: broadcast a scattered copy
        import dask.array as da
        w = W.compute()
        fut = client.scatter(w, broadcast=True)
        W = da.from_delayed(fut, shape=w.shape, dtype=w.dtype, meta=w[:0, :0])
        wait(fut)
        held = set(sum(client.who_has([fut]).values(), ()))
    print(f"  {key} W held by {len(held)} of {nw} workers", flush=True)
    S = placed(client, (sz["rows"], sz["cols"]), (sz["row_chunk"], sz["cols"]), 3, xn)
    Q = placed(client, (sz["box"], sz["box"]), (sz["box_chunk"],) * 2, 4, xn)
    wait(client.futures_of(X) + client.futures_of(S) + client.futures_of(Q))
    cases = {
        "matmul_blockwise": (lambda: matmul(X, W, backend=be).sum().compute(),
                             lambda: (X @ W).sum().compute(), 2.0 * rows * K * K),
        "softmax": (lambda: softmax(S, backend=be).sum().compute(),
                    lambda: S.map_blocks(_xp_softmax).sum().compute(), None),
        "box3x3": (lambda: box3x3(Q, backend=be).sum().compute(),
                   lambda: _box_graph(Q, _np_box, np.float32).sum().compute(), None),
    }
    from distributed import get_task_stream
    for name, (fk, fc, flop) in cases.items():
        try:
            with get_task_stream() as ts:
                tk, vk = _time(fk, repeat)
            per = {}
            for t in ts.data:
                w = str(t.get("worker"))[-5:]
                k = str(t.get("key"))
                prefix = (k.split("'")[1] if "'" in k else k).rsplit("-", 1)[0][:28]
                busy = sum(s["stop"] - s["start"] for s in t.get("startstops", ())
                           if s.get("action") == "compute")
                n, b = per.get((prefix, w), (0, 0.0))
                per[(prefix, w)] = (n + 1, b + busy)
            # GPU launches are asynchronous: "compute" is launch time plus waits, not GPU time
            print(f"  {key} {name}: kdsl tasks (count, seconds) per task prefix and worker: "
                  + "; ".join(f"{p} @{w} {n} {b:.2f}s" for (p, w), (n, b) in sorted(per.items())),
                  flush=True)
            tc, vc = _time(fc, repeat)
            ok = abs(vk - vc) <= 1e-3 * max(abs(vk), abs(vc), 1.0)
            out[name] = {"kdsl_s": tk, "xp_s": tc, "kdsl_value": vk, "xp_value": vc, "ok": ok}
            if flop:
                out[name]["kdsl_tflops"] = flop / tk / 1e12
                out[name]["xp_tflops"] = flop / tc / 1e12
            print(f"  {key} {name:16s}: kdsl {tk:7.3f} s  {xn} {tc:7.3f} s  kdsl/{xn} "
                  f"{tc / tk:5.2f}x{'' if ok else '  RESULTS DISAGREE'}", flush=True)
        except Exception as ex:     # noqa: BLE001
            out[name] = {"error": f"{type(ex).__name__}: {ex}"[:500],
                         "traceback": traceback.format_exc()[-2500:]}
            print(f"  {key} {name}: FAILED {out[name]['error']}", flush=True)
    res.setdefault("speed", {})[key] = out
    # the inputs go before the next part (their memory back to each worker's CuPy pool, then
    # to the device)
    client.cancel(client.futures_of(X) + client.futures_of(W) + client.futures_of(S)
                  + client.futures_of(Q))
    time.sleep(1.0)
    client.run(_free_pool)


def _worker_mem():
    """This worker's device memory: CuPy pool in use, the device's used bytes; the chunks."""
    out = {}
    try:
        import cupy
        free, total = cupy.cuda.runtime.memGetInfo()
        out.update(pool_used=cupy.get_default_memory_pool().used_bytes(),
                   device_used=total - free, device_total=total)
    except Exception as ex:     # noqa: BLE001
        out["error"] = repr(ex)
    return out


def _free_pool():
    """Frees the CuPy pool's cached blocks (chunks of many shapes would fragment it)."""
    try:
        import cupy
        cupy.get_default_memory_pool().free_all_blocks()
    except ImportError:
        pass


def _worker_data(dask_worker):
    """Bytes and kinds of the data this worker holds (device arrays stay on the device)."""
    kinds, nbytes = {}, 0
    for v in dask_worker.data.values():
        k = type(v).__module__.split(".")[0]
        kinds[k] = kinds.get(k, 0) + 1
        nbytes += getattr(v, "nbytes", 0)
    return {"store": type(dask_worker.data).__name__, "kinds": kinds, "nbytes": nbytes}


def big(client, xp, backend, sz, res):
    """An array larger than one GPU's memory, persisted across the GPUs, kdsl over it."""
    from distributed import wait
    xn = xp.__name__
    be = backend
    cols, rc = sz["big_cols"], sz["big_row_chunk"]
    rows = max(1, int(sz["big_bytes"] // (4 * cols * rc))) * rc
    out = {"shape": [rows, cols], "chunk": [rc, cols], "gb": rows * cols * 4 / 1e9,
           "one_gpu_gb": sz["gpu_bytes"] / 1e9}
    print(f"  big: {out['gb']:.1f} GB float32 ({rows} x {cols}, chunks {rc} x {cols}) against "
          f"{out['one_gpu_gb']:.1f} GB of one GPU", flush=True)
    t = time.perf_counter()
    R = placed(client, (rows, cols), (rc, cols), 5, xn)
    wait(client.futures_of(R))
    out["generate_s"] = time.perf_counter() - t
    out["worker_memory"] = client.run(_worker_mem)
    out["worker_data"] = client.run(_worker_data)
    for w, m in out["worker_memory"].items():
        print(f"    {w}: device used {m.get('device_used', 0) / 1e9:.1f} GB, "
              f"data {out['worker_data'][w]}", flush=True)
    cases = [
        ("softmax", lambda: softmax(R, backend=be).sum().compute(), lambda: float(rows)),
        ("rowsum", lambda: rowsum(R, backend=be).sum().compute(),
         lambda: R.map_blocks(lambda b: b.astype(np.float64), dtype=np.float64).sum().compute()),
        ("box3x3", lambda: box3x3(R, backend=be).sum().compute(),
         lambda: _box_graph(R, _f64_box, np.float64).sum().compute()),
    ]
    for name, fk, fref in cases:
        client.run(_free_pool)
        try:
            t = time.perf_counter()
            vk = float(fk())
            tk = time.perf_counter() - t
            t = time.perf_counter()
            vr = float(fref())
            tr = time.perf_counter() - t
            err = abs(vk - vr) / max(abs(vr), 1.0)
            out[name] = {"kdsl_s": tk, "ref_s": tr, "kdsl_value": vk, "ref_value": vr,
                         "rel_err": err, "ok": err < 1e-3}
            print(f"    {'OK  ' if err < 1e-3 else 'FAIL'} {name}: kdsl {tk:.2f} s "
                  f"({out['gb'] / tk:.0f} GB/s), rel err {err:.1e} against {xn} float64",
                  flush=True)
        except Exception as ex:     # noqa: BLE001
            out[name] = {"ok": False, "error": f"{type(ex).__name__}: {ex}"[:500],
                         "traceback": traceback.format_exc()[-2500:]}
            print(f"    FAIL {name}: {out[name]['error']}", flush=True)
    out["worker_memory_after"] = client.run(_worker_mem)
    res["big"] = out


def gpu_nannies(n):
    """What LocalCUDACluster makes, without dask-cuda: one worker process per GPU (its own
    CUDA_VISIBLE_DEVICES), one thread each, no spilling of device memory."""
    from distributed import Nanny, Scheduler, SpecCluster
    workers = {f"gpu{i}": {"cls": Nanny, "options": {
        "nthreads": 1, "env": {"CUDA_VISIBLE_DEVICES": ",".join(
            str((i + j) % n) for j in range(n))}}} for i in range(n)}
    return SpecCluster(scheduler={"cls": Scheduler, "options": {"dashboard_address": None}},
                       workers=workers)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--big-frac", type=float, default=1.2,
                    help="the big array's size as a multiple of one GPU's memory")
    ap.add_argument("--skip", default="", help="parts to skip: correctness,speed,big")
    ap.add_argument("--nannies", action="store_true", help="with --dry-run: the per-GPU "
                    "nannies cluster (what runs when LocalCUDACluster fails)")
    ap.add_argument("--mm-k", type=int, default=4096, help="the matmul's K (and N): 16384 makes "
                    "each task ~4 TFLOP, so that the GPUs, not Dask, set the time")
    ap.add_argument("--mm-blocks", type=int, default=64, help="row blocks of 8192 in the matmul")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    skip = set(args.skip.split(",")) - {""}
    import dask
    # replicas (W on every worker) stay: the active memory manager would drop them
    dask.config.set({"distributed.scheduler.active-memory-manager.start": False})
    from distributed import Client
    res = {"args": vars(args)}

    def save():
        if args.json:
            with open(args.json, "w") as f:
                json.dump(res, f, indent=1, default=str)
    if args.dry_run:
        from distributed import LocalCluster
        xp, backend, ngpu = np, "cpu", 2
        gpu_bytes = 64 << 20

        def cluster(n):
            if args.nannies:
                return gpu_nannies(n)
            return LocalCluster(n_workers=n, threads_per_worker=1, dashboard_address=None)
        sz = dict(mm_rows=4 * 256, mm_k=256, mm_chunk=256, rows=2048, cols=512, row_chunk=512,
                  box=1024, box_chunk=512)
    else:
        import cupy as xp
        from dask_cuda import LocalCUDACluster
        backend = "cuda"
        ngpu = xp.cuda.runtime.getDeviceCount()
        gpu_bytes = xp.cuda.Device(0).mem_info[1]
        res["gpus"] = [xp.cuda.runtime.getDeviceProperties(i)["name"].decode()
                       for i in range(ngpu)]

        def cluster(n):
            try:
                c = LocalCUDACluster(CUDA_VISIBLE_DEVICES=",".join(map(str, range(n))),
                                     device_memory_limit=None, dashboard_address=None)
                res["cluster"] = "LocalCUDACluster"
                return c
            except Exception as ex:     # noqa: BLE001
                res["cluster_error"] = traceback.format_exc()[-3000:]
                print(f"LocalCUDACluster failed ({type(ex).__name__}: {ex}): a cluster of "
                      "nannies with one GPU each instead", flush=True)
                res["cluster"] = "per-GPU nannies"
                return gpu_nannies(n)
        # matmul: 64 row blocks of 8192 x 4096 (8.6 GB) times 4096 x 4096; softmax and box:
        # 8.6 GB each in 1 GB chunks
        sz = dict(mm_rows=args.mm_blocks * 8192, mm_k=args.mm_k, mm_chunk=8192, rows=131072, cols=16384,
                  row_chunk=16384, box=46080, box_chunk=15360)
    sz.update(gpu_bytes=gpu_bytes, big_bytes=args.big_frac * gpu_bytes, big_cols=sz["cols"],
              big_row_chunk=sz["row_chunk"])
    res.update(backend=backend, gpu_count=ngpu, one_gpu_bytes=gpu_bytes, sizes=sz)
    import dask as _d
    import distributed as _di
    res["versions"] = {"dask": _d.__version__, "distributed": _di.__version__,
                       "numpy": np.__version__, "xp": getattr(xp, "__version__", "")}
    print(f"{ngpu} GPU(s) {res.get('gpus', '')}, {gpu_bytes / 1e9:.1f} GB each; "
          f"{res['versions']}", flush=True)
    n2 = min(2, ngpu)
    t0 = time.perf_counter()
    with cluster(n2) as cl, Client(cl) as client:
        res["workers"] = n2
        print(f"LocalCluster of {n2} workers up in {time.perf_counter() - t0:.1f} s", flush=True)
        if "correctness" not in skip:
            print(f"correctness on {n2} workers:", flush=True)
            correctness(client, xp, backend, res)
            save()
        if "speed" not in skip:
            print(f"speed on {n2} GPUs:", flush=True)
            speed(client, xp, backend, sz, args.repeat, res, f"{n2}gpu")
            save()
        if "big" not in skip and n2 > 1:
            print("larger than one GPU:", flush=True)
            big(client, xp, backend, sz, res)
            save()
    if "speed" not in skip and n2 > 1:
        with cluster(1) as cl, Client(cl) as client:
            print("speed on 1 GPU:", flush=True)
            speed(client, xp, backend, sz, args.repeat, res, "1gpu")
        one, two = res["speed"]["1gpu"], res["speed"][f"{n2}gpu"]
        print(f"\n{n2} GPUs over 1 (target >= 1.8x on a workload that fits one):")
        for name in two:
            if "kdsl_s" in one.get(name, {}) and "kdsl_s" in two[name]:
                two[name]["kdsl_speedup"] = one[name]["kdsl_s"] / two[name]["kdsl_s"]
                two[name]["xp_speedup"] = one[name]["xp_s"] / two[name]["xp_s"]
                print(f"  {name:16s}: kdsl {two[name]['kdsl_speedup']:5.2f}x   "
                      f"{xp.__name__} {two[name]['xp_speedup']:5.2f}x")
    bad = [c["case"] for c in res.get("correctness", []) if not c["ok"]]
    res["summary"] = {"correctness_failed": bad,
                      "unexpected_failures": [c for c in bad if "[known" not in c],
                      "big_ok": all(res.get("big", {}).get(k, {}).get("ok", False)
                                    for k in ("softmax", "rowsum", "box3x3"))}
    print(f"\ncorrectness failures: {bad or 'none'}; big array: "
          f"{'OK' if res['summary']['big_ok'] else 'FAILED or not run'}; "
          f"total {time.perf_counter() - t0:.0f} s")
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
