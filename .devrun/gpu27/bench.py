"""Issue 27 GPU rows (helper gpu27): kdsl's default cuda schedules against torch, one run.

    cd <repo root> && python3 .devrun/gpu27/bench.py [--only a,b] [--quick]

``--quick``: the same sizes, only the default schedules (and tensor_cores=True for the float16
decode rows): about a minute.  Without it, sweeps of the decode recipe's constants and hints.

Row A (decode / skinny GEMM): ``a @ b`` M x K x N = 16x4096x4096 f32 and f16, 1x4096x4096
f32, 8192x64x8192 and 4096x64x4096 f32, 8192x64x8192 f16, against torch.matmul (cuBLAS; TF32
off); the decode rows also with ``rfactor`` / ``unroll`` hints (the split-K parts: tuning data
for kdsl_cuda/schedules/decode.py).
Row B (memory-bound chains): bias + tanh-GELU + residual 8192^2 f16 (row-vector bias), RMSNorm
8192x4096 f16, ``a.T + 0.0`` 16384^2 f32, against torch eager and torch.compile; bandwidth as
a fraction of this run's device-to-device copy (bytes read + written).

Every kernel is the default schedule (no hints) unless its name says otherwise, checked against
a float64 oracle (computed by torch on the GPU) before it is timed.  Times: CUDA events, the
median of 20 samples after a warm-up, each sample the mean of enough back-to-back calls to
last ~2 ms (launch gaps vanish).  Prints a table; writes JSON to $OUT/gpu27.json (else
./gpu27.json).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import traceback

# a fresh disk cache: the sweeps below patch module constants of the schedules (not part of any
# cache key), and a cache filled by another checkout must not answer for this one
os.environ.setdefault("KDSL_CACHE_DIR", tempfile.mkdtemp(prefix="kdsl-gpu27-"))

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import kdsl as kd  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
DEV = "cuda"
SAMPLES = 20


# ------------------------------------------------------------------ kernels, as a user writes them
def matmul(a, b):
    return a @ b


def bias_gelu_res(x, b, r):
    """x + b (b a row vector), tanh-approximated GELU in float32, plus the residual; f16 out."""
    y = (x + b).astype(np.float32)
    g = 0.5 * y * (1.0 + np.tanh(0.7978845608028654 * (y + 0.044715 * y * y * y)))
    return (g + r.astype(np.float32)).astype(np.float16)


def rmsnorm(x, w):
    x32 = x.astype(np.float32)
    inv = 1.0 / np.sqrt((x32 * x32).mean(axis=1, keepdims=True) + 1e-6)
    return (x32 * inv * w.astype(np.float32)).astype(np.float16)


def transpose_add(a):
    return a.T + 0.0


MM = kd.kernel(matmul)


def mm_hinted(**h):
    return kd.kernel(kd.schedule("cuda", **h)(matmul))


class Patched:
    """A fresh default kernel of ``fn`` (matmul) compiled with module constants of
    kdsl_cuda/schedules/<module>.py (decode) replaced (restored after each call: only the first
    call compiles, under the patch)."""

    def __init__(self, fn=None, module="decode", **consts):
        self.consts, self.kern, self.module = consts, kd.kernel(fn or matmul), module

    def __call__(self, *args):
        import importlib
        mod = importlib.import_module("kdsl_cuda.schedules." + self.module)
        old = {k: getattr(mod, k) for k in self.consts}
        for k, v in self.consts.items():
            setattr(mod, k, v)
        try:
            return self.kern(*args)
        finally:
            for k, v in old.items():
                setattr(mod, k, v)


GELU = kd.kernel(bias_gelu_res)
RMS = kd.kernel(rmsnorm)
TR = kd.kernel(transpose_add)


# ------------------------------------------------------------------ peers and oracles
def t_gelu(x, b, r):
    return (F.gelu((x + b).float(), approximate="tanh") + r.float()).half()


def t_gelu_eager(x, b, r):
    return F.gelu(x + b, approximate="tanh") + r


def t_rms(x, w):
    return F.rms_norm(x, (x.shape[1],), w, eps=1e-6)


def o_gelu(x, b, r):
    y = (x + b).double()   # x + b rounded to f16 first, as the kernel does
    return 0.5 * y * (1 + torch.tanh(0.7978845608028654 * (y + 0.044715 * y ** 3))) + r.double()


def o_rms(x, w):
    x = x.double()
    return x / torch.sqrt((x * x).mean(dim=1, keepdim=True) + 1e-6) * w.double()


_compiled = {}


def compiled(fn):
    if fn not in _compiled:
        _compiled[fn] = torch.compile(fn)
    return _compiled[fn]


# ------------------------------------------------------------------ timing
def gpu_ms(fn):
    torch.cuda.synchronize()
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    fn()
    e.record()
    e.synchronize()
    inner = max(1, min(200, int(2.0 / max(s.elapsed_time(e), 1e-3))))
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
          for _ in range(SAMPLES)]
    for a, b in ev:
        a.record()
        for _ in range(inner):
            fn()
        b.record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) / inner for a, b in ev)


def copy_bw():
    src = torch.empty(1 << 28, dtype=torch.float32, device=DEV)
    dst = torch.empty_like(src)
    ms = gpu_ms(lambda: dst.copy_(src))
    return 2 * src.numel() * 4 / (ms * 1e-3)


def check(got, want, tol):
    got, want = got.double(), want.double()
    err = (got - want).abs().max().item() if got.numel() else 0.0
    scale = max(1.0, want.abs().max().item() if want.numel() else 0.0)
    if got.shape != want.shape or not err <= tol * scale:
        raise AssertionError(f"wrong result: max error {err:.3g} (scale {scale:.3g}, tol {tol})")


# ------------------------------------------------------------------ rows
def gemm_rows(quick):
    rows = []
    shapes = [("decode", 16, 4096, 4096, "float32"), ("decode", 16, 4096, 4096, "float16"),
              ("matvec", 1, 4096, 4096, "float32"), ("decode", 8, 8192, 8192, "float16"),
              ("skinny", 8192, 64, 8192, "float32"), ("skinny", 4096, 64, 4096, "float32"),
              ("skinny", 8192, 64, 8192, "float16")]
    for kind, m, k, n, dt in shapes:
        tdt = getattr(torch, dt)
        a = torch.randn(m, k, device=DEV, dtype=tdt)
        b = torch.randn(k, n, device=DEV, dtype=tdt)
        want = a.double() @ b.double()
        tol = 1e-4 if dt == "float32" else 2e-3
        peer = gpu_ms(lambda: torch.matmul(a, b))
        variants = [("default", MM)]
        if kind in ("decode", "matvec") and dt == "float16":    # cuBLAS: tensor cores
            variants += [("tensor_cores=True", mm_hinted(tensor_cores=True))]
        if kind in ("decode", "matvec") and not quick:
            # the split-K parts (constant chunks of K: the partials' share of B's bytes, the
            # shortest chunk), rows per thread, the unrolled k step; old-style rfactor parts
            variants += [(f"PARTIAL_SHARE={p}", Patched(PARTIAL_SHARE=p)) for p in (1, 4)]
            variants += [("MIN_PART_K=64", Patched(MIN_PART_K=64)),
                         ("MIN_PART_K=16", Patched(MIN_PART_K=16)),
                         ("TARGET_BLOCKS=16*132", Patched(TARGET_BLOCKS=16 * 132)),
                         ("TARGET_BLOCKS=4*132", Patched(TARGET_BLOCKS=4 * 132))]
            if dt == "float32":
                variants += [("ROWS=8", Patched(ROWS=8))]
            if dt == "float16":
                variants += [("ROWS_16=16", Patched(ROWS_16=16)),
                             ("UNROLL_16=4", Patched(UNROLL_16=4))]
            variants += [(f"unroll={u}", mm_hinted(unroll=u)) for u in (4, 16)]
            variants += [(f"rfactor={p}", mm_hinted(rfactor=p)) for p in (1, 64)]
            variants += [("threads=256", mm_hinted(threads=256))]
        if kind == "skinny" and not quick:    # the k step of the tiled GEMM (K = 64)
            variants += [(f"tile r0={t}", mm_hinted(tile={"r0": t})) for t in (16, 32)]
            if dt == "float16":
                variants += [("tensor_cores=False", mm_hinted(tensor_cores=False))]
        for vname, kern in variants:
            row = dict(row="A", name=f"{kind} {m}x{k}x{n} {dt} {vname}", peer="cuBLAS",
                       peer_ms=peer)
            try:
                check(kern(a, b), want, tol * np.sqrt(k / 64))
                ms = gpu_ms(lambda: kern(a, b))
                row.update(kdsl_ms=ms, ratio=peer / ms,
                           gbps=(m * k + k * n + m * n) * a.element_size() / (ms * 1e-3) / 1e9)
            except Exception as e:   # a FAIL row, never a crash of the run
                row.update(error=f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
                traceback.print_exc()
            rows.append(row)
    return rows


def chain_rows(quick, bw):
    rows = []
    n = 8192
    x = torch.randn(n, n, device=DEV, dtype=torch.float16)
    b = torch.randn(n, device=DEV, dtype=torch.float16)
    r = torch.randn(n, n, device=DEV, dtype=torch.float16)
    cases = [("bias+tanh-gelu+residual %dx%d f16" % (n, n), GELU, (x, b, r), o_gelu,
              {"torch eager": t_gelu_eager, "torch.compile": compiled(t_gelu)},
              3 * n * n * 2, 4e-3)]
    rn, rm = 8192, 4096
    xr = torch.randn(rn, rm, device=DEV, dtype=torch.float16)
    w = torch.randn(rm, device=DEV, dtype=torch.float16)
    cases.append(("RMSNorm %dx%d f16" % (rn, rm), RMS, (xr, w), o_rms,
                  {"torch eager": t_rms, "torch.compile": compiled(t_rms)}, 2 * rn * rm * 2, 4e-3))
    tn = 16384
    at = torch.randn(tn, tn, device=DEV, dtype=torch.float32)
    cases.append(("a.T + 0.0 %dx%d f32" % (tn, tn), TR, (at,), lambda a: a.double().T + 0.0,
                  {"torch eager": lambda a: a.T + 0.0,
                   "torch .contiguous()": lambda a: a.t().contiguous()}, 2 * tn * tn * 4, 0))
    if True:     # RMSNorm's block (default: ~4 16-byte vectors of the row a thread)
        for t in (128, 256, 512):
            cases.append(("RMSNorm %dx%d f16 threads=%d" % (rn, rm, t),
                          kd.kernel(kd.schedule("cuda", threads=t)(rmsnorm)), (xr, w), o_rms,
                          {}, 2 * rn * rm * 2, 4e-3))
    if not quick:     # the transpose tile's shape: TILE x TILE outputs, TILE x TY threads
        for t, ty in ((32, 4), (64, 8), (64, 4)):
            cases.append(("a.T + 0.0 %dx%d f32 TILE=%d TY=%d" % (tn, tn, t, ty),
                          Patched(transpose_add, "transpose", TILE=t, TY=ty), (at,),
                          lambda a: a.double().T + 0.0, {}, 2 * tn * tn * 4, 0))
    for name, kern, args, oracle, peers, nbytes, tol in cases:
        row = dict(row="B", name=name, copy_gbps=bw / 1e9)
        want = oracle(*args)
        for pname, p in peers.items():
            try:
                check(p(*args), want, max(tol, 1e-6))
                row[pname + " ms"] = gpu_ms(lambda: p(*args))
            except Exception as e:
                row[pname + " error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        try:
            check(kern(*args), want, max(tol, 1e-6))
            ms = gpu_ms(lambda: kern(*args))
            row.update(kdsl_ms=ms, kdsl_copy_frac=nbytes / (ms * 1e-3) / bw)
            for pname in peers:
                if pname + " ms" in row:
                    row["ratio vs " + pname] = row[pname + " ms"] / ms
        except Exception as e:
            row.update(error=f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
            traceback.print_exc()
        rows.append(row)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="a,b")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    only = set(args.only.lower().split(","))
    if "cuda" not in kd.backends():     # this checkout's kdsl_cuda when it is not pip-installed
        import kdsl_cuda
        kd.register_backend("cuda", kdsl_cuda.backend)
    torch.manual_seed(0)
    bw = copy_bw()
    print(f"# {torch.cuda.get_device_name()}  copy {bw / 1e9:.0f} GB/s (read + write)")
    rows = []
    if "a" in only:
        rows += gemm_rows(args.quick)
    if "b" in only:
        rows += chain_rows(args.quick, bw)
    for r in rows:
        print(" | ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                         for k, v in r.items()), flush=True)
    out = os.environ.get("OUT") or "."
    with open(os.path.join(out, "gpu27.json"), "w") as f:
        json.dump(dict(device=torch.cuda.get_device_name(), copy_gbps=bw / 1e9, rows=rows), f,
                  indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
