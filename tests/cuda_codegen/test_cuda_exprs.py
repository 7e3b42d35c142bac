"""Expressions, dtypes and errors of the CUDA codegen: every math function and operator in a
traced elementwise kernel compiles for each dtype; unsupported dtypes and NVRTC rejections
raise clear errors; the backend object's lower / source / build / compile."""
import pytest

import kdsl as kd
from kdsl.backends.protocol import CompileRequest
from kdsl.errors import BackendCompileError, BackendUnavailable
from kdsl.frontend.spec import TensorSpec
from kdsl.frontend.trace import trace
from kdsl.passes.pipeline import lower
from kdsl.gpu.pipeline import lower as gpu_lower
from kdsl.schedule import Schedule
from kdsl_cuda import backend
from kdsl_cuda.build import compile_cubin
from kdsl_cuda.codegen import generate


def tile(s):
    O = s.stages[-1]
    io, jo, ii, ji = O.tile(O.axes[0], O.axes[1], 4, 32)
    for ax, tag in ((io, "blockIdx.y"), (jo, "blockIdx.x"), (ii, "threadIdx.y"), (ji, "threadIdx.x")):
        O.bind(ax, tag)


def float_math(X, Y):
    return kd.compute(X.shape, lambda i, j: kd.where(
        X[i, j] > Y[i, j],
        kd.exp(X[i, j]) + kd.log(Y[i, j]) + kd.sqrt(X[i, j]) + kd.rsqrt(Y[i, j]) + kd.sin(X[i, j])
        + kd.cos(Y[i, j]) + kd.tanh(X[i, j]) + kd.erf(Y[i, j]) + kd.sigmoid(X[i, j]),
        kd.maximum(X[i, j], Y[i, j]) - kd.minimum(X[i, j], Y[i, j]) + X[i, j] // Y[i, j]
        + X[i, j] % Y[i, j] + X[i, j] ** Y[i, j] + X[i, j] / Y[i, j] - abs(X[i, j])), name="O")


def int_math(X, Y):
    return kd.compute(X.shape, lambda i, j: kd.where(
        X[i, j] < Y[i, j], X[i, j] // Y[i, j] + X[i, j] % Y[i, j] - abs(Y[i, j]),
        kd.maximum(X[i, j], Y[i, j]) * kd.minimum(X[i, j], Y[i, j]) + (X[i, j] & Y[i, j])
        - (X[i, j] ^ Y[i, j])), name="O")


def source_of(fn, dtype):
    g = trace(fn, [TensorSpec(("n", "m"), dtype)] * 2)
    s = Schedule(g)
    tile(s)
    return generate(gpu_lower(s)).source


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_math_compiles(dtype):
    src = source_of(float_math, dtype)
    f = "f" if dtype == "float32" else ""
    for fn in ("exp", "log", "sqrt", "sin", "cos", "tanh", "erf", "pow"):
        assert f"{fn}{f}(" in src, fn
    assert "rsqrt" not in src       # numpy's 1 / sqrt (both correctly rounded), not CUDA's rsqrt
    for helper in ("kd_ffloordiv", "kd_fmod", "kd_fmax", "kd_fmin"):
        assert helper + "<" in src, helper
    assert compile_cubin(src)[:4] == b"\x7fELF"


@pytest.mark.parametrize("dtype", ["int32", "int64", "int8", "uint8", "uint32"])
def test_int_math_compiles(dtype):
    src = source_of(int_math, dtype)
    kind = "u" if dtype.startswith("u") else "s"
    assert f"kd_{kind}floordiv<" in src and f"kd_{kind}mod<" in src
    assert compile_cubin(src)[:4] == b"\x7fELF"


@pytest.mark.parametrize("dtype,conv", [("float16", ("kd_h2f(", "kd_f2h(", "kd_rh(")),
                                        ("bfloat16", ("kd_bf2f(", "kd_f2bf(", "kd_rbf("))])
def test_16_bit_floats_are_stored_in_16_bits_and_computed_in_float(dtype, conv):
    src = source_of(float_math, dtype)
    assert "#include" not in src
    assert "const uint16_t* __restrict__ X" in src and "uint16_t* __restrict__ O" in src
    load, store, rnd = conv
    assert load in src and store in src and rnd in src
    for fn in ("expf", "logf", "sqrtf", "sinf", "cosf", "tanhf", "erff", "powf"):
        assert fn + "(" in src, fn
    assert compile_cubin(src)[:4] == b"\x7fELF"


def test_unsupported_dtype_is_a_clear_error():
    from kdsl import dtypes as dt
    from kdsl_cuda.codegen.types import ctype
    fake = dt.DType("complex64", "c", 64)
    with pytest.raises(BackendCompileError, match="does not generate complex64"):
        ctype(fake)


def test_nvrtc_rejection_carries_log_source_and_options(tmp_path, monkeypatch):
    monkeypatch.setenv("KDSL_CUDA_DUMP_DIR", str(tmp_path))
    with pytest.raises(BackendCompileError) as ei:
        compile_cubin('extern "C" __global__ void broken(float* a) { a[0] = undefined_name; }',
                      name="broken.cu")
    e = ei.value
    assert "undefined_name" in e.log
    assert e.source_path and e.source_path.startswith(str(tmp_path))
    assert "undefined_name" in open(e.source_path).read()
    assert "sm_90" in str(e) and e.repro and "ProgramOptions" in e.repro


def _request(fn):
    g = trace(fn, [TensorSpec(("n", "m"), "float32")] * 2)
    s = Schedule(g)
    tile(s)
    return CompileRequest(graph=g, schedule=s, signature=None)


def test_backend_object():
    req = _request(float_math)
    assert backend.spec.name == "cuda"
    func = backend.lower(req)
    assert func.kernels
    src = backend.source(req)
    assert f"{func.kernels[0].name}(" in src
    assert backend.build(req)[:4] == b"\x7fELF"
    import kdsl_cuda
    if not kdsl_cuda.is_available():   # no driver or device: a clear error naming the way out
        with pytest.raises(BackendUnavailable, match="interp-cuda"):
            backend.compile(req)
