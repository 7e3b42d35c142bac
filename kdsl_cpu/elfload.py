"""A small loader of x86-64 relocatable ELF objects: cached kernels run without LLVM.

A warm process (kdsl.runtime.fingerprint's early key) needs no LLVM to compile, only to map
object code into memory; importing ``llvmlite.binding`` (a 100 MB shared library) costs more
than the rest of a first call.  ``load(obj, entry, extra)`` does what a static linker and
MCJIT's RuntimeDyld do for the code kdsl's cpu backend emits: it lays the allocated sections
out in one anonymous mapping (code and read-only data first, writable data after), resolves
undefined symbols in the process (``dlsym``: libm, libc, libgcc_s; ``extra`` names more, e.g.
libgomp's entry points), gives each external symbol a GOT slot and a jump stub next to the
code (so 32-bit PC-relative calls reach it wherever the library lives), applies the
relocations, and makes the code part read+execute.

Only the relocation types x86-64 code of the small PIC model uses are handled; anything else
(another machine, TLS, COMMON symbols, absolute 32-bit relocations, a value out of range)
raises ``Unsupported`` before any code could run, and the caller falls back to MCJIT.
"""
from __future__ import annotations

import ctypes
import mmap
import platform
import struct

from .objcheck import _EHDR, _SHDR, _SYM

_RELA = struct.Struct("<QQq")
_SHF_WRITE, _SHF_ALLOC, _SHF_EXEC = 0x1, 0x2, 0x4
_SHT_SYMTAB, _SHT_RELA, _SHT_NOBITS, _SHT_REL = 2, 4, 8, 9
_SHN_UNDEF, _SHN_ABS, _SHN_COMMON = 0, 0xFFF1, 0xFFF2
_STT_SECTION, _STT_TLS, _STB_WEAK = 3, 6, 2
# relocation types (System V x86-64 psABI)
_R_64, _R_PC32, _R_PLT32, _R_GOTPCREL, _R_PC64 = 1, 2, 4, 9, 24
_R_GOTPCRELX, _R_REX_GOTPCRELX = 41, 42
# the large code model's (what MCJIT's "jitdefault" gives on x86-64): 64-bit, GOT-relative
_R_GOTOFF64, _R_GOT64, _R_GOTPC64, _R_PLTOFF64 = 25, 27, 29, 31
_GOT_TYPES = (_R_GOTPCREL, _R_GOTPCRELX, _R_REX_GOTPCRELX, _R_GOT64)
_CALL_TYPES = (_R_PC32, _R_PLT32, _R_PLTOFF64)
_GOT_SYMBOL = "_GLOBAL_OFFSET_TABLE_"
_STUB = b"\xff\x25\x00\x00\x00\x00"    # jmp *0(%rip): the 8-byte address follows
_PAGE = mmap.PAGESIZE
_LIBS = ("libm.so.6", "libc.so.6", "libgcc_s.so.1")


class Unsupported(Exception):
    """The object uses something this loader does not handle (the caller uses MCJIT)."""


def supported() -> bool:
    """Is this an x86-64 Linux process (the only place this loader runs)?"""
    return platform.machine() in ("x86_64", "AMD64") and platform.system() == "Linux"


_handles = []


def resolve(name: str) -> int | None:
    """The address of ``name`` in this process (its libraries, libm, libc, libgcc_s), or None."""
    if not _handles:
        _handles.append(ctypes.CDLL(None))
        for lib in _LIBS:
            try:
                _handles.append(ctypes.CDLL(lib))
            except OSError:
                pass
    for h in _handles:
        try:
            return ctypes.cast(getattr(h, name), ctypes.c_void_p).value
        except AttributeError:
            continue
    return None


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a if a > 1 else x


class Loaded:
    """Object code mapped into this process: ``address`` of the entry; keeps the mapping alive."""

    def __init__(self, mem, address: int):
        self._mem = mem
        self.address = address


def load(obj: bytes, entry: str, extra: dict | None = None) -> Loaded:
    """Map relocatable object ``obj`` and return its ``entry`` (raises ``Unsupported``)."""
    if not supported():
        raise Unsupported("not an x86-64 Linux process")
    try:
        return _load(bytes(obj), entry, extra or {})
    except (struct.error, IndexError, ValueError, UnicodeDecodeError) as e:
        raise Unsupported(f"unreadable object ({e})") from None


def _load(obj: bytes, entry: str, extra: dict) -> Loaded:
    hdr = _EHDR.unpack_from(obj, 0)
    if obj[:4] != b"\x7fELF" or obj[4] != 2 or obj[5] != 1 or hdr[1] != 1 or hdr[2] != 62:
        raise Unsupported("not a relocatable x86-64 ELF64 object")
    shoff, shentsize, shnum = hdr[6], hdr[11], hdr[12]
    if shentsize != _SHDR.size:
        raise Unsupported("odd section headers")
    secs = [_SHDR.unpack_from(obj, shoff + k * shentsize) for k in range(shnum)]
    # sh: (name, type, flags, addr, offset, size, link, info, addralign, entsize)
    if any(sh[1] == _SHT_REL for sh in secs):
        raise Unsupported("REL relocations")
    alloc = [k for k, sh in enumerate(secs) if sh[2] & _SHF_ALLOC and sh[5]]
    ro = [k for k in alloc if not secs[k][2] & _SHF_WRITE]
    rw = [k for k in alloc if secs[k][2] & _SHF_WRITE]
    offset, at = 0, {}
    for k in ro:
        offset = _align(offset, max(1, secs[k][8]))
        at[k] = offset
        offset += secs[k][5]
    symtab = next((sh for sh in secs if sh[1] == _SHT_SYMTAB), None)
    if symtab is None:
        raise Unsupported("no symbol table")
    strtab = secs[symtab[6]]
    syms = []
    for j in range(symtab[5] // symtab[9]):
        name_at, info, _other, shndx, value, _size = _SYM.unpack_from(obj, symtab[4] + j * symtab[9])
        end = obj.index(b"\0", strtab[4] + name_at)
        syms.append((obj[strtab[4] + name_at:end].decode(), info, shndx, value))
    # a GOT slot and a stub per symbol that GOT-relative relocations or external calls name
    loaded = set(alloc)
    relas = [sh for sh in secs if sh[1] == _SHT_RELA and sh[7] in loaded]
    slots = {}
    for sh in relas:
        for r in range(sh[5] // _RELA.size):
            _off, info, _add = _RELA.unpack_from(obj, sh[4] + r * _RELA.size)
            s, t = info >> 32, info & 0xFFFFFFFF
            if t in _GOT_TYPES or (t in _CALL_TYPES and syms[s][2] == _SHN_UNDEF and s):
                slots.setdefault(s, len(slots))
    got = _align(offset, 16)
    stubs = got + 8 * len(slots)
    code_end = _align(stubs + 16 * len(slots), _PAGE)
    offset = code_end
    for k in rw:
        offset = _align(offset, max(1, secs[k][8]))
        at[k] = offset
        offset += secs[k][5]
    total = max(_align(offset, _PAGE), _PAGE)
    # private: Python's default for an anonymous map is MAP_SHARED, which would share the
    # object's writable data (kdsl_cpu.workers' job state) between a process and its forks
    mem = mmap.mmap(-1, total, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
                    prot=mmap.PROT_READ | mmap.PROT_WRITE)
    base = ctypes.addressof(ctypes.c_char.from_buffer(mem))
    for k, o in at.items():
        sh = secs[k]
        if sh[1] != _SHT_NOBITS:
            mem[o:o + sh[5]] = obj[sh[4]:sh[4] + sh[5]]

    def address(s: int) -> int:
        if s == 0:          # no symbol: the addend alone
            return 0
        name, info, shndx, value = syms[s]
        if name == _GOT_SYMBOL and shndx == _SHN_UNDEF:
            return base + got
        if info & 0xF == _STT_TLS or shndx == _SHN_COMMON:
            raise Unsupported(f"symbol {name!r} is TLS or COMMON")
        if shndx == _SHN_UNDEF:
            a = extra.get(name) or resolve(name)
            if not a:
                if info >> 4 == _STB_WEAK:
                    return 0
                raise Unsupported(f"undefined symbol {name!r}")
            return a
        if shndx == _SHN_ABS:
            return value
        if shndx not in at:
            raise Unsupported(f"symbol {name!r} in a section that is not loaded")
        return base + at[shndx] + value

    for s, j in slots.items():
        a = address(s)
        struct.pack_into("<Q", mem, got + 8 * j, a)
        mem[stubs + 16 * j:stubs + 16 * j + 14] = _STUB + struct.pack("<Q", a)
    for sh in relas:
        tbase = at[sh[7]]
        for r in range(sh[5] // _RELA.size):
            off, info, add = _RELA.unpack_from(obj, sh[4] + r * _RELA.size)
            s, t = info >> 32, info & 0xFFFFFFFF
            p = base + tbase + off
            if t == _R_64:
                struct.pack_into("<Q", mem, tbase + off, (address(s) + add) & (2 ** 64 - 1))
            elif t in (_R_PC32, _R_PLT32):
                target = (base + stubs + 16 * slots[s] if syms[s][2] == _SHN_UNDEF and s
                          else address(s))
                _put32(mem, tbase + off, target + add - p)
            elif t == _R_GOT64:
                struct.pack_into("<q", mem, tbase + off, 8 * slots[s] + add)
            elif t in _GOT_TYPES:
                _put32(mem, tbase + off, base + got + 8 * slots[s] + add - p)
            elif t == _R_PC64:
                struct.pack_into("<q", mem, tbase + off, address(s) + add - p)
            elif t == _R_GOTPC64:
                struct.pack_into("<q", mem, tbase + off, base + got + add - p)
            elif t == _R_GOTOFF64:
                struct.pack_into("<q", mem, tbase + off, address(s) + add - (base + got))
            elif t == _R_PLTOFF64:
                target = (base + stubs + 16 * slots[s] if syms[s][2] == _SHN_UNDEF and s
                          else address(s))
                struct.pack_into("<q", mem, tbase + off, target + add - (base + got))
            else:
                raise Unsupported(f"relocation type {t}")
    if not any(n == entry and shndx not in (_SHN_UNDEF, _SHN_ABS) for n, _i, shndx, _v in syms):
        raise Unsupported(f"no entry {entry!r}")
    ent = address(next(j for j, (n, _i, shndx, _v) in enumerate(syms)
                       if n == entry and shndx != _SHN_UNDEF))
    libc = ctypes.CDLL(None)
    libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    if code_end and libc.mprotect(base, code_end, mmap.PROT_READ | mmap.PROT_EXEC) != 0:
        raise Unsupported("mprotect refused to make the code executable")
    return Loaded(mem, ent)


def _put32(mem, at: int, value: int) -> None:
    if not -2 ** 31 <= value < 2 ** 31:
        raise Unsupported("a 32-bit relocation out of range")
    struct.pack_into("<i", mem, at, value)
