"""Attention on tensor cores: the default cuda schedule of a fused online-softmax chain.

The frontend's online-softmax rewrite (kdsl/frontend/online_softmax.py) turns
``softmax(q @ k^T * c) @ v`` into two online stages over the keys ``j`` -- ``L`` (the row's
running max and sum, sources ``(x, 1)``) and ``O`` (max and the weighted sum, sources
``(x, v[.., j, e])``) -- whose row values ``x`` read the scores ``S = q @ k^T`` (a float32 sum
over ``d`` of ``q[.., i, d] * k[.., j, d]``), and finishing stages dividing one by the other.
``find`` recognises that structure (stage objects, the online combiner by identity, index maps;
never names); ``schedule`` then gives the chain one kernel: one CTA per (batch x head, block of
query rows), the finishing stages inlined into the output, ``S``, ``L`` and ``O`` attached at
the query-block loop, and that loop tensorized with ``FlashOp``, a ``BlockIntrinsic`` whose
body is FlashAttention-2's (kdsl_cuda/codegen/flash.py: K/V tiles streamed through shared
memory by ``cp.async``, both products on ``mma.sync`` tensor cores, the softmax state in
registers, causal key tiles skipped).

Why a block intrinsic and not kdsl's primitives: the loop-nest form of the chain would need
(1) tensor-core accumulator fragments whose elements a schedule can read and rescale in
registers (``kd.intrin.wmma`` fragments are opaque: a fragment read element by element is an
error), (2) a row reduction over a fragment (max and sum across the 4 lanes of a quad), (3) an
accumulator reused as the next product's A operand without memory, and (4) the online
reduction cut into key blocks whose partial states combine by rescaling (a blocked form of
the tuple reduction, like ``rfactor`` with the online combine).  None exists; the op keeps
what the stage computes around the products generic instead: the row value ``x`` and the
finishing expression are the stages' own IR (rendered into the kernel, evaluated by the SIMT
interpreter), so scales, masks and epilogues are the user's.

Numerics (as FlashAttention): S and O accumulate in float32, the softmax state is float32, P
is rounded to the input's 16-bit type before ``P @ V``.  float32 inputs keep the generic
schedule (no float32 tensor-core path yet).
"""
from __future__ import annotations

from kdsl import dtypes as dt
from kdsl.frontend.online_softmax import FUSED
from kdsl.ir import make as mk
from kdsl.ir import nodes as n
from kdsl.ir.simplify import simplify
from kdsl.ir.visitor import Mutator, collect, substitute, uses_var

from . import analysis as A
from .attention_op import TILES, FlashOp, _ReplaceReads, tiles

_SIXTEEN = (dt.float16, dt.bfloat16)


class Match:
    """The stages of one attention chain: ``S`` (scores), ``L``/``O`` (online stages), ``F``
    (the output), ``fins`` (finishing stages to inline), the inputs ``q``/``k``/``v``, the row
    value ``x`` in ``O``'s variables and the output value ``final`` (reads of the online
    states replaced by the Vars ``o``, ``l``, ``m``)."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


def _producer(sched):
    out = {}
    for h in sched.stages:
        for t in h.stage.values:
            out[id(t)] = h.stage
    return out


def _online_combiner():
    """The online-softmax combiner of float32 states, when a trace has made it (it is made
    while tracing: outside a trace, none means no stage uses it)."""
    from kdsl.errors import KdslError
    from kdsl.frontend import online_softmax as osm
    try:
        return osm.reducer().combiner((dt.float32, dt.float32))
    except KdslError:
        return None


def _is_online(st) -> bool:
    b = st.body
    return (st.is_reduction and st.origin is FUSED and isinstance(b, n.Reduce)
            and b.dtype is dt.float32 and len(b.sources) == 2 and len(b.axes) == 1
            and b.condition is None and b.combiner is _online_combiner())


class _Inline(Mutator):
    """Reads of finishing stages replaced by their bodies (at the read's indices)."""

    def __init__(self, fins: dict):
        super().__init__()
        self.fins = fins

    def visit_TensorRead(self, r):
        st = self.fins.get(id(r.tensor))
        if st is None:
            return self.generic(r)
        body = substitute(st.body, {a.var: i for a, i in zip(st.axes, r.indices)})
        return self.visit(body)


def find(sched):
    """The attention chain of ``sched`` the flash schedule can take, or None."""
    prod = _producer(sched)
    readers = {}
    for h in sched.stages:
        for t in h.stage.reads():
            readers.setdefault(id(t), []).append(h.stage)
    for t in sched.output_tensors():
        F = prod.get(id(t))
        if F is None or F.is_reduction or len(F.values) != 1:
            continue
        m = _match(sched, F, prod, readers)
        if m is not None:
            return m
    return None


def _match(sched, F, prod, readers):
    # the epilogue: F with the finishing stages (online_softmax elementwise) it reads inlined
    fins, todo = {}, [F]
    while todo:
        s = todo.pop()
        for t in s.reads():
            p = prod.get(id(t))
            if p is not None and not p.is_reduction and p.origin is FUSED \
                    and id(t) not in fins:
                fins[id(t)] = p
                todo.append(p)
    if not fins:
        return None
    inside = {id(F)} | {id(p) for p in fins.values()}
    for p in fins.values():
        if any(id(r) not in inside for r in readers.get(id(p.output), ())):
            return None             # a finishing stage read elsewhere (logsumexp): not ours
    final = _Inline(fins).visit(F.body)
    reads = collect(final, lambda x: isinstance(x, n.TensorRead))
    onl = []
    for r in reads:
        p = prod.get(id(r.tensor))
        if p is None or not _is_online(p):
            return None
        if p not in onl:
            onl.append(p)
    if len(onl) != 2:
        return None
    L = next((o for o in onl if mk.is_const(o.body.sources[1], 1.0)), None)
    O = next((o for o in onl if o is not L), None)
    if L is None or O is None or any(id(r) not in inside for o in onl
                                     for r in readers.get(id(o.values[0]), ()) +
                                     readers.get(id(o.values[1]), ())):
        return None
    nb = len(F.axes) - 2
    if nb < 0 or nb > 2 or len(O.axes) != len(F.axes) or len(L.axes) != len(F.axes):
        return None
    fv = [a.var for a in F.axes]
    ov = [a.var for a in O.axes]
    j = O.reduce_axes[0].var
    # the output reads the states at its own (batch, row, column) / (batch, row, 0)
    o_var, l_var, m_var = n.var("o", dt.float32), n.var("l", dt.float32), n.var("m", dt.float32)
    repl = {}
    for r in reads:
        if r.tensor is O.values[1] or r.tensor is O.values[0]:
            if list(r.indices) != fv:
                return None
            repl[r] = o_var if r.tensor is O.values[1] else m_var
        else:
            ok = list(r.indices[:-1]) == fv[:-1] and (
                mk.is_const(r.indices[-1], 0) and mk.is_const(L.axes[-1].dom.extent, 1))
            if not ok:
                return None
            repl[r] = l_var if r.tensor is L.values[1] else m_var
    final = _ReplaceReads(repl).visit(final)
    if any(uses_var(final, v) for v in fv):
        return None
    # O's sources: (x, float32(v[batch.., j, e])); L's x is O's renamed
    x, hv = O.body.sources
    if not (isinstance(hv, n.Cast) and hv.dtype is dt.float32 and isinstance(hv.a, n.TensorRead)):
        return None
    v = hv.a.tensor
    vb = _batch_reads(hv.a.indices, ov, nb, [j, ov[-1]])
    if v.stage is not None or vb is None:
        return None
    ren = {a.var: b.var for a, b in zip(L.axes, O.axes)}
    ren[L.reduce_axes[0].var] = j
    if substitute(L.body.sources[0], ren) != x:
        return None
    lr, orr = L.reduce_axes[0].dom, O.reduce_axes[0].dom
    if substitute(lr.extent, ren) != orr.extent or substitute(lr.min, ren) != orr.min \
            or not mk.is_const(orr.min, 0):
        return None
    # x reads only the scores, at (batch.., i, j); otherwise only i, j and sizes
    sreads = collect(x, lambda e: isinstance(e, n.TensorRead))
    S = prod.get(id(sreads[0].tensor)) if sreads else None
    if S is None or any(r.tensor is not S.output or list(r.indices) != ov[:nb + 1] + [j]
                        for r in sreads):
        return None
    bare = _ReplaceReads({r: n.var("acc", dt.float32) for r in sreads}).visit(x)
    if uses_var(bare, ov[-1]) or any(uses_var(bare, a) for a in ov[:nb]):
        return None
    qk = _scores(S, nb)
    if qk is None:
        return None
    q, k, kb = qk
    if not (q.dtype is k.dtype is v.dtype and q.dtype in _SIXTEEN and F.dtype is q.dtype):
        return None
    if any(id(r) not in (id(L), id(O)) for r in readers.get(id(S.output), ())):
        return None
    causal = _key_bound(orr.extent, ov[nb])
    if causal is None:
        return None
    return Match(S=S, L=L, O=O, F=F, fins=list(fins.values()), q=q, k=k, v=v, x=x, j=j,
                 shared={id(k): kb, id(v): vb},
                 final=final, o=o_var, l=l_var, m=m_var, nb=nb, keys=causal[0],
                 causal_end=causal[1])


def _scores(S, nb):
    """(q, k) when ``S`` is ``sum over d of f32(q[b.., i, d]) * f32(k[b.., j, d])``."""
    b = S.body
    if not (S.is_reduction and isinstance(b, n.Reduce) and b.combiner.kind is n.CombinerKind.SUM
            and len(b.sources) == 1 and len(b.axes) == 1 and b.condition is None
            and S.dtype is dt.float32 and len(S.axes) == nb + 2):
        return None
    e = b.sources[0]
    if not (isinstance(e, n.Binary) and e.op is n.BinOp.MUL):
        return None
    ops = []
    for f in (e.a, e.b):
        if not (isinstance(f, n.Cast) and f.dtype is dt.float32 and isinstance(f.a, n.TensorRead)):
            return None
        ops.append(f.a)
    sv = [a.var for a in S.axes]
    d = b.axes[0].var
    if not mk.is_const(b.axes[0].dom.min, 0):
        return None
    for a, c in (ops, ops[::-1]):
        kb = _batch_reads(c.indices, sv, nb, [sv[-1], d])
        if list(a.indices) == sv[:nb + 1] + [d] and kb is not None and \
                a.tensor.stage is None and c.tensor.stage is None:
            return a.tensor, c.tensor, kb
    return None


def _batch_reads(indices, axes, nb, tail):
    """Per batch axis, whether a read at ``indices`` broadcasts it (index 0 of a dim of size
    1: one k/v head shared by every query head), when the read is ``(batch.., *tail)``; else
    None."""
    if len(indices) != nb + len(tail) or list(indices[nb:]) != list(tail):
        return None
    out = []
    for i, a in zip(indices[:nb], axes[:nb]):
        if i is a:
            out.append(False)
        elif mk.is_const(i, 0):
            out.append(True)
        else:
            return None
    return tuple(out)


def _strip_max0(e):
    while isinstance(e, n.Binary) and e.op is n.BinOp.MAX and mk.is_const(e.b, 0):
        e = e.a
    return e


def _key_bound(extent, i):
    """(key count, causal offset c or None) of the keys' extent: free of the row ``i``, or
    ``min(keys, i + c)`` (online_softmax's ``_masked_tail``); None when neither."""
    if not uses_var(extent, i):
        return extent, None
    if isinstance(extent, n.Binary) and extent.op is n.BinOp.MIN:
        for a, b in ((extent.a, extent.b), (extent.b, extent.a)):
            if uses_var(a, i):
                continue
            t = _strip_max0(b)
            c = simplify(mk.sub(t, i))          # t = i + c, c free of i
            if not uses_var(c, i):
                return a, c
    return None


# ----------------------------------------------------------------------- the schedule


def dims(sched, m) -> tuple | None:
    """The padded head dimensions the kernel is compiled for: a power of two from
    ``flash.HEAD_DIMS`` covering each size that the size classes of ``d`` (q, k) and ``dv``
    (v) allow (q, k and v padded alike: a class ``[2^k, 2^(k+1))`` gives ``2^k`` and
    ``2^(k+1)``); None when a size may exceed the largest (or is unknown)."""
    from kdsl_cuda.codegen.flash import HEAD_DIMS
    lo, hi = None, 0
    for ax in (m.S.reduce_axes[0], m.O.axes[-1]):
        r = A.extent_range(sched, ax)
        if r is None:
            return None
        lo = r[0] if lo is None else min(lo, r[0])
        hi = max(hi, r[1])
    if hi > HEAD_DIMS[-1]:
        return None
    lo = max(lo, 1)
    out = [p for p in HEAD_DIMS if p >= lo and (p == HEAD_DIMS[0] or p // 2 < hi)]
    # only those some size in [lo, hi] pads to: the smallest power >= lo, and up to hi's
    need = {next(p for p in HEAD_DIMS if p >= x) for x in (lo, hi)}
    if max(need) <= 32:     # tiny heads: one function (NVRTC time over their speed)
        return (max(need),)
    return tuple(p for p in out if min(need) <= p <= max(need))


def schedule(sched, m, hd) -> None:
    """Apply the flash schedule to the chain ``m`` (see the module docstring)."""
    for f in m.fins:
        sched[f.name].compute_inline()
    h = sched[m.F.name]
    axes = list(h.leaf)
    batch, i, e = axes[:m.nb], axes[m.nb], axes[m.nb + 1]
    # the tiles by head dim, and half the rows a CTA when the GPU would be short of CTAs
    rows = A.extent_range(sched, m.F.axes[m.nb])
    blocks = 1
    for ax in m.F.axes[:m.nb]:
        r = A.extent_range(sched, ax)
        blocks = None if r is None or blocks is None else blocks * r[0]
    tl = tiles(hd[0], None if rows is None else rows[0], blocks)
    bm = tl[0]
    io, ii = h.split(i, bm)
    # query blocks along x (consecutive CTAs share a head's K/V in L2), heads along y,
    # batch along z (each under the 65535 limit of y and z)
    if batch:
        h.reorder(*batch, io, ii, e)
        for ax, tag in zip(reversed(batch), ("blockIdx.y", "blockIdx.z")):
            h.bind(ax, tag)
    by = tuple(batch)
    h.bind(io, "blockIdx.x")
    for st in (m.S, m.L, m.O):
        sched[st.name].compute_at(h, io)
    h.tensorize(io, FlashOp(m, hd, tl, by))


__all__ = ["Match", "find", "schedule", "dims", "FlashOp", "TILES"]
