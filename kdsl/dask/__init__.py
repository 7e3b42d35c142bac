"""kdsl on Dask: a kernel called with dask arrays returns a dask array (lazy).

Imported only when a kernel meets a dask array (``kdsl.kernel``'s miss path), never on the
numpy call path; Dask's plugin hook loads only ``kdsl.dask.tokens``.  The mapping comes from
kdsl's own analysis of the stage graph (``kdsl.dask.analysis``, ``kdsl.dask.mapping``):
elementwise kernels run blockwise, stencils on blocks extended by their halo, reductions
across chunks as a tree whose chunk, combine and aggregate steps are kdsl kernels derived from
the graph (``kdsl.dask.derive``), contractions as blockwise products summed by the same tree,
reductions in sequence in stages (``kdsl.dask.staged``); what cannot be split is made one
chunk with a ``DaskWarning``.  ``kd.dask.plan(kernel, *arrays)`` prints the mapping.
See docs/scaling.md.
"""
from __future__ import annotations

import importlib
import sys

from ..errors import ArgumentError, KdslUserError, for_user
from . import tokens

if "kdsl.kernel" in sys.modules:
    tokens.register(sys.modules["kdsl.kernel"].Kernel)

#: public names of the submodules, loaded on first use
_LAZY = {"DaskWarning": "build", "build": "build", "graph_hash": "build", "Plan": "mapping",
         "decide": "mapping", "is_dask": "mapping", "Staged": "staged"}


def __getattr__(name):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'kdsl.dask' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{mod}"), name)
    globals()[name] = value
    return value


def call(kernel, args, backend=None, out=None):
    """``kernel(*args)`` where some args are dask arrays: the result as a dask array."""
    tokens.register(type(kernel))
    if out is not None:
        raise for_user(ArgumentError(
            f"{kernel.__name__}: out= cannot be given with dask array arguments",
            hint="drop out=: the result is a lazy dask array; store it with "
                 "dask.array.store(result, target) or result.compute()"))
    try:
        return _call(kernel, tuple(args), backend)
    except KdslUserError as e:
        raise for_user(e) from None


def _call(kernel, args, backend):
    from .build import build
    from .mapping import decide
    from .staged import Staged
    p = decide(kernel, args)
    if p.sizes and not (isinstance(kernel, Staged) and set(p.sizes) <= set(kernel.sizes)):
        # the kernel uses sizes as values (a mean's n): tasks run it with the full sizes
        return _call(Staged.of(kernel, sizes=p.sizes), args, backend)
    if p.stage is None:
        return build(p, backend)
    # reductions in sequence across chunks: this one first, then the rest reading it
    part = _call(Staged.of(kernel, output=p.stage.name), args, backend)
    return _call(Staged.of(kernel, cut=p.stage.name), args + (part,), backend)


def plan(kernel, *args, **kw):
    """Print and return the mapping (a ``kdsl.dask.mapping.Plan``) ``kernel(*args)`` gets
    on Dask, stage by stage, with the reason for each rechunk or stage."""
    if kw:
        args = kernel._bind(args, kw)
    p = _plan(kernel, tuple(args), None, "")
    return p


def _plan(kernel, args, backend, pad):
    """Print ``kernel``'s plan and, for a staged one, its stages' plans (indented)."""
    from .mapping import decide
    from .staged import Staged
    p = decide(kernel, args)
    print("\n".join(pad + ln for ln in p.text().splitlines()))
    if p.stage is not None:
        part = Staged.of(kernel, output=p.stage.name)
        _plan(part, args, backend, pad + "    ")
        rest = Staged.of(kernel, cut=p.stage.name)
        _plan(rest, args + (_call(part, args, backend),), backend, pad + "    ")
    return p


__all__ = ["call", "plan", "Plan", "DaskWarning", "Staged", "is_dask", "graph_hash", "tokens"]
