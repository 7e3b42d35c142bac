"""Autotuning: search a backend's schedule space on the device, keep the winners.

``kernel.tune(*example_args, backend=..., budget_s=..., trials=...)`` (search.py) compiles
candidate schedules -- sets of declarative hints from the backend's space (space.py) --,
checks each one's results against the numpy reference backend, times the correct ones on
the device and persists the fastest (store.py) under the kernel's key: graph, signature and
size class, backend, device model.  Every later compile of that key, in this process or any
other sharing the disk cache, uses the winner's hints instead of the default schedule.

``kd.tune.export(path)`` / ``kd.tune.load(path)`` write and read the winners as JSON, to ship
them with an application; ``KDSL_AUTOTUNE=1`` tunes on first call (small budget).
docs/tuning.md is the guide.  Importing this package is light (kdsl.kernel does, for the
compile path's look-up): the search and the spaces load when a search runs.
"""
from __future__ import annotations

from .store import entries, export, forget, load, tune_dir

__all__ = ["entries", "export", "forget", "load", "tune_dir", "TuneResult", "tune"]


def tune(kernel, *example_args, **kw):
    """``kernel.tune(*example_args, **kw)`` (kdsl.tune.search.tune)."""
    from .search import tune as _tune
    return _tune(kernel, *example_args, **kw)


def __getattr__(name):
    if name == "TuneResult":
        from .search import TuneResult
        return TuneResult
    raise AttributeError(f"module 'kdsl.tune' has no attribute {name!r}")
