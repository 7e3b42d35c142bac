"""The compiled launch helper (kdsl_cuda.runtime.native) against a C recorder standing in for
cuLaunchKernel: each slot code packs its value as ``struct`` does, values a slot cannot hold
raise, and a fast launcher using it launches what the normal path launches.  Where this
machine cannot build the helper (no C compiler or Python headers), the fast launchers must
keep the ctypes path, which is checked instead."""
import ctypes
import struct
import subprocess

import numpy as np
import pytest

import kdsl as kd

import fake_torch

RECORDER = r"""
#include <stdint.h>
#include <string.h>
unsigned rec_dims[7]; void *rec_fn; void *rec_stream; uint64_t rec_vals[64]; int rec_n;
int rec_count; int rec_result;
int rec(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
        unsigned shm, void *stream, void **params, void **extra)
{
    unsigned d[7] = {gx, gy, gz, bx, by, bz, shm};
    memcpy(rec_dims, d, sizeof d);
    rec_fn = f; rec_stream = stream;
    for (int i = 0; i < rec_n; i++) memcpy(&rec_vals[i], params[i], 8);
    rec_count++;
    return rec_result;
}
"""


@pytest.fixture(scope="module")
def helper():
    from kdsl_cuda.runtime import native
    return native.module()


@pytest.fixture
def recorder(tmp_path, helper):
    if helper is None:
        return None
    src, so = tmp_path / "rec.c", tmp_path / "rec.so"
    src.write_text(RECORDER)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", str(src), "-o", str(so)], check=True)
    lib = ctypes.CDLL(str(so))
    lib.rec.restype = ctypes.c_int
    return lib


def _vals(rec, n):
    return bytes((ctypes.c_uint64 * n).in_dll(rec, "rec_vals"))


def test_slot_codes_pack_like_struct(helper, recorder):
    if helper is None:
        from kdsl_cuda.runtime import native
        assert native.error, "no helper and no reason"
        return
    from kdsl_cuda.runtime.native import codes
    rng = np.random.default_rng()
    fmt = "<Qqdf4xe6xi4xh6xb7xI4xH6xB7x?7x"
    vals = [int(rng.integers(0, 2 ** 63)) * 2 + 1, -int(rng.integers(1, 2 ** 62)), float(rng.normal()),
            float(rng.normal()), 0.5 + float(rng.integers(-100, 100)), -2 ** 31, -32768, 127,
            2 ** 32 - 1, 65535, 255, True]
    assert codes(fmt) == b"QqdfeihbIHB?"
    ctypes.c_int.in_dll(recorder, "rec_n").value = len(vals)
    cu = ctypes.cast(recorder.rec, ctypes.c_void_p).value
    rc = helper.Launcher(cu, codes(fmt), 0x1234, 256, 1, 1, None)(0xABC0, 7, 2, 1, 4096, *vals)
    assert rc == 0
    assert _vals(recorder, len(vals)) == struct.pack(fmt, *vals)
    assert list((ctypes.c_uint * 7).in_dll(recorder, "rec_dims")) == [7, 2, 1, 256, 1, 1, 4096]
    assert ctypes.c_void_p.in_dll(recorder, "rec_fn").value == 0x1234
    assert ctypes.c_void_p.in_dll(recorder, "rec_stream").value == 0xABC0

    def one(code):
        return helper.Launcher(cu, code, 1, 1, 1, 1, (1, 1, 1, 0))
    ctypes.c_int.in_dll(recorder, "rec_result").value = 719      # a launch error comes back
    ctypes.c_int.in_dll(recorder, "rec_n").value = 1
    assert one(b"Q")(0, 5) == 719
    n = ctypes.c_int.in_dll(recorder, "rec_count").value
    for code, bad in ((b"q", 2 ** 63), (b"i", 2 ** 31), (b"B", -1), (b"Q", -1), (b"f", 1e300),
                      (b"H", 65536)):
        with pytest.raises(OverflowError):
            one(code)(0, bad)
    with pytest.raises(TypeError):
        one(b"q")(0, 1.5)
    with pytest.raises(TypeError):
        one(b"qq")(0, 1)        # one value per code
    assert ctypes.c_int.in_dll(recorder, "rec_count").value == n      # nothing launched


def test_fast_launcher_through_the_helper(fake_driver, monkeypatch, helper, recorder):
    torch = fake_torch.install(monkeypatch)

    @kd.kernel
    def axpy(a, x, y):
        return a * x + y
    n = int(np.random.default_rng().integers(500, 1000))
    x, y, z = (torch.Tensor((n,), torch.float32) for _ in range(3))
    torch._C.streams[0] = 0x7700
    axpy(2.5, x, y, out=z)                 # the normal path (the fake driver records it)
    slow = fake_driver.launches[-1]
    if recorder is not None:
        fake_driver.raw_launch = recorder.rec          # a C function: the helper calls it
        ctypes.c_int.in_dll(recorder, "rec_n").value = len(slow["params"])
    for _ in range(4):
        axpy(2.5, x, y, out=z)
    fast = axpy._fast_out
    assert fast is not None and fast[2] is not None
    src = fast[2].__kdsl_source__
    if recorder is None:
        assert "_L0(" not in src and "_launch(" in src
        return
    assert "_L0(stream, " in src and "_acq()" not in src     # no lock: slots on the C stack
    before = ctypes.c_int.in_dll(recorder, "rec_count").value
    nslow = len(fake_driver.launches)
    assert axpy(2.5, x, y, out=z) is z
    assert ctypes.c_int.in_dll(recorder, "rec_count").value == before + 1
    assert len(fake_driver.launches) == nslow
    got = struct.unpack(f"<{len(slow['params'])}q", _vals(recorder, len(slow["params"])))
    assert list(got) == slow["params"]
    dims = list((ctypes.c_uint * 7).in_dll(recorder, "rec_dims"))
    assert tuple(dims[:3]) == slow["grid"] and tuple(dims[3:6]) == slow["block"]
    assert ctypes.c_void_p.in_dll(recorder, "rec_stream").value == 0x7700
    # a launch error: declined, and the normal path launches (and would report it)
    ctypes.c_int.in_dll(recorder, "rec_result").value = 700
    axpy(2.5, x, y, out=z)
    assert len(fake_driver.launches) == nslow + 1


def test_no_compiler_keeps_the_ctypes_path(fake_driver, monkeypatch, tmp_path):
    from kdsl_cuda.runtime import native

    def none():
        raise FileNotFoundError("no C compiler (cc, gcc) on PATH")
    monkeypatch.setattr(native, "_compiler", none)
    monkeypatch.setattr(native, "_directory", lambda: str(tmp_path))    # nothing built there
    monkeypatch.setattr(native, "_tried", False)
    monkeypatch.setattr(native, "_module", None)
    monkeypatch.setattr(native, "error", None)
    assert native.module() is None and "no C compiler" in native.error
    torch = fake_torch.install(monkeypatch)
    calls = []

    def rec(fn, gx, gy, gz, bx, by, bz, shm, stream, params, extra):
        slot = [ctypes.c_void_p.from_address(params + 8 * i).value for i in range(3)]
        calls.append([ctypes.c_uint64.from_address(p).value for p in slot])
        return 0
    # a C function (the helper would be used if built), called by ctypes with 11 arguments
    recorder = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *[ctypes.c_uint] * 7,
                                *[ctypes.c_void_p] * 3)(rec)
    fake_driver.raw_launch = recorder

    @kd.kernel
    def add(a, b):
        return a + b
    x, y, z = (torch.Tensor((50,), torch.float32) for _ in range(3))
    for _ in range(4):
        add(x, y, out=z)
    src = add._fast_out[2].__kdsl_source__
    assert "_L0(" not in src and "_launch(" in src
    n = len(fake_driver.launches)
    add(x, y, out=z)
    assert len(fake_driver.launches) == n and calls[-1] == [x.data_ptr(), y.data_ptr(), z.data_ptr()]


def test_launcher_binds_a_kernels_constants(helper, recorder):
    """``Launcher(cu, codes, fn, bx, by, bz, grid)``: the driver's function, slot codes, kernel,
    block and (a tuple) grid and shared bytes bound."""
    if helper is None:
        return
    from kdsl_cuda.runtime.native import codes
    rng = np.random.default_rng()
    fmt = "<QQqd"
    vals = [int(rng.integers(1, 2 ** 47)), int(rng.integers(1, 2 ** 47)),
            -int(rng.integers(1, 2 ** 40)), float(rng.normal())]
    ctypes.c_int.in_dll(recorder, "rec_n").value = len(vals)
    cu = ctypes.cast(recorder.rec, ctypes.c_void_p).value
    dims = (ctypes.c_uint * 7).in_dll(recorder, "rec_dims")
    fixed = helper.Launcher(cu, codes(fmt), 0x5678, 128, 2, 1, (3, 1, 1, 512))
    assert fixed(0xBEE0, *vals) == 0
    assert _vals(recorder, len(vals)) == struct.pack(fmt, *vals)
    assert list(dims) == [3, 1, 1, 128, 2, 1, 512]
    assert ctypes.c_void_p.in_dll(recorder, "rec_fn").value == 0x5678
    assert ctypes.c_void_p.in_dll(recorder, "rec_stream").value == 0xBEE0
    per_call = helper.Launcher(cu, codes(fmt), 0x5678, 64, 1, 1, None)
    assert per_call(0, 70000, 5, 2, 1024, *vals) == 0
    assert list(dims) == [70000, 5, 2, 64, 1, 1, 1024]
    n = ctypes.c_int.in_dll(recorder, "rec_count").value
    with pytest.raises(TypeError):
        fixed(0, *vals[:3])                          # one value per slot code
    with pytest.raises(TypeError):
        per_call(0, *vals)                           # the grid is not bound: it comes first
    with pytest.raises(TypeError):
        fixed(0, *vals, stream=1)
    with pytest.raises(OverflowError):
        fixed(0, -1, *vals[1:])                      # a pointer slot: unsigned
    with pytest.raises(OverflowError):
        per_call(0, 2 ** 32, 1, 1, 0, *vals)         # a grid beyond 32 bits
    assert ctypes.c_int.in_dll(recorder, "rec_count").value == n      # nothing launched
    with pytest.raises(TypeError):
        helper.Launcher(cu, codes(fmt), 1, 1, 1, 1, (1, 1, 1))        # (gx, gy, gz, shared)
    ctypes.c_int.in_dll(recorder, "rec_result").value = 701      # a launch error comes back
    assert fixed(0, *vals) == 701


def test_fast_launcher_with_a_grid_per_call(fake_driver, monkeypatch, helper, recorder):
    """Sizes of one class that need different grids: the Launcher takes the grid per call
    (what the normal path computes), no limit test where the class bounds the grid."""
    if helper is None:
        return
    torch = fake_torch.install(monkeypatch)

    @kd.kernel
    def add(a, b):
        return a + b
    rng = np.random.default_rng()
    sizes = [int(x) for x in rng.integers(4096, 8192, size=2)] + [4096, 8191]   # one class
    x, y, z = (torch.Tensor((sizes[0],), torch.float32) for _ in range(3))
    fake_driver.raw_launch = recorder.rec
    for _ in range(4):
        add(x, y, out=z)
    src = add._fast_out[2].__kdsl_source__
    assert "_L0(stream, g00, 1, 1, 0, " in src and "if g00 > " not in src, src
    dims = (ctypes.c_uint * 7).in_dll(recorder, "rec_dims")
    for n in sizes:
        x, y, z = (torch.Tensor((n,), torch.float32) for _ in range(3))
        fake_driver.raw_launch = ctypes.CDLL(None).abs   # any C function: the normal path
        nslow = len(fake_driver.launches)               # records through the fake's launch
        add._fast_out, fast = None, add._fast_out
        add(x, y, out=z, stream=0)
        slow = fake_driver.launches[nslow]
        ctypes.c_int.in_dll(recorder, "rec_n").value = len(slow["params"])
        assert fast[2]((x, y), z) is z
        assert tuple(dims[:3]) == slow["grid"] and slow["grid"][0] > 1
        got = struct.unpack(f"<{len(slow['params'])}q", _vals(recorder, len(slow["params"])))
        assert list(got) == slow["params"]
        add._fast_out = fast


def test_the_c_call_entry_serves_promoted_calls_and_defers_the_rest(fake_driver, monkeypatch,
                                                                     helper, recorder):
    """Once a packed launcher of the helper is promoted, the kernel's partial function is the
    helper's ``Entry`` (Kernel._call's first step in C): out= calls launch through it; keywords,
    stream=, another backend and a cleared fast launcher go to Kernel._call, and the kernel
    is still freed by the cycle collector."""
    import gc
    import weakref
    if recorder is None:
        return
    torch = fake_torch.install(monkeypatch)

    @kd.kernel
    def axpy(a, x, y):
        return a * x + y
    x, y, z = (torch.Tensor((300,), torch.float32) for _ in range(3))
    axpy(2.5, x, y, out=z)
    fake_driver.raw_launch = recorder.rec
    ctypes.c_int.in_dll(recorder, "rec_n").value = len(fake_driver.launches[-1]["params"])
    for _ in range(4):
        axpy(2.5, x, y, out=z)
    assert type(axpy.func).__name__ == "Entry"
    count = lambda: ctypes.c_int.in_dll(recorder, "rec_count").value   # noqa: E731
    nslow, before = len(fake_driver.launches), count()
    assert axpy(2.5, x, y, out=z) is z and axpy(0.5, x, y, out=z, backend="cuda") is z
    assert count() == before + 2 and len(fake_driver.launches) == nslow
    import sys
    refs = [sys.getrefcount(o) for o in (x, y, z, 2.5)]
    for _ in range(200):
        axpy(2.5, x, y, out=z)
    assert [sys.getrefcount(o) for o in (x, y, z, 2.5)] == refs     # no reference leaked
    assert axpy(2.5, x=x, y=y, out=z) is z       # keywords: bound by Kernel._call (normal path)
    axpy(2.5, x, y, out=z, stream=0)             # stream=: the normal path
    assert len(fake_driver.launches) == nslow + 2 and count() == before + 202
    with pytest.raises(kd.errors.ArgumentError):            # errors still come from Python
        axpy(2.5, x, y, z, out=z)
    from kdsl.schedule.hints import Hint
    axpy._add_schedule(Hint(target="cpu", hints={}, fn=lambda s: None, loc=None))   # dropped
    n = len(fake_driver.launches)
    assert axpy(2.5, x, y, out=z) is z and len(fake_driver.launches) == n + 1   # recompiled
    ref = weakref.ref(axpy)
    del axpy
    gc.collect()
    assert ref() is None
