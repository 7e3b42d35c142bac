"""The cpu backend's native fast launchers (kdsl_cpu.fastcall): taken when a call matches the
specialisation run last, declined (the normal path runs, errors unchanged) otherwise; results,
reference counts and the released GIL checked.  Timing is benchmarks/overhead.py's business."""
import gc
import sys
import threading

import numpy as np
import pytest

import kdsl as kd
from kdsl.runtime import fastpath

fastcall = pytest.importorskip("kdsl_cpu.fastcall")

pytestmark = pytest.mark.skipif(not isinstance(fastcall.abi(), dict),
                                reason=f"no native launchers here: {fastcall.abi()}")


@kd.kernel
def add(a, b):
    return a + b


@kd.kernel
def rowsum(A):
    return A.sum(axis=1)


@kd.kernel
def scale(A, s):
    return A * s


@kd.kernel
def two(A):
    return A + 1, A * 2


@kd.kernel
def conv3(A, W):
    n, m = A.shape
    ri = kd.reduce_axis(3, name="ri")
    rj = kd.reduce_axis(3, name="rj")
    return kd.compute((n - 2, m - 2), lambda i, j: kd.sum(A[i + ri, j + rj] * W[ri, rj],
                                                          axis=[ri, rj]), name="B")


@kd.kernel
def matmul(A, B):
    return A @ B


@kd.kernel(specialize=True)
def add_fixed(a, b):
    return a + b


@kd.kernel
def heavy(A):
    n_, m = A.shape
    k = kd.reduce_axis(m, name="k")
    return kd.compute((n_,), lambda i: kd.sum(kd.sin(A[i, k]) * kd.cos(A[i, k]), axis=k))


class _Sub(np.ndarray):
    pass


class _Spy(dict):
    """A kernel's launcher cache that counts lookups: the fast path never looks."""

    def __init__(self, d):
        super().__init__(d)
        self.lookups = 0

    def get(self, *a):
        self.lookups += 1
        return super().get(*a)


def warm(k, *args, **kw):
    """Call enough times for the fast launcher to be built; return the last result."""
    for _ in range(fastpath.PROMOTE_AFTER + 1):
        r = k(*args, **kw)
    return r


def fast_taken(k, *args, **kw):
    """(result, whether the call ran through the fast launcher)."""
    spy = k._cache = _Spy(k._cache)
    r = k(*args, **kw)
    return r, spy.lookups == 0


def _same(got, want):
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


A = np.random.default_rng(0).random((6, 9), dtype=np.float32)
W = np.random.default_rng(1).random((3, 3), dtype=np.float32)
CASES = [
    ("contiguous", add, (np.arange(8, dtype=np.float32), np.ones(8, np.float32)), lambda a, b: a + b),
    ("zero-size", add, (np.zeros(0, np.float32), np.zeros(0, np.float32)), lambda a, b: a + b),
    ("broadcast size-1", add, (A, A[2:3]), lambda a, b: a + b),
    ("F-order", add, (A.T, A.T), lambda a, b: a + b),
    ("negative strides", add, (A[::-1, ::2], A[::-1, ::2]), lambda a, b: a + b),
    ("int64", add, (np.arange(6), np.arange(6)), lambda a, b: a + b),
    ("2-D rowsum", rowsum, (A,), lambda a: a.sum(1)),
    ("rowsum of a view", rowsum, (A[:, ::-2],), lambda a: a.sum(1)),
    ("int scalar", scale, (A[0], 3), lambda a, s: a * np.float32(s)),
    ("float scalar", scale, (A[0], 2.5), lambda a, s: (a * s)),
    ("bool scalar", scale, (A[0], True), lambda a, s: a * np.float32(s)),
    ("two outputs", two, (A[0],), lambda a: (a + 1, a * 2)),
    ("shape expressions", conv3, (A, W), None),
    ("constraint", matmul, (A, A.T.copy()), lambda a, b: a @ b),
    ("specialized shapes", add_fixed, (A, A), lambda a, b: a + b),
]


@pytest.mark.parametrize("name,k,args,ref", CASES, ids=[c[0] for c in CASES])
def test_fast_path_taken_and_correct(name, k, args, ref):
    slow = k(*args)
    warm(k, *args)
    r, taken = fast_taken(k, *args)
    assert taken, name
    _same(r, slow)
    if ref is not None:
        want = ref(*args)
        _same(r, tuple(np.asarray(w, dtype=g.dtype) for w, g in
                       zip(want if isinstance(want, tuple) else (want,),
                           r if isinstance(r, tuple) else (r,))))


def test_out_one_and_tuple():
    a, b = np.arange(8, dtype=np.float32), np.ones(8, np.float32)
    o = np.empty(8, np.float32)
    assert warm(add, a, b, out=o) is o
    o[:] = 0
    r, taken = fast_taken(add, a, b, out=o)
    assert taken and r is o
    np.testing.assert_array_equal(o, a + b)
    p, q = np.empty(8, np.float32), np.empty(8, np.float32)
    t = (p, q)
    warm(two, a, out=t)
    r, taken = fast_taken(two, a, out=t)
    assert taken and r is t
    np.testing.assert_array_equal(p, a + 1)
    np.testing.assert_array_equal(q, a * 2)


def test_declines_what_does_not_match():
    a, b = np.arange(8, dtype=np.float32), np.ones(8, np.float32)
    warm(add, a, b)
    declined = [
        (a.astype(np.float64), b.astype(np.float64)),      # another dtype
        (a[::2], b[::2]),                                   # strided: another specialisation
        (a.reshape(2, 4), b.reshape(2, 4)),                 # another rank
        (a[:1], b[:1]),                                     # a size-1 dim
        (a.view(_Sub), b.view(_Sub)),                       # a subclass
        (a.astype(np.dtype("f4", metadata={"m": 1})), b),   # an equal, other dtype object
    ]
    for args in declined:
        r, taken = fast_taken(add, *args)
        assert not taken
        np.testing.assert_allclose(np.asarray(r), np.asarray(args[0]) + np.asarray(args[1]))
    warm(add_fixed, a, b)
    r, taken = fast_taken(add_fixed, a[:7], b[:7])           # another shape: specialised anew
    assert not taken and r.shape == (7,)
    warm(scale, a, 2)
    for s in (np.float64(2), np.int64(2), 2 ** 40, -3):
        r, taken = fast_taken(scale, a, s)
        assert taken == (type(s) is int)
        np.testing.assert_allclose(r, a * s)


def _error(f):
    try:
        f()
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return None


def test_errors_are_unchanged():
    @kd.kernel
    def addk(a, b):
        return a + b

    @kd.kernel
    def scalek(A, s):
        return A * s

    a, b = np.arange(8, dtype=np.float32), np.ones(8, np.float32)
    ro = np.empty(8, np.float32)
    ro.flags.writeable = False
    calls = {
        "shape": lambda: addk(a, np.ones(9, np.float32)),
        "read-only out": lambda: addk(a, b, out=ro),
        "out shape": lambda: addk(a, b, out=np.empty(7, np.float32)),
        # a float result into an int array: numpy's out= rule (same_kind) refuses it
        "out dtype": lambda: addk(a, b, out=np.empty(8, np.int32)),
        "argument count": lambda: addk(a),
        "not an array": lambda: addk([1.0] * 8, b),
        "int too large": lambda: scalek(a, 2 ** 70),
    }
    before = {name: _error(f) for name, f in calls.items()}
    warm(addk, a, b)
    warm(addk, a, b, out=np.empty(8, np.float32))
    warm(scalek, a, 2)
    assert addk._fast is not None and addk._fast_out is not None and scalek._fast is not None
    after = {name: _error(f) for name, f in calls.items()}
    assert all(before.values())
    assert before == after
    # an int no 64-bit integer holds is the user's error, named, before and after warm-up
    for when in (before, after):
        assert "out of bounds for int64" in when["int too large"]
    with pytest.raises(kd.ArgumentError, match=r"argument 's'.*int64"):
        scalek(a, -2 ** 63 - 1)


def test_reference_counts_are_stable():
    a, b = np.arange(8, dtype=np.float32), np.ones(8, np.float32)
    o, p, q = (np.empty(8, np.float32) for _ in range(3))
    t = (p, q)
    f32 = np.dtype(np.float32)
    cases = [(add, (a, b), {}), (add, (a, b), {"out": o}), (two, (a,), {}),
             (two, (a,), {"out": t}), (scale, (a, 3), {}), (scale, (a, 2.5), {}),
             (add, (a, np.ones(9, np.float32)), {})]        # the last one declines and raises

    def loop(k, args, kw, n=1000):
        for _ in range(n):
            try:
                k(*args, **kw)
            except kd.KdslError:
                pass

    for k, args, kw in cases:
        loop(k, args, kw, 5)
        loop(k, args, kw)
        gc.collect()
        owned = (a, b, o, p, q, t, *args)            # only this test refers to these
        shared = (f32, NotImplemented)                # other code holds (and drops) these too
        before = [sys.getrefcount(x) for x in owned + shared]
        loop(k, args, kw)
        gc.collect()
        after = [sys.getrefcount(x) for x in owned + shared]
        n = len(owned)
        assert before[:n] == after[:n], k.__name__
        # a reference leaked per call would add ~1000; caches elsewhere may release a few
        assert all(y - x < 50 for x, y in zip(before[n:], after[n:])), (k.__name__, before, after)
    r = add(a, b)
    assert sys.getrefcount(r) == 2            # only `r` and getrefcount's argument
    r2 = two(a)
    assert sys.getrefcount(r2) == 2 and all(sys.getrefcount(x) == 3 for x in r2)


def test_gil_released_during_the_kernel(rng):
    a = rng.standard_normal((2000, 4000)).astype(np.float32)
    warm(heavy, a)
    assert heavy._fast is not None
    out = {}

    def call():
        r, out["taken"] = fast_taken(heavy, a)
        out["r"] = r
    th = threading.Thread(target=call)
    count = 0
    th.start()
    while th.is_alive():      # this loop needs the GIL: it only spins if the kernel let it go
        count += 1
    th.join()
    assert out["taken"]
    np.testing.assert_allclose(out["r"], (np.sin(a.astype(np.float64)) * np.cos(a)).sum(1),
                               rtol=1e-3, atol=1e-2)
    assert count > 1000, count


def test_concurrent_fast_calls():
    a = np.arange(1000, dtype=np.float32)
    warm(add, a, a)
    errors = []

    def work():
        try:
            for _ in range(300):
                r = add(a, a)
                if not np.array_equal(r, a + a):
                    errors.append("wrong result")
        except Exception as e:
            errors.append(e)
    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors


def test_backend_choice_is_respected(monkeypatch):
    a, b = np.arange(8, dtype=np.float32), np.ones(8, np.float32)
    warm(add, a, b)
    assert add._fast[0] == "cpu"
    assert fast_taken(add, a, b, backend="cpu")[1]
    assert not fast_taken(add, a, b, backend="numpy")[1]
    with kd.use_backend("numpy"):
        assert not fast_taken(add, a, b)[1]
    with kd.use_backend("cpu"):
        assert fast_taken(add, a, b)[1]
    monkeypatch.setenv("KDSL_BACKEND", "numpy")
    assert not fast_taken(add, a, b)[1]
    monkeypatch.delenv("KDSL_BACKEND")
    assert fast_taken(add, a, b)[1]


def test_new_schedule_drops_the_fast_path():
    @kd.kernel
    def addk(a, b):
        return a + b
    a = np.arange(8, dtype=np.float32)
    warm(addk, a, a)
    assert addk._fast is not None
    from kdsl.schedule.hints import Hint
    addk._add_schedule(Hint("cpu", {"vectorize": 4}))   # (kd.schedule(...)(addk) returns a copy)
    assert addk._fast is None and addk._fast_out is None
    np.testing.assert_array_equal(addk(a, a), a + a)


def test_no_native_launchers_where_the_abi_is_unknown(monkeypatch):
    @kd.kernel
    def addk(a, b):
        return a + b
    monkeypatch.setattr(fastcall, "abi", lambda: "pretend: unknown layout")
    a = np.arange(8, dtype=np.float32)
    r = warm(addk, a, a)
    np.testing.assert_array_equal(r, a + a)
    assert addk._fast is None


def test_abi_probe_matches_live_arrays():
    x = np.arange(12.0).reshape(3, 4)
    for arr in (x, x[::-1, 1:], x.T, np.zeros(()), np.empty((0, 2))):
        assert fastcall._check_array(arr) is None
    info = fastcall.abi()
    assert info["obj"]["ndarray"] == id(np.ndarray)


def test_a_result_numpy_cannot_allocate_is_declined():
    """PyArray_NewFromDescr fails (an outer product of 2**42 elements): the native launcher
    declines with numpy's error cleared, the normal path raises np.empty's MemoryError, and
    the next call is served again."""
    @kd.kernel
    def outer(a, b):
        return kd.compute((a.shape[0], b.shape[0]), lambda i, j: a[i] * b[j])
    a = np.arange(3, dtype=np.float32)
    for _ in range(fastpath.PROMOTE_AFTER + 1):
        np.testing.assert_array_equal(outer(a, a, backend="cpu"), np.outer(a, a))
    assert outer._fast is not None
    big = np.zeros(2 ** 21, np.float32)
    with pytest.raises(MemoryError):
        outer(big, big, backend="cpu")
    assert sys.exc_info()[0] is None
    np.testing.assert_array_equal(outer(a, a, backend="cpu"), np.outer(a, a))
