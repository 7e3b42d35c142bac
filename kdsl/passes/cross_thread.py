"""Cross-thread reductions of the ``loop_nests`` pass (not a pass).

A reduction whose outermost reduction loops are bound to threadIdx becomes one
``CrossThreadReduce`` statement, in the per-thread view of the GPU model:

    for <spatial loops outside the reduction>            # blockIdx, threadIdx.y, serial ...
      for <thread-bound loops inside the reduction>      # the reduced threadIdx, spatial ones
        B.acc = identity
        if <conditions on thread indices>: for <serial reduction loops>: B.acc = comb(B.acc, x)
        B.v = cross_thread_comb(B.acc; over threadIdx.x)
        if <store predicate (reduced indices == 0)> and <spatial guards>: B[i] = B.v

Every thread of a reduction group reaches the statement: a condition that depends on a
thread index (an uneven split, a ``where=``) guards only the accumulation (a thread with
nothing to add contributes the identity) and, for the spatial ones, the store.  Thread
loops are foralls, so the thread-bound loops inside the reduction run first whatever their
order among themselves; serial reduction loops run inside them.  ``lower_cross_thread``
rewrites the statement for sequential executors; GPU backends lower it to shuffles.
"""
from __future__ import annotations

from ..errors import InternalCompilerError, ScheduleError
from ..ir import make as mk
from ..ir import nodes as n
from ..ir.visitor import free_vars
from ..schedule.records import where
from .guards import combine_store, guard_all, seq


def _check_shape(nb, h, p, bound_red):
    """The thread-bound and serial loops inside the reduction (leaves ``p:``); a ScheduleError
    naming the user's axes where they cannot make a cross-thread reduction."""
    st, leaves = h.stage, h.leaf
    threads, serial = [], []
    for iv in leaves[p:]:
        tag = nb.attr(h, iv).thread
        if tag is not None and tag.is_thread:
            if serial:
                raise ScheduleError(
                    f"stage {st.name}: {iv.name} is bound to {tag.value} inside the serial reduction loop "
                    f"{serial[0].name}, but a cross-thread reduction needs its threadIdx-bound loops "
                    "outside the serial reduction loops",
                    hint=f"reorder so that {iv.name} comes before {serial[0].name}")
            threads.append(iv)
        elif tag is not None:
            raise ScheduleError(f"stage {st.name}: {iv.name} is bound to {tag.value} inside the reduction "
                                "loops of a cross-thread reduction",
                                hint=f"move {iv.name} outside the reduction axes")
        elif iv.kind is n.IterKind.SPATIAL:
            red = bound_red[0]
            raise ScheduleError(
                f"stage {st.name}: the spatial loop {iv.name} is inside the reduction over {red.name}, "
                f"which is bound to {nb.attr(h, red).thread.value}{where(h.bind_locs.get(red))}: the "
                "threads combine their partials once, after all their reduction loops",
                hint=f"reorder so that {iv.name} comes before the reduction axes, or bind it to threadIdx")
        else:
            serial.append(iv)
    return threads, serial


def emit_cross_thread(nb, h, p, bound_red, bufs, idx, sources, guards, pred):
    """Reduction stage ``h`` with reduction loops bound to threadIdx (``bound_red``), the
    first reduction loop at ``h.leaf[p]`` (``nb``: the pass's ``NestBuilder``; ``guards``:
    (guard, kind) pairs: the domain's guards and the ``where=`` conjuncts as REDUCE)."""
    st, dom = h.stage, nb.domains[h]
    comb = st.body.combiner
    leaves = h.leaf
    threads, serial = _check_shape(nb, h, p, bound_red)
    ext = {}
    for iv in threads:
        e = dom.leaf_extent[iv]
        if not isinstance(e, n.Const):
            raise ScheduleError(f"stage {st.name}: the thread-bound axis {iv.name} inside the cross-thread "
                                "reduction needs a constant extent",
                                hint=f"split it by a constant factor first and bind the inner axis")
        ext[iv] = e
    thread_vars = {iv.var for iv in leaves if nb.attr(h, iv).thread is not None
                   and nb.attr(h, iv).thread.is_thread}
    serial_vars = {iv.var for iv in serial}
    inner_vars = {iv.var for iv in threads} | serial_vars
    outer_g, acc_g, store_g, nest_g = [], [], [], []
    for g, kind in guards:
        used = free_vars(g)
        if used & serial_vars:
            if kind is not n.IterKind.REDUCE:
                raise InternalCompilerError(f"stage {st.name}: a spatial guard uses a serial reduction loop")
            nest_g.append(g)              # inside the serial reduction loops
        elif used & (thread_vars | inner_vars):
            acc_g.append(g)               # on the accumulation only: every thread reaches the reduce
            if kind is not n.IterKind.REDUCE:
                store_g.append(g)
        elif kind is n.IterKind.REDUCE:
            acc_g.append(g)
        else:
            outer_g.append(g)             # uniform over the block: may enclose the statement
    # a reduction loop bound with extent 0 still runs one thread, which stores the identity
    for iv in threads:
        if ext[iv].value == 0:
            acc_g.append(mk.lt(iv.var, 0))
            ext[iv] = mk.as_expr(1)
    zero = (mk.as_expr(0),)
    many = len(bufs) > 1
    accs = [n.Buffer(f"{st.name}.acc{j}" if many else f"{st.name}.acc", b.dtype, (mk.as_expr(1),), None,
                     n.Scope.LOCAL) for j, b in enumerate(bufs)]
    res = [n.Buffer(f"{st.name}.v{j}" if many else f"{st.name}.v", b.dtype, (mk.as_expr(1),), None,
                    n.Scope.LOCAL) for j, b in enumerate(bufs)]
    init = seq([n.Store(a, zero, ident) for a, ident in zip(accs, comb.identity)])
    cur = [n.Load(a.dtype, a, zero) for a in accs]
    upd = combine_store(comb, cur, sources, lambda j, v: n.Store(accs[j], zero, v))
    accum = guard_all(acc_g, nb.nest(h, serial, nest_g, upd))
    tags = tuple(nb.attr(h, iv).thread for iv in threads if iv.kind is n.IterKind.REDUCE)
    ctr = n.CrossThreadReduce(comb, tuple(cur), tags, tuple(res))
    who = pred if pred is not None else mk.all_of([mk.eq(iv.var, 0) for iv in bound_red])
    out = guard_all([who] + store_g, seq([n.Store(b, idx, n.Load(r.dtype, r, zero)) for b, r in zip(bufs, res)]))
    body = seq([init, accum, ctr, out])
    for b in reversed(accs + res):
        body = n.Allocate(b, body)
    for iv in reversed(threads):
        body = nb.wrap_loop(h, iv, ext[iv], body)
    return nb.nest(h, leaves[:p], outer_g, body) if p else guard_all(outer_g, body)
