"""software_pipeline: multi-buffered global->shared copies with asynchronous copies (IR pass).

Assumes: loop IR as ``loop_nests`` builds it: a stage pipelined with ``double_buffer()`` /
``pipeline(S)`` (``kdsl.schedule.pipelining`` checked it) is a copy of global memory into a
shared buffer allocated with ``Allocate(stages=S)`` directly in the body of the serial loop
it is attached to (``for ko: allocate X.shared (stages=S): <copy nests>; <readers>``).

Guarantees: for such a loop ``for ko in [m, m+E)`` with ring buffers B (all of one S):

    allocate B: [S, ...] (stages=S)              # the ring: slot of tile t = (t - m) % S
      <copy of tile m+s into slot s, if s < E>; commit_group      for s in 0..S-2  (prologue)
      for ko in [m, m+E):
        <copy of tile ko+S-1 into its slot, if ko+S-1 < m+E>; commit_group
        wait_group(S-1)                           # this thread's copies of tile ko are done
        barrier                                   # ... and every thread's (RAW)
        <the loop's other statements, reading slot (ko - m) % S>
        barrier                                   # slot read here is refilled next (WAR)
      wait_group(0)                               # epilogue: drain the groups still open

Where every reader of the rings in the loop is a tensor-core product read from shared memory
(``WgmmaMma``, asynchronous on the GPU) and S >= 3, the products of one tile stay in flight
while the next tile's copies are issued:

      <copy of tile m+s into slot s, if s < E>; commit_group      for s in 0..S-3  (prologue)
      for ko in [m, m+E):
        wait_group(S-3); barrier                  # tile ko copied (every thread's)
        <copy of tile ko+S-2 into its slot, if ko+S-2 < m+E>; commit_group
        <the loop's other statements: products reading slot (ko - m) % S>
        wgmma.commit_group(); wgmma.wait_group(1) # the products of tile ko-1 are done
      wgmma.wait_group(0); wait_group(0)

The slot refilled in iteration ko was last read by the products of tile ko-2, which every
warp waited for in iteration ko-1, before the barrier: no second barrier is needed.
Where a product also reads a single-buffered shared operand that the loop refills (only the
other operand pipelined), the iteration ends with ``wgmma.wait_group(0)`` instead (F37).

Copies are ``AsyncCopy`` statements (their predicate zero-fills past the end, and where a
padded cache's tile leaves the array); every
iteration commits one group, possibly empty, so the group count stays uniform.  The copy
of tile ko+1 thus overlaps the compute of tile ko (S=2).  Sequential executors run
``AsyncCopy`` as a store at issue (``sequential.lower_async_copies``), which is exact: every read of a
slot follows the wait that covers its copy.

This pass emits the barriers its ring needs.  A general barrier-insertion pass must treat
``wait_group`` + ``barrier`` as the synchronisation of an asynchronous copy (the copy's
writes land at the wait, not at the issue) and must not add barriers between the ring's
copies and reads: they touch different slots in one iteration.
"""
from __future__ import annotations

import dataclasses

from ..errors import InternalCompilerError, ScheduleError
from ..ir import make as mk
from ..ir import nodes as n
from ..ir import warp_nodes
from ..ir.simplify import simplify_stmt
from ..ir.visitor import Mutator, allocate_chain, any_statement, collect, collect_stmts, free_vars, rewrap, substitute
from ..schedule.pipelining import QUALIFIES
from .gates import has_pipelined_allocations, has_pipelined_stages


def _stores_to(s, bufs) -> list:
    return collect_stmts(s, lambda x: isinstance(x, (n.Store, n.AsyncCopy)) and x.buffer in bufs)


def _async_consumers(rest, bufs) -> bool:
    """Whether the loop's statements ``rest`` read the rings ``bufs`` only through tensor-core
    products (``WgmmaMma``) and touch those products' accumulators nowhere else: the products
    may then stay in flight across iterations."""
    mmas = [x for r in rest for x in collect_stmts(r, lambda y: isinstance(y, n.WgmmaMma))]
    if not mmas:
        return False
    reads = [x for r in rest for x in _loads_of(r, bufs)]
    if any(type(x) is not n.WgmmaMma for x in reads):
        return False
    accs = {id(x.d) for x in mmas} | {id(x.c) for x in mmas}
    for r in rest:
        for x in collect(r, lambda y: isinstance(y, (n.Load, n.Store) + n.WMMA_STMTS)):
            if type(x) is n.WgmmaMma:
                continue
            named = [getattr(x, f) for f in ("buffer", "frag", "d", "c") if hasattr(x, f)]
            if any(id(b) in accs for b in named):
                return False
    return True


def _refilled_operands(rest, bufs) -> bool:
    """Whether a tensor-core product in ``rest`` reads a shared buffer other than the rings
    ``bufs`` that ``rest`` itself writes: a single-buffered operand refilled every iteration
    (F37).  Its products must be done before the next iteration's copy overwrites it."""
    mmas = [x for r in rest for x in collect_stmts(r, lambda y: isinstance(y, n.WgmmaMma))]
    operands = {b for x in mmas for b in warp_nodes.memory_reads(x) if b not in bufs}
    return any(_stores_to(r, operands) for r in rest)


def _loads_of(s, bufs) -> list:
    """Reads of ``bufs`` in ``s``: Loads, tensor-core fragment loads (``WmmaLoad``) and the
    operands of shared-memory products (``WgmmaMma``)."""
    return collect(s, lambda x: (isinstance(x, n.Load) and x.buffer in bufs)
                   or (type(x) in n.WMMA_STMTS and any(b in bufs for b in warp_nodes.memory_reads(x))))


def _err(buf, what) -> ScheduleError:
    return ScheduleError(f"pipeline: the buffer {buf.name} of a pipelined stage {what}", hint=QUALIFIES)


class _Ring(Mutator):
    """Accesses of ring buffers get the slot index; stores to them become AsyncCopies."""

    def __init__(self, rings: dict, slot, predicate=None):
        super().__init__()
        self.rings, self.slot, self.predicate = rings, slot, predicate

    def visit_Load(self, e):
        e = self.generic(e)
        r = self.rings.get(e.buffer)
        return e if r is None else n.Load(e.dtype, r, (self.slot,) + e.indices)

    def visit_WmmaLoad(self, s):
        s = self.generic(s)
        r = self.rings.get(s.src)
        return s if r is None else dataclasses.replace(s, src=r, origin=(self.slot,) + s.origin)

    def visit_WgmmaMma(self, s):
        s = self.generic(s)
        changes = {}
        for f in ("a", "b"):
            r = self.rings.get(getattr(s, f))
            if r is not None:
                changes[f] = r
                changes[f + "_origin"] = (self.slot,) + getattr(s, f + "_origin")
        return dataclasses.replace(s, **changes) if changes else s

    def visit_Store(self, s):
        s = self.generic(s)
        r = self.rings.get(s.buffer)
        if r is None:
            return s
        return n.AsyncCopy(r, (self.slot,) + s.indices, s.value, self.predicate)

    def visit_AsyncCopy(self, s):     # a padded copy: its own predicate and the ring's
        s = self.generic(s)
        r = self.rings.get(s.buffer)
        if r is None:
            return s
        pred = s.predicate if self.predicate is None else mk.logical_and(s.predicate, self.predicate)
        return n.AsyncCopy(r, (self.slot,) + s.indices, s.value, pred)


class _PaddedCopies(Mutator):
    """The copy of a padded cache (``if c: X[i] = A[j] else: X[i] = 0``, loop_nests' form) into
    a pipelined buffer becomes ``AsyncCopy(X[i], A[j], predicate=c)``: cp.async zero-fills
    where its predicate is false."""

    def __init__(self, bufs):
        super().__init__()
        self.bufs = bufs

    def visit_IfThenElse(self, s):
        s = self.generic(s)
        t, e = s.then, s.otherwise
        if (type(t) is n.Store and type(e) is n.Store and t.buffer is e.buffer
                and t.buffer in self.bufs and t.indices == e.indices
                and type(e.value) is n.Const and e.value.value == 0):
            return n.AsyncCopy(t.buffer, t.indices, t.value, s.cond)
        return s


class _Pipeliner(Mutator):
    """Finds the serial loop whose body copies each pipelined buffer (the loop the stage is
    attached at) and pipelines it; the buffer's Allocate, wherever storage put it (inside that
    loop, or hoisted to block level for shared memory), becomes the ring's."""

    def __init__(self, piped: list):
        super().__init__()
        self.piped = {a.buffer: a for a in piped}    # pipelined Allocates by buffer, in order
        self.rings: dict = {}                         # buffer -> its ring buffer

    def visit_For(self, s: n.For):
        s = self.generic(s)
        chain, core = allocate_chain(s.body)
        stmts = core.stmts if isinstance(core, n.Seq) else (core,)
        # the attach loop: its body both copies the tile and reads it (inner copy loops only store)
        bufs = [b for b in self.piped if b not in self.rings and any(_stores_to(x, {b}) for x in stmts)
                and any(_loads_of(x, {b}) for x in stmts)]
        if not bufs:
            return s
        if s.kind not in (n.ForKind.SERIAL, n.ForKind.UNROLLED):
            what = s.kind.value + (f" to {s.thread.value}" if s.thread else "")
            raise _err(bufs[0], f"is copied in loop {s.var.name}, which is {what}; the loop "
                                "a copy is pipelined over must be serial (checked at lowering)")
        return _pipeline(s, chain, core, [self.piped[b] for b in bufs], self.rings)

    def visit_Allocate(self, a: n.Allocate):
        body = self.visit(a.body)
        ring = self.rings.get(a.buffer) if a.stages > 1 else None
        if ring is not None:
            return n.Allocate(ring, body, a.stages)
        return a if body is a.body else dataclasses.replace(a, body=body)


def _pipeline(loop: n.For, chain, core, piped, made: dict) -> n.Stmt:
    S = piped[0].stages
    if any(a.stages != S for a in piped):
        raise _err(piped[0].buffer, f"and {piped[1].buffer.name} are pipelined over loop "
                                    f"{loop.var.name} with different stage counts "
                                    f"({', '.join(str(a.stages) for a in piped)}); use one count")
    bufs = {a.buffer for a in piped}
    chain = [a for a in chain if a.buffer not in bufs or a.stages == 1]   # the rings: out of the loop
    inside = [a for a in piped if any(a is c for c in allocate_chain(loop.body)[0])]
    stmts = core.stmts if isinstance(core, n.Seq) else (core,)
    producers, rest, at = [], [], []
    for k, x in enumerate(stmts):
        if _stores_to(x, bufs):
            producers.append(_PaddedCopies(bufs).visit(x))
            at.append(k)
        else:
            rest.append(x)
    inner_bufs = {a.buffer for a in chain if a.stages == 1}
    written = {st.buffer for st in collect_stmts(core, lambda y: isinstance(y, n.Store))}
    for p in producers:
        for st in collect_stmts(p, lambda y: isinstance(y, (n.Store, n.AsyncCopy))):
            if st.buffer not in bufs:
                raise InternalCompilerError(f"pipelined copy nest of loop {loop.var.name} also "
                                            f"stores to {st.buffer.name}")
            v = st.value
            if not (isinstance(v, n.Load) and v.buffer.scope is n.Scope.GLOBAL):
                raise _err(st.buffer, "is not filled by a copy from global memory (checked at lowering)")
        for ld in collect(p, lambda y: isinstance(y, n.Load)):
            if ld.buffer in written or ld.buffer in inner_bufs or ld.buffer in bufs:
                raise _err(next(iter(bufs)), f"is copied from {ld.buffer.name}, which the loop "
                                             f"{loop.var.name} itself writes; the copy of a later "
                                             "tile cannot be issued early (checked at lowering)")
    for b in bufs:
        if not any(_stores_to(p, {b}) for p in producers):
            raise InternalCompilerError(f"pipelined buffer {b.name} is never written in loop {loop.var.name}")
        if loop.var in free_vars(b.shape):
            raise _err(b, f"has a size that changes with loop {loop.var.name}")
    for b in bufs:      # per buffer: fragment loads interleave with the copies (attach order)
        first_reader = next((k for k, x in enumerate(stmts) if _loads_of(x, {b})), len(stmts))
        if any(k > first_reader for k, p in zip(at, producers) if _stores_to(p, {b})):
            raise InternalCompilerError(f"loop {loop.var.name}: ring buffer {b.name} is read before its copy")

    ko, m, E = loop.var, loop.min, loop.extent
    rings = {a.buffer: dataclasses.replace(a.buffer, shape=(mk.as_expr(S),) + tuple(a.buffer.shape))
             for a in piped}

    def slot(t):
        return mk.mod(mk.sub(t, m), S)

    def issue(t, pred):
        pred = None if isinstance(pred, n.Const) and pred.value else pred
        body = [simplify_stmt(_Ring(rings, slot(t), pred).visit(substitute(p, {ko: t}))) for p in producers]
        return body + [n.CommitGroup()]

    asynchronous = S >= 3 and _async_consumers(rest, bufs)
    ahead = S - 2 if asynchronous else S - 1          # tiles copied ahead of the one in use
    prologue = []
    for s in range(ahead):
        prologue += issue(mk.add(m, s), mk.lt(mk.as_expr(s), E))
    nxt = mk.add(ko, ahead)
    compute = [_Ring(rings, slot(ko)).visit(x) for x in rest]
    copy = issue(nxt, mk.lt(nxt, mk.add(m, E)))
    if asynchronous:        # products in flight over the next tile's copies (module docstring)
        # a single-buffered operand (only the other one pipelined) is copied again at the
        # next tile: every product reading it must be done first (F37); the rings still
        # get their copies S-2 tiles ahead
        left = 0 if _refilled_operands(rest, bufs) else 1
        body = [n.WaitGroup(S - 3), n.Barrier()] + copy + compute + [n.WgmmaCommit(), n.WgmmaWait(left)]
        tail = (n.WgmmaWait(0), n.WaitGroup(0))
    else:
        body = copy + [n.WaitGroup(S - 1), n.Barrier()] + compute + [n.Barrier()]
        tail = (n.WaitGroup(0),)
    others = [a for a in chain if a.stages == 1]
    new_loop = dataclasses.replace(loop, body=rewrap(others, n.Seq(tuple(body))))
    out: n.Stmt = n.Seq(tuple(prologue) + (new_loop,) + tail)
    for a in reversed(inside):        # allocated in the loop: the ring goes around it
        out = n.Allocate(rings[a.buffer], out, S)
    made.update(rings)                # allocated further out: visit_Allocate swaps in the ring
    return out


def check_pipelines(state):
    """The ``pipeline_legality`` pass (schedule level): every stage pipelined with
    ``double_buffer``/``pipeline`` still qualifies (``kdsl.schedule.pipelining``); the
    ScheduleError names the user's pipeline call.  Returns ``state`` unchanged."""
    from ..schedule.pipelining import check_schedule
    if has_pipelined_stages(state):
        check_schedule(state.sched)
    return state


class _SingleBuffered(Mutator):
    """Pipelined allocations of ``bufs`` back to one buffer (``stages=1``)."""

    def __init__(self, bufs):
        super().__init__()
        self.bufs = bufs

    def visit_Allocate(self, a: n.Allocate):
        body = self.visit(a.body)
        if a.buffer in self.bufs:
            return n.Allocate(a.buffer, body, 1)
        return a if body is a.body else dataclasses.replace(a, body=body)


def _idle(body, piped) -> set:
    """The pipelined buffers that nothing in ``body`` writes or nothing reads: their copy
    loops, or their readers' loops, had a constant extent of 0 (an empty array under
    ``specialize=True``: F35, and the fuzz case 101:4537 where the output's columns are 0
    and the K-tile loop is left holding only the copy) and were removed; with nothing to
    copy or nothing that waits for the copy there is nothing to pipeline: one buffer is kept."""
    written = {x.buffer for x in collect_stmts(body, lambda y: isinstance(y, (n.Store, n.AsyncCopy)))}
    return {a.buffer for a in piped if a.buffer not in written or not _loads_of(body, {a.buffer})}


def software_pipeline(func: n.LoweredFunc) -> n.LoweredFunc:
    """The ``software_pipeline`` pass (see the module docstring); a no-op without pipelined
    allocations."""
    if not has_pipelined_allocations(func):
        return func
    piped = collect_stmts(func.body, lambda x: isinstance(x, n.Allocate) and x.stages > 1)
    empty = _idle(func.body, piped)
    if empty:
        func = dataclasses.replace(func, body=_SingleBuffered(empty).visit(func.body))
        piped = collect_stmts(func.body, lambda x: isinstance(x, n.Allocate) and x.stages > 1)   # rebuilt nodes
        if not piped:
            return func
    p = _Pipeliner(piped)
    body = p.visit(func.body)
    left = [a for a in piped if a.buffer not in p.rings]
    if left:
        raise _err(left[0].buffer, "is not copied directly inside the loop it is pipelined over "
                                   "(it must be attached with compute_at at a serial loop)")
    return dataclasses.replace(func, body=body)


__all__ = ["software_pipeline", "check_pipelines"]
