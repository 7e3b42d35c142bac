"""Issue 8 item 13's schedule reproducers on the cpu backend (compiled), against numpy."""
import os
import sys
import time

import numpy as np
import pytest

import kdsl as kd

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "passes"))
import schedule_search as search  # noqa: E402
import test_schedule_legality as rep  # noqa: E402

RNG = np.random.default_rng(13)


def run_cpu(body, sched, *args):
    k = kd.kernel(body)
    k.schedule("cpu")(sched)
    return k(*args, backend="cpu")


@pytest.mark.parametrize("shape", [(3, 4), (6, 1), (37, 50)])
def test_cache_write_reduction_from_1(shape):
    a = RNG.standard_normal(shape)
    out = run_cpu(rep.rowsum_from_1, lambda s: s.cache_write(s["B"], "local"), a)
    np.testing.assert_allclose(out, a[:, 1:].sum(1), atol=1e-12)


def test_split_after_compute_at():
    def sched(s):
        s["S"].compute_at(s["M"], s["M"].leaf_axes[0])
        s["M"].split(s["M"].leaf_axes[0], factor=4)
    a = RNG.standard_normal(1003)
    np.testing.assert_allclose(run_cpu(rep.chain, sched, a), a * 2 + 1)


@pytest.mark.parametrize("n", [1, 10, 1001])
def test_consumer_in_a_split_loop(n):
    a = RNG.standard_normal(n)
    np.testing.assert_allclose(run_cpu(rep.chain3, rep._consumer_in_split_loop, a), (a * 2 + 1) * 3 + a * 2)


def test_consumer_in_a_parallel_fused_loop_has_no_race():
    a = RNG.standard_normal((3001, 13))
    k = kd.kernel(rep.chain2d)
    k.schedule("cpu")(rep._consumer_in_fused_split_loop)
    for _ in range(5):
        np.testing.assert_allclose(k(a, backend="cpu"), a * 2 + 1)


def test_rfactor_with_non_dividing_splits_and_unroll_compiles_fast():
    a = RNG.standard_normal((37, 500))
    t0 = time.perf_counter()
    out = run_cpu(rep.rowsum, rep._rfactor_non_dividing, a)
    assert time.perf_counter() - t0 < 30
    np.testing.assert_allclose(out, a.sum(1), atol=1e-10)


def test_softmax_rows():
    x = RNG.standard_normal((9, 33))
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(run_cpu(rep.softmax, rep._softmax_rows, x), e / e.sum(1, keepdims=True))


def test_schedule_search_slice_on_cpu():
    res = search.search(10, seed=40, backend="cpu", verbose=False)
    bugs = {k: v for k, v in res.items() if k not in ("ok", "rejected")}
    assert not bugs, "\n\n".join(d for v in bugs.values() for d in v[:3])


@pytest.mark.parametrize("form", ["arith", "and_or_not", "two_axes", "reflected"])
def test_store_predicate_with_axis_arithmetic(form):
    rep.test_store_predicate_with_axis_arithmetic(form, backend="cpu")


@pytest.mark.filterwarnings("ignore::kdsl.ScheduleWarning")
@pytest.mark.parametrize("dt", ["uint8", "int16", "float32"])
@pytest.mark.parametrize("shape", [(5, 2, 3), (9, 13, 30), (1, 1, 1)])
def test_unrolled_rfactor_over_strided_partials_compiles_fast(dt, shape):
    # F13: LLVM vectorized the final reduction over the partials (a run-time stride) by
    # emulating gathers lane by lane, in each unrolled copy: minutes of code generation
    n, m, p = shape
    a = RNG.integers(0, 5, (n, m)).astype(dt)
    b = RNG.integers(0, 5, (m, p)).astype(dt)
    t = time.time()
    out = run_cpu(rep.mm_k, rep.unrolled_rfactor, a, b)
    assert time.time() - t < 30
    want = (a.astype(np.float64) @ b.astype(np.float64))
    np.testing.assert_allclose(out.astype(np.float64), want.astype(dt).astype(np.float64) if dt != "float32" else want,
                               rtol=1e-5)
