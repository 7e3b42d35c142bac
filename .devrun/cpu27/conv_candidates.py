"""conv2d 3x3 (benchmarks/cpu_generator.py's workloads) under explicit generator candidates vs torch,
interleaved rounds, best time per variant.  Run from the worktree root:
    PYTHONPATH=. python3 .devrun/cpu27/conv_candidates.py [--threads N]
"""
import argparse, os, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import numpy as np
import kdsl as kd
from kdsl.schedule import generator as G
from cpu_generator import conv3

ap = argparse.ArgumentParser()
ap.add_argument("--threads", type=int, default=0)
ap.add_argument("--rounds", type=int, default=5)
a = ap.parse_args()
import torch
if a.threads:
    kd.set_num_threads(a.threads); torch.set_num_threads(a.threads)
PARAMS = [None, (7, 8, 64), (4, 32, 64), (5, 32, 64)]
rng = np.random.default_rng(0)
for n, c, h, k in [(1, 64, 56, 64), (8, 64, 28, 64)]:
    X = rng.random((n, c, h + 2, h + 2), dtype=np.float32)
    W = rng.random((k, c, 3, 3), dtype=np.float32)
    tx, tw = torch.from_numpy(X), torch.from_numpy(W)
    want = torch.nn.functional.conv2d(tx.double(), tw.double()).numpy()
    fns = {"torch": lambda: torch.nn.functional.conv2d(tx, tw)}
    for p in PARAMS:
        kern = kd.kernel(conv3)
        if p is not None:
            kern.schedule("cpu")(lambda s, p=p: G.tiled(s, s.stages[-1], G.Params(*p)))
        got = kern(X, W, backend="cpu")
        err = np.max(np.abs(got - want)) / np.max(np.abs(want))
        assert err < 1e-4, (p, err)
        fns[str(p) if p else "default"] = lambda kern=kern: kern(X, W, backend="cpu")
    best = {key: float("inf") for key in fns}
    for _ in range(a.rounds):
        for key, f in fns.items():
            for _ in range(3):
                t = time.perf_counter(); f(); best[key] = min(best[key], time.perf_counter() - t)
    fl = 2 * n * k * c * 9 * h * h
    print(f"conv3x3 {n}x{c}x{h}^2->{k} threads {kd.get_num_threads()}:",
          " | ".join(f"{key} {fl / v / 1e9:.1f} GF/s ({best['torch'] / v:.2f}x)" for key, v in best.items()), flush=True)
