"""Shared buffers sized at launch (dynamic shared memory) in the core: the launch's
``dynamic_shared`` bytes (kdsl.ir.shared_memory's layout), the SIMT executor running such
kernels race-checked and refusing more than 227 KB per block, no barrier between threads that
only touch their own elements of a row of run-time length, and the schedules that stay
illegal (a local buffer of run-time size) as ScheduleErrors."""
import numpy as np
import pytest

import kdsl as kd
from kdsl.errors import ArgumentError, ScheduleError
from kdsl.ir import nodes as n
from kdsl.ir.shared_memory import ALIGN, LIMIT, shared_layout
from kdsl.ir.visitor import collect


def _row_scale(threads=64, scope="shared", own=True):
    """Y[i, j] = X[i, j] * 2 with row i of X cached in ``scope`` at the block loop; ``own``:
    each thread copies the elements it later reads (no barrier needed), else a shifted map."""
    @kd.kernel
    def row_scale(X):
        return kd.compute(X.shape, lambda i, j: X[i, j] * 2, name="Y")

    @row_scale.schedule("cuda")
    def sched(s):
        Y = s["Y"]
        XS = s.cache_read("X", scope, [Y])
        i, j = Y.axes
        jo, jt = Y.split(j, factor=threads)
        Y.reorder(i, jt, jo)
        Y.bind(i, "blockIdx.x")
        Y.bind(jt, "threadIdx.x")
        if scope == "local":      # per thread, the elements of all its passes: run-time size
            XS.compute_at(Y, jt)
            return
        XS.compute_at(Y, i)
        xi, xj = XS.stage.axes
        if own:
            xo, xt = XS.split(xj, factor=threads)
            XS.reorder(xi, xt, xo)
        else:       # thread t copies a contiguous chunk: others read it (a barrier is needed)
            xt, xo = XS.split(xj, nparts=threads)
        XS.bind(xt, "threadIdx.x")
    return row_scale


@pytest.mark.parametrize("m", [1, 7, 64, 1000])
@pytest.mark.parametrize("own", [True, False])
def test_row_of_runtime_length_in_shared(m, own, rng):
    k = _row_scale(own=own)
    X = rng.standard_normal((3, m)).astype(np.float32)
    func = k.lower(X, backend="interp-cuda")
    (kern,) = func.kernels
    np.testing.assert_array_equal(k(X, backend="interp-cuda"), X * 2)
    if m == 1:       # the size class of 1 is a constant: a static buffer
        assert kern.launch.dynamic_shared is None
        return
    dyn = kern.launch.dynamic_shared
    assert dyn is not None and not isinstance(dyn, n.Const)
    layout = shared_layout(kern.body)
    assert [b.name for b, _ in layout.dynamic] == ["X.shared"] and layout.static == ()
    barriers = collect(kern.body, lambda x: type(x) is n.Barrier)
    assert bool(barriers) == (not own)       # own elements: no barrier (sync's digits)


def test_dynamic_bytes_are_aligned_slices():
    k = _row_scale()
    func = k.lower(kd.TensorSpec(("n", "m"), kd.float16), backend="interp-cuda")
    (kern,) = func.kernels
    from kdsl.ir.evaluate import eval_expr
    m = func.scalars[1]                    # the row length
    for length in (1, 7, 64, 1000):
        b = int(eval_expr(kern.launch.dynamic_shared, {m: length}))
        assert b % ALIGN == 0 and b >= length * 2
    assert "shared=" in str(func)


def test_simt_refuses_more_than_the_device_has(rng):
    k = _row_scale()
    ok = np.zeros((1, LIMIT // 4 - 1024), np.float32)
    np.testing.assert_array_equal(k(ok, backend="interp-cuda"), ok)
    big = np.zeros((1, LIMIT // 4 + 64), np.float32)
    with pytest.raises(ArgumentError, match=r"'row_scale_kernel0' needs \d+ bytes of shared "
                                            r"memory.*X\.shared.*\(232448 bytes\)"):
        k(big, backend="interp-cuda")


def test_local_buffer_of_runtime_size_is_refused():
    k = _row_scale(scope="local")
    with pytest.raises(ScheduleError, match=r"'X.local' is in local memory.*known only at run "
                                            r"time") as ei:
        k.lower(kd.TensorSpec(("n", "m"), kd.float32), backend="interp-cuda")
    assert "set_scope('shared')" in str(ei.value)
