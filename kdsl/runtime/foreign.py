"""Host arrays of other libraries on the host backends (numpy, interp, interp-cuda, cpu).

A PyTorch CPU tensor, a JAX CPU array or any object with ``__dlpack__``/``__dlpack_device__``
in host memory is read in place as a numpy array (``host_call``): torch through
``Tensor.numpy()`` (through ``.detach()`` when it requires grad; bfloat16 through DLPack, which
numpy cannot read), JAX through its buffer (read-only), anything else through DLPack
(``kdsl.runtime.dlpack``).  The call then runs on numpy arrays and its results are given back as
**the library of the first array argument** (the rule of the cuda backend too): a torch tensor
sharing the result's memory (``torch.from_numpy``), a JAX array (a copy: JAX arrays own their
buffers), else numpy.  ``out=`` may be a torch tensor or a DLPack host array: it is written in
place and returned as it was passed.  Nothing here imports torch or JAX unless the argument came
from it, and the numpy call path never reaches this module.
"""
from __future__ import annotations

import sys

import numpy as np

from ..errors import ArgumentError, KdslError, for_user
from . import dlpack

#: argument types that are never arrays (scalars, None): left as they are
_SCALARS = frozenset((int, float, bool, complex, type(None)))


class Library:
    """How one array library's host arrays are read and its results made (numpy: unknown
    DLPack exporters, whose results are numpy arrays)."""

    name = "DLPack"
    #: can ``out=`` be one of its arrays (written in place)?
    writable = True

    def device(self, a) -> str | None:
        """None when ``a`` lives in host memory, else where it lives (for the error)."""
        kind = dlpack.device_type(a)
        if kind in dlpack.HOST_DEVICES:
            return None
        return {2: "a CUDA device", 10: "a ROCm device"}.get(kind, f"DLPack device type {kind}")

    def to_host(self, a) -> np.ndarray:
        """A numpy array viewing ``a`` in place."""
        return dlpack.from_dlpack(a)

    def wrap(self, r):
        """The caller's result for a numpy result ``r``."""
        return r


class TorchLibrary(Library):
    """PyTorch: tensors in, tensors out, sharing memory both ways."""

    name = "torch"

    def device(self, a) -> str | None:
        return None if a.is_cpu else str(a.device)

    def to_host(self, a) -> np.ndarray:
        if a.requires_grad:      # read the values; the result is not part of the autograd graph
            a = a.detach()
        if a.dtype is self._bf16():    # numpy has no type for it (raising costs ~30 us)
            return dlpack.from_dlpack(a)
        return a.numpy()

    _bf16_dtype = None

    def _bf16(self):
        d = TorchLibrary._bf16_dtype
        if d is None:
            d = TorchLibrary._bf16_dtype = _torch().bfloat16
        return d

    def wrap(self, r):
        torch = _torch()
        if not isinstance(r, np.ndarray):
            r = np.asarray(r)
        if r.dtype.kind == "V" and r.dtype.itemsize == 2:     # ml_dtypes' bfloat16
            return torch.from_numpy(r.view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(r)


class JaxLibrary(Library):
    """JAX: arrays in (read in place, read-only), arrays out (JAX copies the result into a
    buffer of its own; its dtype rules apply: without ``jax_enable_x64`` 64-bit results become
    32-bit, as with ``jnp.asarray``).  JAX arrays are immutable, so ``out=`` cannot be one."""

    name = "JAX"
    writable = False

    def to_host(self, a) -> np.ndarray:
        return np.asarray(a)

    def wrap(self, r):
        import jax.numpy as jnp
        return jnp.asarray(r)


_DLPACK, _TORCH, _JAX = Library(), TorchLibrary(), JaxLibrary()
#: type -> its Library, or None for types that are not foreign arrays (filled on first sight)
_kinds: dict = {}


def _torch():
    return sys.modules["torch"]


def library(a) -> Library | None:
    """The Library of a foreign array ``a`` (torch, JAX, any DLPack exporter), else None."""
    t = type(a)
    try:
        return _kinds[t]
    except KeyError:
        pass
    torch = sys.modules.get("torch")
    root = (t.__module__ or "").split(".")[0]
    if torch is not None and issubclass(t, torch.Tensor):
        lib = _TORCH
    elif root in ("jax", "jaxlib") and hasattr(t, "__dlpack__"):
        lib = _JAX
    elif issubclass(t, (np.ndarray, np.generic)):   # numpy's own (masked arrays: refused later)
        lib = None
    elif hasattr(t, "__dlpack__") and hasattr(t, "__dlpack_device__"):
        lib = _DLPACK
    else:
        lib = None
    _kinds[t] = lib
    return lib


def host_readable(a) -> bool:
    """Is ``a`` (not a numpy array or scalar) an array a host backend reads as numpy: a foreign
    array, or an array-like numpy converts (``__array__``/``__array_interface__``)?"""
    if library(a) is not None:
        return True
    if hasattr(a, "__cuda_array_interface__"):
        return False
    return hasattr(a, "__array__") or hasattr(a, "__array_interface__")


def lazy_arrays(args) -> bool:
    """Is one of ``args`` a dask array (a lazy collection with chunks: kdsl.dask maps the call
    onto it instead of computing it here)?"""
    return any(hasattr(type(a), "__dask_graph__") and hasattr(a, "chunks") for a in args)


def needs_host_call(out) -> bool:
    """Does an ``out=`` value (not a numpy array) hold a foreign array to convert?"""
    outs = out if type(out) is tuple else (out,)
    return any(type(o) is not np.ndarray and library(o) is not None for o in outs)


def _fail(kernel, what, message, hint):
    __tracebackhide__ = True  # noqa: F841
    raise for_user(ArgumentError(f"{kernel.__name__}: {what} {message}", hint=hint)) from None


def _arg_to_host(kernel, a, name):
    """The numpy array a host backend reads for argument ``a`` (a view where possible)."""
    lib = library(a)
    if lib is None:      # another array-like: numpy converts it (a view when it allows one)
        try:
            return np.asarray(a)
        except Exception as e:
            _fail(kernel, f"argument {name!r}", f"({type(a).__name__}): np.asarray failed: "
                  f"{type(e).__name__}: {e}", "pass a numpy array")
    where = lib.device(a)
    if where is not None:
        _fail(kernel, f"argument {name!r}", f"({lib.name} {type(a).__name__}) lives on {where}; "
              "this backend reads host memory",
              "call with backend=\"cuda\" (or without backend=: CUDA arrays choose it), or move "
              "the array to the CPU first (t.cpu())")
    try:
        return lib.to_host(a)
    except KdslError:
        raise
    except Exception as e:
        _fail(kernel, f"argument {name!r}", f"({lib.name} {getattr(a, 'dtype', type(a).__name__)}) "
              "cannot be "
              f"read in place: {type(e).__name__}: {e}",
              "convert it to a kdsl dtype first (e.g. t.to(torch.float32)); bfloat16 needs "
              "the ml_dtypes package")


def _out_to_host(kernel, o, j, several):
    lib = library(o)
    if lib is None:
        return o        # numpy (or not an array: the normal path reports it)
    what = f"out= array {j}" if several else "the out= array"
    if not lib.writable:
        _fail(kernel, what, f"is a {lib.name} array, which is immutable; results cannot be "
              "written into it", "drop out=: the result comes back as a new JAX array")
    if lib is _TORCH and o.requires_grad:
        _fail(kernel, what, "requires grad; kdsl does not record autograd, so it cannot write "
              "into it (torch refuses out= for such tensors too)",
              "drop out=, or pass a tensor that does not require grad (out.detach() writes "
              "into the same memory without autograd seeing it)")
    return _arg_to_host(kernel, o, f"out[{j}]" if several else "out")


def host_arrays(kernel, args, array_likes: bool = True):
    """``args`` with each foreign array (and, with ``array_likes``, each other array-like
    numpy converts) read as a numpy array; and the Library of the first array argument (None:
    numpy, or a library whose results are numpy)."""
    like, host, first = None, [], True
    for a, name, const in zip(args, kernel.arg_names, kernel._const):
        t = type(a)
        if const or t in _SCALARS or t is np.ndarray or isinstance(a, np.generic):
            first = first and t is not np.ndarray
            host.append(a)
            continue
        lib = library(a)
        if lib is not None or (array_likes and host_readable(a)):
            if first:
                like = lib
            first = False
            a = _arg_to_host(kernel, a, name)
        host.append(a)
    return tuple(host), like


def host_call(kernel, args, backend, out, stream):
    """Run ``kernel`` on a host backend with its foreign and array-like arguments (and ``out=``)
    read as numpy arrays, then give the results back as the first array argument's library."""
    host, like = host_arrays(kernel, args)
    if out is not None:
        several = type(out) is tuple
        outs = tuple(_out_to_host(kernel, o, j, several)
                     for j, o in enumerate(out if several else (out,)))
        kernel._recall(host, backend, outs if several else outs[0], stream)
        return out      # the caller's own arrays, written in place
    r = kernel._recall(host, backend, None, stream)
    if like is None:
        return r
    return tuple(like.wrap(x) for x in r) if type(r) is tuple else like.wrap(r)
