"""Lowering cost per target: how many passes run and how long lowering takes (issue 26 item 3).

``python3 benchmarks/lowering.py`` lowers ``a + b`` and a row softmax for ``interp``, ``cpu``,
``interp-cuda`` and prints, per kernel and target, the passes that ran and the fastest time in the
passes and of the whole ``kernel.lower`` (tracing, scheduling and the pass table; no code generation).
"""
from __future__ import annotations

import time

import numpy as np

import kdsl as kd


@kd.kernel
def add(a, b):
    return a + b


@kd.kernel
def softmax(x):
    e = kd.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def measure(kernel, args, backend, reps=15):
    times, in_passes = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        f = kernel.lower(*args, backend=backend)
        times.append(time.perf_counter() - t0)
        in_passes.append(sum(f.attrs["pass_times"].values()))
    return len(f.attrs["pass_times"]), min(in_passes), min(times)


def main():
    x = np.random.default_rng(0).random((64, 100), dtype=np.float32)
    v = x[0].copy()
    cases = (("a + b", add, (v, v)), ("softmax", softmax, (x,)))
    print(f"{'kernel':10} {'backend':12} {'passes':>6} {'in passes ms':>12} {'lower ms':>9}")
    for name, k, args in cases:
        for be in ("interp", "cpu", "interp-cuda"):
            try:
                count, tp, t = measure(k, args, be)
            except Exception as e:          # a backend not installed here
                print(f"{name:10} {be:12} skipped ({type(e).__name__}: {e})")
                continue
            print(f"{name:10} {be:12} {count:6d} {tp * 1e3:12.2f} {t * 1e3:9.2f}")


if __name__ == "__main__":
    main()
