"""``kd.kernel``: the decorator and the Kernel object users call.

A call first offers its arguments to the fast launcher of the specialisation run last
(kdsl.runtime.fastpath), else looks the launcher of its key (``callplan.key_function``) up
and runs it; a miss validates, traces, schedules and compiles once per key under a lock of
its own.  Arguments bind like a Python call; a kernel called while another is traced is
traced inline; on host backends foreign arrays are read as numpy (kdsl.runtime.foreign).
"""
from __future__ import annotations

import functools
import inspect
import os
import threading

import numpy as np

from .backends import registry as _reg
from .errors import (ArgumentError, InternalCompilerError, KdslError, KdslUserError, KernelError,
                     ScheduleError, StaleGlobalWarning, for_user, user_location, warn_user,
                     warnings_issued)
from .frontend import context as _ctx
from . import compile_log, config
from .runtime import callplan, dispatch, fastpath, foreign, fori_program, globals_watch
from .runtime.outputs import casting_launcher, check_out
from .runtime.outputs import overlaps as _overlaps
from .runtime.trace_guard import trace_failure, tracing_kernel
from .runtime.callplan import FOREIGN
from .runtime.signature import signature_from_args
from .tune import store as _tune_store

_RESERVED = ("backend", "out", "stream")
_TRACING = _ctx.TRACING     # [number of traces in progress]: read on every call
# bound once: the fast path of __call__ reads the default-backend state without calls into Python
_cur_backend = _reg.current_backend_var().get
_env_get, _ENV_KEY = _reg.env_backend_reader()


def _host_array(a, backend) -> bool:
    """Is ``a`` an array-like to convert with np.asarray for this (host) backend (the key's
    probe)?  The backend first: asking a torch tensor for __cuda_array_interface__ costs us."""
    return (not isinstance(a, (np.generic, np.ndarray)) and _reg.runs_on_host(backend)
            and foreign.host_readable(a))


def _no_entry(*args, **kw):
    """The callable functools.partial's constructor needs; Kernel.__init__ replaces it."""
    raise InternalCompilerError("a kernel was called before its __init__ ran")


class Kernel(functools.partial):
    """A traced-and-compiled-on-demand kernel; call it like the function it wraps.

    A call enters through functools.partial's C entry, which forwards it to ``self._call`` as
    it came: since CPython 3.12 a subclass without ``__call__`` keeps its base's vectorcall
    entry (a ``__call__`` of its own costs ~0.2-0.3 us a call with ``out=``).  Nothing else of
    functools.partial is used."""

    def __new__(cls, *args, **kw):
        return super().__new__(cls, _no_entry)

    if hasattr(functools.partial, "__get__"):      # Python >= 3.13 binds (warns) partials
        def __get__(self, obj, objtype=None):
            """A kernel stored as a class attribute is the kernel (never a bound method)."""
            return self

    def __init__(self, fn, *, specialize=False, constants=()):
        # the call entry: functools.partial's state (callable, args, keywords, __dict__)
        functools.partial.__setstate__(self, (self._call, (), None, self.__dict__))
        if not callable(fn):
            raise KernelError(f"kd.kernel needs a function, got {type(fn).__name__}",
                              hint="decorate a def: @kd.kernel above `def f(A, B): ...`")
        name = getattr(fn, "__name__", None)
        if not isinstance(name, str):   # a callable object: named after its class
            name = type(fn).__name__
        functools.update_wrapper(self, fn, updated=())
        self.__name__ = name
        self.__qualname__ = getattr(fn, "__qualname__", name)
        try:
            signature = inspect.signature(fn)
        except (TypeError, ValueError) as e:
            raise KernelError(f"kd.kernel: cannot read the parameters of {name} ({e})",
                              hint="decorate a Python function or an object whose __call__ "
                                   "is one") from None
        params = list(signature.parameters.values())
        bad = [p.name for p in params if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        if bad:
            raise KernelError(f"kernel {name}: parameters must be named ones, got *{bad[0]}",
                              hint="take each array or scalar as its own parameter")
        self.fn = fn
        self._signature = signature
        self.arg_names = tuple(p.name for p in params)
        self._npos = sum(1 for p in params if p.kind is not p.KEYWORD_ONLY)
        clash = [a for a in self.arg_names if a in _RESERVED]
        if clash:
            raise KernelError(f"kernel {name}: parameter name {clash[0]!r} is reserved "
                              f"({', '.join(_RESERVED)} are keywords of every kernel call)",
                              hint="rename the parameter")
        constants = (constants,) if isinstance(constants, str) else tuple(constants)
        unknown = [c for c in constants if c not in self.arg_names]
        if unknown:
            raise KernelError(f"kernel {name}: constants names {unknown[0]!r}, which is not "
                              f"a parameter; parameters: {', '.join(self.arg_names)}",
                              hint="list parameter names of the function in constants=")
        self.specialize, self.constants = bool(specialize), constants
        self._nargs = len(self.arg_names)
        # positional calls with every argument skip binding; keyword-only parameters always bind
        self._nfast = self._nargs if self._npos == self._nargs else -1
        self._const = tuple(a in constants for a in self.arg_names)
        # the cache key of a call of every argument (callplan.key_function)
        self._keyfn = callplan.key_function(self._nargs, self._const, self.specialize)
        self._hints = list(getattr(fn, "__kdsl_schedules__", ()))
        self._cache = {}       # (backend, gen, arg keys..., out key) -> launcher
        self._slots = {}       # launcher -> its fastpath.FastSlot (specialisations that have one)
        self._graphs = {}      # (signature params, specialize) -> Graph
        self._locks = {}
        self._lock = threading.Lock()
        self._version = 0
        self._fast = None      # (backend name, registry generation, packed(args, out), takes
        #                        device arrays) of the last fast launcher, or None
        self._fast_out = None  # the same for calls with out=
        self._frozen = ()      # the globals the traced code read (kdsl.runtime.globals_watch)
        self._native = None    # the bound _call a native entry replaced as the partial's function

    # ------------------------------------------------------------- calling
    def _call(self, *args, backend=None, out=None, stream=None, **kw):
        """``kernel(*args, backend=, out=, stream=, **kw)``: the call.  User errors of every
        later step are re-raised here: only this frame of kdsl stays in the traceback."""
        # 1. the fast launcher of the specialisation run last checks the arguments itself
        # (NotImplemented: not its own, traced values included), so only the backend choice is
        # checked here, the default rule inlined: use_backend's, else (KDSL_BACKEND unset) a
        # device launcher serves device arrays, a host one the automatic default's calls
        fast = self._fast if out is None else self._fast_out
        if fast is not None and stream is None and not kw:
            name, gen, packed, dev = fast
            if gen == _reg.generation:
                b = backend
                if b is None:
                    b = _cur_backend()
                    if b is None and _env_get(_ENV_KEY) is None:
                        b = name if dev else _reg.auto_default
                if b is name or (type(b) is str and b == name):
                    r = packed(args, out)
                    if r is not NotImplemented:
                        return r
        try:
            # keywords, omitted defaults, or a trace in progress (maybe a nested call): bound
            if kw or _TRACING[0] or len(args) != self._nfast:
                args = self._bind(args, kw)
                if _ctx.active() is not None:   # called inside another kernel: traced inline
                    return self._inline(args, backend, out, stream)
            if out is None or not _overlaps(out, args):
                return self._call_bound(args, backend, out, stream)
            return self._into(args, backend, out, stream)
        except KdslUserError as e:
            __tracebackhide__ = True  # noqa: F841  (pytest/IPython hide this frame)
            raise for_user(e) from None

    def _call_bound(self, args, backend, out, stream):
        """The call past the fast launcher: the launcher of this call's key (a miss compiles)."""
        if self._frozen:
            self._check_globals()
        version, gen = self._version, _reg.generation
        asked = backend         # a dask call picks per chunk (CuPy chunks: cuda), not here
        if backend is None:
            backend = _reg.default_backend_name(args)
        if out is not None and type(out) is not np.ndarray and foreign.needs_host_call(out) \
                and _reg.runs_on_host(backend):      # out= a torch tensor: written in place
            return foreign.host_call(self, args, backend, out, stream)
        # 2. the launcher of this call's key (callplan.key_function; None: the miss says why)
        launch = None
        if len(args) == self._nargs:
            key = self._keyfn(args, backend, gen, out, backend in _reg.size_classed,
                              _host_array)
            if (key is FOREIGN or key is None) and foreign.lazy_arrays(args):
                from .dask import call as dask_call     # dask arrays: a dask array back
                return dask_call(self, args, asked, out)
            if key is FOREIGN:   # read as numpy once per call (results: the caller's library)
                return foreign.host_call(self, args, backend, out, stream)
            launch = self._cache.get(key)
        if launch is None:
            launch = self._miss(args, backend, out)
        result = launch(args, out, stream)
        slot = self._slots.get(launch)
        if slot is not None and stream is None and type(backend) is str and self._nfast >= 0:
            fast = slot.get()       # a FastLauncher with its packed(args, out)
            if fast is not None:
                self._promote(out is None, (backend, gen, fast.packed, fast.device_arrays),
                              version, fast.entry)
        return result

    def _bind(self, args, kw) -> tuple:
        """The arguments in parameter order, bound like a Python call (defaults applied)."""
        try:
            ba = self._signature.bind(*args, **kw)
        except TypeError as e:
            raise ArgumentError(f"{self.__name__}(): {e}", hint=f"call it as {self.__name__}"
                                f"{self._signature}; backend, out and stream are the keywords "
                                "of the call itself") from None
        ba.apply_defaults()
        return tuple(ba.arguments[a] for a in self.arg_names)

    def _recall(self, args, backend, out, stream):
        """Call again with bound ``args`` (keyword-only parameters passed by name)."""
        n = self._npos
        return self(*args[:n], backend=backend, out=out, stream=stream,
                    **dict(zip(self.arg_names[n:], args[n:])))

    def _into(self, args, backend, out, stream):
        """An ``out=`` that shares memory with the arguments (backends may assume it never
        does; numpy reads the inputs first): computed into fresh arrays like ``out`` (checked
        as usual), then copied."""
        several = isinstance(out, tuple)
        outs = out if several else (out,)
        if not all(o.flags.writeable for o in outs if type(o) is np.ndarray):
            return self._call_bound(args, backend, out, stream)    # its miss reports it
        tmp = None
        if all(type(o) is np.ndarray for o in outs):
            tmp = tuple(np.empty(o.shape, o.dtype) for o in outs)
            tmp = tmp if several else tmp[0]
        fresh = self._recall(args, backend, tmp, stream)
        for o, r in zip(outs, fresh if several else (fresh,)):
            np.copyto(o, r)
        return out

    def _inline(self, args, backend, out, stream):
        """Trace this kernel's function into the kernel being traced (a nested call)."""
        given = [k for k, v in (("backend", backend), ("out", out), ("stream", stream))
                 if v is not None]
        if given:
            raise KernelError(f"{self.__name__}: {given[0]}= has no meaning when a kernel is called "
                              "inside another kernel: it is traced inline into the caller",
                              hint=f"drop {given[0]}=; the outer kernel's call decides it")
        npos = self._npos
        with tracing_kernel(self):
            return self.fn(*args[:npos], **dict(zip(self.arg_names[npos:], args[npos:])))

    def _check_globals(self):
        """Warn (once per change) about globals read by the traced code that were rebound since."""
        names = globals_watch.changed(self._frozen)
        if names:
            self._frozen = globals_watch.refresh(self._frozen, names)
            which = ", ".join(repr(x) for x in names)
            warn_user(f"kernel {self.__name__}: the global {which} it read when traced has been "
                      "rebound since; kernels freeze the globals they read at trace time, so "
                      "the compiled code keeps the old value (a new specialisation may see the "
                      "new one)", StaleGlobalWarning)

    def _promote(self, plain, entry, version, make=None):
        """Make ``entry`` (``_fast``'s form) the one tried first.  ``make(kernel)`` (a
        ``FastLauncher.entry``: the cuda helper's) may give a native call entry doing step 1 of
        ``_call`` in C: it becomes the partial's function."""
        with self._lock:
            if version == self._version:  # no schedule was added since its launcher was looked up
                if plain:
                    self._fast = entry
                else:
                    self._fast_out = entry
                if make is not None and not self._native:
                    native = make(self)
                    if native is not None:
                        self._native = self.func        # (the bound _call, kept alive)
                        functools.partial.__setstate__(self, (native, (), None, self.__dict__))

    def _miss(self, args, backend, out):
        """Validate the arguments, then compile (once per key) and return the launcher."""
        key = self._key(args, backend, out)
        with compile_log.compiling(self, key, backend):   # logs stage times and the reason
            return self._build(key, args, backend, out)

    def _key(self, args, backend, out):
        """The key of a call with ``backend`` loaded, or the ArgumentError saying why it has
        none."""
        if len(args) != self._nargs:
            raise ArgumentError(
                f"{self.__name__}() takes {self._nargs} argument(s) "
                f"({', '.join(self.arg_names)}) but {len(args)} were given",
                hint="pass one array or scalar per parameter, positionally")
        be = _reg.get_backend(backend)   # loaded first: it may register array readers
        key = self._keyfn(args, backend, _reg.generation, out, be.spec.size_classes, None)
        if key is None:     # an argument with no key: the signature says which, and why
            signature_from_args(args, self.arg_names, self.constants, self.specialize, out,
                                user_location())
            raise InternalCompilerError(f"{self.__name__}: no key for these arguments")
        return key

    def _graph(self, sig):
        gkey = (sig.params, sig.specialize)
        g = self._graphs.get(gkey)
        if g is None:
            g = self._graphs[gkey] = self._trace(sig)
        return g

    def _trace(self, sig):
        """The graph of ``sig``: from the disk cache by the key before tracing when it is there
        (kdsl.runtime.trace_key), else traced (and kept there)."""
        from .runtime import trace_key
        specs = sig.specs()
        graph, save = trace_key.lookup(self, specs, Kernel)
        if graph is None:
            warned = warnings_issued[0]
            graph = self._run_trace(sig, specs)
            if save is not None and warned == warnings_issued[0]:   # (a warning is given again)
                save(graph)
        elif config.verify():     # (on under pytest: the suite checks the key)
            trace_key.check(self.__name__, graph, self._run_trace(sig, specs))
        if self._frozen:          # the globals the trace read: snapshot, or report rebindings
            self._check_globals()
        else:
            self._frozen = globals_watch.snapshot(self.fn)
        return graph

    def _run_trace(self, sig, specs):
        try:
            with tracing_kernel(self), compile_log.stage("trace"):
                return dispatch.trace_graph(self.fn, specs, name=self.__name__,
                                            constants=self.constants)
        except KdslError:
            raise
        except (ValueError, TypeError, IndexError, KeyError, AttributeError, ZeroDivisionError) as e:
            raise trace_failure(self.__name__, e, sig) from e

    def _build(self, key, args, backend, out):
        be = _reg.get_backend(backend)
        version = self._version
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            launch = self._cache.get(key)
            if launch is not None:
                return launch
            sig = signature_from_args(args, self.arg_names, self.constants, self.specialize,
                                      out, user_location(), be.spec.size_classes)
            graph, slot = self._graph(sig), None
            if out is not None and any(check_out(self.__name__, graph, out)):
                # numpy's same_kind cast into an out= of another dtype: computed, then copied
                launch = casting_launcher(self.__name__, self._miss(args, backend, None),
                                          isinstance(out, tuple))
            else:
                if _tune_store.autotune_on():   # KDSL_AUTOTUNE=1: tune first (once per key)
                    from .tune.search import autotune
                    autotune(self, args, backend, be, sig, graph)
                _req, compiled = dispatch.compile_for(self, be, sig, graph)
                from .backends.spec import check_compiled   # (loaded with the backend)
                compiled = check_compiled(be, compiled)     # callable, with its `fast` capability
                mode = None if out is None else "tuple" if isinstance(out, tuple) else "one"
                like = next((p.kind for p in sig.params if hasattr(p, "kind")), None)
                plan = callplan.make(self.__name__, graph, sig, mode, args, out, compiled, key)
                launch = dispatch.build_launcher(plan, be, compiled, self.arg_names, like)
                slot = fastpath.slot_for(compiled, plan)
            if version == self._version:    # no schedule was added meanwhile
                self._cache[key] = launch
                if slot is not None:
                    self._slots[launch] = slot
            return launch

    # ------------------------------------------------------------- looking inside
    def _inspect(self, args, backend, lowering_only=False):
        from .runtime.inspection import request_for
        return request_for(self, args, backend, lowering_only)

    def lower(self, *args_or_specs, backend=None, **kw):
        """The lowered loop-nest IR (a LoweredFunc; ``print`` it) for these arguments or specs.

        ``backend`` names the target whose schedules apply; it need not be installed
        (the core pipeline is used then, without the backend's own passes).  Arguments bind
        like a call's (keywords, defaults).
        """
        try:
            args_or_specs = self._bind(args_or_specs, kw)
            be, req = self._inspect(args_or_specs, backend, lowering_only=True)
            return dispatch.lower_request(be, req)
        except KdslUserError as e:
            __tracebackhide__ = True  # noqa: F841  (pytest/IPython hide this frame)
            raise for_user(e) from None

    def source(self, *args_or_specs, backend=None, **kw) -> str:
        """What the backend compiles (LLVM IR, CUDA C++, the stage graph for numpy)."""
        try:
            args_or_specs = self._bind(args_or_specs, kw)
            be, req = self._inspect(args_or_specs, backend)
            if isinstance(req, dispatch.ProgramRequest):    # kd.fori_loop: the parts' sources
                return str(req.show(source=True))
            return be.source(req)
        except KdslUserError as e:
            __tracebackhide__ = True  # noqa: F841  (pytest/IPython hide this frame)
            raise for_user(e) from None

    # ------------------------------------------------------------- schedules
    def tune(self, *example_args, backend=None, budget_s=10.0, trials=None, **kw):
        """Search the backend's schedule space for this call's specialisation on the device,
        check every candidate against the numpy reference, persist the fastest correct one
        (used by every later compile of that key, in any process sharing the cache) and
        return a ``kdsl.tune.TuneResult``.  See kdsl/tune/search.py and docs/tuning.md."""
        from .tune.search import tune
        try:
            return tune(self, *example_args, backend=backend, budget_s=budget_s, trials=trials, **kw)
        except KdslUserError as e:
            raise for_user(e) from None

    def schedule(self, target):
        """Decorator: ``kernel.schedule("cpu")(fn, ...)`` adds explicit schedule functions
        ``fn(s)`` for one target (``None``: every target).  An unknown target is an error that
        lists the known ones."""
        from .schedule.hints import Hint, check_target
        try:
            check_target(target, user_location(), f"{self.__name__}.schedule:")
        except KdslUserError as e:
            raise for_user(e) from None

        def add(*fns):
            where = user_location()
            for f in fns:
                if not callable(f):
                    raise for_user(ScheduleError(
                        f"{self.__name__}.schedule({target!r}) decorates a function of the "
                        f"schedule, got {type(f).__name__}",
                        hint="def my_schedule(s): s['B'].split(s['B'].axes[0], 8)", loc=where))
                self._add_schedule(Hint(target=target, hints={}, fn=f, loc=where))
            return fns[0] if len(fns) == 1 else fns
        return add

    def _add_schedule(self, hint):
        """Add a Hint (declarative or explicit); compiled specialisations are dropped."""
        with self._lock:
            self._hints.append(hint)
        self._forget_compiled()

    def _forget_compiled(self):
        """Drop the compiled specialisations (kernel.tune persisted a winner: recompile)."""
        with self._lock:
            self._version += 1
            self._cache = {}
            self._slots = {}
            self._fast = self._fast_out = None

    # ------------------------------------------------------------- misc
    def __reduce__(self):
        if "<locals>" in self.__qualname__:
            from .dask.tokens import reduce_by_value   # made in a function: by value
            return reduce_by_value(self)
        return self.__qualname__  # pickle by reference: module + qualified name

    def __dask_tokenize__(self):
        """Dask's token of this kernel (kdsl.dask.tokens.kernel_token)."""
        from .dask.tokens import kernel_token
        return "kdsl.Kernel", kernel_token(self)

    def __repr__(self) -> str:
        """``<kdsl.kernel add(a, b) at file.py:12, 1 schedule, 2 compiled>``: what it wraps,
        where it was defined, how many schedules it carries and specialisations it compiled."""
        code = getattr(self.fn, "__code__", None) or getattr(
            getattr(type(self.fn), "__call__", None), "__code__", None)
        where = f" at {os.path.basename(code.co_filename)}:{code.co_firstlineno}" if code else ""
        extra = ""
        if self._hints:
            extra += f", {len(self._hints)} schedule{'s' if len(self._hints) > 1 else ''}"
        if self._cache:
            extra += f", {len(self._cache)} compiled"
        return (f"<kdsl.kernel {self.__module__}.{self.__qualname__}"
                f"({', '.join(self.arg_names)}){where}{extra}>")


def kernel(fn=None, *, specialize=False, constants=()):
    """Decorator making a kernel of ``fn``: ``@kd.kernel`` or ``@kd.kernel(specialize=True)``.

    Globals are frozen at trace time: ``fn`` runs once per compiled version, and the globals
    and closure variables it reads then are baked into the compiled code (as in Numba).
    Rebinding one later does not change the kernel; a ``StaleGlobalWarning`` naming it is
    issued when kdsl notices (on calls that compile or miss the native fast launcher).
    Pass values that change as arguments (or list them in ``constants``)."""
    if fn is None:
        return lambda f: Kernel(f, specialize=specialize, constants=constants)
    return Kernel(fn, specialize=specialize, constants=constants)


fori_program.make_kernel = kernel     # kd.fori_loop's copies (the runtime cannot import this module)
dispatch.tuned_hints = _tune_store.tuned_hints   # kernel.tune's persisted winners (kdsl/tune)
if "dask.tokenize" in __import__("sys").modules:   # Dask first: its tokenizer learns kernels now
    from .dask.tokens import register as _dask_register
    _dask_register(Kernel)
