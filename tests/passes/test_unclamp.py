"""unclamp: the clamps kdsl.frontend.access puts on kd.where-guarded reads are peeled off the
middle of innermost loops; the result still computes numpy's values in the bounds-checking
IR interpreter, on sizes that do and do not divide the split factors (0, 1, 2 included)."""
import re

import numpy as np
import pytest

import kdsl as kd
from kdsl.backends.interpreter import run_lowered
from kdsl.frontend.spec import TensorSpec
from kdsl.frontend.trace import trace
from kdsl.ir import nodes as n
from kdsl.ir.visitor import collect
from kdsl.ir.verifier import verify
from kdsl.passes.pipeline import lower
from kdsl_cpu.passes.tighten_loops import tighten_loops
from kdsl_cpu.passes.unclamp import unclamp
from kdsl.schedule import Schedule

RNG = np.random.default_rng(11)
F64 = kd.float64


def padded1d(x):
    n_, = x.shape
    return kd.compute((n_,), lambda i: kd.where(i > 0, x[i - 1], 0.0) + x[i]
                      + kd.where(i < n_ - 1, x[i + 1], 0.0), name="B")


def padded2d(A):
    h, w = A.shape
    return kd.compute((h, w), lambda i, j: kd.where(
        (i >= 1) & (j >= 2) & (j < w - 1), A[i - 1, j - 2] + A[i, j + 1], -A[i, j]), name="B")


def ref1d(x):
    p = np.pad(x, 1)
    return p[:-2] + p[1:-1] + p[2:]


def ref2d(A):
    out = -A.copy()
    h, w = A.shape
    if h > 1 and w > 3:
        out[1:, 2:w - 1] = A[:-1, :w - 3] + A[1:, 3:]
    return out


def s_none(s):
    pass


def s_split_vec(s):
    B = s["B"]
    _, inner = B.split(B.axes[-1], factor=8)
    B.vectorize(inner)


def s_tile(s):
    B = s["B"]
    B.tile(B.axes[0], B.axes[1], 3, 4)


def _lowered(fn, ndim, sched):
    g = trace(fn, [TensorSpec((None,) * ndim, F64)])
    s = Schedule(g)
    sched(s)
    return unclamp(tighten_loops(lower(s)))


def _clamped_loads(stmt) -> int:
    return sum(1 for ld in collect(stmt, lambda x: isinstance(x, n.Load))
               for i in ld.indices
               if collect(i, lambda x: isinstance(x, n.Binary) and x.op in (n.BinOp.MIN,
                                                                               n.BinOp.MAX)))


@pytest.mark.parametrize("sched", [s_none, s_split_vec])
@pytest.mark.parametrize("size", [0, 1, 2, 3, 9, 17])
def test_unclamp_1d(sched, size):
    f = _lowered(padded1d, 1, sched)
    verify(f)
    x = RNG.random(size)
    out = np.full(size, np.nan)
    run_lowered(f, [x], [out], [])
    np.testing.assert_allclose(out, ref1d(x))


@pytest.mark.parametrize("sched", [s_none, s_split_vec, s_tile])
@pytest.mark.parametrize("shape", [(0, 4), (1, 1), (2, 3), (4, 4), (5, 11)])
def test_unclamp_2d(sched, shape):
    f = _lowered(padded2d, 2, sched)
    verify(f)
    A = RNG.random(shape)
    out = np.full(shape, np.nan)
    run_lowered(f, [A], [out], [])
    np.testing.assert_allclose(out, ref2d(A))


def test_middle_loop_reads_plainly():
    f = _lowered(padded1d, 1, s_none)
    loops = [s for s in collect(f.body, lambda x: isinstance(x, n.For))]
    assert len(loops) == 3                      # head, middle, tail
    assert [_clamped_loads(lp) for lp in loops] == [2, 0, 2]
    text = str(f)
    assert re.search(r"x\[i(_\d)? - 1\]", text) and re.search(r"x\[i(_\d)? \+ 1\]", text)


def test_unclamp_leaves_other_loops_alone():
    def plain(x):
        n_, = x.shape
        return kd.compute((n_,), lambda i: kd.minimum(x[i], 1.0) + kd.minimum(i, 3), name="B")
    g = trace(plain, [TensorSpec((None,), F64)])
    f = tighten_loops(lower(Schedule(g)))
    assert unclamp(f) is f                      # clamps of values, not of load indices
