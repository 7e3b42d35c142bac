"""The error taxonomy of kdsl (DESIGN principle 8).

User mistakes are ``KdslUserError`` subclasses that also derive from the
builtin ``TypeError``/``ValueError`` as fits, so ``except ValueError`` works.
They carry the user's source location (``loc``) and print it with the line of
code.  ``user_frames_only`` rewrites a traceback so that it ends in user code.
"""
from __future__ import annotations

import linecache
import os
import sys
import types
from dataclasses import dataclass

_KDSL_DIR = os.path.dirname(os.path.abspath(__file__))


_INTERNAL: dict = {}    # filename -> _is_internal (tracing asks once per traced op)


def _is_internal(filename: str) -> bool:
    """True for frames that belong to kdsl or one of its backends."""
    got = _INTERNAL.get(filename)
    if got is None:
        got = _INTERNAL[filename] = _is_internal_path(filename)
    return got


def _is_internal_path(filename: str) -> bool:
    if filename.startswith("<kdsl"):     # code kdsl generates (the interpreter's programs)
        return True
    f = os.path.abspath(filename)
    if f.startswith(_KDSL_DIR + os.sep):
        return True
    parts = f.split(os.sep)
    return any(p in ("kdsl_cpu", "kdsl_cuda") for p in parts[-4:-1]) and "tests" not in parts


@dataclass(frozen=True)
class SourceLoc:
    """A place in the user's code: file, line and the text of that line."""

    file: str
    line: int
    code: str = ""

    def __str__(self) -> str:
        text = f'File "{self.file}", line {self.line}'
        if self.code:
            text += f"\n    {self.code}"
        return text

    @property
    def short(self) -> str:
        return f"{os.path.basename(self.file)}:{self.line}"


def user_location(skip_internal: bool = True) -> SourceLoc | None:
    """The innermost frame of the current stack that is not inside kdsl."""
    frame = sys._getframe(1)
    while frame is not None:
        fn = frame.f_code.co_filename
        if fn == "<string>" and _kdsl_dataclass_init(frame):
            frame = frame.f_back
            continue
        if not (skip_internal and _is_internal(fn)) and not fn.startswith("<frozen"):
            code = linecache.getline(fn, frame.f_lineno).strip()
            return SourceLoc(fn, frame.f_lineno, code)
        frame = frame.f_back
    return None


def _kdsl_dataclass_init(frame) -> bool:
    """Whether ``frame`` runs the ``__init__`` that ``dataclasses`` generated (file
    ``<string>``) for a kdsl class (``kd.intrin.wmma(16, 16, 8)``): not the user's line."""
    if frame.f_code.co_name != "__init__":
        return False
    obj = frame.f_locals.get("self")
    return obj is not None and type(obj).__module__.split(".")[0] in ("kdsl", "kdsl_cpu",
                                                                      "kdsl_cuda")


class KdslError(Exception):
    """Base of every error kdsl raises on purpose."""


class KdslUserError(KdslError):
    """A mistake in the user's program: carries the location and a hint."""

    def __init__(self, message: str, *, loc: SourceLoc | None = None, hint: str | None = None):
        self.message = message
        self.loc = loc if loc is not None else user_location()
        self.hint = hint
        super().__init__(self._format())

    def _format(self) -> str:
        parts = [self.message]
        if self.hint:
            parts.append(f"hint: {self.hint}")
        if self.loc is not None:
            parts.append(f"at {self.loc}")
        return "\n".join(parts)

    def __str__(self) -> str:
        return self._format()

    def __reduce__(self):
        return (_rebuild_user_error, (type(self), self.message, self.loc, self.hint))


def _rebuild_user_error(cls, message, loc, hint):
    return cls(message, loc=loc, hint=hint)


class KernelError(KdslUserError, TypeError):
    """The kernel function cannot be traced (untraceable Python, bad op use)."""


class KernelValueError(KernelError, ValueError):
    """A traced op got values it cannot accept (axis out of range, ...)."""


class KernelIndexError(KernelError, IndexError):
    """An index outside an array's extent (found while tracing, or checked at call time)."""


class ShapeError(KernelError, ValueError):
    """Shapes do not fit (broadcasting, matmul, indexing, call-time checks)."""


class DTypeError(KernelError):
    """A dtype that kdsl does not support or that does not fit the op."""


class IntegerOverflowError(DTypeError, OverflowError):
    """A Python integer that the integer type of the operation cannot hold (numpy raises
    ``OverflowError`` here: ``uint8_array + 300``)."""


class ArgumentError(KernelError):
    """A kernel call got arguments it cannot take (count, type, rank, dtype)."""


class ScheduleError(KdslUserError, ValueError):
    """An illegal or impossible schedule primitive or hint."""


class ThreadCountError(KdslUserError, ValueError):
    """An invalid thread count: an argument of ``set_num_threads``/``num_threads`` or the
    value of ``KDSL_NUM_THREADS`` / ``OMP_NUM_THREADS`` (raised by ``kdsl.config`` and
    ``kdsl.threads``, exported as ``kd.ThreadCountError``)."""


class ScheduleWarning(UserWarning):
    """A schedule request that kdsl honours only in part (e.g. an unroll capped to bound the
    code size); the message says what was done instead and why."""


class StaleGlobalWarning(UserWarning):
    """A global (or closure variable) a kernel read when it was traced has been rebound since:
    the compiled kernel keeps the value it had then (globals are frozen at trace time)."""


#: [number of warn_user calls in this process]: a trace that warned is not kept on disk
#: (kdsl.runtime.trace_key), so that a warm process warns as a cold one does
warnings_issued = [0]


def warn_user(message: str, category=None) -> None:
    """Issue a warning attributed to the user's line (not to kdsl's)."""
    import warnings
    warnings_issued[0] += 1
    loc = user_location()
    warnings.warn_explicit(message, category or ScheduleWarning,
                           loc.file if loc else "kdsl", loc.line if loc else 0)


class BackendNotInstalled(KdslError, LookupError):
    """The requested backend's package is not installed."""


class UnknownBackendError(KdslUserError, BackendNotInstalled):
    """A backend name that no installed or known backend has (a misspelling): a user error,
    at the user's line, with the closest names as the hint."""


class BackendUnavailable(KdslError, RuntimeError):
    """The backend is installed but cannot be used here (import failed, no device)."""


class BackendCompileError(KdslError, RuntimeError):
    """The backend's compiler rejected generated code (a kdsl or toolchain problem)."""

    def __init__(self, message: str, *, log: str = "", source_path: str | None = None,
                 repro: str | None = None):
        self.log, self.source_path, self.repro = log, source_path, repro
        text = message
        if log:
            text += "\ncompiler log:\n" + log
        if source_path:
            text += f"\nsource dumped to {source_path}"
        if repro:
            text += f"\nreproduce with: {repro}"
        super().__init__(text)


class InternalCompilerError(KdslError, RuntimeError):
    """An invariant inside kdsl broke: this is a kdsl bug, please report it."""

    def __init__(self, message: str):
        super().__init__(f"{message}\n(this is a kdsl bug: please report it with the kernel that triggered it)")


def user_frames_only(tb: types.TracebackType | None) -> types.TracebackType | None:
    """Rebuild a traceback without kdsl-internal frames, so that it ends in user code."""
    frames = []
    while tb is not None:
        if not _is_internal(tb.tb_frame.f_code.co_filename):
            frames.append((tb.tb_frame, tb.tb_lasti, tb.tb_lineno))
        tb = tb.tb_next
    new = None
    for frame, lasti, lineno in reversed(frames):
        new = types.TracebackType(new, frame, lasti, lineno)
    return new


def for_user(exc: KdslUserError) -> KdslUserError:
    """``exc`` with its traceback trimmed to user frames; the public entry point that caught it
    does ``raise for_user(e) from None``, so that frame is the only kdsl one left (it sets
    ``__tracebackhide__`` so pytest and IPython hide it too)."""
    return exc.with_traceback(user_frames_only(exc.__traceback__))
