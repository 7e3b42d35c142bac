"""The stencil register tile (kdsl_cuda/schedules/stencil.py) on the SIMT interpreter
(``interp-cuda``: race- and bounds-checked, NVRTC-compiled by the suite's hook) against numpy
in float64: 3x3, 5x5, 1x3, 3x1 windows over shapes that do and do not divide the tile, empty
and 1-row outputs, strided views, float64/16 and integer dtypes (numpy has no bfloat16); hints; and the code the 16384^2 float32
kernel gets (float2 window loads, float4 stores, a guard-free interior copy)."""
import numpy as np
import pytest

import kdsl as kd


def window(kh, kw):
    def conv(I, F):
        n, m = I.shape
        di, dj = kd.reduce_axis(kh, name="di"), kd.reduce_axis(kw, name="dj")
        return kd.compute((n - kh + 1, m - kw + 1),
                          lambda i, j: kd.sum(I[i + di, j + dj] * F[di, dj], axis=(di, dj)),
                          name="C")
    conv.__name__ = f"conv{kh}x{kw}"
    return conv


def np_conv(i, f):
    kh, kw = f.shape
    n, m = i.shape
    out = np.zeros((max(n - kh + 1, 0), max(m - kw + 1, 0)))
    for di in range(kh):
        for dj in range(kw):
            out += i[di:di + out.shape[0], dj:dj + out.shape[1]] * f[di, dj]
    return out


def data(rng, shape, dtype):
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-9, 10, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


TOL = {np.float32: 2e-5, np.float64: 1e-12, np.float16: 3e-2}


def check(kernel, i, f, **kw):
    got = np.asarray(kernel(i, f, backend="interp-cuda", **kw))
    want = np_conv(i.astype(np.float64), f.astype(np.float64))
    assert got.shape == want.shape
    if np.issubdtype(got.dtype, np.integer):
        np.testing.assert_array_equal(got, want.astype(got.dtype))
    else:
        t = TOL.get(got.dtype.type, 2e-5)
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=t, atol=t * max(1, kw.get("scale", 1)))


CONV3 = kd.kernel(window(3, 3))
CONV5 = kd.kernel(window(5, 5))
SHAPES = [(3, 3), (3, 40), (12, 135), (37, 9), (35, 134)]   # 1 x 1 and 1-row outputs too


@pytest.mark.parametrize("shape", SHAPES)
def test_3x3_float32(shape, rng):
    check(CONV3, data(rng, shape, np.float32), data(rng, (3, 3), np.float32))


@pytest.mark.parametrize("shape", [(5, 5), (13, 41), (21, 70)])
def test_5x5_float32(shape, rng):
    check(CONV5, data(rng, shape, np.float32), data(rng, (5, 5), np.float32))


@pytest.mark.parametrize("kh,kw", [(1, 3), (3, 1), (2, 2)])
@pytest.mark.parametrize("shape", [(3, 3), (34, 131)])
def test_other_windows(kh, kw, shape, rng):
    check(kd.kernel(window(kh, kw)), data(rng, shape, np.float32), data(rng, (kh, kw), np.float32))


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int32, np.int8])
def test_dtypes(dtype, rng):
    check(CONV3, data(rng, (35, 132), dtype), data(rng, (3, 3), dtype))


def test_strided_views(rng):
    big = data(rng, (40, 300), np.float32)
    f = data(rng, (3, 3), np.float32)
    check(CONV3, big[1::2, 3::3], f)           # both dims strided
    check(CONV3, big[:, 1:262], f)             # rows of odd offset: the scalar paths
    check(CONV3, big.T[:70, :33], f)           # a transpose
    check(CONV3, big[2:38, 4:260], data(rng, (4, 6), np.float32)[:3, ::2])


def test_empty_outputs(rng):
    f = data(rng, (3, 3), np.float32)
    for shape in [(2, 2), (2, 40), (40, 2)]:
        check(CONV3, data(rng, shape, np.float32), f)


@pytest.mark.parametrize("hints", [dict(threads=(16, 8), tile={"i": 16, "j": 64}), dict(unroll=2),
                                   dict(threads=64), dict(threads=(8, 4), tile={"j": 16})])
def test_hints(hints, rng):
    k = kd.kernel(kd.schedule("cuda", **hints)(window(3, 3)))
    check(k, data(rng, (19, 70), np.float32), data(rng, (3, 3), np.float32))


def _source_16384():
    a = (kd.TensorSpec((16384, 16384), kd.float32), kd.TensorSpec((3, 3), kd.float32))
    return CONV3.source(*a, backend="cuda"), str(CONV3.lower(*a, backend="cuda"))


def test_16384_float32_is_a_register_tile():
    pytest.importorskip("cuda.core")
    src, ir = _source_16384()
    assert "allocate I.local: float32[10, 6] local" in ir      # the window, 8 x 4 outputs
    assert "allocate F.local: float32[3, 3] local" in ir       # the weights
    assert "allocate C.local: float32[8, 4] local" in ir
    assert "block=(32, 4, 1)" in ir
    assert "const float2 kd_vl" in src and "float4 kd_vs" in src
    from kdsl_cuda.build import compile_ptx
    ptx = compile_ptx(src)
    assert ptx.count("ld.global.nc.v2.f32") >= 30          # 10 rows x 3 float2 (interior copy)
    assert ptx.count("st.global.v4.f32") >= 8               # 8 rows x one float4
    assert ptx.count("fma.rn.f32") >= 288                   # 32 outputs x 9, unrolled


def test_interior_threads_have_no_guards():
    _, ir = _source_16384()
    kernel = ir.split("kernel ", 1)[1]
    fast = kernel.split("\n          else:\n", 1)[0]
    body = fast.split("allocate I.local", 1)[1]
    assert " if " not in body and "if (" not in body           # straight-line interior copy
