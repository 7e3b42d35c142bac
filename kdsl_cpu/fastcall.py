"""Native fast launchers: one machine-code function per specialisation, called as a builtin.

``build(compiled, plan)`` turns a ``kdsl.runtime.callplan.CallPlan`` into an LLVM function
``PyObject *f(PyObject *self, PyObject *const *args, Py_ssize_t n)`` (METH_FASTCALL, wrapped by
``PyCFunction_NewEx``: it costs what any builtin call costs; kdsl_cpu.fastcall_gen).  It reads
the CPython and numpy C layouts directly: arguments checked exactly (``PyArray_Type``, the
dtype object, rank, C-contiguity, size-1 dims; ``int``/``float``/``bool``), shapes bound, the
plan's checks and constraints and the outputs' shapes computed in overflow-checked 64-bit
arithmetic, outputs made by ``PyArray_NewFromDescr``, the kernel run without the GIL.
Anything unexpected releases what was allocated and returns ``NotImplemented`` (the normal
path reports errors).  The layouts are verified at first use on live objects (``abi()``);
where anything differs, no fast launcher is built.
"""
from __future__ import annotations

import ctypes
import struct

from kdsl.runtime.outputs import overlaps

from . import fastcall_store, jit
from .fastcall_abi import METH_FASTCALL, Unsupported, _api_fn, _PyMethodDef, abi
from .fastcall_abi import _check_array  # noqa: F401  (the tests check layouts through it)


def _code(plan, compiled):
    """``(loaded code, table symbols)`` of the plan's launcher: from the disk cache
    (kdsl_cpu.fastcall_store: a fresh process neither generates nor compiles it, no LLVM),
    else generated and compiled by LLVM (and kept); None when the plan needs what the
    launcher does not do."""
    k = fastcall_store.key(plan, compiled)      # (once: it fingerprints the plan)
    hit = fastcall_store.load(k)
    if hit is not None:
        return hit
    try:
        from .fastcall_gen import _Gen    # (llvmlite: only where the cache misses)
        gen = _Gen(plan, compiled)
        text = str(gen.build())
    except (Unsupported, fastcall_store.Missing):
        return None
    obj = jit.compile_glue(text)
    code = jit.load_object(obj, "kdsl_fast")
    fastcall_store.save(k, obj, gen.table)
    return code, gen.table


def build(compiled, plan):
    """The fast launcher of ``plan`` (see the module docstring): a kdsl.backends.spec.FastLauncher
    whose ``packed(args, out)`` is the machine code, called as a builtin with the kernel's
    argument tuple; it declines an out= that meets an input, and where an out= array is not
    C-contiguous (it may overlap itself) numpy's overlap test runs first.  None when this
    interpreter's layouts are not the ones verified or the plan needs what it lacks."""
    a = abi()
    if not isinstance(a, dict):
        return None
    made = _code(plan, compiled)
    if made is None:
        return None
    code, syms = made
    try:
        addresses = [fastcall_store.address(sym, a, plan, compiled) for sym in syms]
    except (fastcall_store.Missing, IndexError, KeyError):
        return None
    name = f"kdsl fast launcher of {compiled.func.name}".encode()
    method = _PyMethodDef(name, code.address, METH_FASTCALL, None)
    new = _api_fn("PyCFunction_NewEx", ctypes.py_object, ctypes.c_void_p, ctypes.py_object,
                  ctypes.c_void_p)
    # m_self: the address table (the code reads it), then what the builtin keeps alive: its
    # method table, code, kernel and plan (the dtype objects compared)
    table = struct.pack(f"<{len(addresses)}Q", *addresses)
    packed = new(ctypes.addressof(method), (table, method, name, code, compiled, plan), None)
    if not all(a.contiguous for a in plan.out_args):
        native = packed

        def packed(args, out):
            return NotImplemented if overlaps(out, args) else native(args, out)
    from kdsl.backends.spec import FastLauncher
    return FastLauncher(None, packed=packed)

