"""``sort`` and ``argsort`` along an axis of static length: a bitonic sorting network.

The axis is padded to a power of two P (padding sorts after everything); each of
the network's log2(P) * (log2(P) + 1) / 2 layers is a pair of stages over the
array's shape (``sort``: the values, ``sort_idx``: their original positions), in
which element p keeps the smaller or the larger of itself and its partner
``p ^ j``.  The order is numpy's: NaN after every number, ties in index order (so
``argsort`` equals numpy's ``kind='stable'``; numpy's default kind orders ties the
same way on short axes).  O(n log^2 n) work and 2 stages per layer: meant for short
axes (at most ``MAX_SORT``), static lengths only.
"""
from __future__ import annotations

from .. import dtypes as dt
from ..errors import KernelError
from ..ir import make as mk
from ..ir import nodes as n
from .array import Array, norm_axis, static_value
from .ops import asarray, cast_to, materialize

B, U, C = n.BinOp, n.UnOp, n.CmpOp
#: the longest axis sorted (the network has 2 * 55 stages at 1024)
MAX_SORT = 1024


def _less(va, ia, vb, ib, nn: int):
    """(va, ia) before (vb, ib): padding (index >= nn) last, NaN after numbers, then index."""
    nlim = n.const(nn, dt.index)
    pa, pb = mk.compare(C.GE, ia, nlim), mk.compare(C.GE, ib, nlim)
    idx_lt = mk.compare(C.LT, ia, ib)
    lt, gt = mk.compare(C.LT, va, vb), mk.compare(C.LT, vb, va)
    if va.dtype.is_float:
        na, nb = mk.unary(U.ISNAN, va), mk.unary(U.ISNAN, vb)
        lt = mk.binary(B.OR, lt, mk.binary(B.AND, nb, mk.unary(U.NOT, na)))
        gt = mk.binary(B.OR, gt, mk.binary(B.AND, na, mk.unary(U.NOT, nb)))
    eq = mk.binary(B.AND, mk.unary(U.NOT, lt), mk.unary(U.NOT, gt))
    real = mk.binary(B.OR, lt, mk.binary(B.AND, eq, idx_lt))
    return mk.select(mk.binary(B.OR, pa, pb), mk.select(mk.binary(B.AND, pa, pb), idx_lt, pb), real)


def _network(a: Array, ax: int, nn: int, what: str):
    """(values, indices) arrays of ``a`` sorted along ``ax`` (length ``nn``, padded to P)."""
    P = 1 << (nn - 1).bit_length()
    kd_ = a.dtype if not a.dtype.is_bool else dt.uint8
    dims = a.dims[:ax] + (mk.as_expr(P),) + a.dims[ax + 1:]
    last = n.const(nn - 1, dt.index)

    def v0(idx):
        src = idx[:ax] + (mk.min_(idx[ax], last),) + idx[ax + 1:]
        return cast_to(a.at(src), kd_)

    V = Array(dims, kd_, v0, op=what, size=a.size_est + 2, depth=a.depth + 1)
    I = Array(dims, dt.index, lambda idx: cast_to(idx[ax], dt.index), op=what)
    k = 2
    while k <= P:
        j = k // 2
        while j >= 1:
            V, I = _layer(V, I, ax, k, j, P, nn, what)
            j //= 2
        k *= 2
    return V, I


def _layer(V, I, ax, k, j, P, nn, what):
    """One compare-exchange layer of the bitonic network, as two stages."""
    def parts(idx):
        p = idx[ax]
        lower = mk.compare(C.EQ, mk.mod(mk.floordiv(p, j), 2), 0)           # p < p ^ j
        q = mk.select(lower, mk.min_(mk.add(p, j), P - 1), mk.max_(mk.sub(p, j), 0))
        asc = mk.compare(C.EQ, mk.mod(mk.floordiv(p, k), 2), 0) if k < P else n.const(True)
        qidx = idx[:ax] + (q,) + idx[ax + 1:]
        vp, ip, vq, iq = V.at(idx), I.at(idx), V.at(qidx), I.at(qidx)
        q_less = _less(vq, iq, vp, ip, nn)
        take_min = mk.compare(C.EQ, cast_to(lower, dt.uint8), cast_to(asc, dt.uint8))
        take_q = mk.compare(C.EQ, cast_to(take_min, dt.uint8), cast_to(q_less, dt.uint8))
        return take_q, vp, ip, vq, iq

    def fv(idx):
        t, vp, _ip, vq, _iq = parts(idx)
        return mk.select(t, vq, vp)

    def fi(idx):
        t, _vp, ip, _vq, iq = parts(idx)
        return mk.select(t, iq, ip)

    nv = materialize(Array(V.dims, V.dtype, fv, op=what), name=what)
    ni = materialize(Array(I.dims, dt.index, fi, op=what), name=f"{what}_idx")
    return nv, ni


def _prepare(a, axis, what, kind, order):
    if order is not None:
        raise KernelError(f"{what}(order=...) (structured arrays) is not supported inside kernels",
                          hint="drop order=")
    a = asarray(a)
    if axis is None:
        a, axis = a.reshape(-1), 0
    if a.ndim == 0:
        raise KernelError(f"{what} of a 0-d array", hint="sort arrays of at least one dimension")
    ax = norm_axis(axis, a.ndim)
    nn = static_value(a.dims[ax])
    if nn is None:
        raise KernelError(f"{what} needs a static length along the axis (a sorting network is "
                          "built for it)", hint="@kd.kernel(specialize=True), or sort outside "
                          "the kernel")
    if nn > MAX_SORT:
        raise KernelError(f"{what} along an axis of {nn} elements: kdsl sorts axes of at most "
                          f"{MAX_SORT} (a sorting network: O(n log^2 n) work, 2 stages per layer)",
                          hint="sort outside the kernel")
    return a, ax, nn


def _cut(x: Array, ax: int, nn: int) -> Array:
    return x[(slice(None),) * ax + (slice(0, nn),)]


def sort(a, axis=-1, kind=None, order=None, *, stable=None):
    """numpy's ``sort`` along an axis of static length (NaN last)."""
    a, ax, nn = _prepare(a, axis, "sort", kind, order)
    if nn <= 1:
        return a
    V, _ = _network(a, ax, nn, "sort")
    out = _cut(V, ax, nn)
    return out if out.dtype is a.dtype else out.astype(a.dtype)


def argsort(a, axis=-1, kind=None, order=None, *, stable=None):
    """numpy's ``argsort`` along an axis of static length (ties in index order: stable)."""
    a, ax, nn = _prepare(a, axis, "argsort", kind, order)
    if nn <= 1:
        return Array(a.dims, dt.index, lambda idx: n.const(0, dt.index), op="argsort")
    _, I = _network(a, ax, nn, "argsort")
    return _cut(I, ax, nn)
