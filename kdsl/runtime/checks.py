"""Data checks: conditions over a stage's domain that need the data (``graph.DomainCheck``).

A check says "``value`` lies in ``[lo, hi]`` wherever ``where`` holds" (an index read from
an array is in range; an integer exponent is not negative).  ``with_checks`` compiles,
with the same backend, a hidden *check graph* over the kernel's parameters: one 0-d
``min`` and/or ``max`` reduction of ``value`` per check (``where`` as the reductions'
condition), plus the stages those read.  Each call runs it before the kernel, compares
the results with the bounds for this call's shapes and raises the check's error --
before any output is written.  The kernel itself is left alone (its schedule, its
outputs), and a kernel without data checks pays nothing.  Kernels with data checks skip
the native fast launcher (the wrapper's ``fast`` is None).
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import user_location
from ..backends.protocol import CompileRequest
from ..graph import Graph, Stage
from ..ir import make as mk
from ..ir import nodes as n
from ..ir.evaluate import eval_expr
from ..ir.visitor import substitute


def check_graph(graph) -> tuple:
    """(the check graph of ``graph.data_checks``, per check the positions of its
    (min, max) outputs)."""
    from ..frontend.reduce import combiner
    stages, outs, slots = [], [], []
    for j, c in enumerate(graph.data_checks):
        mapping, ivs = {}, []
        for a in c.axes:
            dom = n.Range(substitute(a.dom.min, mapping), substitute(a.dom.extent, mapping))
            iv = n.IterVar(n.var(a.var.name), dom, n.IterKind.REDUCE)
            mapping[a.var] = iv.var
            ivs.append(iv)
        value = substitute(c.value, mapping)
        if value.dtype is not dt.index:     # a narrower int (an int32 exponent): exact in int64
            value = mk.cast(value, dt.index)
        where = None if c.where is None else substitute(c.where, mapping)
        pos = []
        for kind in ("min", "max"):     # both, even for a one-sided check: the message shows them
            body = n.Reduce(dt.index, combiner(kind, dt.index), (value,), tuple(ivs), where)
            st = Stage(f"{graph.name}_check{j}_{kind}", (), tuple(ivs), body, dt.index, c.loc,
                       origin="check")
            pos.append(len(outs))
            stages.append(st)
            outs.append(st.output)
        slots.append(tuple(pos))
    return Graph(f"{graph.name}_checks", graph.params, _producers(stages) + stages, tuple(outs),
                 [], graph.loc), tuple(slots)


def _producers(stages) -> list:
    """The stages (of the kernel's graph) the check stages read, in topological order."""
    todo = [t.stage for s in stages for t in s.reads() if t.stage is not None]
    need, order = set(), []
    while todo:
        s = todo.pop()
        if id(s) in need:
            continue
        need.add(id(s))
        order.append(s)
        todo += [t.stage for t in s.reads() if t.stage is not None]
    from ..graph import topological
    return topological(order, ())


def with_checks(backend, sig, graph, compiled, options):
    """``compiled`` preceded by ``graph``'s data checks, compiled by ``backend``."""
    cg, slots = check_graph(graph)
    from ..schedule import Schedule
    sched = Schedule(cg)
    backend.schedule(sched, [])
    req = CompileRequest(cg, sched, sig, (True,) * len(cg.outputs), dict(options))
    return Checked(compiled, backend.compile(req), graph, slots, backend)


def _host_int(x) -> int:
    """The value of a 0-d result on the host: device arrays (torch, CuPy, JAX, kdsl_cuda's
    DeviceArray) answer ``item()``, which waits for the check kernel; numpy and the rest go
    through ``np.asarray``."""
    item = getattr(x, "item", None)
    return int(item() if item is not None else np.asarray(x))


class Checked:
    """A compiled kernel that runs its graph's data checks first (same calling convention)."""

    fast = None     # the checks run first: no fast launcher skips them

    def __init__(self, main, checker, graph, slots, backend):
        self.main, self.checker, self.graph, self.slots = main, checker, graph, slots
        self.empty = backend.empty
        self.nout = 2 * len(slots)

    def __call__(self, inputs, outputs, scalars, stream=None):
        like = inputs[0] if inputs else None
        outs = [self.empty((), dt.index, like) for _ in range(self.nout)]
        if stream is None:
            self.checker(inputs, outs, scalars)
        else:
            self.checker(inputs, outs, scalars, stream=stream)
        self.judge(inputs, scalars, outs)
        if stream is None:
            return self.main(inputs, outputs, scalars)
        return self.main(inputs, outputs, scalars, stream=stream)

    def judge(self, inputs, scalars, outs) -> None:
        """Raise the first failed check's error (checks are in the order reads nest)."""
        env = None
        for c, (pmin, pmax) in zip(self.graph.data_checks, self.slots):
            vmin, vmax = _host_int(outs[pmin]), _host_int(outs[pmax])
            if vmin > vmax:
                continue            # no point of the domain where the check applies
            if env is None:
                env = self.graph.bind(inputs, scalars)
            lo = None if c.lo is None else int(eval_expr(c.lo, env))
            hi = None if c.hi is None else int(eval_expr(c.hi, env))
            if (lo is not None and vmin < lo) or (hi is not None and vmax > hi):
                values = {name: eval_expr(e, env) for name, e in c.detail}
                values.update(min=vmin, max=vmax, lo=lo, hi=hi)
                call = user_location()
                at = f" (called at {call.short})" if call is not None else ""
                raise c.error(c.message.format(**values) + at, loc=c.loc or call, hint=c.hint)
