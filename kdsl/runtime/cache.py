"""The on-disk cache that backends use for compiled artifacts (object code, cubins).

Key: sha256 of (printed lowered IR, backend name, backend options, kdsl and
backend versions, Python version) -- ``cache_key``.  An entry is a file
``<dir>/<key[:2]>/<key>.bin``: a header (magic, key, payload length, payload
sha256) then the payload.  ``get`` verifies all of it; a corrupt or foreign
entry is deleted and reported as a miss, so the caller rebuilds it.  An entry
that passes those checks but then fails to load (``fetch``'s ``load``, e.g.
object code naming a symbol this process lacks) is deleted too, with a
``CacheWarning``, and rebuilt: a bad entry never outlives the process that met it.  ``put``
writes a temporary file in the same directory and ``os.replace``s it into
place, so readers see either nothing or a whole entry, and several processes
may share one directory (the last writer of identical content wins).  It does
not fsync: after a power loss an entry may be torn, which ``get``'s checks
catch like any corrupt entry.
"""
from __future__ import annotations

import hashlib
import os
import struct
import sys
import tempfile

from .. import config

MAGIC = b"KDSLCACHE\x01"


class CacheWarning(UserWarning):
    """A disk cache entry was unusable (it failed to load) and was deleted and rebuilt."""


_HEADER = struct.Struct(f"<{len(MAGIC)}s64sQ32s")


def kdsl_version() -> str:
    from .. import __version__
    return __version__


def cache_key(ir_text: str, backend_name: str, options=None, backend_version: str = "") -> str:
    """The hex sha256 naming one compiled artifact."""
    parts = {
        "ir": ir_text,
        "backend": backend_name,
        "options": options if options is not None else {},
        "kdsl": kdsl_version(),
        "backend_version": str(backend_version),
        "python": sys.version.split()[0],
    }
    return hashlib.sha256(_canonical(parts).encode()).hexdigest()


def _canonical(v) -> str:
    """A text naming ``v`` exactly: dicts with sorted keys, lists and tuples alike, anything
    else by ``repr`` (what json with sort_keys gave, without importing json: ~3 ms)."""
    t = type(v)
    if t is dict:
        return "{" + ",".join(f"{_canonical(k)}:{_canonical(v[k])}"
                              for k in sorted(v, key=repr)) + "}"
    if t is list or t is tuple:
        return "[" + ",".join(_canonical(x) for x in v) + "]"
    return repr(v)


class DiskCache:
    """A directory of verified cache entries (``directory`` None: ``KDSL_CACHE_DIR``)."""

    def __init__(self, directory: str | None = None, enabled: bool | None = None):
        self.directory = directory or config.cache_dir()
        self.enabled = config.cache_enabled() if enabled is None else enabled

    def path(self, key: str) -> str:
        return os.path.join(self.directory, key[:2], key + ".bin")

    def get(self, key: str, validate=None) -> bytes | None:
        """The payload stored under ``key``, or None (missing, disabled, corrupt or foreign).

        ``validate(payload) -> bool`` lets the backend check what the entry holds (object
        format, machine, symbols); a payload it refuses is deleted like a corrupt one."""
        if not self.enabled:
            return None
        p = self.path(key)
        try:
            with open(p, "rb") as f:
                blob = f.read()
        except OSError:
            return None
        payload = _unpack(blob, key)
        if payload is not None and validate is not None and not validate(payload):
            payload = None
        if payload is None:
            _remove(p)  # never load it blindly: drop it so the caller rebuilds
        return payload

    def discard(self, key: str, what: str, err: BaseException | None = None) -> None:
        """Delete the entry ``key`` (it failed to load) and say so with a CacheWarning."""
        import warnings
        p = self.path(key)
        _remove(p)
        why = f": {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}" if err else ""
        warnings.warn(f"kdsl disk cache: the entry for {what} ({p}) failed to load{why}; it was "
                      "deleted and is rebuilt", CacheWarning, stacklevel=3)

    def fetch(self, key: str, build, load=None, validate=None, what: str = "a kernel"):
        """``(load(payload), from_cache)``: the payload of ``key`` (``get``), or ``build()``
        stored with ``put``; ``load`` (default: the payload itself) turns it into what the
        caller uses.  A cached payload whose ``load`` raises is discarded (``discard``: a
        CacheWarning) and rebuilt once; an error loading a fresh build propagates."""
        payload = self.get(key, validate)
        if payload is not None:
            if load is None:
                return payload, True
            try:
                return load(payload), True
            except Exception as e:     # anything: a bad entry must never stick
                self.discard(key, what, e)
        payload = build()
        self.put(key, payload)
        return (payload if load is None else load(payload)), False

    def put(self, key: str, data: bytes) -> str | None:
        """Store ``data`` atomically; returns the path (None when disabled or not writable)."""
        if not self.enabled:
            return None
        p = self.path(key)
        d = os.path.dirname(p)
        try:
            os.makedirs(d, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".part", dir=d)
        except OSError:
            return None
        try:
            with os.fdopen(fd, "wb") as f:
                # no fsync: a crash may leave a torn or empty entry, which ``get`` refuses
                # (length and sha256) and the caller rebuilds; an fsync here cost a cold first
                # call 5-100 ms while other files were being written back
                f.write(_pack(key, bytes(data)))
            os.replace(tmp, p)
        except OSError:
            _remove(tmp)
            return None
        return p


def _pack(key: str, data: bytes) -> bytes:
    return _HEADER.pack(MAGIC, key.encode("ascii"), len(data), hashlib.sha256(data).digest()) + data


def _unpack(blob: bytes, key: str) -> bytes | None:
    if len(blob) < _HEADER.size:
        return None
    magic, k, length, digest = _HEADER.unpack_from(blob)
    data = blob[_HEADER.size:]
    if magic != MAGIC or k.rstrip(b"\0") != key.encode("ascii")[:64] or length != len(data):
        return None
    if hashlib.sha256(data).digest() != digest:
        return None
    return data


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def get(key: str) -> bytes | None:
    """``DiskCache().get(key)`` with the current environment's settings."""
    return DiskCache().get(key)


def put(key: str, data: bytes) -> str | None:
    """``DiskCache().put(key, data)`` with the current environment's settings."""
    return DiskCache().put(key, data)
