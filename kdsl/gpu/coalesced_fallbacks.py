"""coalesced_fallbacks: a block's cooperative vector copy gets a scalar alternative in which
consecutive threads copy consecutive elements (an IR pass of the GPU table).

A cooperative copy into shared memory deals ``W``-element vectors to the block's threads
(``for ty, tx (threads): for v in range(W) (vectorized): async_copy(X[..], A[..])``); a backend
copies each vector with one 16-byte access where the addresses are aligned.  Where they are
not (rows of an odd length: a 4095 x 1023 matrix), each thread copies its vector element by
element, and one instruction of a warp then touches ``32`` elements ``W`` apart: for a GEMM's
A tile (8-element rows, two vectors per row) 16 rows, 16 cache lines, where the vector copy
took 16 lines for four times the data.  The alternative deals the same elements anew: in
turn ``j < W`` thread ``t`` copies element ``j*T + t`` of the vectors' order (``T`` threads),
i.e. lane ``(j*T + t) % W`` of the vector that thread ``(j*T + t) // W`` copies in the
vector form, so a warp's instruction covers 8 whole vectors (4 rows of 32 bytes).

    if <alternatives, True>:  the vector copy as it was (right everywhere)
    else:                     the same elements, dealt element by element

The ``if`` is marked ``alternatives`` with a true condition: executors may run either branch
(interpreters run the first); the cuda codegen runs the first where the kernel-uniform
alignment tests of its vector accesses hold and the second elsewhere.

Valid only where every thread of the block runs the copy once: the copy's thread loops are
its own nest's, start at 0 and have the block's extents, together they bind every axis of the
block wider than 1, nothing between them and the copy is conditional, the enclosing thread
loops have the block's extents too and no enclosing ``if`` or loop bound depends on a thread
index (the copies of a tiled GEMM); any other copy is left alone.  Barriers and waits are
unchanged: a cp.async group completes per thread, and a barrier follows the waits before any
read of the tile, so which thread copied an element does not matter.

Assumes: GPU-form loop IR (after ``interior_blocks`` and ``full_thread_tiles``: every copy of a
versioned body gets its alternative).
Guarantees: the same elements copied, each once, with the same values and predicates.
"""
from __future__ import annotations

import dataclasses

from ..ir import make as mk
from ..ir import nodes as n
from ..ir.simplify import simplify
from ..ir.visitor import Mutator, any_statement, free_vars, substitute


def _is_thread(s) -> bool:
    return type(s) is n.For and s.thread is not None and s.thread.is_thread


def _const(e):
    return e.value if type(e) is n.Const and e.dtype.is_int else None


def _block_extents(body) -> dict:
    """ThreadTag -> the widest constant extent of a loop bound to it under ``body``."""
    out: dict = {}

    def see(x):
        if _is_thread(x):
            ext = _const(x.extent)
            out[x.thread] = max(out.get(x.thread, 0), ext if ext is not None else 1 << 30)
        return False
    any_statement(body, see)
    return out


#: thread tags from the fastest-varying (consecutive lanes of a warp) to the slowest
_ORDER = (n.ThreadTag.THREAD_X, n.ThreadTag.THREAD_Y, n.ThreadTag.THREAD_Z)


def _copy_nest(s):
    """(thread loops outermost first, vectorized loop, AsyncCopy) of a cooperative vector copy
    ``s``, or None."""
    loops = []
    while _is_thread(s):
        loops.append(s)
        s = s.body
    if (not loops or type(s) is not n.For or s.kind is not n.ForKind.VECTORIZED
            or _const(s.extent) is None or _const(s.min) != 0 or type(s.body) is not n.AsyncCopy):
        return None
    return loops, s, s.body


class _Fallbacks(Mutator):
    def __init__(self):
        super().__init__()
        self.block: dict | None = None    # tag -> extent, inside a block's body
        self.thread_vars: set = set()     # thread-loop vars in scope
        self.uniform = True               # no enclosing condition depends on a thread index

    def visit_For(self, s):
        if s.thread is not None and s.thread.is_block:
            if any_statement(s.body, lambda x: type(x) is n.For and x.thread is not None and x.thread.is_block):
                return self.generic(s)
            saved = self.block
            self.block = _block_extents(s.body)
            try:
                return self.generic(s)
            finally:
                self.block = saved
        if self.block is None:
            return self.generic(s)
        if self.uniform and _is_thread(s):
            got = self._alternative(s)
            if got is not None:
                return got
        saved = (self.thread_vars, self.uniform)
        if _is_thread(s):
            self.thread_vars = self.thread_vars | {s.var}
            self.uniform = self.uniform and _const(s.min) == 0 and _const(s.extent) == self.block.get(s.thread)
        else:
            self.uniform = self.uniform and not (free_vars(s.min) | free_vars(s.extent)) & self.thread_vars
        try:
            return self.generic(s)
        finally:
            self.thread_vars, self.uniform = saved

    def visit_IfThenElse(self, s):
        if self.block is None or not free_vars(s.cond) & self.thread_vars:
            return self.generic(s)
        saved = self.uniform
        self.uniform = False
        try:
            return self.generic(s)
        finally:
            self.uniform = saved

    def visit_LetStmt(self, s):
        saved = self.thread_vars
        if free_vars(s.value) & self.thread_vars:      # a thread-dependent name: treat as a thread var
            self.thread_vars = self.thread_vars | {s.var}
        try:
            return self.generic(s)
        finally:
            self.thread_vars = saved

    def _alternative(self, s):
        got = _copy_nest(s)
        if got is None:
            return None
        loops, vec, copy = got
        tags = [f.thread for f in loops]
        wide = {t for t, e in self.block.items() if e > 1}
        if (len(set(tags)) != len(tags) or not wide <= set(tags)
                or any(_const(f.min) != 0 or _const(f.extent) != self.block.get(f.thread) for f in loops)):
            return None
        own = {f.var for f in loops}
        if (free_vars(copy) - own - {vec.var}) & self.thread_vars:
            return None        # reads another thread index: the dealing would not follow it
        return n.IfThenElse(mk.as_expr(True), s, _redealt(loops, vec, copy), alternatives=True)


def _redealt(loops, vec, copy):
    """The copy nest dealt element by element (module docstring)."""
    by_tag = {f.thread: f for f in loops}
    order = [by_tag[t] for t in _ORDER if t in by_tag]          # fastest first
    fresh = {f.var: n.var(f.var.name + "_c", f.var.dtype) for f in loops}
    tid, stride = None, 1
    for f in order:
        term = mk.mul(fresh[f.var], stride) if stride > 1 else fresh[f.var]
        tid = term if tid is None else mk.add(tid, term)
        stride *= _const(f.extent)
    w = _const(vec.extent)
    j = n.var(vec.var.name + "_j", vec.var.dtype)
    q = mk.add(mk.mul(j, stride), tid)                 # element q of the vectors' order
    owner = mk.floordiv(q, w)
    value = {vec.var: mk.mod(q, w)}
    inner = 1
    for f in order:
        ext = _const(f.extent)
        value[f.var] = mk.mod(mk.floordiv(owner, inner), ext) if inner > 1 else mk.mod(owner, ext)
        inner *= ext
    ranges = {j: (0, w - 1), **{fresh[f.var]: (0, _const(f.extent) - 1) for f in loops}}
    value = {v: simplify(e, ranges) for v, e in value.items()}
    body = n.For(j, mk.as_expr(0), mk.as_expr(w), n.ForKind.UNROLLED,
                 _subst_copy(copy, value, ranges))
    for f in reversed(loops):
        body = dataclasses.replace(f, var=fresh[f.var], body=body)
    return body


def _subst_copy(c: n.AsyncCopy, value: dict, ranges: dict) -> n.AsyncCopy:
    def sub(e):
        return simplify(substitute(e, value), ranges)
    return dataclasses.replace(c, indices=tuple(sub(i) for i in c.indices), value=sub(c.value),
                               predicate=None if c.predicate is None else sub(c.predicate))


class _Vector(Mutator):
    def visit_IfThenElse(self, s):
        if is_copy_alternative(s):
            return self.visit(s.otherwise)
        return self.generic(s)


def is_copy_alternative(s) -> bool:
    """Whether IfThenElse ``s`` is one this pass made (a true ``alternatives`` if around a
    copy: no barrier inside)."""
    return (type(s) is n.IfThenElse and s.alternatives and type(s.cond) is n.Const and s.cond.value
            and s.otherwise is not None and not any_statement(s.then, lambda x: type(x) is n.Barrier))


def scalar_copies(stmt: n.Stmt) -> n.Stmt:
    """``stmt`` with every alternative this pass made replaced by its element-by-element copy
    (what unaligned arrays run on a GPU), for executors that run the first branch."""
    return _Vector().visit(stmt)


def coalesced_fallbacks(func: n.LoweredFunc) -> n.LoweredFunc:
    """The pass (see the module docstring)."""
    if not any_statement(func.body, lambda x: type(x) is n.For and x.kind is n.ForKind.VECTORIZED
                         and type(x.body) is n.AsyncCopy):
        return func
    body = _Fallbacks().visit(func.body)
    return func if body is func.body else dataclasses.replace(func, body=body)
