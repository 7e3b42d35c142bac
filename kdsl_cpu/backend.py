"""The ``cpu`` Backend object (kdsl/backends/protocol.py): spec, schedule, compile, source.

``compile`` first computes the key of a request not yet scheduled (a
``dispatch.DeferredRequest``: no explicit schedule function; ``schedule_key``: the traced
graph, the declarative hints, the signature, everything the default schedules read -- thread
count, the host's Target inputs -- this backend's version and options, the compiler's own
source): on a disk hit it loads the object code without scheduling, lowering or code
generation.  Else the request's early key (kdsl.runtime.fingerprint: the same with the
finished schedule in place of the schedule's inputs): on a disk hit it loads the object code
and the launcher's interface (``LaunchInfo``) without lowering or code generation.
Otherwise it lowers the request, generates LLVM IR, and gets object code from the
disk cache keyed by the generated code (printed IR, bindings, target CPU and
toolchain versions) or compiles and stores it, records the early key's entry,
then loads the code and builds the launcher (both keys name that entry).  A corrupt or foreign cache entry is
dropped by the cache and rebuilt here.  ``stats`` counts what happened (tests use
it to see that a new process loads from the cache without compiling or lowering).
The passes and the code generator are imported only when something is lowered,
so a warm process never loads them.
"""
from __future__ import annotations

import marshal
import sys
import threading

import numpy as np

import functools
import os

from kdsl import dtypes as dt
from kdsl.backends.protocol import CompileRequest
from kdsl.backends.spec import BackendSpec, FastLaunch
from kdsl.errors import ScheduleError
from kdsl.runtime import cache as disk
from kdsl import compile_log, config
from kdsl.runtime import fingerprint
from kdsl.runtime.slots import LaunchInfo

from . import __version__, jit, parallel
from .launcher import build_launcher

_HERE = os.path.dirname(os.path.abspath(__file__))


@functools.lru_cache(maxsize=None)
def pipeline():
    """The core sequential table (BOUND loops run as loops) with the cpu backend's IR passes
    after it (built on first use: a process that only loads cached kernels never imports the
    passes)."""
    from kdsl.passes.pipeline import SEQUENTIAL as CORE_PIPELINE
    from kdsl.passes.pipeline import Pass

    from .passes.full_tiles import full_tiles
    from .passes.fuse_loops import fuse_loops
    from .passes.hoist_allocations import hoist_allocations
    from .passes.tighten_loops import tighten_loops
    from .passes.unclamp import unclamp
    return CORE_PIPELINE.insert_after(
        "blocked_sums", Pass("fuse_loops", fuse_loops), Pass("full_tiles", full_tiles),
        Pass("tighten_loops", tighten_loops), Pass("unclamp", unclamp),
        Pass("hoist_allocations", hoist_allocations))


def __getattr__(name: str):
    """``PIPELINE``: the table ``pipeline()`` builds (kept as a module attribute)."""
    if name == "PIPELINE":
        return pipeline()
    raise AttributeError(name)

#: bump when the generated code changes for the same loop IR (invalidates cache entries)
CODEGEN_VERSION = "3"


class CPUCompiled:
    """A loaded kernel: ``(inputs, outputs, scalars)`` runs it (the protocol's ``Compiled``)."""

    def __init__(self, func, code, entry: str, ir_text: str | None, runtime, from_cache: bool):
        #: the launcher's view of the lowered function (kdsl.runtime.slots.LaunchInfo)
        self.func = func
        self.entry = entry
        self.source = ir_text       # the LLVM IR, or None when loaded by the early key
        self.from_cache = from_cache
        self._code = code
        self._runtime = runtime
        self._run = build_launcher(func, code.address, runtime, keepalive=(code,))
        #: native fast launchers of its plans (kdsl.backends.spec.FastLaunch)
        self.fast = FastLaunch(self.fast_launcher, func=self.func)

    def __call__(self, inputs, outputs, scalars, stream=None) -> None:
        self._run(inputs, outputs, scalars)

    def fast_launcher(self, plan):
        """A native launcher for ``plan`` (a kdsl.runtime.callplan.CallPlan; a FastLauncher),
        or None where this interpreter's layouts do not allow one (kdsl_cpu.fastcall)."""
        from . import fastcall
        return fastcall.build(self, plan)


class CPUBackend:
    """Compiles kernels to host machine code with LLVM (llvmlite) and runs them on numpy arrays.

    ``threading``: "auto" (kdsl's own worker threads where the platform has them, else
    OpenMP's libgomp where it loads, else a Python thread pool), "workers", "omp" or "pool"; ``num_threads``: a fixed count of workers per parallel loop for this
    backend's kernels (default None: the process-wide count, read at every call --
    ``kd.set_num_threads`` > ``KDSL_NUM_THREADS`` > ``OMP_NUM_THREADS`` > the CPUs this
    process may run on, kdsl.threads; loops with little work use fewer, kdsl_cpu.parallel).
    """

    #: compile takes a kdsl.runtime.dispatch.DeferredRequest: looked up before it is scheduled
    defers_schedule = True

    def __init__(self, threading: str = "auto", num_threads: int | None = None):
        if threading not in ("auto", "workers", "omp", "pool"):
            raise ValueError(f"threading must be 'auto', 'workers', 'omp' or 'pool', got "
                             f"{threading!r}")
        self.threading = threading
        self.num_threads = num_threads
        #: host arrays; lowered through ``pipeline()`` (the core table and the cpu passes);
        #: kd.fori_loop runs inside one kernel (kdsl.runtime.fori_program, kdsl.passes.fori_loop)
        self.spec = BackendSpec(name="cpu", device="host", pipeline=pipeline, fori_loops=True,
                                version=_version())
        #: compiled: object code built by LLVM; cache_hits: loaded from the disk cache;
        #: lowered: requests lowered (an early-key hit lowers nothing)
        #: unscheduled: hits of the key before scheduling (nothing scheduled either)
        self.stats = {"compiled": 0, "cache_hits": 0, "lowered": 0, "unscheduled": 0}
        self._lock = threading_mod.Lock()

    # ------------------------------------------------------------- protocol
    def schedule(self, sched, hints) -> None:
        """The default plan of every stage, adjusted by the user's hints (kdsl_cpu.schedules)."""
        from kdsl.schedule.hints import record_backend_hints

        from .schedules import schedule
        record_backend_hints(sched, hints)     # a threads= hint sets the thread count
        schedule(sched, hints, self._thread_count(sched))

    def lower(self, request: CompileRequest):
        """The loop IR this backend compiles for ``request`` (through ``spec.pipeline()``)."""
        func = request.lower(pipeline=self.spec.pipeline())
        # a kd.fori_loop's body compiled as the whole loop (kdsl.passes.fori_loop)
        from kdsl.passes.fori_loop import wrap_loop
        func = wrap_loop(request, func)
        if func.tensorize:
            t = func.tensorize[0]
            raise ScheduleError(
                f"stage {t.stage.name}: tensorize(..., {type(t.intrin).__name__.lower()}) maps the nest "
                f"onto GPU tensor cores, which the cpu backend does not have",
                loc=t.loc, hint="give the tensorize schedule to the GPU target only "
                "(@kernel.schedule(\"cuda\")), or run it on backend=\"interp\" / \"interp-cuda\"")
        return func

    def source(self, request: CompileRequest) -> str:
        """The LLVM IR of the request (before LLVM's optimisation)."""
        return self._generate(self.lower(request)).ir

    def compile(self, request: CompileRequest) -> CPUCompiled:
        store = disk.DiskCache()
        pre = self.schedule_key(request) if store.enabled else None
        if pre is not None:     # before scheduling: a warm process neither schedules nor lowers
            hit = self._load_early(store, pre, scheduled=False)
            if hit is not None:
                info, code, entry, obj_key, threads = hit
                if config.verify_explicit():
                    self._check_schedule_key(request, obj_key)
                with self._lock:
                    self.stats["cache_hits"] += 1
                    self.stats["unscheduled"] += 1
                compile_log.note("object code from the disk cache (key before scheduling: "
                                 "nothing scheduled or lowered)")
                rt = parallel.runtime_table(self.threading, threads)
                return CPUCompiled(info, code, entry, None, rt, True)
        early = self.early_key(request) if store.enabled else None    # (schedules the request)
        threads = self._threads(request.schedule)
        rt = parallel.runtime_table(self.threading, threads)
        if early is not None:
            hit = self._load_early(store, early)
            if hit is not None:
                info, code, entry, key, _ = hit
                if pre is not None:    # the next process finds it before scheduling
                    store.put(pre, _pack_early(entry, key, info, threads))
                with self._lock:
                    self.stats["cache_hits"] += 1
                compile_log.note("object code from the disk cache (early key: nothing lowered)")
                return CPUCompiled(info, code, entry, None, rt, True)
        func = self.lower(request)
        with self._lock:
            self.stats["lowered"] += 1
        with compile_log.stage("codegen"):
            gen = self._generate(func)
        # keyed on the generated LLVM IR itself: any codegen change is a new entry
        key = disk.cache_key(gen.ir, self.spec.name, self.cache_options(func), self.spec.version)
        # an entry that fails to load is discarded and rebuilt (DiskCache.fetch)
        code, from_cache = store.fetch(
            key, lambda: self._build_object(gen),
            lambda blob: jit.load_cached(blob, gen.entry, _unpack),
            lambda blob: _loadable(blob, gen.entry), what=f"kernel {gen.entry}")
        info = LaunchInfo.of(func)
        if early is not None:   # the next process finds it before lowering
            store.put(early, _pack_early(gen.entry, key, info))
        if pre is not None:     # ... or before scheduling
            store.put(pre, _pack_early(gen.entry, key, info, threads))
        with self._lock:
            self.stats["cache_hits" if from_cache else "compiled"] += 1
        compile_log.note("object code from the disk cache" if from_cache else
                         "object code compiled by LLVM")
        return CPUCompiled(info, code, gen.entry, gen.ir, rt, from_cache)

    def early_key(self, request: CompileRequest) -> str | None:
        """The request's disk-cache key before lowering (kdsl.runtime.fingerprint), or None
        when the request cannot be keyed canonically (it is then lowered every time)."""
        return fingerprint.request_key(
            request, self.spec.name, self.spec.version, {"host": jit.host_id()},
            source_dirs=(_HERE,))

    def schedule_key(self, request: CompileRequest) -> str | None:
        """The key of a request not scheduled yet (``dispatch.DeferredRequest``: no explicit
        schedule function), or None.  Besides the request's ``schedule_roots`` it holds
        everything the default schedules (kdsl_cpu.schedules) read: the thread count's inputs
        (this backend's ``num_threads``, the usable cores; a ``threads=`` hint is in the
        roots), the host's Target inputs (CPU identity and flags, sysfs cache sizes) and the
        schedules' module switch ``GENERATOR``; the compiler's source is in every key."""
        from kdsl.runtime.dispatch import DeferredRequest
        if not isinstance(request, DeferredRequest) or request.scheduled:
            return None
        mod = sys.modules.get("kdsl_cpu.schedules")
        inputs = {"num_threads": self.num_threads, "cores": config.usable_cores(),
                  "caches": _host_caches(), "generator": getattr(mod, "GENERATOR", True)}
        return fingerprint.schedule_key(
            request, self.spec.name, self.spec.version, {"host": jit.host_id()}, inputs,
            source_dirs=(_HERE,))

    def _check_schedule_key(self, request, obj_key: str) -> None:
        """``KDSL_VERIFY=1`` (set explicitly): a hit before scheduling must name the object code
        that scheduling, lowering and code generation give now; else the key misses an input
        of the default schedule (a kdsl bug: an InternalCompilerError, never a wrong kernel)."""
        from kdsl.errors import InternalCompilerError
        func = self.lower(request)          # (schedules the request)
        gen = self._generate(func)
        key = disk.cache_key(gen.ir, self.spec.name, self.cache_options(func), self.spec.version)
        if key != obj_key:
            raise InternalCompilerError(
                f"kernel {gen.entry}: the disk-cache key computed before scheduling names other "
                "object code than this request compiles to now (an input of the default "
                "schedule is missing from kdsl_cpu.backend.schedule_key)")

    def _load_early(self, store, early: str, scheduled: bool = True):
        """``(LaunchInfo, LoadedCode, entry symbol, object key, threads)`` from the entries of
        an early key (``scheduled`` False: a key before scheduling, whose entry also says the
        thread count of the runtime table), or None (a miss, or an entry that does not load:
        then it is rebuilt by the normal path)."""
        head = store.get(early, lambda blob: _unpack_early(blob, scheduled) is not None)
        if head is None:
            return None
        entry, key, info, threads = _unpack_early(head, scheduled)
        blob = store.get(key, lambda b: _loadable(b, entry))
        if blob is None:
            return None
        try:
            return info, jit.load_cached(blob, entry, _unpack), entry, key, threads
        except Exception as e:   # a bad entry must never stick: dropped, then rebuilt
            store.discard(key, f"kernel {entry}", e)
            return None

    def accepts(self, array) -> bool:
        return isinstance(array, np.ndarray)

    def empty(self, shape: tuple, dtype, like=None):
        return np.empty(tuple(shape), dtype=dt.as_dtype(dtype).np)

    # ------------------------------------------------------------- helpers
    def _build_object(self, gen) -> bytes:
        """A fresh cache payload: the object code of ``gen`` compiled by LLVM."""
        return _pack(jit.compile_object(gen.ir), gen.entry)

    def cache_options(self, func) -> dict:
        """What besides the printed IR decides the object code (part of the cache key)."""
        return {"target": jit.options(), "codegen": CODEGEN_VERSION,
                "bindings": repr(func.bindings),
                "scalars": [v.dtype.name for v in func.scalars]}

    def _generate(self, func):
        from .codegen import generate
        return generate(func, jit.host()[0], jit.data_layout())

    def _thread_count(self, sched) -> int:
        """How many threads the default schedules plan for: the explicit count, else the usable
        cores -- never the runtime setting (kd.set_num_threads, the environment), so that the
        generated code and its cache key do not depend on it and one compile serves any count
        (a reduction split for more threads than run is still exact)."""
        t = self._threads(sched)
        return max(1, t if t is not None else config.usable_cores())

    def _threads(self, sched) -> int | None:
        """Thread count: the backend's, else a ``threads=`` hint given as an int, else the env."""
        if self.num_threads is not None:
            return self.num_threads
        for hv in getattr(sched, "backend_hints", {}).values():
            t = hv.get("threads")
            if isinstance(t, int) and not isinstance(t, bool) and t >= 1:
                return t
        return None

    def __repr__(self) -> str:
        return f"CPUBackend(threading={self.threading!r})"


import threading as threading_mod  # noqa: E402  (the constructor argument shadows the name)

# entries are marshal'd plain data (dicts of str/int/list; marshal is built in, json costs
# ~3 ms to import on a warm first call); the key holds the Python version, so its format
_MAGIC = b"KDSLCPU2"


def _version() -> str:
    return f"{__version__}+cg{CODEGEN_VERSION}"


def _pack(obj: bytes, entry: str) -> bytes:
    head = marshal.dumps({"entry": entry})
    return _MAGIC + len(head).to_bytes(4, "little") + head + obj


_EARLY_MAGIC = b"KDSLCPE2"


_UNSET = object()


def _pack_early(entry: str, key: str, info: LaunchInfo, threads=_UNSET) -> bytes:
    """An early-key entry: the entry symbol, the key of the object code's entry and the
    launcher's interface (the object code itself is stored once, under its IR key); an entry
    of a key before scheduling also says the thread count (``threads``, None: the runtime's)."""
    d = {"entry": entry, "key": key, "launch": info.to_json()}
    if threads is not _UNSET:
        d["threads"] = threads
    return _EARLY_MAGIC + marshal.dumps(d)


def _unpack_early(blob: bytes, scheduled: bool = True):
    """``(entry, object key, LaunchInfo, threads)`` of an early-key entry, or None when
    malformed (``scheduled`` False: the entry must say its thread count)."""
    if not blob.startswith(_EARLY_MAGIC):
        return None
    try:
        d = marshal.loads(blob[len(_EARLY_MAGIC):])
        entry, key = d["entry"], d["key"]
        if not (isinstance(entry, str) and isinstance(key, str) and len(key) == 64):
            return None
        threads = None if scheduled else d["threads"]
        if threads is not None and not (type(threads) is int and threads >= 1):
            return None
        return entry, key, LaunchInfo.from_json(d["launch"]), threads
    except (ValueError, KeyError, TypeError, IndexError):
        return None


@functools.lru_cache(maxsize=None)
def _host_caches() -> tuple:
    """The host's cache descriptions as sysfs lists them ((index, level, type, size) texts):
    what kdsl_cpu.schedules.target reads for the Target's cache sizes, read here without
    importing the schedules (a key before scheduling must not load them)."""
    root = "/sys/devices/system/cpu/cpu0/cache"
    out = []
    try:
        entries = sorted(os.listdir(root))
    except OSError:
        return ()
    for e in entries:
        vals = [e]
        for f in ("level", "type", "size"):
            try:
                with open(os.path.join(root, e, f)) as fh:
                    vals.append(fh.read().strip())
            except OSError:
                vals.append(None)
        out.append(tuple(vals))
    return tuple(out)


def _loadable(blob: bytes, entry: str) -> bool:
    """A cache payload holds object code that this process can load and run (else it is dropped)."""
    obj = _unpack(blob, entry)
    return obj is not None and jit.object_problem(obj, entry) is None


def _unpack(blob: bytes | None, entry: str) -> bytes | None:
    """The object code of a cache payload, or None when it is not ours or names another entry."""
    if blob is None or not blob.startswith(_MAGIC) or len(blob) < len(_MAGIC) + 4:
        return None
    n = int.from_bytes(blob[len(_MAGIC):len(_MAGIC) + 4], "little")
    start = len(_MAGIC) + 4
    try:
        head = marshal.loads(blob[start:start + n])
    except (ValueError, EOFError, TypeError):
        return None
    if not isinstance(head, dict) or head.get("entry") != entry:
        return None
    return blob[start + n:] or None
