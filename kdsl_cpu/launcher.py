"""The cpu kernel's call (the path of first calls and of calls ``fastcall``'s launchers decline).

``build_launcher`` generates one small Python function per compiled kernel: it reads each
array's data pointer, computes the scalar slots (``kdsl.ir.bindings.scalar_slots``), packs
them with precompiled ``struct`` formats and calls the entry through a ctypes ``CFUNCTYPE``
(the GIL released).  Dispatch has checked dtypes, ranks, shapes and writable outputs; the
launcher checks native byte order and strides of whole elements.
"""
from __future__ import annotations

import ctypes
import functools
import os
import struct

from kdsl import dtypes as dt
from kdsl.errors import ArgumentError, InternalCompilerError
from kdsl.ir.bindings import SCALAR, scalar_slots
from kdsl.runtime.slots import bf16_bits, element_stride, slot_sources

_HERE = os.path.dirname(os.path.abspath(__file__))

ENTRY_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p)


def _status(code: int, kernel: str):
    if code == 1:
        raise MemoryError(f"kernel {kernel!r} could not allocate a temporary buffer")
    raise InternalCompilerError(f"kernel {kernel!r} returned status {code}")


def _byteorder(name: str, dtype):
    raise ArgumentError(f"array {name!r} has dtype {dtype.str}, which is not in this machine's "
                        "byte order (the cpu backend reads arrays in place)",
                        hint=f"convert it first: {name}.astype({name}.dtype.newbyteorder('='))")


@functools.lru_cache(maxsize=None)
def _pointer_reader():
    """Source of an expression giving array ``x``'s data pointer, and its namespace.

    ``a.ctypes.data`` costs ~0.8 us: the pointer is read from the object (PyArrayObject's
    ``data``) where the native launchers' layout check (``fastcall_abi._check_array``) passes
    on live arrays (views, offsets, 0-d)."""
    import numpy as np
    from .fastcall_abi import OFF_DATA, _check_array
    base = np.arange(24, dtype=np.float64).reshape(4, 6)
    samples = (base, base[1:, 2:], base[::-1, ::-2], np.zeros(()), np.empty(3, np.int8))
    if ctypes.sizeof(ctypes.c_void_p) == 8 and not any(_check_array(a) for a in samples):
        return (f"(_word(_id({{x}}) + {OFF_DATA}).value if type({{x}}) is _ndarray "
                "else {x}.ctypes.data)",
                {"_word": ctypes.c_uint64.from_address, "_id": id, "_ndarray": np.ndarray})
    return "{x}.ctypes.data", {}


def build_launcher(func, address: int, runtime, keepalive=()):
    """A function ``run(inputs, outputs, scalars)`` calling the native entry at ``address``.

    ``runtime`` is the ``parallel.RuntimeTable`` passed to every call; ``keepalive``
    holds whatever must live as long as the launcher (the loaded code).
    """
    nin = len(func.inputs)
    ns = {"_call": ENTRY_FN(address), "_rt": ctypes.addressof(runtime), "_rt_obj": runtime,
          "_keep": keepalive, "_stride": element_stride, "_status": _status,
          "_bf16": bf16_bits, "_kname": func.name, "_byteorder": _byteorder}
    pointer, extra = _pointer_reader()
    ns.update(extra)
    lines, names = [], []
    for k, buf in enumerate(func.buffers):
        lines.append(f"b{k} = {f'inputs[{k}]' if k < nin else f'outputs[{k - nin}]'}")
        names.append(pointer.format(x=f"b{k}"))
        lines.append(f"if not b{k}.dtype.isnative: _byteorder({buf.name!r}, b{k}.dtype)")
    ns["_pack_b"] = struct.Struct("@" + "P" * len(names)).pack
    slots = scalar_slots(func)           # resolved once (kdsl.ir.bindings)
    vals = [f"_bf16({x})" if sl.kind == SCALAR and sl.dtype is dt.bfloat16 else x
            for sl, x in zip(slots, slot_sources(slots, "b{k}.shape", "b{k}.strides"))]
    ns["_pack_s"] = struct.Struct("<" + "".join(sl.code for sl in slots)).pack
    lines.append(f"st = _call(_pack_b({', '.join(names)}), _pack_s({', '.join(vals)}), _rt)")
    lines.append("if st: _status(st, _kname)")
    src = "def run(inputs, outputs, scalars):\n" + "".join(f"    {x}\n" for x in lines)
    # a file name inside kdsl_cpu, so that user_location() skips this frame
    exec(compile(src, os.path.join(_HERE, f"<cpu launcher {func.name}>"), "exec"), ns)
    run = ns["run"]
    run.__kdsl_source__ = src
    return run
