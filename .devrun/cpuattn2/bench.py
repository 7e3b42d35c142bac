"""Helper cpuattn (issue 28, session 20): kdsl's cpu attention against torch SDPA (CPU), same run.

    python3 .devrun/cpuattn2/bench.py OUT_DIR [--quick]

Rows: f32 (B*H=32, N, D), causal and not; each checked against numpy float64 on two heads
before it is timed (min and median of a few calls).  ``VARIANTS`` re-time the issue's row
(N=2048, D=64) with switches of kdsl_cpu/schedules/attention.py (the old behaviours), so
before/after come from the same run.  Writes OUT_DIR/cpuattn2.json and a table on stdout.
"""
import json
import os
import statistics
import sys
import time

import torch  # noqa: F401  (before kdsl: torch's own imports first)
import numpy as np

os.environ["KDSL_CACHE"] = "0"     # variants share a graph: no disk cache
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "kdsl_cpu")]
import kdsl as kd  # noqa: E402
from kdsl_cpu.schedules import attention as A  # noqa: E402

T0 = time.perf_counter()
BUDGET = float(os.environ.get("BUDGET_S", 150))


def attention(q, k, v):
    s = q @ kd.swapaxes(k, -1, -2) * q.shape[-1] ** -0.5
    p = kd.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


def causal_attention(q, k, v):
    s = q @ kd.swapaxes(k, -1, -2) * q.shape[-1] ** -0.5
    i = kd.arange(q.shape[-2])[:, None]
    j = kd.arange(k.shape[-2])[None, :]
    s = kd.where(i >= j, s, -np.inf)
    p = kd.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


def reference(q, k, v, causal):
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.tri(s.shape[-2], s.shape[-1], dtype=bool), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return p / p.sum(-1, keepdims=True) @ v


def timed(fn, reps):
    fn()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return min(ts), statistics.median(ts)


_KERNELS = {}


def kernel(causal, variant):
    key = (causal, tuple(sorted(variant.items())))
    if key not in _KERNELS:
        _KERNELS[key] = kd.kernel(causal_attention if causal else attention)
    return _KERNELS[key]


def run_row(n, d, causal, variant, reps, with_torch=True, bh=(4, 8)):
    F = torch.nn.functional
    g = torch.Generator().manual_seed(n * 7 + d)
    q, k, v = (torch.randn(*bh, n, d, generator=g) for _ in range(3))
    qn, kn, vn = (x.numpy() for x in (q, k, v))
    old = {a: getattr(A, a) for a in variant}
    for a, x in variant.items():
        setattr(A, a, x)
    try:
        fn = kernel(causal, variant)
        t = time.perf_counter()
        out = fn(qn, kn, vn, backend="cpu")
        compile_s = time.perf_counter() - t
        err = 0.0
        for b, h in ((0, 0), (bh[0] - 1, bh[1] - 1)):
            want = reference(qn[b, h], kn[b, h], vn[b, h], causal)
            err = max(err, float(np.abs(out[b, h] - want).max()))
        th = F.scaled_dot_product_attention(q, k, v, is_causal=causal).numpy()
        err_t = float(np.abs(out - th).max())
        ok = err <= 2e-4 and err_t <= 2e-4
        t_kd = timed(lambda: fn(qn, kn, vn, backend="cpu"), reps)
    finally:
        for a, x in old.items():
            setattr(A, a, x)
    t_th = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal), reps) \
        if with_torch else (None, None)
    flops = 4.0 * bh[0] * bh[1] * n * n * d * (0.5 if causal else 1.0)
    return dict(n=n, d=d, causal=causal, variant=variant, bh=bh[0] * bh[1], threads=None, ok=ok, max_err_f64=err,
                max_err_torch=err_t, kdsl_min_ms=t_kd[0] * 1e3, kdsl_med_ms=t_kd[1] * 1e3,
                torch_min_ms=None if t_th[0] is None else t_th[0] * 1e3,
                torch_med_ms=None if t_th[1] is None else t_th[1] * 1e3,
                ratio=None if t_th[0] is None else t_th[0] / t_kd[0],
                kdsl_gflops=flops / t_kd[0] / 1e9, compile_s=compile_s)


def show(r):
    tm = "" if r["torch_min_ms"] is None else f"{r['torch_min_ms']:9.2f} {r['ratio']:6.3f}"
    var = str(r["variant"] or "default") + (" 1 thread bh=4" if r["threads"] == 1 else "")
    print(f"{r['n']:6d} {r['d']:4d} {str(r['causal']):>6} {var:<34} "
          f"{r['kdsl_min_ms']:9.2f} {r['kdsl_med_ms']:9.2f} {tm:>16} {r['kdsl_gflops']:7.1f} "
          f"{r['max_err_f64']:8.1e} {'ok' if r['ok'] else 'WRONG'}", flush=True)


#: the issue's row again under switches of kdsl_cpu/schedules/attention.py: the old
#: behaviours (before/after) and block/tile sizes; (switches, causal values to run).
#: (No tiles of 8+ rows: kdsl_cpu's unroll cap unrolls them partly, ScheduleWarning.)
VARIANTS = [
    (dict(LOOPS_PER_BLOCK=False, BLOCK_KEYS=False, BQ=64, SCORE_ROWS=4, PV_TILE=(4, 4),
          FOLD_SCALE=False), (False, True)),                   # as in session 19
    (dict(BQ=64, SCORE_ROWS=4, PV_TILE=(4, 4)), (False, True)),  # results1's default tiles
    (dict(WEIGHT_VECTORS=4), (False, True)),
    (dict(FOLD_SCALE=False), (False,)),
    (dict(BQ=48), (False, True)),
]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", "/tmp")
    quick = "--quick" in sys.argv
    threads = int(os.environ.get("THREADS", os.cpu_count()))
    kd.set_num_threads(threads)
    torch.set_num_threads(threads)
    print(f"== {os.cpu_count()} cpus, {threads} threads (kdsl and torch), torch {torch.__version__}")
    print(f"{'N':>6} {'D':>4} {'causal':>6} {'variant':<34} {'kdsl min':>9} {'kdsl med':>9} "
          f"{'torch min':>9} {'ratio':>6} {'GFLOP/s':>7} {'err f64':>8}")
    rows = []
    sizes = [(2048, 64, 7)] + ([] if quick else [(1024, 64, 7), (1024, 128, 5), (4096, 64, 3),
                                                  (4096, 128, 3)])
    for n, d, reps in sizes:
        for causal in (False, True):
            if time.perf_counter() - T0 > BUDGET:
                break
            rows.append(run_row(n, d, causal, {}, reps))
            show(rows[-1])
        if n == 4096 and not quick:
            for var in ((dict(BQ=48), dict(BQ=64, SCORE_ROWS=4, PV_TILE=(4, 4))) if d == 64
                        else (dict(BQ=48), dict(SCORE_VECTORS=2))):
                if time.perf_counter() - T0 < BUDGET:
                    rows.append(run_row(n, d, False, var, reps, with_torch=False))
                    show(rows[-1])
        if n == 2048 and not quick:
            for var, causals in VARIANTS:
                for causal in causals:
                    if time.perf_counter() - T0 > BUDGET:
                        break
                    rows.append(run_row(n, d, causal, var, reps, with_torch=False))
                    show(rows[-1])
            # one thread, B*H=4 (per-core efficiency, kdsl and torch)
            kd.set_num_threads(1)
            torch.set_num_threads(1)
            for causal in (False, True):
                if time.perf_counter() - T0 < BUDGET:
                    rows.append(run_row(n, d, causal, {}, 3, bh=(1, 4)))
                    rows[-1]["threads"] = 1
                    show(rows[-1])
            kd.set_num_threads(threads)
            torch.set_num_threads(threads)
    if time.perf_counter() - T0 > BUDGET:
        print("(time budget spent: rows left out)")
    with open(os.path.join(out, "cpuattn2.json"), "w") as f:
        json.dump(dict(cpus=os.cpu_count(), threads=threads, torch=torch.__version__,
                       cpu=open("/proc/cpuinfo").read().split("model name")[1].split("\n")[0],
                       rows=rows, seconds=time.perf_counter() - T0), f, indent=1)
    if not all(r["ok"] for r in rows):
        print("SOME RESULTS WRONG")
        sys.exit(1)


if __name__ == "__main__":
    main()
