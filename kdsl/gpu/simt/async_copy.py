"""Asynchronous copies in the SIMT executor: AsyncCopy, CommitGroup, WaitGroup.

Per thread, as cp.async does: an ``AsyncCopy`` reads its source at issue and defers the
write into the thread's open group; ``CommitGroup`` closes the group; ``WaitGroup(n)``
completes every committed group of the thread but the newest ``n``.  A completed copy is
a store by the issuing thread at the wait, for the race checker.  A load or store of a
destination element whose copy is still in flight raises ``AsyncCopyRace`` (naming the
buffer, the element, the thread and both statements); so does a block that ends with
copies in flight.
"""
from __future__ import annotations

import numpy as np

from ...errors import InternalCompilerError
from ...ir import nodes as n
from ...numerics.numpy_eval import internal_np
from .races import WAR, WAW, RaceError, SimtError


class AsyncCopyRace(SimtError):
    """An element of an asynchronous copy's destination accessed before a wait covered the copy.

    ``buffer``: the destination's name; ``element``: its index; ``thread``: the accessing
    thread (x, y, z); ``stmts``: (the copy statement, the access) as printed lines."""

    def __init__(self, message, kernel, buffer, element, thread, stmts):
        self.buffer, self.element, self.thread, self.stmts = buffer, element, thread, stmts
        super().__init__(message, kernel)


class _Copy:
    """One AsyncCopy execution: per active lane its element, value and group number."""

    __slots__ = ("mem", "buffer", "flat", "lanes", "group", "values", "stmt")

    def __init__(self, mem, buffer, flat, lanes, group, values, stmt):
        self.mem, self.buffer, self.flat, self.lanes = mem, buffer, flat, lanes
        self.group, self.values, self.stmt = group, values, stmt


class AsyncState:
    """The copies in flight in one block: per thread a count of committed groups, the pending
    copies, and per destination buffer a count of pending copies per element."""

    def __init__(self, block_mem, T: int):
        self.block_mem = block_mem          # identifies the block
        self.commits = np.zeros(T, np.int64)
        self.copies: list = []
        self.inflight: dict = {}            # id(_Mem) -> (mem, int array over elements)

    def pending(self, m):
        got = self.inflight.get(id(m))
        return None if got is None else got[1]


def state(ex) -> AsyncState:
    st = getattr(ex, "_async", None)
    if st is None or st.block_mem is not ex.block_mem or st.commits.size != ex.T:
        st = ex._async = AsyncState(ex.block_mem, ex.T)
    return st


def async_copy(ex, s: n.AsyncCopy):
    b = s.buffer
    outer = ex.mask
    if s.predicate is not None:
        pred = np.broadcast_to(np.asarray(ex.ev(s.predicate), bool), (ex.T,))
        ex._set_mask(outer & pred)
    else:
        pred = np.ones(ex.T, bool)
    value = np.asarray(ex.ev(s.value))        # the source is read at issue (lanes whose
    ex._set_mask(outer)                       # predicate holds only: no stray loads)
    value = np.where(pred, np.broadcast_to(value, (ex.T,)), 0).astype(internal_np(b.dtype))
    m, idx = ex._access(b, s.indices, "asynchronous copy")
    if m.per_thread or m.shadow is None:
        raise InternalCompilerError(f"asynchronous copy into {b.scope.value} buffer {b.name!r}: "
                                    "the destination must be shared memory")
    lanes = ex.lanes
    flat = np.ravel_multi_index(idx, m.data.shape) if idx else np.zeros(lanes.size, np.int64)
    st = state(ex)
    _check_pending(ex, st, m, b, flat, "wrote")
    _check_issue(ex, m, b, flat, lanes)
    if getattr(ex, "async_mma", False):      # it may land any time: not where a product reads
        from . import async_mma
        async_mma.check_write(ex, m, b, flat)
    st.copies.append(_Copy(m, b, flat, lanes.copy(), st.commits[lanes].copy(), value[lanes], ex.cur))
    key = id(m)
    if key not in st.inflight:
        st.inflight[key] = (m, np.zeros(m.data.size, np.int64))
    np.add.at(st.inflight[key][1], flat, 1)


def commit_group(ex, s):
    if ex.kernel is None:
        return
    state(ex).commits[ex.lanes] += 1


def wait_group(ex, s: n.WaitGroup):
    if ex.kernel is None:
        return
    st = state(ex)
    limit = st.commits - s.pending            # groups numbered below this are complete
    active = ex.mask
    keep = []
    for c in st.copies:
        done = active[c.lanes] & (c.group < limit[c.lanes])
        if done.any():
            flat, lanes, vals = c.flat[done], c.lanes[done], c.values[done]
            got = c.mem.shadow.on_store(flat, lanes, c.stmt)
            if got is not None:
                _race(ex, c, got)
            c.mem.data.reshape(-1)[flat] = vals
            np.add.at(st.inflight[id(c.mem)][1], flat, -1)
            left = ~done
            c.flat, c.lanes, c.group, c.values = c.flat[left], c.lanes[left], c.group[left], c.values[left]
        if c.flat.size:
            keep.append(c)
    st.copies = keep


def check_access(ex, m, b, idx, verb: str):
    """Called by the executor's loads and stores of shared buffers: no copy in flight there."""
    st = getattr(ex, "_async", None)
    if st is None or st.block_mem is not ex.block_mem or id(m) not in st.inflight:
        return
    flat = np.ravel_multi_index(idx, m.data.shape) if idx else np.zeros(ex.lanes.size, np.int64)
    _check_pending(ex, st, m, b, flat, verb)


def check_block_end(ex):
    """Copies still in flight when a block ends (no ``wait_group(0)`` drained them)."""
    st = getattr(ex, "_async", None)
    if st is None or st.block_mem is not ex.block_mem or not st.copies:
        return
    c = st.copies[0]
    raise AsyncCopyRace(f"{ex._where()}: the block ends with asynchronous copies into "
                        f"{c.buffer.scope.value} buffer {c.buffer.name!r} still in flight (no "
                        f"wait_group covers them):\n    {ex._line(c.stmt)}", ex.kernel, c.buffer.name,
                        None, ex.thread(c.lanes[0]), (ex._line(c.stmt), None))


def _check_pending(ex, st, m, b, flat, verb):
    pend = st.pending(m)
    if pend is None:
        return
    bad = np.flatnonzero(pend[flat] > 0)
    if not bad.size:
        return
    k = bad[0]
    f = int(flat[k])
    copy = next(c for c in st.copies if c.mem is m and np.any(c.flat == f))
    t_copy = copy.lanes[np.flatnonzero(copy.flat == f)[0]]
    element = tuple(int(x) for x in np.unravel_index(f, m.data.shape)) if m.data.shape else ()
    thread = ex.thread(ex.lanes[k])
    first, second = ex._line(copy.stmt), ex._line(ex.cur)
    raise AsyncCopyRace(
        f"{ex._where()}: asynchronous-copy race on {b.scope.value} buffer {b.name!r} element "
        f"{element}: thread {thread} {verb} it in\n    {second}\n  while the asynchronous copy "
        f"by thread {ex.thread(t_copy)} in\n    {first}\n  was still in flight (no wait_group "
        f"covering its group came between them)", ex.kernel, b.name, element, thread, (first, second))


def _check_issue(ex, m, b, flat, lanes):
    """The copy may land any time from its issue on: another thread's access to the element
    since the last barrier is a write-after-read (write-after-write) race already."""
    sh = m.shadow
    for tid_arr, stmt_arr, kind in ((sh.w_tid, sh.w_stmt, WAW), (sh.r_tid, sh.r_stmt, WAR),
                                    (sh.r_tid2, sh.r_stmt2, WAR)):
        other = tid_arr[flat]
        bad = np.flatnonzero((other >= 0) & (other != lanes))
        if bad.size:
            k = bad[0]
            f = int(flat[k])
            element = tuple(int(x) for x in np.unravel_index(f, m.data.shape)) if m.data.shape else ()
            th = (ex.thread(other[k]), ex.thread(lanes[k]))
            first, second = ex._line(int(stmt_arr[f])), ex._line(ex.cur)
            verb = "read" if kind == WAR else "wrote"
            raise RaceError(
                f"{ex._where()}: {kind} race on {b.scope.value} buffer {b.name!r} element {element}: "
                f"thread {th[1]} issued an asynchronous copy into it in\n    {second}\n  (it may land "
                f"any time before its wait) after thread {th[0]} {verb} it in\n    {first}\n  with no "
                f"barrier between them", ex.kernel, kind, b.name, element, th, (first, second))


def _race(ex, c: _Copy, got):
    kind, f, (t1, s1), (t2, s2) = got
    shape = c.mem.data.shape
    element = tuple(int(x) for x in np.unravel_index(int(f), shape)) if shape else ()
    th = (ex.thread(t1), ex.thread(t2))
    first, second = ex._line(s1), ex._line(s2)
    raise RaceError(
        f"{ex._where()}: {kind} race on {c.buffer.scope.value} buffer {c.buffer.name!r} element "
        f"{element}: the asynchronous copy by thread {th[1]} in\n    {second}\n  completed (at "
        f"{ex._line(ex.cur)}) after thread {th[0]} accessed it in\n    {first}\n  with no barrier "
        f"between them", ex.kernel, kind, c.buffer.name, element, th, (first, second))


def handlers(ex) -> dict:
    """The executor's statement handlers for the asynchronous-copy statements."""
    return {n.AsyncCopy: lambda s: async_copy(ex, s), n.CommitGroup: lambda s: commit_group(ex, s),
            n.WaitGroup: lambda s: wait_group(ex, s)}


__all__ = ["AsyncCopyRace", "handlers", "check_access", "check_block_end"]
