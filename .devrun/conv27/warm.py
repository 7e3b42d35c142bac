"""Compile every kernel benchmarks/cuda_conv.py will time (default and --variants), in a pool
of processes, into the disk cache ($KDSL_CACHE_DIR): the benchmark's process then loads them.
    python3 .devrun/conv27/warm.py [--jobs 14] [--variants] [--quick]
"""
import argparse, importlib.util, os, sys, time
from multiprocessing import get_context

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def bench():
    spec = importlib.util.spec_from_file_location("kdsl_bench_cuda_conv",
                                                  os.path.join(ROOT, "benchmarks", "cuda_conv.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def warm(job):
    key, dtype, name, quick = job
    t = time.time()
    try:
        import torch
        import kdsl as kd
        import kdsl_cuda
        if "cuda" not in kd.backends():
            kd.register_backend("cuda", kdsl_cuda.backend)
        B = bench()
        b, c, s, o, win = (B.QUICK if quick else B.LAYERS)[key]
        pad = (win - 1) // 2
        tdt = getattr(torch, dtype)
        X = torch.zeros(b, c, s + 2 * pad, s + 2 * pad, device="cuda", dtype=tdt)
        W = torch.zeros((o, c, win, win) if win > 1 else (o, c), device="cuda", dtype=tdt)
        over = None if name == "default" else B.VARIANTS[dtype][name]
        B.kernel(win, dtype, over)(X, W)
        torch.cuda.synchronize()
        return job, time.time() - t, None
    except Exception as e:
        return job, time.time() - t, f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=14)
    ap.add_argument("--variants", action="store_true")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--dtypes", default="float32,float16")
    a = ap.parse_args()
    B = bench()
    jobs = []
    for dtype in a.dtypes.split(","):
        for key, (*_, win) in B.LAYERS.items():
            names = ["default"] + (list(B.VARIANTS[dtype]) if a.variants and key in B.VARIANT_LAYERS
                                   else [])
            jobs += [(key, dtype, n, a.quick) for n in names
                     if not (n == "kc4" and win > 1) and not (n == "xglobal" and win == 1)]
    t0 = time.time()
    bad = 0
    with get_context("spawn").Pool(a.jobs) as pool:
        for job, dt, err in pool.imap_unordered(warm, jobs):
            bad += err is not None
            if err:
                print(f"# warm {job}: {err}", flush=True)
    print(f"# warmed {len(jobs)} kernels in {time.time() - t0:.0f} s ({bad} failed)", flush=True)


if __name__ == "__main__":
    main()
