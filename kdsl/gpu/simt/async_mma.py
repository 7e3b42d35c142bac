"""Asynchronous tensor-core products in the SIMT executor: WgmmaCommit, WgmmaWait.

In a kernel that commits its ``WgmmaMma`` products (``WgmmaCommit``), a product reads its
shared tiles and writes its accumulator from its issue until a ``WgmmaWait`` of its warp
covers its group, as ``wgmma.mma_async`` does.  The executor computes the product at issue
(exact when nothing breaks the rule below) and keeps, per warp, the shared elements and the
accumulator of every product still in flight.  Raised as ``AsyncMmaRace``:

* a store into an element a product in flight reads (an ordinary store, or an asynchronous
  copy, from its issue on: it may land any time), by any thread of the block;
* a wmma statement on an accumulator a product of the same warp still writes (its store, a
  fill), other than another product chaining into it (which the hardware orders);
* a block that ends with products in flight.

In kernels without ``WgmmaCommit`` every product completes where it is issued.
"""
from __future__ import annotations

import numpy as np

from ...ir import nodes as n
from ...ir.visitor import any_statement
from .races import SimtError


class AsyncMmaRace(SimtError):
    """An operand tile overwritten, or an accumulator used, while a product still runs."""


class _State:
    """The products in flight in one block: per warp its open group and committed groups
    (group number, [(mem, buffer, flat elements)], accumulator buffers, statement)."""

    def __init__(self, block_mem):
        self.block_mem = block_mem
        self.open: dict = {}          # warp -> list of (mem, buffer, flat, frag, stmt)
        self.groups: dict = {}        # warp -> list of [number, entries]
        self.count: dict = {}         # warp -> groups committed so far


def enabled(kernel_body) -> bool:
    """Whether a kernel runs its products asynchronously (it commits them)."""
    return any_statement(kernel_body, lambda x: type(x) is n.WgmmaCommit)


def _state(ex):
    st = getattr(ex, "_async_mma", None)
    if st is None or st.block_mem is not ex.block_mem:
        st = ex._async_mma = _State(ex.block_mem)
    return st


def issue(ex, warp: int, reads, frag: n.Buffer) -> None:
    """Record a product of ``warp`` (``reads``: (mem, buffer, flat elements) of its tiles) in
    an asynchronous kernel (``ex.async_mma``)."""
    _state(ex).open.setdefault(warp, []).extend((m, b, f, frag, ex.cur) for m, b, f in reads)


def commit(ex, s) -> None:
    if ex.kernel is None or not getattr(ex, "async_mma", False):
        return
    st = _state(ex)
    for w in _active_warps(ex):
        entries = st.open.pop(w, [])
        k = st.count.get(w, 0)
        st.count[w] = k + 1
        if entries:
            st.groups.setdefault(w, []).append([k, entries])


def wait(ex, s: n.WgmmaWait) -> None:
    if ex.kernel is None or not getattr(ex, "async_mma", False):
        return
    st = _state(ex)
    for w in _active_warps(ex):
        limit = st.count.get(w, 0) - s.pending
        st.groups[w] = [g for g in st.groups.get(w, []) if g[0] >= limit]


def _active_warps(ex):
    nw = max(ex.T // 32, 1)
    mask = ex.mask[:nw * 32].reshape(nw, 32) if ex.T >= 32 else ex.mask.reshape(1, -1)
    return np.flatnonzero(mask.any(1)).tolist()


def _inflight(st):
    for w, groups in st.groups.items():
        for _, entries in groups:
            for e in entries:
                yield w, e
    for w, entries in st.open.items():
        for e in entries:
            yield w, e


def check_write(ex, m, b: n.Buffer, flat) -> None:
    """A write of elements ``flat`` of shared buffer ``b`` (``m``) by the active threads."""
    st = getattr(ex, "_async_mma", None)
    if st is None or st.block_mem is not ex.block_mem:
        return
    for w, (mm, buf, f, _, stmt) in _inflight(st):
        if mm is m:
            hit = np.intersect1d(np.asarray(flat).reshape(-1), f)
            if hit.size:
                element = tuple(int(x) for x in np.unravel_index(int(hit[0]), m.data.shape))
                raise AsyncMmaRace(
                    f"{ex._where()}: {b.scope.value} buffer {b.name!r} element {element} is written in\n"
                    f"    {ex._line(ex.cur)}\n  while the tensor-core product of warp {w} in\n    "
                    f"{ex._line(stmt)}\n  still reads it (no wgmma.wait_group covering its group came "
                    f"between them)", ex.kernel)


def check_fragment(ex, frag: n.Buffer, warps) -> None:
    """A wmma statement using accumulator ``frag`` in ``warps``: none of their products may
    still be writing it."""
    st = getattr(ex, "_async_mma", None)
    if st is None or st.block_mem is not ex.block_mem:
        return
    warps = set(int(w) for w in warps)
    for w, (_, _, _, fr, stmt) in _inflight(st):
        if w in warps and fr is frag:
            raise AsyncMmaRace(
                f"{ex._where()}: warp {w} uses the accumulator {frag.name!r} in\n    {ex._line(ex.cur)}\n"
                f"  while its tensor-core product in\n    {ex._line(stmt)}\n  may still write it (no "
                f"wgmma.wait_group covering its group came between them)", ex.kernel)


def check_block_end(ex) -> None:
    st = getattr(ex, "_async_mma", None)
    if st is None or st.block_mem is not ex.block_mem:
        return
    for w, (_, _, _, _, stmt) in _inflight(st):
        raise AsyncMmaRace(f"{ex._where()}: the block ends with the tensor-core product of warp {w} "
                           f"in\n    {ex._line(stmt)}\n  still in flight (no wgmma.wait_group covers it)",
                           ex.kernel)


def handlers(ex) -> dict:
    """The executor's statement handlers for WgmmaCommit and WgmmaWait."""
    return {n.WgmmaCommit: lambda s: commit(ex, s), n.WgmmaWait: lambda s: wait(ex, s)}


__all__ = ["AsyncMmaRace", "enabled", "issue", "commit", "wait", "check_write", "check_fragment",
           "check_block_end", "handlers"]
