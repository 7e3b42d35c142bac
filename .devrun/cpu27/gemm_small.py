"""Small-M GEMMs (issue 27's "M <= 16 / skinny >= 0.8x OpenBLAS"): kdsl default (M at run time) and
specialize=True against numpy (OpenBLAS) and torch, interleaved rounds, best times, every result
checked against float64 first.  From the repository root:
    PYTHONPATH=. python3 .devrun/cpu27/gemm_small.py [--threads N] [--rounds R]
"""
import argparse, time
import numpy as np
import kdsl as kd

ap = argparse.ArgumentParser()
ap.add_argument("--threads", type=int, default=0)
ap.add_argument("--rounds", type=int, default=5)
a = ap.parse_args()
import torch
if a.threads:
    kd.set_num_threads(a.threads); torch.set_num_threads(a.threads)
print(f"threads: kdsl {kd.get_num_threads()}, torch {torch.get_num_threads()}")
rng = np.random.default_rng(0)
for nk in (1000, 1024, 4096):
    for m in (1, 16, 17, 64):
        A = rng.random((m, nk), dtype=np.float32); B = rng.random((nk, nk), dtype=np.float32)
        ta, tb = torch.from_numpy(A), torch.from_numpy(B)
        want = A.astype(np.float64) @ B.astype(np.float64)
        fns = {}
        for name, spec in (("default", False), ("specialize", True)):
            k = kd.kernel(lambda A, B: A @ B, specialize=spec)
            got = k(A, B, backend="cpu")
            assert np.max(np.abs(got - want)) / np.max(np.abs(want)) < 1e-4, (name, m, nk)
            fns[name] = lambda k=k: k(A, B, backend="cpu")
        fns["numpy"] = lambda: A @ B
        fns["torch"] = lambda: ta @ tb
        best = {key: float("inf") for key in fns}
        reps = 3 if nk == 4096 else 10
        for _ in range(a.rounds):
            for key, f in fns.items():
                for _ in range(reps):
                    t = time.perf_counter(); f(); best[key] = min(best[key], time.perf_counter() - t)
        fl = 2 * m * nk * nk
        print(f"GEMM M={m:<3} N=K={nk:<5} GFLOP/s " + " ".join(f"{k} {fl / v / 1e9:7.1f}" for k, v in best.items())
              + f" | default/numpy {best['numpy'] / best['default']:.2f}x  spec/numpy {best['numpy'] / best['specialize']:.2f}x",
              flush=True)
