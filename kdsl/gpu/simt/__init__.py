"""The SIMT executor (issue 9): lowered IR run as a GPU would, with a race checker.

``run_simt(func, inputs, outputs, scalars)`` has ``interpreter.run_lowered``'s calling
convention.  See ``executor`` for the execution model and ``races`` for what is checked
and the errors raised.  It is a test oracle for GPU schedules and passes, not a backend.
"""
from __future__ import annotations

import numpy as np

from ...errors import InternalCompilerError
from ...ir import nodes as n
from ...ir.visitor import free_vars
from ...numerics import pyexec_rt as rt
from ...numerics.call_check import check_call
from .executor import Executor, global_mem
from .cross_thread import CrossThreadDivergence
from .races import BarrierDivergence, RaceError, SimtError, SimtOutOfBounds, UninitializedRead, _Mem
from .async_copy import AsyncCopyRace


def scalar_values(func: n.LoweredFunc, inputs: list, outputs: list, scalars: list) -> dict:
    """Var -> value for ``func.scalars``: shapes and strides read off the arrays, scalar
    arguments from ``scalars`` (the one place that knows how a LoweredFunc binds them)."""
    binds = func.bindings
    if len(binds) != len(func.scalars):
        raise InternalCompilerError(f"kernel {func.name!r}: {len(func.scalars)} scalars but "
                                    f"{len(binds)} bindings")
    arrays = list(inputs) + list(outputs)
    env = {}
    for v, b in zip(func.scalars, binds):
        if b.kind is n.BindingKind.SHAPE:
            x = arrays[b.index].shape[b.dim]
        elif b.kind is n.BindingKind.STRIDE:
            x = rt.stride_of(arrays[b.index], b.dim, func.name)
        elif b.kind is n.BindingKind.SCALAR:
            x = scalars[b.index]
        else:
            raise InternalCompilerError(f"unknown binding kind {b.kind!r}")
        scalar = b.kind is n.BindingKind.SCALAR
        env[v] = int(x) if v.dtype.is_int and not scalar else rt.make_value(x, v.dtype)
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
