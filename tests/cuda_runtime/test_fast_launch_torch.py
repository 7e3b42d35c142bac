"""The generated fast launcher on torch-like CUDA tensors (fake_torch.py, fake driver): what it
launches matches the normal path, and it declines -- so the normal path answers -- whatever the
normal path would treat otherwise: tensors on the CPU, a wrong number of arguments, a scalar no
parameter slot holds."""
import numpy as np
import pytest

import kdsl as kd
from kdsl.errors import ArgumentError

import fake_torch
from cuda_fakes import add_kernel, promoted


@pytest.fixture
def torch(fake_driver, monkeypatch):
    return fake_torch.install(monkeypatch)


def test_fast_launch_matches_the_normal_path(torch, fake_driver):
    add = add_kernel()
    rng = np.random.default_rng()
    n = int(rng.integers(600, 1000))
    a, b, c = (torch.Tensor((n,), torch.float32) for _ in range(3))
    torch._C.streams[0] = 0x5000 + int(rng.integers(1, 1000)) * 16    # torch's current stream
    add(a, b, out=c)          # the normal path
    slow = fake_driver.launches[-1]
    fast = promoted(add, a, b, out=c)
    fake_driver.launches.clear()
    assert add(a, b, out=c) is c
    (got,) = fake_driver.launches
    assert got == slow and got["stream"] == torch._C.streams[0]
    assert got["params"][:3] == [a.data_ptr(), b.data_ptr(), c.data_ptr()]
    assert "_launch(" in fast[2].__kdsl_source__        # cuLaunchKernel through ctypes
    # the allocating form: a torch tensor of the input's size, launched the same way
    promoted(add, a, b)
    fake_driver.launches.clear()
    r = add(a, b)
    assert type(r) is torch.Tensor and r.shape == (n,) and r.dtype is torch.float32
    assert fake_driver.launches[-1]["params"][:3] == [a.data_ptr(), b.data_ptr(), r.data_ptr()]
    assert fake_driver.launches[-1]["grid"] == slow["grid"]


def test_cpu_tensors_are_declined(torch, fake_driver):
    """A torch tensor on the CPU has the type of a CUDA one: the launcher checks the device
    with one GPU too (it launched on host pointers before)."""
    add = add_kernel()
    a, b, c = (torch.Tensor((64,), torch.float32) for _ in range(3))
    fast = promoted(add, a, b, out=c)
    cpu = torch.Tensor((64,), torch.float32, dev=-1)
    assert fast[2]((cpu, b), c) is NotImplemented and fast[2]((a, b), cpu) is NotImplemented
    n = len(fake_driver.launches)
    with pytest.raises(ArgumentError, match="on the CPU"):
        add(a, b, out=cpu)
    assert len(fake_driver.launches) == n


def test_wrong_argument_count_is_an_argument_error(torch, fake_driver):
    add = add_kernel()
    a, b, c = (torch.Tensor((64,), torch.float32) for _ in range(3))
    fast = promoted(add, a, b, out=c)
    assert fast[2]((a,), c) is NotImplemented and fast[2]((a, b, c), c) is NotImplemented
    with pytest.raises(ArgumentError, match="missing a required argument"):
        add(a, out=c)
    with pytest.raises(ArgumentError, match="missing a required argument"):
        promoted(add, a, b)
        add(a)


def test_scalar_beyond_its_slot_is_an_argument_error(torch, fake_driver):
    @kd.kernel
    def scale(a, k):
        return a * k
    a, c = (torch.Tensor((64,), torch.float32) for _ in range(2))
    promoted(scale, a, 3, out=c)
    n = len(fake_driver.launches)
    with pytest.raises(ArgumentError, match="out of bounds for int64"):
        scale(a, 2 ** 70, out=c)
    assert len(fake_driver.launches) == n
    scale(a, -5, out=c)
    assert -5 in fake_driver.launches[-1]["params"]      # an int64 slot


def test_size_classes_and_strides_are_checked(torch, fake_driver):
    @kd.kernel
    def rowsum(A):
        return A.sum(axis=1)
    rng = np.random.default_rng()
    m = int(rng.integers(64, 128))               # size class 7 (bit length): 64..127
    A = torch.Tensor((100, m), torch.float32)
    out = torch.Tensor((100,), torch.float32)
    fast = promoted(rowsum, A, out=out)
    assert fast[2]((A,), out) is out
    for other in (torch.Tensor((100, 63), torch.float32),          # another class, below
                  torch.Tensor((100, 128), torch.float32),         # and above
                  torch.Tensor((100, m), torch.float64),           # another dtype
                  torch.Tensor((100, m), torch.float32, strides=(2 * m, 2))):   # strided view
        assert fast[2]((other,), out) is NotImplemented
    B = torch.Tensor((100, 127), torch.float32)
    assert fast[2]((B,), out) is out             # the same class: served
    assert fake_driver.launches[-1]["params"][:2] == [B.data_ptr(), out.data_ptr()]


@pytest.mark.parametrize("choice, served, launched", [
    (None, 1, 1), ("use:cuda", 1, 1), ("use:cpu", 0, 0), ("env:cpu", 0, 0), ("env:cuda", 0, 1)])
def test_the_backend_rule_decides_before_the_fast_launcher(torch, fake_driver, monkeypatch,
                                                            choice, served, launched):
    """A device launcher serves the calls whose backend rule picks its backend: none given
    (the arguments' device) or use_backend's naming it; never a call that use_backend sends
    to another backend, nor one with KDSL_BACKEND set, whose value the normal path reads (a
    device launcher ran such calls on the GPU before, KDSL_BACKEND=cpu included)."""
    add = add_kernel()
    a, b, c = (torch.Tensor((64,), torch.float32) for _ in range(3))
    fast = promoted(add, a, b, out=c)
    calls = []

    def spy(args, out):
        calls.append(args)
        return fast[2](args, out)
    add._fast_out = (fast[0], fast[1], spy, fast[3])
    how, _, name = (choice or "").partition(":")
    if how == "env":
        monkeypatch.setenv("KDSL_BACKEND", name)
    n = len(fake_driver.launches)
    try:
        if how == "use":
            with kd.use_backend(name):
                add(a, b, out=c)
        else:
            add(a, b, out=c)
    except Exception:   # noqa: BLE001  (the cpu backend on fake torch tensors: not this test's)
        assert not launched
    assert (len(calls), len(fake_driver.launches) - n) == (served, launched)


def test_every_argument_is_checked_in_every_position(torch, fake_driver):
    """Another rank, a 0-d tensor, another size of the same class, a size of another class:
    declined whether it comes as the first input, the second (whose class check the
    equality with the first implies) or out= (whose size must be the result's)."""
    add = add_kernel()
    rng = np.random.default_rng()
    n = int(rng.integers(1025, 2048))                  # class 11: 1024..2047
    a, b, c = (torch.Tensor((n,), torch.float32) for _ in range(3))
    fo, fa = promoted(add, a, b, out=c), promoted(add, a, b)
    T = torch.Tensor
    others = [T((n, 1), torch.float32), T((1, n), torch.float32), T((), torch.float32),
              T((n - 1,), torch.float32), T((1024,), torch.float32), T((2047,), torch.float32),
              T((n + 1,), torch.float32), T((1023,), torch.float32), T((2048,), torch.float32)]
    for x in others:
        assert fo[2]((x, b), c) is NotImplemented and fo[2]((a, x), c) is NotImplemented
        assert fo[2]((a, b), x) is NotImplemented
        assert fa[2]((x, b)) is NotImplemented and fa[2]((a, x)) is NotImplemented
        assert fa[2]((x, b), None) is NotImplemented
    assert fo[2]((a, b), c) is c
    m = int(rng.integers(1024, 2048))                 # the same class, all three: served
    a2, b2, c2 = (T((m,), torch.float32) for _ in range(3))
    assert fo[2]((a2, b2), c2) is c2
    assert fake_driver.launches[-1]["params"][:3] == [a2.data_ptr(), b2.data_ptr(), c2.data_ptr()]
    assert m in fake_driver.launches[-1]["params"][3:]


def test_out_tuples_of_two_results(torch, fake_driver):
    @kd.kernel
    def sum_diff(a, b):
        return a + b, a - b
    a, b, c, d = (torch.Tensor((300,), torch.float32) for _ in range(4))
    fast = promoted(sum_diff, a, b, out=(c, d))
    n = len(fake_driver.launches)
    sum_diff(a, b, out=(c, d), stream=0)             # the normal path
    slow = fake_driver.launches[n:]
    n = len(fake_driver.launches)
    assert fast[2]((a, b), (c, d)) == (c, d)
    assert fake_driver.launches[n:] == slow
    params = {p for launch in slow for p in launch["params"]}
    assert {a.data_ptr(), b.data_ptr(), c.data_ptr(), d.data_ptr()} <= params
    for bad in ((c,), (c, d, d), [c, d], c, (c, torch.Tensor((299,), torch.float32)),
                (c, torch.Tensor((300,), torch.float64)), (c, a)):
        assert fast[2]((a, b), bad) is NotImplemented, bad


def test_tiny_arrays_get_a_constant_grid(torch, fake_driver):
    """Every size of a small size class needs the same grid: the launcher passes it as
    constants (its range by kdsl.ir.bounds over the class's sizes) and launches what the
    normal path launches."""
    add = add_kernel()
    n = int(np.random.default_rng().integers(8, 16))
    a, b, c = (torch.Tensor((n,), torch.float32) for _ in range(3))
    add(a, b, out=c)
    slow = fake_driver.launches[-1]
    fast = promoted(add, a, b, out=c)
    src = fast[2].__kdsl_source__
    gx, gy, gz = slow["grid"]
    assert "g00" not in src and f"_launch(_fn0, {gx}, {gy}, {gz}, " in src, src
    fake_driver.launches.clear()
    assert add(a, b, out=c) is c and fake_driver.launches == [slow]


def test_a_2d_kernel_with_a_scalar_gets_a_fast_launcher(torch, fake_driver):
    """Its grid (the sizes' product) is computed per call, within bounds its size classes
    prove (no limit test), and matches the normal path's for every size of the classes."""
    @kd.kernel
    def scale(a, k):
        return a * k
    rng = np.random.default_rng()
    T = torch.Tensor
    x = T((int(rng.integers(2048, 4096)), int(rng.integers(4, 8))), torch.float32)
    fast = promoted(scale, x, 2.0)
    src = fast[2].__kdsl_source__
    assert "g00 = " in src and "if g00 > " not in src, src
    for shape in [(2048, 4), (4095, 7), (int(rng.integers(2048, 4096)), int(rng.integers(4, 8)))]:
        y = T(shape, torch.float32)
        n = len(fake_driver.launches)
        scale(y, 3.0, stream=0)                  # the normal path
        slow = fake_driver.launches[n]
        r = fast[2]((y, 3.0))
        assert type(r) is torch.Tensor and r.shape == shape
        got = fake_driver.launches[-1]
        assert got["grid"] == slow["grid"] and got["block"] == slow["block"]
        assert got["params"][0] == y.data_ptr() and got["params"][1] == r.data_ptr()
        assert got["params"][2:] == slow["params"][2:]
    assert fast[2]((T((2048, 8), torch.float32), 3.0)) is NotImplemented
    assert fast[2]((x, 3)) is NotImplemented                  # an int, not the float it took


def test_devices_are_checked(torch, fake_driver, monkeypatch):
    """One GPU: a tensor that is not a CUDA one (a CPU tensor, or another kind of device whose
    get_device() is 0 too) is declined; several GPUs: the device index is compared."""
    add = add_kernel()
    a, b, c = (torch.Tensor((96,), torch.float32) for _ in range(3))
    fast = promoted(add, a, b, out=c)
    other = torch.Tensor((96,), torch.float32)
    other.is_cuda = False                      # e.g. an XPU tensor: get_device() 0 as well
    assert other.get_device() == 0
    for pos in range(3):
        args = [a, b, c]
        args[pos] = other
        assert fast[2](tuple(args[:2]), args[2]) is NotImplemented
    from kdsl_cuda.runtime import driver
    monkeypatch.setattr(driver, "device_count", lambda: 2)
    add2 = add_kernel()
    fast2 = promoted(add2, a, b, out=c)
    assert ".get_device() != 0" in fast2[2].__kdsl_source__
    on1 = torch.Tensor((96,), torch.float32, dev=1)
    for pos in range(3):
        args = [a, b, c]
        args[pos] = on1
        assert fast2[2](tuple(args[:2]), args[2]) is NotImplemented
    assert fast2[2]((a, b), c) is c


def test_the_dlpack_reader_form_reads_every_array_in_one_call(torch, fake_driver, monkeypatch):
    """Where the compiled helper reads torch tensors (torch >= 2.10: native.reader), the
    launcher checks and reads all arrays -- out= included -- in that one call (here a stand-in
    with the Reader's contract: the stream, then each pointer and sizes; None declines), and
    launches what the attribute-reading form launches."""
    from kdsl_cuda.runtime import native
    calls = []

    def reader(specs, ordinal):
        def rd(*arrays):
            calls.append(arrays)
            if any(type(a) is not torch.Tensor or a.dtype is not s.dtype or len(a.shape)
                   != len(s.dims) or a.get_device() != ordinal for a, s in zip(arrays, specs)):
                return None
            return (torch._C._cuda_getCurrentRawStream(ordinal),) + sum(((a.data_ptr(),) + tuple(a.shape)
                                                 for a in arrays), ())
        return rd
    add = add_kernel()
    a, b, c = (torch.Tensor((300,), torch.float32) for _ in range(3))
    add(a, b, out=c)
    slow = fake_driver.launches[-1]
    monkeypatch.setattr(native, "reads_torch", lambda: True)
    monkeypatch.setattr(native, "reader", reader)
    fast = promoted(add, a, b, out=c)
    src = fast[2].__kdsl_source__
    assert "_rd(a0, a1, out)" in src and "data_ptr" not in src and "_raw_stream" not in src, src
    fake_driver.launches.clear()
    n = len(calls)
    assert add(a, b, out=c) is c and len(calls) == n + 1 and fake_driver.launches == [slow]
    cpu = torch.Tensor((300,), torch.float32, dev=-1)
    assert fast[2]((a, b), cpu) is NotImplemented and fast[2]((a, b, c), c) is NotImplemented
