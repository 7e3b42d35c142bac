"""Tensor-core matmul kernels for the cuda codegen tests (tests/cuda_codegen) and the H200
tests (tests/cuda/test_cuda_tensor_cores.py): one traced kernel per (input dtype, output
dtype, operand layouts) and one WMMA schedule family over the intrinsic's three shapes,
fragments loaded from global memory or from shared tiles (optionally pipelined: cp.async).
"""
import kdsl as kd


def matmul_kernel(dtype="float16", out="float32", trans_a=False, trans_b=False):
    """C = A @ B in float32 (``out`` float16: the accumulation in float16 too); A stored (n, k)
    or, ``trans_a``, (k, n) (a col-major operand); B (k, m) or, ``trans_b``, (m, k)."""
    acc = kd.float16 if out == "float16" else kd.float32

    @kd.kernel
    def mm(A, B):
        n_ = A.shape[1] if trans_a else A.shape[0]
        k = A.shape[0] if trans_a else A.shape[1]
        m = B.shape[0] if trans_b else B.shape[1]
        r = kd.reduce_axis(k, name="r")

        def a(i):
            return (A[r, i] if trans_a else A[i, r]).astype(acc)

        def b(j):
            return (B[j, r] if trans_b else B[r, j]).astype(acc)
        return kd.compute((n_, m), lambda i, j: kd.sum(a(i) * b(j), axis=r), name="C")

    mm.tc_config = dict(dtype=dtype, out=out, trans_a=trans_a, trans_b=trans_b)
    return mm


def intrin(shape=(16, 16, 16), dtype="float16", out="float32", trans_a=False, trans_b=False):
    m, n, k = shape
    return kd.intrin.wmma(m, n, k, dtype=getattr(kd, dtype), acc_dtype=getattr(kd, out),
                          layout_a="col_major" if trans_a else "row_major",
                          layout_b="col_major" if trans_b else "row_major")


def tc_schedule(shape=(16, 16, 16), warps=(2, 2), tiles=(1, 1), shared=False, stages=None, **cfg):
    """Blocks of ``warps`` (y, x) warps on threadIdx.z/y, each computing ``tiles`` (y, x)
    m x n tiles of C, K in steps of 16; ``shared``: A and B staged in shared tiles per K step,
    copied by all the block's threads; ``stages``: those copies pipelined (cp.async)."""
    m, nn, kk = shape
    wy, wx = warps
    ty, tx = tiles
    w = intrin(shape, **cfg)
    ta, tb = cfg.get("trans_a", False), cfg.get("trans_b", False)

    def sched(s):
        C = s["C"]
        CF = s.cache_write(C, "wmma.accumulator")
        AF = s.cache_read("A", "wmma.matrix_a", [CF])
        BF = s.cache_read("B", "wmma.matrix_b", [CF])
        bi, bj, ii, jj = C.tile(C.axes[0], C.axes[1], m * wy * ty, nn * wx * tx)
        wi, ti = C.split(ii, factor=m * ty)
        wj, tj = C.split(jj, factor=nn * tx)
        tio, tii = C.split(ti, factor=m)
        tjo, tji = C.split(tj, factor=nn)
        C.reorder(bi, bj, wi, wj, tio, tjo, tii, tji)
        C.bind(bi, "blockIdx.y")
        C.bind(bj, "blockIdx.x")
        C.bind(wi, "threadIdx.z")
        C.bind(wj, "threadIdx.y")
        CF.compute_at(C, wj)
        ci, cj = CF.axes
        (ck,) = CF.reduce_axes
        cio, cii = CF.split(ci, factor=m)
        cjo, cji = CF.split(cj, factor=nn)
        ko, ki = CF.split(ck, factor=kk)
        CF.reorder(ko, cio, cjo, cii, cji, ki)
        AF.compute_at(CF, ko)
        BF.compute_at(CF, ko)
        # the operand's tile rows (A: the m axis, B: the k axis) and columns in its storage
        a_rows = 1 if ta else 0
        ao, ai = AF.split(AF.axes[a_rows], factor=m)
        AF.reorder(ao, *([ai, AF.axes[1]] if a_rows == 0 else [AF.axes[0], ai]))
        AF.tensorize(ai if a_rows == 0 else AF.axes[0], w)
        b_cols = 0 if tb else 1
        bo, bi_ = BF.split(BF.axes[b_cols], factor=nn)
        BF.reorder(bo, *([BF.axes[0], bi_] if b_cols == 1 else [bi_, BF.axes[1]]))
        BF.tensorize(BF.axes[0] if b_cols == 1 else bi_, w)
        CF.tensorize(cii, w)
        C.tensorize(tii, w)
        if shared:
            for src, F in (("A", AF), ("B", BF)):
                X = s.cache_read(src, "shared", [F])
                X.compute_at(CF, ko)
                f = X.fuse(*X.axes)
                o, t = X.split(f, factor=32 * wx * wy)
                z, t = X.split(t, factor=32 * wx)
                y, x = X.split(t, factor=32)
                X.bind(z, "threadIdx.z")
                X.bind(y, "threadIdx.y")
                X.bind(x, "threadIdx.x")
                if stages:
                    X.pipeline(stages)

    return sched


#: name -> (kernel config, WMMA shape, schedule options)
CASES = {
    "f16_global": (dict(), (16, 16, 16), {}),
    "f16_global_64": (dict(), (16, 16, 16), dict(tiles=(2, 2))),
    "f16_shared": (dict(), (16, 16, 16), dict(shared=True)),
    "f16_cp_async": (dict(), (16, 16, 16), dict(shared=True, stages=2, tiles=(2, 1))),
    "f16_3_stages": (dict(), (16, 16, 16), dict(shared=True, stages=3)),
    "bf16_shared": (dict(dtype="bfloat16"), (16, 16, 16), dict(shared=True, stages=2)),
    "f16_acc16": (dict(out="float16"), (16, 16, 16), dict(shared=True)),
    "f16_32x8": (dict(), (32, 8, 16), dict(shared=True)),
    "f16_8x32_colmajor": (dict(trans_a=True, trans_b=True), (8, 32, 16), dict(shared=True)),
    "f16_colmajor_global": (dict(trans_a=True, trans_b=True), (16, 16, 16), {}),
    "f16_colmajor_a": (dict(trans_a=True), (16, 16, 16), dict(shared=True, stages=2)),
    "bf16_colmajor_b": (dict(dtype="bfloat16", trans_b=True), (16, 16, 16), dict(shared=True)),
}


def kernel(case):
    """The matmul kernel of ``CASES[case]`` with its cuda schedule."""
    cfg, shape, kw = CASES[case]
    mm = matmul_kernel(**cfg)
    mm.schedule("cuda")(tc_schedule(shape, **kw, **cfg))
    return mm


def inputs(rng, mm, n_, k, m):
    """Random A, B for kernel ``mm`` (its stored shapes) as numpy arrays of its input dtype
    (bfloat16 through ml_dtypes where numpy has it, else kdsl's own)."""
    import numpy as np
    cfg = mm.tc_config
    sa = (k, n_) if cfg["trans_a"] else (n_, k)
    sb = (m, k) if cfg["trans_b"] else (k, m)
    A, B = rng.standard_normal(sa), rng.standard_normal(sb)
    if cfg["dtype"] == "float16":
        return A.astype(np.float16), B.astype(np.float16)
    bf = kd.bfloat16.np_dtype
    return A.astype(bf), B.astype(bf)


def reference(mm, A, B):
    """float64 A @ B of the stored operands."""
    import numpy as np
    cfg = mm.tc_config
    a = A.astype(np.float64)
    b = B.astype(np.float64)
    return (a.T if cfg["trans_a"] else a) @ (b.T if cfg["trans_b"] else b)
