"""Tuned winners: their keys, where they are kept, and the compile path's look-up.

A winner is the list of declarative hint dicts (``kd.schedule``'s vocabulary, one dict per
stage it adjusts) that ``kernel.tune`` found fastest for one key:

* the kernel's traced graph and signature (``kdsl.runtime.fingerprint``: the structure of
  the computation, the dtypes, ranks, size-1 dims, layouts -- and the size classes, the
  bit lengths of every dim, on backends whose specialisations are size-classed (cuda,
  interp-cuda); elsewhere one compiled kernel serves every size of a signature, so one
  winner does too), plus the user's own declarative hints for the target;
* the backend's name and the device model (``device_model``: the host CPU's model and
  usable cores, or the CUDA device's name).

Winners live in the disk cache (``$KDSL_CACHE_DIR/tune/k-<kernel name>``, one verified
entry per key: ``kdsl.runtime.cache.DiskCache``), so every later process and every worker sharing the
cache uses them; ``load(path)`` adds a file's winners to this process (``export`` writes
one).  ``tuned_hints`` is the compile path's hook (kdsl.runtime.dispatch.prepare): it costs
one ``stat`` for a kernel name never tuned (else a fingerprint of the graph, ~2 ms for a
softmax), and imports nothing heavy.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import os

from .. import config

# hashlib and json are imported where used: importing kdsl.kernel (which imports this
# module) must stay as light as it was

#: bump when the key or the entry format changes (old entries then simply miss)
FORMAT = "1"
#: KDSL_AUTOTUNE's budget (seconds) and trial count per specialisation
AUTOTUNE_BUDGET_S = 10.0
AUTOTUNE_TRIALS = 24

_SEARCHING = contextvars.ContextVar("kdsl_tune_searching", default=False)
_memory: dict = {}     # key -> entry: loaded from files or tuned by this process
_names: set = set()    # the kernel names of _memory's entries
_seen: dict = {}       # key -> entry or None: disk look-ups this process made


@contextlib.contextmanager
def searching():
    """While a search compiles its candidates: no winner is applied and no autotuning starts."""
    token = _SEARCHING.set(True)
    try:
        yield
    finally:
        _SEARCHING.reset(token)


def tune_dir() -> str:
    """The directory of the disk cache that keeps winners."""
    return os.path.join(config.cache_dir(), "tune")


def kernel_dir(name: str) -> str:
    """The directory of one kernel name's winners (a kernel never tuned costs one ``stat``)."""
    safe = "".join(c if c.isalnum() or c in "_.-" else "_" for c in str(name))[:80]
    return os.path.join(tune_dir(), "k-" + safe)


def _disk(name: str):
    from ..runtime.cache import DiskCache
    return DiskCache(kernel_dir(name))


# ----------------------------------------------------------------- device models
@functools.lru_cache(maxsize=None)
def host_model() -> str:
    """The host CPU's model name and the cores this process may use."""
    name = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("model name", "Model", "cpu model")):
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    if not name:
        import platform
        name = platform.processor() or platform.machine() or "cpu"
    return f"{name} x{config.usable_cores()}"


@functools.lru_cache(maxsize=None)
def cuda_model() -> str:
    """The name of CUDA device 0 (through the driver of the cuda-bindings wheel), or "cuda"."""
    try:
        from cuda.bindings import driver as d
        d.cuInit(0)
        err, dev = d.cuDeviceGet(0)
        err2, raw = d.cuDeviceGetName(96, dev)
        if int(err) == 0 and int(err2) == 0:
            return bytes(raw).split(b"\0")[0].decode(errors="replace").strip() or "cuda"
    except Exception:    # no driver, no device: one name for all of them
        pass
    return "cuda"


def device_model(backend) -> str:
    """The device a backend's timings belong to (``spec.device_model``, else by device kind)."""
    spec = backend.spec
    if spec.device_model is not None:
        return str(spec.device_model())
    return cuda_model() if spec.device == "cuda" else host_model()


# ----------------------------------------------------------------- keys
def winner_key(backend, sig, graph, declarative) -> str | None:
    """The key of a specialisation's winner, or None when the graph cannot be fingerprinted."""
    import dataclasses
    import numpy as np
    from ..runtime.fingerprint import Unkeyable, fingerprint
    from ..runtime.signature import ArraySig
    params = tuple(dataclasses.replace(p, kind=np.ndarray) if isinstance(p, ArraySig) else p
                   for p in sig.params)      # torch or CuPy arrays: one winner
    # the graph's computation, not its messages: constraints and data checks carry the user's
    # file and line in their text, and a kernel moved in its file must keep its winner
    shape = (graph.name, graph.params, graph.stages, graph.outputs,
             [(c.lhs, c.rhs) for c in graph.constraints], len(graph.data_checks))
    try:
        body = fingerprint(shape, params, sig.specialize, sig.size_classes,
                           tuple(dict(h.hints) for h in declarative))
    except Unkeyable:
        return None
    head = f"tune:{FORMAT}|{backend.spec.name}|{device_model(backend)}|{body}"
    import hashlib
    return hashlib.sha256(head.encode()).hexdigest()


# ----------------------------------------------------------------- entries
def lookup(key: str, name: str):
    """The winner entry of ``key`` for the kernel called ``name`` (a dict) or None: this
    process's first, then the disk's."""
    import json
    e = _memory.get(key)
    if e is not None:
        return e
    if key in _seen:
        return _seen[key]
    e = None
    if os.path.isdir(kernel_dir(name)):
        raw = _disk(name).get(key)
        if raw is not None:
            try:
                e = _check_entry(json.loads(raw.decode()))
            except (ValueError, UnicodeDecodeError):
                e = None
    _seen[key] = e
    return e


def save(entry: dict, persist: bool = True) -> None:
    """Keep ``entry`` (a winner) for this process and, with ``persist``, in the disk cache."""
    import json
    entry = _check_entry(entry)
    if entry is None:
        from ..errors import InternalCompilerError
        raise InternalCompilerError("kdsl.tune: a malformed winner entry")
    _memory[entry["key"]] = entry
    _names.add(entry["kernel"])
    _seen.pop(entry["key"], None)
    if persist:
        _disk(entry["kernel"]).put(entry["key"], json.dumps(entry, sort_keys=True).encode())


def forget() -> None:
    """Drop this process's winners (loaded or tuned) and its memo of disk look-ups."""
    _memory.clear()
    _names.clear()
    _seen.clear()


def _check_entry(e):
    """``e`` if it looks like a winner entry (what a file or the disk gave), else None."""
    if (isinstance(e, dict) and isinstance(e.get("key"), str) and isinstance(e.get("kernel"), str)
            and isinstance(e.get("hints"), list) and all(isinstance(h, dict) for h in e["hints"])):
        return e
    return None


def entries() -> list:
    """Every winner this process knows: the disk cache's and its own (its own win a tie)."""
    import json
    from ..runtime.cache import DiskCache
    out = {}
    top = tune_dir()
    kdirs = sorted(os.listdir(top)) if os.path.isdir(top) else []
    for kd_ in kdirs:
        disk = DiskCache(os.path.join(top, kd_))
        subs = sorted(os.listdir(disk.directory)) if os.path.isdir(disk.directory) else []
        for sub in subs:
            d = os.path.join(disk.directory, sub)
            if not os.path.isdir(d):
                continue
            for name in sorted(os.listdir(d)):
                if name.endswith(".bin"):
                    raw = disk.get(name[:-4])
                    e = None
                    if raw is not None:
                        try:
                            e = _check_entry(json.loads(raw.decode()))
                        except (ValueError, UnicodeDecodeError):
                            pass
                    if e is not None:
                        out[e["key"]] = e
    out.update(_memory)
    return list(out.values())


def export(path) -> int:
    """Write every known winner (``entries``) to the JSON file ``path``; returns how many.
    Ship the file with an application and ``kd.tune.load`` it at start-up."""
    import json
    es = entries()
    tmp = f"{os.fspath(path)}.tmp"
    with open(tmp, "w") as f:
        json.dump({"kdsl_tune": FORMAT, "entries": es}, f, indent=1, sort_keys=True)
    os.replace(tmp, path)
    return len(es)


def load(path, persist: bool = False) -> int:
    """Use the winners of the JSON file ``path`` (written by ``export``) in this process
    (``persist``: also write them into the disk cache); returns how many were read.
    Entries for other devices or kernels are kept too: their keys simply never match."""
    import json
    from ..errors import KdslUserError
    with open(path) as f:
        try:
            doc = json.load(f)
        except ValueError as err:
            raise KdslUserError(f"kd.tune.load: {path} is not JSON ({err})",
                                hint="load a file written by kd.tune.export") from None
    if not isinstance(doc, dict) or doc.get("kdsl_tune") != FORMAT or not isinstance(
            doc.get("entries"), list):
        raise KdslUserError(f"kd.tune.load: {path} is not a kdsl tuning file of format {FORMAT}",
                            hint="load a file written by kd.tune.export of this kdsl version")
    n = 0
    for e in doc["entries"]:
        e = _check_entry(e)
        if e is not None:
            save(e, persist)
            n += 1
    return n


# ----------------------------------------------------------------- the compile path's hooks
def hints_of(entry: dict, target: str) -> list:
    """A winner's hint dicts as declarative Hints for ``target`` (JSON lists back to tuples
    where a hint takes a tuple: ``threads``)."""
    from ..schedule.hints import Hint
    out = []
    for d in entry["hints"]:
        d = dict(d)
        if isinstance(d.get("threads"), list):
            d["threads"] = tuple(d["threads"])
        out.append(Hint(target, d))
    return out


def tuned_hints(kernel, backend, sig, graph, sched, declarative) -> list:
    """The persisted winner's Hints for this specialisation ([] when none, while searching, or
    when a winner no longer fits the schedule: logged, the default is used).  ``sched`` None:
    the winner without checking it against a schedule (what a key before scheduling holds)."""
    name = getattr(kernel, "__name__", "")
    if _SEARCHING.get() or (name not in _names and not os.path.isdir(kernel_dir(name))):
        return []
    key = winner_key(backend, sig, graph, declarative)
    entry = lookup(key, name) if key is not None else None
    if entry is None:
        return []
    hints = hints_of(entry, backend.spec.schedule_target)
    if sched is None:       # the disk-cache key before scheduling: the winner, unchecked
        return hints
    from ..errors import KdslError
    from ..schedule.hints import _check_value, validate_hint
    try:
        for h in hints:
            for k, v in h.hints.items():
                _check_value(k, v, None)
            validate_hint(sched, h)
    except KdslError as err:
        import logging
        logging.getLogger("kdsl").warning("kdsl.tune: the tuned winner of %s no longer fits its "
                                          "schedule (%s); the default schedule is used",
                                          getattr(kernel, "__name__", "?"), err)
        return []
    return hints


def autotune_on() -> bool:
    """KDSL_AUTOTUNE is set and no search is running in this context."""
    return config.autotune() and not _SEARCHING.get()
