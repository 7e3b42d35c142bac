"""Lowering cost per target (issue 26 items 3-4): pass counts, per-stage times and a code corpus.

``python3 benchmarks/lowering.py`` lowers ``a + b`` and a row softmax for ``interp``, ``cpu``,
``interp-cuda`` and prints, per kernel and target, the passes that ran and the fastest time in the
passes and of the whole ``kernel.lower`` (tracing, scheduling and the pass table; no code generation).

``python3 benchmarks/lowering.py --corpus DIR`` lowers ~30 representative kernels (softmax,
layernorm, matmul, conv, stencils, scans, sorts, reductions) for ``cuda`` and ``cpu`` and writes
each one's generated code (CUDA C++ from ``kernel.source(..., backend="cuda")``, which needs no
GPU; the cpu backend's LLVM IR) to ``DIR/<kernel>.<backend>.txt``: ``diff -r`` two such folders
to prove an optimisation of lowering left the output byte-identical.  It prints the time of each
stage (trace, schedule, lower, codegen; the fastest of ``--reps`` fresh runs, each from a fresh
Kernel so nothing is cached) per case, and the totals.  ``--only softmax,matmul`` picks cases.

``python3 benchmarks/lowering.py --cold 5`` measures a fresh process's first row softmax (issue 26
item 4): each of 5 new ``python3`` processes, with an empty ``KDSL_CACHE_DIR``, imports numpy and
kdsl, loads the backend, then ``softmax.source(x, backend=...)`` for ``cuda`` (no GPU needed) and
``cpu``, and (``cpu`` only, ``call``) the first call itself (LLVM and the launcher included).  It
prints the median of each part: the imports, the compile stages as ``kdsl.compile_log`` times them
(trace, schedule, lower; cuda's code generation timed around ``kdsl_cuda.backend.generate``) and
the Python time of the whole compile path (everything after numpy's import), with the number of
modules the first compile imported.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
# this checkout's kdsl, not an installed one (``python3 benchmarks/lowering.py`` from a worktree)
sys.path[:] = [os.path.dirname(HERE)] + [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]

import kdsl as kd  # noqa: E402
from kdsl.frontend.spec import TensorSpec  # noqa: E402


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


# ----------------------------------------------------------------- the corpus (plain functions)
EPS = 1e-5


def c_softmax(x):
    e = kd.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def c_layernorm(X):
    mu = X.mean(axis=1, keepdims=True)
    d = X - mu
    return d * kd.rsqrt((d * d).mean(axis=1, keepdims=True) + EPS)


def c_matmul(A, B):
    return A @ B


def c_matvec(A, v):
    return A @ v


def c_conv3(I, W):
    n, m = I.shape
    di, dj = kd.reduce_axis(3, name="di"), kd.reduce_axis(3, name="dj")
    return kd.compute((n - 2, m - 2),
                      lambda i, j: kd.sum(I[i + di, j + dj] * W[di, dj], axis=(di, dj)),
                      name="C")


def c_stencil5(A):
    n, m = A.shape
    return kd.compute((n - 2, m - 2), lambda i, j: 0.2 * (
        A[i + 1, j + 1] + A[i, j + 1] + A[i + 2, j + 1] + A[i + 1, j] + A[i + 1, j + 2]),
        name="S")


def c_stencil1d(A):
    return 0.33333 * (A[:-2] + A[1:-1] + A[2:])


def c_rowsum(A):
    return A.sum(axis=1)


def c_colsum(A):
    return A.sum(axis=0)


def c_fullsum(A):
    return A.sum()


def c_argmax(A):
    return kd.argmax(A, axis=1)


def c_rowmax(A):
    return A.max(axis=1)


def c_gelu_add(a, b):
    x = a + b
    return 0.5 * x * (1.0 + kd.erf(x * 0.7071067811865476))


def c_add(a, b):
    return a + b


def c_transpose(A):
    return A.T + 1.0


def c_cumsum_rows(A):
    return kd.cumsum(A, axis=1)


def c_cumsum_1d(v):
    return kd.cumsum(v)


def c_cummax_cols(A):
    return kd.cummax(A, axis=0)


def c_sort_rows(A):
    return kd.sort(A, axis=1)


def c_argsort_rows(A):
    return kd.argsort(A, axis=1)


def c_var(A):
    return A.var(axis=1)


def c_where_relu(A, b):
    return kd.where(A + b > 0, A + b, 0.0)


def c_outer(u, v):
    return kd.outer(u, v)


def c_bmm(A, B):
    return A @ B


F32 = "float32"


def _t(*shape, dtype=F32):
    return TensorSpec(shape, dtype)


def _a(*shape, dtype=F32):
    return np.zeros(shape, dtype)


# name, fn, specs (TensorSpecs, or arrays: the signature of a call with them)
CORPUS = (
    ("softmax", c_softmax, (_t(256, 1000),)),
    ("softmax_sym", c_softmax, (_t("n", "m"),)),
    ("layernorm", c_layernorm, (_t(512, 768),)),
    ("matmul", c_matmul, (_t(512, 512), _t(512, 512))),
    ("matmul_odd", c_matmul, (_t(300, 200), _t(200, 100))),
    ("matvec", c_matvec, (_t(1024, 1000), _t(1000))),
    ("bmm", c_bmm, (_t(8, 64, 64), _t(8, 64, 64))),
    ("conv3", c_conv3, (_t(1024, 1024), _t(3, 3))),
    ("conv3_sym", c_conv3, (_t("n", "m"), _t(3, 3))),
    ("stencil5", c_stencil5, (_t(512, 512),)),
    ("stencil1d", c_stencil1d, (_t(100000),)),
    ("rowsum", c_rowsum, (_t(1024, 1000),)),
    ("colsum", c_colsum, (_t(1024, 1000),)),
    ("fullsum", c_fullsum, (_t(1 << 20),)),
    ("fullsum2d", c_fullsum, (_t(1000, 1000),)),
    ("argmax", c_argmax, (_t(1024, 1000),)),
    ("rowmax", c_rowmax, (_t("n", "m"),)),
    ("gelu_add", c_gelu_add, (_t(1 << 20), _t(1 << 20))),
    ("add2d", c_add, (_t(1000, 1000), _t(1000, 1000))),
    ("add_bcast", c_add, (_t(1000, 1000), _t(1000))),
    ("transpose", c_transpose, (_t(512, 1000),)),
    ("cumsum_rows", c_cumsum_rows, (_t(256, 1000),)),
    ("cumsum_1d", c_cumsum_1d, (_t(1 << 16),)),
    ("cummax_cols", c_cummax_cols, (_t(300, 200),)),
    ("sort_rows", c_sort_rows, (_t(64, 32),)),
    ("argsort_rows", c_argsort_rows, (_t(64, 20),)),
    ("var", c_var, (_t(256, 1000),)),
    ("where_relu", c_where_relu, (_t(500, 300), _t(300))),
    ("outer", c_outer, (_t(1000), _t(700))),
    ("layernorm_f64", c_layernorm, (_t(100, 300, dtype="float64"),)),
    # arrays, not specs: the signature and size classes a call sees (what a first call lowers)
    ("softmax_call", c_softmax, (_a(256, 1000),)),
    ("layernorm_call", c_layernorm, (_a(512, 768),)),
    ("matmul_call", c_matmul, (_a(512, 512), _a(512, 512))),
    ("rowsum_call", c_rowsum, (_a(1024, 1000),)),
    ("add_call", c_add, (_a(1000, 1000), _a(1000, 1000))),
    ("conv3_call", c_conv3, (_a(1024, 1024), _a(3, 3))),
    ("cumsum_call", c_cumsum_rows, (_a(256, 1000),)),
    ("matmul16_call", c_matmul, (_a(512, 512, dtype="float16"), _a(512, 512, dtype="float16"))),
)


CLOCK = time.perf_counter


def _backend(name):
    """The installed backend ``name``, else this checkout's ``kdsl_<name>`` (not installed)."""
    from kdsl.backends import registry
    try:
        return registry.get_backend(name)
    except Exception:
        import importlib
        registry.register_backend(name, importlib.import_module(f"kdsl_{name}").backend)
        return registry.get_backend(name)


def stage_times(fn, specs, backend):
    """``(code, {stage: seconds})`` of one fresh compile of ``fn`` for ``specs`` up to source."""
    from kdsl.runtime import dispatch
    from kdsl.runtime.signature import signature_from_specs
    be = _backend(backend)
    k = kd.kernel(fn)
    t0 = CLOCK()
    if isinstance(specs[0], np.ndarray):     # as Kernel.source(arrays) does (runtime.inspection)
        import dataclasses
        from kdsl.runtime.signature import signature_from_args, size_classes
        sig = signature_from_args(specs, k.arg_names, k.constants, k.specialize, None)
        if be.spec.size_classes:
            sig = dataclasses.replace(sig, size_classes=size_classes(specs))
    else:
        sig = signature_from_specs(list(specs))
    graph = k._graph(sig)
    t1 = CLOCK()
    req = dispatch.prepare(k, be, sig, graph)
    t2 = CLOCK()
    func = be.lower(req)
    t3 = CLOCK()
    if backend == "cuda":
        from kdsl_cuda.backend import generate
        code = generate(func).source
    else:
        code = be._generate(func).ir
    t4 = CLOCK()
    return code, {"trace": t1 - t0, "schedule": t2 - t1, "lower": t3 - t2, "codegen": t4 - t3}


def corpus(out_dir, reps, only, backends):
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
    stages = ("trace", "schedule", "lower", "codegen")
    total = dict.fromkeys(stages, 0.0)
    print(f"{'case':16} {'backend':8} " + " ".join(f"{s:>9}" for s in stages) + f" {'all ms':>9}")
    for name, fn, specs in CORPUS:
        if only and name not in only:
            continue
        for be in backends:
            best, code = None, None
            for _ in range(reps):
                code, t = stage_times(fn, specs, be)
                best = t if best is None else {s: min(best[s], t[s]) for s in stages}
            for s in stages:
                total[s] += best[s]
            print(f"{name:16} {be:8} " + " ".join(f"{best[s] * 1e3:9.2f}" for s in stages)
                  + f" {sum(best.values()) * 1e3:9.2f}", flush=True)
            if out_dir:
                with open(os.path.join(out_dir, f"{name}.{be}.txt"), "w") as f:
                    f.write(code)
    print(f"{'TOTAL':16} {'':8} " + " ".join(f"{total[s] * 1e3:9.2f}" for s in stages)
          + f" {sum(total.values()) * 1e3:9.2f}")


# a fresh process's first compile; run as ``python3 -c COLD_CHILD <root> <mode>``, prints JSON
COLD_CHILD = r"""
import json, sys, time
clock = getattr(time, sys.argv[3])
t_start = clock()
sys.path.insert(0, sys.argv[1])
mode = sys.argv[2]
import numpy as np
t_np = clock()
import kdsl as kd
from kdsl import compile_log
t_kdsl = clock()
before = set(sys.modules)
backend = "cpu" if mode.startswith("cpu") else "cuda"
from kdsl.backends import registry
be = registry.get_backend(backend)
t_be = clock()
x = np.random.default_rng(0).random((256, 1000), dtype=np.float32)

@kd.kernel
def softmax(x):
    e = kd.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)

def timed(owner, attr, name):
    plain = getattr(owner, attr)
    def run(*a, **k):
        with compile_log.stage(name):
            return plain(*a, **k)
    setattr(owner, attr, run)

import types
compile_log.time = types.SimpleNamespace(perf_counter=clock)   # (--cpu-time: stages in CPU time)
if backend == "cuda":      # the CUDA text generation as a stage of its own
    import kdsl_cuda.backend as cb
    timed(cb, "generate", "codegen")
elif mode == "cpu":        # (a call times it itself)
    timed(type(be), "_generate", "codegen")
import kdsl.runtime.inspection as insp     # source(): the schedule is made there
timed(insp, "prepare", "schedule")
rec = compile_log._local.rec = {"times": {}, "notes": [], "_stack": []}
finish = compile_log._finish
compile_log._finish = lambda kernel, key, b, r, total: rec["times"].update(r["times"])
t0 = clock()
if mode == "cpu-call":
    softmax(x, backend="cpu")
else:
    softmax.source(x, backend=backend)
t1 = clock()
times = rec["times"]
out = {"numpy import": t_np - t_start, "kdsl import": t_kdsl - t_np, "backend load": t_be - t_kdsl,
       **{s: times.get(s, 0.0) for s in compile_log.STAGES if s in times},
       "other": t1 - t0 - sum(times.values()), "first compile": t1 - t0,
       "python total": t1 - t_np, "modules": len(set(sys.modules) - before)}
print(json.dumps(out))
"""


def cold(runs, modes):
    """Median over ``runs`` fresh processes of each part of a first softmax compile, per mode."""
    import json
    import statistics
    import subprocess
    import tempfile
    root = os.path.dirname(HERE)
    for mode in modes:
        rows = []
        for _ in range(runs):
            with tempfile.TemporaryDirectory() as cache:
                env = dict(os.environ, KDSL_CACHE_DIR=cache)
                env.pop("PYTHONDONTWRITEBYTECODE", None)
                clock = "process_time" if CLOCK is time.process_time else "perf_counter"
                r = subprocess.run([sys.executable, "-c", COLD_CHILD, root, mode, clock], env=env,
                                   capture_output=True, text=True, check=True)
                rows.append(json.loads(r.stdout.strip().splitlines()[-1]))
        keys = [k for k in rows[0] if k != "modules"]
        print(f"{mode} (median of {runs} fresh processes, ms):")
        for k in keys:
            vals = [r.get(k, 0.0) * 1e3 for r in rows]
            print(f"  {k:16} {statistics.median(vals):8.1f}   "
                  + " ".join(f"{v:.1f}" for v in vals))
        print(f"  {'modules':16} {statistics.median(r['modules'] for r in rows):8.0f}   "
              "(imported by the backend load and the first compile)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", metavar="DIR", nargs="?", const="", default=None,
                    help="lower the corpus (write the generated code to DIR when given)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--backends", default="cuda,cpu")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time with the process's CPU time (a machine shared with other work)")
    ap.add_argument("--cold", type=int, metavar="N", default=0,
                    help="fresh processes per mode: a first softmax's cold compile (medians)")
    ap.add_argument("--modes", default="cuda,cpu,cpu-call", help="--cold: what each process does")
    a = ap.parse_args(argv)
    if a.cold:
        cold(a.cold, a.modes.split(","))
        return
    if a.cpu_time:
        global CLOCK
        CLOCK = time.process_time
    if a.corpus is not None:
        only = set(filter(None, a.only.split(",")))
        corpus(a.corpus, a.reps, only, a.backends.split(","))
        return
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
