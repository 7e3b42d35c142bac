"""The disk-cache key of a trace, computed before tracing: a warm process does not run the
kernel's function (issue 26 item 4).

A traced graph is a function of what the trace reads: the kernel's code (and the code of every
function it calls), the values of the globals and closure variables that code names (frozen
at trace time, kdsl.runtime.globals_watch), the argument specs, the kernel's options, and
kdsl, numpy and Python themselves.  ``key`` writes all of that canonically and hashes it;
``load``/``save`` keep the pickled graph under that key in the disk cache, so a fresh process
with a warm cache skips the import of the frontend and the trace, then finds its object code
by the key before scheduling (``fingerprint.schedule_key``) as before.

What is written, per value the code can read:

- Python scalars, strings, bytes (floats by their bits), tuples, lists, dicts, sets, numpy
  dtypes and scalars by content; numpy arrays up to ``_MAX_ARRAY`` bytes by their bytes;
- functions by their code (bytecode, constants, names, file, first line and line table --
  error messages carry the user's lines) and, recursively, what they read; ``functools.partial``
  by its parts; another kernel by its function and options (it is traced inline);
- modules, classes and functions of kdsl, numpy, math and the standard library by name (kdsl's
  source, numpy's and Python's versions are in the key).

Anything else -- a user module the code reads attributes of, an object of a user class, a large
array, a C function of another library -- makes the key None: the kernel is traced as before
(correct, only slower).  A graph is saved only when it pickles without references to code
outside those packages, and only when its trace warned nothing (``errors.warnings_issued``).
"""
from __future__ import annotations

import builtins
import functools
import hashlib
import io
import os
import pickle
import struct
import sys
import types

import numpy as np

from ..ir.nodes import Combiner as _Combiner

#: bump when the serialisation below changes (old entries then simply miss)
FORMAT = "1"
#: larger global arrays make the key None (hashing them would cost more than a trace)
_MAX_ARRAY = 1 << 16
#: top-level packages whose modules, classes and functions are written by name
_KNOWN_ROOTS = frozenset({"kdsl", "numpy", "math", "cmath", "builtins", "operator",
                          "functools", "itertools", "collections", "typing", "enum", "copyreg",
                          "_operator", "_functools", "_collections", "dataclasses", "abc"})
_SCALARS = (bool, int, str, bytes, complex, type(None), type(Ellipsis))


class _NoKey(Exception):
    """The trace reads something ``key`` cannot write faithfully."""


def _known(module) -> bool:
    return isinstance(module, str) and module.partition(".")[0] in _KNOWN_ROOTS


def _by_name(v) -> bool:
    """``v`` is what its module and qualified name lead to (so the name stands for it)."""
    obj = sys.modules.get(v.__module__)
    for part in v.__qualname__.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return False
    return obj is v


def _code_names(code) -> set:
    """Names ``code`` and the code nested in it look up (globals, builtins, attributes)."""
    names = set(code.co_names)
    for c in code.co_consts:
        if type(c) is types.CodeType:
            names |= _code_names(c)
    return names


class _Writer:
    """Writes values as tokens into ``out``; ``functions`` numbers the functions met (cycles)."""

    def __init__(self, kernel_type):
        self.out: list = []
        self.functions: dict = {}
        self.kernel_type = kernel_type

    def value(self, v) -> None:
        w, t = self.out.append, type(v)
        if t is float:
            w("f" + struct.pack("<d", v).hex())
        elif t in _SCALARS:
            w(f"{t.__name__}:{v!r}")
        elif t is tuple or t is list:
            w(f"{t.__name__}{len(v)}(")
            for x in v:
                self.value(x)
            w(")")
        elif t is dict:
            w(f"dict{len(v)}(")
            for k, x in v.items():
                self.value(k)
                self.value(x)
            w(")")
        elif t is set or t is frozenset:
            parts = []
            for x in v:
                sub = _Writer(self.kernel_type)
                sub.functions = self.functions
                sub.value(x)
                parts.append("\0".join(sub.out))
            w(f"{t.__name__}{len(v)}(" + "\1".join(sorted(parts)) + ")")
        elif isinstance(v, np.ndarray):
            if v.dtype.hasobject or v.nbytes > _MAX_ARRAY:
                raise _NoKey("an array too large to hash")
            w(f"array:{v.dtype.str}:{v.shape}:"
              + hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest())
        elif isinstance(v, np.generic):
            w(f"np:{v.dtype.str}:{v.tobytes().hex()}")
        elif isinstance(v, np.dtype):
            w(f"dtype:{v.str}:{v!r}")
        elif t is types.FunctionType:
            if _known(v.__module__) and _by_name(v):
                w(f"F{v.__module__}.{v.__qualname__}")
            else:       # a user's function, or one a factory of kdsl's made (kd.exp, kd.sqrt)
                self.function(v, own=not _known(v.__module__))
        elif t is functools.partial:
            w("partial(")
            self.value(v.func)
            self.value(v.args)
            self.value(v.keywords)
            w(")")
        elif self.kernel_type is not None and isinstance(v, self.kernel_type):
            w(f"kernel({v.constants!r},{v.specialize!r}")
            self.function(v.fn)
            w(")")
        elif t is types.ModuleType:
            if not _known(v.__name__):
                raise _NoKey(f"module {v.__name__}")
            w(f"M{v.__name__}")
        elif isinstance(v, type):
            if not (_known(v.__module__) and _by_name(v)):
                raise _NoKey(f"class {v.__qualname__}")
            w(f"T{v.__module__}.{v.__qualname__}")
        elif isinstance(v, (types.BuiltinFunctionType, np.ufunc)):
            owner = getattr(v, "__self__", None)
            module = getattr(v, "__module__", None) or (
                owner.__name__ if type(owner) is types.ModuleType else None)
            if isinstance(v, np.ufunc):
                module = "numpy"
            elif owner is not None and type(owner) is not types.ModuleType:
                raise _NoKey("a bound method")
            if not _known(module) or (not isinstance(v, np.ufunc) and getattr(
                    sys.modules.get(module), v.__name__, None) is not v):
                raise _NoKey(f"function {v.__name__}")
            w(f"B{module}.{v.__name__}")
        elif _known(t.__module__) and t.__module__.startswith("kdsl"):
            from .fingerprint import Unkeyable, fingerprint
            try:      # kdsl's value objects (dtypes, reducers of plain values ...) by content
                w("K" + fingerprint(v))
            except Unkeyable as e:
                raise _NoKey(str(e)) from None
        else:
            raise _NoKey(f"a {t.__name__} object")

    def function(self, fn, own: bool = True) -> None:
        """A function: its code, defaults, closure and (``own``: a user's function) the
        globals its code names (a function of kdsl's: those are kdsl's, in its source key)."""
        k = self.functions.get(id(fn))
        if k is not None:
            self.out.append(f"R{k}")
            return
        self.functions[id(fn)] = len(self.functions)
        if type(fn) is not types.FunctionType:
            raise _NoKey(f"a {type(fn).__name__} kernel function")
        code = fn.__code__
        self.code(code)
        self.value(fn.__defaults__)
        self.value(fn.__kwdefaults__)
        for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
            self.out.append(f"cell:{name}")
            try:
                v = cell.cell_contents
            except ValueError:
                self.out.append("empty")
                continue
            self.value(v)
        if not own:
            return
        g, b = fn.__globals__, fn.__builtins__
        for name in sorted(_code_names(code)):
            if name in g:
                self.out.append(f"g:{name}")
                self.value(g[name])
            elif name in b:
                v = b[name]
                self.out.append(f"b:{name}" if getattr(builtins, name, None) is v else f"b!{name}")
                if getattr(builtins, name, None) is not v:
                    self.value(v)
            else:
                self.out.append(f"u:{name}")

    def code(self, code) -> None:
        w = self.out.append
        w(f"code:{code.co_qualname}:{code.co_filename}:{code.co_firstlineno}:"
          f"{code.co_argcount}:{code.co_posonlyargcount}:{code.co_kwonlyargcount}:"
          f"{code.co_flags}:{code.co_code.hex()}:{code.co_linetable.hex()}:"
          f"{code.co_exceptiontable.hex()}:{code.co_names}:{code.co_varnames}:"
          f"{code.co_freevars}:{code.co_cellvars}")
        for c in code.co_consts:
            if type(c) is types.CodeType:
                self.code(c)
            else:
                self.value(c)


@functools.lru_cache(maxsize=None)
def _environment() -> str:
    """kdsl's source (every .py file's size and mtime), kdsl's, numpy's and Python's versions."""
    from .cache import kdsl_version
    from .fingerprint import source_fingerprint
    kdsl_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return (f"trace:{FORMAT}|{kdsl_version()}|{sys.version}|{np.__version__}|"
            f"{source_fingerprint(kdsl_dir)}")


def key(fn, specs, name, constants, kernel_type=None) -> str | None:
    """The disk-cache key of tracing ``fn`` on ``specs`` (kdsl.frontend.trace.trace's
    arguments), or None when the trace reads something that cannot be written canonically.
    ``kernel_type``: the class of kernels (written by their function when read as globals)."""
    from .fingerprint import Unkeyable, fingerprint
    w = _Writer(kernel_type)
    try:
        w.function(fn)
        spec_token = fingerprint(list(specs))
    except (_NoKey, Unkeyable, RecursionError):
        return None
    h = hashlib.sha256(_environment().encode())
    h.update(f"\0{name}\0{sorted(constants)!r}\0{spec_token}\0".encode())
    h.update("\0".join(w.out).encode())
    return h.hexdigest()


class _Pickler(pickle.Pickler):
    """Refuses references to code outside kdsl, numpy and the standard library (a graph that
    holds a user's function or class is not saved: its code might change under the key), and
    combiners that are not built in (``kind`` None: a ``kd.reducer``'s, the online-softmax
    fusion's): schedules recognise those by identity with the process's own objects, which an
    unpickled copy is not."""

    def reducer_override(self, obj):
        if type(obj) is _Combiner and obj.kind is None:
            raise _NoKey(f"the graph holds the combiner {obj.name!r}")
        if isinstance(obj, (type, types.FunctionType, types.BuiltinFunctionType,
                            types.ModuleType)):
            module = obj.__name__ if isinstance(obj, types.ModuleType) else \
                getattr(obj, "__module__", None)
            if not _known(module):
                raise _NoKey(f"the graph holds {obj!r}")
        return NotImplemented


def dumps(graph) -> bytes | None:
    """The graph pickled for the disk cache, or None when it cannot be (see ``_Pickler``)."""
    buf = io.BytesIO()
    try:
        _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(graph)
    except (_NoKey, pickle.PicklingError, TypeError, AttributeError, RecursionError):
        return None
    return buf.getvalue()


def load(store, k: str):
    """The graph saved under ``k`` in the disk cache ``store``, or None (a miss, or an entry
    that does not unpickle into a graph: it is dropped)."""
    blob = store.get(k)
    if blob is None:
        return None
    from ..graph import Graph
    try:
        graph = pickle.loads(blob)
    except Exception as e:   # a bad entry never sticks: dropped, then traced again
        store.discard(k, "a traced graph", e)
        return None
    if type(graph) is not Graph:
        store.discard(k, "a traced graph")
        return None
    return graph


def save(store, k: str, graph) -> None:
    """Keep ``graph`` under ``k`` (nothing when it cannot be pickled faithfully, nor for a
    graph with ``kd.fori_loop``s: their loop records hold the live trace context)."""
    from .dispatch import has_loops
    if has_loops(graph):
        return
    blob = dumps(graph)
    if blob is not None:
        store.put(k, blob)


def lookup(kernel, specs, kernel_type):
    """``(graph, save)``: the graph of ``kernel`` for ``specs`` from the disk cache (None: a
    miss) and the function that keeps a traced one there (None: no cache, or no key)."""
    from .. import config
    if not config.cache_enabled():
        return None, None
    from .cache import DiskCache
    k = key(kernel.fn, specs, kernel.__name__, kernel.constants, kernel_type)
    if k is None:
        return None, None
    store = DiskCache()
    graph = load(store, k)
    if graph is not None:
        from .. import compile_log
        compile_log.note("graph from the disk cache (key before tracing)")
    return graph, functools.partial(save, store, k)


def check(name: str, cached, fresh) -> None:
    """``KDSL_VERIFY`` (on under pytest): a graph found before tracing must be the graph the
    trace gives now; else the key misses an input of the trace (an InternalCompilerError: a
    kdsl bug, never a wrong kernel)."""
    from ..errors import InternalCompilerError
    from .fingerprint import Unkeyable, fingerprint
    try:
        same = fingerprint(fresh) == fingerprint(cached)
    except Unkeyable:       # (callables of kdsl's in the graph): compare the pickles
        same = dumps(fresh) == dumps(cached)
    if not same:
        raise InternalCompilerError(
            f"kernel {name}: the graph cached under the key before tracing differs from the "
            "graph traced now (an input of the trace is missing from kdsl.runtime.trace_key)")
