"""Guards around tracing a kernel's function: a kernel that calls itself (issue 24 item 13)
and Python errors that escape the trace, both turned into KernelErrors at the user's line."""
from __future__ import annotations

import linecache
import threading

from ..errors import KdslUserError, KernelError, SourceLoc, _is_internal

_TRACED = threading.local()     # .stack: the kernels whose functions are being traced


class tracing_kernel:
    """``with tracing_kernel(k):`` marks ``k`` as being traced in this thread; a kernel that
    calls itself while it is traced (directly or through others) is a KernelError at the user's
    call, not a RecursionError deep in Python."""

    def __init__(self, k):
        self.k = k

    def __enter__(self):
        k, stack = self.k, getattr(_TRACED, "stack", None)
        if stack is None:
            stack = _TRACED.stack = []
        if any(t is k for t in stack):
            chain = " -> ".join(t.__name__ for t in stack[stack.index(k):]) + f" -> {k.__name__}"
            raise KernelError(f"kernel {k.__name__} calls itself while it is traced ({chain}): a "
                              "kernel called inside a kernel is traced inline, so the recursion "
                              "never ends", hint="write the recursion as a Python loop of fixed "
                              "depth, or recurse in a plain Python helper that takes a depth")
        stack.append(k)

    def __exit__(self, *exc):
        _TRACED.stack.pop()


def trace_failure(name: str, e: BaseException, sig) -> KdslUserError:
    """A KernelError for a Python error that escaped tracing, at the user's line.

    Raised by the kernel's own code (``n, m = A.shape`` given a 3-D array): the error and
    the signature traced.  Raised inside kdsl (a function of the user's called by kdsl, or
    an input kdsl failed to validate): the error at the last user line, marked as kdsl's.
    """
    frames, tb = [], e.__traceback__
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    user = [t for t in frames if not _is_internal(t.tb_frame.f_code.co_filename)]
    loc = None
    if user:
        t = user[-1]
        fname = t.tb_frame.f_code.co_filename
        loc = SourceLoc(fname, t.tb_lineno, linecache.getline(fname, t.tb_lineno).strip())
    what = f"{type(e).__name__}: {e}"
    traced = f"while tracing {name} for arguments {sig.describe()}"
    if frames and user and frames[-1] is user[-1]:
        return KernelError(f"{name}: the kernel's code raised {what} ({traced})",
                           loc=loc, hint="the function runs once, on traced arrays of these "
                           "dtypes and ranks (sizes are symbolic unless "
                           "kd.kernel(specialize=True)): check this line against them")
    return KernelError(f"{name}: kdsl failed on this line: {what} ({traced})", loc=loc,
                       hint="check the arguments of the kdsl or numpy call on this line; if "
                            "they are right, this is a kdsl bug: please report it")
