"""The state of one trace: stages made so far, shape unification, constraints, names.

Broadcasting two different symbolic sizes assumes they are equal: ``unify``
keeps a substitution (union-find by representative expression), records a
``graph.Constraint`` checked at call time, and ``finalize`` rewrites every
stage with the representatives at the end of the trace.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager

from .. import dtypes as dt
from ..errors import KernelError, ShapeError, SourceLoc, user_location
from ..graph import Constraint
from ..ir import nodes as n
from ..ir.visitor import Mutator, substitute, uses_var

_local = threading.local()
#: ``TRACING[0]``: traces in progress in any thread.  Kernel.__call__ reads it (a list item,
#: no call) to learn cheaply that no trace can be active; ``active()`` then says which.
TRACING = [0]
_count_lock = threading.Lock()


class MemoMutator(Mutator):
    """A Mutator that visits each shared sub-tree once (traced trees are DAGs)."""

    def __init__(self):
        super().__init__()
        self._memo = {}

    def visit(self, node):
        hit = self._memo.get(id(node))
        if hit is not None:
            return hit[1]
        out = super().visit(node)
        self._memo[id(node)] = (node, out)  # keep node alive so its id is not reused
        return out


class TraceContext:
    """Everything one ``trace`` call accumulates."""

    def __init__(self, name: str):
        self.name = name
        self.stages: list = []
        self.constraints: list = []
        self.subst: dict = {}        # Var -> Expr: unified sizes
        self.dim_desc: dict = {}     # Var -> "A.shape[1]" for messages
        self.ivs: dict = {}          # Var -> IterVar of every axis made in this trace
        #: Var -> IterVar: an axis's narrower range where the code being traced runs (a scan's
        #: update runs from step init_steps on)
        self.running: dict = {}
        self.read_locs: dict = {}    # id(TensorRead) -> (SourceLoc, the read): where it was written
        self._names: dict = {}
        self._next: dict = {}        # base -> next suffix to try

    # ------------------------------------------------------------ names
    def unique(self, base: str) -> str:
        """``base``, then ``base_1``, ``base_2``... for repeats."""
        name, k = base, self._next.get(base, 0)
        if k:
            name = f"{base}_{k}"
        while name in self._names:     # taken as another base's suffixed name
            k += 1
            name = f"{base}_{k}"
        self._names[name] = True
        self._next[base] = k + 1       # the next repeat starts here: linear in the repeats
        return name

    # ------------------------------------------------------------ shapes
    def resolve(self, e: n.Expr) -> n.Expr:
        """``e`` with unified sizes replaced by their representatives."""
        for _ in range(64):
            new = substitute(e, self.subst)
            if new is e:
                return e
            e = new
        return e

    def describe(self, e: n.Expr) -> str:
        """A readable name for a size expression (``A.shape[1]``, ``n - 2``)."""
        from ..ir.printer import format_expr as expr_str
        if isinstance(e, n.Var) and e in self.dim_desc:
            return f"{self.dim_desc[e]} ({e.name})"
        return expr_str(e)

    def unify(self, a: n.Expr, b: n.Expr, what: str, loc: SourceLoc | None = None) -> n.Expr:
        """Assume sizes ``a`` and ``b`` are equal; return the representative."""
        ra, rb = self.resolve(a), self.resolve(b)
        if ra == rb:
            return ra
        loc = loc or user_location()
        if isinstance(ra, n.Const) and isinstance(rb, n.Const):
            raise ShapeError(f"{what}: sizes {ra.value} and {rb.value} do not match", loc=loc,
                             hint="make the shapes equal or 1 along that dimension")
        rep = ra
        if isinstance(rb, n.Var) and not uses_var(ra, rb):
            self.subst[rb] = ra
        elif isinstance(ra, n.Var) and not uses_var(rb, ra):
            self.subst[ra] = rb
            rep = rb
        where = f" at {loc.short}: {loc.code}" if loc else ""
        msg = (f"{self.describe(a)} and {self.describe(b)} must be equal "
               f"(assumed by {what}{where})")
        self.constraints.append(Constraint(a, b, msg, loc, hint=_unify_hint(what)))
        return rep

    def finalize(self, stages: list) -> None:
        """Rewrite ``stages`` in place with the representatives of unified sizes."""
        if not self.subst:
            return
        mapping = {v: self.resolve(v) for v in self.subst}
        ivmap = {}

        def new_iv(iv):
            if iv not in ivmap:
                dom = n.Range(substitute(iv.dom.min, mapping), substitute(iv.dom.extent, mapping))
                ivmap[iv] = n.IterVar(iv.var, dom, iv.kind)
            return ivmap[iv]

        class _Final(MemoMutator):
            def visit_Var(self, v):
                return mapping.get(v, v)

            def visit_Reduce(self, r):
                r2 = self.generic(r)
                import dataclasses
                return dataclasses.replace(r2, axes=tuple(new_iv(a) for a in r.axes))

        m = _Final()
        for s in stages:
            s.axes = tuple(new_iv(a) for a in s.axes)
            s.reduce_axes = tuple(new_iv(a) for a in s.reduce_axes)
            s.body = m.visit(s.body)
            shape = tuple(a.dom.extent for a in s.axes)
            for t in getattr(s, "values", (s.output,)):
                t.shape = shape
            s.output.shape = shape


def current() -> TraceContext:
    """The trace in progress; a KernelError outside of one."""
    stack = getattr(_local, "stack", None)
    if not stack:
        raise KernelError("this kdsl operation can only be used while a kernel is traced",
                          hint="call it inside a function decorated with @kd.kernel")
    return stack[-1]


def active() -> TraceContext | None:
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


@contextmanager
def tracing(ctx: TraceContext):
    """Make ``ctx`` the current trace for the duration of the block."""
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    stack.append(ctx)
    with _count_lock:
        TRACING[0] += 1
    try:
        yield ctx
    finally:
        stack.pop()
        with _count_lock:
            TRACING[0] -= 1


def index_const(v: int) -> n.Const:
    return n.const(int(v), dt.index)


def _unify_hint(what: str) -> str:
    """The hint of a call-time size check made by ``unify`` (issue 24 item 13)."""
    if what == "matmul":
        return ("A @ B needs A.shape[-1] == B.shape[-2] (numpy's rule): pass arrays whose inner "
                "sizes agree, or transpose one (B.T)")
    if what.startswith("broadcasting"):
        return ("numpy broadcasting pairs dims from the right; each pair must be equal or one of "
                "them 1: pass arrays whose sizes agree, or add a size-1 axis (x[:, None])")
    return "pass arrays whose sizes agree here"
