"""A fake CUDA driver that records launches, and device arrays at fake addresses: the cuda
launcher's host side tested without a GPU (the ``fake_driver`` fixture in conftest.py)."""
import ctypes


class FakeLib:
    """The driver calls the launcher makes, recorded (params read back as int64 slots)."""

    def __init__(self):
        self.launches = []
        self.attributes = []      # (function, attribute, value) of cuFuncSetAttribute
        self.fail_next = 0

    def cuLaunchKernel(self, fn, gx, gy, gz, bx, by, bz, shmem, stream, params, extra):
        if self.fail_next:
            code, self.fail_next = self.fail_next, 0
            return code
        stream = getattr(stream, "value", stream) or 0
        fn = getattr(fn, "value", fn)        # the fast launchers pass a prebuilt c_void_p
        vals = [ctypes.c_int64.from_address(params[i]).value for i in range(len(params))]
        self.launches.append(dict(fn=fn, grid=(gx, gy, gz), block=(bx, by, bz), stream=stream,
                                  params=vals, shared=shmem))
        return 0

    #: static shared bytes every fake function reports (cuFuncGetAttribute)
    static_shared = 64

    def cuFuncGetAttribute(self, out, attr, fn):
        from kdsl_cuda.runtime.driver import FUNC_ATTR_SHARED_SIZE_BYTES
        assert attr == FUNC_ATTR_SHARED_SIZE_BYTES
        out._obj.value = self.static_shared
        return 0

    def cuFuncSetAttribute(self, fn, attr, value):
        self.attributes.append((getattr(fn, "value", fn), attr, value))
        return 0

    def check(self, code, what):
        if code:
            from kdsl_cuda.runtime.driver import CudaError
            raise CudaError(f"{what} failed with {code}", code)

    def cuModuleLoadData(self, mod, data):
        assert bytes(data[:4]) == b"\x7fELF"
        return 0

    def cuModuleGetFunction(self, f, mod, name):
        f._obj.value = 1000 + len(name)
        return 0


class FakeDevice:
    arch = "sm_90"
    max_shared = 227 * 1024      # MAX_SHARED_MEMORY_PER_BLOCK_OPTIN of an H100/H200
    pools = False
    ordinal = 0


class FakeAllocation:
    """Device memory that is only an address (never dereferenced)."""

    next_ptr = 1 << 40

    def __init__(self, nbytes, device=0, stream=0):
        self.ptr = FakeAllocation.next_ptr
        self.nbytes = nbytes
        FakeAllocation.next_ptr += max(int(nbytes), 1) + 256


def device_array(shape, dtype, strides=None):
    """A DeviceArray at a fake address (nothing is allocated)."""
    import numpy as np
    from kdsl_cuda.runtime.memory import DeviceArray
    a = DeviceArray(shape, np.dtype(dtype), strides=strides, ptr=FakeAllocation.next_ptr)
    FakeAllocation.next_ptr += max(a.nbytes_span(), 1) + 256
    return a



def add_kernel():
    """A fresh ``add(a, b) = a + b`` kernel (nothing cached yet)."""
    import kdsl as kd

    @kd.kernel
    def add(a, b):
        return a + b
    return add


def promoted(kernel, *args, out=None):
    """Call ``kernel`` until its fast launcher for these arguments is made; that launcher's
    entry (it must be a packed device launcher)."""
    for _ in range(4):
        kernel(*args, out=out)
    fast = kernel._fast if out is None else kernel._fast_out
    assert fast is not None and fast[3] and fast[2] is not None, "no packed device launcher"
    return fast
