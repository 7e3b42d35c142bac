"""sync: barriers between the threads of a block that exchange shared memory (an IR pass).

A *kernel* is an outermost loop bound to blockIdx (or a threadIdx loop under none); inside
it, loops bound to threadIdx are foralls over the threads of the block and every loop of
one tag is the same hardware index (notes/GPU_PLAN.md, the execution model of BOUND loops).
The pass walks each kernel in program order keeping the accesses to shared buffers (and
global temporaries allocated in the kernel) made since the last barrier on some path, and
puts ``Barrier()`` right before a statement whose accesses conflict with them:

- RAW: it reads an element that another thread may have written;
- WAR / WAW: it writes an element that another thread may have read or written; across the
  iterations of an enclosing serial loop too (the next K tile overwrites a tile still being
  read: the body is walked again from its own end state until nothing changes).

Two accesses of one buffer conflict unless both read, or their index maps keep every
thread to its own elements.  The rule (conservative: when unsure, a barrier): each index is
put in linear form over the canonical thread indices ``tid.x/y/z`` (a thread loop's variable
is ``tid + min``), *stable* terms (block indices, shapes: constant in a block) and *varying*
terms (serial and vthread loops and lets inside the kernel, bounded by their ranges to a
constant window ``[lo, hi]``; a loop of run-time extent is a digit of unknown count).  The two accesses are separated when, in every dimension,
their thread coefficients and stable parts are equal, and the dimensions where the thread
terms and window form a mixed radix (sorted coefficients ``c1 >= width``, ``c(k+1) >= ck *
extent(k)``: distinct threads, distinct elements) cover every thread tag whose block extent
exceeds 1.  Anything else (an index non-linear in a thread index, a data-dependent index, a
window that is not a constant) conflicts.  A barrier goes before the outermost statement of
the current sequence whose accesses conflict (before a loop rather than in its body), so it
runs as rarely as the program allows; an existing barrier clears the state.

Before that, ``single_thread.pin_unspread`` puts on one thread each store to shared or global
memory that a block's threads would all repeat (a stage attached inside a block whose loops
do not bind every thread index of the block: issue 24); an access inside such a loop of one
iteration bound to a tag (*pinned*) is by thread 0 along that tag, so two pinned accesses
never conflict, and a tag of one thread (block extent 1) separates nothing and needs nothing.

Cost: the walk revisits a serial loop's body until its pending set stops growing, and a
sorting network repeats a few index expressions hundreds of times, so accesses are interned
per kernel (one object per distinct buffer, indices after substitution, loop ranges and
pinning) and an access is decomposed only when a conflict test needs it, once; accesses
pinned to one thread, or whose index reads memory, never are.

Buffers filled by ``AsyncCopy`` (``software_pipeline``'s rings) are left to that pass, which
places their waits and barriers.

Assumes: loop IR after ``simplify`` and ``software_pipeline`` (index arithmetic canonical);
thread extents constant in a kernel; loop bounds inside kernels uniform across the threads of a block.
Guarantees: the same program (sequential executors ignore barriers) in which no two threads
of a block touch one element of a shared buffer, one of them writing, without a barrier
between them, as far as the rule above can tell; barriers sit at block level or inside
thread loops, never under a condition that depends on a thread index nor in a thread loop
shorter than the block (``kdsl.gpu.predicate`` sinks such conditions onto the statements
around the barrier).  A no-op on functions without loops bound to blockIdx/threadIdx.
"""
from __future__ import annotations

import dataclasses

from ..ir import nodes as n
from ..ir import warp_nodes
from ..ir.bounds import Unbounded, bound
from ..ir.simplify import Linear, linear, simplify
from ..ir.visitor import any_statement, collect, collect_stmts, free_vars, substitute
from .predicate import kernel_thread_extents, predicate_kernel
from .single_thread import pin_unspread

#: the canonical thread indices: every threadIdx loop's variable is one of them plus its min
TID = {t: n.var(f"tid.{t.value[-1]}") for t in n.ThreadTag if t.is_thread}
_TID_TAG = {v: t for t, v in TID.items()}


def _is_kernel_loop(s) -> bool:
    return type(s) is n.For and s.thread is not None and (s.thread.is_block or s.thread.is_thread)


@dataclasses.dataclass(frozen=True)
class _Ctx:
    """Where a statement runs inside a kernel: substitutions for thread and let variables,
    the ranges of varying (serial loop) variables."""

    subst: dict
    ranges: dict
    pinned: frozenset = frozenset()     # thread tags fixed to thread 0 (a loop of one iteration)
    rkey: frozenset = frozenset()       # ``ranges`` as a hashable key (memo of decompositions)
    skey: frozenset = frozenset()       # ``subst`` as a hashable key (memo of leaf accesses)

    def with_thread(self, s: n.For):
        tid = TID[s.thread]
        value = tid if type(s.min) is n.Const and s.min.value == 0 else n.Binary(s.var.dtype, n.BinOp.ADD,
                                                                                 tid, s.min)
        one = type(s.extent) is n.Const and s.extent.value == 1
        pinned = self.pinned | {s.thread} if one else self.pinned - {s.thread}
        subst = {**self.subst, s.var: value}
        return _Ctx(subst, self.ranges, pinned, self.rkey, frozenset(subst.items()))

    def with_loop(self, s: n.For):
        lo, ext = substitute(s.min, self.subst), substitute(s.extent, self.subst)
        ranges = {**self.ranges, s.var: n.Range(lo, ext)}
        # Range compares by identity: the key holds its (structurally compared) ends
        rkey = frozenset((v, r.min, r.extent) for v, r in ranges.items())
        return _Ctx(self.subst, ranges, self.pinned, rkey, self.skey)

    def with_let(self, s: n.LetStmt):
        subst = {**self.subst, s.var: substitute(s.value, self.subst)}
        return _Ctx(subst, self.ranges, self.pinned, self.rkey, frozenset(subst.items()))


class _Access:
    """One access pattern: a buffer, whether it writes, its indices with the thread and let
    substitutions done (None: unknown), the ranges of the varying variables they may use and
    the thread tags it is pinned to thread 0 along.  Its per-dimension decomposition
    (``_Kernel.dims``) is computed only when a conflict test needs it (two accesses pinned to
    one thread never do).  Interned per kernel (``_Kernel.access``): equal patterns are one
    object, compared by identity in the pending sets."""

    __slots__ = ("buffer", "write", "indices", "ctx", "pinned")

    def __init__(self, buffer, write, indices, ctx, pinned):
        self.buffer, self.write, self.indices, self.ctx, self.pinned = buffer, write, indices, ctx, pinned


def _is_load(x) -> bool:
    return isinstance(x, n.Load)


class _Kernel:
    """Barrier insertion in one kernel (see the module docstring)."""

    def __init__(self, tracked, extents):
        self.tracked = tracked          # buffers whose accesses are checked
        self.extents = extents          # ThreadTag -> int block extent (None: not constant)
        self._dims_memo: dict = {}      # (buffer, indices, ranges key) -> dims
        self._simplify_memo: dict = {}  # Expr -> simplify(Expr)
        self._interned: dict = {}       # access key -> its _Access
        self._separated_memo: dict = {}  # (_Access, _Access) -> separated()
        self._leaf_memo: dict = {}      # (id(stmt), ctx keys) -> (stmt, its accesses)
        self._load_memo: dict = {}      # id(expr) -> (expr, its tracked Loads): loop bodies are
        #                                 summarised again each time their pending set grows
        self._summary_memo: dict = {}   # (id(stmt), ctx keys) -> (stmt, summary): each statement
        #                                 is summarised again at every level of the walk above it

    def access(self, buffer, write, indices, ctx, pinned=frozenset()) -> _Access:
        """The access of ``buffer`` at ``indices`` (None: unknown) as seen from ``ctx``; an
        index that reads memory (a gather, a sorting network's data-dependent index) is
        unknown.  One object per distinct pattern of the kernel."""
        if indices is not None:
            indices = tuple(substitute(e, ctx.subst) for e in indices)
            if any(collect(e, _is_load) for e in indices):
                indices = None
        key = (buffer, write, indices, None if indices is None else ctx.rkey, pinned)
        acc = self._interned.get(key)
        if acc is None:
            acc = self._interned[key] = _Access(buffer, write, indices, ctx, pinned)
        return acc

    # ------------------------------------------------------------------ index maps
    def dims(self, acc: _Access):
        """The access pattern of ``acc`` into its buffer: its decomposition per dimension
        and, for a constant shape, of the row-major flat index (which merges what fusing then
        splitting a copy's loops left, ``(x // c)*c + x % c``), or None when unknown.  A pure
        function of the access's key: computed once per distinct pattern of the kernel (a
        sorting network repeats each of its few index expressions hundreds of times)."""
        if acc.indices is None:
            return None
        key = (acc.buffer, acc.indices, acc.ctx.rkey)
        if key in self._dims_memo:
            return self._dims_memo[key]
        indices, ranges, buffer = acc.indices, acc.ctx.ranges, acc.buffer
        per_dim, flat = self._decompose(indices, ranges), None
        if indices and all(type(d) is n.Const for d in buffer.shape):
            e = indices[0]
            for d, i in zip(buffer.shape[1:], indices[1:]):
                e = n.Binary(e.dtype, n.BinOp.ADD, n.Binary(e.dtype, n.BinOp.MUL, e, n.Const(e.dtype, d.value)), i)
            flat = self._decompose((e,), ranges)
        out = None if per_dim is None and flat is None else (per_dim, flat)
        self._dims_memo[key] = out
        return out

    def _simplify(self, e):
        """``simplify(e)`` (no ranges: a pure function of ``e``), once per distinct ``e``."""
        r = self._simplify_memo.get(e)
        if r is None:
            r = self._simplify_memo[e] = simplify(e)
        return r

    def _decompose(self, indices, varying):
        """Per index: (thread coefficients, stable part, digits, window) where the index is
        ``stable + sum(c * tid) + sum(d * v) + w`` with each digit ``(d, count)`` a varying
        variable over ``[0, count)`` (its start folded into the window) and ``w`` in the
        window ``(lo, hi)`` (whatever else varies, bounded); None when not of that form.
        ``indices`` have the thread and let substitutions done; ``varying``: the ranges of
        the serial loops around them."""
        out = []
        for e in indices:
            if not e.dtype.is_int:
                return None
            lin = linear(self._simplify(e))
            tid, base, rest = {}, Linear(lin.dtype, const=lin.const), Linear(lin.dtype)
            digits, off = set(), 0
            for t, c in lin.terms.items():
                if t in _TID_TAG:
                    tid[_TID_TAG[t]] = c
                    continue
                fv = free_vars(t)
                if any(v in _TID_TAG for v in fv):
                    return None             # non-linear in a thread index
                if not any(v in varying for v in fv):
                    base.terms[t] = c
                    continue
                r = varying.get(t)
                if r is not None and type(r.min) is n.Const and type(r.extent) is n.Const:
                    if r.extent.value > 1:
                        digits.add((abs(c), int(r.extent.value)))
                    off += c * int(r.min.value) + (c * (int(r.extent.value) - 1) if c < 0 else 0)
                elif r is not None and type(r.min) is n.Const and c > 0:
                    # a loop of run-time extent (a row of symbolic length): a digit of unknown
                    # count, which separates threads when its coefficient is the largest
                    digits.add((c, None))
                    off += c * int(r.min.value)
                else:
                    rest.terms[t] = c
            lo = hi = 0
            if rest.terms:
                try:
                    lo, hi = (self._simplify(x) for x in bound(rest.to_expr(), varying))
                except Unbounded:
                    return None
                if type(lo) is not n.Const or type(hi) is not n.Const:
                    return None
                lo, hi = int(lo.value), int(hi.value)
            out.append((frozenset(tid.items()), self._simplify(base.to_expr()), frozenset(digits),
                        (lo + off, hi + off)))
        return tuple(out)

    def separated(self, a, b) -> bool:
        """True when no element is touched by one thread in ``a`` and another in ``b``."""
        both = a.pinned & b.pinned  # tags along which both accesses are by thread 0 only
        if both and all(t in both for t, e in self.extents.items() if e is None or e > 1):
            return True
        da, db = self.dims(a), self.dims(b)
        if da is None or db is None:
            return False
        return any(self._separated(x, y, both) for x, y in zip(da, db))

    def _separated(self, da, db, pinned=frozenset()) -> bool:
        """Every thread tag of the block is separated in some dimension: there the thread,
        digit and window terms of both accesses form a mixed radix (each coefficient above
        the span of the smaller ones), so distinct threads never meet."""
        if da is None or db is None or len(da) != len(db):
            return False
        covered = set(pinned)
        for (ta, ba, ga, wa), (tb, bb, gb, wb) in zip(da, db):
            if ta != tb or ba != bb:
                return False
            width = max(wa[1], wb[1]) - min(wa[0], wb[0]) + 1
            # a thread tag of one thread contributes nothing (its index is always 0)
            terms = [(abs(c), self.extents.get(tag)) for tag, c in ta if self.extents.get(tag) != 1]
            terms += list(ga | gb) + ([(1, width)] if width > 1 else [])
            terms.sort(key=lambda x: (x[0], x[1] is None, x[1] or 0))
            span, ok = 0, True
            for c, count in terms:
                if span is None or c <= span:
                    ok = False
                    break
                span = None if count is None else span + c * (count - 1)
            if ok:
                covered |= {tag for tag, _ in ta}
        return all(t in covered for t, e in self.extents.items() if e is None or e > 1)

    def conflict(self, pending, acc) -> bool:
        memo = self._separated_memo
        for b in acc:
            for a in pending:
                if a.buffer is b.buffer and (a.write or b.write):
                    sep = memo.get((a, b))
                    if sep is None:
                        sep = memo[(a, b)] = self.separated(a, b)
                    if not sep:
                        return True
        return False

    # ------------------------------------------------------------------ accesses
    def _loads(self, e, ctx, out):
        hit = self._load_memo.get(id(e))
        if hit is None or hit[0] is not e:
            hit = self._load_memo[id(e)] = (e, [ld for ld in collect(e, _is_load) if ld.buffer in self.tracked])
        for ld in hit[1]:
            out.append(self.access(ld.buffer, False, ld.indices, ctx, ctx.pinned))

    def leaf_accesses(self, s, ctx) -> list:
        """The tracked accesses of one statement that is not walked into (once per statement
        and context: the walk visits a loop's body until its pending set stops growing)."""
        key = (id(s), ctx.skey, ctx.rkey, ctx.pinned)
        hit = self._leaf_memo.get(key)
        if hit is not None and hit[0] is s:
            return hit[1]
        out = self._leaf_accesses(s, ctx)
        self._leaf_memo[key] = (s, out)
        return out

    def _leaf_accesses(self, s, ctx) -> list:
        out = []
        t = type(s)
        if t is n.Store:
            self._loads(s.value, ctx, out)
            for i in s.indices:
                self._loads(i, ctx, out)
            if s.buffer in self.tracked:
                out.append(self.access(s.buffer, True, s.indices, ctx, ctx.pinned))
        elif t is n.Evaluate:
            self._loads(s.value, ctx, out)
        elif t in n.WMMA_STMTS:          # a warp's tiles: unknown threads' parts
            out.extend(self.access(b, False, None, ctx) for b in warp_nodes.memory_reads(s) if b in self.tracked)
            b = warp_nodes.written(s)
            if b in self.tracked:
                out.append(self.access(b, True, None, ctx))
        else:        # any other statement: every access, with unknown indices (conflicts)
            for ld in collect(s, _is_load):
                if ld.buffer in self.tracked:
                    out.append(self.access(ld.buffer, False, None, ctx, ctx.pinned))
            for st in collect_stmts(s, lambda x: isinstance(x, n.Stmt)):
                for b in _buffers_named(st):      # a store, an async copy, a wmma load/store...
                    if b in self.tracked:
                        out.append(self.access(b, False, None, ctx, ctx.pinned))
                        out.append(self.access(b, True, None, ctx, ctx.pinned))
        return out

    def summary(self, s, ctx) -> list:
        """Every tracked access of ``s`` (and of the statements inside it); a pure function of
        the statement and the context's keys, kept (callers never change the list)."""
        key = (id(s), ctx.skey, ctx.rkey, ctx.pinned)
        hit = self._summary_memo.get(key)
        if hit is not None and hit[0] is s:
            return hit[1]
        out = self._summary(s, ctx)
        self._summary_memo[key] = (s, out)
        return out

    def _summary(self, s, ctx) -> list:
        t = type(s)
        if t is n.Seq:
            return [a for x in s.stmts for a in self.summary(x, ctx)]
        if t is n.For:
            out = []
            self._loads(s.min, ctx, out)
            self._loads(s.extent, ctx, out)
            inner = ctx.with_thread(s) if s.thread is not None and s.thread.is_thread else ctx.with_loop(s)
            return out + self.summary(s.body, inner)
        if t is n.IfThenElse:
            out = []
            self._loads(s.cond, ctx, out)
            out += self.summary(s.then, ctx)
            if s.otherwise is not None:
                out += self.summary(s.otherwise, ctx)
            return out
        if t is n.Allocate:
            return self.summary(s.body, ctx)
        if t is n.LetStmt:
            out = []
            self._loads(s.value, ctx, out)
            return out + self.summary(s.body, ctx.with_let(s))
        if t is n.Barrier:
            return []
        return self.leaf_accesses(s, ctx)

    # ------------------------------------------------------------------ the walk
    def walk(self, s, ctx, pending):
        """(``s`` with barriers, the accesses pending after it).  A barrier before ``s`` is
        the caller's decision (``_item``); this places those needed inside it."""
        t = type(s)
        if t is n.Seq:
            out = []
            for x in s.stmts:
                x, pending = self._item(x, ctx, pending)
                out.append(x)
            return _seq(out), pending
        if t is n.Barrier:
            return s, []
        if t is n.For:
            head = []
            self._loads(s.min, ctx, head)
            self._loads(s.extent, ctx, head)
            pending = _union(pending, head)
            if s.thread is not None and s.thread.is_thread:     # a forall: no carried state
                body, pending = self._item(s.body, ctx.with_thread(s), pending)
                return _with_body(s, body), pending
            if s.thread is not None and s.thread.is_block:      # each block: fresh shared memory
                body, _ = self._item(s.body, ctx, [])
                return _with_body(s, body), []
            return self._loop(s, ctx.with_loop(s), pending)
        if t is n.IfThenElse:
            head = []
            self._loads(s.cond, ctx, head)
            pending = _union(pending, head)
            then, p1 = self._item(s.then, ctx, pending)
            other, p2 = (None, pending) if s.otherwise is None else self._item(s.otherwise, ctx, pending)
            same = then is s.then and other is s.otherwise
            return (s if same else dataclasses.replace(s, then=then, otherwise=other)), _union(p1, p2)
        if t is n.Allocate:
            body, pending = self._item(s.body, ctx, pending)
            return _with_body(s, body), pending
        if t is n.LetStmt:
            head = []
            self._loads(s.value, ctx, head)
            body, pending = self._item(s.body, ctx.with_let(s), _union(pending, head))
            return _with_body(s, body), pending
        return s, _union(pending, self.leaf_accesses(s, ctx))

    def _item(self, s, ctx, pending):
        """``s`` preceded by a barrier when its accesses conflict with ``pending``."""
        acc = _union([], self.summary(s, ctx))
        if not acc:
            return s, pending
        if pending and self.conflict(pending, acc):
            s, after = self.walk(s, ctx, [])
            return _seq([n.Barrier(), s]), after
        return self.walk(s, ctx, pending)

    def _loop(self, s: n.For, ctx, pending):
        """A serial loop: its body walked from the state at loop entry joined with the state
        at the end of an iteration, until that state stops growing."""
        entry = pending
        while True:     # the pending set only grows, over finitely many access patterns
            body, end = self._item(s.body, ctx, entry)
            grown = _union(entry, end)
            if len(grown) == len(entry):
                return _with_body(s, body), _union(pending, end)
            entry = grown


def _buffers_named(st) -> list:
    """The Buffers a statement names in its fields (what it may read or write beyond its Loads:
    a WMMA load reads its source tile, a WMMA store writes its destination)."""
    out = []
    for f in dataclasses.fields(st):
        v = getattr(st, f.name)
        for x in (v if isinstance(v, tuple) else (v,)):
            if isinstance(x, n.Buffer):
                out.append(x)
    return out


def _with_body(s, body):
    """``s`` with ``body`` (``s`` itself when it is its body: no barrier went in)."""
    return s if body is s.body else dataclasses.replace(s, body=body)


def _union(a, b):
    """``a`` then the accesses of ``b`` not in it (interned accesses: identity), once each."""
    seen = set(a)
    out = list(a)
    for x in b:
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out


def _seq(stmts):
    flat = []
    for s in stmts:
        flat.extend(s.stmts if type(s) is n.Seq else [s])
    return flat[0] if len(flat) == 1 else n.Seq(tuple(flat))


def _tracked(kernel) -> set:
    """The buffers the pass synchronises: shared buffers and the kernel's global temporaries,
    except the rings that ``software_pipeline`` fills by asynchronous copies (that pass emits
    their barriers itself: a wait then a barrier before a slot is read, a barrier before it is
    refilled; slots written and read in one iteration differ, which this rule cannot see)."""
    out = set()
    for a in collect_stmts(kernel, lambda x: isinstance(x, n.Allocate)):
        if a.buffer.scope is n.Scope.GLOBAL and not a.buffer.param:
            out.add(a.buffer)
    for x in collect(kernel, lambda x: isinstance(x, (n.Load, n.Store))):
        if x.buffer.scope is n.Scope.SHARED:
            out.add(x.buffer)
    return out - {c.buffer for c in collect_stmts(kernel, lambda x: isinstance(x, n.AsyncCopy))}


def sync_kernel(kernel: n.For) -> n.For:
    """One kernel with the barriers it needs (and guards around barriers predicated); first,
    side effects that the block's threads would all repeat are put on one thread
    (``single_thread.pin_unspread``)."""
    kernel = pin_unspread(kernel)
    tracked = _tracked(kernel)
    extents = kernel_thread_extents(kernel)
    if not tracked:     # no barrier to place; cross-thread reductions may still need predicating
        return predicate_kernel(kernel, extents)
    k = _Kernel(tracked, extents)
    ctx = _Ctx({}, {})
    body, _ = k.walk(kernel, ctx, [])
    return predicate_kernel(body, extents)


def _map_kernels(s, fn):
    """``s`` with every kernel (outermost block/thread loop) replaced by ``fn(kernel)``."""
    if _is_kernel_loop(s):
        return fn(s)
    t = type(s)
    if t is n.Seq:
        new = tuple(_map_kernels(x, fn) for x in s.stmts)
        return s if all(a is b for a, b in zip(new, s.stmts)) else n.Seq(new)
    if t in (n.For, n.Allocate, n.LetStmt):
        body = _map_kernels(s.body, fn)
        return s if body is s.body else dataclasses.replace(s, body=body)
    if t is n.IfThenElse:
        then = _map_kernels(s.then, fn)
        other = None if s.otherwise is None else _map_kernels(s.otherwise, fn)
        if then is s.then and other is s.otherwise:
            return s
        return dataclasses.replace(s, then=then, otherwise=other)
    return s


def _has_kernel(s) -> bool:
    """Any kernel loop in ``s`` (statements only, stopping at the first: cheap on CPU code)."""
    return any_statement(s, lambda x: type(x) is n.For and x.thread is not None)


def sync(func: n.LoweredFunc) -> n.LoweredFunc:
    """The ``sync`` pass (see the module docstring)."""
    if not _has_kernel(func.body):
        return func
    body = _map_kernels(func.body, sync_kernel)
    return func if body is func.body else dataclasses.replace(func, body=body)
