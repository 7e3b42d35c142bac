"""Does NVRTC's ``--Ofast-compile`` (or the codegen's one-test lane guards) cost kernel speed?

Self-contained device script (issue 26 item 4, helper nvrtc).  For 9 representative kernels
(default schedules) it compiles each variant through kdsl_cuda's own path (a fresh Kernel,
a fresh disk cache, the option set through ``KDSL_CUDA_FAST_COMPILE``, which
``kdsl_cuda.build.options`` turns into NVRTC's ``--Ofast-compile=<level>``), times the NVRTC
call and the first call, then times the kernels on the GPU (CUDA events around batches of
calls, the variants interleaved, median of REPS batches) and checks each variant's result
against the default's.  Variants:

  default      what kdsl does today (KDSL_CUDA_FAST_COMPILE unset: auto, per module)
  full         KDSL_CUDA_FAST_COMPILE=0: full NVVM/ptxas optimisation for every module
  Ofc=min/mid/max  --Ofast-compile at that level
  lanes=all    the codegen's old per-lane guard tests of vectorized loops
               (kdsl_cuda.codegen.vector.LAST_LANE_GUARDS = False)
  fallback=rolled  a vectorized loop's scalar fallback (row tails, misaligned data) printed
               as a rolled loop (vector.ROLLED_FALLBACK = True; NVRTC does much less work):
               the rows *_odd / *_view run that fallback

Run from the repository root on a GPU host (torch needed):
    python3 -m pip install -q --no-deps --no-build-isolation -e . -e ./kdsl_cpu -e ./kdsl_cuda
    PYTHONUNBUFFERED=1 python3 .devrun/nvrtc/ofc.py [--quick] [--only softmax,hgemm]
It prints a table (and writes ofc.json to $OUT when set).  Adopt a level only where every
kernel's GPU time stays within noise (the "vs default" column near 1.00, ~2%).
"""
import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, ROOT)
CACHE_ROOT = tempfile.mkdtemp(prefix="kdsl_ofc_")
os.environ["KDSL_CACHE_DIR"] = os.path.join(CACHE_ROOT, "none")
os.environ.pop("KDSL_CUDA_FAST_COMPILE", None)

import numpy as np      # noqa: E402
import torch            # noqa: E402

import kdsl as kd       # noqa: E402
from kdsl_cuda import build                 # noqa: E402
from kdsl_cuda.codegen import vector        # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"     # cpu: --dry only
#: label, --Ofast-compile level, vector.LAST_LANE_GUARDS, vector.ROLLED_FALLBACK
VARIANTS = [("default", None, True, False), ("full", "0", True, False), ("Ofc=min", "min", True, False),
            ("Ofc=mid", "mid", True, False), ("Ofc=max", "max", True, False),
            ("lanes=all", None, False, False), ("fallback=rolled", None, True, True)]


# ----------------------------------------------------------------- the kernels (plain functions)
def softmax(X):
    e = kd.exp(X - X.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def layernorm(X):
    mu = X.mean(axis=1, keepdims=True)
    d = X - mu
    return d * kd.rsqrt((d * d).mean(axis=1, keepdims=True) + 1e-5)


def gelu_add(a, b):
    x = a + b
    return 0.5 * x * (1.0 + kd.erf(x * 0.7071067811865476))


def matmul(A, B):
    return A @ B


def conv3x3(I, W):
    n, m = I.shape
    di, dj = kd.reduce_axis(3, name="di"), kd.reduce_axis(3, name="dj")
    return kd.compute((n - 2, m - 2),
                      lambda i, j: kd.sum(I[i + di, j + dj] * W[di, dj], axis=(di, dj)), name="C")


def cumsum(x):
    return np.cumsum(x)


def transpose(A):
    n, m = A.shape
    return kd.compute((m, n), lambda i, j: A[j, i], name="T")


def _randn(*shape, dtype=torch.float32):
    return torch.randn(*shape, device=DEVICE, dtype=dtype)


def cases(quick):
    """name -> (function, inputs factory); sizes as benchmarks/cuda.py (--quick: smaller)."""
    s = 2048 if quick else 8192
    return {
        "softmax": (softmax, lambda: [_randn(s, s)]),
        "softmax_odd": (softmax, lambda: [_randn(s, 1001)]),      # rows of odd length: tails
        "layernorm": (layernorm, lambda: [_randn(s, s)]),
        "gelu_add": (gelu_add, lambda: [_randn(s * s), _randn(s * s)]),
        # views 4 bytes past a 16-byte boundary: every vector test fails, the fallback runs
        "gelu_view": (gelu_add, lambda: [_randn(s * s + 1)[1:], _randn(s * s + 1)[1:]]),
        "sgemm2048": (matmul, lambda: [_randn(2048, 2048), _randn(2048, 2048)]),
        "hgemm4096": (matmul, lambda: [_randn(4096, 4096, dtype=torch.float16),
                                       _randn(4096, 4096, dtype=torch.float16)]),
        "conv3x3": (conv3x3, lambda: [_randn(s, s), torch.rand(3, 3, device=DEVICE)]),
        "cumsum": (cumsum, lambda: [_randn(s * s // 4)]),
        "transpose": (transpose, lambda: [_randn(s, s)]),
    }


# ----------------------------------------------------------------- compiling one variant
CALLS = []          # (source, cubin, seconds) of every NVRTC compile
_compile = build.compile_cubin


def _timed_compile(source, arch=build.DEFAULT_ARCH, name="kdsl_kernel.cu"):
    t = time.perf_counter()
    cubin = _compile(source, arch, name)
    CALLS.append((source, cubin, time.perf_counter() - t))
    return cubin


build.compile_cubin = _timed_compile


def _set(lanes, rolled):
    vector.LAST_LANE_GUARDS, vector.ROLLED_FALLBACK = lanes, rolled


def compile_variant(case, fn, args, label, level, lanes, rolled):
    """A fresh Kernel of ``fn`` compiled and called once under the variant; returns
    (kernel, output, first-call s, NVRTC s, cubin digest, cubin bytes, NVRTC calls)."""
    # a fresh disk cache per case and variant: the key computed before lowering does not see
    # the codegen flags, and nothing compiled under one variant may serve another
    os.environ["KDSL_CACHE_DIR"] = os.path.join(CACHE_ROOT, f"{case}-{label}")
    if level:
        os.environ["KDSL_CUDA_FAST_COMPILE"] = level
    else:
        os.environ.pop("KDSL_CUDA_FAST_COMPILE", None)
    _set(lanes, rolled)
    k = kd.kernel(fn)
    n0 = len(CALLS)
    torch.cuda.synchronize()
    t = time.perf_counter()
    try:
        out = k(*args, backend="cuda")
        torch.cuda.synchronize()
    finally:
        _set(True, False)
        os.environ.pop("KDSL_CUDA_FAST_COMPILE", None)
    first = time.perf_counter() - t
    calls = CALLS[n0:]
    cubins = b"".join(c[1] for c in calls)
    return (k, out, first, sum(c[2] for c in calls), hashlib.sha256(cubins).hexdigest()[:10],
            len(cubins), len(calls))


def dry(quick_cases, only):
    """No GPU: each variant's source generated and compiled for sm_90 (the plumbing, and
    NVRTC's time per level on this host); nothing runs."""
    for name, (fn, make) in quick_cases.items():
        if only and name not in only.split(","):
            continue
        specs = [kd.TensorSpec(tuple(t.shape), str(t.dtype).replace("torch.", "")) for t in make()]
        line, ref = [], None
        for label, level, lanes, rolled in VARIANTS:
            os.environ.pop("KDSL_CUDA_FAST_COMPILE", None)
            _set(lanes, rolled)
            try:
                src = kd.kernel(fn).source(*specs, backend="cuda")
            finally:
                _set(True, False)
            if level:
                os.environ["KDSL_CUDA_FAST_COMPILE"] = level
            try:
                best = min(_time_one(src) for _ in range(3))
            finally:
                os.environ.pop("KDSL_CUDA_FAST_COMPILE", None)
            cubin = CALLS[-1][1]
            ref = cubin if ref is None else ref
            line.append(f"{label} {1e3 * best:7.1f} ms{'' if cubin == ref else '*'}")
        print(f"{name:12s} " + "  ".join(line) + "   (* cubin differs from default)", flush=True)


def _time_one(src):
    n0 = len(CALLS)
    build.compile_cubin(src, "sm_90", "k.cu")
    return CALLS[n0][2]


def gpu_batch_ms(fn, inner):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(inner):
        fn()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) / inner


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--dry", action="store_true", help="no GPU: compile only (see dry)")
    ap.add_argument("--variants", default="", help="labels to run (default: all), e.g. "
                    "default,Ofc=min")
    a = ap.parse_args(argv)
    if a.variants:
        keep = a.variants.split(",")
        VARIANTS[:] = [v for v in VARIANTS if v[0] in keep]
    if a.dry:
        dry(cases(True), a.only)
        return 0
    print(f"# {torch.cuda.get_device_name()}  NVRTC {build.nvrtc_version()}  torch {torch.__version__}")
    from kdsl_cuda import nvrtc
    print(f"# NVRTC through {nvrtc.library().kind} ({nvrtc.library().path})")
    rows = []
    for name, (fn, make) in cases(a.quick).items():
        if a.only and name not in a.only.split(","):
            continue
        torch.manual_seed(0)
        args = make()
        res = {}
        for label, level, lanes, rolled in VARIANTS:
            try:
                res[label] = compile_variant(name, fn, args, label, level, lanes, rolled)
            except Exception as e:      # a variant NVRTC refuses: say so, keep going
                print(f"{name:12s} {label:10s} FAILED {type(e).__name__}: {str(e)[:200]}")
        if "default" not in res:
            continue
        ref = res["default"][1].double()
        scale = max(ref.abs().max().item(), 1e-30)
        fns = {}
        for label, (k, out, *_rest) in res.items():
            fns[label] = (lambda k=k, out=out: k(*args, backend="cuda", out=out))
            for _ in range(3):
                fns[label]()
        torch.cuda.synchronize()
        est = gpu_batch_ms(fns["default"], 3)
        inner = max(1, min(500, int(20.0 / max(est, 1e-3))))
        times = {label: [] for label in fns}
        for _ in range(a.reps):         # interleaved: drift hits every variant alike
            for label, f in fns.items():
                times[label].append(gpu_batch_ms(f, inner))
        base = statistics.median(times["default"])
        for label, (k, out, first, nv, digest, size, ncalls) in res.items():
            med = statistics.median(times[label])
            spread = (max(times[label]) - min(times[label])) / med
            err = (out.double() - ref).abs().max().item() / scale
            rows.append(dict(kernel=name, variant=label, nvrtc_ms=1e3 * nv, first_call_ms=1e3 * first,
                             gpu_ms=med, vs_default=med / base, spread=spread, max_rel_diff=err,
                             cubin=digest, cubin_bytes=size, nvrtc_calls=ncalls))
            r = rows[-1]
            print(f"{name:12s} {label:10s} nvrtc {r['nvrtc_ms']:8.1f} ms  first call {r['first_call_ms']:8.1f} ms"
                  f"  gpu {med:9.4f} ms  x{r['vs_default']:.3f} (spread {spread:.1%})"
                  f"  diff {err:.1e}  cubin {digest} {size}B{'' if ncalls else '  (NOT COMPILED: cached?)'}",
                  flush=True)
    print("\n| kernel | variant | NVRTC ms | first call ms | GPU ms | vs default | same cubin |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        same = next(x["cubin"] for x in rows if x["kernel"] == r["kernel"] and x["variant"] == "default")
        print(f"| {r['kernel']} | {r['variant']} | {r['nvrtc_ms']:.1f} | {r['first_call_ms']:.1f} | "
              f"{r['gpu_ms']:.4f} | {r['vs_default']:.3f} | {'yes' if r['cubin'] == same else 'no'} |")
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "ofc.json"), "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
