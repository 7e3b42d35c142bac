"""The native fast launchers' object code, kept in the disk cache (kdsl_cpu.fastcall).

The code holds no address: it reads every pointer it calls or compares against from a table
its builtin's ``self`` carries, each entry a symbol -- ``("fn", name)``, ``("obj", name)``,
``("kernel",)``, ``("runtime",)``, ``("dtype", i)`` (the plan's i-th dtype object) -- resolved
in the loading process (``address``).  So it is kept under a key of what it is a function of
(``key``), and a fresh process loads it without LLVM.
"""
from __future__ import annotations

import ctypes
import hashlib
import marshal
import os

from kdsl.runtime.callplan import ArrayArg

from . import jit

#: bump when the code's contract with the builtin changes (the table's place, the signature)
FORMAT = "fastcall-2"


class Missing(LookupError):
    """A table entry names something this plan or process does not have."""


def _plan_dtypes(plan) -> list:
    return ([a.dtype for a in plan.args if type(a) is ArrayArg]
            + [a.dtype for a in plan.out_args] + [o.np for o in plan.outputs])


def dtype_index(plan, dtype) -> int:
    """Where ``dtype`` (an object the code compares against) first appears among the plan's
    dtype objects: the arguments', the out= arrays', the results' (``address`` inverts it)."""
    for i, d in enumerate(_plan_dtypes(plan)):
        if d is dtype:
            return i
    raise Missing("a dtype object the plan does not hold")


def address(sym: tuple, abi_: dict, plan, compiled) -> int:
    """The address a table symbol names in this process (``abi_``: kdsl_cpu.fastcall.abi())."""
    kind = sym[0]
    if kind in ("fn", "obj"):
        return abi_[kind][sym[1]]
    if kind == "kernel":
        return compiled._code.address
    if kind == "runtime":
        return ctypes.addressof(compiled._runtime)
    if kind == "dtype":
        return id(_plan_dtypes(plan)[sym[1]])
    raise Missing(f"unknown table entry {sym!r}")


def key(plan, compiled) -> str | None:
    """The disk-cache key of a plan's launcher, or None when the cache is off or the plan
    cannot be written canonically (kdsl.runtime.fingerprint)."""
    from kdsl import config
    if not config.cache_enabled():
        return None
    from kdsl.runtime import fingerprint as fp
    try:
        body = fp.fingerprint(plan._replace(key=None, name=""),
                              (len(compiled.func.buffers), len(compiled.func.inputs)))
    except fp.Unkeyable:
        return None
    kdsl_dir = os.path.dirname(os.path.dirname(os.path.abspath(fp.__file__)))
    src = fp.source_fingerprint(kdsl_dir, os.path.dirname(os.path.abspath(__file__)))
    return hashlib.sha256(f"{FORMAT}|{jit.host_id()}|{src}|{body}".encode()).hexdigest()


def load(k: str | None):
    """``(loaded code, table symbols)`` kept under the key ``k`` (``key``), or None (no key, a
    miss; an entry that does not load is dropped)."""
    from kdsl.runtime import cache as disk
    store = disk.DiskCache()
    blob = store.get(k) if k is not None else None
    if blob is None:
        return None
    try:
        syms, obj = marshal.loads(blob)
        return jit.load_object(obj, "kdsl_fast"), [tuple(x) for x in syms]
    except Exception as e:      # a bad entry never sticks: dropped, then built again
        store.discard(k, "a native fast launcher", e)
        return None


def save(k: str | None, obj: bytes, syms: list) -> None:
    """Keep a launcher's object code and table symbols under ``k`` (nothing when None)."""
    if k is not None:
        from kdsl.runtime import cache as disk
        disk.DiskCache().put(k, marshal.dumps((syms, obj)))
