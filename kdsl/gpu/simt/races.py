"""Shadow memory for the SIMT executor's race checker, and the errors it reports.

Every buffer that the threads of a block share (``shared`` scope, and global temporaries
allocated inside a kernel) has a shadow: per element, since the last barrier, the last
writer thread and statement, and up to two distinct reader threads with their statements.
Two readers are enough to be exact: a store by thread t conflicts with an earlier read
by another thread iff some recorded reader is not t.

The errors are ``InternalCompilerError``s: lowered IR comes from kdsl's passes, so a race,
a divergent barrier or an out-of-bounds access in it is a kdsl bug (a schedule that cannot
be made correct must be refused as a ScheduleError before lowering).
"""
from __future__ import annotations

import numpy as np

from ...errors import InternalCompilerError


class SimtError(InternalCompilerError):
    """A GPU-semantics violation found by the SIMT executor (``kernel`` names the kernel)."""

    def __init__(self, message: str, kernel: str):
        self.kernel = kernel
        super().__init__(message)


class RaceError(SimtError):
    """Two threads of a block accessed one element of a shared buffer with no barrier between.

    ``kind`` is "read-after-write", "write-after-read" or "write-after-write"; ``buffer`` the
    buffer's name; ``element`` its index; ``threads`` (first, second) as (x, y, z) tuples;
    ``stmts`` the two statements as printed lines (first access, second access).
    """

    def __init__(self, message, kernel, kind, buffer, element, threads, stmts):
        self.kind, self.buffer, self.element = kind, buffer, element
        self.threads, self.stmts = threads, stmts
        super().__init__(message, kernel)


class BarrierDivergence(SimtError):
    """A barrier reached by some threads of a block and not by others."""


class SimtOutOfBounds(SimtError, IndexError):
    """A Load or Store outside its buffer, executed by some thread."""


class UninitializedRead(SimtError):
    """A thread read an element of a block's shared buffer (or of a global temporary allocated
    in the kernel) that no thread of the block wrote: on a GPU, whatever the memory held
    (``buffer`` its name, ``element`` its index, ``thread`` the reader as (x, y, z))."""

    def __init__(self, message, kernel, buffer, element, thread):
        self.buffer, self.element, self.thread = buffer, element, thread
        super().__init__(message, kernel)


RAW, WAR, WAW = "read-after-write", "write-after-read", "write-after-write"


class Shadow:
    """Access history of one shared buffer since the last barrier (flat element indices).

    ``on_load``/``on_store`` take the flat elements and thread ids of the active lanes of
    one vector access and return a conflict ``(kind, flat, (tid, stmt) first, (tid, stmt)
    second)`` or None; loads are recorded, stores recorded after the check.
    """

    def __init__(self, size: int):
        self.w_tid = np.full(size, -1, np.int64)
        self.w_stmt = np.full(size, -1, np.int64)
        self.r_tid = np.full(size, -1, np.int64)
        self.r_stmt = np.full(size, -1, np.int64)
        self.r_tid2 = np.full(size, -1, np.int64)
        self.r_stmt2 = np.full(size, -1, np.int64)
        self.written = np.zeros(size, bool)     # ever written in this block (kept at barriers)
        self.dirty = False

    def unwritten(self, flat):
        """The positions in ``flat`` of elements never written (in this block), or None."""
        bad = np.flatnonzero(~self.written[flat])
        return bad if bad.size else None

    def reset(self) -> None:
        """A barrier: forget every access."""
        if self.dirty:
            for a in (self.w_tid, self.r_tid, self.r_tid2):
                a.fill(-1)
            self.dirty = False

    def on_load(self, flat, tids, stmt: int):
        self.dirty = True
        w = self.w_tid[flat]
        bad = np.flatnonzero((w >= 0) & (w != tids))
        if bad.size:
            k = bad[0]
            f = flat[k]
            return RAW, f, (int(w[k]), int(self.w_stmt[f])), (int(tids[k]), stmt)
        # the first reader of each element, then any second one that differs from it
        new = self.r_tid[flat] < 0
        self.r_tid[flat[new]] = tids[new]
        self.r_stmt[flat[new]] = stmt
        second = (self.r_tid[flat] != tids) & (self.r_tid2[flat] < 0)
        self.r_tid2[flat[second]] = tids[second]
        self.r_stmt2[flat[second]] = stmt
        return None

    def on_store(self, flat, tids, stmt: int):
        self.dirty = True
        if flat.size > 1:   # two lanes of this one statement writing one element
            order = np.argsort(flat, kind="stable")
            f = flat[order]
            dup = np.flatnonzero(f[1:] == f[:-1])
            if dup.size:
                k = dup[0]
                return WAW, f[k], (int(tids[order[k]]), stmt), (int(tids[order[k + 1]]), stmt)
        for tid_arr, stmt_arr, kind in ((self.w_tid, self.w_stmt, WAW),
                                        (self.r_tid, self.r_stmt, WAR),
                                        (self.r_tid2, self.r_stmt2, WAR)):
            other = tid_arr[flat]
            bad = np.flatnonzero((other >= 0) & (other != tids))
            if bad.size:
                k = bad[0]
                f = flat[k]
                return kind, f, (int(other[k]), int(stmt_arr[f])), (int(tids[k]), stmt)
        self.w_tid[flat] = tids
        self.w_stmt[flat] = stmt
        self.written[flat] = True
        return None


__all__ = ["SimtError", "RaceError", "BarrierDivergence", "SimtOutOfBounds", "UninitializedRead", "Shadow",
           "RAW", "WAR", "WAW"]


class _Mem:
    """A live buffer: its data, whether it has one copy per thread, its race shadow or None,
    and for global memory the shadow over blocks (``blocks``: accesses by block id, kept for
    the whole kernel: blocks never synchronise with one another)."""

    __slots__ = ("data", "per_thread", "shadow", "blocks")

    def __init__(self, data, per_thread=False, shadow=None, blocks=None):
        self.data, self.per_thread, self.shadow, self.blocks = data, per_thread, shadow, blocks
