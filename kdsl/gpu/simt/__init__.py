"""The SIMT executor (issue 9): lowered IR run as a GPU would, with a race checker.

``run_simt(func, inputs, outputs, scalars)`` has ``interpreter.run_lowered``'s calling
convention.  See ``executor`` for the execution model and ``races`` for what is checked
and the errors raised.  It is a test oracle for GPU schedules and passes, not a backend.
"""
from __future__ import annotations

import numpy as np

from ...ir import nodes as n
from ...ir.bindings import SCALAR, SHAPE, STRIDE, scalar_slots
from ...ir.visitor import free_vars
from ...numerics import pyexec_rt as rt
from ...numerics.call_check import check_call
from .executor import Executor, global_mem
from .cross_thread import CrossThreadDivergence
from .races import BarrierDivergence, RaceError, SimtError, SimtOutOfBounds, UninitializedRead, _Mem
from .async_copy import AsyncCopyRace


def scalar_values(func: n.LoweredFunc, inputs: list, outputs: list, scalars: list) -> dict:
    """Var -> value for ``func.scalars``: shapes and strides read off the arrays, scalar
    arguments from ``scalars`` (the bindings decoded by ``ir.bindings.scalar_slots``)."""
    arrays = list(inputs) + list(outputs)
    env = {}
    for v, sl in zip(func.scalars, scalar_slots(func)):
        if sl.kind == SHAPE:
            x = arrays[sl.index].shape[sl.dim]
        elif sl.kind == STRIDE:
            x = rt.stride_of(arrays[sl.index], sl.dim, func.name)
        else:
            x = scalars[sl.index]
        env[v] = int(x) if v.dtype.is_int and sl.kind != SCALAR else rt.make_value(x, v.dtype)
    return env


def run_simt(func: n.LoweredFunc, inputs: list, outputs: list, scalars: list,
             block_order=None) -> None:
    """Execute ``func`` under SIMT semantics, writing ``outputs`` in place; raises a
    ``SimtError`` on a race, a divergent barrier or an out-of-bounds access.
    ``block_order``: None runs blocks in order; a ``numpy.random.Generator`` shuffles them
    (a correct kernel gives the same result in any order)."""
    check_call(func, inputs, outputs)
    ex = Executor(func, block_order)
    ex.env.update(scalar_values(func, inputs, outputs, scalars))
    for k, (b, a) in enumerate(zip(func.buffers, list(inputs) + list(outputs))):
        if k < len(inputs):
            ex.mem[b] = _Mem(a)             # read only: nothing to race with
        else:
            ex.mem[b] = global_mem(a)
            ex.global_mem.append(ex.mem[b])
        if b.shape and all(v in ex.env for x in b.shape for v in free_vars(x)):
            want = tuple(int(ex.ev(x)) for x in b.shape)
            if a.shape != want:
                rt.bad_shape(func.name, b.name, a.shape, want)
    with np.errstate(all="ignore"):
        ex.run(func.body)


__all__ = ["run_simt", "scalar_values", "SimtError", "RaceError", "BarrierDivergence",
           "SimtOutOfBounds", "UninitializedRead", "AsyncCopyRace", "CrossThreadDivergence"]
