"""The 3x3 stencil (benchmarks/cuda.py's conv3x3, 16384 x 16384 float32) under several register
tiles, in one process: microseconds and % of the device-to-device copy bandwidth for each.

    python3 benchmarks/cuda_conv_tiles.py [--size N] [--quick]

Each variant is the same kernel with cuda hints (``threads`` = block, ``tile`` = outputs per
block along i/j, so R = tile_i / threads_y rows and C = tile_j / threads_x columns per thread);
"default" has no hints.  Every variant is checked against torch's conv2d in float64 first.
Timing and the copy bandwidth come from cuda_measure.py (the harness of benchmarks/cuda.py).
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]  # see cuda.py
sys.path.insert(0, ROOT)

import kdsl as kd  # noqa: E402


def _measure():
    spec = importlib.util.spec_from_file_location("kdsl_bench_cuda_measure",
                                                  os.path.join(HERE, "cuda_measure.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def conv3x3(I, W):
    n, m = I.shape
    di, dj = kd.reduce_axis(3, name="di"), kd.reduce_axis(3, name="dj")
    return kd.compute((n - 2, m - 2),
                      lambda i, j: kd.sum(I[i + di, j + dj] * W[di, dj], axis=(di, dj)),
                      name="C")


#: name -> cuda hints ((R, C) per thread in the name)
VARIANTS = {
    "default": {},
    "8x4, 32x4 threads": dict(threads=(32, 4), tile={"i": 32, "j": 128}),
    "8x4, 32x8 threads": dict(threads=(32, 8), tile={"i": 64, "j": 128}),
    "4x4, 32x8 threads": dict(threads=(32, 8), tile={"i": 32, "j": 128}),
    "16x4, 32x4 threads": dict(threads=(32, 4), tile={"i": 64, "j": 128}),
    "8x4, 64x2 threads": dict(threads=(64, 2), tile={"i": 16, "j": 256}),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=16384)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    M = _measure()
    import torch
    import torch.nn.functional as F
    if not torch.cuda.is_available():
        print("no CUDA device")
        return 1
    if a.quick:
        M.REPS, M.BATCH_MS = 3, 5.0
    copy = M.copy_bandwidth(a.quick)["bytes_per_s"]
    print(f"copy: {copy / 1e12:.3f} TB/s (read + write)")
    g = torch.Generator(device="cuda").manual_seed(0)
    I = torch.rand((a.size, a.size), device="cuda", generator=g)
    W = torch.randn((3, 3), device="cuda", generator=g)
    want = F.conv2d(I.double()[None, None], W.double()[None, None])[0, 0]
    for name, hints in VARIANTS.items():
        k = kd.kernel(kd.schedule("cuda", **hints)(conv3x3) if hints else conv3x3)
        try:
            got = k(I, W)
            M.sync()
            err = (got.double() - want).abs().max().item()
            if err > 1e-4:
                print(f"{name:24s} WRONG (max error {err:.2e})")
                continue
            ms, _ = M.gpu_ms(lambda: k(I, W))
        except Exception as e:
            print(f"{name:24s} FAIL {M.first_line(e)}")
            M.safe_sync()
            continue
        moved = (I.numel() + W.numel() + got.numel()) * 4
        print(f"{name:24s} {ms * 1e3:8.1f} us  {100 * moved / (ms / 1e3) / copy:5.1f} % of copy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
