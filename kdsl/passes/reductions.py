"""Reduction nests of the ``loop_nests`` pass (not a pass): init nest, update nest.

A reduction's leaves split at the first reduction loop ``p``: loops before it
enclose both nests; the init nest stores the combiner's identity over the
spatial loops found inside the reduction loops (no attached stages; their
thread bindings kept, so each GPU thread zeroes what it updates), and the update nest combines every source term
under the spatial, reduction and ``where=`` guards.  A reduction loop bound to
threadIdx goes to ``cross_thread.emit_cross_thread`` instead.
"""
from __future__ import annotations

from ..ir import nodes as n
from ..ir.conditions import conjuncts
from .cross_thread import emit_cross_thread
from .guards import combine_store, guard, seq


def emit_reduction(nb, h, pred) -> n.Stmt:
    """The statements of reduction stage ``h`` (``nb``: the pass's ``NestBuilder``)."""
    st, dom = h.stage, nb.domains[h]
    red: n.Reduce = st.body
    comb = red.combiner
    leaves = h.leaf
    p = next((k for k, iv in enumerate(leaves) if iv.kind is n.IterKind.REDUCE), len(leaves))
    bufs = [nb.buffer_of(t)[0] for t in st.values]
    idx = nb.index(h, st.output)
    sp_guards = [g for g, kind in dom.guards if kind is not n.IterKind.REDUCE]
    rd_guards = [g for g, kind in dom.guards if kind is n.IterKind.REDUCE]
    if red.condition is not None:
        # one guard per conjunct: rfactor ands its split guards into the where= condition,
        # and each must sit where guard_all can put the loads inside the index guards
        rd_guards.extend(conjuncts(nb.expr(h, red.condition)))
    sources = [nb.expr(h, s_) for s_ in red.sources]
    # a reduction axis bound to threadIdx makes a cross-thread reduction; a spatial axis bound
    # inside the reduction loops (a column sum's threads) stays an ordinary bound loop
    bound_red = [iv for iv in leaves[p:] if iv.kind is n.IterKind.REDUCE and nb.attr(h, iv).thread is not None]
    if bound_red:
        kinded = [(g, n.IterKind.SPATIAL) for g in sp_guards] + [(g, n.IterKind.REDUCE) for g in rd_guards]
        return emit_cross_thread(nb, h, p, bound_red, bufs, idx, sources, kinded, pred)
    init = seq([n.Store(b, idx, ident) for b, ident in zip(bufs, comb.identity)])
    init_leaves = [iv for iv in leaves[p:] if iv.kind is n.IterKind.SPATIAL]
    cur = [n.Load(b.dtype, b, idx) for b in bufs]
    update = guard(pred, combine_store(comb, cur, sources, lambda j, v: n.Store(bufs[j], idx, v)))
    init_nest = nb.nest(h, init_leaves, sp_guards, guard(pred, init), attach=False)
    upd_nest = nb.nest(h, leaves[p:], sp_guards + rd_guards, update)
    return nb.nest(h, leaves[:p], [], seq([init_nest, upd_nest])) if p else seq([init_nest, upd_nest])
