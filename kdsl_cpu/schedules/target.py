"""The cpu backend's ``kdsl.schedule.target.Target``: the host's cores, SIMD width and caches.

SIMD width comes from the CPU's flags (/proc/cpuinfo, else the features LLVM compiles
for, jit.host: AVX-512 -> 64-byte registers, 32 of them; AVX -> 32 bytes, 16; else SSE's
16 bytes);
cache sizes from Linux's sysfs; anything unreadable keeps GENERIC_CPU's value.
The core count is the one the schedules plan for (backend._thread_count).
"""
from __future__ import annotations

import functools
import os

from kdsl.schedule.target import GENERIC_CPU, Target

_SYSFS = "/sys/devices/system/cpu/cpu0/cache"


def _size(text: str) -> int | None:
    """``48K`` / ``2048K`` / ``300M`` -> bytes (None when unreadable)."""
    text = text.strip().upper()
    mult = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}.get(text[-1:], 1)
    digits = text[:-1] if text[-1:] in "KMG" else text
    return int(digits) * mult if digits.isdigit() else None


def _caches(root: str = _SYSFS) -> dict:
    """Cache level -> bytes of the data/unified caches sysfs lists (empty when none)."""
    out = {}
    try:
        entries = sorted(os.listdir(root))
    except OSError:
        return out
    for e in entries:
        d = os.path.join(root, e)
        try:
            with open(os.path.join(d, "level")) as f:
                level = int(f.read())
            with open(os.path.join(d, "type")) as f:
                kind = f.read().strip()
            with open(os.path.join(d, "size")) as f:
                size = _size(f.read())
        except (OSError, ValueError):
            continue
        if kind != "Instruction" and size:
            out[level] = size
    return out


def _simd(features: str) -> tuple:
    """(vector bytes, vector registers) for LLVM's host feature string."""
    feats = set(features.split(","))
    if "+avx512f" in feats:
        return 64, 32
    if "+avx" in feats or "+avx2" in feats:
        return 32, 16
    if "+neon" in feats or "+sse2" in feats:
        return 16, 16
    return GENERIC_CPU.vector_bytes, GENERIC_CPU.vector_registers


def _cpuinfo_features(path: str = "/proc/cpuinfo") -> str | None:
    """The first CPU's flags from ``path`` in LLVM's spelling (``+avx2,+sse2``...), None where
    the file is unreadable.  Read without LLVM: schedules run on a warm process's cache hit
    too (the early key is computed from the schedule), which must not load LLVM."""
    try:
        with open(path) as f:
            block = f.read().split("\n\n", 1)[0]
    except OSError:
        return None
    for line in block.splitlines():
        name, _, value = line.partition(":")
        if name.strip().lower() in ("flags", "features"):      # x86 / AArch64
            flags = value.split()
            return ",".join("+" + ("neon" if f == "asimd" else f) for f in flags)
    return None


@functools.lru_cache(maxsize=None)
def host_target() -> Target:
    """This machine's Target (one core; ``with_cores`` sets the count planned for)."""
    features = _cpuinfo_features()
    if features is None:       # no /proc: ask LLVM (loads it)
        try:
            from ..jit import host
            features = host()[2]
        except Exception:      # no LLVM here: the generic target's SIMD
            features = ""
    vb, regs = _simd(features)
    c = _caches()
    return Target(name="cpu", cores=1, vector_bytes=vb, vector_registers=regs,
                  l1_bytes=c.get(1, GENERIC_CPU.l1_bytes), l2_bytes=c.get(2, GENERIC_CPU.l2_bytes),
                  l3_bytes=c.get(3, GENERIC_CPU.l3_bytes))


def cpu_target(threads: int) -> Target:
    """The host's Target planned for ``threads`` threads."""
    return host_target().with_cores(threads)
