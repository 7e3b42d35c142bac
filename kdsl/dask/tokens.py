"""Kernels in Dask's world: deterministic tokens and pickling of kernels made in functions.

A Kernel subclasses functools.partial whose ``func`` is its own bound ``_call``; Dask's
tokenizer, which walks partials through their ``func``, would loop on it (RecursionError).
``register(Kernel)`` gives ``dask.base.normalize_token`` a rule for kernels:
``kernel_token`` (module, qualified name, the function's code, constants, defaults, closure
values and the schedules attached).  It runs when ``kdsl.kernel`` is imported after Dask's
tokenizer, and through the ``dask.sizeof`` entry point (the top-level ``kdsl_dask_plugin``,
which Dask loads with ``dask.base`` without importing kdsl) when Dask comes second;
``kdsl.dask`` registers it too.

Kernels defined inside a function cannot be pickled by reference;
``reduce_by_value`` pickles them as their function (cloudpickle, which Dask uses, sends it
by value), their options and schedules, and ``rebuild`` makes one kernel per token in each
process (a registry: tasks of one kernel share its compiled code in a worker).
"""
from __future__ import annotations

import hashlib
import sys
import threading

_KERNEL = []            # the Kernel class, once kdsl.kernel registered it
_registry: dict = {}    # token -> kernel rebuilt in this process
_lock = threading.Lock()


def _code_parts(code, out):
    out.append(code.co_code)
    out.append(repr(code.co_names).encode())
    for c in code.co_consts:
        if hasattr(c, "co_code"):
            _code_parts(c, out)
        else:
            out.append(repr(c).encode())


def _value_token(v) -> bytes:
    tok = sys.modules.get("dask.tokenize")
    if tok is not None and hasattr(tok, "tokenize"):
        try:
            return tok.tokenize(v).encode()
        except Exception:   # noqa: BLE001 -- an untokenizable value: its repr stands in
            pass
    return repr(v).encode()


def kernel_token(k) -> str:
    """A deterministic token of kernel ``k``: where it is defined, its code, its captured
    values and schedules (never its compiled state)."""
    fn = k.fn
    parts = [f"{k.__module__}.{k.__qualname__}".encode(), repr(k.constants).encode(),
             repr(k.specialize).encode()]
    code = getattr(fn, "__code__", None)
    if code is not None:
        _code_parts(code, parts)
        for cell in fn.__closure__ or ():
            try:
                parts.append(_value_token(cell.cell_contents))
            except ValueError:      # an empty cell
                parts.append(b"<empty>")
        parts.append(_value_token(fn.__defaults__))
    else:
        parts.append(_value_token(fn))
    for h in k._hints:
        hc = getattr(h.fn, "__code__", None)
        parts.append(repr((h.target, sorted(h.hints.items()) if h.hints else ())).encode())
        if hc is not None:
            _code_parts(hc, parts)
    return hashlib.sha1(b"\0".join(parts)).hexdigest()


def _normalize(k):
    return "kdsl.Kernel", kernel_token(k)


def register(kernel_class=None) -> None:
    """Teach Dask's tokenizer about kernels (idempotent)."""
    if kernel_class is not None and not _KERNEL:
        _KERNEL.append(kernel_class)
    tok = sys.modules.get("dask.tokenize")
    if tok is None or not _KERNEL or not hasattr(tok, "normalize_token"):
        return
    tok.normalize_token.register(_KERNEL[0], _normalize)


# the dask.sizeof entry point lives outside the package (kdsl_dask_plugin: importing it loads
# nothing of kdsl); its name here is the one earlier installs' metadata may still name
from kdsl_dask_plugin import dask_plugin  # noqa: E402,F401


def reduce_by_value(k):
    """``__reduce__`` of a kernel pickled by value (this process keeps ``k`` as its token's
    kernel: unpickled here, it is ``k`` itself)."""
    token = kernel_token(k)
    with _lock:
        _registry.setdefault(token, k)
    return rebuild, (token, k.fn, k.specialize, k.constants, list(k._hints))


def rebuild(token, fn, specialize, constants, hints):
    """The kernel of ``token`` in this process (made from ``fn`` the first time)."""
    k = _registry.get(token)
    if k is not None:
        return k
    with _lock:
        k = _registry.get(token)
        if k is None:
            from ..runtime import fori_program
            k = fori_program.make_kernel(fn, specialize=specialize, constants=constants)
            k._hints[:] = hints     # (the function's own schedules are among them)
            _registry[token] = k
    return k
