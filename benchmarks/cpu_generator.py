"""Default CPU schedules before (the rules alone) and after the schedule generator, against torch
(oneDNN) and numpy (OpenBLAS), in one process:

    PYTHONPATH=. python3 benchmarks/cpu_generator.py [--quick] [--threads N] [--json out.json]

Workloads: conv2d NCHW 3x3 as ``kd.compute`` over (rc, ry, rx) (1x64x56^2 -> 64 and
8x64x28^2 -> 64, no padding: inputs 58^2 / 30^2), a 1x1 conv (1x64x56^2 -> 64), and ``a @ b``
with M = 1, 16, 128 and N = K = 1024 / 4096 (M = 16 also with ``specialize=True``, where the
generator sees M).  "before" is ``kdsl_cpu.schedules.GENERATOR = False`` (main's rules), "after"
the generator's plan; each kdsl variant is compiled as its own kernel.  Every result is checked
against float64 first.  Rounds are interleaved; each row prints the median over rounds of the
best time over all rounds (``vs_torch``: ratio of best times, same threads) and the median of the
per-round ratios (``vs_torch_round_median``): on a loaded host the best times are the steadier.

Prediction (written before measuring, 2-core shared host): conv2d 3x3 before ~0.01-0.02x torch
(one thread: the parallel axis is the batch of 1, a scalar inner window), after ~0.2-0.5x
(7 x 16 register tiles; edge tiles of a 56-wide row are slow); 1x1 conv after ~0.3x; GEMM
M = 1 after ~0.5-1x numpy (memory bound); M = 16/128 unchanged (packed recipe stays where M is
unknown), M = 16 specialised ~0.5x.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]
sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402

import kdsl as kd  # noqa: E402
import kdsl_cpu.schedules as cpu_schedules  # noqa: E402


def conv3(X, W):
    n, c, h, w = X.shape
    k = W.shape[0]
    rc, ry, rx = kd.reduce_axis(c, name="rc"), kd.reduce_axis(3, name="ry"), kd.reduce_axis(3, name="rx")
    return kd.compute((n, k, h - 2, w - 2),
                      lambda b, o, y, x: kd.sum(X[b, rc, y + ry, x + rx] * W[o, rc, ry, rx],
                                                axis=(rc, ry, rx)), name="O")


def conv1(X, W):
    n, c, h, w = X.shape
    k = W.shape[0]
    rc = kd.reduce_axis(c, name="rc")
    return kd.compute((n, k, h, w), lambda b, o, y, x: kd.sum(X[b, rc, y, x] * W[o, rc], axis=rc),
                      name="O")


def matmul(A, B):
    return A @ B


def _kernels(fn, specialize=False):
    """(before, after): the same function compiled under the rules alone and under the generator."""
    return kd.kernel(fn, specialize=specialize), kd.kernel(fn, specialize=specialize)


def _compile(k, args, generator: bool):
    old = cpu_schedules.GENERATOR
    cpu_schedules.GENERATOR = generator
    try:
        return k(*args, backend="cpu")
    finally:
        cpu_schedules.GENERATOR = old


def workloads(quick: bool):
    import torch
    F = torch.nn.functional
    rng = np.random.default_rng(0)
    f32 = np.float32
    out = []
    convs = [(1, 64, 56, 64)] if quick else [(1, 64, 56, 64), (8, 64, 28, 64)]
    for n, c, h, k in convs:
        X = rng.random((n, c, h + 2, h + 2), dtype=f32)
        W = rng.random((k, c, 3, 3), dtype=f32)
        tx, tw = torch.from_numpy(X), torch.from_numpy(W)
        out.append((f"conv2d 3x3 {n}x{c}x{h}^2->{k}", conv3, False, (X, W), lambda tx=tx, tw=tw: F.conv2d(tx, tw),
                    None, 2 * n * k * c * 9 * h * h,
                    lambda X=X, W=W: F.conv2d(torch.from_numpy(X).double(), torch.from_numpy(W).double()).numpy()))
    X = rng.random((1, 64, 56, 56), dtype=f32)
    W = rng.random((64, 64), dtype=f32)
    tx, tw = torch.from_numpy(X), torch.from_numpy(W)[:, :, None, None]
    out.append(("conv2d 1x1 1x64x56^2->64", conv1, False, (X, W), lambda: F.conv2d(tx, tw), None,
                2 * 64 * 64 * 56 * 56,
                lambda: np.einsum("bcyx,oc->boyx", X.astype(np.float64), W.astype(np.float64))))
    sizes = (1024,) if quick else (1024, 4096)
    for nk in sizes:
        for m, spec in ((1, False), (16, False), (16, True), (128, False)):
            A = rng.random((m, nk), dtype=f32)
            B = rng.random((nk, nk), dtype=f32)
            ta, tb = torch.from_numpy(A), torch.from_numpy(B)
            name = f"GEMM M={m} N=K={nk}" + (" specialize" if spec else "")
            out.append((name, matmul, spec, (A, B), lambda ta=ta, tb=tb: ta @ tb,
                        lambda A=A, B=B: A @ B, 2 * m * nk * nk,
                        lambda A=A, B=B: A.astype(np.float64) @ B.astype(np.float64)))
    return out


def _best(fn, reps: int) -> float:
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return min(ts)


def run(quick: bool, rounds: int, only: str = "") -> list:
    rows = []
    for name, fn, spec, args, torch_fn, np_fn, flops, ref in workloads(quick):
        if only and only not in name:
            continue
        before, after = _kernels(fn, spec)
        want = ref()
        for label, k, gen in (("before", before, False), ("after", after, True)):
            got = _compile(k, args, gen)
            err = float(np.max(np.abs(got - want)) / max(1.0, float(np.max(np.abs(want)))))
            if err > 1e-4:
                raise SystemExit(f"{name} {label}: wrong result (relative error {err:.2e})")
        fns = {"before": lambda: before(*args, backend="cpu"), "after": lambda: after(*args, backend="cpu"),
               "torch": torch_fn}
        if np_fn is not None:
            fns["numpy"] = np_fn
        reps = 3 if quick else 7
        ratios = {key: [] for key in fns}
        best = {key: float("inf") for key in fns}
        for _ in range(rounds):
            t = {key: _best(f, reps) for key, f in fns.items()}
            for key in fns:
                best[key] = min(best[key], t[key])
                ratios[key].append(t["torch"] / t[key])
        rows.append({"workload": name, "gflops": {k: flops / v / 1e9 for k, v in best.items()},
                     "vs_torch": {k: best["torch"] / v for k, v in best.items()},
                     "vs_torch_round_median": {k: statistics.median(v) for k, v in ratios.items()}})
        _print(rows[-1])
    return rows


def _print(row):
    g, r = row["gflops"], row["vs_torch"]
    peers = " ".join(f"{k} {g[k]:7.1f}" for k in ("torch", "numpy") if k in g)
    vs_np = (f"  after/numpy {r['after'] / r['numpy']:.2f}x" if "numpy" in r else "")
    print(f"{row['workload']:<32} GFLOP/s: before {g['before']:7.2f} after {g['after']:7.2f} {peers}"
          f" | vs torch: before {r['before']:.3f}x after {r['after']:.3f}x{vs_np}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="kdsl and torch threads (0: default)")
    ap.add_argument("--json", default="")
    ap.add_argument("--only", default="", help="run the workloads whose name contains this")
    a = ap.parse_args()
    import torch
    if a.threads:
        kd.set_num_threads(a.threads)
        torch.set_num_threads(a.threads)
    print(f"threads: kdsl {kd.get_num_threads()}, torch {torch.get_num_threads()}")
    rows = run(a.quick, a.rounds, a.only)
    text = json.dumps({"threads": kd.get_num_threads(), "rows": rows}, indent=1)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
