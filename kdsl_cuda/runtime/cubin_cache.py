"""Cubins in kdsl's disk cache (``kdsl.runtime.cache``: ``$KDSL_CACHE_DIR``, atomic writes,
corrupt or foreign entries dropped), so that a second process loads a kernel without NVRTC.

Key: the CUDA source, the architecture, NVRTC's options and version, and kdsl_cuda's version.
"""
from __future__ import annotations

import functools

from kdsl.runtime import cache as disk

from .. import build

#: what the last ``cached_cubin`` calls did (tests read it): "hit", "compiled"
stats = {"hit": 0, "compiled": 0}


@functools.lru_cache(maxsize=1)
def nvrtc_version() -> str:
    """NVRTC's version (part of the key; "unknown" when it cannot be asked)."""
    try:
        from cuda.bindings import nvrtc
        err, major, minor = nvrtc.nvrtcVersion()
        return f"{major}.{minor}"
    except Exception:
        return "unknown"


def cached_cubin(source: str, arch: str, name: str) -> bytes:
    """The cubin of ``source`` for ``arch``: from the disk cache, or NVRTC (then stored)."""
    from .. import __version__
    key = disk.cache_key(source, "cuda", {"arch": arch, **build.options(arch, "k.cu"),
                                          "nvrtc": nvrtc_version()}, __version__)
    cache = disk.DiskCache()       # disabled by KDSL_CACHE=0 (get: None, put: nothing)
    blob = cache.get(key, validate=lambda b: b[:4] == b"\x7fELF")
    if blob is not None:
        stats["hit"] += 1
        return blob
    cubin = build.compile_cubin(source, arch, name)
    stats["compiled"] += 1
    cache.put(key, cubin)
    return cubin
