"""The loop-IR interpreter: kdsl's debug mode (``backend="interp"``), for small sizes.

Like Triton's ``TRITON_INTERPRET=1``, it runs a kernel without a compiler, so
that you can see what a schedule does: the ``LoweredFunc`` (the loop nest that
``kernel.lower(...)`` prints, after every pass) is translated once into Python
source (``pyexec``), compiled, cached on the function object and called, one
loop iteration after another (thread-bound and parallel loops run sequentially).
Arrays are read and written in place through their own strides (any view,
negative strides, zero-size); an out-of-bounds Load/Store raises
``pyexec_rt.OutOfBounds`` (an ``InternalCompilerError``), which is how tests
catch bad guards.

Use it per call (``kernel(x, backend="interp")``), per block
(``with kd.use_backend("interp"):``) or for a whole program
(``KDSL_BACKEND=interp``).  ``kernel.source(x, backend="interp")`` shows the
Python it runs; tracebacks and pdb show those lines too, and
``step(kernel, x)`` runs one call under pdb, stopped at the first line of the
generated loops (``n``/``s`` step through them, ``p i0`` prints a loop index,
``c`` finishes the call).  It is slow (a Python statement per element): use
small shapes.

``InterpreterBackend`` wraps it in the Backend protocol under the name
"interp" (built into the core, like "numpy": an entry point of the kdsl
distribution and a built-in of kdsl.backends.registry).
"""
from __future__ import annotations

import contextvars
import linecache
import threading
import weakref

import numpy as np

from ..errors import InternalCompilerError
from ..ir import nodes as n
from ..ir.visitor import collect
from ..passes.fori_loop import wrap_loop
from ..passes.pipeline import SEQUENTIAL
from ..numerics.call_check import check_call
from .protocol import CompileRequest
from .pyexec import Program, generate
from .base import BackendBase
from .spec import BackendSpec

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
                filename = f"<kdsl interp {func.name} {id(func):x}>"
                try:
                    code = compile(prog.source, filename, "exec")
                except SyntaxError as e:   # a codegen bug: show the line it made
                    raise InternalCompilerError(f"the interpreter generated invalid Python for "
                                                f"kernel {func.name!r}: {e.msg} in line "
                                                f"{e.lineno}: {e.text!r}") from e
                # tracebacks and pdb read the generated loops from here (mtime None: kept)
                linecache.cache[filename] = (len(prog.source), None,
                                             prog.source.splitlines(True), filename)
                env = dict(prog.globals)
                exec(code, env)
                got = (prog, env[prog.entry])
                _cache[func] = got
                weakref.finalize(func, linecache.cache.pop, filename, None)
    return got


def python_source(func: n.LoweredFunc) -> str:
    """The Python text the interpreter runs for ``func``."""
    return program(func)[0].source


def run_lowered(func: n.LoweredFunc, inputs: list, outputs: list, scalars: list) -> None:
    """Execute ``func`` on numpy arrays: ``inputs``/``outputs`` match ``func.inputs``/``outputs``
    (outputs are written in place); ``scalars`` are the graph's scalar arguments in order
    (shape and stride values come from ``func.bindings``)."""
    _, fn = program(func)
    check_call(func, inputs, outputs)
    with np.errstate(all="ignore"):
        if _stepping.get():
            _stepping.set(False)      # the first kernel run by this call only
            import pdb
            pdb.Pdb().runcall(fn, list(inputs), list(outputs), list(scalars))
        else:
            fn(list(inputs), list(outputs), list(scalars))


_stepping = contextvars.ContextVar("kdsl_interp_step", default=False)


def step(kernel, *args, **kwargs):
    """Run ``kernel(*args, **kwargs)`` on the interpreter under pdb, stopped at the first line of
    its generated loops; returns what the call returns.  ``backend`` is "interp" unless given."""
    kwargs.setdefault("backend", "interp")
    token = _stepping.set(True)
    try:
        return kernel(*args, **kwargs)
    finally:
        _stepping.reset(token)


class Compiled:
    """A lowered kernel ready to run in the interpreter (the Backend protocol's ``Compiled``)."""

    fast = None     # no fast launcher: the generated Python one calls it

    def __init__(self, func: n.LoweredFunc):
        self.func = func
        program(func)   # generate and compile now: codegen errors surface at compile time

    def __call__(self, inputs: list, outputs: list, scalars: list, stream=None) -> None:
        run_lowered(self.func, inputs, outputs, scalars)

    @property
    def source(self) -> str:
        return python_source(self.func)


class InterpreterBackend(BackendBase):
    """The loop-IR interpreter as a backend: "interp" on the host, numpy arrays.

    ``InterpreterBackend(target="cuda")`` (built in as ``"interp-cuda"``) runs a kernel as
    scheduled for ``cuda`` instead: the kernel's ``cuda`` schedules, the GPU table
    (``kdsl.gpu.pipeline.PIPELINE``: device kernels, launches, barriers) and the SIMT executor
    (``kdsl.gpu.simt``: every block's threads together, shared-memory races, divergent
    barriers and out-of-bounds accesses reported).  No CUDA install is needed.
    """

    #: a kd.fori_loop runs inside one kernel on the host target (kdsl.passes.fori_loop)
    spec = BackendSpec(name="interp", device="host", pipeline=lambda: SEQUENTIAL, fori_loops=True)

    def __init__(self, target: str | None = None):
        from ..gpu.pipeline import GPU_TARGETS, for_target
        if target is not None:
            if target not in GPU_TARGETS:
                raise ValueError(f"the interpreter runs its own schedules or those of a GPU target "
                                 f"({', '.join(sorted(GPU_TARGETS))}), not {target!r}")
            # the target's schedules, its table; its default schedules choose by size
            self.spec = BackendSpec(name=f"interp-{target}", device="host", target=target,
                                    size_classes=True, pipeline=lambda: for_target(target))

    @property
    def target(self) -> str | None:
        """The GPU target whose schedules it runs (``spec.target``), or None."""
        return self.spec.target

    def schedule(self, sched, hints) -> None:
        """For a GPU target, that target's default schedules when its backend is installed
        (``interp-cuda`` checks the cuda defaults without a GPU); otherwise no default
        schedule: only the generic part of the user's hints applies."""
        if self.target is not None:
            target = _target_backend(self.target)
            if target is not None:
                target.schedule(sched, hints)
                return
        from ..schedule.hints import apply_hints
        apply_hints(sched, hints)

    def lower(self, request: CompileRequest) -> n.LoweredFunc:
        """The loop IR it runs: ``spec.pipeline()`` (the sequential table, or the GPU table for
        a GPU target, which keeps a kd.fori_loop as a host loop of launches)."""
        func = super().lower(request)       # spec.pipeline(), else the target's core table
        return func if self.target is not None else wrap_loop(request, func)

    def compile(self, request: CompileRequest) -> Compiled:
        if self.target is not None:
            from ..gpu.simt.compiled import SimtCompiled
            return SimtCompiled(self.lower(request))
        func = self.lower(request)
        found = collect(func.body, lambda x: isinstance(x, n.Intrinsic))
        if found:
            raise NotImplementedError(f"the IR interpreter cannot execute the intrinsic "
                                      f"{found[0].name!r} of kernel {func.name!r} (tensorize "
                                      f"targets need a backend that implements them)")
        return Compiled(func)

    def source(self, request: CompileRequest) -> str:
        """The Python it runs (for a GPU target: the host program of kernels it executes)."""
        if self.target is not None:
            return str(self.lower(request))
        return python_source(self.lower(request))

    def __repr__(self) -> str:
        return f"InterpreterBackend(target={self.target!r})" if self.target else "InterpreterBackend()"


def _target_backend(target: str):
    """The installed backend of ``target`` (looked up when first needed), or None."""
    from ..errors import BackendNotInstalled, BackendUnavailable
    from .registry import get_backend
    try:
        return get_backend(target)
    except (BackendNotInstalled, BackendUnavailable):
        return None


def cuda_interpreter() -> InterpreterBackend:
    """The built-in ``"interp-cuda"``: kernels as scheduled for cuda, on the SIMT executor."""
    return InterpreterBackend(target="cuda")


__all__ = ["run_lowered", "check_call", "python_source", "program", "step", "Compiled", "InterpreterBackend",
           "cuda_interpreter"]
