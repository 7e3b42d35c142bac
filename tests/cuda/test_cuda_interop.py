"""torch, CuPy and JAX arrays in and out of kernels on the cuda backend (SPEC §3, issue 10
item 3): the device rule picks ``cuda`` without ``backend=``; inputs are read in place (any
strides, stride 0, offsets that break alignment, negative strides where the library has
them); results are arrays of the first device input's library; ``out=`` writes into the
caller's array (strided too, gaps untouched); every dtype, 16-bit floats included; size 0
and 1.  Kernels carry explicit cuda schedules (cuda_support.py), so nothing here depends on
the default schedules."""
import numpy as np
import pytest

from cuda_support import (ARGMAX, AXPY, MIX, ROWSUM, TWO, Torch, CuPy, Jax, check_elementwise,
                          elementwise, library, tolerance, values)

pytestmark = pytest.mark.cuda

LIB_DTYPES = [(cls.name, d) for cls in (Torch, CuPy, Jax) for d in cls.dtypes]
SHAPES = [(37, 45), (1, 7), (7, 1), (1, 1), (0, 5), (5, 0)]
MUTABLE = ["torch", "cupy"]           # libraries with views and writable arrays (not JAX)


def _pair(L, rng, shape, dtype):
    a, b = values(rng, shape, dtype), values(rng, shape, dtype)
    x, y = L.array(a, dtype), L.array(b, dtype)
    return x, y, L.numpy(x), L.numpy(y)      # what the device holds (bfloat16 rounded)


# ----------------------------------------------------------------- dtypes, sizes, result type
@pytest.mark.parametrize("libname,dtype", LIB_DTYPES, ids=[f"{lb}-{d}" for lb, d in LIB_DTYPES])
def test_every_dtype_returns_the_librarys_array(libname, dtype, rng):
    L = library(libname)
    k = elementwise(dtype)[0]
    for shape in [(37, 45), (1, 7), (0, 5)]:
        x, y, a, b = _pair(L, rng, shape, dtype)
        r = k(x, y)                          # no backend=: device arrays choose cuda
        assert L.owns(r), type(r)
        assert L.dtype_name(r) == dtype and tuple(r.shape) == shape
        check_elementwise(L.numpy(r), a, b, dtype)
        np.testing.assert_array_equal(L.numpy(x), a)       # inputs untouched
        np.testing.assert_array_equal(L.numpy(y), b)


@pytest.mark.parametrize("shape", SHAPES)
def test_size_zero_and_one_dims(lib, shape, rng):
    x, y, a, b = _pair(lib, rng, shape, "float32")
    r = MIX(x, y)
    assert lib.owns(r) and tuple(r.shape) == shape
    check_elementwise(lib.numpy(r), a, b, "float32")
    s = ROWSUM(x)
    assert lib.owns(s) and tuple(s.shape) == shape[:1]
    np.testing.assert_allclose(lib.numpy(s), a.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)
    if shape[1]:                             # an empty row has no argmax (numpy raises)
        m = ARGMAX(x)
        assert lib.owns(m) and lib.dtype_name(m) == "int64"
        np.testing.assert_array_equal(lib.numpy(m), a.argmax(1))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_reductions_return_the_librarys_arrays(lib, dtype, rng):
    a = rng.integers(0, 4, (19, 70)).astype(dtype)          # many ties: the smallest index wins
    x = lib.array(a)
    s, m = ROWSUM(x), ARGMAX(x)
    assert lib.owns(s) and lib.dtype_name(s) == dtype and lib.owns(m) and lib.dtype_name(m) == "int64"
    np.testing.assert_allclose(lib.numpy(s), a.astype(np.float64).sum(1), **tolerance(dtype))
    np.testing.assert_array_equal(lib.numpy(m), a.argmax(1))


def test_scalars_and_several_outputs(lib, rng):
    x, y, a, b = _pair(lib, rng, (300,), "float32")
    r = AXPY(2.5, x, y)
    assert lib.owns(r) and lib.dtype_name(r) == "float32"
    np.testing.assert_allclose(lib.numpy(r), 2.5 * a.astype(np.float64) + b, rtol=1e-6, atol=1e-6)
    s, p = TWO(x, y)
    assert lib.owns(s) and lib.owns(p)
    np.testing.assert_allclose(lib.numpy(s), a.astype(np.float64) + b, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(lib.numpy(p), a.astype(np.float64) * b, rtol=1e-6, atol=1e-6)


def test_first_device_input_chooses_the_result_library(rng):
    T, C = library("torch"), library("cupy")
    a, b = values(rng, (6, 9), "float32"), values(rng, (6, 9), "float32")
    r = MIX(T.array(a), C.array(b))
    assert T.owns(r)
    check_elementwise(T.numpy(r), a, b, "float32")
    r = MIX(C.array(a), T.array(b))
    assert C.owns(r)
    check_elementwise(C.numpy(r), a, b, "float32")


# ----------------------------------------------------------------- in place: no copies, any strides
def _layouts(L, rng, shape):
    """(name, device view, its values) for ``shape``: transposed, stepped with an offset of one
    element (not 16-byte aligned), an offset column slice, a stride-0 broadcast, and (where the
    library has them) negative strides."""
    n, m = shape
    out = []
    base = values(rng, (m, n), "float32")
    out.append(("transposed", L.transpose(L.array(base)), base.T))
    base = values(rng, (2 * n, 3 * m + 1), "float32")
    out.append(("stepped", L.array(base)[::2, 1::3], base[::2, 1::3]))
    base = values(rng, (n, m + 1), "float32")
    out.append(("offset", L.array(base)[:, 1:], base[:, 1:]))
    row = values(rng, (1, m), "float32")
    out.append(("broadcast", L.broadcast(L.array(row), (n, m)), np.broadcast_to(row, (n, m))))
    if L.negative_strides:
        base = values(rng, (n, m), "float32")
        out.append(("negative", L.array(base)[::-1, ::-1], base[::-1, ::-1]))
    return out


@pytest.mark.parametrize("libname", MUTABLE)
@pytest.mark.parametrize("shape", [(33, 70), (1, 5), (4, 1)])
def test_strided_inputs_are_read_in_place(libname, shape, rng):
    L = library(libname)
    views = _layouts(L, rng, shape)
    for (name, x, a), (_, y, b) in zip(views, _layouts(L, rng, shape)):
        check_elementwise(L.numpy(MIX(x, y)), a, b, "float32")
        np.testing.assert_allclose(L.numpy(ROWSUM(x)), a.astype(np.float64).sum(1),
                                   rtol=1e-5, atol=1e-5, err_msg=name)
        np.testing.assert_array_equal(L.numpy(ARGMAX(x)), a.argmax(1), err_msg=name)


@pytest.mark.parametrize("libname", MUTABLE)
def test_inputs_are_not_copied(libname, rng):
    """A row sum of a 256 KiB strided (and a transposed) view: what the library allocates during
    the call is the 1 KiB result, never a contiguous copy of the input."""
    L = library(libname)
    base = L.array(values(rng, (256, 512), "float32"))
    for x in (base[:, ::2], L.transpose(base[:, :256])):
        ROWSUM(x)                                        # compiled (and its plan built) before
        with L.allocations() as extra:
            r = ROWSUM(x)
        assert L.owns(r)
        assert extra[0] < 64 * 1024, f"{extra[0]} bytes allocated for a {256 * 256 * 4} byte view"
        np.testing.assert_allclose(L.numpy(r), L.numpy(x).astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------- out=
@pytest.mark.parametrize("libname", MUTABLE)
@pytest.mark.parametrize("dtype", ["float32", "int16", "bool"])
def test_out_is_written_in_place(libname, dtype, rng):
    L = library(libname)
    k = elementwise(dtype)[0]
    for shape in [(37, 45), (1, 1), (0, 3)]:
        x, y, a, b = _pair(L, rng, shape, dtype)
        out = L.empty(shape, dtype)
        ptr = L.ptr(out)
        r = k(x, y, out=out)
        assert r is out and L.ptr(out) == ptr
        check_elementwise(L.numpy(out), a, b, dtype)


@pytest.mark.parametrize("libname", MUTABLE)
def test_strided_out_leaves_the_gaps_alone(libname, rng):
    L = library(libname)
    x, y, a, b = _pair(L, rng, (9, 13), "float32")
    big = L.full((9, 27), -7.0, "float32")
    out = big[:, 1::2]                                  # stride 2, offset one element
    assert MIX(x, y, out=out) is out
    check_elementwise(L.numpy(out), a, b, "float32")
    got = L.numpy(big)
    assert (got[:, 0::2] == -7).all()
    outT = L.transpose(L.empty((13, 9), "float32"))      # a column-major out
    assert MIX(x, y, out=outT) is outT
    check_elementwise(L.numpy(outT), a, b, "float32")


@pytest.mark.parametrize("libname", MUTABLE)
def test_out_tuple_and_reduction_out(libname, rng):
    L = library(libname)
    x, y, a, b = _pair(L, rng, (50,), "float32")
    o1, o2 = L.empty((50,), "float32"), L.empty((50,), "float32")
    r = TWO(x, y, out=(o1, o2))
    assert isinstance(r, tuple) and r[0] is o1 and r[1] is o2
    np.testing.assert_allclose(L.numpy(o1), a.astype(np.float64) + b, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(L.numpy(o2), a.astype(np.float64) * b, rtol=1e-6, atol=1e-6)
    A = values(rng, (11, 40), "float32")
    s, m = L.empty((11,), "float32"), L.empty((11,), "int64")
    assert ROWSUM(L.array(A), out=s) is s and ARGMAX(L.array(A), out=m) is m
    np.testing.assert_allclose(L.numpy(s), A.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(L.numpy(m), A.argmax(1))


# ----------------------------------------------------------------- mixing with numpy and backend=
def test_numpy_and_device_calls_of_one_kernel_do_not_mix_up(lib, rng):
    """The same kernel alternately on numpy (backend="cuda": copies) and on device arrays:
    each call answers in its own kind of array."""
    a, b = values(rng, (8, 8), "float32"), values(rng, (8, 8), "float32")
    x, y = lib.array(a), lib.array(b)
    for _ in range(3):
        r = MIX(a, b, backend="cuda")
        assert type(r) is np.ndarray
        check_elementwise(r, a, b, "float32")
        d = MIX(x, y)
        assert lib.owns(d)
        check_elementwise(lib.numpy(d), a, b, "float32")
        d = MIX(x, y, backend="cuda")
        assert lib.owns(d)
