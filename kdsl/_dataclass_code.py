"""The compiled methods of kdsl's dataclasses, kept between processes (``import kdsl`` time).

``@dataclass`` writes the source of ``__init__``, ``__repr__``, ``__eq__``, ``__hash__``,
``__setattr__``... for each class and compiles it with ``exec`` (Python 3.11: ~0.8 ms a
frozen class, ~45 ms for the ~80 classes a first kernel call defines: most of ``import
kdsl``).  ``install()`` routes the ``exec`` calls that ``dataclasses`` makes for classes of
kdsl's own packages through a table source text -> code object: a hit executes the code
object compiled in an earlier process, a miss compiles exactly as ``exec`` would (the same
file name ``<string>``, no inherited ``__future__`` flags) and is saved at exit.  Keyed by the
whole source text, an entry can never stand for other code; classes of other modules pass
through to ``exec`` untouched.

The table lives beside kdsl's ``.pyc`` files (``__pycache__`` or ``PYTHONPYCACHEPREFIX``:
one file per interpreter cache tag), else in the kdsl disk cache (``KDSL_CACHE_DIR``), and
is written only where Python writes bytecode (not under ``PYTHONDONTWRITEBYTECODE``).
A damaged file (checksum, interpreter, optimisation level) is ignored and rewritten.
"""
import marshal
import os
import sys
import zlib

_exec = exec
_PREFIXES = ("kdsl.", "kdsl_cpu.", "kdsl_cuda.")
_MAGIC = b"KDSLDCC1"
#: entries kept from earlier processes beyond this process's own: an edited kdsl leaves
#: stale ones, dropped once the table grows past this
_LIMIT = 4096

_codes = None        # source text -> code object (None: the file is not read yet)
_used: set = set()   # source texts this process executed (what a rewrite keeps first)
_dirty = False
_HEAD = (f"{sys.implementation.cache_tag}|{sys.version}|O{sys.flags.optimize}").encode()


def _paths() -> list:
    """Where the table may live: beside kdsl's bytecode, then the kdsl disk cache."""
    import importlib.util
    name = f"dataclass_code.{sys.implementation.cache_tag}.bin"
    try:
        pyc = importlib.util.cache_from_source(os.path.join(os.path.dirname(__file__),
                                                            "__init__.py"))
    except (NotImplementedError, ValueError):   # no cache tag: no bytecode cache at all
        return []
    out = [os.path.join(os.path.dirname(pyc), name)]
    from . import config
    if config.cache_enabled():
        out.append(os.path.join(config.cache_dir(), name))
    return out


def _read() -> dict:
    """The first whole table found (``{}`` where there is none: every method is compiled)."""
    for path in _paths():
        try:
            with open(path, "rb") as f:
                blob = f.read()
        except OSError:
            continue
        head = _MAGIC + _HEAD + b"\0"
        if not blob.startswith(head) or len(blob) < len(head) + 4:
            continue
        body = blob[len(head) + 4:]
        if zlib.crc32(body) != int.from_bytes(blob[len(head):len(head) + 4], "little"):
            continue
        try:
            table = marshal.loads(body)
        except (ValueError, EOFError, TypeError):
            continue
        if type(table) is dict:
            return table
    return {}


def _save() -> None:
    """Write the table (atexit, when this process compiled something new)."""
    if not _dirty or sys.dont_write_bytecode:
        return
    table = _codes
    if len(table) > _LIMIT:     # stale entries of edited sources: keep this process's only
        table = {k: v for k, v in table.items() if k in _used}
    body = marshal.dumps(table)
    blob = _MAGIC + _HEAD + b"\0" + zlib.crc32(body).to_bytes(4, "little") + body
    for path in _paths():
        tmp = f"{path}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(tmp, "wb") as f:
                f.write(blob)
            os.replace(tmp, path)    # readers see the old file or the new one, whole
            return
        except OSError:              # not writable here: the next place
            try:
                os.remove(tmp)
            except OSError:
                pass


def _dataclass_exec(source, globals=None, locals=None, /, **kw):
    """``exec`` as ``dataclasses`` calls it, with compiled code reused for kdsl's classes.
    Any other form of call (keywords a later Python may pass, another module's class) goes
    to ``exec`` unchanged."""
    global _codes, _dirty
    name = globals.get("__name__", "") if type(globals) is dict else ""
    if kw or type(source) is not str or not name.startswith(_PREFIXES):
        if globals is None:    # exec's default: the globals of its caller, dataclasses
            globals = sys.modules["dataclasses"].__dict__
        return _exec(source, globals, locals, **kw)
    if _codes is None:
        _codes = _read()
    code = _codes.get(source)
    if code is None:
        # exec(str) from dataclasses: file "<string>", dataclasses' (no) __future__ flags
        code = _codes[source] = compile(source, "<string>", "exec", dont_inherit=True)
        if not _dirty:
            _dirty = True
            import atexit
            atexit.register(_save)
    _used.add(source)
    return _exec(code, globals, locals)


def install() -> None:
    """Route ``dataclasses``' ``exec`` through the table (idempotent)."""
    import dataclasses
    if dataclasses.__dict__.get("exec") is not _dataclass_exec:
        dataclasses.exec = _dataclass_exec
