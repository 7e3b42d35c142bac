"""kdsl's cuda matrix products against cuBLAS (through torch) in one run (issue #11).

    python3 benchmarks/cuda_gemm.py [--quick] [--json PATH]

Rows: SGEMM 4096^3 and 8192^3 float32 (``allow_tf32 = False``) through the default schedule
(no hints) and through the best ladder step (examples/gemm_ladder.py ``double_buffer``);
4095x4097x1023 (non-multiples) against 4096x4096x1024 (target: >= 0.8x its speed); HGEMM 8192^3
float16 in, float32 accumulation with ``tensor_cores=True``; batched 64x512x512x512 float16
``A @ B`` through the default schedule (against torch.bmm's cuBLAS).  Every result is
checked against torch's before it is timed; times are CUDA-event medians of batches
(benchmarks/cuda_measure.py); ratio = cuBLAS time / kdsl time (1: as fast as cuBLAS).
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
sys.path.insert(0, os.path.join(ROOT, "examples"))

import kdsl as kd  # noqa: E402
import gemm_ladder  # noqa: E402


def _load(name):
    spec = importlib.util.spec_from_file_location(f"kdsl_bench_cuda_{name}",
                                                  os.path.join(HERE, f"cuda_{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


M = _load("measure")


def matmul(A, B):
    return A @ B


def matmul16(A, B):
    """float16 in, float32 accumulation and result."""
    return gemm_ladder.matmul16(A, B)


DEFAULT = kd.kernel(matmul)
TC = kd.kernel(kd.schedule("cuda", tensor_cores=True)(matmul16))
#: float16 in and out (float32 accumulation), any batch: the default schedule (tensor cores
#: where the recipe applies, else the CUDA-core GEMM)
MM16 = kd.kernel(matmul)
BEST = gemm_ladder.kernel("double_buffer")

#: key -> (title, kdsl kernel, (batch, n, k, m) or (n, k, m), dtype, target ratio, tolerance)
CASES = [
    ("sgemm4096", "SGEMM 4096^3 f32 default", DEFAULT, (4096, 4096, 4096), "float32", 0.9, 1e-4),
    ("sgemm4096_best", "SGEMM 4096^3 f32 best ladder step", BEST, (4096, 4096, 4096), "float32",
     0.9, 1e-4),
    ("sgemm8192", "SGEMM 8192^3 f32 default", DEFAULT, (8192, 8192, 8192), "float32", 0.9, 1e-4),
    ("sgemm8192_best", "SGEMM 8192^3 f32 best ladder step", BEST, (8192, 8192, 8192), "float32",
     0.9, 1e-4),
    ("sgemm_ref", "SGEMM 4096x1024x4096 f32 default", DEFAULT, (4096, 1024, 4096), "float32",
     None, 1e-4),
    ("sgemm_odd", "SGEMM 4095x1023x4097 f32 default", DEFAULT, (4095, 1023, 4097), "float32",
     None, 1e-4),
    ("hgemm8192", "HGEMM 8192^3 f16 in, f32 acc, tensor cores", TC, (8192, 8192, 8192),
     "float16", 0.5, 1e-2),
    ("bmm_fp16", "batched 64x512x512x512 f16 (default schedule)", MM16, (64, 512, 512, 512), "float16",
     0.5, 1e-2),
]
QUICK = {"sgemm4096": (1024,) * 3, "sgemm4096_best": (1024,) * 3, "sgemm8192": (2048,) * 3,
         "sgemm8192_best": (2048,) * 3, "sgemm_ref": (1024, 256, 1024),
         "sgemm_odd": (1023, 255, 1025), "hgemm8192": (2048,) * 3, "bmm_fp16": (8, 256, 256, 256)}


def run_case(key, title, k, shape, dtype, target, tol, gen, quick):
    import torch
    shape = QUICK[key] if quick else shape
    *b, n, kk, m = shape
    tdt = getattr(torch, dtype)
    a = torch.randn(*b, n, kk, generator=gen, device="cuda").to(tdt)
    bb = torch.randn(*b, kk, m, generator=gen, device="cuda").to(tdt)
    want = torch.matmul(a.float(), bb.float())
    row = {"key": key, "workload": title, "shape": list(shape), "target": target,
           "flops": 2.0 * n * kk * m * (b[0] if b else 1)}
    row["cublas_ms"] = M.gpu_ms(lambda: torch.matmul(a, bb))[0]     # torch.bmm when batched
    try:
        got = k(a, bb)
        M.sync()
        bad = M.compare(got, want, tol, False)
        if bad:
            raise AssertionError(bad)
        ms, per = M.gpu_ms(lambda: k(a, bb))
        row.update(kdsl_ms=ms, batches_ms=per, ratio=row["cublas_ms"] / ms,
                   tflops=row["flops"] / ms / 1e9)
    except Exception as e:
        row["error"] = M.first_line(e)
        M.safe_sync()
    return row


def print_row(row):
    head = f"{row['workload']:<46} {'x'.join(map(str, row['shape'])):>16}"
    if "kdsl_ms" in row:
        t = row["target"]
        mark = "" if t is None else ("  ok" if row["ratio"] >= t else f"  BELOW {t}x")
        print(f"{head} {row['kdsl_ms']:9.3f} ms {row['tflops']:7.2f} TFLOP/s  cuBLAS "
              f"{row['cublas_ms']:8.3f} ms  ratio {row['ratio']:.2f}{mark}", flush=True)
    else:
        print(f"{head} FAIL: {row['error']}", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    ap.add_argument("--only", default="", help="comma-separated: " + ",".join(c[0] for c in CASES))
    ap.add_argument("--json", default=None, help="where the JSON goes (default: $OUT/ or "
                    "benchmarks/results/, cuda_gemm_<gpu>.json)")
    args = ap.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        sys.exit("benchmarks/cuda_gemm.py: needs a CUDA device through torch")
    if "cuda" not in kd.backends():
        import kdsl_cuda
        kd.register_backend("cuda", kdsl_cuda.backend)
    if args.quick:
        M.REPS, M.BATCH_MS = 3, 2.0
    torch.backends.cuda.matmul.allow_tf32 = False
    gen = torch.Generator(device="cuda").manual_seed(int(time.time_ns() % 2 ** 31))
    only = {x for x in args.only.split(",") if x}
    print(f"# kdsl cuda GEMM vs cuBLAS (torch {torch.__version__}) on "
          f"{torch.cuda.get_device_name()}; TF32 off{'; --quick' if args.quick else ''}")
    rows = []
    for case in CASES:
        if not only or case[0] in only:
            rows.append(run_case(*case, gen, args.quick))
            print_row(rows[-1])
    by = {r["key"]: r for r in rows}
    if "kdsl_ms" in by.get("sgemm_odd", {}) and "kdsl_ms" in by.get("sgemm_ref", {}):
        rate = lambda r: r["flops"] / r["kdsl_ms"]     # noqa: E731
        print(f"# non-multiples: {rate(by['sgemm_odd']) / rate(by['sgemm_ref']):.2f}x the "
              "speed of the multiple shape (target >= 0.8)")
    for size in ("4096", "8192"):
        d, b = by.get(f"sgemm{size}", {}), by.get(f"sgemm{size}_best", {})
        if "kdsl_ms" in d and "kdsl_ms" in b:
            print(f"# default schedule at {size}^3: {b['kdsl_ms'] / d['kdsl_ms']:.2f}x the speed "
                  "of the best ladder step (target >= 0.8)")
    name = torch.cuda.get_device_name()
    slug = "h200" if "H200" in name else "".join(c if c.isalnum() else "_" for c in name.lower())
    path = args.json or os.path.join(os.environ.get("OUT") or os.path.join(HERE, "results"),
                                     f"cuda_gemm_{slug}.json")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"meta": {"gpu": name, "torch": torch.__version__, "quick": args.quick},
                   "results": rows}, f, indent=1)
    print(f"# wrote {path}")
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
