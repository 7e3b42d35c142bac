"""inline: substitute ``compute_inline`` stages into their readers (a schedule-level pass).

Assumes: ``state.placement`` (inlined stages are elementwise: the primitive
checked it).
Guarantees: ``state.handles`` lists the stages still to lower, in topological
order; no stage body of the schedule reads an inlined stage's tensor (reader
bodies are rewritten in place, once: running the pass again changes nothing).
"""
from __future__ import annotations

import dataclasses

from ..ir import nodes as n
from ..ir.visitor import Mutator, substitute
from ..schedule.records import AttachKind


class _Inline(Mutator):
    """Replace reads of inlined stages (output Tensor -> Stage) by their bodies."""

    def __init__(self, inlined: dict):
        super().__init__()
        self.inlined = inlined

    def visit_TensorRead(self, r):
        r = self.generic(r)
        st = self.inlined.get(r.tensor)
        if st is None:
            return r
        return substitute(st.body, {a.var: i for a, i in zip(st.axes, r.indices)})


def inline_stages(sched) -> list:
    """Rewrite readers of inlined stages in place; return the handles still to lower (topological).

    One pass in topological order: an inlined stage's own body has had its inlined
    producers substituted before any reader uses it (linear in the number of stages).
    """
    handles = sched.stages
    inlined = {h.stage.output: h.stage for h in handles if h.attach is AttachKind.INLINE}
    if not inlined:
        return list(handles)
    m = _Inline(inlined)
    keep = []
    for h in handles:
        h.stage.body = m.visit(h.stage.body)
        if h.attach is not AttachKind.INLINE:
            keep.append(h)
    return keep


def inline(state):
    """The ``inline`` pass: ``state.handles`` = the stages left after inlining."""
    state.need("placement", by="inline")
    return dataclasses.replace(state, handles=tuple(inline_stages(state.sched)))


def reads_tensor(expr, tensor) -> bool:
    from ..ir.visitor import collect
    return bool(collect(expr, lambda x: isinstance(x, n.TensorRead) and x.tensor is tensor))
