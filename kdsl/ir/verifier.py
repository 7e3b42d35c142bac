"""Checks of loop-IR invariants, run after every pass under pytest (DESIGN principle 4).

``verify(func)`` raises ``InternalCompilerError`` naming the broken rule and
printing the offending node: a pass produced IR that no backend may trust.
Rules: Vars used only inside the scope that defines them (For, LetStmt, or
``func.scalars``); Load/Store index counts match the buffer; operand dtypes
agree; no stage-graph nodes (TensorRead, Reduce) remain; no Store to an input;
temporaries used only inside their Allocate; BOUND loops nest sensibly.  A DeviceKernel's
body is checked as loop IR; the rules of GPU form (constant thread extents, no barrier under
divergence, ...) are the GPU layer's, passed in as ``KernelRules`` (``kdsl.gpu.verify``, which
the GPU table's runner uses).
"""
from __future__ import annotations

from typing import Callable, NamedTuple

from .. import dtypes as dt
from ..errors import InternalCompilerError
from . import nodes as n
from .printer import Namer, format_expr, format_stmt
from .visitor import free_vars

_MAX_LINES = 12


def _show(node, namer) -> str:
    """The offending node as text, cut to a few lines."""
    if isinstance(node, n.Expr):
        return format_expr(node, namer)
    lines = format_stmt(node, namer).split("\n")
    if len(lines) > _MAX_LINES:
        lines = lines[:_MAX_LINES] + ["  ..."]
    return "\n".join("    " + x for x in lines)


class _ExprChecker:
    """Checks one expression tree; ``scope`` None skips var checks, ``buffer_ok`` buffer checks."""

    def __init__(self, fail, scope=None, buffer_ok=None, graph: bool = False):
        self.fail, self.scope, self.buffer_ok, self.graph = fail, scope, buffer_ok, graph
        self.table = {
            n.Var: self._var, n.Const: lambda e: None, n.Binary: self._binary,
            n.Compare: self._compare, n.Unary: self._unary, n.Select: self._select,
            n.Cast: lambda e: self(e.a), n.Load: self._load, n.TensorRead: self._tread,
            n.Reduce: self._reduce,
        }

    def __call__(self, e):
        fn = self.table.get(type(e))
        if fn is None:
            self.fail(f"{type(e).__name__} is not an expression", e)
        fn(e)

    def _var(self, v):
        if self.scope is not None and v not in self.scope:
            self.fail(f"variable {v.name!r} is used outside the scope that defines it", v)

    def _binary(self, e):
        self(e.a)
        self(e.b)
        if not (e.a.dtype is e.b.dtype is e.dtype):
            self.fail(f"dtype mismatch in {e.op.value}: {e.a.dtype} and {e.b.dtype} -> {e.dtype}", e)

    def _compare(self, e):
        self(e.a)
        self(e.b)
        if e.a.dtype is not e.b.dtype or not e.dtype.is_bool:
            self.fail(f"dtype mismatch in {e.op.value}: {e.a.dtype} and {e.b.dtype} -> {e.dtype}", e)

    def _unary(self, e):
        self(e.a)
        want = e.dtype.is_bool if e.op is n.UnOp.ISNAN else e.dtype is e.a.dtype
        if e.op is n.UnOp.BITCAST:    # x.view(d): another type of the same size
            want = e.dtype.bits == e.a.dtype.bits and e.dtype is not e.a.dtype
        if not want:
            self.fail(f"dtype mismatch in {e.op.value}: {e.a.dtype} -> {e.dtype}", e)

    def _select(self, e):
        for x in (e.cond, e.t, e.f):
            self(x)
        if not e.cond.dtype.is_bool:
            self.fail(f"select condition of dtype {e.cond.dtype}", e)
        if not (e.t.dtype is e.f.dtype is e.dtype):
            self.fail(f"dtype mismatch in select: {e.t.dtype} and {e.f.dtype} -> {e.dtype}", e)

    def indices(self, buf, idx, node):
        if len(idx) != len(buf.shape):
            self.fail(f"{len(idx)} indices for buffer {buf.name!r} of {len(buf.shape)} dimensions",
                      node)
        for i in idx:
            self(i)
            if not i.dtype.is_int:
                self.fail(f"index of dtype {i.dtype} into buffer {buf.name!r}", node)

    def _load(self, e):
        if self.buffer_ok is not None:
            self.buffer_ok(e.buffer, e)
        if e.dtype is not e.buffer.dtype:
            self.fail(f"load of {e.dtype} from buffer {e.buffer.name!r} of {e.buffer.dtype}", e)
        self.indices(e.buffer, e.indices, e)

    def _tread(self, e):
        if not self.graph:
            self.fail("a TensorRead remains in loop IR", e)
        for i in e.indices:
            self(i)

    def _reduce(self, e):
        if not self.graph:
            self.fail("a Reduce remains in loop IR", e)
        inner = self
        if self.scope is not None:
            inner = _ExprChecker(self.fail, self.scope | {ax.var for ax in e.axes},
                                 self.buffer_ok, self.graph)
        for s in e.sources:
            inner(s)
        if e.condition is not None:
            inner(e.condition)


def verify_expr(e: n.Expr, scope=None, *, graph: bool = False) -> None:
    """Check one expression: dtypes, index counts, no graph nodes unless ``graph``.

    ``scope`` (a set of Vars), when given, is where every used Var must be.
    """
    namer = Namer()

    def fail(msg, node):
        raise InternalCompilerError(f"IR verification failed: {msg}\n  in: {_show(node, namer)}")

    _ExprChecker(fail, None if scope is None else set(scope), graph=graph)(e)


class KernelRules(NamedTuple):
    """A target's rules for GPU-form IR: ``check_kernel(kernel, func, fail)`` on each
    DeviceKernel after its body, ``check_host(func, fail)`` on the root; ``fail(msg)`` raises."""

    check_kernel: Callable
    check_host: Callable


class _Verifier:
    """Walks a LoweredFunc's body with the scopes (vars, allocations, thread loops) in force."""

    def __init__(self, func: n.LoweredFunc, rules: KernelRules | None = None):
        self.func = func
        self.rules = rules
        self.namer = Namer()
        for b in func.buffers:
            self.namer(b)
        self.scope = set(func.scalars)
        self.allocated: set = set()
        self.threads: list = []
        self.stmt = None
        self.table = {
            n.For: self._for, n.IfThenElse: self._if, n.Store: self._store,
            n.Allocate: self._allocate, n.LetStmt: self._let, n.Seq: self._seq,
            n.Barrier: lambda s: None, n.Evaluate: lambda s: self.expr(s.value),
            n.Intrinsic: self._intrinsic, n.DeviceKernel: self._kernel,
            n.CrossThreadReduce: self._cross_thread, n.CarryLoop: self._carry_loop,
            **async_copy_rules(self),
            **{t: self._wmma for t in n.WMMA_STMTS},
        }

    def fail(self, msg, node=None):
        text = f"IR verification failed in {self.func.name}: {msg}"
        if node is not None and isinstance(node, n.Expr):
            text += f"\n  expression: {_show(node, self.namer)}"
        if self.stmt is not None:
            text += f"\n  in statement:\n{_show(self.stmt, self.namer)}"
        raise InternalCompilerError(text)

    def expr(self, e):
        _ExprChecker(self.fail, self.scope, self.buffer_ok)(e)

    def buffer_ok(self, buf, node=None):
        if buf.param:
            if not any(buf is b for b in self.func.buffers):
                self.fail(f"param buffer {buf.name!r} is not a parameter of the function", node)
        elif buf not in self.allocated:
            self.fail(f"buffer {buf.name!r} is used outside its Allocate", node)

    def run(self):
        for b in self.func.buffers:
            if not b.param:
                self.fail(f"function parameter {b.name!r} is not marked param")
            for x in tuple(b.shape) + tuple(b.strides or ()):
                for v in free_vars(x):
                    if v not in self.scope:
                        self.fail(f"shape or stride of {b.name!r} uses {v.name!r}, "
                                  f"which is not among the function's scalars", x)
        self.visit(self.func.body)
        if self.rules is not None:
            self.rules.check_host(self.func, self.fail)

    def visit(self, s):
        fn = self.table.get(type(s))
        if fn is None:
            self.fail(f"{type(s).__name__} is not a statement")
        outer, self.stmt = self.stmt, s
        try:
            fn(s)
        finally:
            self.stmt = outer

    def _bind(self, v, body):
        """Visit ``body`` with ``v`` in scope (rebinding a var in scope is an error)."""
        if v in self.scope:
            self.fail(f"variable {v.name!r} is bound again inside its own scope")
        self.scope.add(v)
        try:
            self.visit(body)
        finally:
            self.scope.discard(v)

    def _for(self, s):
        self.expr(s.min)
        self.expr(s.extent)
        if not (s.min.dtype.is_int and s.extent.dtype.is_int and s.var.dtype.is_int):
            self.fail("loop var, min and extent must be integers")
        if s.kind is n.ForKind.BOUND:
            tag = s.thread
            # nested threadIdx/vthread loops of one tag are the same hardware index
            # (notes/GPU_PLAN.md, the execution model of BOUND loops): only block loops may not nest
            # (a block loop inside a thread loop is the user's schedule: device_kernels reports
            # it in their words, and the GPU rules of kdsl.gpu.verify check every kernel it makes)
            if tag in self.threads and tag.is_block:
                self.fail(f"loop bound to {tag.value} nested inside another {tag.value} loop")
            self.threads.append(tag)
        try:
            self._bind(s.var, s.body)
        finally:
            if s.kind is n.ForKind.BOUND:
                self.threads.pop()

    def _carry_loop(self, s):
        """kd.fori_loop's steps: parameter-like inits/results in scope, loop-bound compact
        carries of their shapes and dtypes, read (cur) and written (nxt) by the body."""
        self.expr(s.min)
        self.expr(s.extent)
        if not (len(s.inits) == len(s.cur) == len(s.nxt) == len(s.results)):
            self.fail("carry loop with differing numbers of inits, carries and results")
        for b, c, x, r in zip(s.inits, s.cur, s.nxt, s.results):
            self.buffer_ok(b)
            self.buffer_ok(r)
            for y in (c, x):
                if y.param or y.strides is not None or y in self.allocated:
                    self.fail(f"carry buffer {y.name!r} must be compact, loop-bound, fresh")
                if y.dtype is not b.dtype or len(y.shape) != len(b.shape):
                    self.fail(f"carry buffer {y.name!r} differs from {b.name!r}")
        bound = set(s.cur) | set(s.nxt)
        self.allocated |= bound
        try:
            self._bind(s.var, s.body)
        finally:
            self.allocated -= bound

    def _if(self, s):
        self.expr(s.cond)
        if not s.cond.dtype.is_bool:
            self.fail(f"if condition of dtype {s.cond.dtype}", s.cond)
        self.visit(s.then)
        if s.otherwise is not None:
            self.visit(s.otherwise)

    def _store(self, s):
        buf = s.buffer
        self.buffer_ok(buf)
        if buf.param and any(buf is b for b in self.func.inputs):
            self.fail(f"store to input buffer {buf.name!r}")
        _ExprChecker(self.fail, self.scope, self.buffer_ok).indices(buf, s.indices, None)
        self.expr(s.value)
        if s.value.dtype is not buf.dtype:
            self.fail(f"store of {s.value.dtype} into buffer {buf.name!r} of {buf.dtype}", s.value)

    def _allocate(self, s):
        chain = []     # a chain of directly nested Allocates is checked in a loop (no recursion)
        try:
            while type(s) is n.Allocate:
                self.stmt = s
                buf = s.buffer
                if buf.param:
                    self.fail(f"allocation of parameter buffer {buf.name!r}")
                if buf in self.allocated:
                    self.fail(f"buffer {buf.name!r} allocated again inside its own Allocate")
                for x in buf.shape:
                    self.expr(x)
                if s.stages < 1:
                    self.fail(f"allocation with {s.stages} stages")
                # TODO: check that a LOCAL buffer used inside threadIdx loops is allocated inside
                # them (per-thread storage); backends place locals per thread today: advisory.
                self.allocated.add(buf)
                chain.append(buf)
                s = s.body
            self.visit(s)
        finally:
            for buf in chain:
                self.allocated.discard(buf)

    def _let(self, s):
        self.expr(s.value)
        if s.var.dtype is not s.value.dtype:
            self.fail(f"let of {s.value.dtype} into variable of {s.var.dtype}", s.value)
        self._bind(s.var, s.body)

    def _seq(self, s):
        for x in s.stmts:
            self.visit(x)

    def _kernel(self, s):
        """A GPU kernel: the loop-IR rules on its body, then the target's kernel rules if given."""
        self.visit(s.body)
        if self.rules is not None:
            self.rules.check_kernel(s, self.func, self.fail)

    def _intrinsic(self, s):
        def walk(a):
            if isinstance(a, n.Buffer):
                self.buffer_ok(a)
            elif isinstance(a, n.Expr):
                self.expr(a)
            elif isinstance(a, tuple):
                for x in a:
                    walk(x)
        walk(s.args)

    def _wmma(self, s):
        """Warp-level matrix statements: fragments of the right scope, live buffers, index counts."""
        if type(s) is n.WgmmaMma:
            self._wgmma(s)
            return
        frags = [(getattr(s, f), getattr(s, f + "_tile") if f in "dabc" else s.tile)
                 for f in ("d", "a", "b", "c", "frag") if hasattr(s, f)]
        want = {"a": n.Scope.WMMA_MATRIX_A, "b": n.Scope.WMMA_MATRIX_B, "c": n.Scope.WMMA_ACCUMULATOR,
                "d": n.Scope.WMMA_ACCUMULATOR}
        for f in ("d", "a", "b", "c"):
            if hasattr(s, f) and getattr(s, f).scope is not want[f]:
                self.fail(f"wmma operand {f} is the {getattr(s, f).scope.value} buffer {getattr(s, f).name!r}")
        for buf, tile in frags:
            self.buffer_ok(buf)
            if not buf.scope.is_fragment or len(buf.shape) != 2 or len(tile) != 2:
                self.fail(f"wmma statement on {buf.scope.value} buffer {buf.name!r} (a 2-d fragment is needed)")
            for x in tile:
                self.expr(x)
        if isinstance(s, (n.WmmaFill, n.WmmaStore)) and s.frag.scope is not n.Scope.WMMA_ACCUMULATOR:
            self.fail(f"wmma fill/store of the {s.frag.scope.value} fragment {s.frag.name!r}")
        mem = getattr(s, "src", None) or getattr(s, "dst", None)
        if mem is not None:
            self.buffer_ok(mem)
            if mem.scope.is_fragment or len(s.origin) != len(mem.shape) or len(mem.shape) < 2:
                self.fail(f"wmma load/store of memory buffer {mem.name!r} with {len(s.origin)} indices")
            if isinstance(s, n.WmmaStore) and mem.param and any(mem is b for b in self.func.inputs):
                self.fail(f"wmma store to input buffer {mem.name!r}")
            converting = isinstance(s, n.WmmaStore) and s.frag.dtype is dt.float32 and \
                mem.dtype in (dt.float16, dt.bfloat16)
            if mem.dtype is not s.frag.dtype and not converting:
                self.fail(f"wmma load/store between {mem.dtype} {mem.name!r} and {s.frag.dtype} {s.frag.name!r}")
            for x in tuple(s.origin) + tuple(s.extents):
                self.expr(x)
        if isinstance(s, n.WmmaFill):
            self.expr(s.value)
    def _wgmma(self, s):
        """A shared-operand product: accumulator fragments, shared 16-bit operands indexed in full."""
        for f, tile in (("d", s.d_tile), ("c", s.c_tile)):
            buf = getattr(s, f)
            self.buffer_ok(buf)
            if buf.scope is not n.Scope.WMMA_ACCUMULATOR or len(buf.shape) != 2 or len(tile) != 2:
                self.fail(f"wgmma operand {f} is the {buf.scope.value} buffer {buf.name!r} (a 2-d accumulator is needed)")
            for x in tile:
                self.expr(x)
        for f in ("a", "b"):
            buf, origin = getattr(s, f), getattr(s, f + "_origin")
            self.buffer_ok(buf)
            if buf.scope is not n.Scope.SHARED or len(origin) != len(buf.shape) or len(buf.shape) < 2:
                self.fail(f"wgmma operand {f} is the {buf.scope.value} buffer {buf.name!r} indexed with "
                          f"{len(origin)} indices (a shared tile is needed)")
            if buf.dtype is not s.a.dtype or buf.dtype not in (dt.float16, dt.bfloat16):
                self.fail(f"wgmma operands of {s.a.dtype} and {buf.dtype}")
            for x in origin:
                self.expr(x)
        if s.d.dtype is not dt.float32 or s.shape[0] != 16 or s.shape[2] != 16 or s.shape[1] % 8:
            self.fail(f"wgmma of shape {s.shape} into {s.d.dtype}")

    def _cross_thread(self, s):
        """One value and one LOCAL (1,) result per combiner value, inside thread loops of every
        reduced tag (distinct threadIdx tags)."""
        comb = s.combiner
        if not (len(s.values) == len(s.results) == len(comb.result)):
            self.fail(f"cross-thread reduce with {len(s.values)} values and {len(s.results)} results "
                      f"for a combiner of {len(comb.result)}")
        if not s.threads or len(set(s.threads)) != len(s.threads) or not all(t.is_thread for t in s.threads):
            self.fail(f"cross-thread reduce over {[t.value for t in s.threads]}: distinct threadIdx tags needed")
        for t in s.threads:
            if t not in self.threads:
                self.fail(f"cross-thread reduce over {t.value} outside a loop bound to it")
        for v, b, r in zip(s.values, s.results, comb.result):
            self.expr(v)
            self.buffer_ok(b)
            if b.scope is not n.Scope.LOCAL or len(b.shape) != 1 or not (
                    isinstance(b.shape[0], n.Const) and b.shape[0].value == 1):
                self.fail(f"cross-thread reduce result {b.name!r} is not a LOCAL buffer of shape (1,)")
            if v.dtype is not r.dtype or b.dtype is not r.dtype:
                self.fail(f"cross-thread reduce value of {v.dtype} into {b.name!r} of {b.dtype} "
                          f"(combiner value of {r.dtype})", v)


def verify(func: n.LoweredFunc, rules: KernelRules | None = None) -> None:
    """Raise InternalCompilerError if ``func`` breaks a loop-IR invariant (see module doc);
    ``rules``: the GPU-form rules to apply to DeviceKernels and the root (``kdsl.gpu.verify``)."""
    _Verifier(func, rules).run()


def async_copy_rules(v) -> dict:
    """Verifier rules of AsyncCopy (a store into shared memory of a load of global memory,
    with a bool predicate), CommitGroup and WaitGroup (pending >= 0)."""
    def copy(s):
        v._store(n.Store(s.buffer, s.indices, s.value))
        if s.buffer.scope is not n.Scope.SHARED:
            v.fail(f"asynchronous copy into {s.buffer.scope.value} buffer {s.buffer.name!r} (shared only)")
        if not (isinstance(s.value, n.Load) and s.value.buffer.scope is n.Scope.GLOBAL):
            v.fail("an asynchronous copy's value must be a load of global memory", s.value)
        if s.predicate is not None:
            v.expr(s.predicate)
            if not s.predicate.dtype.is_bool:
                v.fail(f"asynchronous copy predicate of dtype {s.predicate.dtype}", s.predicate)

    def wait(s):
        if not isinstance(s.pending, int) or s.pending < 0:
            v.fail(f"wait_group({s.pending!r}): pending must be an int >= 0")

    return {n.AsyncCopy: copy, n.CommitGroup: lambda s: None, n.WaitGroup: wait, n.WgmmaWait: wait,
            n.WgmmaCommit: lambda s: None}
