"""Cross-thread reduction cases for the CUDA codegen (shared by the NVRTC tests and the device
tests): every built-in combiner, traced with ``kd.*`` reductions, and schedules whose groups
cover each path of ``kdsl_cuda.codegen.cross_thread``: butterflies inside a warp (one group per
warp, several groups per warp), segments of groups that are not a power of two or span warps
(partial last warp included), whole-warp groups combined by a second butterfly, 2-D groups
(x and y reduced) and groups strided across warps (y reduced only)."""
import numpy as np

import kdsl as kd

#: reduction -> (numpy oracle over axis, dtypes); argmax/argmin return int64
REDUCTIONS = {
    "sum": (lambda a, ax: a.astype(np.float64).sum(ax) if a.dtype.kind == "f" else a.sum(ax),
            ("float32", "float64", "int32", "int64")),
    "prod": (lambda a, ax: np.prod(a.astype(np.float64), ax), ("float64",)),
    "max": (lambda a, ax: a.max(ax), ("float32", "int32", "uint8")),
    "min": (lambda a, ax: a.min(ax), ("float32", "int16")),
    "any": (lambda a, ax: a.any(ax), ("bool",)),
    "all": (lambda a, ax: a.all(ax), ("bool",)),
    "argmax": (lambda a, ax: a.argmax(ax), ("float32", "float64", "int32")),
    "argmin": (lambda a, ax: a.argmin(ax), ("float32",)),
}


def reduction_fn(kind: str, axis: int):
    fn = getattr(kd, kind)

    def f(X):
        return fn(X, axis=axis)
    f.__name__ = f"{kind}_axis{axis}"
    return f


def rows_x(tx: int, ty: int = 1):
    """Row reductions (axis 1): rows over blockIdx.x x threadIdx.y (ty rows per block), each
    row's reduction split over threadIdx.x (tx): a block (tx, ty), x reduced, groups of tx."""
    def sched(s):
        B = s.outputs[0]
        if ty > 1:
            io, ii = B.split(B.axes[0], factor=ty)
            B.bind(io, "blockIdx.x")
            B.bind(ii, "threadIdx.y")
            rows = (io, ii)
        else:
            B.bind(B.axes[0], "blockIdx.x")
            rows = (B.axes[0],)
        ko, ki = B.split(B.reduce_axes[0], factor=tx)
        B.reorder(*rows, ki, ko)
        B.bind(ki, "threadIdx.x")
    sched.__name__ = f"rows_x_{tx}x{ty}"
    return sched


def rows_xy(tx: int, ty: int):
    """Row reductions, one row per block, split over threadIdx.y x threadIdx.x: 2-D groups."""
    def sched(s):
        B = s.outputs[0]
        B.bind(B.axes[0], "blockIdx.x")
        ko, k1 = B.split(B.reduce_axes[0], factor=tx * ty)
        k1, k2 = B.split(k1, factor=tx)
        B.reorder(B.axes[0], k1, k2, ko)
        B.bind(k1, "threadIdx.y")
        B.bind(k2, "threadIdx.x")
    sched.__name__ = f"rows_xy_{tx}x{ty}"
    return sched


def cols_y(tx: int, ty: int):
    """Column reductions (axis 0): columns over blockIdx.x x threadIdx.x, each column's
    reduction split over threadIdx.y: groups strided across the block (y reduced only)."""
    def sched(s):
        B = s.outputs[0]
        jo, ji = B.split(B.axes[0], factor=tx)
        ro, ri = B.split(B.reduce_axes[0], factor=ty)
        B.reorder(jo, ji, ri, ro)
        B.bind(jo, "blockIdx.x")
        B.bind(ji, "threadIdx.x")
        B.bind(ri, "threadIdx.y")
    sched.__name__ = f"cols_y_{tx}x{ty}"
    return sched


#: (schedule, axis reduced, the codegen path it exercises)
SCHEDULES = [
    (rows_x(32), 1, "butterfly"),            # one warp, one group
    (rows_x(8, 32), 1, "butterfly"),         # groups of 8 lanes, 4 per warp (brief's example)
    (rows_x(4, 6), 1, "butterfly"),          # 24 threads: a partial warp of 6 groups
    (rows_x(48), 1, "segmented"),            # 48 = a warp and a half
    (rows_x(12, 5), 1, "segmented"),         # groups of 12 straddling warps, partial last warp
    (rows_x(96), 1, "whole-warps"),          # 3 warps: second butterfly over 4 lanes
    (rows_x(1024), 1, "whole-warps"),        # 32 warps
    (rows_x(64, 4), 1, "whole-warps"),       # 4 groups of 2 warps
    (rows_xy(8, 4), 1, "butterfly"),         # 2-D group of 32
    (rows_xy(16, 4), 1, "whole-warps"),      # 2-D group of 64
    (rows_xy(6, 5), 1, "segmented"),         # 2-D group of 30 (not a power of two)
    (cols_y(32, 8), 0, "strided"),           # y reduced, x spatial: strided groups
    (cols_y(1, 64), 0, "whole-warps"),       # x of extent 1: y groups are contiguous
    (cols_y(4, 8), 0, "strided"),
]


def data(rng, shape, dtype):
    """Random inputs of ``dtype`` with ties and (for floats) no NaNs."""
    if dtype == "bool":
        return rng.random(shape) < (0.9 if rng.random() < 0.5 else 0.1)
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -50), min(info.max, 50), shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)
