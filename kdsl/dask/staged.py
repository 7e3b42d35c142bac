"""Kernels whose reductions cross chunks one after another (softmax over chunked rows, var):
computed in stages.

``Staged(kernel, cuts, output)`` stands for a kernel derived from ``kernel``'s stage graph:
the reduce stages named in ``cuts`` are no longer computed but read from extra arguments
(one array each, after the kernel's own arguments), and, with ``output``, the graph ends at
that stage.  ``kdsl.dask.call`` maps a kernel whose plan names a ``stage`` as two Dask
computations: ``Staged(kernel, cuts, output=stage)`` (the reduction, a tree over chunks),
then ``Staged(kernel, cuts + (stage,))`` with that result as one more argument; each may be
staged again.  A Staged is what tasks carry (picklable: the user's kernel, names); each
process derives its kernel once.
"""
from __future__ import annotations

import dataclasses
import threading

from ..graph import Graph, Input, Tensor, live_stages
from ..ir import nodes as n
from ..runtime import fori_program
from ..runtime.signature import ArraySig
from . import derive
from .analysis import SizeValues

_lock = threading.Lock()
_made: dict = {}


class Staged:
    """A kernel derived from ``base`` (see the module docstring); called like a kernel."""

    _version = 0

    def __init__(self, base, cuts=(), output=None, sizes=()):
        self.base, self.cuts, self.output = base, tuple(cuts), output
        self.sizes = tuple(sizes)
        self.__name__ = base.__name__
        self.arg_names = tuple(base.arg_names) + tuple(f"_cut{k}" for k in range(len(cuts)))
        self.constants, self.specialize = base.constants, base.specialize
        self._const = tuple(base._const) + (False,) * len(cuts)
        self._nargs = len(self.arg_names)

    @classmethod
    def of(cls, kernel, output=None, cut=None, sizes=None):
        """``kernel`` (a Kernel or a Staged) ending at ``output`` / with ``cut`` read /
        with ``sizes`` fixed."""
        if isinstance(kernel, Staged):
            base, cuts, old = kernel.base, kernel.cuts, kernel.sizes
        else:
            base, cuts, old = kernel, (), ()
        if sizes is not None:
            return cls(base, cuts, kernel.output if isinstance(kernel, Staged) else None,
                       tuple(sorted(set(old) | set(sizes))))
        if cut is not None:
            return cls(base, cuts + (cut,), None, old)
        return cls(base, cuts, output, old)

    def staged_key(self):
        from .build import _token
        return (_token(self.base), self.cuts, self.output, self.sizes)

    def kernel(self):
        """The derived Kernel (made once per process)."""
        key = self.staged_key()
        k = _made.get(key)
        if k is None:
            with _lock:
                k = _made.get(key)
                if k is None:
                    k = _made[key] = derive.make(
                        f"{self.__name__}_{'part' if self.output else 'rest'}",
                        self.arg_names, lambda sig: staged_graph(self, sig),
                        self.specialize, self.constants)
        return k

    def _graph(self, sig):
        return self.kernel()._graph(sig)

    def __call__(self, *args, backend=None):
        return self.kernel()(*args, backend=backend)

    def __getstate__(self):
        return {"base": self.base, "cuts": self.cuts, "output": self.output,
                "sizes": self.sizes}

    def __setstate__(self, state):
        self.__init__(state["base"], state["cuts"], state["output"], state["sizes"])

    def __repr__(self) -> str:
        return f"<kdsl.dask staged {self.__name__} cuts={self.cuts} output={self.output}>"


def staged_graph(st: Staged, sig):
    """The graph of ``st`` for signature ``sig`` (the base kernel's arguments, then one
    array per cut stage)."""
    base = st.base
    n0 = base._nargs
    params = list(sig.params[:n0])
    if st.sizes:    # a size fixed by ``sizes`` stays symbolic in a block of size 1 (a Var to fix)
        arrays = [k for k, p in enumerate(params) if isinstance(p, ArraySig)]
        for j, d, value in st.sizes:
            p = params[arrays[j]]
            if p.shape[d] == 1 and value != 1:
                params[arrays[j]] = dataclasses.replace(
                    p, shape=p.shape[:d] + (None,) + p.shape[d + 1:])
    psig = dataclasses.replace(sig, params=tuple(params),
                               size_classes=sig.size_classes[:n0] if sig.size_classes else ())
    g = base._graph(psig)
    extra = ()
    if st.cuts:
        esig = dataclasses.replace(sig, params=sig.params[n0:],
                                   size_classes=sig.size_classes[n0:] if sig.size_classes else ())
        traced = derive._params(esig, "cut")
        extra = tuple(Tensor(f"{name}.in", t.shape, t.dtype, Input(len(g.params) + k,
                                                                   t.op.contiguous))
                      for k, (name, t) in enumerate(zip(st.cuts, traced)))
    tmap = {}
    for name, t in zip(st.cuts, extra):
        tmap[g.stage(name).output] = t
    keep = [s for s in g.stages if s.name not in st.cuts]
    new = fori_program._rebuild(keep, tmap)
    if st.output is not None:
        outs = tuple(next(s for s in new if s.name == st.output).values)
    else:
        outs = tuple(tmap.get(t, t) for t in g.outputs)
    live = live_stages(new, outs)
    if st.sizes:        # the full sizes where the kernel uses sizes as values
        vmap = {}
        for j, d, value in st.sizes:
            e = g.inputs[j].shape[d]
            if type(e) is n.Var:
                vmap[e] = value
        for s in live:
            s.body = SizeValues(vmap, {a.var: a.dom.extent for a in s.axes}).visit(s.body)
    # the shape checks ran on the full arrays (kdsl.dask.mapping); a part of a graph keeps
    # only its data checks (a reduction's non-empty check would see the empty blocks)
    return Graph(f"{g.name}_{'part' if st.output else 'rest'}", tuple(g.params) + extra,
                 live, outs, [], g.loc, list(g.data_checks))
