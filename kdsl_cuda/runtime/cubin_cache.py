"""Cubins in kdsl's disk cache (``kdsl.runtime.cache``: ``$KDSL_CACHE_DIR``, atomic writes,
corrupt or foreign entries dropped), so that a second process loads a kernel without NVRTC.

Key: the CUDA source, the architecture, NVRTC's options and version, and kdsl_cuda's version.
"""
from __future__ import annotations

from kdsl.runtime import cache as disk

from .. import build

#: what the last ``cached_cubin`` calls did (tests read it): "hit", "compiled"
stats = {"hit": 0, "compiled": 0}


nvrtc_version = build.nvrtc_version     # NVRTC's version (part of the key)


def is_cubin(blob: bytes) -> bool:
    """A 64-bit little-endian ELF for the CUDA machine (EM_CUDA = 190): what a cache entry must
    hold before the driver is given it."""
    return (len(blob) >= 20 and blob[:4] == b"\x7fELF" and blob[4] == 2 and blob[5] == 1
            and int.from_bytes(blob[18:20], "little") == 190)


def cached_cubin(source: str, arch: str, name: str, fresh: bool = False) -> bytes:
    """The cubin of ``source`` for ``arch``: from the disk cache, or NVRTC (then stored).
    ``fresh``: the cached cubin failed to load on the device: its entry is discarded (a
    CacheWarning) and NVRTC builds it again."""
    from .. import __version__
    key = disk.cache_key(source, "cuda", {"arch": arch, **build.options(arch, "k.cu"),
                                          "nvrtc": nvrtc_version()}, __version__)
    cache = disk.DiskCache()       # disabled by KDSL_CACHE=0 (get: None, put: nothing)
    if fresh:
        cache.discard(key, f"cubin {name} ({arch})")
    blob = None if fresh else cache.get(key, validate=is_cubin)
    if blob is not None:
        stats["hit"] += 1
        return blob
    cubin = build.compile_cubin(source, arch, name)
    stats["compiled"] += 1
    cache.put(key, cubin)
    return cubin
