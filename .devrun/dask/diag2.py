"""Why 2 GPUs do not beat 1 under Dask (issue 29): where tasks run and which GPU is busy.

A. each worker: CUDA_VISIBLE_DEVICES, CuPy's device 0 PCI bus, kdsl's device name.
B. concurrency probe: a fixed GPU job (CuPy and kdsl matmuls, synchronised) on worker 0
   alone, worker 1 alone, both at once: do the two GPUs run in parallel?
C. the gpu2.py matmul graph (X placed half per worker, W on both), with per-task records
   (key, worker, start, stop) of the matmul tasks, and nvidia-smi sampling each GPU's
   utilisation every 100 ms during it.
"""
import os, subprocess, sys, time, json, threading
import numpy as np

def info():
    import cupy, kdsl_cuda
    from kdsl_cuda.runtime import driver
    p = cupy.cuda.runtime.getDeviceProperties(0)
    return {"pid": os.getpid(), "CVD": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "cupy_pci": f"{p['pciBusID']:02x}", "OMP": os.environ.get("OMP_NUM_THREADS")}

def job(kind, n, K):
    import cupy, kdsl as kd
    import gpu2
    a = cupy.random.default_rng(0).random((8192, K), dtype=cupy.float32)
    b = cupy.random.default_rng(1).random((K, K), dtype=cupy.float32)
    f = (lambda: a @ b) if kind == "cupy" else (lambda: gpu2.matmul(a, b, backend="cuda"))
    f(); cupy.cuda.Device().synchronize()
    t0 = time.time()
    for _ in range(n):
        f()
    cupy.cuda.Device().synchronize()
    t1 = time.time()
    return {"start": t0, "stop": t1, "s": t1 - t0, "pci": f"{cupy.cuda.runtime.getDeviceProperties(0)['pciBusID']:02x}"}

class Smi:
    def __init__(self, path):
        self.p = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,index,pci.bus_id,utilization.gpu,memory.used",
                                   "--format=csv,noheader", "-lms", "100"], stdout=open(path, "w"))
    def stop(self):
        self.p.terminate()

def main():
    out = sys.argv[1]
    K = int(sys.argv[2]) if len(sys.argv) > 2 else 16384
    import dask
    dask.config.set({"distributed.scheduler.active-memory-manager.start": False})
    from dask_cuda import LocalCUDACluster
    from distributed import Client, wait, get_task_stream
    import gpu2
    res = {}
    with LocalCUDACluster(CUDA_VISIBLE_DEVICES="0,1", device_memory_limit=None,
                          dashboard_address=None) as cl, Client(cl) as client:
        ws = sorted(client.scheduler_info()["workers"])
        res["info"] = client.run(info)
        print("A.", json.dumps(res["info"], indent=1), flush=True)
        smi = Smi(os.path.join(out, "smi.csv"))
        marks = []
        for kind in ("cupy", "kdsl"):
            for who in ([ws[0]], [ws[1]], ws):
                marks.append((f"B {kind} on {len(who)} workers {[w[-5:] for w in who]}", time.time()))
                futs = [client.submit(job, kind, 8, K, workers=[w], pure=False) for w in who]
                r = client.gather(futs)
                wall = max(x["stop"] for x in r) - min(x["start"] for x in r)
                line = f"B. {kind:4s} {len(who)} worker(s): " + ", ".join(
                    f"{w[-5:]} pci {x['pci']} {x['s']:.2f}s" for w, x in zip(who, r)) + f"; wall {wall:.2f}s"
                print(line, flush=True)
                res.setdefault("B", []).append(line)
        # C: the gpu2 matmul graph
        X = gpu2.placed(client, (32 * 8192, K), (8192, K), 1, "cupy")
        W = gpu2.placed(client, (K, K), (K, K), 2, "cupy")
        wait(client.futures_of(W)); client.replicate(client.futures_of(W))
        wait(client.futures_of(X))
        held = client.who_has(client.futures_of(X))
        per = {}
        for k, v in held.items():
            per[v[0][-5:] if v else None] = per.get(v[0][-5:] if v else None, 0) + 1
        print("C. X blocks per worker", per, "W on", client.who_has(client.futures_of(W)), flush=True)
        for kind, fn in (("kdsl", lambda: gpu2.matmul(X, W, backend="cuda").sum().compute()),
                         ("cupy", lambda: (X @ W).sum().compute())):
            fn()
            marks.append((f"C {kind}", time.time()))
            with get_task_stream() as ts:
                t0 = time.time(); fn(); t1 = time.time()
            print(f"C. {kind} graph wall {t1 - t0:.2f}s", flush=True)
            rows = {}
            for t in ts.data:
                key = str(t.get("key"))
                name = key.split("'")[1] if "'" in key else key
                prefix = name.rsplit("-", 1)[0]
                w = str(t.get("worker"))[-5:]
                for s in t.get("startstops", ()):
                    if s.get("action") == "compute":
                        r = rows.setdefault((prefix, w), [0, 0.0, 1e30, 0])
                        r[0] += 1; r[1] += s["stop"] - s["start"]
                        r[2] = min(r[2], s["start"] - t0); r[3] = max(r[3], s["stop"] - t0)
            for (prefix, w), (cnt, busy, a, b) in sorted(rows.items()):
                line = f"   {kind} {prefix[:40]:40s} worker {w}: {cnt:3d} tasks, {busy:6.2f}s compute, first start {a:6.2f}s last stop {b:6.2f}s"
                print(line, flush=True)
                res.setdefault("C", []).append(line)
        marks.append(("end", time.time()))
        time.sleep(0.3)
        smi.stop()
    res["marks"] = marks
    json.dump(res, open(os.path.join(out, "diag2.json"), "w"), indent=1, default=str)
    # utilisation per GPU per phase
    import csv, datetime
    rows = list(csv.reader(open(os.path.join(out, "smi.csv"))))
    def ts(s):
        return datetime.datetime.strptime(s.strip(), "%Y/%m/%d %H:%M:%S.%f").timestamp()
    for (name, a), (_, b) in zip(marks, marks[1:]):
        u = {}
        for r in rows:
            try:
                t = ts(r[0])
            except Exception:
                continue
            if a <= t <= b:
                u.setdefault(r[1].strip(), []).append(float(r[3].strip().split()[0]))
        print(f"smi {name:45s}: " + ", ".join(f"gpu{g} mean util {np.mean(v):5.1f}% (n={len(v)})" for g, v in sorted(u.items())), flush=True)

if __name__ == "__main__":
    main()
