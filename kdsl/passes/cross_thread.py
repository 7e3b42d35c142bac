"""Cross-thread reductions of the ``loop_nests`` pass (not a pass).

A reduction loop bound to threadIdx lowers to two barrier-separated phases:
each thread accumulates its partial into a local ``<B>.acc`` and publishes it
to the shared ``<B>.red[thread]``; after a ``barrier``, thread 0 (or the
threads the store predicate selects) folds the partials into ``<B>.fin`` and
stores the result.  Sequential executors (interpreter, CPU) run it exactly;
GPU backends replace it with shuffles.
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..ir import make as mk
from ..ir import nodes as n
from .guards import guard_all, seq
from .reductions import combine_store


def emit_cross_thread(nb, h, p, bound_red, bufs, idx, sources, guards, pred):
    """Reduction stage ``h`` whose reduction loop ``h.leaf[p]`` is bound to threadIdx
    (``nb``: the pass's ``NestBuilder``; ``guards``: spatial then reduction guards)."""
    st, dom = h.stage, nb.domains[h]
    comb = st.body.combiner
    leaves = h.leaf
    tl = bound_red[0]
    if len(bound_red) > 1 or leaves[p] is not tl or not nb.attr(h, tl).thread.is_thread:
        raise ScheduleError(f"stage {st.name}: a cross-thread reduction needs exactly one reduction axis "
                            "bound to threadIdx, and it must be the outermost reduction loop",
                            hint="reorder the reduction axes so the bound one comes first")
    if any(iv.kind is n.IterKind.SPATIAL for iv in leaves[p:]):
        raise ScheduleError(f"stage {st.name}: spatial loops must be outside the cross-thread reduction "
                            f"axis {tl.name}")
    ext = dom.leaf_extent[tl]
    if not isinstance(ext, n.Const):
        raise ScheduleError(f"stage {st.name}: the thread-bound reduction axis {tl.name} needs a constant "
                            "extent (split it by a constant factor first)")
    sp_guards = [g for g, kind in dom.guards if kind is not n.IterKind.REDUCE]
    attr = nb.attr(h, tl)
    reds = [n.Buffer(f"{st.name}.red{j}" if len(bufs) > 1 else f"{st.name}.red", b.dtype, (ext,), None,
                     n.Scope.SHARED) for j, b in enumerate(bufs)]
    accs = [n.Buffer(f"{st.name}.acc{j}" if len(bufs) > 1 else f"{st.name}.acc", b.dtype, (mk.as_expr(1),),
                     None, n.Scope.LOCAL) for j, b in enumerate(bufs)]
    zero = (mk.as_expr(0),)
    init = seq([n.Store(a, zero, ident) for a, ident in zip(accs, comb.identity)])
    cur = [n.Load(a.dtype, a, zero) for a in accs]
    upd = combine_store(comb, cur, sources, lambda j, v: n.Store(accs[j], zero, v))
    inner = nb.nest(h, leaves[p + 1:], guards, upd)
    publish = seq([n.Store(r, (tl.var,), n.Load(a.dtype, a, zero)) for r, a in zip(reds, accs)])
    phase1_body = seq([init, inner, publish])
    for a in reversed(accs):
        phase1_body = n.Allocate(a, phase1_body)
    phase1 = nb.wrap_loop(h, tl, ext, phase1_body)
    # phase 2: one thread combines the partials and stores the result
    t = n.var(tl.name + ".t")
    fins = [n.Buffer(b.name.replace(".acc", ".fin"), b.dtype, b.shape, None, n.Scope.LOCAL) for b in accs]
    fcur = [n.Load(f.dtype, f, zero) for f in fins]
    parts = [n.Load(r.dtype, r, (t,)) for r in reds]
    fold = n.For(t, mk.as_expr(0), ext, n.ForKind.SERIAL,
                 combine_store(comb, fcur, parts, lambda j, v: n.Store(fins[j], zero, v)))
    out = seq([n.Store(b, idx, n.Load(f.dtype, f, zero)) for b, f in zip(bufs, fins)])
    finish = seq([seq([n.Store(f, zero, ident) for f, ident in zip(fins, comb.identity)]), fold, out])
    for f in reversed(fins):
        finish = n.Allocate(f, finish)
    conds = [pred if pred is not None else mk.eq(tl.var, 0)] + sp_guards
    # at least one thread combines: an empty reduction still stores the identity
    ext2 = mk.as_expr(max(ext.value, 1))
    phase2 = n.For(tl.var, mk.as_expr(0), ext2, n.ForKind.BOUND, guard_all(conds, finish), attr.thread)
    body = seq([phase1, n.Barrier(), phase2])
    for r in reversed(reds):
        body = n.Allocate(r, body)
    return nb.nest(h, leaves[:p], [], body) if p else body
