"""Compile logging: ``logging.getLogger("kdsl")`` hears of every compile, its stage timings and
why it happened.

A compile (``Kernel._miss`` -> ``_build``) runs inside ``compiling(kernel, key, backend)``;
the pipeline's stages time themselves with ``stage(name)`` wherever they run: ``trace``
(kernel.py), ``schedule`` and ``backend compile`` (runtime/dispatch.py), ``lower``
(``CompileRequest.lower``), ``codegen`` (the cpu backend).  Times are exclusive: a stage
nested in another (``lower`` inside ``backend compile``) is not counted twice.  At the end:

- DEBUG ``kdsl: compiling <kernel> for <backend>: <reason>`` when it starts;
- INFO ``kdsl: compiled <kernel> for <backend> in 12.3 ms (trace 1.0, schedule 0.2, lower
  4.1, codegen 1.0, backend compile 6.0 ms; object code from the disk cache); <reason>``.

The reason compares the new specialisation's key with the kernel's earlier ones: ``first
compile``, ``schedule added``, ``new backend 'cpu' (had: 'numpy')``, or which argument's
class, dtype, shape class (rank, size-1 dims) or layout changed.  ``logging`` is never imported
here: a process that has not imported it has no handler that could hear these records.
"""
from __future__ import annotations

import contextlib
import sys
import threading
import time
import weakref

import numpy as np

_local = threading.local()
#: kernel -> (schedule version, [keys compiled, oldest first]); weak: kernels may be dropped
_history: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_hist_lock = threading.Lock()
STAGES = ("trace", "schedule", "lower", "codegen", "backend compile")


@contextlib.contextmanager
def stage(name: str):
    """Time the block as stage ``name`` of the compile running in this thread (if any)."""
    rec = getattr(_local, "rec", None)
    if rec is None:
        yield
        return
    stack = rec["_stack"]
    stack.append(0.0)                       # time spent in nested stages
    t0 = time.perf_counter()
    try:
        yield
    finally:
        dt = time.perf_counter() - t0
        inner = stack.pop()
        rec["times"][name] = rec["times"].get(name, 0.0) + dt - inner
        if stack:
            stack[-1] += dt


def note(text: str) -> None:
    """Add a remark to the log line of the compile running in this thread (e.g. a cache hit)."""
    rec = getattr(_local, "rec", None)
    if rec is not None:
        rec["notes"].append(text)


@contextlib.contextmanager
def compiling(kernel, key: tuple, backend):
    """The block compiles ``kernel`` for ``key``; logs it when a stage ran inside it (another
    thread may have compiled the key first, then nothing is logged)."""
    prev = getattr(_local, "rec", None)
    rec = _local.rec = {"times": {}, "notes": [], "_stack": []}
    t0 = time.perf_counter()
    try:
        yield
    finally:
        _local.rec = prev
        if rec["times"]:
            _finish(kernel, key, backend, rec, time.perf_counter() - t0)


def _finish(kernel, key, backend, rec, total) -> None:
    reason = _reason(kernel, key)       # recorded either way: later reasons compare with it
    logging = sys.modules.get("logging")
    if logging is None:
        # nothing imported logging, so nothing configured it: the root logger's WARNING level
        # drops these DEBUG/INFO records, and importing logging to drop them costs ~2.5 ms of
        # a fresh process's first call
        return
    log = logging.getLogger("kdsl")
    name = getattr(kernel, "__name__", "kernel")
    bname = backend if isinstance(backend, str) else backend.spec.name
    log.debug("kdsl: compiled %s for %s because: %s", name, bname, reason)
    times = ", ".join(f"{s} {rec['times'][s] * 1e3:.1f}" for s in STAGES if s in rec["times"])
    extra = "".join(f"; {x}" for x in rec["notes"])
    log.info("kdsl: compiled %s for %s in %.1f ms (%s ms%s); %s", name, bname, total * 1e3,
             times, extra, reason, extra={"kdsl_kernel": name, "kdsl_backend": bname,
                                          "kdsl_times": dict(rec["times"]), "kdsl_reason": reason})


def _reason(kernel, key) -> str:
    """Why ``key`` needed a compile, from the kernel's earlier keys (and records it)."""
    version = getattr(kernel, "_version", 0)
    try:
        with _hist_lock:
            old = _history.get(kernel)
            if old is None or old[0] != version:
                _history[kernel] = (version, [key])
                return "first compile" if old is None else "schedule added (earlier specialisations dropped)"
            keys = old[1]
            keys.append(key)
            del keys[:-32]                  # the recent ones are enough to explain a change
            keys = keys[:-1]
    except TypeError:                       # not weak-referenceable
        return "new specialisation"
    same = [k for k in keys if k[:1] == key[:1]]
    if not same:
        had = ", ".join(sorted({repr(k[0]) for k in keys}))
        return f"new backend {key[0]!r} (had: {had})"
    # the nearest earlier key explains the change best (fewest differing parts; ties: the latest)
    last = min(reversed(same), key=lambda k: _distance(k, key))
    if len(last) < 2 or last[1] != key[1]:
        return "the backend registry changed (a backend was registered)"
    names = list(getattr(kernel, "arg_names", ()))
    diffs = []
    for i, (a, b) in enumerate(zip(last[2:], key[2:])):
        if a == b:
            continue
        arg = f"argument {names[i]!r}" if i < len(names) else ("out=" if i == len(names)
                                                               else "the sizes' classes")
        diffs.append(f"{arg}: {_describe_change(a, b)}")
    if len(last) != len(key):
        diffs.append("out= given" if len(key) > len(last) else "out= not given")
    return "new signature: " + ("; ".join(diffs) or "an equal key")


def _distance(k1, k2) -> int:
    """How many parts of two keys differ (an array's dtype, shape class and layout each count)."""
    d = abs(len(k1) - len(k2))
    for a, b in zip(k1, k2):
        if a != b:
            d += sum(x != y for x, y in zip(a, b)) if _is_nd(a) and _is_nd(b) else 3
    return d


def _describe_change(a, b) -> str:
    """What differs between two argument keys (see callplan.key_function)."""
    if _is_nd(a) and _is_nd(b):
        parts = []
        if a[0] != b[0]:
            parts.append(f"dtype {a[0]} -> {b[0]}")
        if a[1] != b[1]:
            parts.append(f"shape class {_shape_class(a[1])} -> {_shape_class(b[1])}")
        if a[2] != b[2]:
            parts.append("layout " + ("contiguous -> strided" if a[2] else "strided -> contiguous"))
        return ", ".join(parts)
    ca, cb = _cls(a), _cls(b)
    if ca != cb:
        return f"class {ca} -> {cb}"
    return f"{a!r} -> {b!r}"


def _is_nd(k) -> bool:
    return type(k) is tuple and len(k) == 3 and isinstance(k[0], np.dtype)


def _shape_class(s) -> str:
    if type(s) is int:
        return f"rank {s}"
    if type(s) is tuple and all(type(x) is bool for x in s):
        return f"rank {len(s)}, size-1 dims {[i for i, x in enumerate(s) if x]}"
    return f"shape {s}"


def _cls(k) -> str:
    if _is_nd(k):
        return "numpy.ndarray"
    if type(k) is tuple and k and isinstance(k[0], type):
        return k[0].__name__
    if type(k) is tuple and len(k) > 1 and k[0] == "const":
        return f"constant {getattr(k[1], '__name__', k[1])}"
    return type(k).__name__


__all__ = ["stage", "note", "compiling", "STAGES"]
