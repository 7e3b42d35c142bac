"""No out-of-bounds access, ever (issue 8 item 1): kdsl.frontend.access and the checks it adds.

Every ``case_*`` function takes a backend name; the tests below run them on the reference
executors (numpy, interp) and tests/cpu/test_cpu_bounds.py runs the same cases on ``cpu``.
"""
import inspect

import numpy as np
import pytest

import kdsl as kd
from kdsl.errors import KernelIndexError
from kdsl.frontend.spec import ScalarSpec, TensorSpec
from kdsl.frontend.trace import trace
from kdsl.ir import nodes as n
from kdsl.ir.visitor import collect

F32 = np.float32


def _line(fn, text):
    """The line number of the first line of ``fn``'s source containing ``text``."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, ln in enumerate(lines) if text in ln)


def _raises(fn, *args, backend, match=()):
    with pytest.raises(KernelIndexError) as e:
        fn(*args, backend=backend)
    assert isinstance(e.value, IndexError) and isinstance(e.value, kd.KernelError)
    for m in match:
        assert m in str(e.value), (m, str(e.value))
    return e.value


def _index_checks(graph):
    return [c for c in graph.constraints if c.error is KernelIndexError]


def _clamps(graph) -> int:
    return sum(len(collect(st.body, lambda x: isinstance(x, n.Binary) and x.op in
                           (n.BinOp.MIN, n.BinOp.MAX))) for st in graph.stages)


def _vec(size=None):
    return TensorSpec((size,), kd.float32)


# ----------------------------------------------------------------- the reproducers
@kd.kernel
def far(x):
    n_, = x.shape
    return kd.compute((n_,), lambda i: x[i + 100_000_000])


@kd.kernel
def lit10(x):
    return x[10]


@kd.kernel
def minus3(x):
    n_, = x.shape
    return kd.compute((n_,), lambda i: x[i - 3])


@kd.kernel
def stencil_too_big(x):
    n_, = x.shape
    return kd.compute((n_ - 1,), lambda i: x[i] + x[i + 1] + x[i + 2])


@kd.kernel
def stencil_ok(x):
    n_, = x.shape
    return kd.compute((n_ - 2,), lambda i: x[i] + x[i + 1] + x[i + 2])


@kd.kernel
def red_too_long(x):
    m, = x.shape
    k = kd.reduce_axis(m + 5, name="k")
    return kd.compute((1,), lambda i: kd.sum(x[k], axis=k))


def case_far(backend):
    x = np.arange(5, dtype=F32)
    e = _raises(far, x, backend=backend,
                match=("x[i + 100000000]", "100000000..100000004", "axis 0", "x.shape[0] is 5"))
    assert e.loc.line == _line(far.fn, "100_000_000")


def case_literal(backend):
    x = np.arange(5, dtype=F32)
    e = _raises(lit10, x, backend=backend,
                match=("index 10 is out of bounds for axis 0 of x with size 5",))
    assert e.loc.line == _line(lit10.fn, "x[10]")
    y = np.arange(12, dtype=F32)
    assert lit10(y, backend=backend) == 10


def case_minus3(backend):
    x = np.arange(5, dtype=F32)
    _raises(minus3, x, backend=backend, match=("x[i - 3]", "-3..1", "x.shape[0] is 5"))


def case_stencil_shape(backend, rng=np.random.default_rng(1)):
    x = rng.random(9, dtype=F32)
    _raises(stencil_too_big, x, backend=backend, match=("x[i + 2]", "2..9", "is 9"))
    want = x[:-2].astype(np.float64) + x[1:-1] + x[2:]
    np.testing.assert_allclose(stencil_ok(x, backend=backend), want, rtol=1e-6)
    for size in (2,):     # an empty output: nothing is read, nothing to check
        assert stencil_ok(np.ones(size, F32), backend=backend).shape == (0,)


def case_reduce_axis(backend):
    x = np.arange(5, dtype=F32)
    e = _raises(red_too_long, x, backend=backend, match=("x[k]", "0..9", "x.shape[0] is 5"))
    assert e.loc.line == _line(red_too_long.fn, "kd.sum(x[k]")


# ----------------------------------------------------------------- kd.where guards
@kd.kernel
def padded(x):
    n_, = x.shape
    return kd.compute((n_,), lambda i: kd.where(i > 0, x[i - 1], 0.0) + x[i]
                      + kd.where(i < n_ - 1, x[i + 1], 0.0))


@kd.kernel
def padded2d(A):
    h, w = A.shape
    return kd.compute((h, w), lambda i, j: kd.where(
        (i >= 1) & (j >= 1) & (i < h - 1) & (j < w - 1),
        A[i - 1, j] + A[i + 1, j] + A[i, j - 1] + A[i, j + 1] - 4 * A[i, j], A[i, j]))


def _padded_ref(x):
    x = x.astype(np.float64)
    p = np.pad(x, 1)
    return p[:-2] + p[1:-1] + p[2:]


def case_padded_stencil(backend, rng=np.random.default_rng(2)):
    for size in (7, 2, 1, 0):
        x = rng.random(size, dtype=F32)
        np.testing.assert_allclose(padded(x, backend=backend), _padded_ref(x), rtol=1e-6)
    for shape in ((5, 6), (1, 4), (3, 1), (0, 3)):
        A = rng.random(shape, dtype=F32)
        want = A.astype(np.float64).copy()
        if shape[0] > 2 and shape[1] > 2:
            c = A.astype(np.float64)
            want[1:-1, 1:-1] = (c[:-2, 1:-1] + c[2:, 1:-1] + c[1:-1, :-2] + c[1:-1, 2:]
                                - 4 * c[1:-1, 1:-1])
        np.testing.assert_allclose(padded2d(A, backend=backend), want, rtol=1e-5, atol=1e-6)
    # strided views
    B = rng.random((8, 10), dtype=F32)[::2, ::-3]
    assert padded2d(B, backend=backend).shape == B.shape


@kd.kernel
def concat(a, b):
    na, = a.shape
    nb, = b.shape
    return kd.compute((na + nb,), lambda i: kd.where(i < na, a[i], b[i - na]))


def case_concat_and_empty_branch(backend, rng=np.random.default_rng(3)):
    a, b = rng.random(4, dtype=F32), rng.random(3, dtype=F32)
    np.testing.assert_array_equal(concat(a, b, backend=backend), np.concatenate([a, b]))
    # F44: b[i - na] is checked where its branch is taken, which is nowhere when b is empty
    # (and a[i] nowhere when a is): the read is dead, the empty array is never touched
    e = np.ones(0, F32)
    np.testing.assert_array_equal(concat(a, e, backend=backend), a)
    np.testing.assert_array_equal(concat(e, b, backend=backend), b)
    assert concat(e, e, backend=backend).shape == (0,)


@kd.kernel
def live_reads(x, y, c):
    ny, = y.shape
    return kd.compute((ny,), lambda i: kd.where(y[i] > 0, x[i], -1.0)
                      + kd.where(i >= c, x[i - c], 0.0))


@kd.kernel
def unguarded_clamp(x):
    nx, = x.shape
    return kd.compute((nx + 2,), lambda i: x[kd.minimum(i, nx - 1)])


def case_empty_arrays_read_where_taken(backend):
    # a guarded read of an empty array is refused where its branch is taken somewhere
    e, y, neg = np.ones(0, F32), np.array([-1, 2, -3], F32), np.full(3, -1, F32)
    _raises(live_reads, e, neg, 0, backend=backend, match=("x[i - c]", "is 0"))
    _raises(live_reads, e, y, 5, backend=backend, match=("x[i]", "is 0"))
    np.testing.assert_array_equal(live_reads(e, neg, 5, backend=backend), [-1, -1, -1])
    x = np.arange(4, dtype=F32)
    np.testing.assert_array_equal(live_reads(x, y, 1, backend=backend), [-1, 1 + 0, -1 + 1])
    # an unguarded read of an empty array is still refused (clamped, but nothing to read)
    _raises(unguarded_clamp, e, backend=backend, match=("x[", "x.shape[0] is 0"))
    np.testing.assert_array_equal(unguarded_clamp(x[:1], backend=backend), [0, 0, 0])


@kd.kernel
def masked_by_data(x, y):
    n_, = x.shape
    return kd.compute((n_,), lambda i: kd.where(x[i] > 0, y[i + 1], -1.0))


def case_data_condition(backend):
    x = np.array([1, 1, 0, 0], F32)
    y = np.arange(3, dtype=F32)
    # y[i + 1] is read only where x[i] > 0 (i = 0, 1): in range
    np.testing.assert_array_equal(masked_by_data(x, y, backend=backend), [1, 2, -1, -1])
    e = _raises(masked_by_data, np.ones(4, F32), y, backend=backend,
                match=("y[i + 1]", "1..4", "where its kd.where condition holds", "is 3"))
    assert e.loc.line == _line(masked_by_data.fn, "y[i + 1]")


@kd.kernel
def masked_sum(x):
    m, = x.shape
    k = kd.reduce_axis(m + 1, name="k")
    return kd.compute((1,), lambda i: kd.sum(x[k - 1], axis=k, where=k > 0))


def case_reduce_where(backend, rng=np.random.default_rng(4)):
    for size in (6, 1):
        x = rng.random(size, dtype=F32)
        np.testing.assert_allclose(masked_sum(x, backend=backend), [x.astype(np.float64).sum()],
                                   rtol=1e-6)
    # x[k - 1] is checked where where= holds (k >= 1): nowhere when x is empty, so the read
    # is dead there and the empty array is never touched (F44): a sum of nothing
    np.testing.assert_array_equal(masked_sum(np.ones(0, F32), backend=backend), [0.0])


# ----------------------------------------------------------------- gathers
@kd.kernel
def gather(x, idx):
    n_, = idx.shape
    return kd.compute((n_,), lambda i: x[idx[i]])


@kd.kernel
def gather_guarded(x, idx):
    n_, = idx.shape
    return kd.compute((n_,), lambda i: kd.where(idx[i] >= 0, x[idx[i]], -1.0))


@kd.kernel
def gather2(x, idx, jdx):
    n_, = jdx.shape
    return kd.compute((n_,), lambda i: x[idx[jdx[i]]] * 2)


def case_gather(backend, rng=np.random.default_rng(5)):
    x = rng.random(6, dtype=F32)
    idx = rng.integers(0, 6, 11)
    np.testing.assert_array_equal(gather(x, idx, backend=backend), x[idx])
    e = _raises(gather, x, np.array([0, 6, 2]), backend=backend,
                match=("x[idx[i]]", "0..6", "x.shape[0] is 6"))
    assert e.loc.line == _line(gather.fn, "x[idx[i]]")
    # absolute indices: -1 is out of range, not the last element
    _raises(gather, x, np.array([-1, 0]), backend=backend, match=("-1..0",))
    # an empty gather reads nothing
    assert gather(x, np.zeros(0, np.int64), backend=backend).shape == (0,)
    out = np.full(2, 7, F32)
    _raises(gather, x, np.array([0, 9]), backend=backend)
    with pytest.raises(KernelIndexError):     # checked before the kernel writes anything
        gather(x, np.array([0, 9]), backend=backend, out=out)
    np.testing.assert_array_equal(out, [7, 7])


def case_gather_guarded(backend):
    x = np.arange(4, dtype=F32) + 10
    idx = np.array([2, -5, 0, -1])
    np.testing.assert_array_equal(gather_guarded(x, idx, backend=backend), [12, -1, 10, -1])
    _raises(gather_guarded, x, np.array([4, -1]), backend=backend, match=("4..4",))


def case_nested_gather(backend, rng=np.random.default_rng(6)):
    x = rng.random(5, dtype=F32)
    idx = np.array([4, 0, 3], np.int64)
    jdx = np.array([2, 2, 0, 1], np.int64)
    np.testing.assert_allclose(gather2(x, idx, jdx, backend=backend), 2 * x[idx[jdx]])
    # the inner index is checked first (the outer one read through a clamped inner read)
    _raises(gather2, x, idx, np.array([0, 3]), backend=backend, match=("idx[jdx[i]]", "0..3"))
    _raises(gather2, x, np.array([4, 5]), np.array([0, 1]), backend=backend,
            match=("x[idx[jdx[i]]]", "4..5"))


# ----------------------------------------------------------------- intermediates, scalars
@kd.kernel
def shifted_intermediate(x):
    n_, = x.shape
    t = kd.compute((n_,), lambda i: x[i] * 2, name="t")
    return kd.compute((n_,), lambda i: t[i + 1])


@kd.kernel
def offset(x, s):
    n_, = x.shape
    return kd.compute((n_ - 2,), lambda i: x[i + s])


@kd.kernel
def pick(x, s):
    return x[s] * 2


def case_traced_scalar_index(backend):
    x = np.arange(4, dtype=F32)
    assert pick(x, 3, backend=backend) == 6
    # a traced integer is an index-style index: absolute, no wrap-around
    _raises(pick, x, -1, backend=backend, match=("x[s]", "-1..-1", "x.shape[0] is 4"))
    _raises(pick, x, 4, backend=backend, match=("4..4",))


@kd.kernel
def shift_if(x, s):
    n_, = x.shape
    return kd.compute((n_ - 2,), lambda i: kd.where(s > 0, x[i + s], 0.0))


def case_uniform_condition(backend):
    x = np.arange(6, dtype=F32)
    np.testing.assert_array_equal(shift_if(x, 2, backend=backend), x[2:])
    # the branch is not taken for s <= 0: nothing to check there
    np.testing.assert_array_equal(shift_if(x, -7, backend=backend), np.zeros(4))
    _raises(shift_if, x, 3, backend=backend, match=("x[i + s]", "3..6", "condition holds"))


def case_intermediate_and_scalar(backend):
    x = np.arange(6, dtype=F32)
    _raises(shifted_intermediate, x, backend=backend, match=("t[i + 1]", "1..6", "t.shape[0] is 6"))
    np.testing.assert_array_equal(offset(x, 2, backend=backend), x[2:])
    np.testing.assert_array_equal(offset(x, 0, backend=backend), x[:4])
    _raises(offset, x, 3, backend=backend, match=("x[i + s]", "3..6"))
    _raises(offset, x, -1, backend=backend, match=("-1..2",))


# ----------------------------------------------------------------- numpy-style indices
@kd.kernel
def last(x):
    return x[-1] + x[0]


@kd.kernel
def row_minus2(A):
    return A[-2] * 2


def case_numpy_literals(backend):
    x = np.arange(5, dtype=F32)
    assert last(x, backend=backend) == 4
    assert last(np.ones(1, F32), backend=backend) == 2
    _raises(last, np.ones(0, F32), backend=backend,
            match=("index -1 is out of bounds for axis 0 of x with size 0",))
    A = np.arange(12, dtype=F32).reshape(4, 3)
    np.testing.assert_array_equal(row_minus2(A, backend=backend), A[-2] * 2)
    _raises(row_minus2, A[:1], backend=backend, match=("index -2", "size 1"))


def case_static_shapes(backend):
    kern = kd.kernel(far.fn, specialize=True)
    _raises(kern, np.ones(5, F32), backend=backend, match=("100000000..100000004",))
    kern = kd.kernel(stencil_ok.fn, specialize=True)
    np.testing.assert_array_equal(kern(np.ones(5, F32), backend=backend), [3, 3, 3])
    kern = kd.kernel(lit10.fn, specialize=True)     # a static size: found while tracing
    with pytest.raises(KernelIndexError, match="index 10 is out of bounds"):
        kern(np.ones(5, F32), backend=backend)


def case_empty_domain(backend):
    # the index formula is out of range, but no element is computed: no error
    assert far(np.ones(0, F32), backend=backend).shape == (0,)
    assert minus3(np.ones(0, F32), backend=backend).shape == (0,)
    assert gather(np.ones(0, F32), np.zeros(0, np.int64), backend=backend).shape == (0,)


def _shift_kernel(d, c1, c2, a):
    def body(x):
        n_, = x.shape
        return kd.compute((n_ + d,), lambda i: kd.where((i >= c1) & (i < n_ - c2), x[i + a], -1.0)
                          + 2 * x[kd.minimum(i, n_ - 1)])
    return kd.kernel(body)


def _shift_ref(x, d, c1, c2, a):
    """numpy semantics of _shift_kernel: None where some evaluated read is out of range."""
    size = len(x) + d
    out = np.empty(max(size, 0))
    for i in range(size):
        if not 0 <= min(i, len(x) - 1) < len(x):
            return None
        take = c1 <= i < len(x) - c2
        if take and not 0 <= i + a < len(x):
            return None
        out[i] = (x[i + a] if take else -1.0) + 2 * x[min(i, len(x) - 1)]
    return out


def case_random_shifts(backend, rng=np.random.default_rng(8)):
    """Exact checks: an error exactly where numpy's lazy-where semantics would read out of
    range, the right values everywhere else (random offsets, guards, sizes)."""
    for _ in range(12):
        d, c1, c2, a = (int(v) for v in rng.integers(-2, 3, 4))
        kern = _shift_kernel(d, c1, c2, a)
        for size in (0, 1, 3, 6):
            x = rng.random(size).astype(F32)
            want = _shift_ref(x, d, c1, c2, a) if size + d >= 0 else "skip"
            if isinstance(want, str):
                continue
            if want is None:
                with pytest.raises(KernelIndexError):
                    kern(x, backend=backend)
            else:
                np.testing.assert_allclose(kern(x, backend=backend), want, rtol=1e-6,
                                           err_msg=str((d, c1, c2, a, size)))


def case_integer_power_needs_nonnegative_exponents(backend):
    """numpy raises ValueError for integer ** negative integer; an exponent that is array data
    is checked before the kernel runs, only where the power is evaluated (inside kd.where)."""
    from kdsl.errors import KernelValueError

    @kd.kernel
    def power(a, b):
        return kd.where(a > 0, a ** b, 0)

    a, b = np.array([2, 3, 0, 5]), np.array([3, 0, -1, 1])
    np.testing.assert_array_equal(power(a, b, backend=backend), [8, 1, 0, 5])
    with pytest.raises(KernelValueError, match=r"exponents are -2\.\.1"):
        power(a, np.array([1, -2, 0, 1]), backend=backend)
    with pytest.raises(ValueError, match="negative integer powers"):
        kd.kernel(lambda x, y: x ** y)(np.arange(3), np.array([1, -1, 2]), backend=backend)
    u = np.array([0, 1, 2], np.uint8)      # unsigned exponents need no check
    np.testing.assert_array_equal(kd.kernel(lambda x, y: x ** y)(np.arange(3), u, backend=backend),
                                  np.arange(3) ** u)


CASES = [name for name in dict(globals()) if name.startswith("case_")]


@pytest.mark.parametrize("case", CASES)
def test_bounds(case, executor):
    globals()[case](executor)


# ----------------------------------------------------------------- the graph
def _graph(fn, *specs):
    return trace(fn, list(specs))


def test_proven_kernels_have_no_checks():
    M = TensorSpec((None, None), kd.float32)

    def softmax(X):
        e = kd.exp(X - X.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def conv3(A, W):
        n_, m = A.shape
        ri, rj = kd.reduce_axis(3), kd.reduce_axis(3)
        return kd.compute((n_ - 2, m - 2), lambda i, j: kd.sum(A[i + ri, j + rj] * W[ri, rj],
                                                              axis=[ri, rj]))

    def views(A):
        n_, m = A.shape
        return A[1:, ::-1].T.reshape(-1) * 2

    def rsplit(x, n_, m):
        return x.reshape(n_, m).sum(axis=1)

    def tail_sum(x):
        m, = x.shape
        k = kd.reduce_axis((1, m))
        return kd.compute((1,), lambda i: kd.sum(x[k] - x[k - 1], axis=k))

    cases = [
        (lambda a, b: a + b, [M, M]), (lambda a, b: a @ b, [M, M]), (softmax, [M]),
        (lambda a: a.sum(axis=0), [M]), (views, [M]), (tail_sum, [_vec()]),
        (conv3, [M, TensorSpec((3, 3), kd.float32)]), (stencil_ok.fn, [_vec()]),
        (rsplit, [_vec(), ScalarSpec(kd.int64, 4), ScalarSpec(kd.int64, 6)]),
    ]
    for fn, specs in cases:
        g = _graph(fn, *specs)
        assert not _index_checks(g) and not g.data_checks, fn
    # padded stencils: no call-time check, only the reads under kd.where clamped
    g = _graph(padded.fn, _vec())
    assert not _index_checks(g) and not g.data_checks and _clamps(g) == 2
    g = _graph(padded2d.fn, M)
    assert not _index_checks(g) and not g.data_checks and _clamps(g) == 4


def test_what_gets_checked():
    g = _graph(far.fn, _vec())
    (c,) = _index_checks(g)
    assert not g.data_checks and _clamps(g) == 0       # checked per call: no clamp needed
    g = _graph(gather.fn, _vec(), TensorSpec((None,), kd.int64))
    assert len(g.data_checks) == 1 and _clamps(g) == 2
    (c,) = _index_checks(g)      # x could be empty: nothing to clamp into
    assert "x.shape[0] is 0" in c.message
    g = _graph(offset.fn, _vec(), ScalarSpec(kd.int64))
    assert len(_index_checks(g)) == 1
    g = _graph(concat.fn, _vec(), _vec())
    # a and b could be empty: no check (each read is dead where its array is empty, F44),
    # the clamps keep the untaken reads in range, the marks keep empty arrays untouched
    assert not _index_checks(g) and _clamps(g) == 2 and not g.data_checks
    assert all(t.empty_reads for t in g.inputs)


def test_access_analysis_is_fast_on_long_chains():
    import time

    def chain(x):
        for k in range(100):   # (deeper chains are the tracing helper's; see issue 8 item 6)
            x = x * 1.0001 + k
        return x
    t0 = time.perf_counter()
    g = _graph(chain, _vec())
    assert time.perf_counter() - t0 < 5
    assert not _index_checks(g)
