"""A ``kd.fori_loop`` as one kernel: when it applies, its loop graph and the checks of its steps.

kdsl.runtime.fori_program runs a loop as one launch of its *loop graph* (``loop_graph``: the
body graph with the loop's bounds as two more scalars, compiled by a backend with
``fori_loops`` and wrapped by kdsl.passes.fori_loop into a ``CarryLoop`` over every step)
where ``in_kernel_loop`` says so.  The checks of the body that change from step to step
are done before the kernel runs, for every step at once: call-time checks using ``i``
(``x[i]``) on the host (``fori_program.StepChecks``), checks on a domain using ``i`` (an index under
``kd.where``) as one hidden reduction over every step's domain (``_over_steps``); data
checks that read a carry or a value computed in the body cannot be, and keep the host loop.
"""
from __future__ import annotations

import dataclasses

from .. import dtypes as dt
from ..graph import Graph, Input
from ..ir import nodes as n
from ..ir.visitor import free_vars


#: run loops inside one kernel where the backend can (``Backend.fori_loops``); False: the
#: host loop everywhere (benchmarks compare the two)
in_kernel = True


def in_kernel_loop(backend, info, body) -> bool:
    """Whether loop ``body`` (its closed body graph) runs as one kernel on ``backend``: the
    backend runs ``CarryLoop``s, and the body has no loop of its own (a nested loop runs
    inside the body's program, one launch per outer step) and no check on the data that
    may change from step to step (``graph.data_checks`` reading a carry or a value computed
    in the body: they would run before each step; ``_check_form``)."""
    from ..frontend.fori import has_loops
    return (in_kernel and backend.spec.fori_loops and not has_loops(body)
            and all(_check_form(c, body, len(info.placeholders), info.index) is not None
                    for c in body.data_checks))


def _check_form(c, body, carries: int, index):
    """How data check ``c`` of loop body ``body`` runs with the loop kernel, once before it:
    ``(form, relaxed)`` or None.  ``form`` "once": it reads only arrays from outside the
    loop and does not use ``i``; "steps": it also uses ``i``, but not in its bounds or
    message (one check over every step's domain, ``_over_steps``).  ``relaxed``: its
    ``kd.where`` condition reads a carry or a value computed in the body (floyd-warshall's
    ``P[i, k]`` under ``P[i, j] < P[i, k] + P[k, j]``): checked without that condition, on
    a larger domain -- where it passes, the exact check passes whatever the data; where it
    fails, the call takes the host loop, which checks each step.  None: its index itself
    reads such values (``x[c[j]]``): only the host loop can check it."""
    from ..ir.visitor import collect
    carry = {id(t) for t in body.params[:carries]}

    def data(e) -> bool:
        return any(id(r.tensor) in carry or not isinstance(r.tensor.op, Input)
                   for r in collect(e, lambda x: isinstance(x, n.TensorRead)))
    main = [c.value] + [e for a in c.axes for e in (a.dom.min, a.dom.extent)]
    fixed = [e for e in (c.lo, c.hi) if e is not None] + [e for _, e in c.detail]
    if any(data(e) for e in main + fixed) or any(index in free_vars(e) for e in fixed):
        return None
    relaxed = c.where is not None and data(c.where)
    used = main + ([c.where] if c.where is not None and not relaxed else [])
    return ("steps" if any(index in free_vars(e) for e in used) else "once"), relaxed


def _over_steps(c, index, lo, hi):
    """Data check ``c`` (which uses ``i``) over every step at once: ``i`` an axis over
    ``[lo, hi)`` in front of its own (its min and max then cover all the steps)."""
    from ..ir import make as mk
    from ..ir.visitor import substitute
    step = n.IterVar(n.Var(dt.int64, index.name), n.Range(lo, mk.max_(mk.sub(hi, lo), 0)),
                     n.IterKind.REDUCE)
    m = {index: step.var}
    axes = (step,) + tuple(dataclasses.replace(a, var=a.var, dom=n.Range(
        substitute(a.dom.min, m), substitute(a.dom.extent, m))) for a in c.axes)
    return dataclasses.replace(c, axes=axes, value=substitute(c.value, m),
                               where=None if c.where is None else substitute(c.where, m))


def _uses_index(c, index) -> bool:
    exprs = [c.lhs, c.rhs] + [e for _, e in c.detail]
    return any(index in free_vars(e) for e in exprs)


def loop_graph(info, body):
    """``(graph, spec, step_checks, relaxed)``: the body graph ``body`` of loop ``info`` with
    the loop's bounds as two more scalars (last), compiled as the whole loop
    (kdsl.passes.fori_loop), its data checks over every step (``_check_form``); call-time
    checks that use ``i`` are left out of it: ``step_checks`` (checked on the host for every
    step before the kernel runs), and so are the relaxed data checks: ``relaxed`` (run before
    the kernel; where one fails, the call takes the host loop)."""
    from ..passes.fori_loop import LoopSpec
    got = info.cache.get(("loop", id(body)))
    if got is not None and got[0] is body:
        return got[1:]
    lo, hi = n.Var(dt.int64, f"{info.index.name}_lo"), n.Var(dt.int64, f"{info.index.name}_hi")
    scal = body.scalars
    spec = LoopSpec(len(info.placeholders), scal.index(info.index), len(scal), len(scal) + 1)
    checks = [c for c in body.constraints if _uses_index(c, info.index)]
    k = len(info.placeholders)
    exact, relaxed = [], []
    for c in body.data_checks:
        form, loose = _check_form(c, body, k, info.index)
        if loose:
            c = dataclasses.replace(c, where=None)
        if form == "steps":
            c = _over_steps(c, info.index, lo, hi)
        (relaxed if loose else exact).append(c)
    graph = Graph(body.name, tuple(body.params) + (lo, hi), body.stages, body.outputs,
                  [c for c in body.constraints if all(c is not d for d in checks)], loc=body.loc,
                  data_checks=exact)
    info.cache[("loop", id(body))] = (body, graph, spec, checks, relaxed)
    return graph, spec, checks, relaxed
