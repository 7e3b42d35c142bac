"""Globals a kernel reads are frozen when it is traced (issue 24 item 14).

A kernel's function runs once per specialisation, at trace time: the values of the module
globals (and closure variables) it reads then are baked into the compiled code, as Numba does.
Rebinding such a global later does not change the compiled kernel.  So that this is never
silent, the kernel keeps a snapshot of what its code read (``snapshot``) and compares the
identities on its slow path (``changed``, a few ``is`` tests): a rebound name gives one
``StaleGlobalWarning`` naming it.  Arrays changed in place keep their identity and are not
reported (their *contents* are read when traced only if the kernel used them as constants).
"""
from __future__ import annotations

import types

_SKIP = (types.ModuleType, type)


def _code_names(code) -> set:
    """Global names read by ``code`` and the code objects nested in it (lambdas, defs)."""
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _code_names(c)
    return names


def snapshot(fn) -> tuple:
    """``((where, name, value), ...)`` for the globals and closure cells ``fn`` reads, where
    ``where`` is the globals dict or the cell.  Modules and classes are left out (rebinding
    them is not a value change a kernel could bake in)."""
    code = getattr(fn, "__code__", None)
    if code is None:
        call = getattr(type(fn), "__call__", None)
        code, fn = getattr(call, "__code__", None), call
    if code is None:
        return ()
    out = []
    g = getattr(fn, "__globals__", {})
    for name in sorted(_code_names(code)):
        if name.startswith("__") or name not in g:
            continue
        v = g[name]
        if not isinstance(v, _SKIP):
            out.append((g, name, v))
    for name, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or ()):
        try:
            v = cell.cell_contents
        except ValueError:      # an empty cell (assigned later)
            continue
        if not isinstance(v, _SKIP):
            out.append((cell, name, v))
    return tuple(out)


def changed(snap: tuple) -> list:
    """The names in ``snap`` whose binding is no longer the object it was."""
    out = []
    for where, name, v in snap:
        if isinstance(where, dict):
            now = where.get(name, _GONE)
        else:
            try:
                now = where.cell_contents
            except ValueError:
                now = _GONE
        if now is not v:
            out.append(name)
    return out


_GONE = object()


def refresh(snap: tuple, names) -> tuple:
    """``snap`` with the entries of ``names`` updated to their current values (so that each
    change is reported once)."""
    out = []
    for where, name, v in snap:
        if name in names:
            if isinstance(where, dict):
                v = where.get(name, _GONE)
            else:
                try:
                    v = where.cell_contents
                except ValueError:
                    v = _GONE
        out.append((where, name, v))
    return tuple(out)
