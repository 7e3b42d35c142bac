"""``kd.fori_loop`` on the cpu backend: the host loop (one launch per step) against the loop
inside one kernel (kdsl.passes.fori_loop), in one run.

    python benchmarks/fori_loop.py [--steps N] [--repeat R]

For each kernel and size, both forms are compiled (``fori_kernel.in_kernel`` off / on,
fresh kernel objects) and checked equal; then the median time of a call with 0 and with
N steps gives the per-step cost ``(t(N) - t(0)) / N`` and the fixed cost ``t(0)``.  The
stencils are PolyBench's (examples/polybench.py: jacobi-1d, heat-3d); ``damp`` is one
elementwise stage per step (pure launch overhead at small sizes).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import kdsl as kd                                   # noqa: E402
from examples import polybench as pb                # noqa: E402
from kdsl.runtime import fori_kernel                # noqa: E402


def damp(x, n):
    return kd.fori_loop(0, n, lambda i, c: c * 0.5 + x, x)


def _median(f, repeat: int) -> float:
    f()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


CASES = [
    ("damp", damp, lambda n, rng: (rng.random(n),), (16, 4096)),
    ("jacobi-1d", pb.jacobi_1d.fn, lambda n, rng: (rng.random(n), rng.random(n)), (32, 4000)),
    ("heat-3d", pb.heat_3d.fn, lambda n, rng: (rng.random((n, n, n)), rng.random((n, n, n))),
     (10, 40)),
]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=15)
    a = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"{'kernel':10} {'size':>6} | {'host loop us/step':>17} {'fixed us':>9} | "
          f"{'one kernel us/step':>18} {'fixed us':>9} | speedup/step")
    for name, fn, make, sizes in CASES:
        for size in sizes:
            arrays = make(size, rng)
            steps_first = name != "damp"      # PolyBench's argument order: tsteps first

            def call(k, steps):
                args = (steps, *arrays) if steps_first else (*arrays, steps)
                return k(*args, backend="cpu")
            res = {}
            for mode in (False, True):
                fori_kernel.in_kernel = mode
                k = kd.kernel(fn)
                call(k, 3)            # compile now, with this mode
                # a long run only for small sizes (the big ones cost milliseconds a step)
                steps = a.steps if size <= 64 else max(4, a.steps // 40)
                t0 = _median(lambda: call(k, 0), a.repeat)
                tn = _median(lambda: call(k, steps), max(3, a.repeat // 3))
                res[mode] = ((tn - t0) / steps * 1e6, t0 * 1e6, call(k, 5))
            fori_kernel.in_kernel = True
            for x, y in zip(*(np.atleast_1d(res[m][2]) if not isinstance(res[m][2], tuple)
                              else res[m][2] for m in (False, True))):
                np.testing.assert_allclose(x, y, rtol=1e-12)
            h, o = res[False], res[True]
            print(f"{name:10} {size:>6} | {h[0]:17.2f} {h[1]:9.1f} | {o[0]:18.2f} {o[1]:9.1f} | "
                  f"{h[0] / o[0]:10.1f}x")


#: whole PolyBench kernels (examples/polybench.py) at one size: (name, n, steps)
POLYBENCH = [("cholesky", 64, 0), ("floyd-warshall", 64, 0), ("durbin", 256, 0),
             ("jacobi-2d", 32, 100), ("fdtd-2d", 32, 100)]


def polybench(repeat: int) -> None:
    """Median time of whole PolyBench kernels, host loop against one kernel."""
    from tests.polybench import reference as ref
    print(f"\n{'polybench':15} {'n':>4} {'steps':>5} | {'host loop us':>12} | "
          f"{'one kernel us':>13} | speedup")
    rng = np.random.default_rng(1)
    for name, size, steps in POLYBENCH:
        args = ref.inputs(name, size, rng, steps or 3)
        t = {}
        for mode in (False, True):
            fori_kernel.in_kernel = mode
            k = kd.kernel(pb.KERNELS[name].fn)
            got = k(*args, backend="cpu")
            t[mode] = (_median(lambda: k(*args, backend="cpu"), repeat) * 1e6, got)
        fori_kernel.in_kernel = True
        for x, y in zip(*(v[1] if isinstance(v[1], tuple) else (v[1],) for v in t.values())):
            np.testing.assert_allclose(x, y, rtol=1e-10)
        print(f"{name:15} {size:>4} {steps or '':>5} | {t[False][0]:12.1f} | {t[True][0]:13.1f} | "
              f"{t[False][0] / t[True][0]:6.2f}x")


if __name__ == "__main__":
    main()
    polybench(15)
