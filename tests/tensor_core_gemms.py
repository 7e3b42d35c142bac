"""Tensor-core GEMM schedules of traced ``C = A @ B`` kernels that several test folders share
(no graph-building helpers: importable from any test)."""
import kdsl as kd


def wgmma64_padded_gemm(s, stages=None):
    """A wgmma(64) GEMM on a traced ``C = A @ B``: 64x64 tiles, a warp row per threadIdx.y,
    operands in padded shared caches at the 64-deep K loop fetched by a 4x32 block;
    ``stages`` maps "A"/"B" to a pipeline depth (> 1: pipelined).  The GPU-schedule fuzzer's
    form (case 24:27, F37)."""
    w = kd.intrin.wgmma(64)
    C = s["C"]
    CF = s.cache_write(C, "wmma.accumulator")
    bi, bj, ii, jj = C.tile(C.axes[0], C.axes[1], 64, 64)
    wi, ti = C.split(ii, factor=16)
    C.reorder(bi, bj, wi, ti, jj)
    C.bind(bi, "blockIdx.y")
    C.bind(bj, "blockIdx.x")
    C.bind(wi, "threadIdx.y")
    CF.compute_at(C, wi)
    ci, cj = CF.axes
    ko, kr = CF.split(CF.reduce_axes[0], factor=64)
    kio, ki = CF.split(kr, factor=16)
    CF.reorder(ko, kio, ci, cj, ki)
    CF.unroll(kio)
    CF.tensorize(ci, w)
    C.tensorize(ti, w)
    for name in ("A", "B"):
        X = s.cache_read(name, "shared", [CF], pad=True)
        X.compute_at(CF, ko)
        _, t = X.split(X.fuse(*X.axes), factor=128)
        y, x = X.split(t, factor=32)
        X.bind(y, "threadIdx.y")
        X.bind(x, "threadIdx.x")
        if (stages or {}).get(name, 1) > 1:
            X.pipeline(stages[name])
