"""Attention forward: kdsl's fused (online-softmax) kernel against torch SDPA, same run.

    python3 benchmarks/attention.py [--device cpu|cuda] [--n 1024,4096,16384] [--d 64,128]
                                    [--bh 32] [--heads 8] [--dtype float16,bfloat16]
                                    [--causal both|yes|no] [--reps 5] [--threads N]
                                    [--compare] [--json PATH]

Every row: q, k, v of shape (B, H, N, D) with B * H = ``--bh`` (H = ``--heads``), the
kernel written as numpy (kdsl/frontend/online_softmax.py fuses it), its default schedule,
checked against numpy in float64 on the first head before it is timed; the table shows
medians of ``--reps`` calls and ratio = torch time / kdsl time (above 1: kdsl is faster).
``--device cuda`` needs kdsl_cuda, torch with CUDA and a GPU (the issue's rows: f16/bf16,
N in {1024, 4096, 16384}, D in {64, 128}, causal and not); the cpu rows default to float32
(the issue's cpu target: 16 cores, N=2048, D=64, >= 1.0x torch SDPA).
``--compare`` (cpu) also times the one-row-per-work-item placement (the cpu default before
the blocked schedule, ``kdsl_cpu.schedules.attention.BLOCKED = False``) in the same run;
``--json`` writes every row to a file.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# benchmarks/cuda.py would shadow torch's own `cuda` imports: not this folder, the checkout
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]
sys.path[:0] = [ROOT, os.path.join(ROOT, "kdsl_cpu")]

import kdsl as kd  # noqa: E402


@kd.kernel
def attention(q, k, v):
    s = q @ kd.swapaxes(k, -1, -2) * q.shape[-1] ** -0.5
    p = kd.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


@kd.kernel
def causal_attention(q, k, v):
    s = q @ kd.swapaxes(k, -1, -2) * q.shape[-1] ** -0.5
    i = kd.arange(q.shape[-2])[:, None]
    j = kd.arange(k.shape[-2])[None, :]
    s = kd.where(i >= j, s, -np.inf)
    p = kd.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


def reference(q, k, v, causal):
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    s = q @ k.T / np.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.tri(*s.shape, dtype=bool), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return p / p.sum(-1, keepdims=True) @ v


def _median(fn, reps, sync=lambda: None) -> float:
    fn()
    sync()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def row(args, n, d, dtype, causal):
    import torch
    F = torch.nn.functional
    B, H = args.bh // args.heads, args.heads
    tdt = getattr(torch, dtype)
    dev = args.device
    g = torch.Generator(device="cpu").manual_seed(0)
    q, k, v = (torch.randn(B, H, n, d, generator=g).to(dev, tdt) for _ in range(3))
    fn = causal_attention if causal else attention
    backend = "cuda" if dev == "cuda" else "cpu"
    if dev == "cuda":
        args_k, sync = (q, k, v), torch.cuda.synchronize
    else:
        args_k = tuple(x.numpy() if tdt is not torch.bfloat16 else x for x in (q, k, v))
        sync = lambda: None  # noqa: E731
    out = fn(*args_k, backend=backend)
    got = torch.as_tensor(out).float().cpu().numpy()[0, 0] if dev == "cuda" else \
        np.asarray(torch.as_tensor(out).float())[0, 0]
    want = reference(*(x[0, 0].float().cpu().numpy() for x in (q, k, v)), causal)
    err = float(np.abs(got - want).max())
    tol = 2e-3 if dtype == "float32" else 3e-2
    if not err <= tol:
        raise SystemExit(f"kdsl result wrong: max error {err} (N={n} D={d} {dtype})")
    t_kd = _median(lambda: fn(*args_k, backend=backend), args.reps, sync)
    t_th = _median(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                   args.reps, sync)
    t_row = None
    if args.compare and dev == "cpu":
        from kdsl_cpu.schedules import attention as cpu_attention
        base = kd.kernel(fn.fn)       # a fresh kernel: compiled under the row placement
        cpu_attention.BLOCKED = False
        try:
            got = np.asarray(base(*args_k, backend=backend))[0, 0]
        finally:
            cpu_attention.BLOCKED = True
        if not float(np.abs(got - want).max()) <= tol:
            raise SystemExit(f"kdsl row placement wrong (N={n} D={d} {dtype})")
        t_row = _median(lambda: base(*args_k, backend=backend), args.reps, sync)
    return t_kd, t_th, err, t_row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--n", default=None, help="sequence lengths, comma-separated")
    ap.add_argument("--d", default="64,128")
    ap.add_argument("--bh", type=int, default=32, help="batch * heads")
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--dtype", default=None)
    ap.add_argument("--causal", default="both", choices=("both", "yes", "no"))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None, help="cpu threads (kdsl and torch)")
    ap.add_argument("--compare", action="store_true",
                    help="cpu: also time the one-row-per-item placement (the old default)")
    ap.add_argument("--json", default=None, help="write the rows to this file")
    args = ap.parse_args()
    if args.compare:
        os.environ["KDSL_CACHE"] = "0"      # the two placements share a graph: no disk cache
    if args.threads:
        import torch
        kd.set_num_threads(args.threads)
        torch.set_num_threads(args.threads)
    ns = args.n or ("1024,4096,16384" if args.device == "cuda" else "1024,2048")
    dts = args.dtype or ("float16,bfloat16" if args.device == "cuda" else "float32")
    causals = {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal]
    print(f"attention forward, {args.device}, B*H={args.bh}: torch SDPA time / kdsl time")
    print(f"{'N':>6} {'D':>4} {'dtype':>9} {'causal':>6} {'kdsl ms':>9} {'torch ms':>9} "
          f"{'ratio':>6} {'max err':>8}" + ("  row ms  row ratio" if args.compare else ""))
    rows = []
    for n in map(int, ns.split(",")):
        for d in map(int, args.d.split(",")):
            for dtype in dts.split(","):
                for causal in causals:
                    t_kd, t_th, err, t_row = row(args, n, d, dtype, causal)
                    extra = "" if t_row is None else f" {t_row * 1e3:7.2f} {t_th / t_row:9.3f}"
                    print(f"{n:6d} {d:4d} {dtype:>9} {str(causal):>6} {t_kd * 1e3:9.2f} "
                          f"{t_th * 1e3:9.2f} {t_th / t_kd:6.3f} {err:8.1e}{extra}", flush=True)
                    rows.append(dict(n=n, d=d, dtype=dtype, causal=causal, bh=args.bh,
                                     kdsl_ms=t_kd * 1e3, torch_ms=t_th * 1e3,
                                     ratio=t_th / t_kd, max_err=err,
                                     row_ms=None if t_row is None else t_row * 1e3))
    if args.json:
        import torch
        with open(args.json, "w") as f:
            json.dump(dict(device=args.device, cores=os.cpu_count(),
                           threads=torch.get_num_threads(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
