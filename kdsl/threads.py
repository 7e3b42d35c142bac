"""The ``cpu`` backend's thread count: one process-wide setting, read by kernels at every call.

Precedence, highest first:

1. ``kd.set_num_threads(n)`` / ``with kd.num_threads(n):`` (and threadpoolctl's
   ``threadpool_limits``, which calls the same setter through kdsl_cpu.threadpool);
2. ``KDSL_NUM_THREADS``;
3. ``OMP_NUM_THREADS`` (its first entry: ``"4,2"`` means 4), as Dask's nanny, joblib's
   workers and threadpoolctl set it;
4. the CPUs the process may run on (``os.sched_getaffinity``), else ``os.cpu_count()``.

The setting is **process-wide**, not per thread: ``num_threads(n)`` sets it for every
thread while the block runs and puts the previous setting back when it ends (nested
blocks restore in order; blocks in several threads at once overwrite each other).
Compiled kernels do not hold a count of their own: the cpu backend's runtime tables
(kdsl_cpu.parallel) are updated in place when the setting changes, so the next call of
any compiled kernel uses it, without recompiling.  The environment variables are read
when the first cpu kernel of the process compiles, at every later compile, and by
``get_num_threads()``.  Invalid values raise ``ThreadCountError`` naming the variable.
"""
from __future__ import annotations

import contextlib
import threading

from . import config
from .errors import ThreadCountError


_lock = threading.Lock()
_override: int | None = None
_listeners: list = []
_last: int | None = None


def _check(n, what: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ThreadCountError(f"{what} must be a positive int, got {n!r}",
                               hint="pass a thread count of 1 or more, or None to go back "
                               "to KDSL_NUM_THREADS / OMP_NUM_THREADS / the usable CPUs")
    return n


def resolve() -> int:
    """The thread count now: the explicit setting, else the environment (config.num_threads)."""
    o = _override
    return o if o is not None else config.num_threads()


def _publish(strict: bool = True) -> int | None:
    """Resolve the count and tell the listeners (the cpu backend's runtime tables) if it changed.

    ``strict=False`` (the setters): an invalid variable is not reported here but at the next
    compile or ``get_num_threads()``, so that resetting to None or leaving a block never
    raises about the environment."""
    global _last
    try:
        n = resolve()
    except ThreadCountError:
        if strict:
            raise
        _last = None
        return None
    if n != _last:
        _last = n
        for fn in list(_listeners):
            fn(n)
    return n


def on_change(fn) -> None:
    """Call ``fn(count)`` whenever the resolved count changes (kdsl_cpu.parallel uses it)."""
    _listeners.append(fn)


def refresh() -> int:
    """Re-read the environment and publish the count (done at every compile)."""
    with _lock:
        return _publish()


def set_num_threads(n: int | None) -> None:
    """Set the ``cpu`` backend's worker threads per parallel loop for the whole process
    (``None``: back to the environment / the usable CPUs).  Takes effect at the next call of
    every kernel, compiled or not."""
    global _override
    if n is not None:
        _check(n, "set_num_threads(n): n")
    with _lock:
        _override = n
        _publish(strict=False)


def get_num_threads() -> int:
    """The thread count the next ``cpu`` kernel call will use (re-reads the environment)."""
    return refresh()


@contextlib.contextmanager
def num_threads(n: int | None):
    """``with kd.num_threads(n):`` -- the process-wide count is ``n`` inside the block and what it
    was before after it (see the module docstring: process-wide, not per thread)."""
    global _override
    if n is not None:
        _check(n, "num_threads(n): n")
    with _lock:
        prev, _override = _override, n
        _publish(strict=False)
    try:
        yield
    finally:
        with _lock:
            _override = prev
            _publish(strict=False)


__all__ = ["ThreadCountError", "set_num_threads", "get_num_threads", "num_threads", "refresh",
           "resolve", "on_change"]
