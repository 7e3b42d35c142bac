"""The backend registry: lazy entry-point discovery and the default-backend rule.

Backends come from three places, later ones shadowing earlier ones by name:

1. built-ins of the core (``numpy``, and ``interp``, the loop-IR interpreter, with
   ``interp-cuda``, the interpreter running cuda schedules on the SIMT executor), known even
   when kdsl runs from a checkout that was never pip-installed;
2. the entry-point group ``kdsl.backends`` of installed distributions
   (``kdsl-cpu`` registers ``cpu = "kdsl_cpu:backend"``, ``kdsl-cuda`` ``cuda``);
3. ``register_backend(name, obj)`` at run time.

Only metadata is read until a backend is asked for: ``backends()`` never
imports a backend module.  An entry point may name a Backend object, a class
or a zero-argument factory.  A backend whose import fails, or that does not keep the
backend contract (kdsl/backends/spec.py: a ``BackendSpec`` and the protocol's methods),
raises ``BackendUnavailable`` (cause chained) for that name only.

What kernels read on every call is public: the module globals ``generation``,
``auto_default`` and ``size_classed``, and ``backend_spec(name)``, ``runs_on_host(name)``.
"""
from __future__ import annotations

import contextlib
import contextvars
import importlib
import os
import threading
import warnings

import numpy as np

from .. import config
from ..schedule import hints as _hints
from ..errors import BackendNotInstalled, BackendUnavailable, user_location

GROUP = "kdsl.backends"

#: backends shipped inside the core distribution (module:attr, like an entry point value)
_BUILTIN = {"numpy": "kdsl.backends.numpy_backend:NumpyBackend",
            "interp": "kdsl.backends.interpreter:InterpreterBackend",
            "interp-cuda": "kdsl.backends.interpreter:cuda_interpreter"}
#: built-in backends that run another target's schedules (they are not schedule targets)
_SIMULATORS = frozenset({"interp-cuda"})
#: backends the kdsl project ships as separate distributions: name -> (directory, distribution)
_KNOWN_PACKAGES = {"cpu": ("kdsl_cpu", "kdsl-cpu"), "cuda": ("kdsl_cuda", "kdsl-cuda")}
#: DLPack device types that mean "a CUDA device" (kDLCUDA, kDLCUDAManaged)
_DLPACK_CUDA = (2, 13)

_lock = threading.RLock()
_registered: dict = {}     # name -> object given to register_backend (not yet instantiated)
_loaded: dict = {}         # name -> Backend instance (the fast path of get_backend)
_failed: dict = {}         # name -> BackendUnavailable (so a broken backend is imported once)
_entry_points = None       # name -> EntryPoint (read lazily from metadata)
_eps_from_disk = False     # _entry_points came from the scan kept on disk (_disk_scan)
_want_fresh = False        # refresh() was called: the next discovery scans directories
_warned_numpy = False


# What a kernel call reads from the registry, as public module globals (one attribute load
# each on the call path; the cuda backend's C call entry reads them from this module's dict).
# Written only here.
#: bumped whenever a name may start meaning another backend (kernels key their caches and
#: fast launchers on it)
generation = 0
#: "cpu" or "numpy" once the last step of the default rule was decided, else None
auto_default = None
#: names (and backend objects) of loaded backends whose ``spec.size_classes`` is set: their
#: specialisation keys include the call's size classes
size_classed: set = set()

_current = contextvars.ContextVar("kdsl_backend", default=None)


# ----------------------------------------------------------------- discovery
def _discover(fresh: bool = False) -> dict:
    """Read the ``kdsl.backends`` entry points (metadata only; first one of a name wins).
    The answer of the directory scan is kept on disk (``_disk_scan``); ``fresh``: scan again
    whatever the disk says (a name the kept answer lacks or fails to load)."""
    global _entry_points, _eps_from_disk, _want_fresh
    eps = _entry_points
    if eps is None or fresh:
        fresh, _want_fresh = fresh or _want_fresh, False
        state = _path_state()
        found, from_disk = None, False
        if state is not None:
            kept = {} if fresh else _disk_scan(state)
            per_dir = []
            for d, m in state:
                dists = kept.get((d, m))
                if dists is None:
                    dists = _dir_dists(d) if m != -1 else []
                else:
                    from_disk = True
                per_dir.append(dists)
            found = _merge(per_dir)
            _save_scan(state, per_dir, kept)
        if found is None:
            from importlib.metadata import entry_points
            try:
                found = entry_points(group=GROUP)
            except Exception:  # broken metadata of some unrelated distribution
                found = ()
        eps = {}
        for ep in found:
            eps.setdefault(ep.name, ep)
        _entry_points, _eps_from_disk = eps, from_disk
    return eps


def _rescan() -> bool:
    """Scan the entry points again when the kept answer came from disk (it may be stale: an
    entry_points.txt edited in place leaves its directory's time alone); True if it did."""
    if not _eps_from_disk:
        return False
    _discover(fresh=True)
    return True


# ----------------------------------------------------------------- the scan kept on disk
# Listing sys.path and reading every distribution's entry_points.txt costs milliseconds on
# each process start (~2 ms here, more with many distributions); the answer is kept in the
# kdsl cache directory, valid while every sys.path directory keeps its modification time
# (installing or removing a distribution adds or removes a directory there).  A directory
# changed in the last seconds is not trusted (its next change could share the time stamp),
# a name the kept answer lacks or fails to load is looked up by a fresh scan, and
# ``refresh()`` always scans.
_SCAN_MAGIC = "kdsl-entry-points 2"
_RACY_NS = 2_000_000_000


def _path_state():
    """``[(directory, mtime_ns or -1 when absent)]`` of sys.path, or None where the plain
    directory scan does not apply (then nothing is kept)."""
    import importlib.machinery
    import stat
    import sys
    # importlib_metadata (the backport dask imports) replaces the standard finder with its own,
    # which lists the same sys.path directories: the scan applies with either
    backport = getattr(sys.modules.get("importlib_metadata"), "MetadataPathFinder", None)
    if any(getattr(f, "find_distributions", None) is not None
           and f is not importlib.machinery.PathFinder
           and not (backport is not None and isinstance(f, backport)) for f in sys.meta_path):
        return None
    out = []
    for entry in sys.path:
        if not isinstance(entry, str):
            return None
        root = entry or "."
        if root.lower().endswith(".egg"):
            return None
        try:
            st = os.stat(root)
        except OSError:
            out.append((os.path.abspath(root), -1))
            continue
        if not stat.S_ISDIR(st.st_mode):
            return None
        out.append((os.path.abspath(root), st.st_mtime_ns))
    return out


def _scan_file(state) -> str | None:
    """Where the scan of these sys.path directories is kept (None: the disk cache is off)."""
    if not config.cache_enabled():
        return None
    import zlib
    tag = zlib.crc32("\0".join(d for d, _ in state).encode()) & 0xFFFFFFFF
    return os.path.join(config.cache_dir(), f"entry-points-{tag:08x}.txt")


def _disk_scan(state) -> dict:
    """``{(directory, mtime_ns): its _dir_dists}`` kept on disk for the directories of
    ``state`` (empty when nothing usable is kept)."""
    path = _scan_file(state)
    text = _read(path) if path is not None else None
    if not text or not text.startswith(_SCAN_MAGIC + "\n"):
        return {}
    wanted, out, cur, dist = set(state), {}, None, None
    for line in text.split("\n")[1:]:
        parts = line.split("\t")
        tag = parts[0]
        if tag == "D" and len(parts) == 3:
            try:
                k = (parts[2], int(parts[1]))
            except ValueError:
                return {}
            cur = out[k] = [] if k in wanted else None
        elif tag == "R" and len(parts) == 3:
            dist = (parts[1], parts[2], [])
            if cur is not None:
                cur.append(dist)
        elif tag == "E" and len(parts) == 3 and dist is not None:
            dist[2].append((parts[1], parts[2]))
        elif line:
            return {}       # not ours: scan
    return {k: v for k, v in out.items() if v is not None}


def _save_scan(state, per_dir, kept) -> None:
    """Keep each directory's scan on disk, except those changed in the last seconds.  Written
    only when a directory holding distributions was listed (a changing directory without any,
    such as a script's, costs one listing per process: less than writing the file each time)."""
    import time
    racy = time.time_ns() - _RACY_NS
    if all(k in kept or k[1] > racy or not dists for k, dists in zip(state, per_dir)):
        return
    path = _scan_file(state)
    if path is None:
        return
    lines = [_SCAN_MAGIC]
    for (d, m), dists in zip(state, per_dir):
        if m > racy:
            continue
        lines.append(f"D\t{m}\t{d}")
        for norm, p, entries in dists:
            lines.append(f"R\t{norm}\t{p}")
            lines.extend(f"E\t{name}\t{value}" for name, value in entries)
    if any(len(ln.split("\t")) != 3 or "\n" in ln for ln in lines[1:]):
        return      # a tab in a name or path: not kept
    tmp = f"{path}.{os.getpid()}.part"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(tmp, path)
    except OSError:     # a read-only cache: scan every time
        try:
            os.unlink(tmp)
        except OSError:
            pass


# ----------------------------------------------------------------- fast entry-point scan
# importlib.metadata costs ~25 ms on a cold start (its import pulls in email, zipfile, csv;
# then every distribution is parsed), a quarter of a first kernel call.  Where sys.path
# holds plain directories only, the same answer comes from listing them: the *.dist-info
# and *.egg-info directories, in sys.path order, the first of each normalised name winning
# (importlib.metadata's rules), and their entry_points.txt.  Anything else (zip or egg
# entries, finders of other distributions) takes importlib.metadata itself.
class _Dist:
    """The ``name``/``version`` of a distribution directory, read from its metadata on use."""

    def __init__(self, path: str):
        self._path, self._meta = path, None

    def _field(self, key: str):
        if self._meta is None:
            self._meta = {}
            for fname in ("METADATA", "PKG-INFO"):
                text = _read(os.path.join(self._path, fname))
                if text:
                    for line in text.splitlines():
                        if not line.strip():
                            break          # the headers end at the first blank line
                        if line[0] in " \t":
                            continue       # a folded continuation of the previous header
                        k, sep, v = line.partition(":")
                        if sep:
                            self._meta.setdefault(k.strip(), v.strip())
                    break
        return self._meta.get(key)

    @property
    def name(self):
        return self._field("Name")

    @property
    def version(self):
        return self._field("Version")


class _EntryPoint:
    """Stands for importlib.metadata.EntryPoint: ``name``, ``value``, ``dist``, ``load()``."""

    def __init__(self, name: str, value: str, dist: _Dist):
        self.name, self.value, self.dist = name, value, dist

    def load(self):
        mod, _, attr = self.value.partition("[")[0].partition(":")   # "mod : attr [extras]"
        return _load_ref(f"{mod.strip()}:{attr.strip()}")


def _read(path: str):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, ValueError):
        return None


def _normalize(name: str) -> str:
    import re
    return re.sub(r"[-_.]+", "-", name).lower().replace("-", "_")


def _scan_entry_points():
    """The ``kdsl.backends`` entry points as importlib.metadata would list them, or None where
    a plain directory scan could differ from it."""
    state = _path_state()
    if state is None:
        return None
    return _merge([_dir_dists(d) if m != -1 else [] for d, m in state])


def _dir_dists(root: str) -> list:
    """``[(normalised name, path, [(entry name, value)])]``: the distributions of one
    directory in listing order, each with its ``kdsl.backends`` entries (often none: it still
    shadows a distribution of that name in a later directory)."""
    try:
        children = os.listdir(root)
    except OSError:
        return []
    out = []
    for child in children:
        low = child.lower()
        if not low.endswith((".dist-info", ".egg-info")):
            continue
        path = os.path.join(root, child)
        text = _read(os.path.join(path, "entry_points.txt")) if os.path.isdir(path) else None
        out.append((_normalize(low.rpartition(".")[0].partition("-")[0]), path,
                    _parse_group(text) if text else []))
    return out


def _merge(per_dir) -> list:
    """The entry points of the directories' distributions, the first of each name winning."""
    found, seen = [], set()
    for dists in per_dir:
        for norm, path, entries in dists:
            if norm in seen:
                continue
            seen.add(norm)
            if entries:
                dist = _Dist(path)
                found.extend(_EntryPoint(name, value, dist) for name, value in entries)
    return found


def _parse_group(text: str) -> list:
    """``[(name, value)]``: the ``GROUP`` section of an entry_points.txt (INI: ``[group]`` then
    ``name = value``)."""
    out, section = [], None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
        elif section == GROUP:
            name, sep, value = line.partition("=")
            if sep:
                out.append((name.strip(), value.strip()))
    return out


def _forget(name=None) -> None:
    """Bump the generation and forget the cached default (and ``name``'s loaded backend)."""
    global generation, auto_default
    generation += 1
    auto_default = None
    if name is not None:
        _loaded.pop(name, None)
        _failed.pop(name, None)
        size_classed.discard(name)


def refresh() -> None:
    """Forget discovered entry points, loaded backends and failures (after installing one)."""
    global _entry_points, _want_fresh
    with _lock:
        _forget()
        _entry_points = None
        _want_fresh = True         # the next discovery scans (and rewrites the one kept)
        _loaded.clear()
        _failed.clear()
        size_classed.clear()


def backends() -> list:
    """Sorted names of installed and registered backends (nothing is imported)."""
    return sorted(set(_BUILTIN) | set(_discover()) | set(_registered))


def known_targets() -> list:
    """Sorted names a schedule may target: installed and registered backends, the backends the
    kdsl project ships (installed or not: a kernel may carry schedules for a GPU it lacks here)
    and the loop-IR interpreter."""
    return sorted((set(backends()) - _SIMULATORS) | set(_KNOWN_PACKAGES) | {"interp"})


def is_installed(name: str) -> bool:
    """Whether ``name`` is known (built in, installed or registered), without importing it."""
    if name in _registered or name in _discover() or name in _BUILTIN:
        return True
    return _rescan() and name in _discover()     # installed since the scan kept on disk?


def register_backend(name: str, obj) -> None:
    """Register a backend at run time (a Backend object, class or factory); shadows ``name``.
    It is checked against the contract when first used (``get_backend``)."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"backend name must be a non-empty string, got {name!r}")
    with _lock:
        _registered[name] = obj
        _forget(name)


def unregister_backend(name: str) -> None:
    """Undo ``register_backend`` (installed backends of that name become visible again)."""
    with _lock:
        _registered.pop(name, None)
        _forget(name)


# ----------------------------------------------------------------- loading
def _instantiate(name: str, obj, origin: str):
    """A Backend from an object, class or factory, checked against the contract."""
    from .spec import BackendSpec, check_backend
    if isinstance(obj, type) or (not isinstance(getattr(obj, "spec", None), BackendSpec)
                                 and callable(obj)):
        obj = obj()     # a class or a factory (a backend object has its spec)
    return check_backend(name, obj, origin)


def _load_ref(ref: str):
    mod, _, attr = ref.partition(":")
    obj = importlib.import_module(mod)
    for part in attr.split(".") if attr else ():
        obj = getattr(obj, part)
    return obj


def _dist_path(ep):
    dist = getattr(ep, "dist", None)
    return getattr(dist, "_path", None) or getattr(ep, "value", None)


def _origin(name: str) -> str:
    ep = _discover().get(name)
    if ep is None:
        return f"built in: {_BUILTIN.get(name)}"
    dist = getattr(ep, "dist", None)
    where = f" from distribution {dist.name} {dist.version}" if dist is not None else ""
    return f"entry point {ep.value}{where}"


def _load(name: str):
    registered = name in _registered
    ep = None if registered else _discover().get(name)
    if not registered and ep is None and name not in _BUILTIN:
        if not _rescan():
            raise _not_installed(name)
        ep = _discover().get(name)      # a fresh scan: maybe installed since it was kept
        if ep is None:
            raise _not_installed(name)
    origin = "registered at run time" if registered else _origin(name)
    try:
        if registered:
            obj = _registered[name]
        elif ep is not None:
            try:
                obj = ep.load()
            except Exception:
                # the scan kept on disk may name what is no longer there: scan, and retry
                # when the fresh scan names something else
                if not _rescan():
                    raise
                again = _discover().get(name)
                if again is None or (again.value, _dist_path(again)) == (ep.value,
                                                                         _dist_path(ep)):
                    raise
                ep, origin = again, _origin(name)
                obj = ep.load()
        else:
            obj = _load_ref(_BUILTIN[name])
        return _instantiate(name, obj, origin)
    except BackendUnavailable:
        raise
    except Exception as e:  # ImportError, missing driver, a bug in the backend's __init__ ...
        hint = ""
        if isinstance(e, ImportError) and getattr(e, "name", None):
            hint = f"; the module {e.name!r} is missing (is its package installed?)"
        raise BackendUnavailable(
            f"backend {name!r} is installed ({origin}) but could not be loaded: "
            f"{type(e).__name__}: {e}{hint}") from e


def _not_installed(name: str) -> BackendNotInstalled:
    avail = ", ".join(backends()) or "none"
    if name in _KNOWN_PACKAGES:
        directory, dist = _KNOWN_PACKAGES[name]
        return BackendNotInstalled(
            f"backend {name!r} is not installed; install it with: pip install ./{directory} "
            f"(distribution {dist}).  Available backends: {avail}")
    import difflib
    from ..errors import UnknownBackendError
    names = sorted(set(backends()) | set(_KNOWN_PACKAGES))
    close = difflib.get_close_matches(str(name), names, n=2)
    hint = (f"did you mean {' or '.join(repr(c) for c in close)}?" if close else
            f"pass one of: {avail}")
    return UnknownBackendError(f"unknown backend {name!r}; available backends: {avail}", hint=hint)


def get_backend(name):
    """The Backend called ``name`` (imported on first use).  A Backend object passes through.

    Raises ``BackendNotInstalled`` for unknown names and ``BackendUnavailable`` when
    the backend is installed but cannot be loaded.
    """
    b = _loaded.get(name) if isinstance(name, str) else None
    if b is not None:
        return b
    if not isinstance(name, str):
        from .spec import BackendSpec, check_backend
        if isinstance(getattr(name, "spec", None), BackendSpec):   # a backend object: checked
            check_backend(name.spec.name, name, "passed as an object")
            if name.spec.size_classes:
                size_classed.add(name)    # kernels key it by object
            return name
        raise TypeError(f"backend must be a name (one of {backends()}) or a Backend object "
                        f"(with a kdsl.backends.spec.BackendSpec as its spec), "
                        f"got {type(name).__name__}")
    with _lock:
        b = _loaded.get(name)
        if b is not None:
            return b
        if name in _failed:
            raise _failed[name]
        try:
            b = _load(name)
        except BackendUnavailable as e:
            _failed[name] = e
            raise
        if b.spec.size_classes:
            size_classed.add(name)    # later keys are built with sizes (Kernel)
        _loaded[name] = b
        return b


def backend_spec(name):
    """The ``BackendSpec`` of the backend ``name`` (or of a backend object); loads it."""
    return get_backend(name).spec


def runs_on_host(name) -> bool:
    """Whether backend ``name`` takes host (numpy) arrays (``spec.device == "host"``); a name
    that is not installed or cannot load counts as host (its call reports the problem)."""
    from ..errors import KdslError
    try:
        return get_backend(name).spec.device == "host"
    except KdslError:
        return True


# ----------------------------------------------------------------- default rule
@contextlib.contextmanager
def use_backend(backend):
    """Make ``backend`` (a name or Backend object) the default inside a ``with`` block."""
    if isinstance(backend, str) and not is_installed(backend):
        raise _not_installed(backend)
    token = _current.set(backend)
    try:
        yield backend
    finally:
        _current.reset(token)


def current_backend():
    """The backend set by the innermost ``use_backend`` block (or None)."""
    return _current.get()


def current_backend_var() -> contextvars.ContextVar:
    """The context variable behind ``use_backend`` (the kernel call's fast path reads it)."""
    return _current


def _env_reader():
    # os.environ.get costs ~0.6 us when the variable is unset (a KeyError inside); the
    # mapping's own dict answers in ~25 ns.  It is CPython's os._Environ storage, updated by
    # every write through os.environ (monkeypatch.setenv included); elsewhere use the API.
    data, encode = getattr(os.environ, "_data", None), getattr(os.environ, "encodekey", None)
    if type(data) is dict and encode is not None:
        try:
            return data.get, encode("KDSL_BACKEND")
        except Exception:
            pass
    return os.environ.get, "KDSL_BACKEND"


_env_get, _ENV_KEY = _env_reader()


def env_backend_reader():
    """``(get, key)``: ``get(key)`` is the raw value of ``KDSL_BACKEND`` or None when unset,
    read cheaply (``config.backend()`` still decides what a set value means)."""
    return _env_get, _ENV_KEY


def _is_cuda_array(a) -> bool:
    flag = getattr(a, "is_cuda", None)     # torch answers cheaply; the protocols cost microseconds
    if type(flag) is bool:
        return flag
    try:
        if hasattr(a, "__cuda_array_interface__"):
            return True
    except Exception:   # a property that raises for this array (JAX bfloat16): ask DLPack
        pass
    dev = getattr(a, "__dlpack_device__", None)
    if dev is None:
        return False
    try:
        return int(dev()[0]) in _DLPACK_CUDA
    except Exception:
        return False


def _automatic() -> str:
    """'cpu' if installed and loadable, else 'numpy' (with a one-time warning saying why)."""
    global _warned_numpy, auto_default
    name = auto_default
    if name is None:
        reason = "the 'cpu' backend is not installed"
        name = "numpy"
        if is_installed("cpu"):
            try:
                get_backend("cpu")
                name = "cpu"
            except BackendUnavailable as e:  # broken cpu backend: say why, keep working
                reason = f"the 'cpu' backend is installed but unusable ({e})"
        auto_default = name
        if name == "numpy" and not _warned_numpy:
            _warned_numpy = True
            loc = user_location()  # point the warning at the user's call, not at kdsl
            warnings.warn_explicit(
                f"kdsl: {reason}, so kernels run on the slow 'numpy' reference backend; install "
                "it with: pip install ./kdsl_cpu (or choose a backend with backend=, "
                "kd.use_backend or KDSL_BACKEND)", RuntimeWarning,
                loc.file if loc else "kdsl", loc.line if loc else 0)
    return name


def default_backend_name(arrays=()) -> str:
    """The backend rule (docs/backends.md) when the call gives no ``backend=``.

    ``use_backend`` context, else ``KDSL_BACKEND``, else the arguments' device
    (a CUDA array -> "cuda"), else "cpu" if installed, else "numpy".
    """
    cur = _current.get()
    if cur is not None:
        return cur
    if _env_get(_ENV_KEY) is not None:   # set: config decides what the value means
        env = config.backend()
        if env is not None:
            return env
    for a in arrays:
        t = type(a)
        if t not in _HOST_TYPES and t.__module__ != "numpy" and _is_cuda_array(a):
            return "cuda"
    return auto_default or _automatic()


#: argument types that are never CUDA arrays (a set lookup instead of a module-name test)
_HOST_TYPES = frozenset((int, float, bool, complex, np.ndarray))


# kd.schedule checks target names against this registry (the schedule layer is below it)
_hints.set_target_names(known_targets)
