"""kdsl kernels derived from a kernel's stage graph: the steps of a tree reduction.

A kernel whose output is ``epilogue(R)`` (R one reduce stage, the stages before it read
the inputs pointwise along R's axes) splits into three kernels, each compiled by the
backend like any kernel (default schedules, disk cache):

- ``chunk``: the graph cut at R (outputs: R's values: argmax's index and value), run on one
  block of each input;
- ``combine``: R's combiner over partials ``P_j[R's axes..., reduced axes...]`` (one per
  value), the kernel's own combiner (custom reducers included);
- ``aggregate``: ``combine`` followed by a copy of the epilogue stages (``mean``'s divide),
  their sizes bound to the full arrays' (the reduced extent is a constant).

A derived kernel is a ``Kernel`` (``fori_program.make_kernel``) whose ``_graph(sig)`` builds
the derived graph for the call's signature instead of tracing.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..graph import Graph, Stage, live_stages
from ..ir import nodes as n
from ..ir.visitor import Mutator
from ..runtime import dispatch, fori_program
from ..runtime.signature import signature_from_args


def _function(names):
    """A plain function of parameters ``names`` (kernels read names and arity from it)."""
    src = f"def derived({', '.join(names)}):\n    raise RuntimeError('never traced')\n"
    ns = {}
    exec(src, ns)       # noqa: S102  (names are the parent's identifiers or a0, a1, ...)
    return ns["derived"]


def make(name, arg_names, graph_fn, specialize=False, constants=()):
    """A Kernel named ``name`` of parameters ``arg_names`` whose graph for a signature is
    ``graph_fn(sig)`` (``specialize``/``constants``: the parent's, so that signatures agree)."""
    fn = _function(arg_names)
    fn.__name__ = fn.__qualname__ = name
    k = fori_program.make_kernel(fn, specialize=specialize, constants=constants)
    graphs = {}

    def _graph(sig):
        key = (sig.params, sig.specialize)
        g = graphs.get(key)
        if g is None:
            g = graphs[key] = graph_fn(sig)
        return g
    k._graph = _graph
    return k


def fake_args(args):
    """Stand-ins of ``args`` for a signature: arrays become zero-stride numpy arrays of the
    same shape and dtype (``(shape, dtype)`` pairs too), other values stay."""
    out = []
    for a in args:
        if isinstance(a, tuple) and len(a) == 2 and isinstance(a[0], tuple):
            shape, dtype = a
        elif hasattr(a, "shape") and hasattr(a, "dtype") and not np.isscalar(a):
            shape, dtype = tuple(int(s) for s in a.shape), a.dtype
        else:
            out.append(a)
            continue
        out.append(np.lib.stride_tricks.as_strided(np.zeros(1, dtype), shape, (0,) * len(shape)))
    return out


def parent_graph(kernel, args):
    """``kernel``'s graph for arguments like ``args`` (shapes and dtypes only)."""
    fakes = fake_args(args)
    sig = signature_from_args(tuple(fakes), kernel.arg_names, kernel.constants,
                              kernel.specialize, None)
    return kernel._graph(sig), fakes


def chunk_graph(kernel, rname):
    """The graph-for-a-signature of the chunk step: ``kernel``'s graph cut at stage ``rname``."""
    def build(sig):
        g = kernel._graph(sig)
        r = g.stage(rname)
        outs = tuple(r.values)
        return Graph(f"{g.name}_chunk", g.params, live_stages(g.stages, outs), outs,
                     list(g.constraints), g.loc, list(g.data_checks))
    return build


class _Subst(Mutator):
    """Vars through ``vmap``, reads of tensors through ``tmap``."""

    def __init__(self, vmap, tmap):
        super().__init__()
        self.vmap, self.tmap = vmap, tmap

    def visit_Var(self, v):
        return self.vmap.get(v, v)

    def visit_TensorRead(self, r):
        r = self.generic(r)
        t = self.tmap.get(r.tensor)
        return r if t is None else n.TensorRead(r.dtype, t, r.indices)


def _params(sig, name):
    """Input tensors for the arrays of ``sig`` (traced: their shape Vars and layouts)."""
    names = [f"{name}{j}" for j in range(len(sig.params))]
    ns = {}
    exec(f"def f({', '.join(names)}):\n    return {names[0]}\n", ns)  # noqa: S102
    return dispatch.trace_graph(ns["f"], sig.specs(), name="partials").params


def combine_stage(r, params):
    """``r``'s combiner over partials ``params`` (``P_j[r's axes..., reduced axes...]``)."""
    nr = len(r.axes)
    p0 = params[0]
    zero = n.const(0, dt.int64)
    axes = tuple(n.IterVar(n.Var(dt.int64, f"i{k}"), n.Range(zero, p0.shape[k]))
                 for k in range(nr))
    raxes = tuple(n.IterVar(n.Var(dt.int64, f"r{k}"), n.Range(zero, p0.shape[nr + k]),
                            n.IterKind.REDUCE) for k in range(len(r.reduce_axes)))
    idx = tuple(a.var for a in axes) + tuple(a.var for a in raxes)
    body = r.body
    sources = tuple(n.TensorRead(p.dtype, p, idx) for p in params)
    red = n.Reduce(body.dtype, combiner=body.combiner, sources=sources, axes=raxes,
                   condition=None, value_index=body.value_index)
    return Stage(r.name, axes, raxes, red, r.dtype, loc=r.loc, origin=r.origin)


def aggregate_graph(full_graph, rname, full_env, epilogue: bool):
    """The graph-for-a-signature of the combine step (``epilogue`` False) or the aggregate
    step (True): combine, then ``full_graph``'s stages after ``rname`` with the sizes of
    ``full_env`` (Var -> the full arrays' size) except R's axes (the partials' own)."""
    r = full_graph.stage(rname)

    def build(sig):
        params = _params(sig, "P")
        cs = combine_stage(r, params)
        if not epilogue:
            return Graph(f"{full_graph.name}_combine", params, [cs], tuple(cs.values), [])
        vmap = {v: n.const(int(x), v.dtype) for v, x in full_env.items()}
        for k, a in enumerate(r.axes):
            if type(a.dom.extent) is n.Var:
                vmap[a.dom.extent] = params[0].shape[k]
        tmap = dict(zip(r.values, cs.values))
        sub = _Subst(vmap, tmap)
        stages = [cs]
        live = live_stages(full_graph.stages, full_graph.outputs)
        after = live[live.index(r) + 1:]
        for st in after:
            axes = tuple(n.IterVar(a.var, n.Range(sub.visit(a.dom.min), sub.visit(a.dom.extent)),
                                   a.kind) for a in st.axes)
            raxes = tuple(n.IterVar(a.var, n.Range(sub.visit(a.dom.min),
                                                   sub.visit(a.dom.extent)), a.kind)
                          for a in st.reduce_axes)
            new = Stage(st.name, axes, raxes, sub.visit(st.body), st.dtype, loc=st.loc,
                        origin=st.origin)
            for a, b in zip(st.values, new.values):
                tmap[a] = b
            stages.append(new)
        outs = tuple(tmap[t] for t in full_graph.outputs)
        return Graph(f"{full_graph.name}_aggregate", params, stages, outs, [])
    return build


__all__ = ["make", "chunk_graph", "aggregate_graph", "parent_graph", "fake_args"]
