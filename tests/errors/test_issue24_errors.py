"""Issue 24 items 5, 13 and 14: numpy semantics at the call boundary and clear user errors,
the same on every backend (numpy, interp, interp-cuda, cpu)."""
import ast
import pathlib
import warnings

import numpy as np
import pytest

import kdsl as kd
from kdsl.errors import _is_internal
from kdsl.errors import (ArgumentError, KernelError, ScheduleError, ShapeError,
                         StaleGlobalWarning, UnknownBackendError)

BACKENDS = ["numpy", "interp", "interp-cuda", "cpu"]
ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


@kd.kernel
def scaled(A, s):
    return A * s


@kd.kernel
def plus_one(A):
    return A + 1.0


@kd.kernel
def index_max(A):
    k = kd.reduce_axis(A.shape[1], name="k")
    return kd.compute((A.shape[0],), lambda i: kd.max(A[i, k], axis=k), name="B")


@kd.kernel
def index_min(A):
    k = kd.reduce_axis(A.shape[1], name="k")
    return kd.compute((A.shape[0],), lambda i: kd.min(A[i, k], axis=k), name="B")


@kd.kernel
def np_argmin(A):
    return A.argmin(axis=1)


@kd.kernel
def index_max_where(A):
    k = kd.reduce_axis(A.shape[1], name="k")
    return kd.compute((A.shape[0],), lambda i: kd.max(A[i, k], axis=k, where=A[i, k] > 0),
                      name="B")


@kd.kernel
def np_max(A):
    return A.max(axis=1)


# ------------------------------------------------------------------ item 5
@pytest.mark.parametrize("value", [2 ** 70, -2 ** 63 - 1, 2 ** 63])
def test_python_int_out_of_int64_raises_everywhere(backend, value):
    a = np.random.default_rng().random(5)
    with pytest.raises(ArgumentError, match="out of bounds for int64"):
        scaled(a, value, backend=backend)
    np.testing.assert_allclose(scaled(a, 3, backend=backend), a * 3)    # the kernel still works
    with pytest.raises(ArgumentError, match="out of bounds for int64"):
        scaled(a, value, backend=backend)                              # also after a fast call


def test_masked_arrays_are_refused(backend):
    m = np.ma.masked_array(np.arange(4.0), mask=[0, 1, 0, 0])
    np.testing.assert_array_equal(plus_one(np.arange(4.0), backend=backend), np.arange(4.0) + 1)
    with pytest.raises(ArgumentError, match="masked array.*ignore the mask"):
        plus_one(m, backend=backend)
    with pytest.raises(ArgumentError, match="masked array"):
        plus_one(np.arange(4.0), out=np.ma.masked_array(np.zeros(4)), backend=backend)


@pytest.mark.parametrize("n", [1, 3, 8])
def test_self_overlapping_out_matches_numpy(backend, n):
    a = np.random.default_rng().random(n)
    want = np.lib.stride_tricks.as_strided(np.zeros(1), shape=(n,), strides=(0,))
    np.add(a, 1.0, out=want)
    for _ in range(3):          # the first call and the fast ones
        got = np.lib.stride_tricks.as_strided(np.zeros(1), shape=(n,), strides=(0,))
        assert got.flags.writeable
        plus_one(a, out=got, backend=backend)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kern", [index_max, index_min, np_max, np_argmin])
def test_max_family_over_an_empty_axis_raises(backend, kern):
    with pytest.raises(ShapeError, match="empty axis has no identity"):
        kern(np.zeros((3, 0)), backend=backend)
    a = np.random.default_rng().random((3, 4))
    want = {index_max: a.max(axis=1), index_min: a.min(axis=1), np_max: a.max(axis=1),
            np_argmin: a.argmin(axis=1)}[kern]
    np.testing.assert_array_equal(kern(a, backend=backend), want)
    assert kern(np.zeros((0, 3)), backend=backend).shape == (0,)   # no rows: numpy's [] too
    with pytest.raises(ShapeError, match="empty axis"):      # numpy raises for (0, 0) as well
        kern(np.zeros((0, 0)), backend=backend)


def test_max_with_where_keeps_its_identity(backend):
    assert np.all(index_max_where(np.zeros((2, 0)), backend=backend) == -np.inf)


# ------------------------------------------------------------------ item 13
def test_out_of_another_dtype_casts_like_numpy(backend):
    a = np.random.default_rng().random(6)
    for _ in range(2):
        o = np.empty(6, np.float32)
        assert plus_one(a, out=o, backend=backend) is o
        np.testing.assert_array_equal(o, np.add(a, 1.0, out=np.empty(6, np.float32)))
    with pytest.raises(TypeError):
        np.add(a, 1.0, out=np.empty(6, np.int32))           # numpy's rule ...
    with pytest.raises(ArgumentError, match="same_kind"):
        plus_one(a, out=np.empty(6, np.int32), backend=backend)   # ... is kdsl's
    with pytest.raises(ArgumentError, match="shape"):
        plus_one(a, out=np.empty(5, np.float32), backend=backend)


def test_foreign_byte_order_and_odd_strides_are_argument_errors(backend):
    big = np.arange(4, dtype=">f8")
    odd = np.ndarray((3,), np.float64, np.zeros(48, np.uint8).data, 0, (12,))
    for bad, what in ((big, "byte order"), (odd, "stride of 12 bytes")):
        if backend == "numpy":        # the numpy reference reads any layout
            np.testing.assert_array_equal(plus_one(bad, backend=backend), bad + 1)
            continue
        with pytest.raises(ArgumentError, match=what) as e:
            plus_one(bad, backend=backend)
        assert e.value.hint and not _is_internal(e.value.loc.file)   # the user's (or test's) line


def test_misspelled_backend_suggests_the_name():
    with pytest.raises(UnknownBackendError, match="unknown backend 'interp-cdua'") as e:
        plus_one(np.ones(2), backend="interp-cdua")
    assert "did you mean 'interp-cuda'" in e.value.hint
    assert e.value.loc.file == __file__
    assert isinstance(e.value, LookupError)     # still a BackendNotInstalled


@kd.kernel
def calls_itself(A):
    return calls_itself(A) + 1


@kd.kernel
def ping(A):
    return pong(A)


@kd.kernel
def pong(A):
    return ping(A) * 2


def test_recursive_kernel_is_a_kernel_error():
    with pytest.raises(KernelError, match=r"calls itself.*\(calls_itself -> calls_itself\)"):
        calls_itself(np.ones(2), backend="numpy")
    with pytest.raises(KernelError, match=r"ping -> pong -> ping"):
        ping(np.ones(2), backend="interp")


def test_wmma_errors_point_at_the_user_line():
    with pytest.raises(ScheduleError, match="not a WMMA shape") as e:
        kd.intrin.wmma(16, 16, 8)
    assert e.value.loc.file == __file__


@kd.kernel
def mm(A, B):
    return A @ B


@kd.kernel
def badd(A, B):
    return A + B


def test_size_mismatches_carry_hints(backend):
    with pytest.raises(ShapeError) as e:
        mm(np.ones((3, 4)), np.ones((5, 6)), backend=backend)
    assert "A.shape[-1] == B.shape[-2]" in e.value.hint
    with pytest.raises(ShapeError) as e:
        badd(np.ones((3, 4)), np.ones(5), backend=backend)
    assert "broadcasting" in e.value.hint


def _calls_without_hint(classes):
    out = []
    for p in sorted(ROOT.glob("kdsl*/**/*.py")):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else getattr(f, "attr", None)
                if name in classes and not any(k.arg in ("hint", None) for k in node.keywords):
                    out.append(f"{p.relative_to(ROOT)}:{node.lineno}")
    return out


def test_every_user_error_is_raised_with_a_hint():
    """Every ScheduleError (and every other user error class raised by name) gets a hint=."""
    classes = {"ScheduleError", "ArgumentError", "KernelError", "ShapeError", "KernelValueError",
               "KernelIndexError", "DTypeError", "IntegerOverflowError", "UnknownBackendError"}
    assert _calls_without_hint(classes) == []


@pytest.mark.parametrize("call", [
    lambda s: s["B"].split(s["B"].axes[0], factor=0),
    lambda s: s["B"].fuse(),
    lambda s: s["B"].reorder(s["B"].axes[0], s["B"].axes[0]),
    lambda s: s["nope"],
    lambda s: s["B"].axis("zz"),
    lambda s: s.rfactor("B", s["B"].axes[0]),
])
def test_schedule_misuse_has_a_hint(call):
    @kd.kernel
    def k(A):
        return kd.compute((A.shape[0], A.shape[1]), lambda i, j: A[i, j] * 2, name="B")
    k.schedule("cpu")(call)
    with pytest.raises(ScheduleError) as e:
        k.lower(np.ones((4, 4)), backend="cpu")
    assert e.value.hint


# ------------------------------------------------------------------ item 14
FACTOR = 2.0


@kd.kernel
def uses_global(A):
    return A * FACTOR


def test_rebound_global_warns_and_is_documented(backend):
    global FACTOR
    FACTOR = 2.0
    k = kd.kernel(uses_global.fn)          # a fresh kernel: traced with FACTOR = 2
    a = np.arange(3.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", StaleGlobalWarning)
        np.testing.assert_array_equal(k(a, backend=backend), a * 2)
    try:
        FACTOR = 5.0
        with pytest.warns(StaleGlobalWarning, match="'FACTOR'") as w:
            got = k(A=a, backend=backend)       # a keyword call: the slow path
        assert w[0].filename == __file__
        np.testing.assert_array_equal(got, a * 2)        # frozen at the trace, as documented
        with warnings.catch_warnings():                  # reported once per change
            warnings.simplefilter("error", StaleGlobalWarning)
            k(A=a, backend=backend)
    finally:
        FACTOR = 2.0
    assert "Globals are frozen at trace time" in (ROOT / "docs" / "kernels.md").read_text()
    assert "frozen at trace time" in kd.kernel.__doc__


def test_closure_variable_change_warns():
    scale = 3.0

    @kd.kernel
    def k(A):
        return A * scale
    np.testing.assert_array_equal(k(np.ones(2), backend="numpy"), 3.0)
    scale = 4.0  # noqa: F841  (read by k's closure)
    with pytest.warns(StaleGlobalWarning, match="'scale'"):
        k(A=np.ones(2), backend="numpy")
