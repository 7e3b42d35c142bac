"""Hand-written softmax kernels (variants.cu) against kdsl's default cuda schedule and Triton,
8192x8192 f32, one row per block of 512 threads (session 13, issue 10 item 7).

    python3 notes/prototypes/softmax/variants.py      # from the repository root, on a GPU

Variants (-D flags of variants.cu): U=1 the row copied into shared memory one float4 per thread
at a time (the old kdsl code's shape), U=4 that loop unrolled (loads batched), ASYNC=1 copied
with cp.async, EXP1=1 exp stored back into the row (exp once) and one reciprocal per row,
RCP=1 one reciprocal per row (exp twice), REGS=1,Q=4 the row in registers (Triton's shape).
Prints: name, microseconds (triton.testing.do_bench), largest error against float64."""
import importlib.util
import os
import sys

import cupy as cp
import numpy as np
import torch
import triton.testing as tt

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, ROOT)
spec = importlib.util.spec_from_file_location("kdsl_bench_cuda", os.path.join(ROOT, "benchmarks", "cuda.py"))
b = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = b
spec.loader.exec_module(b)
b.ensure_cuda_backend()

VARIANTS = ["U=1", "U=1,RCP=1", "U=1,EXP1=1", "U=4,EXP1=1", "ASYNC=1,EXP1=1", "REGS=1,Q=4"]
R = C = 8192
X = torch.randn(R, C, device="cuda")
Y = torch.empty_like(X)
ref = torch.softmax(X.double(), 1)
args = (cp.from_dlpack(X), cp.from_dlpack(Y), np.int32(C))
src = open(os.path.join(os.path.dirname(__file__), "variants.cu")).read()


def show(name, fn, check=True):
    Y.zero_()
    fn()
    torch.cuda.synchronize()
    err = float((Y - ref).abs().max()) if check else float("nan")
    print(f"{name:<16} {tt.do_bench(fn, warmup=50, rep=400) * 1e3:8.1f} us  max err {err:.2e}", flush=True)


print(torch.cuda.get_device_name())
show("copy", lambda: Y.copy_(X), check=False)
show("kdsl", lambda: b.softmax(X, out=Y))
show("triton 16 warps", lambda: b.peers_mod.triton_softmax(X, 16), check=False)
for d in VARIANTS:
    k = cp.RawModule(code=src, options=tuple("-D" + a for a in d.split(","))).get_function("sm")
    show(d, lambda: k((R,), (512,), args, shared_mem=0 if "REGS" in d else C * 4))
