"""kdsl's default cuda schedule of conv2d (NCHW, written as a numpy user would: ``kd.compute``
over (rc, ry, rx)) against cuDNN (torch ``F.conv2d``, ``cudnn.benchmark = True``, TF32 off) in
one process (issue 27).

    python3 benchmarks/cuda_conv.py [--quick] [--only KEYS] [--dtypes float32,float16]
                                    [--variants] [--json PATH]

Workloads: ResNet-50's 3x3 stride-1 layers at batch 32 (64x56^2, 128x28^2, 256x14^2,
512x7^2, channels in = out), issue 27's 16x256x14^2 -> 256, and four of its 1x1 layers
(256->64 at 56^2, 128->512 at 28^2, 1024->256 at 14^2, 512->2048 at 7^2); float32 (CUDA
cores) and float16 (float32 accumulation, float16 result: tensor cores).  The 3x3 kernel is a
valid convolution of the input padded beforehand (what F.conv2d(padding=1) computes; the peer
runs F.conv2d on the same padded input).  Every result is checked against torch's float64
convolution first; times are CUDA-event medians of batches (benchmarks/cuda_measure.py);
ratio = cuDNN time / kdsl time (> 1: kdsl faster).  ``--variants`` also times a few other
configurations of each layer's recipe (``VARIANTS``) to calibrate the defaults.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# like cuda.py: this folder must not shadow cuda-python's ``cuda`` package
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]
sys.path.insert(0, ROOT)

import kdsl as kd  # noqa: E402


def _load(name):
    spec = importlib.util.spec_from_file_location(f"kdsl_bench_cuda_{name}",
                                                  os.path.join(HERE, f"cuda_{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


M = _load("measure")


def conv3x3(X, W):
    """Valid 3x3 convolution (cross-correlation, as F.conv2d) of an NCHW image."""
    n, c, h, w = X.shape
    rc, ry, rx = (kd.reduce_axis(c, name="rc"), kd.reduce_axis(3, name="ry"),
                  kd.reduce_axis(3, name="rx"))
    return kd.compute((n, W.shape[0], h - 2, w - 2),
                      lambda b, o, y, x: kd.sum(X[b, rc, y + ry, x + rx] * W[o, rc, ry, rx],
                                                axis=(rc, ry, rx)), name="O")


def conv1x1(X, W):
    n, c, h, w = X.shape
    rc = kd.reduce_axis(c, name="rc")
    return kd.compute((n, W.shape[0], h, w),
                      lambda b, o, y, x: kd.sum(X[b, rc, y, x] * W[o, rc], axis=rc), name="O")


def conv3x3_16(X, W):
    """float16 in and out, float32 accumulation (what cuDNN's float16 conv computes)."""
    n, c, h, w = X.shape
    rc, ry, rx = (kd.reduce_axis(c, name="rc"), kd.reduce_axis(3, name="ry"),
                  kd.reduce_axis(3, name="rx"))
    return kd.compute((n, W.shape[0], h - 2, w - 2), lambda b, o, y, x: kd.sum(
        X[b, rc, y + ry, x + rx].astype("float32") * W[o, rc, ry, rx].astype("float32"),
        axis=(rc, ry, rx)), name="O").astype("float16")


def conv1x1_16(X, W):
    n, c, h, w = X.shape
    rc = kd.reduce_axis(c, name="rc")
    return kd.compute((n, W.shape[0], h, w), lambda b, o, y, x: kd.sum(
        X[b, rc, y, x].astype("float32") * W[o, rc].astype("float32"), axis=rc),
        name="O").astype("float16")


KERNELS = {(3, "float32"): conv3x3, (1, "float32"): conv1x1,
           (3, "float16"): conv3x3_16, (1, "float16"): conv1x1_16}

#: key -> (batch, in channels, image size, out channels, window)
LAYERS = {
    "r3_64": (32, 64, 56, 64, 3), "r3_128": (32, 128, 28, 128, 3),
    "r3_256": (32, 256, 14, 256, 3), "r3_512": (32, 512, 7, 512, 3),
    "i27_256": (16, 256, 14, 256, 3),
    "r1_256_64": (32, 256, 56, 64, 1), "r1_128_512": (32, 128, 28, 512, 1),
    "r1_1024_256": (32, 1024, 14, 256, 1), "r1_512_2048": (32, 512, 7, 2048, 1),
}
QUICK = {k: (2, min(c, 32), min(s, 14), min(o, 32), w) for k, (b, c, s, o, w) in LAYERS.items()}

#: dtype -> name -> fields of the recipe's configuration that a calibration variant changes
#: (``--variants``: conv.Config on CUDA cores, conv_tc.TCConfig on tensor cores)
VARIANTS = {
    "float32": {"xl_tap": dict(xl="tap"), "ym4": dict(ym=4), "om4_bm32": dict(om=4, bm=32),
                "bk16": dict(bk=16)},
    "float16": {"wo2_wy4": dict(wo=2, wy=4), "to2": dict(to=2), "tx_half": {"tx": 0},
                "xglobal": dict(xglobal=True), "kc4": dict(kc=4)},
}
#: the layers the variants are timed on (one of each image size class and window)
VARIANT_LAYERS = ("r3_64", "r3_256", "r3_512", "r1_256_64", "r1_1024_256")

_kernels: dict = {}


def kernel(win, dtype, over=None):
    """The default kernel of a layer, or one whose recipe configuration has the fields
    ``over`` changed (an explicit schedule: the default's choice, then the change)."""
    key = (win, dtype, tuple(sorted((over or {}).items())))
    if key not in _kernels:
        k = kd.kernel(KERNELS[(win, dtype)])
        if over is not None:
            k.schedule("cuda")(lambda s, over=over: _variant(s, over))
        _kernels[key] = k
    return _kernels[key]


def _variant(s, over):
    from dataclasses import replace
    from kdsl_cuda.schedules import conv as CV, conv_tc as TC
    h = s["O"]
    m = CV.find(h.stage)
    epilogue = s.stages[-1] if s.stages[-1] is not h else None
    if TC.eligible(s, h, m):
        c = TC.choose(s, h, m)
        if over.get("tx") == 0:              # half the default's columns
            over = dict(over, tx=max(1, c.tx // 2))
        TC.conv_tc(s, h, m, replace(c, **over), epilogue)
    else:
        CV.conv_tile(s, h, m, replace(CV.choose(s, h, m), **over), epilogue)


def run_layer(key, dtype, gen, quick, variants):
    """One layer: cuDNN, then kdsl's default (``variants`` False) or the calibration
    variants (True), each checked against torch's float64 convolution first."""
    import torch
    import torch.nn.functional as F
    b, c, s, o, win = (QUICK if quick else LAYERS)[key]
    tdt = getattr(torch, dtype)
    pad = (win - 1) // 2
    X = torch.randn(b, c, s + 2 * pad, s + 2 * pad, generator=gen, device="cuda").to(tdt)
    W = (torch.randn(o, c, win, win, generator=gen, device="cuda") / (c * win * win) ** 0.5).to(tdt)
    Wk = W if win > 1 else W[:, :, 0, 0].contiguous()
    flops = 2.0 * b * o * c * win * win * s * s
    row = {"key": key, "dtype": dtype, "shape": [b, c, s, o, win], "flops": flops,
           "workload": f"conv{win}x{win} {b}x{c}x{s}^2->{o} {dtype}"}
    want = F.conv2d(X.double(), W.double())
    scale = want.abs().max().item() or 1.0
    tol = 1e-5 if dtype == "float32" else 2e-3
    row["cudnn_ms"] = M.gpu_ms(lambda: F.conv2d(X, W))[0]
    runs = list(VARIANTS[dtype].items()) if variants else [("default", None)]
    for name, over in runs:
        if (name == "kc4" and win > 1) or (name == "xglobal" and win == 1):
            continue            # (a window's step is one panel; 1x1 reads X as it is)
        try:
            k = kernel(win, dtype, over)
            got = k(X, Wk)
            M.sync()
            err = (got.double() - want).abs().max().item() / scale
            if not err <= tol:
                raise AssertionError(f"max error {err:.2e} of the largest output (tolerance {tol})")
            ms, per = M.gpu_ms(lambda: k(X, Wk))
            r = dict(kdsl_ms=ms, batches_ms=per, ratio=row["cudnn_ms"] / ms,
                     tflops=flops / ms / 1e9, err=err)
        except Exception as e:
            r = {"error": M.first_line(e)}
            M.safe_sync()
        if name == "default":
            row.update(r)
        else:
            row.setdefault("variants", {})[name] = r
    return row


def print_row(row):
    head = f"{row['workload']:<40}"
    if "kdsl_ms" in row:
        print(f"{head} kdsl {row['kdsl_ms']:8.3f} ms {row['tflops']:7.2f} TFLOP/s  cuDNN "
              f"{row['cudnn_ms']:8.3f} ms {row['flops'] / row['cudnn_ms'] / 1e9:7.2f} TFLOP/s  "
              f"ratio {row['ratio']:.2f}", flush=True)
    elif "error" in row:
        print(f"{head} FAIL: {row['error']}", flush=True)
    else:
        print(f"{head} cuDNN {row['cudnn_ms']:8.3f} ms", flush=True)
    for name, r in row.get("variants", {}).items():
        if "kdsl_ms" in r:
            print(f"    {name:<14} {r['kdsl_ms']:8.3f} ms  ratio {r['ratio']:.2f}", flush=True)
        else:
            print(f"    {name:<14} FAIL: {r['error']}", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    ap.add_argument("--only", default="", help="comma-separated: " + ",".join(LAYERS))
    ap.add_argument("--dtypes", default="float32,float16")
    ap.add_argument("--variants", action="store_true", help="also time other recipe configurations")
    ap.add_argument("--json", default=None, help="where the JSON goes (default: $OUT/ or "
                    "benchmarks/results/, cuda_conv_<gpu>.json)")
    args = ap.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        sys.exit("benchmarks/cuda_conv.py: needs a CUDA device through torch")
    if "cuda" not in kd.backends():
        import kdsl_cuda
        kd.register_backend("cuda", kdsl_cuda.backend)
    if args.quick:
        M.REPS, M.BATCH_MS = 3, 2.0
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    seed = int(time.time_ns() % 2 ** 31)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    only = [x for x in args.only.split(",") if x] or list(LAYERS)
    print(f"# kdsl cuda conv2d vs cuDNN {torch.backends.cudnn.version()} (torch "
          f"{torch.__version__}) on {torch.cuda.get_device_name()}; TF32 off; seed {seed}"
          f"{'; --quick' if args.quick else ''}", flush=True)
    name = torch.cuda.get_device_name()
    slug = "h200" if "H200" in name else "".join(ch if ch.isalnum() else "_" for ch in name.lower())
    path = args.json or os.path.join(os.environ.get("OUT") or os.path.join(HERE, "results"),
                                     f"cuda_conv_{slug}.json")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    meta = {"gpu": name, "torch": torch.__version__, "seed": seed,
            "cudnn": torch.backends.cudnn.version(), "quick": args.quick}
    rows, calib = [], []

    def save():         # after every row: a run cut short keeps what it measured
        with open(path, "w") as f:
            json.dump({"meta": meta, "results": rows, "variants": calib}, f, indent=1)
    dtypes = [d for d in args.dtypes.split(",") if d]
    for dtype in dtypes:
        for key in only:
            rows.append(run_layer(key, dtype, gen, args.quick, False))
            print_row(rows[-1])
            save()
    ok = [r for r in rows if "ratio" in r]
    for dtype in sorted({r["dtype"] for r in ok}):
        rs = [r["ratio"] for r in ok if r["dtype"] == dtype]
        geo = 1.0
        for x in rs:
            geo *= x
        print(f"# {dtype}: geometric mean ratio {geo ** (1 / len(rs)):.2f} over {len(rs)} layers, "
              f"lowest {min(rs):.2f} (target >= 0.7)", flush=True)
    if args.variants:
        print("# calibration variants (kdsl/cuDNN ratio of each, cuDNN timed again; shorter "
              "batches)", flush=True)
        M.REPS, M.BATCH_MS = min(M.REPS, 5), min(M.BATCH_MS, 10.0)
        for dtype in dtypes:
            for key in [k for k in only if k in VARIANT_LAYERS]:
                calib.append(run_layer(key, dtype, gen, args.quick, True))
                print_row(calib[-1])
                save()
    print(f"# wrote {path}")
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
