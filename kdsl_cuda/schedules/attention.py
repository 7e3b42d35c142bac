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

import numpy as np

from kdsl import dtypes as dt
from kdsl.ir import make as mk
from kdsl.ir import nodes as n
from kdsl.ir.simplify import simplify
from kdsl.ir.visitor import Mutator, collect, substitute, uses_var
from kdsl.schedule.intrin import BlockIntrinsic

from . import analysis as A

#: query rows, keys per streamed tile and warps of the block function, by (padded) head
#: dimension (H100/H200).  A CTA runs the rows of the first (exact-size) function; a
#: covering function of fewer rows runs as many times as that takes.
#: (ptxas, sm_90: d=64 128x64 244 registers; d=128 128x64 spills 88 bytes, 64x64 174
#: registers; the device sweep of .devrun/flashgpu/bench.py decides between them)
TILES = {16: (64, 16, 4), 32: (64, 32, 4), 64: (128, 64, 4), 128: (64, 64, 4),
         256: (64, 32, 4)}
#: the tiles of a wider function that covers the rest of a size class (d = 65..127 on the
#: 128-wide one): less code (NVRTC time), padded sizes are the rare ones
COVER = (64, 32, 4)

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
    return (st.is_reduction and st.origin == "online_softmax" and isinstance(b, n.Reduce)
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
            if p is not None and not p.is_reduction and p.origin == "online_softmax" \
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


class _ReplaceReads(Mutator):
    def __init__(self, repl: dict):
        super().__init__()
        self.repl = repl

    def visit_TensorRead(self, r):
        return self.repl.get(r, r)


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
    bm = TILES[hd[0]][0]
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
    h.tensorize(io, FlashOp(m, hd, bm, by))


def _cond_bound(cond, i, j):
    """``c`` with ``cond`` equivalent to ``j < i + c`` (``i >= j + k``: c = 1 - k, ``>``:
    -k; written either way round), else None."""
    if not isinstance(cond, n.Compare):
        return None
    flip = {n.CmpOp.LE: n.CmpOp.GE, n.CmpOp.LT: n.CmpOp.GT}
    op, a, b = (flip[cond.op], cond.b, cond.a) if cond.op in flip else (cond.op, cond.a, cond.b)
    if op not in (n.CmpOp.GE, n.CmpOp.GT) or a is not i:
        return None
    off = simplify(mk.sub(b, j))
    if uses_var(off, j) or uses_var(off, i):
        return None
    c = mk.sub(mk.as_expr(1 if op is n.CmpOp.GE else 0), off)
    return simplify(c)


def _same(a, b) -> bool:
    if a is None or b is None:
        return False
    a, b = simplify(mk.cast(a, dt.int64)), simplify(mk.cast(b, dt.int64))
    if mk.is_const(a) and mk.is_const(b):
        return a.value == b.value
    return a == b


# ----------------------------------------------------------------------- the op


def _hoist(e, keep: set, consts: list):
    """``e`` with every maximal subtree that uses none of ``keep`` (and is not a constant)
    replaced by a Var appended to ``consts`` as (Var, subtree)."""
    if isinstance(e, n.Const):
        return e
    if not any(uses_var(e, v) for v in keep):
        for v, x in consts:
            if x == e:
                return v
        c = n.var(f"c{len(consts)}", e.dtype)
        consts.append((c, e))
        return c
    if isinstance(e, (n.Var,)):
        return e
    return _Rebuild(keep, consts).visit_children(e)


class _Rebuild(Mutator):
    def __init__(self, keep, consts):
        super().__init__()
        self.keep, self.consts = keep, consts

    def visit_children(self, e):
        return self.generic(e)

    def visit(self, node):
        if isinstance(node, n.Expr):
            return _hoist(node, self.keep, self.consts)
        return super().visit(node)


class FlashOp(BlockIntrinsic):
    """The flash-attention block (see the module docstring): built per schedule from a Match."""

    def __init__(self, m, hd, bm, by):
        self.m, self.bm, self.by = m, bm, by
        self.dims = hd
        self.causal = m.causal_end is not None
        self.bf16 = m.q.dtype is dt.bfloat16
        self.acc, self.i, self.j = (n.var("acc", dt.float32), n.var("i", dt.int64),
                                    n.var("j", dt.int64))
        ov = [a.var for a in m.O.axes]
        sread = collect(m.x, lambda e: isinstance(e, n.TensorRead))[0]
        x = _ReplaceReads({sread: self.acc}).visit(m.x)
        x = substitute(x, {ov[m.nb]: self.i, m.j: self.j})
        consts = []
        self.score = _hoist(x, {self.acc, self.i, self.j}, consts)
        self.final = _hoist(m.final, {m.o, m.l, m.m}, consts)
        self.consts = consts
        self.factor = self._pair_factor(m)
        self.name = "kd_flash"     # one chain per graph (find): no clash in a module

    def __str__(self) -> str:
        return "flash_attention"

    def __repr__(self) -> str:
        return f"FlashOp(rows={self.bm}, head_dims={self.dims}, causal={self.causal})"

    def _pair_factor(self, m):
        """The factor ``c`` when the row value is ``float32(T(acc) * c)`` (T the inputs'
        16-bit type), under a causal ``where`` exactly the kernel's key bound (which masks
        the same keys): the CUDA kernel then makes row values two at a time; else None."""
        e = self.score
        if isinstance(e, n.Cast) and e.dtype is dt.float32:
            e = e.a
        if isinstance(e, n.Select):
            if not (self.causal and mk.is_const(e.f) and e.f.value == float("-inf")
                    and _same(_cond_bound(e.cond, self.i, self.j), m.causal_end)):
                return None
            e = e.t
        t = m.q.dtype
        if not (isinstance(e, n.Binary) and e.op is n.BinOp.MUL and e.dtype is t):
            return None
        for a, c in ((e.a, e.b), (e.b, e.a)):
            if isinstance(a, n.Cast) and a.dtype is t and a.a is self.acc and c.dtype is t:
                if isinstance(c, n.Var) and any(c is v for v, _ in self.consts):
                    return c
                if isinstance(c, n.Const):
                    return c
        return None

    # --------------------------------------------------------------- IR
    def _buffer(self, func, t):
        for b in func.buffers:
            if b.name == t.name:
                return b
        from kdsl.errors import InternalCompilerError
        raise InternalCompilerError(f"flash attention: no buffer for {t.name}")

    def _strides(self, b, t):
        """(batch, head, row, column) strides of ``b`` (tensor ``t``; elements), Exprs; 0 for
        missing and broadcast batch axes."""
        nb = self.m.nb
        if b.strides is not None:
            st = list(b.strides)
        else:
            st, acc = [], mk.as_expr(1)
            for e in reversed(b.shape):
                st.insert(0, acc)
                acc = mk.mul(acc, e)
        lead = st[:-2]
        shared = self.m.shared.get(id(t), (False,) * nb)
        lead = [mk.as_expr(0) if sh else x for x, sh in zip(lead, shared)]
        lead = [mk.as_expr(0)] * (2 - len(lead)) + lead
        return lead + st[-2:]

    def build(self, loop, func):
        m = self.m
        Q, K, V, O = (self._buffer(func, t) for t in (m.q, m.k, m.v, m.F.output))
        fa = m.F.axes
        heads = fa[m.nb - 1].dom.extent if m.nb >= 1 else mk.as_expr(1)
        if m.nb == 1:       # one batch axis: it is the "head", batch stride 0
            heads = fa[0].dom.extent
        by = mk.as_expr(0)      # batch x head, flat: b * heads + h
        for ax in self.by:
            by = mk.add(mk.mul(by, ax.dom.extent), ax.var) if by is not None else ax.var
        nq = fa[m.nb].dom.extent
        d = m.S.reduce_axes[0].dom.extent
        dv = fa[-1].dom.extent
        ce = m.causal_end if self.causal else mk.as_expr(0)
        strides = [s for b, t in zip((Q, K, V, O), (m.q, m.k, m.v, m.F.output))
                   for s in self._strides(b, t)]
        nwords = max(self._cfg(p).smem_bytes for p in self.dims) // 2
        smem = n.Buffer(f"{self.name}_smem", dt.float16, (mk.as_expr(nwords),), scope=n.Scope.SHARED)
        args = (self, smem, Q, K, V, O, loop.var, by, heads, nq, m.keys, d, dv,
                mk.cast(ce, dt.int64), *strides, *(c for c, _ in self.consts))
        threads = max(self._cfg(p).threads for p in self.dims)
        tx = n.var(f"{self.name}_tx", dt.int64)
        body = n.For(tx, mk.as_expr(0), mk.as_expr(threads), n.ForKind.BOUND,
                     n.Intrinsic("flash_attention", args), n.ThreadTag.THREAD_X)
        body = n.Allocate(smem, body)
        for c, e in reversed(self.consts):
            body = n.LetStmt(c, e, body)
        return body

    def _cfg(self, p):
        from kdsl_cuda.codegen.flash import FlashConfig
        bm, bn, nw = TILES[p] if p == self.dims[0] else COVER
        return FlashConfig(p, p, bf16=self.bf16, bm=bm, bn=bn, nw=nw, causal=self.causal)

    # --------------------------------------------------------------- SIMT
    def simt(self, ex, s) -> None:
        """The block's rows in numpy, tile by tile as the CUDA kernel runs them."""
        from kdsl.numerics.numpy_eval import round_bf16
        (_, _, Q, K, V, O, bx, by, heads, nq, nk, d, dv, ce, *rest) = s.args
        g = lambda e: ex._uniform(e, "a flash attention argument")   # noqa: E731
        bx, by, heads, nq, nk, ce = (g(e) for e in (bx, by, heads, nq, nk, ce))
        lead = (by // heads, by % heads) if self.m.nb == 2 else (by,) if self.m.nb == 1 else ()
        def at(t):
            sh = self.m.shared.get(id(t), (False,) * len(lead))
            return tuple(0 if b else x for x, b in zip(lead, sh))
        q = np.asarray(ex.mem[Q].data[lead], np.float32)
        k = np.asarray(ex.mem[K].data[at(self.m.k)], np.float32)
        v = np.asarray(ex.mem[V].data[at(self.m.v)], np.float32)
        out = ex.mem[O].data[lead]
        rows = np.arange(bx * self.bm, min(bx * self.bm + self.bm, nq))
        if rows.size == 0:
            return
        kend = nk if not self.causal else min(nk, int(rows[-1]) + ce)
        keys = np.arange(max(kend, 0))
        acc = q[rows] @ k[keys].T if keys.size else np.zeros((rows.size, 0), np.float32)
        env = ex.env
        saved = {c: env.get(c) for c, _ in self.consts}
        env.update({self.acc: acc.astype(np.float32), self.i: rows[:, None].astype(np.int64),
                    self.j: keys[None, :].astype(np.int64)})
        x = np.broadcast_to(np.asarray(ex.ev(self.score), np.float32), acc.shape).copy()
        if self.causal:
            x[keys[None, :] >= rows[:, None] + ce] = -np.inf
        rnd = round_bf16 if self.bf16 else (lambda a: a.astype(np.float16).astype(np.float32))
        mx = np.full(rows.size, -np.inf, np.float32)
        ls = np.zeros(rows.size, np.float32)
        o = np.zeros((rows.size, v.shape[-1]), np.float32)
        bn = self._cfg(self.dims[0]).bn
        with np.errstate(invalid="ignore", over="ignore"):
            for n0 in range(0, keys.size, bn):
                xs = x[:, n0:n0 + bn]
                new = np.maximum(mx, xs.max(axis=1))
                alpha = np.where(mx == new, np.float32(1), np.exp(mx - new)).astype(np.float32)
                p = np.where((new == -np.inf)[:, None], np.float32(0),
                             np.exp(xs - new[:, None])).astype(np.float32)
                ls = ls * alpha + p.sum(axis=1, dtype=np.float32)
                o = o * alpha[:, None] + rnd(p) @ v[n0:n0 + xs.shape[1]]
                mx = new
            env.update({self.m.o: o, self.m.l: ls[:, None], self.m.m: mx[:, None]})
            res = np.broadcast_to(np.asarray(ex.ev(self.final)), o.shape)
        out[rows] = res
        for c in (self.acc, self.i, self.j, self.m.o, self.m.l, self.m.m):
            env.pop(c, None)
        for c, val in saved.items():
            if val is not None:
                env[c] = val

    # --------------------------------------------------------------- CUDA
    def _factor_text(self, pr):
        if self.factor is None:
            return None
        return pr(mk.cast(self.factor, dt.float32))

    def cuda(self, kp, s, d) -> None:
        """Print the call of the block function (and add it to the module's helpers)."""
        from kdsl_cuda.codegen import flash
        from kdsl_cuda.codegen.expr import ExprPrinter
        names = {self.acc: "acc", self.i: "i", self.j: "j", self.m.o: "o", self.m.l: "l",
                 self.m.m: "m"}
        names.update({c: f"c{k}" for k, (c, _) in enumerate(self.consts)})

        def var_name(v, narrow=False):
            return names[v]

        def no_load(e):
            raise AssertionError("flash attention expressions read no memory")

        pr = ExprPrinter(var_name, no_load)
        # 16-bit values print as rounded floats: the stored bits are their conversion
        score = pr(self.score)
        final = f"{'kd_f2bf' if self.bf16 else 'kd_f2h'}({pr(self.final)})"
        from kdsl_cuda.codegen.types import ctype
        consts = [(ctype(c.dtype), f"c{k}") for k, (c, _) in enumerate(self.consts)]
        kp.helpers.setdefault("kd_flash_common", flash.COMMON)
        (_, smem, Q, K, V, O, bx, by, heads, nq, nk, dd, dv, ce, *rest) = s.args
        strides, cargs = rest[:16], rest[16:]
        vals = [kp.expr(e) for e in (bx, by, heads, nq, nk, dd, dv, ce)]
        if self.causal:     # the longest rows (most keys) first: no tail of heavy blocks
            vals[0] = f"(((int)gridDim.x - 1) - {vals[0]})"
        args = ", ".join([kp._buf(b) for b in (Q, K, V, O)] + [f"(uint16_t*){kp._buf(smem)}"]
                         + ["@BX@"] + vals[1:3] + ["1"] + vals[3:] + [kp.expr(e) for e in strides]
                         + [kp.expr(c) for c in cargs])
        first = True
        for p in self.dims:
            cfg = self._cfg(p)
            fname = f"{self.name}_{p}"
            kp.helpers.setdefault(fname, flash.block_function(
                cfg, fname, score, final, consts, factor=self._factor_text(pr)))
            cond = f"{vals[5]} <= {p} && {vals[6]} <= {p}"
            kp.emit(d, f"{'' if first else 'else '}if ({cond}) {{")
            rep = self.bm // cfg.bm      # a CTA's rows in calls of cfg.bm rows
            if rep * cfg.bm != self.bm:
                from kdsl.errors import InternalCompilerError
                raise InternalCompilerError(f"flash attention: {cfg.bm}-row function in "
                                            f"{self.bm}-row blocks")
            if rep == 1:
                kp.emit(d + 1, f"{fname}_block({args.replace('@BX@', vals[0])});")
            else:       # one call site in a loop: the function is inlined once
                call = args.replace("@BX@", f"({vals[0]}) * {rep} + kd_fl_r")
                kp.emit(d + 1, f"for (int kd_fl_r = 0; kd_fl_r < {rep}; ++kd_fl_r) {{")
                kp.emit(d + 2, f"{fname}_block({call});")
                kp.emit(d + 2, "__syncthreads();")
                kp.emit(d + 1, "}")
            kp.emit(d, "}")
            first = False


__all__ = ["FlashOp", "Match", "find", "schedule", "dims", "TILES"]
