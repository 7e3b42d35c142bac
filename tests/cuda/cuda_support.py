"""Helpers of the GPU suite: loading the core suite's test modules, an explicit cuda schedule
for elementwise kernels, and one adapter per array library (torch, CuPy, JAX) so that each
interop test is written once.

The adapters import their library when built (``library(name)`` skips the test, naming the
library, where it is missing); nothing here touches a device at import time.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: the dtypes numpy arrays carry (no bfloat16 in numpy)
NUMPY_DTYPES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool"]


def load_suite(relpath: str, name: str, **overrides):
    """A private copy of the test module ``tests/<relpath>`` (its kernels, cases, helpers and
    test functions), with module globals replaced by ``overrides`` (e.g. ``BACKENDS``)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "tests", relpath))
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    mod = sys.modules[name]
    for k, v in overrides.items():
        setattr(mod, k, v)
    return mod


# ----------------------------------------------------------------- schedules
def flat_threads(s, threads=64):
    """Every output element its own thread: each output's axes fused, split by ``threads``
    over blockIdx.x x threadIdx.x (a guard where the size does not divide); elementwise
    producers are inlined by the lowering."""
    for O in s.outputs:
        ax = O.fuse(*O.axes) if len(O.axes) > 1 else O.axes[0]
        bo, bi = O.split(ax, factor=threads)
        O.bind(bo, "blockIdx.x")
        O.bind(bi, "threadIdx.x")


def rows_over_threads(s, threads=32):
    """One row per block, the row's reduction over ``threads`` threads (a cross-thread
    reduction, no rfactor): for kernels whose only stage is a row reduction."""
    B = s.outputs[0]
    B.bind(B.axes[0], "blockIdx.x")
    ko, ki = B.split(B.reduce_axes[0], factor=threads)
    B.reorder(B.axes[0], ki, ko)
    B.bind(ki, "threadIdx.x")


# ----------------------------------------------------------------- values
def values(rng, shape, dtype):
    """Random values of ``dtype`` (a name) that the kernels' arithmetic keeps exact or well
    conditioned: small integers, floats in [-2, 2) (float32 for bfloat16: numpy has none)."""
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.startswith("uint"):
        return rng.integers(0, 40, shape).astype(dtype)
    if dtype.startswith("int"):
        return rng.integers(-20, 20, shape).astype(dtype)
    return (rng.random(shape) * 4 - 2).astype("float32" if dtype == "bfloat16" else dtype)


def tolerance(dtype: str) -> dict:
    """assert_allclose tolerances against float64 for a result of ``dtype`` (16-bit floats are
    stored rounded; the math is in float32)."""
    return {"float16": dict(rtol=2e-3, atol=2e-3), "bfloat16": dict(rtol=1.6e-2, atol=1.6e-2),
            "float32": dict(rtol=1e-6, atol=2e-6)}.get(dtype, dict(rtol=1e-12, atol=0))


# ----------------------------------------------------------------- array libraries
class Torch:
    """torch tensors on cuda:0."""
    name = "torch"
    dtypes = NUMPY_DTYPES + ["bfloat16"]
    negative_strides = False        # torch has none (flip copies)
    mutable = True
    has_views = True

    def __init__(self):
        import torch
        if not torch.cuda.is_available():
            pytest.skip("no CUDA device visible to torch")
        self.m = torch
        self.device = torch.device("cuda", 0)

    def dt(self, name):
        return {"bool": self.m.bool}.get(name) or getattr(self.m, name)

    def array(self, a, dtype=None):
        """A device copy of numpy ``a`` (as ``dtype`` when given: bfloat16 from float32)."""
        t = self.m.from_numpy(np.ascontiguousarray(a)).to(self.device)
        return t if dtype is None else t.to(self.dt(dtype))

    def empty(self, shape, dtype):
        return self.m.empty(shape, dtype=self.dt(dtype), device=self.device)

    def full(self, shape, value, dtype):
        return self.m.full(shape, value, dtype=self.dt(dtype), device=self.device)

    def numpy(self, x):
        x = x.detach()
        if x.dtype == self.m.bfloat16:
            x = x.float()
        return x.cpu().numpy()

    def dtype_name(self, x) -> str:
        return str(x.dtype).replace("torch.", "")

    def owns(self, x) -> bool:
        return isinstance(x, self.m.Tensor) and x.is_cuda

    def ptr(self, x) -> int:
        return x.data_ptr()

    def transpose(self, x):
        return x.T

    def broadcast(self, row, shape):
        return row.expand(*shape)

    def synchronize(self):
        self.m.cuda.synchronize()

    @contextlib.contextmanager
    def allocations(self):
        """Yields a list that holds, after the block, the peak bytes allocated through torch
        inside the block beyond what was allocated before it."""
        self.synchronize()
        before = self.m.cuda.memory_allocated()
        self.m.cuda.reset_peak_memory_stats()
        box = []
        yield box
        self.synchronize()
        box.append(self.m.cuda.max_memory_allocated() - before)


class CuPy:
    """CuPy arrays on the current device."""
    name = "cupy"
    dtypes = NUMPY_DTYPES
    negative_strides = True
    mutable = True
    has_views = True

    def __init__(self):
        import cupy
        try:
            cupy.cuda.runtime.getDeviceCount()
        except Exception as e:          # noqa: BLE001  (CUDARuntimeError without a driver)
            pytest.skip(f"no CUDA device visible to CuPy ({e})")
        if os.environ.get("KDSL_TEST_SANITIZER") == "1":
            cupy.cuda.set_allocator(None)      # every array its own cudaMalloc: memcheck sees its end
        self.m = cupy

    def array(self, a, dtype=None):
        return self.m.asarray(np.ascontiguousarray(a if dtype is None else a.astype(dtype)))

    def empty(self, shape, dtype):
        return self.m.empty(shape, dtype)

    def full(self, shape, value, dtype):
        return self.m.full(shape, value, dtype)

    def numpy(self, x):
        return self.m.asnumpy(x)

    def dtype_name(self, x) -> str:
        return str(x.dtype)

    def owns(self, x) -> bool:
        return isinstance(x, self.m.ndarray)

    def ptr(self, x) -> int:
        return x.data.ptr

    def transpose(self, x):
        return x.T

    def broadcast(self, row, shape):
        return self.m.broadcast_to(row, shape)

    def synchronize(self):
        self.m.cuda.Device().synchronize()

    @contextlib.contextmanager
    def allocations(self):
        """Yields a list that holds, after the block, the bytes a fresh memory pool (the
        allocator inside the block) had to obtain: everything CuPy allocated in it."""
        pool = self.m.cuda.MemoryPool()
        box = []
        with self.m.cuda.using_allocator(pool.malloc):
            yield box
        self.synchronize()
        box.append(pool.total_bytes())


class Jax:
    """jax.Arrays on the first GPU (float64 enabled; immutable, so no out= and no views)."""
    name = "jax"
    dtypes = NUMPY_DTYPES + ["bfloat16"]
    negative_strides = False
    mutable = False
    has_views = False

    def __init__(self):
        import jax
        jax.config.update("jax_enable_x64", True)
        try:
            self.device = jax.devices("gpu")[0]
        except RuntimeError as e:
            pytest.skip(f"no CUDA device visible to JAX ({e})")
        import jax.numpy as jnp
        self.m, self.jnp = jax, jnp

    def array(self, a, dtype=None):
        x = self.m.device_put(np.ascontiguousarray(a), self.device)
        return x if dtype is None else x.astype(getattr(self.jnp, dtype if dtype != "bool" else "bool_"))

    def numpy(self, x):
        if x.dtype == self.jnp.bfloat16:
            x = x.astype(self.jnp.float32)
        return np.asarray(x)

    def dtype_name(self, x) -> str:
        return str(x.dtype)

    def owns(self, x) -> bool:
        return isinstance(x, self.m.Array) and all(d.platform == "gpu" for d in x.devices())

    def ptr(self, x) -> int:
        return x.unsafe_buffer_pointer()

    def synchronize(self):
        pass                              # every read below (np.asarray) waits for the array


LIBRARIES = {"torch": Torch, "cupy": CuPy, "jax": Jax}


def library(name: str):
    """The adapter of library ``name``; the test skips, naming it, where it is not installed."""
    pytest.importorskip(name, reason=f"{name} is not installed")
    return LIBRARIES[name]()


# ----------------------------------------------------------------- kernels with explicit cuda schedules
# (independent of the default cuda schedules: what the interop, stream and DeviceArray tests
# call; each also runs on interp-cuda, see test_cuda_lowers.py)
def _cuda_kernel(fn, sched):
    import kdsl as kd
    k = kd.kernel(fn)
    k.schedule("cuda")(sched)
    return k


def _mix(a, b):
    return a * 3 - b


def _xor(a, b):
    return (a | b) & ~(a & b)


def _two(a, b):
    return a + b, a * b


def _axpy(alpha, x, y):
    return alpha * x + y


def _rowsum(A):
    return A.sum(axis=1)


def _argmax(A):
    return A.argmax(axis=1)


MIX = _cuda_kernel(_mix, flat_threads)            # numeric dtypes: a * 3 - b in the input dtype
XOR = _cuda_kernel(_xor, flat_threads)            # bool
TWO = _cuda_kernel(_two, flat_threads)            # two outputs, two device kernels
AXPY = _cuda_kernel(_axpy, flat_threads)          # a symbolic scalar
ROWSUM = _cuda_kernel(_rowsum, rows_over_threads)  # a cross-thread reduction per row
ARGMAX = _cuda_kernel(_argmax, rows_over_threads)  # two values per thread (index, value)


def elementwise(dtype):
    """The elementwise kernel for ``dtype`` and its numpy oracle (float64 for floats)."""
    if dtype == "bool":
        return XOR, lambda a, b: a ^ b
    if dtype in ("float16", "bfloat16", "float32", "float64"):
        return MIX, lambda a, b: a.astype(np.float64) * 3 - b.astype(np.float64)
    return MIX, lambda a, b: a * 3 - b       # numpy's integer arithmetic wraps like the GPU's


def check_elementwise(got, a, b, dtype):
    """``got`` (numpy) against the oracle of ``elementwise(dtype)`` on the inputs ``a, b``."""
    want = elementwise(dtype)[1](a, b)
    if dtype in ("float16", "bfloat16", "float32", "float64"):
        np.testing.assert_allclose(got.astype(np.float64), want, **tolerance(dtype))
    else:
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        np.testing.assert_array_equal(got, want)
