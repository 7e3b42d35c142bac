"""float16/bfloat16 code (16-bit storage, float math rounded after every op, no headers) and
``cp.async`` for the pipelined copies (AsyncCopy / CommitGroup / WaitGroup): the source and
PTX hold the conversions and the asynchronous copies, NVRTC compiles them, and the schedules'
GPU-form IR matches numpy on the SIMT executor."""
import re

import numpy as np
import pytest

import kdsl as kd
import schedules as S
from ctr_cases import rows_x
from test_seed002_ladder import LADDER
from kdsl import dtypes as dt
from kdsl.gpu.simt import run_simt
from kdsl.frontend.spec import TensorSpec
from kdsl.frontend.trace import trace
from kdsl.ir import nodes as n
from kdsl.ir.visitor import collect
from kdsl.gpu.interior_blocks import edge_copy
from kdsl.passes.pipeline import lower
from kdsl.gpu.pipeline import lower as gpu_lower
from kdsl.schedule import Schedule
from kdsl_cuda.build import compile_cubin, compile_ptx
from kdsl_cuda.codegen import generate


def tile(s):
    O = s.outputs[0]
    io, jo, ii, ji = O.tile(O.axes[0], O.axes[1], 4, 32)
    for ax, tag in ((io, "blockIdx.y"), (jo, "blockIdx.x"), (ii, "threadIdx.y"), (ji, "threadIdx.x")):
        O.bind(ax, tag)


def chain(X, Y):
    return kd.compute(X.shape, lambda i, j: kd.tanh(X[i, j] * Y[i, j] + 0.1) - kd.exp(-abs(Y[i, j]))
                      + kd.maximum(X[i, j], Y[i, j]) / 3.0, name="O")


def lowered(fn, specs, sched):
    s = Schedule(trace(fn, specs))
    sched(s)
    return gpu_lower(s)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_elementwise_source_and_ptx(dtype):
    func = lowered(chain, [TensorSpec(("n", "m"), dtype)] * 2, tile)
    src = generate(func).source
    assert "#include" not in src
    assert re.search(r"const uint16_t\* __restrict__ X", src) and re.search(r"uint16_t\* __restrict__ O", src)
    ptx = compile_ptx(src)
    assert "ld.global.nc.u16" in ptx or "ld.global.u16" in ptx
    assert "st.global.u16" in ptx or "st.global.b16" in ptx
    if dtype == "float16":
        # float -> half by cvt; half -> float by cvt or (kd_h2f) exactly by a 2^112 scale
        assert "cvt.rn.f16.f32" in ptx and ("cvt.f32.f16" in ptx or "0f77800000" in ptx)
    assert compile_cubin(src)[:4] == b"\x7fELF"


def test_float16_elementwise_matches_numpy_on_simt(rng):
    func = lowered(chain, [TensorSpec(("n", "m"), "float16")] * 2, tile)
    X = rng.standard_normal((5, 37)).astype(np.float16)
    Y = rng.standard_normal((5, 37)).astype(np.float16)
    out = np.zeros((5, 37), np.float16)
    run_simt(func, [X, Y], [out], [])
    x, y = X.astype(np.float64), Y.astype(np.float64)
    want = np.tanh(x * y + 0.1) - np.exp(-abs(y)) + np.maximum(x, y) / 3.0
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("kind", ["sum", "max", "argmax"])
def test_float16_cross_thread_reductions(kind, rng):
    """float16 values shuffle as floats (their register form); sum accumulates in float32."""
    fn = {"sum": lambda X: kd.sum(X, axis=1, dtype="float32"), "max": lambda X: kd.max(X, axis=1),
          "argmax": lambda X: kd.argmax(X, axis=1)}[kind]
    func = lowered(fn, [TensorSpec(("n", "m"), "float16")], rows_x(48))
    src = generate(func).source
    assert "kd_shfl_down(" in src and re.search(r"kd_h2fv?\(", src)
    assert compile_cubin(src)[:4] == b"\x7fELF"
    A = rng.standard_normal((3, 100)).astype(np.float16)
    want = {"sum": lambda a: a.astype(np.float64).sum(1), "max": lambda a: a.max(1),
            "argmax": lambda a: a.argmax(1)}[kind](A)
    out = np.zeros(want.shape, func.outputs[0].dtype.np)
    run_simt(func, [A], [out], [])
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=1e-3, atol=1e-3)


def test_16_bit_literals_and_casts_round_like_numpy():
    from kdsl_cuda.codegen.types import literal
    assert literal(0.1, dt.float16) == f"{float(np.float16(0.1))!r}f"
    assert literal(1.0 + 2 ** -8, dt.bfloat16) == "1.0f"          # a tie: to even
    assert literal(1.0 + 3 * 2 ** -8, dt.bfloat16) == "1.015625f"    # a tie: to even (up)
    src = generate(lowered(lambda X: kd.compute(X.shape, lambda i, j: X[i, j].astype("float16"), name="O"),
                           [TensorSpec(("n", "m"), "float64")], tile)).source
    assert "kd_d2h(" in src          # float64 -> float16 rounds once, like numpy


# ------------------------------------------------------------------ cp.async
PIPELINED = [("mm_double_buffer", S.mm_double_buffer, 2), ("mm_pipeline_3", lambda s: S.mm_double_buffer(s, stages=3), 3)]
PIPELINED += [(st.__name__, st, 2) for st in LADDER if "stages2" in st.__name__]
PIPELINED += [("ladder_stages3", S.ladder_thread_tiling(vthreads=2, vec=4, stages=3), 3)]


@pytest.mark.parametrize("name,sched,stages", PIPELINED, ids=[p[0] for p in PIPELINED])
@pytest.mark.parametrize("dtype", [dt.float32, dt.float64])
def test_pipelined_copies_are_cp_async(name, sched, stages, dtype, rng):
    s = Schedule(S.matmul_graph(dtype))
    sched(s)
    func = gpu_lower(s)
    copies = collect(func.body, lambda x: type(x) is n.AsyncCopy)
    waits = collect(func.body, lambda x: type(x) is n.WaitGroup)
    commits = collect(func.body, lambda x: type(x) is n.CommitGroup)
    assert copies and waits and commits
    src = generate(func).source
    size = dtype.itemsize
    # every copy of the general code (the edge blocks': kdsl.gpu.interior_blocks) prints one
    # element-sized cp.async (vector copies: as the fallback of the 16-byte one)
    general = collect(edge_copy(func.body), lambda x: type(x) is n.AsyncCopy)
    assert src.count(f"kd_cp_async<{size}>(") >= len(general)
    assert src.count('asm volatile("cp.async.commit_group;') == len(commits)
    for w in waits:
        assert f'"n"({w.pending})' in src
    assert max(w.pending for w in waits) == stages - 1      # stages - 1 tiles in flight
    ptx = compile_ptx(src, name=name + ".cu")
    assert f"cp.async.ca.shared.global" in ptx and "cp.async.wait_group" in ptx
    assert "cp.async.commit_group" in ptx
    # the IR computes the product (SIMT; the device test runs the CUDA)
    A, B = S.rand(rng, (37, 21), dtype.np), S.rand(rng, (21, 45), dtype.np)
    out = np.zeros((37, 45), dtype.np)
    run_simt(func, [A, B], [out], [])
    np.testing.assert_allclose(out, A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4)


def test_copy_of_16_bit_elements_is_synchronous():
    """cp.async moves 4, 8 or 16 bytes: a float16 element is copied by a plain store."""
    s = Schedule(S.matmul_graph(dt.float16))
    S.mm_double_buffer(s)
    func = gpu_lower(s)
    mod = generate(func)
    src = mod.source
    assert mod.kernels and not any("kd_cp_async" in ks.text for ks in mod.kernels)
    assert "kd_cp_async" not in src         # nor its prelude helpers: the module calls none
    assert compile_cubin(src)[:4] == b"\x7fELF"


def test_h2f_formula_exact_for_every_half():
    """The arithmetic of the prelude's kd_h2f (the 15 bits of exponent and fraction shifted
    into float32's places, scaled by 2^112; the all-ones exponent (inf, NaN with its payload)
    by bits), in numpy: bit for bit numpy's float16 -> float32 for all 65536 patterns
    (tests/cuda_schedules/test_issue27_device.py runs the C on a device)."""
    from kdsl_cuda.codegen.prelude import PRELUDE
    assert "5.192296858534827628530496329220096e+33f" in PRELUDE and "0x0f800000u" in PRELUDE
    h = np.arange(1 << 16, dtype=np.uint32)
    s, t = (h & 0x8000) << 16, (h & 0x7fff) << 13
    m = (t.view(np.float32) * np.float32(2.0 ** 112)).view(np.uint32)
    got = s | np.where(t >= 0x0f800000, t | 0x7f800000, m)
    want = h.astype(np.uint16).view(np.float16).astype(np.float32).view(np.uint32)
    np.testing.assert_array_equal(got, want)
