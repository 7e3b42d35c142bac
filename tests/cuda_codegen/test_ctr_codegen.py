"""Cross-thread reductions as warp shuffles (kdsl_cuda.codegen.cross_thread): for each group
shape (ctr_cases.SCHEDULES) and combiner, the generated source takes the expected path
(butterfly / segmented / whole warps / strided), NVRTC compiles it, the PTX holds
``shfl.sync``, and the schedule's GPU-form IR gives numpy's result on the SIMT executor (the
oracle for what the CUDA must compute; the device tests run the CUDA itself)."""
import re

import numpy as np
import pytest

import nvrtc_hook
from ctr_cases import REDUCTIONS, SCHEDULES, data, reduction_fn
from kdsl.gpu.simt import run_simt
from kdsl.frontend.spec import TensorSpec
from kdsl.frontend.trace import trace
from kdsl.ir import nodes as n
from kdsl.ir.visitor import collect
from kdsl.passes.pipeline import lower
from kdsl.gpu.pipeline import lower as gpu_lower
from kdsl.schedule import Schedule
from kdsl_cuda.build import compile_ptx
from kdsl_cuda.codegen import generate


def lowered(kind, dtype, sched, axis):
    g = trace(reduction_fn(kind, axis), [TensorSpec(("n", "m"), dtype)])
    s = Schedule(g)
    sched(s)
    return gpu_lower(s)


def simt_check(func, kind, axis, dtype, rng, shape):
    A = data(rng, shape, dtype)
    want = REDUCTIONS[kind][0](A, axis)
    out = np.zeros(want.shape, func.outputs[0].dtype.np)
    run_simt(func, [A], [out], [])
    if np.dtype(dtype).kind == "f" and kind in ("sum", "prod"):
        np.testing.assert_allclose(out, want, rtol=2e-5 if dtype == "float32" else 1e-12, atol=1e-5)
    else:
        np.testing.assert_array_equal(out, want)


def path_of(text: str) -> str:
    body = text[text.index("kd_v0"):]
    if "kd_shfl_" not in body:
        return "strided"
    if "kd_shfl_down" not in body:
        return "butterfly"
    return "whole-warps" if "kd_shfl_xor" in body else "segmented"


@pytest.mark.parametrize("sched,axis,path", SCHEDULES, ids=[s[0].__name__ for s in SCHEDULES])
@pytest.mark.parametrize("kind", ["sum", "argmax"])
def test_every_group_shape(sched, axis, path, kind, rng):
    dtype = "float32"
    func = lowered(kind, dtype, sched, axis)
    (ctr,) = collect(func.body, lambda x: type(x) is n.CrossThreadReduce)
    src = generate(func).source
    assert path_of(src) == path
    nvals = len(ctr.results)
    if path == "butterfly":
        assert "__syncthreads" not in src and "__shared__" not in src
    else:
        assert src.count("__syncthreads();") == 2
        assert src.count("__shared__") == nvals
    ptx = compile_ptx(src, name=f"{sched.__name__}_{kind}.cu")
    if path != "strided":
        assert "shfl.sync" in ptx
    for shape in ((5, 70), (3, 1), (1, 130)):
        simt_check(func, kind, axis, dtype, rng, shape)


#: every combiner and dtype on three group shapes (one warp; 2-D whole warps; segmented)
COMBINER_SCHEDULES = [SCHEDULES[1], SCHEDULES[9], SCHEDULES[4]]


@pytest.mark.parametrize("kind,dtype", [(k, d) for k, (_, ds) in REDUCTIONS.items() for d in ds])
@pytest.mark.parametrize("sched,axis,path", COMBINER_SCHEDULES,
                         ids=[s[0].__name__ for s in COMBINER_SCHEDULES])
def test_every_combiner(kind, dtype, sched, axis, path, rng):
    func = lowered(kind, dtype, sched, axis)
    src = generate(func).source
    assert path_of(src) == path
    simt_check(func, kind, axis, dtype, rng, (4, 67))
    assert nvrtc_hook.check(func) in ("compiled", "cached")      # memoised with the conftest hook


def test_argmax_moves_index_and_value_together():
    func = lowered("argmax", "float64", SCHEDULES[3][0], 1)     # 48 threads: segmented
    src = generate(func).source
    body = src[src.index("kd_v0"):]
    assert len(re.findall(r"const int64_t kd_o\w* = kd_shfl_down", body)) == 5    # 16 .. 1
    assert len(re.findall(r"const double kd_o\w* = kd_shfl_down", body)) == 5
    assert "__shared__ __align__(16) int64_t kd_red0_0[48];" in src
    assert "__shared__ __align__(16) double kd_red0_1[48];" in src


def test_every_member_of_the_group_gets_the_result():
    """The result buffer is written by every thread (not only by the storing one): the
    statement's meaning, which the core's predicate and later reads rely on."""
    func = lowered("sum", "float32", SCHEDULES[5][0], 1)
    src = generate(func).source
    body = src[src.index("kd_v0"):]
    store_line = next(line for line in body.splitlines() if "sum_v[0] = kd_v0" in line)
    assert "if" not in store_line
