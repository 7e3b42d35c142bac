"""One regression test per fuzzer finding (tests/fuzz/FINDINGS.md), minimised by hand.

The GPU-schedule generator's findings are in test_findings_gpu.py, the numpy surface's in
test_findings_surface.py.  Each asserts what kdsl should do; the ones that fail on this branch are
``xfail(strict=True)`` with the finding's id: when a fix merges the test passes,
strict xfail turns that into a failure, and the marker is removed (together with
the finding's entry in known.py).  Backends a finding does not affect run as
ordinary tests.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

import kdsl as kd

from .backends import ROOT
from .finding_kernels import kern


# ------------------------------------------------------------------ F1
_mul_named_sum = kd.reducer(lambda x, y: x * y, identity=1, name="sum")
_min_named_max = kd.reducer(lambda x, y: kd.where(x < y, x, y), identity=255, name="max")


def _f1(A):
    return _mul_named_sum(A, axis=0), _min_named_max(A.astype(np.uint8), axis=0)


@pytest.mark.parametrize("backend", ["numpy", "interp", "cpu"])
def test_f1_reducer_named_like_a_builtin(backend, request):
    if backend == "cpu":
        request.getfixturevalue("cpu")
    A = np.array([[2, 3], [4, 1], [1, 5]], np.int64)
    p, m = kd.kernel(_f1)(A, backend=backend)
    assert p.tolist() == [8, 15] and m.tolist() == [1, 1]


# ------------------------------------------------------------------ F2
def _ew(A, B):
    return A * 2 + B


@pytest.mark.parametrize("hints", [dict(vectorize=8, unroll=4), dict(parallel="i0", vectorize=4, unroll=2),
                                   dict(unroll=2, vectorize=4)],
                         ids=["vec+unroll", "par+vec+unroll", "unroll+vec"])
@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_f2_hints_compose(backend, hints, request):
    if backend == "cpu":
        request.getfixturevalue("cpu")
    A = np.arange(35, dtype=np.float32).reshape(5, 7)
    out = kern(_ew, backend, **hints)(A, A, backend=backend)
    np.testing.assert_array_equal(out, A * 3)


# ------------------------------------------------------------------ F3
@pytest.mark.parametrize("hint", [dict(vectorize=0), dict(vectorize=-4), dict(unroll=1.5),
                                  dict(threads=-2), dict(stages=1)], ids=str)
def test_f3_bad_hint_values_are_errors(hint):
    A = np.ones((3, 4), np.float32)
    with pytest.raises(kd.ScheduleError) as e:
        kern(_ew, "interp", **hint)(A, A, backend="interp")
    assert e.value.hint


# ------------------------------------------------------------------ F4
def _total(A):
    return A.sum()


@pytest.mark.parametrize("hints", [dict(parallel=True), dict(unroll=4)], ids=str)
@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_f4_hints_on_0d_output(backend, hints, request):
    if backend == "cpu":
        request.getfixturevalue("cpu")
    A = np.arange(12, dtype=np.float64).reshape(3, 4)
    assert kern(_total, backend, **hints)(A, backend=backend) == 66.0


# ------------------------------------------------------------------ F5
def _any_rows(A):
    return A.any(axis=-2)


def _unroll_r0(s):
    a = s["any"]
    a.parallel(a.axis("i0"))
    a.reorder(a.axis("i0"), a.axis("r0"))
    a.unroll(a.axis("r0"))


def test_f5_no_raw_llvm_remarks(cpu, capfd):
    k = kern(_any_rows, "cpu", _unroll_r0)
    for shape in [(17, 1), (2, 8)]:
        A = np.zeros(shape, np.int32)
        A[-1, 0] = 3
        assert k(A, backend="cpu").tolist() == A.any(axis=-2).tolist()
    err = capfd.readouterr().err
    assert "loop not unrolled" not in err and "remark:" not in err


# ------------------------------------------------------------------ F6
def _fn_of_scalars(A, s):
    return np.multiply(s, s) + A


def _abs_scalar(A, s):
    return kd.clip(np.absolute(s), 0.5, 3) + A


def test_f6_numpy_functions_of_python_scalars_are_strong():
    A = np.arange(4, dtype=np.int8)
    assert kd.kernel(_fn_of_scalars)(A, 3, backend="numpy").dtype == np.int64
    B = np.ones(3, np.float32)
    assert kd.kernel(_abs_scalar)(B, -1.5, backend="numpy").dtype == np.float64


def _f6_case(f):
    def ref(A, s):
        return f(s) + A
    return ref


_F6_FUNCS = {
    "np.exp": np.exp, "np.sqrt": np.sqrt, "np.negative": np.negative, "np.absolute": np.absolute,
    "np.floor": np.floor, "np.positive": np.positive, "np.invert": np.invert,
    "np.logical_not": np.logical_not, "np.multiply": lambda s: np.multiply(s, s),
    "np.power": lambda s: np.power(s, 2), "np.maximum": lambda s: np.maximum(s, 1),
    "np.true_divide": lambda s: np.true_divide(s, 2), "np.less": lambda s: np.less(s, 2),
    "np.clip": lambda s: np.clip(s, 0, 5), "np.where": lambda s: np.where(True, s, s),
    "kd.exp": "exp", "kd.sqrt": "sqrt", "kd.maximum": "maximum", "kd.clip": "clip",
    # operators keep Python scalars weak, with Python's rules (-True == -1, True + True == 2)
    "ops": lambda s: -s * s + abs(s) + ~(s > 1) + (s + s) * (+s),
}


@pytest.mark.parametrize("fn", list(_F6_FUNCS))
@pytest.mark.parametrize("s", [3, -2.5, True], ids=["int", "float", "bool"])
def test_f6_result_dtypes_follow_numpy(fn, s):
    f = _F6_FUNCS[fn]
    if isinstance(f, str):     # kd.X mirrors np.X
        npf = {"maximum": lambda x: np.maximum(x, 1), "clip": lambda x: np.clip(x, 0, 5),
               }.get(f, getattr(np, f, None))
        kdf = {"maximum": lambda x: kd.maximum(x, 1), "clip": lambda x: kd.clip(x, 0, 5)}.get(f, getattr(kd, f))
    else:
        npf = kdf = f
    for A in (np.arange(1, 4, dtype=np.int8), np.ones(3, np.float32), np.ones(3, np.uint8)):
        try:
            with np.errstate(all="ignore"):
                want = np.asarray(_f6_case(npf)(A, s))
        except (TypeError, ValueError, OverflowError):
            continue                # numpy rejects it: kdsl's errors are tested elsewhere
        got = kd.kernel(_f6_case(kdf))(A, s, backend="numpy")
        assert got.dtype == want.dtype, (fn, s, A.dtype)
        np.testing.assert_allclose(got, want, rtol=1e-3)


# ------------------------------------------------------------------ F7
def _argmax2(A):
    return A.argmax(axis=(0, 1))


def test_f7_argmax_tuple_axis_is_an_error():
    with pytest.raises(kd.KernelError):
        kd.kernel(_argmax2)(np.ones((2, 3)), backend="numpy")


# ------------------------------------------------------------------ F8
def _inline_output(s):
    s.outputs[0].compute_inline()


def _split0(s):
    B = s.outputs[0]
    B.split(B.axes[0], factor=0)


def _rowmax(A):
    return A.max(axis=1)


def _attach_self(s):
    B = s.outputs[0]
    B.compute_at(B, B.axes[0])


@pytest.mark.parametrize("what", ["inline_output", "empty_max", "rfactor0", "hint_axis_0d", "attach_self"])
def test_f8_errors_say_what_would_work(what):
    A = np.ones((3, 4), np.float32)
    with pytest.raises(kd.KdslError) as e:
        if what == "inline_output":
            kern(_ew, "interp", _inline_output)(A, A, backend="interp")
        elif what == "split0":
            kern(_ew, "interp", _split0)(A, A, backend="interp")
        elif what == "empty_max":
            kd.kernel(_rowmax)(np.ones((3, 0)), backend="interp")
        elif what == "hint_axis_0d":
            kern(_total, "interp", parallel="zz")(A, backend="interp")
        elif what == "attach_self":
            kern(_rowmax, "interp", _attach_self)(A, backend="interp")
        else:
            kern(_rowmax, "interp", rfactor=0)(A, backend="interp")
    assert e.value.hint, str(e.value)


# ------------------------------------------------------------------ F9
def _sum_where(A):
    n = A.shape[0]
    k = kd.reduce_axis(n, name="k")
    return kd.compute((), lambda: kd.sum(A[k], axis=k, where=A[k] > 0))


def _split_k(s):
    C = s["compute"]
    C.split(C.axis("k"), factor=2)


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_f9_where_reduction_over_uneven_split(backend, request):
    if backend == "cpu":
        request.getfixturevalue("cpu")
    A = np.array([1.0, -2.0, 3.0, 0.5, -1.0], np.float32)
    assert kern(_sum_where, backend, _split_k)(A, backend=backend) == 4.5


def _all_where(A, B):
    k = kd.reduce_axis(A.shape[1], name="k")
    return kd.compute((A.shape[0],), lambda i: kd.all(A[i, k] > 0, axis=k, where=B[i, k] != -1))


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_f9_where_reduction_rfactored_by_hints(backend, request):
    # parallel + vectorize rfactor the reduction: its split guard joins the where= condition
    if backend == "cpu":
        request.getfixturevalue("cpu")
    k = kern(_all_where, backend, parallel=True, vectorize=8)
    rng = np.random.default_rng()
    for n, m in [(1, 3), (5, 8), (4, 13), (2, 0)]:
        A, B = rng.integers(-1, 3, (2, n, m)).astype(np.int32)
        np.testing.assert_array_equal(k(A, B, backend=backend), np.all(A > 0, axis=1, where=B != -1))
    # where= loads sit inside the index guards, not and-ed with them (IR and does not short-circuit)
    assert "and B[" not in str(k.lower(A, B, backend=backend))


# ------------------------------------------------------------------ F10
def _dot_t(A, B):
    return np.dot(A, B.T) + 1


def _attach_then_split(s):
    M = s["matmul"]
    T = s["add"]
    xo, xi = T.split(T.axis("i1"), factor=3)
    M.compute_at(T, xo)
    T.split(xo, factor=8)             # the attachment follows xo to its inner loop


def test_f10_split_after_compute_at():
    A, B = np.arange(12.0).reshape(3, 4), np.arange(8.0).reshape(2, 4)
    got = kern(_dot_t, "interp", _attach_then_split)(A, B, backend="interp")
    np.testing.assert_allclose(got, A @ B.T + 1)


def _rowsum(A):
    return A.sum(axis=1)


def _attach_at_r0v_then_rfactor(s):
    B = s["sum"]
    s.rfactor(B, B.axis("r0")).compute_at(B, B.axis("r0.v"))
    s.rfactor(B, B.axis("r0.v"))      # moves the attach loop into a new stage


def _attach_at_r0_then_cache_write(s):
    B = s["sum"]
    s.cache_read("A", "local", [B]).compute_at(B, B.axis("r0"))
    s.cache_write(B, "local")         # B loses its loop r0


@pytest.mark.parametrize("sched", [_attach_at_r0v_then_rfactor, _attach_at_r0_then_cache_write],
                         ids=["rfactor", "cache_write"])
def test_f10_attach_loop_removed_is_a_schedule_error(sched):
    with pytest.raises(kd.ScheduleError) as e:
        kern(_rowsum, "interp", sched)(np.ones((3, 4)), backend="interp")
    assert e.value.hint and "r0" in str(e.value)
    assert sched.__name__.split("_then_")[1] in e.value.loc.code, e.value.loc


# ------------------------------------------------------------------ F11
def _copy_rows(A):
    n = A.shape[0]
    return kd.compute((n,), lambda i: A[i])


def _double_cache_write(s):
    C = s["compute"]
    s.cache_write(C, "local")
    s.cache_write(C, "local")
    L = s["compute.local"]
    L.compute_at(C, C.axis("i"))


def test_f11_compute_at_legality_at_the_call():
    A = np.arange(5.0)
    k = kern(_copy_rows, "interp", _double_cache_write)
    try:
        np.testing.assert_array_equal(k(A, backend="interp"), A)
    except kd.ScheduleError as e:
        # acceptable only when raised by the primitive, at its line in the schedule
        assert "compute_at" in e.loc.code, e.loc


# ------------------------------------------------------------------ F12
def _sum_from_one(A):
    n, m = A.shape
    k = kd.reduce_axis((1, m), name="k")
    return kd.compute((n,), lambda i: kd.sum(A[i, k], axis=k))


def _prod_backwards(A):
    k = kd.reduce_axis((3, 1), name="k")
    return kd.compute((A.shape[0],), lambda i: kd.prod(A[i, k], axis=k))


@pytest.mark.parametrize("backend", ["numpy", "interp", "cpu"])
def test_f12_reduce_axis_with_lo_past_hi(backend, request):
    # numpy's range(lo, hi) with hi < lo is empty: the reduction gives its identity
    if backend == "cpu":
        request.getfixturevalue("cpu")
    out = kd.kernel(_sum_from_one)(np.ones((3, 0), np.float32), backend=backend)
    assert out.tolist() == [0.0, 0.0, 0.0]
    A = np.random.default_rng().random((2, 5))
    np.testing.assert_allclose(kd.kernel(_sum_from_one)(A, backend=backend), A[:, 1:].sum(axis=1))
    assert kd.kernel(_prod_backwards)(A, backend=backend).tolist() == [1.0, 1.0]


# ------------------------------------------------------------------ F13
_F13 = r'''
import sys, time, numpy as np, kdsl as kd, kdsl_cpu
sys.path.insert(0, "tests/passes")
from test_schedule_legality import mm_k, unrolled_rfactor
kd.register_backend("cpu", kdsl_cpu.backend)
for dt in ("float32", "uint8"):
    k = kd.kernel(mm_k)
    k.schedule("cpu")(unrolled_rfactor)
    t = time.time()
    assert (k(np.ones((5, 2), dt), np.ones((2, 3), dt), backend="cpu") == 2).all()
    print(dt, time.time() - t)
'''


def test_f13_compile_time_stays_bounded(cpu, tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT, KDSL_CACHE_DIR=str(tmp_path))
    try:
        out = subprocess.run([sys.executable, "-c", _F13], cwd=ROOT, env=env, timeout=120, check=True,
                             capture_output=True, text=True).stdout
    except subprocess.TimeoutExpired:
        pytest.fail("compiling two 5x2 @ 2x3 matmul schedules took more than 120 s")
    t = {line.split()[0]: float(line.split()[1]) for line in out.splitlines()}
    assert t["uint8"] < 3 * t["float32"] + 2, t


# ------------------------------------------------------------------ F16
def _np_float64_scalar(A):
    return np.float64(0.5) + A


def test_f16_np_float64_scalar_is_strong():
    out = kd.kernel(_np_float64_scalar)(np.ones(3, np.float16), backend="numpy")
    assert out.dtype == np.float64


# ------------------------------------------------------------------ F18
def _ge_minus_one(A):
    return kd.where(A >= -1, 1.0, 0.0), A == 300


def test_f18_compare_with_out_of_range_int_by_value():
    A = np.array([0, 1, 255], np.uint8)
    ge, eq = kd.kernel(_ge_minus_one)(A, backend="numpy")
    assert ge.tolist() == [1.0, 1.0, 1.0] and eq.tolist() == [False, False, False]


# ------------------------------------------------------------------ F14
def _sum_u8(A):
    return A.sum(axis=0)


def test_f14_uint8_sum_dtype():
    assert kd.kernel(_sum_u8)(np.ones((3, 2), np.uint8), backend="numpy").dtype == np.uint64


# ------------------------------------------------------------------ F15
def _one_too_far(A):
    n = A.shape[0]
    return kd.compute((n - 1,), lambda i: A[i] + A[i + 2])


@pytest.mark.parametrize("backend", ["numpy", "interp", "cpu"])
def test_f15_index_past_the_end_is_an_index_error(backend, request):
    if backend == "cpu":
        request.getfixturevalue("cpu")
    with pytest.raises(kd.KernelError) as e:
        kd.kernel(_one_too_far)(np.ones(6, np.float32), backend=backend)
    assert isinstance(e.value, IndexError)


# ------------------------------------------------------------------ F17
def _times2(A):
    n = A.shape[0]
    return kd.compute((n,), lambda i: A[i] * 2, name="B")


def test_f17_stage_names_stay_unique():
    names = []

    def sched(s):
        B = s["B"]
        s.cache_write(B, "local")
        try:
            s.cache_write(B, "local")
        except kd.ScheduleError:
            pass                      # refusing the second one is fine too
        names.extend(h.name for h in s.stages)

    out = kern(_times2, "interp", sched)(np.arange(4.0), backend="interp")
    assert out.tolist() == [0.0, 2.0, 4.0, 6.0]
    assert len(names) == len(set(names)), names


# ------------------------------------------------------------------ F19
def _fuse_then_stale_split(s):
    C = s["add"]
    C.fuse(C.axis("i0"), C.axis("i1"))
    ax = C.axis("i0.i1.fused")
    C.split(ax, factor=2)
    C.split(ax, factor=3)          # ax was split already: a fair ScheduleError


def test_f19_stale_axis_after_fuse_is_a_schedule_error():
    A = np.ones((3, 4), np.float32)
    with pytest.raises(kd.ScheduleError):
        kern(_ew, "interp", _fuse_then_stale_split)(A, A, backend="interp")


# ------------------------------------------------------------------ F20
def _clip_u8(A):
    return np.clip(A, -1, 3)


def test_f20_clip_uint8_with_negative_bound():
    A = np.array([0, 2, 9], np.uint8)
    out = kd.kernel(_clip_u8)(A, backend="numpy")
    assert out.dtype == np.uint8 and out.tolist() == [0, 2, 3]


# ------------------------------------------------------------------ F21
def _sum0_sum1(A):
    return A.sum(axis=0, keepdims=True).sum(axis=1, keepdims=True)


def test_f21_cpu_default_schedule_chained_keepdims_sums(cpu):
    A = np.ones((5, 6), np.float32)
    assert kd.kernel(_sum0_sum1)(A, backend="cpu").tolist() == [[30.0]]


# ------------------------------------------------------------------ F22, F23 (GPU-style schedules)
def _sum_from_one_scaled(A):
    n = A.shape[0]
    k = kd.reduce_axis((1, n), name="k")
    return kd.compute((), lambda: kd.sum(A[k], axis=k) * 1.5, name="B")


def _bind_k(s):
    R = s["B_sum"]
    R.bind(R.axis("k"), "threadIdx.x")


def test_f22_cross_thread_reduction_over_empty_axis():
    out = kern(_sum_from_one_scaled, "interp", _bind_k)(np.ones(1, np.float32), backend="interp")
    assert out == 0.0


def _rowsum_b(A):
    n, m = A.shape
    k = kd.reduce_axis(m, name="k")
    return kd.compute((n,), lambda i: kd.sum(A[i, k], axis=k), name="B")


def _bind_inner_reduction(s):
    B = s["B"]
    ko, ki = B.split(B.axis("k"), factor=4)
    B.bind(ki, "threadIdx.x")         # not the outermost reduction loop


def test_f23_cross_thread_rules_at_bind():
    k = kern(_rowsum_b, "interp", _bind_inner_reduction)
    with pytest.raises(kd.ScheduleError) as e:
        k(np.ones((3, 8), np.float32), backend="interp")
    assert "bind" in e.value.loc.code, e.value.loc


# ------------------------------------------------------------------ F24
def _twice(A):
    n = A.shape[0]
    return kd.compute((n,), lambda i: A[i] * 2, name="C")


def _consumer_in_producer(s):
    L = s.cache_write(s["C"], "local")
    P = s.cache_read("A", "local", [L])
    L.compute_at(P, P.axis("ax0"))       # the consumer inside its producer's loop


def test_f24_consumer_inside_producer_loop():
    out = kern(_twice, "interp", _consumer_in_producer)(np.arange(8.0), backend="interp")
    assert out.tolist() == [2.0 * i for i in range(8)]


# ------------------------------------------------------------------ F25
def _argmin_rows(A):
    return np.argmin(A, axis=1)


def _rfactor_then_cache_write(s):
    s.rfactor(s["argmin"], s["argmin"].axis("r0"))
    s.cache_write(s["argmin.rf"], "local")     # argmin.rf computes two values (v0, v1)


def test_f25_cache_write_of_argmin_rfactor_stage():
    """A fair ScheduleError at the call: argmin reads both values of argmin.rf."""
    with pytest.raises(kd.ScheduleError, match=r"(?s)cache_write: stage argmin\.rf computes 2 values.*"
                       r"cache_write the stage that reads them \(argmin\)") as e:
        kern(_argmin_rows, "interp", _rfactor_then_cache_write)(
            np.zeros((4, 16), np.float32), backend="interp")
    assert "_rfactor_then_cache_write" in str(e.value) or "test_findings.py" in str(e.value)


def test_f25_cache_write_of_argmin_itself_still_works():
    A = np.random.default_rng(25).standard_normal((4, 16)).astype(np.float32)
    def sched(s):
        s.rfactor(s["argmin"], s["argmin"].axis("r0"))
        s.cache_write(s["argmin"], "local")
    out = kern(_argmin_rows, "interp", sched)(A, backend="interp")
    assert out.tolist() == np.argmin(A, axis=1).tolist()


# ------------------------------------------------------------------ F26
def _pow_of_narrow_ints(A):
    k = kd.reduce_axis((1, A.shape[1]), name="k")
    return kd.compute((A.shape[0],), lambda i: kd.sum(A[i, k] ** (np.abs(A[i, k]) % 4), axis=k),
                      name="B")


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_f26_power_data_check_of_int32_exponent(backend):
    """The negative-exponent data check reduced an int32 exponent into an int64 min without a
    cast (cpu codegen: raw AssertionError from llvmlite; found by cpu case 5:8289)."""
    if backend == "cpu":
        pytest.importorskip("kdsl_cpu")
    A = np.arange(12, dtype=np.int32).reshape(3, 4)
    want = (A[:, 1:].astype(np.int64) ** (np.abs(A[:, 1:]) % 4)).sum(axis=1)
    assert kd.kernel(_pow_of_narrow_ints)(A, backend=backend).tolist() == want.tolist()
