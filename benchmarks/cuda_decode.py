"""kdsl's cuda products of few rows (LLM decode, matrix-vector) and skinny products against
cuBLAS (through torch) in one run (issue #27, row A).

    python3 benchmarks/cuda_decode.py [--quick] [--only KEY[,KEY]] [--json PATH]

Rows (M x K x N, ``a @ b`` through the default schedule, no hints): 16x4096x4096 float32 and
float16 (the decode recipe, kdsl_cuda/schedules/decode.py: B read once, split-K), 1x4096x4096
float32 (matrix-vector), 8192x64x8192 and 4096x64x4096 float32 (K = 64: output-bound).
Target: >= 0.8x cuBLAS.  Harness, checks and timing as benchmarks/cuda_gemm.py (whose
``run_case`` runs each row); ratio = cuBLAS time / kdsl time.
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


G = _load("gemm")
MM = G.DEFAULT
#: key -> (title, kernel, (n, k, m), dtype, target ratio, tolerance)
CASES = [
    ("decode_f32", "decode 16x4096x4096 f32", MM, (16, 4096, 4096), "float32", 0.8, 1e-4),
    ("decode_f16", "decode 16x4096x4096 f16", MM, (16, 4096, 4096), "float16", 0.8, 1e-2),
    ("matvec_f32", "matrix-vector 1x4096x4096 f32", MM, (1, 4096, 4096), "float32", 0.8, 1e-4),
    ("skinny8192", "skinny 8192x64x8192 f32", MM, (8192, 64, 8192), "float32", 0.8, 1e-4),
    ("skinny4096", "skinny 4096x64x4096 f32", MM, (4096, 64, 4096), "float32", 0.8, 1e-4),
]
QUICK = {"decode_f32": (16, 1024, 1024), "decode_f16": (16, 1024, 1024),
         "matvec_f32": (1, 1024, 1024), "skinny8192": (2048, 64, 2048),
         "skinny4096": (1024, 64, 1024)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    ap.add_argument("--only", default="", help="comma-separated: " + ",".join(c[0] for c in CASES))
    ap.add_argument("--json", default=None, help="where the JSON goes (default: $OUT/ or "
                    "benchmarks/results/, cuda_decode_<gpu>.json)")
    args = ap.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        sys.exit("benchmarks/cuda_decode.py: needs a CUDA device through torch")
    if "cuda" not in kd.backends():
        import kdsl_cuda
        kd.register_backend("cuda", kdsl_cuda.backend)
    if args.quick:
        G.M.REPS, G.M.BATCH_MS = 3, 2.0
    torch.backends.cuda.matmul.allow_tf32 = False
    G.QUICK.update(QUICK)
    gen = torch.Generator(device="cuda").manual_seed(int(time.time_ns() % 2 ** 31))
    only = {x for x in args.only.split(",") if x}
    print(f"# kdsl cuda decode/skinny GEMM vs cuBLAS (torch {torch.__version__}) on "
          f"{torch.cuda.get_device_name()}; TF32 off{'; --quick' if args.quick else ''}")
    rows = []
    for case in CASES:
        if not only or case[0] in only:
            rows.append(G.run_case(*case, gen, args.quick))
            G.print_row(rows[-1])
    name = torch.cuda.get_device_name()
    slug = "h200" if "H200" in name else "".join(c if c.isalnum() else "_" for c in name.lower())
    path = args.json or os.path.join(os.environ.get("OUT") or os.path.join(HERE, "results"),
                                     f"cuda_decode_{slug}.json")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"meta": {"gpu": name, "torch": torch.__version__, "quick": args.quick},
                   "results": rows}, f, indent=1)
    print(f"# wrote {path}")
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
