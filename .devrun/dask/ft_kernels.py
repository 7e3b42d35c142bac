"""Kernels and probes that .devrun/dask/first_task.py sends to fresh Dask workers: a module of
its own, so that a worker imports kdsl when it unpickles its first task (and records how long
that import took), as a user's module of kernels would."""
import sys
import time

#: kdsl was imported before this module: by Dask itself, through kdsl's ``dask.sizeof``
#: entry point (``kdsl.dask.tokens``), when the worker imported ``dask.sizeof``
PRELOADED = "kdsl" in sys.modules
_T0 = time.perf_counter()
import numpy as np  # noqa: E402
_T1 = time.perf_counter()
import kdsl as kd  # noqa: E402
_T2 = time.perf_counter()


@kd.kernel
def rowsoftmax(A):
    e = np.exp(A - A.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@kd.kernel
def rowsum(A):
    return A.sum(axis=1)


def imports():
    """Seconds this process spent importing numpy (if first here) and kdsl for this module."""
    return {"import_numpy_s": _T1 - _T0, "import_kdsl_s": _T2 - _T1,
            "kdsl_preloaded": PRELOADED}


def loaded():
    """Which heavy modules the process has loaded (a warm path should load none of LLVM)."""
    import sys
    names = ("llvmlite.binding", "kdsl.passes", "kdsl.codegen", "logging", "kdsl_cpu",
             "kdsl_cuda", "kdsl.dask.derive")
    return {n: n in sys.modules for n in names}


def direct(x, backend):
    """The first and the second call of ``rowsoftmax`` on ``x`` in this process: the first
    pays kdsl's trace / key / disk-cache load, the second only dispatch and computation."""
    t0 = time.perf_counter()
    rowsoftmax(x, backend=backend)
    t1 = time.perf_counter()
    after_first = loaded()
    t1b = time.perf_counter()
    rowsoftmax(x, backend=backend)
    t2 = time.perf_counter()
    rowsoftmax(x, backend=backend)      # (the cpu backend builds its fast launcher here)
    t3 = time.perf_counter()
    rowsoftmax(x, backend=backend)
    t4 = time.perf_counter()
    warm = min(t2 - t1b, t4 - t3)
    return {**imports(), "first_call_s": t1 - t0, "warm_call_s": warm,
            "calls_s": [t1 - t0, t2 - t1b, t3 - t2, t4 - t3],
            "kdsl_first_s": (t1 - t0) - warm, "loaded_after_first": after_first,
            "loaded_after_four": loaded(), "cache_stats": _stats(backend)}


def profiled(x, backend, top=25):
    """The first call of ``rowsoftmax`` in this process under cProfile: the functions with
    the most cumulative time (text), to see where kdsl's first-call time goes."""
    import cProfile
    import io
    import pstats
    pr = cProfile.Profile()
    pr.enable()
    rowsoftmax(x, backend=backend)
    pr.disable()
    buf = io.StringIO()
    pstats.Stats(pr, stream=buf).sort_stats("cumulative").print_stats(top)
    return buf.getvalue()


def _stats(backend):
    try:
        from kdsl.backends.registry import get_backend
        return dict(getattr(get_backend(backend), "stats", {}))
    except Exception as e:     # noqa: BLE001
        return {"error": repr(e)}


def stats(backend):
    """The backend's counters (compiled / lowered / cache hits) in this process."""
    return _stats(backend)
