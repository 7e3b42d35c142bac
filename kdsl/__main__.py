"""``python -m kdsl cache info|clear``: look at or empty kdsl's on-disk cache.

``info`` prints the cache directory (``KDSL_CACHE_DIR``, else ``$XDG_CACHE_HOME/kdsl``,
else ``~/.cache/kdsl``: kdsl.config.cache_dir), whether the cache is enabled
(``KDSL_CACHE``), the number of entries and their total size.  ``clear`` deletes the
entries (``<dir>/<2 hex>/<64 hex>.bin``) and leftover temporary files of interrupted
writes, then the emptied sub-directories; it never deletes files it did not write, so a
mistaken ``KDSL_CACHE_DIR`` cannot cost anything else.  Deleting entries is always safe:
kernels are compiled again when next needed.
"""
from __future__ import annotations

import argparse
import os
import re
import sys

from . import config

_SUBDIR = re.compile(r"[0-9a-f]{2}")
_ENTRY = re.compile(r"[0-9a-f]{64}\.bin")
_TEMP = re.compile(r"\.tmp-.*\.part")


def cache_files(directory: str | None = None) -> tuple[list[str], list[str]]:
    """``(entries, temporaries)``: the paths of the cache's entries and of leftover temporary
    files under ``directory`` (default: the configured cache directory)."""
    directory = directory or config.cache_dir()
    entries, temps = [], []
    try:
        subdirs = sorted(os.listdir(directory))
    except OSError:
        return entries, temps
    for sub in subdirs:
        d = os.path.join(directory, sub)
        if not _SUBDIR.fullmatch(sub) or not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            p = os.path.join(d, name)
            if _ENTRY.fullmatch(name) and name.startswith(sub):
                entries.append(p)
            elif _TEMP.fullmatch(name):
                temps.append(p)
    return entries, temps


def _size(paths) -> int:
    total = 0
    for p in paths:
        try:
            total += os.path.getsize(p)
        except OSError:   # removed by another process meanwhile
            pass
    return total


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def cache_info(directory: str | None = None, out=sys.stdout) -> dict:
    """Print (and return) the cache's location, state, entry count and size."""
    directory = directory or config.cache_dir()
    entries, temps = cache_files(directory)
    info = {"directory": directory, "enabled": config.cache_enabled(), "entries": len(entries),
            "bytes": _size(entries), "temporary_files": len(temps)}
    print(f"location: {directory}{'' if os.path.isdir(directory) else ' (does not exist)'}", file=out)
    print(f"enabled:  {'yes' if info['enabled'] else 'no (KDSL_CACHE=0)'}", file=out)
    print(f"entries:  {info['entries']}", file=out)
    print(f"size:     {_human(info['bytes'])} ({info['bytes']} bytes)", file=out)
    if temps:
        print(f"leftover temporary files: {len(temps)} (`clear` removes them)", file=out)
    return info


def cache_clear(directory: str | None = None, out=sys.stdout) -> int:
    """Delete every entry and leftover temporary file of the cache; returns how many entries."""
    directory = directory or config.cache_dir()
    entries, temps = cache_files(directory)
    freed = _size(entries)
    for p in entries + temps:
        try:
            os.remove(p)
        except FileNotFoundError:   # another process removed it first
            pass
    for sub in {os.path.dirname(p) for p in entries + temps}:
        try:
            os.rmdir(sub)          # only when empty
        except OSError:
            pass
    n = sum(1 for p in entries if not os.path.exists(p))
    print(f"removed {n} entries ({_human(freed)}) from {directory}", file=out)
    return n


def main(argv=None) -> int:
    """The command line: ``python -m kdsl cache info|clear [--dir DIR]``."""
    ap = argparse.ArgumentParser(prog="python -m kdsl", description="kdsl tools")
    sub = ap.add_subparsers(dest="command", required=True)
    cache = sub.add_parser("cache", help="the on-disk cache of compiled kernels")
    cache.add_argument("action", choices=("info", "clear"))
    cache.add_argument("--dir", default=None,
                       help="cache directory (default: KDSL_CACHE_DIR, else $XDG_CACHE_HOME/kdsl, "
                       "else ~/.cache/kdsl)")
    args = ap.parse_args(argv)
    if args.action == "info":
        cache_info(args.dir)
    else:
        cache_clear(args.dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
