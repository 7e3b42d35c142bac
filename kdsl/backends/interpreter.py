"""The loop-IR interpreter: runs a lowered kernel on numpy arrays, for small sizes.

It lets every schedule and pass be checked without a compiler: the
``LoweredFunc`` is translated once into Python source (``pyexec``), compiled,
cached on the function object and called.  Arrays are read and written in
place through their own strides (any view, negative strides, zero-size);
an out-of-bounds Load/Store raises ``pyexec_rt.OutOfBounds`` (an
``InternalCompilerError``), which is how tests catch bad guards.

``InterpreterBackend`` wraps it in the Backend protocol under the name
"interp" (registered by tests, not an entry point).
"""
from __future__ import annotations

import threading
import weakref

import numpy as np

from .. import dtypes as dt
from ..errors import InternalCompilerError
from ..ir import nodes as n
from ..ir.visitor import collect
from .protocol import CompileRequest
from .pyexec import Program, generate

_lock = threading.Lock()
_cache: "weakref.WeakKeyDictionary[n.LoweredFunc, tuple]" = weakref.WeakKeyDictionary()


def program(func: n.LoweredFunc) -> tuple[Program, object]:
    """The generated program of ``func`` and its compiled entry function (cached per func)."""
    got = _cache.get(func)
    if got is None:
        with _lock:
            got = _cache.get(func)
            if got is None:
                prog = generate(func)
                try:
                    code = compile(prog.source, f"<kdsl interp {func.name}>", "exec")
                except SyntaxError as e:   # a codegen bug: show the line it made
                    raise InternalCompilerError(f"the interpreter generated invalid Python for "
                                                f"kernel {func.name!r}: {e.msg} in line "
                                                f"{e.lineno}: {e.text!r}") from e
                env = dict(prog.globals)
                exec(code, env)
                got = (prog, env[prog.entry])
                _cache[func] = got
    return got


def python_source(func: n.LoweredFunc) -> str:
    """The Python text the interpreter runs for ``func``."""
    return program(func)[0].source


def _check_array(func, buf: n.Buffer, arr, what: str):
    if not isinstance(arr, np.ndarray):
        raise InternalCompilerError(f"kernel {func.name!r}: {what} {buf.name!r} must be a numpy "
                                    f"array, got {type(arr).__name__}")
    if arr.ndim != len(buf.shape):
        raise InternalCompilerError(f"kernel {func.name!r}: {what} {buf.name!r} has {arr.ndim} "
                                    f"dimensions, the IR expects {len(buf.shape)}")
    want = buf.dtype.np
    if arr.dtype != want:
        raise InternalCompilerError(f"kernel {func.name!r}: {what} {buf.name!r} has dtype "
                                    f"{arr.dtype}, the IR expects {want}")


def run_lowered(func: n.LoweredFunc, inputs: list, outputs: list, scalars: list) -> None:
    """Execute ``func`` on numpy arrays: ``inputs``/``outputs`` match ``func.inputs``/``outputs``
    (outputs are written in place); ``scalars`` are the graph's scalar arguments in order
    (shape and stride values come from ``func.attrs["bindings"]``)."""
    _, fn = program(func)
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
    with np.errstate(all="ignore"):
        fn(list(inputs), list(outputs), list(scalars))


class Compiled:
    """A lowered kernel ready to run in the interpreter (the Backend protocol's ``Compiled``)."""

    def __init__(self, func: n.LoweredFunc):
        self.func = func
        program(func)   # generate and compile now: codegen errors surface at compile time

    def __call__(self, inputs: list, outputs: list, scalars: list) -> None:
        run_lowered(self.func, inputs, outputs, scalars)

    @property
    def source(self) -> str:
        return python_source(self.func)


class InterpreterBackend:
    """The loop-IR interpreter as a backend: "interp" on the host, numpy arrays."""

    name = "interp"
    device = "host"

    def schedule(self, sched, hints) -> None:
        """No default schedule: only the generic part of the user's hints applies."""
        from ..schedule.hints import apply_hints
        apply_hints(sched, hints)

    def compile(self, request: CompileRequest) -> Compiled:
        func = request.lower()
        found = collect(func.body, lambda x: isinstance(x, n.Intrinsic))
        if found:
            raise NotImplementedError(f"the IR interpreter cannot execute the intrinsic "
                                      f"{found[0].name!r} of kernel {func.name!r} (tensorize "
                                      f"targets need a backend that implements them)")
        return Compiled(func)

    def source(self, request: CompileRequest) -> str:
        return python_source(request.lower())

    def accepts(self, array) -> bool:
        return isinstance(array, np.ndarray)

    def empty(self, shape: tuple, dtype, like=None):
        return np.empty(tuple(shape), dtype=dt.as_dtype(dtype).np)

    def __repr__(self) -> str:
        return "InterpreterBackend()"


__all__ = ["run_lowered", "python_source", "program", "Compiled", "InterpreterBackend"]
