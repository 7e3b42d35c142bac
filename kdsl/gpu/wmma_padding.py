"""Whole-tile fragment loads from padded caches (helpers of the ``tensorize`` pass, not a pass).

A fragment load clips its tile to the valid part (``WmmaLoad.extents``) and zero-fills the
rest.  When it reads a padded cache (``cache_read(pad=True)``: every element of its region
written, zero beyond the source array's edges), the clipped part of the tile already holds
those zeros in memory, so the load may read the whole tile: one unconditional ``ldmatrix``
instead of a run-time test and an element-wise fallback.  That is exact where

* the whole tile lies inside the cache's allocation (proved from the enclosing loops' ranges),
  so nothing outside the written region is read; and
* the tile was clipped only at the source array's edges, which holds for the clips tensorize
  reads off a load nest (its guards are the cache's domain bounds, and tile splits of a
  multiple of the fragment size never cut a fragment);
* along k, the accumulation's own reduction end (``klimit``) is not before the array's end:
  products beyond the reduction's end must be zero, and the memory holds zeros only beyond
  the array's (``covers``).  Where that cannot be shown (``C[i, j] = sum(A[i, r] * B[r, j])``
  with B's rows and A's columns separate sizes), the load keeps the k clip and is marked
  ``whole``: the backend reads the whole tile and zeroes the clipped part in registers.
"""
from __future__ import annotations

import dataclasses

from ..ir import make as mk
from ..ir import nodes as n
from ..ir.simplify import prove, simplify
from ..ir.visitor import substitute


def loop_ranges(loops) -> dict:
    """{var: (first, last)} of the For loops ``loops`` (for ``prove``)."""
    return {f.var: (f.min, simplify(mk.sub(mk.add(f.min, f.extent), 1))) for f in loops}


def widen(load: n.WmmaLoad, full: tuple, padded, ranges: dict):
    """(``load`` reading its whole tile, the clipped extents it had) when ``load`` reads a
    padded cache and the whole tile fits the cache's allocation; else (``load``, None)."""
    if load.src not in padded or all(type(e) is n.Const and e.value == f
                                     for e, f in zip(load.extents, full)):
        return load, None
    rows, cols = full
    span = (rows, cols) if load.layout is n.WmmaLayout.ROW_MAJOR else (cols, rows)
    shape = load.src.shape
    for d, want in zip((len(shape) + load.dims[0], len(shape) + load.dims[1]), span):
        if prove(mk.compare(n.CmpOp.LE, mk.add(load.origin[d], want), shape[d]), ranges) is not True:
            return load, None
    whole = tuple(mk.as_expr(f) for f in full)
    return dataclasses.replace(load, extents=whole, whole=True), load.extents


def terms(e) -> list:
    """The operands of a nest of ``min``s (``[e]`` when ``e`` is not one)."""
    if type(e) is n.Binary and e.op is n.BinOp.MIN:
        return terms(e.a) + terms(e.b)
    return [e]


def covers(klimit, clipped_k, size: int, ranges: dict, equal=None) -> bool:
    """Whether a whole-tile load whose memory is zero from ``clipped_k`` on (along k) is zero
    wherever the accumulation stops first, at ``klimit``: ``min(size, klimit) >=
    min(size, clipped_k)`` for every iteration.  ``equal``: {Var: Var} sizes a call checks
    equal (the operands' inner dimensions)."""
    if equal:
        klimit, clipped_k = substitute(klimit, equal), substitute(clipped_k, equal)
    # min(size, t1, t2, ..) >= min(size, c1, ..) when every t_i below size is >= some c_j
    bound = mk.as_expr(size)
    for t in terms(klimit):
        if prove(mk.compare(n.CmpOp.GE, t, bound), ranges) is True:
            continue
        if not any(t == c or prove(mk.compare(n.CmpOp.GE, t, c), ranges) is True
                   for c in terms(clipped_k)):
            return False
    return True
