"""Launch streams (SPEC §3, issue 10 item 3): ``stream=`` takes an int handle, a torch or CuPy
stream, or any object with ``__cuda_stream__``; without it the launch goes on the caller's
library's current stream; a call never waits for the device.

Each test queues a long-running producer on a stream S (a ~0.5 s spin, then a copy of the
new input values into ``x``), then calls the kernel on ``x``.  On S the kernel runs after the
copy and sees the new values; on any other stream it would race ahead and read the old ones.
That S is still busy when the call returns shows the call did not synchronise (neither S nor
the device).  Kernels are compiled before the producer is queued."""
import os

import numpy as np
import pytest

from cuda_support import MIX, ROWSUM, check_elementwise, library, values

pytestmark = pytest.mark.cuda

SPIN_CYCLES = 1_000_000_000        # ~0.5 s at the H200's ~2 GHz
#: under compute-sanitizer (README.md) launches may be serialised by the tool: the ordering
#: and values are still checked, not that the call returned before the producer finished
SANITIZER = os.environ.get("KDSL_TEST_SANITIZER") == "1"


class _Protocol:
    """Only the ``__cuda_stream__`` protocol (version 0, the handle): what cuda.core accepts."""

    def __init__(self, handle):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


def _warm(L, x, y):
    """Every call form the tests time, once: compiled and its launcher built beforehand."""
    MIX(x, y)
    MIX(x, y, out=L.empty(x.shape, "float32"))
    ROWSUM(x)


# ----------------------------------------------------------------- torch
def _torch_setup(rng, shape=(64, 100)):
    L = library("torch")
    torch = L.m
    old, new, b = (values(rng, shape, "float32") for _ in range(3))
    x, y, src = L.array(old), L.array(b), L.array(new)
    _warm(L, x, y)
    torch.cuda.synchronize()
    return L, torch, x, y, src, new, b


def _torch_produce(torch, s, x, src):
    """On ``s``: spin, then x <- src (so x holds the new values only after ~0.5 s)."""
    with torch.cuda.stream(s):
        torch.cuda._sleep(SPIN_CYCLES)
        x.copy_(src)


def _torch_check(L, s, r, x, new, b, rs=None):
    assert SANITIZER or not s.query(), "the call waited for the stream (or the device)"
    s.synchronize()
    check_elementwise(L.numpy(r), new, b, "float32")
    if rs is not None:
        np.testing.assert_allclose(L.numpy(rs), new.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("how", ["int", "object", "protocol"])
def test_torch_stream_keyword(how, rng):
    L, torch, x, y, src, new, b = _torch_setup(rng)
    s = torch.cuda.Stream()
    arg = {"int": s.cuda_stream, "object": s, "protocol": _Protocol(s.cuda_stream)}[how]
    _torch_produce(torch, s, x, src)
    out = L.empty(x.shape, "float32")
    r = MIX(x, y, out=out, stream=arg)
    rs = ROWSUM(x, stream=arg)                 # a result allocated by the call, on that stream
    _torch_check(L, s, r, x, new, b, rs)


def test_torch_current_stream_is_the_default(rng):
    L, torch, x, y, src, new, b = _torch_setup(rng)
    s = torch.cuda.Stream()
    _torch_produce(torch, s, x, src)
    with torch.cuda.stream(s):
        r = MIX(x, y)
        rs = ROWSUM(x)
        twice = MIX(r, y)                      # a kernel reading a result on the same stream
    _torch_check(L, s, r, x, new, b, rs)
    check_elementwise(L.numpy(twice), L.numpy(r), b, "float32")


def test_torch_launch_is_ordered_before_later_work_on_its_stream(rng):
    """The consumer side: torch work queued on S after the kernel reads the kernel's result."""
    L, torch, x, y, src, new, b = _torch_setup(rng)
    out = L.full(x.shape, 0.0, "float32")
    torch.cuda.synchronize()                   # the fill (default stream) is done before S runs
    s = torch.cuda.Stream()
    _torch_produce(torch, s, x, src)
    MIX(x, y, out=out, stream=s)
    with torch.cuda.stream(s):
        copy = out.clone()
    s.synchronize()
    check_elementwise(L.numpy(copy), new, b, "float32")


def test_numpy_arguments_with_a_stream(rng):
    """numpy in and out on a given stream: the copies are ordered with the kernel and the
    result is complete when the call returns."""
    L = library("torch")
    s = L.m.cuda.Stream()
    a, b = values(rng, (40, 30), "float32"), values(rng, (40, 30), "float32")
    for arg in (s, s.cuda_stream):
        check_elementwise(MIX(a, b, backend="cuda", stream=arg), a, b, "float32")
        out = np.empty_like(a)
        assert MIX(a, b, backend="cuda", stream=arg, out=out) is out
        check_elementwise(out, a, b, "float32")


# ----------------------------------------------------------------- CuPy
_SPIN = r'''
extern "C" __global__ void kd_test_spin(long long cycles) {
  long long t0 = clock64();
  while (clock64() - t0 < cycles) { }
}
'''


def _cupy_setup(rng, shape=(64, 100)):
    L = library("cupy")
    cp = L.m
    spin = cp.RawKernel(_SPIN, "kd_test_spin")
    old, new, b = (values(rng, shape, "float32") for _ in range(3))
    x, y, src = L.array(old), L.array(b), L.array(new)
    _warm(L, x, y)
    spin((1,), (1,), (np.int64(1000),))            # compiled and loaded before the test
    L.synchronize()
    return L, cp, spin, x, y, src, new, b


def _cupy_produce(spin, s, x, src):
    with s:
        spin((1,), (1,), (np.int64(SPIN_CYCLES),))
        x[...] = src


def _cupy_check(L, s, r, new, b, rs):
    assert SANITIZER or not s.done, "the call waited for the stream (or the device)"
    s.synchronize()
    check_elementwise(L.numpy(r), new, b, "float32")
    np.testing.assert_allclose(L.numpy(rs), new.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("how", ["int", "object", "protocol"])
def test_cupy_stream_keyword(how, rng):
    L, cp, spin, x, y, src, new, b = _cupy_setup(rng)
    s = cp.cuda.Stream(non_blocking=True)
    arg = {"int": s.ptr, "object": s, "protocol": _Protocol(s.ptr)}[how]
    _cupy_produce(spin, s, x, src)
    out = L.empty(x.shape, "float32")
    r = MIX(x, y, out=out, stream=arg)
    rs = ROWSUM(x, stream=arg)
    _cupy_check(L, s, r, new, b, rs)


def test_cupy_current_stream_is_the_default(rng):
    L, cp, spin, x, y, src, new, b = _cupy_setup(rng)
    s = cp.cuda.Stream(non_blocking=True)
    _cupy_produce(spin, s, x, src)
    with s:
        r = MIX(x, y)
        rs = ROWSUM(x)
    _cupy_check(L, s, r, new, b, rs)
