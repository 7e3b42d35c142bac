"""Inputs of a call: sizes for the kernel's symbols, values per dtype, memory layouts.

Sizes include 0 and 1 (a size-1 dim is a different specialisation: broadcasting).
Values: small integers (and sometimes the whole range, extremes included);
floats on a dyadic grid (exact in every float type, so ties and exact
comparisons happen), uniform, spread over magnitudes, or with NaN/inf/-0.0.
Layouts: C order, Fortran order, every-other-element views of a bigger buffer
whose gaps hold garbage (a read outside the view shows), negative strides, an
offset (unaligned) start, and stride-0 broadcast views.
"""
from __future__ import annotations

import numpy as np

from . import fdtypes as fd

_SIZES = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 13, 16, 17, 24, 31, 33]
_SIZE_W = [2, 4, 6, 6, 6, 5, 4, 4, 4, 3, 3, 3, 2, 2, 1, 1, 1]
LAYOUTS = ("c", "f", "strided", "neg", "offset", "bcast")


_BIG = [64, 100, 127, 128, 255, 256, 257, 1000, 1023, 4096, 10007]
_BIG_W = [3, 2, 2, 3, 2, 2, 2, 1, 1, 1, 0.5]


def bind_sizes(rng, sym_min: dict, shapes_of, max_elems: int, tries: int = 30, big=False) -> dict:
    """Values for the size symbols (each >= its minimum) keeping every array under
    ``max_elems`` elements; ``shapes_of(binding)`` gives the arrays' shapes.  ``big``
    adds sizes past vector widths, unroll factors and tiles (for compiled backends)."""
    sizes = _SIZES + (_BIG if big else [])
    w = np.asarray(_SIZE_W + (_BIG_W if big else []), np.float64)
    for t in range(tries):
        cap = max(2, int((12000 if big else 40) * (0.8 ** t)))
        b = {}
        for name, lo in sym_min.items():
            ok = [(s, wt) for s, wt in zip(sizes, w) if lo <= s <= max(cap, lo)]
            s, wt = zip(*ok)
            b[name] = int(rng.choice(s, p=np.asarray(wt) / sum(wt)))
        if all(int(np.prod(sh)) <= max_elems for sh in shapes_of(b)):
            return b
    return {name: lo for name, lo in sym_min.items()}


def values(rng, shape, dtype: str, mode: str | None = None) -> np.ndarray:
    """Random values of ``dtype`` (mode: small/wide/edge for ints; dyadic/uniform/wide/special)."""
    size = int(np.prod(shape))
    if dtype == "bool":
        return np.asarray(rng.random(shape) < 0.5)     # a 0-d array, not a numpy scalar
    if fd.is_int(dtype):
        info = np.iinfo(dtype)
        mode = mode or rng.choice(["small", "wide", "edge"], p=[0.8, 0.15, 0.05])
        if mode == "small":
            lo = 0 if info.min == 0 else -8
            v = rng.integers(lo, 17 if info.min == 0 else 9, size)
        elif mode == "wide":
            v = rng.integers(info.min, info.max, size, endpoint=True, dtype=np.int64 if dtype != "uint8" else np.int64) \
                if dtype != "int64" else rng.integers(-2 ** 62, 2 ** 62, size)
        else:
            pool = np.array([info.min, info.max, 0, 1, info.min + 1, info.max - 1] +
                            ([-1] if info.min < 0 else []), dtype=np.int64 if dtype != "uint8" else np.int64)
            v = rng.choice(pool, size)
        return np.asarray(v).astype(dtype).reshape(shape)
    mode = mode or rng.choice(["dyadic", "uniform", "wide", "special"], p=[0.5, 0.33, 0.1, 0.07])
    if mode == "dyadic":
        v = rng.integers(-32, 33, size) / 8.0
    elif mode == "uniform":
        v = rng.uniform(-4, 4, size)
    elif mode == "wide":
        hi = 4 if dtype == "float16" else 12
        v = np.sign(rng.uniform(-1, 1, size)) * 10.0 ** rng.uniform(-hi / 2, hi / 2, size)
    else:
        v = rng.integers(-32, 33, size) / 8.0
        k = max(1, size // 6)
        pos = rng.choice(size, k) if size else []
        for p in pos:
            v[p] = rng.choice([np.nan, np.inf, -np.inf, -0.0])
    return v.astype(dtype).reshape(shape)


def layout(rng, arr: np.ndarray, kind: str | None = None) -> tuple[np.ndarray, str]:
    """``arr``'s values in a random memory layout: (view, layout name)."""
    if arr.ndim == 0 or arr.size == 0 and kind is None:
        return arr, "c"
    kind = kind or rng.choice(LAYOUTS, p=[0.4, 0.13, 0.15, 0.14, 0.08, 0.10])
    if kind == "f":
        return np.asfortranarray(arr), ("f" if arr.ndim >= 2 else "c")
    if kind == "strided":
        ax = int(rng.integers(arr.ndim))
        shape = list(arr.shape)
        shape[ax] = 2 * shape[ax] + 1
        buf = np.empty(shape, arr.dtype)
        buf[...] = _garbage(arr.dtype)
        sl = [slice(None)] * arr.ndim
        sl[ax] = slice(1, None, 2)
        buf[tuple(sl)] = arr
        return buf[tuple(sl)], "strided"
    if kind == "neg":
        ax = int(rng.integers(arr.ndim))
        return np.flip(np.flip(arr, ax).copy(), ax), "neg"
    if kind == "offset":
        buf = np.empty(arr.size + 1, arr.dtype)
        v = buf[1:].reshape(arr.shape)
        v[...] = arr
        return v, "offset"
    if kind == "bcast":
        big = [j for j, s in enumerate(arr.shape) if s > 1]
        if not big:
            return arr, "c"
        ax = int(rng.choice(big))
        idx = [slice(None)] * arr.ndim
        idx[ax] = slice(0, 1)
        src = arr[tuple(idx)].copy()
        b = np.broadcast_to(src, arr.shape)
        return b, "bcast"
    return np.ascontiguousarray(arr), "c"


def _garbage(d):
    if d == np.bool_:
        return True
    if d.kind == "f":
        return np.nan
    return 77
