"""Loads of buffers marked ``Buffer.empty_reads``: safe while the buffer is empty, plain otherwise.

kdsl.frontend.access lets a read in a select's untaken branch address an array that may be
empty at run time (``np.pad`` of an axis of length 0, an empty part of a ``concatenate``):
the branch is never taken there, but LLVM's ``select`` evaluates both sides, and an empty
array may have no storage.  While such a buffer is empty its address is a zeroed dummy
with all strides 0 (``safe_address``); the outermost loop loading one is emitted twice
(``version_loop``): a plain copy where the buffers are known non-empty -- every call that
matters, as fast as without the mark -- and the guarded copy for the empty case (twice the
code of that nest: versioning the innermost loops instead kept LLVM from unswitching
the padding rows of ``np.pad``, 1.5x slower).
"""
from __future__ import annotations

from llvmlite import ir

from kdsl.ir import nodes as n
from kdsl.ir.visitor import collect

from . import types as T

_DUMMY = "kd_empty_read"


def nonempty(fn, bufs):
    """An i1 that ``bufs`` all have elements (their symbolic dims > 0), or None if static."""
    b, ok = fn.b, None
    for buf in bufs:
        for s in buf.shape:
            if type(s) is n.Const and s.value > 0:
                continue
            c = b.icmp_signed(">", fn.expr(s), ir.Constant(T.I64, 0))
            ok = c if ok is None else b.and_(ok, c)
    return ok


def safe_address(fn, buf: n.Buffer, base, strides):
    """(base, strides) of ``buf``: a zeroed dummy and zero strides while it is empty."""
    ok = nonempty(fn, [buf])
    if ok is None:
        return base, strides
    module = fn.fn.module
    g = module.globals.get(_DUMMY)
    if g is None:       # one element of any dtype at offset 0 (every stride is 0)
        ty = ir.ArrayType(T.I8, 64)
        g = ir.GlobalVariable(module, ty, _DUMMY)
        g.linkage, g.global_constant, g.align = "internal", True, 64
        g.initializer = ir.Constant(ty, None)
    b, zero = fn.b, ir.Constant(T.I64, 0)
    return b.select(ok, base, g), [b.select(ok, s, zero) for s in strides]


def version_loop(gen, s: n.For, emit) -> bool:
    """Emit loop ``s`` (``emit(s)``) twice when it loads ``empty_reads`` buffers not known
    non-empty: ``if nonempty: plain loop else: guarded loop``.  False if not needed."""
    fn = gen.fn
    if not gen.empty_reads:
        return False
    bufs = []
    for ld in collect(s.body, lambda x: type(x) is n.Load):
        b = ld.buffer
        if b.empty_reads and b not in fn.known_nonempty and b not in fn.versioned \
                and b in fn.bufs and b not in bufs:
            bufs.append(b)
    if not bufs:
        return False
    ok = nonempty(fn, bufs)
    fn.versioned.update(bufs)
    try:
        if ok is None:
            fn.known_nonempty.update(bufs)
            emit(s)
            return True
        with fn.b.if_else(ok) as (plain, guarded):
            with plain:
                fn.known_nonempty.update(bufs)
                emit(s)
                fn.known_nonempty.difference_update(bufs)
            with guarded:       # rare: small code (codegen/stmt.py reads ``cold``)
                fn.cold += 1
                try:
                    emit(s)
                finally:
                    fn.cold -= 1
    finally:
        fn.versioned.difference_update(bufs)
        fn.known_nonempty.difference_update(bufs)
    return True
