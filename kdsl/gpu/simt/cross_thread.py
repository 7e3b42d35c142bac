"""``CrossThreadReduce`` in the SIMT executor, by its definition (kdsl.ir.nodes).

The active threads form reduction groups: threads with the same indices along the tags
not reduced over, and every index below the enclosing loop's extent along the reduced
tags.  Each group combines its threads' values in increasing thread order (x fastest, the
order ``lower_cross_thread``'s fold uses, so both agree bit for bit) and every member gets
the result in its ``results`` buffers (a scan: member ``c`` gets the combine of members
``0..c``).  A group only some of whose threads reach the
statement is a ``CrossThreadDivergence``.
"""
from __future__ import annotations

import numpy as np

from ...errors import InternalCompilerError
from ...ir import nodes as n
from ...numerics.numpy_eval import fix
from .races import SimtError

_AXIS = {n.ThreadTag.THREAD_X: 0, n.ThreadTag.THREAD_Y: 1, n.ThreadTag.THREAD_Z: 2}


class CrossThreadDivergence(SimtError):
    """A cross-thread reduction reached by some threads of a reduction group and not others."""


def _groups(ex, s: n.CrossThreadReduce):
    """(G, K) thread ids: one row per reduction group of the active threads, its members in
    increasing thread order; a CrossThreadDivergence if a group is incomplete."""
    x, y, _ = ex.dims
    stride = (1, x, x * y)
    axes = sorted((_AXIS[t] for t in s.threads), reverse=True)     # z first: x fastest
    off = np.zeros(1, np.int64)
    for a in axes:
        ext = ex.thread_ext[a]
        off = (off[:, None] + np.arange(ext, dtype=np.int64)[None, :] * stride[a]).ravel()
    lanes = ex.lanes
    base = lanes - sum(ex.comp[a][lanes] * stride[a] for a in axes)
    bases = np.unique(base)
    members = bases[:, None] + off[None, :]
    inside = members < ex.T
    ok = inside.all() and ex.mask[members].all() and members.size == lanes.size
    if not ok:
        inside_rows = np.where(inside, members, 0)
        bad = np.flatnonzero(~(inside & ex.mask[inside_rows]).all(axis=1))[0]
        row = members[bad][inside[bad]]
        here = [ex.thread(t) for t in row if ex.mask[t]][:4]
        away = [ex.thread(t) for t in row if not ex.mask[t]][:4]
        raise CrossThreadDivergence(
            f"{ex._where()}: a cross-thread reduction over {', '.join(t.value for t in s.threads)} "
            f"reached by threads {', '.join(map(str, here))} and not by threads "
            f"{', '.join(map(str, away))} of the same reduction group:\n    {ex._line(ex.cur)}",
            ex.kernel or ex.func.name)
    return members


def cross_thread_reduce(ex, s: n.CrossThreadReduce) -> None:
    """Execute ``s`` on the active threads of executor ``ex`` (see the module docstring)."""
    missing = [t.value for t in s.threads if t not in ex.bound]
    if missing:
        raise InternalCompilerError(f"kernel {ex.kernel or ex.func.name!r}: a cross-thread reduction "
                                    f"over {missing} outside the loops bound to them")
    members = _groups(ex, s)
    comb = s.combiner
    vals = [np.broadcast_to(np.asarray(ex.ev(v)), (ex.T,)) for v in s.values]
    g = members.shape[0]
    acc = [np.broadcast_to(fix(ex.ev(i), r.dtype), (g,)) for i, r in zip(comb.identity, comb.result)]
    env = ex.env
    prefix = []                 # a scan: every member's inclusive value, member by member
    try:
        for k in range(members.shape[1]):
            for v, a in zip(comb.lhs, acc):
                env[v] = a
            for v, x in zip(comb.rhs, vals):
                env[v] = x[members[:, k]]
            acc = [np.broadcast_to(fix(ex.ev(r), r.dtype), (g,)) for r in comb.result]
            if s.scan:
                prefix.append(acc)
    finally:
        for v in comb.lhs + comb.rhs:
            env.pop(v, None)
    flat = members.ravel()
    k = members.shape[1]
    for j, (b, a) in enumerate(zip(s.results, acc)):
        m = ex.mem.get(b)
        if m is None or not m.per_thread:
            raise InternalCompilerError(f"cross-thread reduction result {b.name!r} is not a live "
                                        f"local buffer (kernel {ex.kernel!r})")
        if s.scan:      # members[:, c] gets the combine of members[:, :c + 1]
            m.data[flat, 0] = np.stack([p[j] for p in prefix], axis=1).ravel()
        else:
            m.data[flat, 0] = np.repeat(a, k)
