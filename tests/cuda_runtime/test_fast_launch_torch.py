"""The generated fast launcher on torch-like CUDA tensors (fake_torch.py, fake driver): what it
launches matches the normal path, and it declines -- so the normal path answers -- whatever the
normal path would treat otherwise: tensors on the CPU, a wrong number of arguments, a scalar no
parameter slot holds."""
import numpy as np
import pytest

import kdsl as kd
from kdsl.errors import ArgumentError

import fake_torch


@pytest.fixture
def torch(fake_driver, monkeypatch):
    return fake_torch.install(monkeypatch)


def _add():
    @kd.kernel
    def add(a, b):
        return a + b
    return add


def _promoted(kernel, *args, out=None):
    for _ in range(4):
        kernel(*args, out=out)
    fast = kernel._fast if out is None else kernel._fast_out
    assert fast is not None and fast[3] and fast[4] is not None, "no packed device launcher"
    return fast


def test_fast_launch_matches_the_normal_path(torch, fake_driver):
    add = _add()
    rng = np.random.default_rng()
    n = int(rng.integers(600, 1000))
    a, b, c = (torch.Tensor((n,), torch.float32) for _ in range(3))
    torch._C.streams[0] = 0x5000 + int(rng.integers(1, 1000)) * 16    # torch's current stream
    add(a, b, out=c)          # the normal path
    slow = fake_driver.launches[-1]
    fast = _promoted(add, a, b, out=c)
    fake_driver.launches.clear()
    assert add(a, b, out=c) is c
    (got,) = fake_driver.launches
    assert got == slow and got["stream"] == torch._C.streams[0]
    assert got["params"][:3] == [a.data_ptr(), b.data_ptr(), c.data_ptr()]
    assert "_lx(" in fast[2].__kdsl_source__            # cuLaunchKernelEx
    # the allocating form: a torch tensor of the input's size, launched the same way
    _promoted(add, a, b)
    fake_driver.launches.clear()
    r = add(a, b)
    assert type(r) is torch.Tensor and r.shape == (n,) and r.dtype is torch.float32
    assert fake_driver.launches[-1]["params"][:3] == [a.data_ptr(), b.data_ptr(), r.data_ptr()]
    assert fake_driver.launches[-1]["grid"] == slow["grid"]


def test_fast_launch_without_cuLaunchKernelEx(torch, fake_driver):
    fake_driver.raw_launch_ex = None        # an old driver: cuLaunchKernel, 11 arguments
    add = _add()
    a, b, c = (torch.Tensor((300,), torch.float32) for _ in range(3))
    add(a, b, out=c)
    slow = fake_driver.launches[-1]
    fast = _promoted(add, a, b, out=c)
    assert "_lx(" not in fast[2].__kdsl_source__ and "_launch(" in fast[2].__kdsl_source__
    fake_driver.launches.clear()
    add(a, b, out=c)
    assert fake_driver.launches == [slow]


def test_cpu_tensors_are_declined(torch, fake_driver):
    """A torch tensor on the CPU has the type of a CUDA one: the launcher checks the device
    with one GPU too (it launched on host pointers before)."""
    add = _add()
    a, b, c = (torch.Tensor((64,), torch.float32) for _ in range(3))
    fast = _promoted(add, a, b, out=c)
    cpu = torch.Tensor((64,), torch.float32, dev=-1)
    assert fast[2](cpu, b, c) is NotImplemented and fast[4]((a, b), cpu) is NotImplemented
    n = len(fake_driver.launches)
    with pytest.raises(ArgumentError, match="on the CPU"):
        add(a, b, out=cpu)
    assert len(fake_driver.launches) == n


def test_wrong_argument_count_is_an_argument_error(torch, fake_driver):
    add = _add()
    a, b, c = (torch.Tensor((64,), torch.float32) for _ in range(3))
    fast = _promoted(add, a, b, out=c)
    assert fast[4]((a,), c) is NotImplemented and fast[4]((a, b, c), c) is NotImplemented
    with pytest.raises(ArgumentError, match="missing a required argument"):
        add(a, out=c)
    with pytest.raises(ArgumentError, match="missing a required argument"):
        _promoted(add, a, b)
        add(a)


def test_scalar_beyond_its_slot_is_an_argument_error(torch, fake_driver):
    @kd.kernel
    def scale(a, k):
        return a * k
    a, c = (torch.Tensor((64,), torch.float32) for _ in range(2))
    _promoted(scale, a, 3, out=c)
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
    fast = _promoted(rowsum, A, out=out)
    assert fast[2](A, out) is out
    for other in (torch.Tensor((100, 63), torch.float32),          # another class, below
                  torch.Tensor((100, 128), torch.float32),         # and above
                  torch.Tensor((100, m), torch.float64),           # another dtype
                  torch.Tensor((100, m), torch.float32, strides=(2 * m, 2))):   # strided view
        assert fast[2](other, out) is NotImplemented
    B = torch.Tensor((100, 127), torch.float32)
    assert fast[2](B, out) is out             # the same class: served
    assert fake_driver.launches[-1]["params"][:2] == [B.data_ptr(), out.data_ptr()]


@pytest.mark.parametrize("choice, served", [(None, True), ("use:cuda", True), ("env:cuda", True),
                                            ("env:", True), ("use:cpu", False),
                                            ("env:cpu", False)])
def test_the_backend_rule_decides_before_the_fast_launcher(torch, fake_driver, monkeypatch,
                                                            choice, served):
    """A device launcher serves the calls whose backend rule picks its backend: none given
    (the arguments' device), use_backend's or KDSL_BACKEND's naming it; never a call that
    use_backend or KDSL_BACKEND sends to another backend (it ran on the GPU before)."""
    add = _add()
    a, b, c = (torch.Tensor((64,), torch.float32) for _ in range(3))
    fast = _promoted(add, a, b, out=c)
    calls = []

    def spy(args, out):
        calls.append(args)
        return fast[4](args, out)
    add._fast_out = fast[:4] + (spy,)
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
        assert not served
    assert (len(calls), len(fake_driver.launches) - n) == ((1, 1) if served else (0, 0))
