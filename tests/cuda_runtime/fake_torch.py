"""A module standing in for ``torch`` without a GPU: CUDA tensors at fake addresses with what
kdsl_cuda reads of them (``dtype``, ``shape``, ``data_ptr()``, ``stride()``,
``is_contiguous()``, ``get_device()``, ``element_size()``, ``is_cuda``,
``__cuda_array_interface__``), ``torch.empty`` and the current raw stream.  Methods are bound
builtins (C calls, as torch's are), so benchmarks/launch_host.py times kdsl's own work.
``install(monkeypatch)`` puts it in ``sys.modules`` for one test and restores kdsl_cuda's caches
of torch afterwards."""
import functools
import sys
import types

_TYPESTR = {"float32": "<f4", "float64": "<f8", "int32": "<i4", "int64": "<i8", "float16": "<f2",
            "int8": "|i1", "uint8": "|u1", "int16": "<i2", "bool": "|b1", "bfloat16": "<V2"}
_SIZES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int8": 1, "int16": 2,
          "int32": 4, "int64": 8, "uint8": 1, "bool": 1}


def _c_strides(shape):
    out, acc = [], 1
    for s in reversed(shape):
        out.insert(0, acc)
        acc *= max(s, 1)
    return tuple(out)


def make():
    """A fresh fake ``torch`` module (``torch.Tensor(shape, dtype, strides=None, dev=0)``;
    ``dev=-1``: a tensor on the CPU; ``torch._C.stream``: the current raw stream, settable)."""
    torch = types.ModuleType("torch")

    class dtype:
        __slots__ = ("name", "itemsize")

        def __init__(self, name, itemsize):
            self.name, self.itemsize = name, itemsize

        def __repr__(self):
            return "torch." + self.name

    for name, isz in _SIZES.items():
        setattr(torch, name, dtype(name, isz))
    next_ptr = [1 << 40]

    class Size(tuple):
        """torch.Size: a tuple subclass (so not every tuple fast path of CPython applies)."""
        __slots__ = ()

    torch.Size = Size

    class Tensor:
        __slots__ = ("dtype", "shape", "data_ptr", "stride", "is_contiguous", "get_device",
                     "element_size", "is_cuda", "device", "_st")

        def __init__(self, shape, dt, strides=None, dev=0, ptr=None):
            shape = tuple(shape)
            st = _c_strides(shape) if strides is None else tuple(strides)
            if ptr is None:
                n = 1
                for s in shape:
                    n *= s
                ptr = next_ptr[0]
                next_ptr[0] += max(n, 1) * dt.itemsize + 256
            self.dtype, self.shape, self._st = dt, Size(shape), st
            self.data_ptr = ptr.__index__
            self.stride = functools.partial(tuple, st)
            contiguous = all(a == b or s == 1 for a, b, s in zip(st, _c_strides(shape), shape))
            self.is_contiguous = contiguous.__bool__
            self.get_device = dev.__index__
            self.element_size = dt.itemsize.__index__
            self.is_cuda = dev >= 0
            self.device = types.SimpleNamespace(type="cuda" if dev >= 0 else "cpu", index=dev)

        @property
        def __cuda_array_interface__(self):
            if not self.is_cuda:
                raise AttributeError("Can't get __cuda_array_interface__ on non-CUDA tensor")
            isz = self.dtype.itemsize
            return {"version": 3, "typestr": _TYPESTR[self.dtype.name], "shape": self.shape,
                    "strides": tuple(s * isz for s in self._st), "data": (self.data_ptr(), False),
                    "stream": None}

        def __dlpack_device__(self):
            return (2, self.get_device()) if self.is_cuda else (1, 0)

    Tensor.__module__ = "torch"
    torch.Tensor = Tensor
    torch.__version__ = "0+fake"

    def empty(shape, dtype=None, device=None):
        shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        dev = device if isinstance(device, int) else getattr(device, "index", 0) or 0
        return Tensor(shape, dtype or torch.float32, dev=dev)

    torch.empty = empty
    streams = {}
    torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda d: streams.get(d, 0),
                                     streams=streams)
    torch.cuda = types.SimpleNamespace()
    return torch


def install(monkeypatch):
    """The fake torch as ``torch`` for one test; kdsl_cuda's torch caches are restored after."""
    import importlib

    from kdsl.runtime import arrays
    from kdsl_cuda.runtime import interop
    backend = importlib.import_module("kdsl_cuda.backend")     # the module, not the instance
    torch = make()
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setattr(interop, "_TORCH_DTYPES", {})
    monkeypatch.setattr(backend, "_readers_done", set())
    monkeypatch.setattr(arrays, "_readers", dict(arrays._readers))
    return torch
