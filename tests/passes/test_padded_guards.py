"""The padded_compute pass (kdsl/passes/padded_compute.py) on hand schedules: which guards go
(register copies of padded tiles, a sum of their products) and which stay (a sum whose extra
terms would not be zero, a factor whose zeros start past the reduction's end, a combiner
that is not a known sum).  Results checked on the SIMT executor against numpy in float64."""
import dataclasses

import numpy as np
import pytest

from handgraph import Builder, matmul_graph, read, sum_
from test_pipeline import mm_padded_tiles, padded_matmul_graph
from kdsl import dtypes as dt
from kdsl.gpu.simt import run_simt
from kdsl.ir import nodes as n
from kdsl.gpu import pipeline as G
from kdsl.passes import pipeline as P
from kdsl.gpu.pipeline import lower as gpu_lower
from kdsl.passes.state import LowerState
from kdsl.schedule import Schedule


def _graph(extra_one=False, b_rows="k"):
    """C[i, j] = sum_r A[i, r] * B[r, j] (+ 1 per term), r < k; B has ``b_rows`` rows."""
    b = Builder("mm")
    A = b.input("A", ("n", "k"), dt.float32)
    B = b.input("B", (b_rows, "m"), dt.float32)
    i, j, r = b.axis("i", b.dim("n")), b.axis("j", b.dim("m")), b.raxis("r", b.dim("k"))
    term = n.Binary(dt.float32, n.BinOp.MUL, read(A, i, r), read(B, r, j))
    if extra_one:
        term = n.Binary(dt.float32, n.BinOp.ADD, term, n.const(1.0, dt.float32))
    red = sum_(term, [r])
    red = dataclasses.replace(red, combiner=dataclasses.replace(red.combiner, kind=n.CombinerKind.SUM))
    return b.graph(b.compute("C", [i, j], red, [r]))


def _domains(graph, stop="padded_compute"):
    s = Schedule(graph)
    mm_padded_tiles(s)
    st = P.run_pipeline(LowerState(s), G.PIPELINE, stop_after=stop)
    return {h.name: d for h, d in st.domains.items()}


def _kinds(d):
    return sorted(k.name for _, k in d.guards)


def test_register_tiles_of_a_matmul_lose_every_guard():
    before, after = _domains(padded_matmul_graph(), "bound_inference"), _domains(padded_matmul_graph())
    for name in ("A.shared.local", "B.shared.local", "C.local"):
        assert before[name].guards and not after[name].guards, name
    assert len(after["C"].guards) == len(before["C"].guards) == 4   # the array store keeps its tests


def test_a_sum_with_nonzero_extra_terms_keeps_its_k_guard():
    """sum(A*B + 1): past K the padded tiles give 0*0 + 1, so the k guard stays (the row and
    column guards still go: those elements are never stored)."""
    d = _domains(_graph(extra_one=True))["C.local"]
    assert _kinds(d) == ["REDUCE"]


def test_a_factor_padded_past_the_reduction_keeps_the_k_guard():
    """B with its own row count (k2 >= k, unchecked): B's tile holds data, not zeros, between k
    and k2, so a term past K could be 0 * inf."""
    d = _domains(_graph(b_rows="k2"))["C.local"]
    assert _kinds(d) == ["REDUCE"]


def test_only_known_sums():
    """A combiner without ``kind`` (a user's reducer) is left as it was."""
    d = _domains(matmul_graph())["C.local"]
    assert len(d.guards) == 3


@pytest.mark.parametrize("graph,extra", [(padded_matmul_graph, 0.0), (lambda: _graph(extra_one=True), 1.0)])
@pytest.mark.parametrize("nkm", [(9, 13, 7), (16, 16, 16), (0, 3, 2), (3, 0, 2), (20, 30, 17), (1, 1, 1)])
def test_results(graph, extra, nkm, rng):
    nn, kk, mm = nkm
    s = Schedule(graph())
    mm_padded_tiles(s)
    f = gpu_lower(s)
    a = rng.standard_normal((nn, kk)).astype(np.float32)
    b = rng.standard_normal((kk, mm)).astype(np.float32)
    out = np.full((nn, mm), np.nan, np.float32)
    run_simt(f, [a, b], [out], [], block_order=rng)
    np.testing.assert_allclose(out, a.astype(np.float64) @ b + extra * kk, rtol=1e-4, atol=1e-4)
