"""SGEMM variants on the GPU (issue 11, session 14): what would take the default f32 recipe
from 0.8x to 0.9x cuBLAS.

    python3 notes/prototypes/sgemm/variants.py [N ...]      (default 4096 8192)

Times, in one process, against torch.matmul (TF32 off, cuBLAS): kdsl's default schedule and
some hint variants through kdsl itself; text edits of kdsl's generated source (launch bounds
for 2 blocks per SM, the 8-step k loop unrolled) launched through CuPy; and the hand kernel
at.cu (the same blocking with a k-major A tile: 4-byte cp.async transposing A, LDS.128 for
both operands), with and without the unrolled k loop.  Every result is checked first.
The session-14 numbers (notes/measurements/sgemm_variants_h100_session14.txt) were taken with
a median of single event-timed calls; the script now times with benchmarks/cuda_measure.py.
"""
import importlib.util
import os
import re
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)
import cupy as cp  # noqa: E402
import torch  # noqa: E402

import kdsl as kd  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("kdsl_bench_cuda_measure",
                                               os.path.join(ROOT, "benchmarks", "cuda_measure.py"))
M = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(M)


def matmul(A, B):
    return A @ B


def gpu_ms(fn):
    """Median milliseconds of one ``fn()`` (benchmarks/cuda_measure.py's CUDA-event batches)."""
    return M.gpu_ms(fn)[0]


def raw(src, name, defs=()):
    pre = "".join(f"#define {d.replace('=', ' ')}\n" for d in defs)
    mod = cp.RawModule(code=pre + src, options=("-std=c++17",), backend="nvrtc")
    return mod.get_function(name)


def main():
    sizes = [int(a) for a in sys.argv[1:]] or [4096, 8192]
    torch.backends.cuda.matmul.allow_tf32 = False
    if "cuda" not in kd.backends():
        import kdsl_cuda
        kd.register_backend("cuda", kdsl_cuda.backend)
    kernels = {"kdsl default": kd.kernel(matmul),
               "kdsl stages=3": kd.kernel(kd.schedule("cuda", stages=3)(matmul)),
               "kdsl tile k16": kd.kernel(kd.schedule("cuda", tile={"r0": 16})(matmul)),
               "kdsl tile i0=256": kd.kernel(kd.schedule("cuda", tile={"i0": 256})(matmul)),
               "kdsl tile i1=256": kd.kernel(kd.schedule("cuda", tile={"i1": 256})(matmul))}
    at_src = open(os.path.join(HERE, "at.cu")).read()
    print(f"# {torch.cuda.get_device_name()}  ms (TFLOP/s, ratio = cuBLAS / this)", flush=True)
    for n in sizes:
        g = torch.Generator(device="cuda").manual_seed(n)
        a = torch.randn(n, n, generator=g, device="cuda")
        b = torch.randn(n, n, generator=g, device="cuda")
        want = torch.matmul(a, b)
        scale = float(want.abs().max())
        fl = 2.0 * n ** 3
        cub = gpu_ms(lambda: torch.matmul(a, b))
        print(f"{n}^3 cuBLAS {cub:8.3f} ms ({fl / cub / 1e9:5.1f} TFLOP/s)", flush=True)

        def report(name, fn, out):
            try:
                out.zero_()
                fn()
                torch.cuda.synchronize()
                err = float((out - want).abs().max()) / scale
                if not err < 1e-5:
                    print(f"  {name:34s} WRONG (max rel err {err:.2e})", flush=True)
                    return
                ms = gpu_ms(fn)
                print(f"  {name:34s} {ms:8.3f} ms ({fl / ms / 1e9:5.1f})  {cub / ms:5.3f}x", flush=True)
            except Exception as e:  # noqa: BLE001
                print(f"  {name:34s} FAILED {type(e).__name__}: {str(e)[:200]}", flush=True)

        c = torch.empty_like(want)
        for name, k in kernels.items():
            report(name, lambda k=k: k(a, b, out=c), c)
        src = kernels["kdsl default"].source(a, b, backend="cuda")
        fname = re.search(r"__global__ void __launch_bounds__\(\d+\)\s*(\w+)\(", src).group(1)
        ca, cb, cc = cp.from_dlpack(a), cp.from_dlpack(b), cp.from_dlpack(c)
        grid = ((n // 128) * (n // 128),)
        edits = {
            "gen (as generated, via CuPy)": lambda s: s,
            "gen + launch_bounds(256,2)": lambda s: s.replace("__launch_bounds__(256)", "__launch_bounds__(256, 2)"),
            "gen + unrolled k": lambda s: s.replace("for (int r0_inner = 0", "\n#pragma unroll\nfor (int r0_inner = 0"),
            "gen + both": lambda s: s.replace("__launch_bounds__(256)", "__launch_bounds__(256, 2)").replace(
                "for (int r0_inner = 0", "\n#pragma unroll\nfor (int r0_inner = 0"),
        }
        n64 = np.int64(n)
        for name, edit in edits.items():
            try:
                f = raw(edit(src), fname)
            except Exception as e:  # noqa: BLE001
                print(f"  {name:34s} COMPILE FAILED {str(e)[:300]}")
                continue
            report(name, lambda f=f: f(grid, (16, 16), (ca, cb, cc, n64, n64, n64, n64)), c)
        n32 = np.int32(n)
        for defs in [(), ("UNROLL",), ("MINB=2", "UNROLL"), ("TM=16",), ("TM=16", "UNROLL")]:
            f = raw(at_src, "sgemm_at", defs)
            bm = 256 if "TM=16" in defs else 128
            report("at.cu " + " ".join(defs), lambda f=f, bm=bm: f((n // 128, n // bm), (16, 16), (ca, cb, cc, n32, n32, n32)), c)


if __name__ == "__main__":
    main()
