"""A structural fingerprint of a compile request: the disk-cache key computed before lowering.

What decides a compiled kernel is the traced graph (its stages, their bodies, the
constants and captured globals baked in), the finished schedule (every primitive's
record: splits, fuses, leaf order, placements, annotations, scopes, backend hints,
size hints), the signature (dtypes, ranks, size-1 dims, layouts, array classes), the
output layouts, and the backend (name, version, options) with the source of the
compiler itself.  ``request_key`` serialises all of it into one canonical token stream
and hashes it, so a process with a warm cache finds the object code before lowering.

Canonical: objects that compare by identity (``Var``, ``IterVar``, ``Tensor``, ``Stage``,
stage schedules ...) are numbered in the order a walk from the roots first meets them,
never by ``id()``; value objects (frozen dataclasses, tuples, enums) are written by
content; dicts in insertion order (deterministic for a deterministic trace).  Source
locations are left out (they only shape error messages, which are built from the live
graph, never from the cache).  Anything the walk cannot write faithfully (a function, a
set of objects, an unknown extension type) raises ``Unkeyable``: the caller then
compiles without an early key (correct, only slower), never with a key that might
collide.  Schedule functions are keyed by what they did -- the records they left in the
schedule -- not by their source text.
"""
from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import os
import struct
import sys
import types

import numpy as np

from ..errors import SourceLoc

#: bump when the serialisation below changes (old entries then simply miss)
FORMAT = "1"


class Unkeyable(Exception):
    """The request holds something the fingerprint cannot write canonically."""


_SCALARS = (bool, int, float, str, bytes, type(None))
_SKIP_ATTRS = frozenset({"_reads", "_reads_cache", "_kd_hash"})   # caches derived from other fields
#: fields that only word an error raised from the live graph at call time (never compiled in):
#: their text holds the user's file and line, so a kernel moved in its file keeps its key
_SKIP_FIELDS: dict = {}


def _message_fields():
    from ..graph import Constraint, DomainCheck
    return {Constraint: frozenset({"message", "hint"}), DomainCheck: frozenset({"message", "hint"})}


_CALLABLES = (types.FunctionType, types.MethodType, types.BuiltinFunctionType, types.ModuleType,
              functools.partial)
#: type -> how ``_Writer.token`` writes its instances (``_kind_of``; the walk meets few types)
_KINDS: dict = {}


def _kind_of(t) -> str:
    """How instances of ``t`` are written, first rule that applies: enum member, source
    location (left out), class, numpy dtype, numpy scalar, dict, set, callable (unkeyable),
    identity object (numbered), else a value object (by content)."""
    for base, kind in ((enum.Enum, "enum"), (SourceLoc, "loc"), (type, "type"),
                       (np.dtype, "dtype"), (np.generic, "generic")):
        if issubclass(t, base):
            return kind
    if t is dict:
        return "dict"
    if t is set or t is frozenset:
        return "set"
    if issubclass(t, _CALLABLES):
        return "callable"
    # compared by identity: two equal-looking ones are different things
    return "identity" if t.__eq__ is object.__eq__ else "value"


#: dataclass -> its field names (None: not a dataclass)
_DC_NAMES: dict = {}


class _Writer:
    """The walk: ``token(obj)`` is a short string; identity objects get ``#k`` and a definition."""

    def __init__(self):
        self.ids: dict = {}          # id(obj) -> number (identity objects)
        self.keep: list = []         # keeps walked objects alive (ids stay unique)
        self.defs: list = []         # definitions, by number
        self.todo: list = []         # identity objects numbered but not yet defined
        self.values: dict = {}       # id(value object) -> token (memo; shared subtrees once)

    def token(self, obj) -> str:
        t = type(obj)
        if t is float:        # the bits: -0.0 and NaN payloads are told apart
            return "f" + struct.pack("<d", obj).hex()
        if t in _SCALARS:
            return f"{t.__name__[0]}{obj!r}"
        if t is tuple or t is list:
            return ("(" if t is tuple else "[") + ",".join(self.token(x) for x in obj) + ")"
        kind = _KINDS.get(t)
        if kind is None:
            kind = _KINDS[t] = _kind_of(t)
        if kind == "enum":
            return f"E{t.__module__}.{t.__qualname__}.{obj.name}"
        if kind == "loc":
            return "L"
        if kind == "type":
            return f"T{obj.__module__}.{obj.__qualname__}"
        if kind == "dtype":
            return f"D{obj.str}"
        if kind == "generic":
            return f"N{obj.dtype.str}:{obj.item()!r}"
        if kind == "dict":
            return "{" + ",".join(f"{self.token(k)}:{self.token(v)}" for k, v in obj.items()) + "}"
        if kind == "set":
            toks = [self.token(x) for x in obj]
            if any("#" in x for x in toks):   # objects: no canonical order
                raise Unkeyable(f"a set of {type(next(iter(obj))).__name__} objects")
            return "S(" + ",".join(sorted(toks)) + ")"
        if kind == "callable":
            raise Unkeyable(f"a {t.__name__} ({getattr(obj, '__qualname__', obj)!r})")
        if kind == "identity":
            k = self.ids.get(id(obj))
            if k is None:
                k = self.ids[id(obj)] = len(self.ids)
                self.keep.append(obj)
                self.defs.append(None)
                self.todo.append(obj)
            return f"#{k}"
        memo = self.values.get(id(obj))
        if memo is None:
            body = self._fields(obj)
            memo = f"V{t.__module__}.{t.__qualname__}{body}"
            if len(memo) > 80:    # long subtrees: hashed, so a shared one costs its length once
                memo = "H" + hashlib.sha1(memo.encode()).hexdigest()
            self.values[id(obj)] = memo
            self.keep.append(obj)
        return memo

    def _fields(self, obj) -> str:
        items = []
        t = type(obj)
        names = _DC_NAMES.get(t)
        if names is None and t not in _DC_NAMES:
            names = _DC_NAMES[t] = (tuple(f.name for f in dataclasses.fields(t))
                                    if dataclasses.is_dataclass(t) else None)
        if names is not None:
            d = getattr(obj, "__dict__", None)
            if d is not None and tuple(d) != names:     # attributes beyond the fields
                names = names + tuple(k for k in d if k not in names)
        elif hasattr(obj, "__dict__"):
            names = list(vars(obj))
        elif isinstance(obj, tuple):          # a named tuple
            return "(" + ",".join(self.token(x) for x in obj) + ")"
        else:
            slots = [s for c in type(obj).__mro__ for s in getattr(c, "__slots__", ())]
            if not slots:
                raise Unkeyable(f"a {type(obj).__name__} object")
            names = slots
        if not _SKIP_FIELDS:
            _SKIP_FIELDS.update(_message_fields())
        skip = _SKIP_FIELDS.get(t, ())
        for name in names:
            if name in _SKIP_ATTRS or name == "__weakref__" or name in skip:
                continue
            try:
                v = getattr(obj, name)
            except AttributeError:
                continue
            items.append(f"{name}={self.token(v)}")
        return "<" + ";".join(items) + ">"

    def drain(self) -> None:
        """Define every numbered identity object (iteratively: chains of stages never recurse)."""
        while self.todo:
            obj = self.todo.pop(0)
            t = type(obj)
            self.defs[self.ids[id(obj)]] = f"{t.__module__}.{t.__qualname__}{self._fields(obj)}"


def fingerprint(*roots) -> str:
    """The hex sha256 of the canonical form of ``roots`` (raises ``Unkeyable``)."""
    w = _Writer()
    old = sys.getrecursionlimit()
    try:
        sys.setrecursionlimit(max(old, 20000))
        head = "|".join(w.token(r) for r in roots)
        w.drain()
    except RecursionError:
        raise Unkeyable("an expression too deep to write") from None
    finally:
        sys.setrecursionlimit(old)
    h = hashlib.sha256(FORMAT.encode() + b"\0" + head.encode())
    for d in w.defs:
        h.update(b"\0" + d.encode())
    return h.hexdigest()


def source_fingerprint(*dirs: str) -> str:
    """(path, size, mtime) of every ``.py`` file under ``dirs``: an edit to the compiler itself
    (a pass, the code generator) invalidates early keys even without a version bump.  One
    ``scandir`` per directory and one ``stat`` per file (~1 ms for kdsl and a backend), once
    per directory and process (kdsl's serves every backend's key)."""
    return hashlib.sha256("\0".join(_dir_fingerprint(d) for d in dirs).encode()).hexdigest()


@functools.lru_cache(maxsize=None)
def _dir_fingerprint(top: str) -> str:
    """``source_fingerprint`` of one directory tree."""
    parts = []
    stack = [""]                      # directories to list, relative to ``top``
    while stack:
        rel = stack.pop()
        try:
            entries = sorted(os.scandir(os.path.join(top, rel) if rel else top),
                             key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            if e.name.endswith(".py"):
                try:
                    st = e.stat()
                except OSError:
                    continue
                parts.append(f"{rel}{e.name}:{st.st_size}:{st.st_mtime_ns}")
            elif e.name != "__pycache__" and e.is_dir():
                stack.append(f"{rel}{e.name}/")
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def request_key(request, backend_name: str, backend_version: str, options: dict,
                source_dirs: tuple = ()) -> str | None:
    """The early disk-cache key of a CompileRequest, or None when it cannot be written
    canonically (``Unkeyable``: the caller compiles and keys by the generated code only)."""
    kdsl_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # the kdsl package
    dirs = (kdsl_dir,) + tuple(source_dirs)
    try:
        body = fingerprint(request.schedule, request.signature, tuple(request.out_contiguous),
                           request.options, options)
    except Unkeyable:
        return None
    head = (f"early:{FORMAT}|{backend_name}|{backend_version}|{sys.version.split()[0]}|"
            f"{np.__version__}|{source_fingerprint(*dirs)}|{body}")
    return hashlib.sha256(head.encode()).hexdigest()


def schedule_key(request, backend_name: str, backend_version: str, options: dict,
                 schedule_inputs: dict, source_dirs: tuple = ()) -> str | None:
    """The disk-cache key of a ``dispatch.DeferredRequest`` before it is scheduled: its
    ``schedule_roots`` (graph, declarative hints, size hints, signature, output layouts,
    options) plus ``schedule_inputs``, everything else the backend's default schedule reads
    (thread count, the target machine, module switches), and what ``request_key`` adds (the
    backend, its ``options`` for code generation, the compiler's source).  None when
    something cannot be written canonically (then the request is scheduled and keyed after)."""
    kdsl_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # the kdsl package
    dirs = (kdsl_dir,) + tuple(source_dirs)
    try:
        body = fingerprint(*request.schedule_roots, options, schedule_inputs)
    except Unkeyable:
        return None
    head = (f"pre:{FORMAT}|{backend_name}|{backend_version}|{sys.version.split()[0]}|"
            f"{np.__version__}|{source_fingerprint(*dirs)}|{body}")
    return hashlib.sha256(head.encode()).hexdigest()
