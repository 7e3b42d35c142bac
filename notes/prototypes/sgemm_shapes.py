"""SGEMM A/B on the GPU (issue 11, session 13 helper h/sgemm): which factor slows the odd shapes.

    python3 notes/prototypes/sgemm_shapes.py [--json PATH]

For each (n, k, m): kdsl's default schedule, the default with the ``unroll`` hint (the k step's
loop unrolled: A's shared reads become LDS.128 over k, 572 instead of 665 instructions per 512
FFMA, but 181 registers: one block per SM instead of two) and cuBLAS (torch.matmul, TF32 off).
Shapes separate the factors of the 4095 x 1023 x 4097 slowdown: edge blocks only (4095 x 1024 x
4097 has unaligned B rows too), K % 8 != 0 with aligned rows (1020), unaligned rows (1023).
Every result is checked against torch's before it is timed.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

import kdsl as kd  # noqa: E402

spec = importlib.util.spec_from_file_location("kdsl_bench_cuda_measure",
                                              os.path.join(ROOT, "benchmarks", "cuda_measure.py"))
M = importlib.util.module_from_spec(spec)
spec.loader.exec_module(M)

SHAPES = [(4096, 1024, 4096), (4095, 1023, 4097), (4096, 1023, 4096), (4096, 1020, 4096),
          (4095, 1024, 4097), (4096, 1024, 4097), (4096, 4096, 4096), (8192, 8192, 8192)]


def matmul(A, B):
    return A @ B


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    import torch
    if "cuda" not in kd.backends():
        import kdsl_cuda
        kd.register_backend("cuda", kdsl_cuda.backend)
    torch.backends.cuda.matmul.allow_tf32 = False
    variants = {"default": kd.kernel(matmul), "unroll": kd.kernel(kd.schedule("cuda", unroll=8)(matmul))}
    gen = torch.Generator(device="cuda").manual_seed(11)
    rows = []
    print(f"# {torch.cuda.get_device_name()}; ms (TFLOP/s); ratio = cuBLAS time / kdsl time")
    for n, k, m in SHAPES:
        a = torch.randn(n, k, generator=gen, device="cuda")
        b = torch.randn(k, m, generator=gen, device="cuda")
        want = torch.matmul(a, b)
        flops = 2.0 * n * k * m
        cub = M.gpu_ms(lambda: torch.matmul(a, b))[0]
        row = {"shape": [n, k, m], "cublas_ms": cub}
        text = f"{n}x{k}x{m}".ljust(18) + f" cuBLAS {cub:8.3f} ms"
        for name, kern in variants.items():
            try:
                got = kern(a, b)
                M.sync()
                bad = M.compare(got, want, 1e-4, False)
                if bad:
                    raise AssertionError(bad)
                ms = M.gpu_ms(lambda: kern(a, b))[0]
                row[name] = ms
                text += f" | {name} {ms:8.3f} ms ({flops / ms / 1e9:5.1f}) {cub / ms:4.2f}x"
            except Exception as e:          # report and go on
                row[name] = None
                text += f" | {name} FAIL {M.first_line(e)}"
                M.safe_sync()
        print(text, flush=True)
        rows.append(row)
    by = {tuple(r["shape"]): r for r in rows}
    for name in variants:
        ref, odd = by[(4096, 1024, 4096)].get(name), by[(4095, 1023, 4097)].get(name)
        if ref and odd:
            speed = (4095 * 1023 * 4097 / odd) / (4096 * 1024 * 4096 / ref)
            print(f"# {name}: odd shape at {speed:.2f}x the speed of 4096x1024x4096 (target >= 0.8)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
