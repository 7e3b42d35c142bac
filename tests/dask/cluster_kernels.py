"""Kernels the cluster tests send to workers: a module of its own, so that a worker imports
kdsl and numpy for them, not pytest and the test module."""
import os

import kdsl as kd


@kd.kernel
def rowsum(A):
    return A.sum(axis=1)


@kd.kernel
def scale(a, s):
    return a * s


def make_local(factor):
    """A kernel made in a function (pickled by value), capturing ``factor``."""
    @kd.kernel
    def scaled(a):
        return a * factor + 1.0
    return scaled


def probe():
    """(kdsl's thread count, OMP_NUM_THREADS) in the calling process."""
    from kdsl import threads
    return threads.get_num_threads(), os.environ.get("OMP_NUM_THREADS")


def cpu_stats():
    """The cpu backend's counters in the calling process (compiled, lowered, cache hits)."""
    from kdsl.backends.registry import get_backend
    return dict(get_backend("cpu").stats)
