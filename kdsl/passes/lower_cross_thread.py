"""lower_cross_thread: cross-thread reductions as shared-memory phases (an IR pass).

Assumes: any loop IR; a ``CrossThreadReduce`` sits inside BOUND loops of every tag it
reduces over, under control flow uniform over each reduction group.
Guarantees: no ``CrossThreadReduce`` is left.  Each one becomes, at block level:

    allocate B.red: T[ext of every enclosing threadIdx loop] shared   # outside the thread loops
      for <thread loops>: <what came before>; B.red[ty, tx] = value   # publish
      barrier
      for <thread loops>: B.v[0] = identity                           # fold: every thread reads
                          for t in range(ext_x): B.v[0] = comb(B.v[0], B.red[ty, t])
                          <what came after>

by fissioning the enclosing thread loops at the statement (thread loops are foralls; a
serial loop between them and the statement is hoisted out of them, with a barrier closing
each iteration).  Allocations, lets and ifs on the way are repeated around each phase;
a buffer allocated on the way and used on both sides of the split is an
InternalCompilerError.  Sequential executors (interpreter, CPU) need this pass; GPU
targets keep the statement and lower it to warp shuffles.  Without the statement, a no-op.
"""
from __future__ import annotations

import dataclasses

from ..errors import InternalCompilerError
from ..ir import make as mk
from ..ir import nodes as n
from ..ir.visitor import Mutator, any_statement, collect, collect_stmts, free_vars
from .guards import combine_store, seq

_ORDER = (n.ThreadTag.THREAD_Z, n.ThreadTag.THREAD_Y, n.ThreadTag.THREAD_X)   # fold: x fastest


def _has_ctr(s) -> bool:
    return any_statement(s, lambda x: type(x) is n.CrossThreadReduce)


def _uses(s, b: n.Buffer) -> bool:
    """Whether ``s`` reads, writes or allocates ``b``."""
    def hit(x):
        if isinstance(x, (n.Load, n.Store, n.AsyncCopy, n.Allocate)):
            return x.buffer is b
        if isinstance(x, n.CrossThreadReduce):
            return any(r is b for r in x.results)
        if isinstance(x, n.Intrinsic):
            return any(a is b for a in x.args)
        return False
    return bool(collect(s, hit))


def _is_thread(s) -> bool:
    return isinstance(s, n.For) and s.thread is not None and s.thread.is_thread


def _wrap(ctx: list, s: n.Stmt) -> n.Stmt:
    """``s`` inside the wrappers ``ctx`` (outermost first); allocations and lets it does not
    use are left out."""
    for w in reversed(ctx):
        if isinstance(w, n.For):
            s = dataclasses.replace(w, body=s)
        elif isinstance(w, n.Allocate):
            if _uses(s, w.buffer):
                s = dataclasses.replace(w, body=s)
        elif isinstance(w, n.LetStmt):
            if w.var in free_vars(s):
                s = dataclasses.replace(w, body=s)
        else:   # IfThenElse without else
            s = n.IfThenElse(w.cond, s)
    return s


class _Fission:
    """Splits one outermost thread loop holding cross-thread reductions into phases."""

    def __init__(self):
        self.shared: list = []       # the shared buffers to allocate at block level

    def pieces(self, s, ctx: list) -> list:
        """``s`` as a list of ("t", stmt): thread-level, still to be wrapped by ``ctx``, and
        ("b", stmt): block-level (a barrier, a hoisted serial loop)."""
        if not _has_ctr(s):
            return [("t", s)]
        t = type(s)
        if t is n.CrossThreadReduce:
            return self.reduce(s, ctx)
        if t is n.Seq:
            out = []
            for x in s.stmts:
                out.extend(self.pieces(x, ctx))
            return _merge(out)
        if _is_thread(s):
            return [(k, dataclasses.replace(s, body=x) if k == "t" else x)
                    for k, x in self.pieces(s.body, ctx + [s])]
        if t is n.For:
            return [("b", self.hoist(s, ctx))]
        if t is n.Allocate:
            sub = self.pieces(s.body, ctx + [s])
            if sum(_uses(x, s.buffer) for _, x in sub) > 1:
                raise InternalCompilerError(
                    f"lower_cross_thread: buffer {s.buffer.name!r} is allocated inside the thread loops "
                    "around a cross-thread reduction and used on both sides of it")
            return [(k, dataclasses.replace(s, body=x) if k == "t" and _uses(x, s.buffer) else x)
                    for k, x in sub]
        if t is n.LetStmt:
            self._pure(s.value, s.body, f"let {s.var.name}")
            return [(k, dataclasses.replace(s, body=x) if k == "t" and s.var in free_vars(x) else x)
                    for k, x in self.pieces(s.body, ctx + [s])]
        if t is n.IfThenElse and s.otherwise is None:
            self._pure(s.cond, s.then, "an if condition")
            return [(k, n.IfThenElse(s.cond, x) if k == "t" else x)
                    for k, x in self.pieces(s.then, ctx + [s])]
        raise InternalCompilerError(f"lower_cross_thread: a cross-thread reduction under a "
                                    f"{t.__name__} inside thread loops")

    @staticmethod
    def _pure(e, body, what):
        """``e`` is repeated in every phase: it must not read what ``body`` writes."""
        read = {x.buffer for x in collect(e, lambda x: isinstance(x, n.Load))}
        wrote = {x.buffer for x in collect_stmts(body, lambda x: isinstance(x, n.Store))}
        if read & wrote:
            raise InternalCompilerError(f"lower_cross_thread: {what} around a cross-thread reduction "
                                        "reads memory written inside it")

    def hoist(self, s: n.For, ctx: list) -> n.Stmt:
        """A serial loop between the thread loops and a reduction, run at block level: each
        iteration runs its phases in every thread, a barrier closing it (the next iteration
        overwrites the shared buffers)."""
        bound = set()
        for w in ctx:
            bound |= {w.var} if isinstance(w, (n.For, n.LetStmt)) else set()
        if (free_vars(s.min) | free_vars(s.extent)) & bound:
            raise InternalCompilerError(f"lower_cross_thread: the bounds of loop {s.var.name} around a "
                                        "cross-thread reduction differ between threads")
        sub = self.pieces(s.body, ctx)
        body = seq([_wrap(ctx, x) if k == "t" else x for k, x in sub] + [n.Barrier()])
        return dataclasses.replace(s, body=body)

    def reduce(self, s: n.CrossThreadReduce, ctx: list) -> list:
        loops = [w for w in ctx if _is_thread(w)]
        by_tag = {f.thread: f for f in loops}
        missing = [t.value for t in s.threads if t not in by_tag]
        if missing:
            raise InternalCompilerError(f"lower_cross_thread: a cross-thread reduction over {missing} "
                                        "outside the loops bound to them")
        shape = tuple(f.extent for f in loops)
        own = tuple(mk.sub(f.var, f.min) for f in loops)
        stem = s.results[0].name.split(".")[0]
        many = len(s.results) > 1
        reds = [n.Buffer(f"{stem}.red{j}" if many else f"{stem}.red", r.dtype, shape, None, n.Scope.SHARED)
                for j, r in enumerate(s.results)]
        self.shared.extend(reds)
        publish = seq([n.Store(b, own, v) for b, v in zip(reds, s.values)])
        zero = (mk.as_expr(0),)
        folded = [t for t in _ORDER if t in s.threads]
        fvars = {t: n.var(f"{by_tag[t].var.name}.t") for t in folded}
        at = tuple(fvars[f.thread] if f.thread in fvars else o for f, o in zip(loops, own))
        cur = [n.Load(r.dtype, r, zero) for r in s.results]
        parts = [n.Load(b.dtype, b, at) for b in reds]
        fold = combine_store(s.combiner, cur, parts, lambda j, v: n.Store(s.results[j], zero, v))
        if s.scan:      # an inclusive scan: fold the members up to this thread (x fastest)
            lin_at, lin_own = mk.as_expr(0), mk.as_expr(0)
            for t in folded:
                f = by_tag[t]
                lin_at = mk.add(mk.mul(lin_at, f.extent), fvars[t])
                lin_own = mk.add(mk.mul(lin_own, f.extent), mk.sub(f.var, f.min))
            fold = n.IfThenElse(mk.lt(lin_at, mk.add(lin_own, 1)), fold)
        for t in reversed(folded):
            fold = n.For(fvars[t], mk.as_expr(0), by_tag[t].extent, n.ForKind.SERIAL, fold)
        init = seq([n.Store(r, zero, i) for r, i in zip(s.results, s.combiner.identity)])
        return [("t", publish), ("b", n.Barrier()), ("t", seq([init, fold]))]


def _merge(items: list) -> list:
    """Adjacent thread-level pieces joined into one."""
    out = []
    for k, x in items:
        if k == "t" and out and out[-1][0] == "t":
            out[-1] = ("t", seq([out[-1][1], x]))
        else:
            out.append((k, x))
    return out


class _Lower(Mutator):
    """Finds the outermost thread loops holding a cross-thread reduction (block level)."""

    def __init__(self):
        super().__init__()
        self.loops = 0            # enclosing non-block loops: a group may run again in a block

    def visit_For(self, s: n.For):
        if _is_thread(s) and _has_ctr(s):
            f = _Fission()
            body = seq([x for _, x in f.pieces(s, [])] + ([n.Barrier()] if self.loops else []))
            for b in reversed(f.shared):
                body = n.Allocate(b, body)
            return body
        block = s.thread is not None and s.thread.is_block
        self.loops += not block
        try:
            return self.generic(s)
        finally:
            self.loops -= not block

    def visit_CrossThreadReduce(self, s):
        raise InternalCompilerError("lower_cross_thread: a cross-thread reduction outside thread loops")


def lower_cross_thread(func: n.LoweredFunc) -> n.LoweredFunc:
    """The ``lower_cross_thread`` pass (see the module docstring); ``func`` itself when it
    has no cross-thread reduction."""
    if not _has_ctr(func.body):
        return func
    return dataclasses.replace(func, body=_Lower().visit(func.body))
