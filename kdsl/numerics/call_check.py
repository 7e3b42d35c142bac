"""The check every executor of loop IR (the interpreter, the SIMT executor) makes of its call:
numpy arrays of the counts, ranks and dtypes the ``LoweredFunc`` expects."""
from __future__ import annotations

import numpy as np

from ..errors import ArgumentError, InternalCompilerError
from ..ir import nodes as n


def _check_array(func, buf: n.Buffer, arr, what: str):
    if not isinstance(arr, np.ndarray):
        raise InternalCompilerError(f"kernel {func.name!r}: {what} {buf.name!r} must be a numpy "
                                    f"array, got {type(arr).__name__}")
    if arr.ndim != len(buf.shape):
        raise InternalCompilerError(f"kernel {func.name!r}: {what} {buf.name!r} has {arr.ndim} "
                                    f"dimensions, the IR expects {len(buf.shape)}")
    want = buf.dtype.np
    if arr.dtype != want and arr.dtype == want.newbyteorder():   # the cpu backend's error
        raise ArgumentError(f"array {buf.name!r} has dtype {arr.dtype.str}, which is not in this "
                            "machine's byte order (the interpreter reads arrays in place)",
                            hint=f"convert it first: {buf.name}.astype({buf.name}.dtype."
                                 "newbyteorder('='))")
    if arr.dtype != want:
        raise InternalCompilerError(f"kernel {func.name!r}: {what} {buf.name!r} has dtype "
                                    f"{arr.dtype}, the IR expects {want}")


def check_call(func: n.LoweredFunc, inputs: list, outputs: list) -> None:
    """That ``inputs``/``outputs`` are numpy arrays of the counts, ranks and dtypes ``func``
    expects, the outputs writeable (every executor of loop IR checks its call with this)."""
    if len(inputs) != len(func.inputs) or len(outputs) != len(func.outputs):
        raise InternalCompilerError(f"kernel {func.name!r} takes {len(func.inputs)} inputs and "
                                    f"{len(func.outputs)} outputs, got {len(inputs)} and "
                                    f"{len(outputs)}")
    for b, a in zip(func.inputs, inputs):
        _check_array(func, b, a, "input")
    for b, a in zip(func.outputs, outputs):
        _check_array(func, b, a, "output")
        if not a.flags.writeable:
            raise InternalCompilerError(f"kernel {func.name!r}: output {b.name!r} is read-only")


__all__ = ["check_call"]
