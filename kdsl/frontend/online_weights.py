"""Sequential-host rewrites of a fused attention chain (kdsl/frontend/online_softmax.py):
the weights as a stage of their own, the row sums as a max and a plain sum.

Used by the cpu backend's blocked schedule (kdsl_cpu/schedules/attention.py) after
``online_placement._final_max`` has weighted the contraction by the row's final max.  Both
functions mutate the *schedule's* copies of the stages (the traced graph, which GPU
schedules read, keeps the one-pass online form) and keep every result numpy's: the weights
are ``exp(x - max)`` of the same row values, the sums plain float sums of them.
"""
from __future__ import annotations

from ..graph import Stage, topological
from ..ir import make as mk
from ..ir import nodes as n
from ..ir.visitor import collect, substitute, uses_var
from .context import MemoMutator
from .online_placement import _TWO_PASS, Chain
from .online_softmax import FUSED, _Retarget, reducer, unmasked


class _MaxRead(MemoMutator):
    """Reads of a contraction's running max become reads of the final max it was weighted
    by (``materialize_weights``)."""

    def __init__(self, old, axes, final):
        super().__init__()
        self.old, self.axes, self.final = old, axes, final

    def visit_TensorRead(self, r):
        r2 = self.generic(r)
        if r2.tensor is not self.old:
            return r2
        mapping = {ax.var: i for ax, i in zip(self.axes, r2.indices)}
        return n.TensorRead(self.final.dtype, self.final.tensor,
                            tuple(substitute(i, mapping) for i in self.final.indices))


def _weight(x, m, rax, masked):
    """``exp(x - m)``: without the causal mask where ``rax`` ends at it (``unmasked``), or
    (``masked``) ``where(mask, exp(s - m), 0)``: zero past the mask, so a reader may sum over
    more keys than the row's (a block's) and add exact zeros."""
    if masked and unmasked(x, rax) is not x:
        return mk.select(x.cond, mk.unary(n.UnOp.EXP, mk.sub(x.t, m)), mk.as_expr(0.0, m.dtype))
    return mk.unary(n.UnOp.EXP, mk.sub(unmasked(x, rax), m))


def materialize_weights(sched, c: Chain, masked: bool = False) -> list:
    """On a sequential host, after ``_final_max``: a contraction's weights ``exp(x - m)``
    (``m`` the row's final max) become a stage of their own, computed once per score
    (``P``, a ``cache_read`` of the scores whose body is the weight), and the contraction a
    plain sum ``sum_j P[.., j] * h_j`` (one value: its running max, read only by the NaN
    rule of the finishing stages, is the final max itself, which they read instead).  The
    contraction is then an ordinary product (``P @ v``) any matmul schedule can tile.
    ``masked``: the weights keep a causal mask as zeros (``_weight``).
    Returns (the schedule of the weight stage, the contraction) pairs.  Mutates the schedule's copies of the
    stages (the traced graph is shared); a stage not of that form is left as it is."""
    from .reduce import combiner as builtin
    made = []
    sids = {id(p) for p in c.producers}
    for o in c.online:
        b = o.body
        if not (o.is_reduction and b.combiner is _TWO_PASS.get(o.dtype)):
            continue
        x, w = b.sources
        if not (isinstance(w, n.Binary) and w.op is n.BinOp.MUL and isinstance(w.a, n.Unary)
                and w.a.op is n.UnOp.EXP and isinstance(w.a.a, n.Binary)
                and w.a.a.op is n.BinOp.SUB and w.a.a.a is x):
            continue
        m, h = w.a.a.b, w.b
        reads = collect(
            x, lambda e: isinstance(e, n.TensorRead) and e.tensor.stage is not None
            and id(e.tensor.stage) in sids)
        if len({id(r.tensor) for r in reads}) != 1 or not isinstance(m, n.TensorRead):
            continue
        sc = reads[0]
        own = [ax.var for ax in o.axes] + [ax.var for ax in o.reduce_axes]
        idx = sc.indices
        if (sc.tensor.dtype is not o.dtype or not all(isinstance(i, n.Var) for i in idx)
                or len(set(idx)) != len(idx)):
            continue
        weight = _weight(x, m, b.axes[0], masked)
        if any(uses_var(weight, v) and v not in idx for v in own):
            continue
        readers = [g.stage for g in sched.stages if o.values[0] in g.stage.reads()]
        if any(r.is_reduction or (r not in c.group and r is not c.F) for r in readers):
            continue
        ph = sched.cache_read(sc.tensor, "local", readers=[sched[o.name]])
        P = ph.stage
        mapping = {i: ax.var for i, ax in zip(idx, P.axes)}
        P.body = mk.cast(substitute(weight, mapping), P.dtype)
        src = mk.mul(n.TensorRead(P.dtype, P.output, idx), h)
        o.body = n.Reduce(o.dtype, builtin("sum", o.dtype), (src,), b.axes, None, 0)
        fix = _MaxRead(o.values[0], o.axes, m)
        for r in readers:
            r.body = fix.visit(r.body)
        o.values = (o.output,)
        made.append((ph, o))
    return made


def max_then_sum(sched, c: Chain, weights: list) -> list:
    """On a sequential host, after ``materialize_weights``: a plain online sum ``p.sum()``
    whose running max the weight stages read becomes two plain reductions, the row's max
    (a new stage ``<R>.max``, read by the weights and by the NaN rule of the finishing
    stages) and the sum of the weights themselves (``sum_j P[.., j]``): one exp per score
    (the weights'), none in the sum, and both reductions vectorise as ordinary ones.
    Returns the schedules of the max stages made.  Mutates the schedule's copies of the
    stages; re-sorts the schedule's stages (the sum now reads the weights)."""
    from ..ir.visitor import substitute as subst
    from .reduce import combiner as builtin
    made = []
    wstages = [w.stage for w, _ in weights]
    for L in c.online:
        b = L.body
        if not (L.is_reduction and b.combiner is reducer().combiner((L.dtype, L.dtype))
                and len(b.sources) == 2 and mk.is_const(b.sources[1], 1.0)):
            continue
        ps = [p for p in wstages if L.values[0] in p.reads()]
        if not ps or len(ps) != len(wstages):
            continue
        x = b.sources[0]
        reads = collect(x, lambda e: isinstance(e, n.TensorRead)
                        and any(e.tensor in p.reads() for p in ps))
        if len({id(r.tensor) for r in reads}) != 1 or len(ps) != 1:
            continue
        P, sc = ps[0], reads[0]
        if any(sc.tensor is not r.tensor for r in reads) or sc.tensor not in P.reads():
            continue
        # the max stage: L's axes and key axis, fresh
        ax = tuple(n.IterVar(n.var(a.name), a.dom, a.kind) for a in L.axes)
        ren = {a.var: f.var for a, f in zip(L.axes, ax)}
        rax = b.axes[0]
        red = n.IterVar(n.var(rax.name), n.Range(subst(rax.dom.min, ren),
                                                subst(rax.dom.extent, ren)), rax.kind)
        ren[rax.var] = red.var
        body = n.Reduce(L.dtype, builtin("max", L.dtype), (subst(unmasked(x, rax), ren),),
                        (red,), None, 0)
        M = Stage(sched._unique(f"{L.name}.max"), ax, (red,), body, L.dtype, L.loc,
                  origin=FUSED)
        mh = sched._insert_before(M, [L] + ps)
        # the weights and the finishing stages read the max stage; L sums the weights
        re = _Retarget({L.values[0]: M.output})
        for s in [g.stage for g in sched.stages]:
            if L.values[0] in s.reads():
                s.body = re.visit(s.body)
        src = n.TensorRead(P.dtype, P.output, sc.indices)
        L.body = n.Reduce(L.dtype, builtin("sum", L.dtype), (mk.cast(src, L.dtype),),
                          b.axes, None, 0)
        L.values = (L.output,)
        made.append(mh)
    if made:
        g = sched.graph
        g.stages[:] = topological(g.stages, g.outputs)
    return made
