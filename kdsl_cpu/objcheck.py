"""Checks on object code before the JIT maps it: the right format, the entry, resolvable symbols.

The disk cache verifies that an entry is whole (header, length, checksum), not that its payload
is object code this process can run: a payload written by another machine, another LLVM or a
broken build would crash every later run inside the JIT (an unresolved call jumps to address 0).
``problem(obj, entry, resolve)`` reads the ELF header and symbol table and says what is wrong,
or returns None: relocatable ELF64 little-endian for this machine, ``entry`` defined as a
function, and every undefined (non-weak) symbol found by ``resolve(name)``.
"""
from __future__ import annotations

import struct

#: e_machine of the ELF header per LLVM triple architecture
MACHINES = {"x86_64": 62, "aarch64": 183, "arm64": 183, "ppc64le": 21, "riscv64": 243, "s390x": 22}

_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_SYM = struct.Struct("<IBBHQQ")
_SHT_SYMTAB, _ET_REL, _STB_WEAK, _STT_FUNC = 2, 1, 2, 2
#: names the JIT's linker provides itself
_LINKER = frozenset({"_GLOBAL_OFFSET_TABLE_"})


def machine_of(triple: str) -> int | None:
    """The ELF machine number of an LLVM target triple (None if this module does not know it)."""
    return MACHINES.get(triple.split("-", 1)[0])


def symbols(obj: bytes) -> tuple[dict, list]:
    """(defined: name -> is_function, undefined non-weak names) of an ELF64 LE object."""
    (_ident, _type, _machine, _ver, _entry, _phoff, shoff, _flags, _ehsize, _phes, _phnum,
     shentsize, shnum, _shstrndx) = _EHDR.unpack_from(obj, 0)
    if shentsize != _SHDR.size or shoff + shnum * shentsize > len(obj):
        raise ValueError("section headers out of range")
    sections = [_SHDR.unpack_from(obj, shoff + k * shentsize) for k in range(shnum)]
    defined, undefined = {}, []
    for sh in sections:
        if sh[1] != _SHT_SYMTAB:
            continue
        off, size, link, entsize = sh[4], sh[5], sh[6], sh[9]
        if entsize != _SYM.size or off + size > len(obj) or link >= len(sections):
            raise ValueError("symbol table out of range")
        str_off, str_size = sections[link][4], sections[link][5]
        strtab = obj[str_off:str_off + str_size]
        for k in range(size // entsize):
            name_at, info, _other, shndx, _value, _size = _SYM.unpack_from(obj, off + k * entsize)
            end = strtab.find(b"\0", name_at)
            name = strtab[name_at:end if end >= 0 else None].decode("ascii", "replace")
            if not name:
                continue
            bind, kind = info >> 4, info & 0xF
            if shndx == 0:
                if bind != _STB_WEAK:
                    undefined.append(name)
            else:
                defined[name] = kind == _STT_FUNC
    return defined, undefined


def problem(obj: bytes, entry: str, triple: str, resolve) -> str | None:
    """Why ``obj`` must not be loaded here, or None when it may."""
    if len(obj) < _EHDR.size or obj[:4] != b"\x7fELF":
        return "not an ELF object"
    if obj[4] != 2 or obj[5] != 1:
        return "not a 64-bit little-endian ELF object"
    _ident, etype, machine = _EHDR.unpack_from(obj, 0)[:3]
    if etype != _ET_REL:
        return f"ELF type {etype} is not a relocatable object"
    want = machine_of(triple)
    if want is not None and machine != want:
        return f"built for ELF machine {machine}, this machine is {want} ({triple})"
    try:
        defined, undefined = symbols(obj)
    except (ValueError, struct.error) as e:
        return f"unreadable symbol table ({e})"
    if not defined.get(entry):
        return f"does not define the function {entry!r}"
    missing = [s for s in undefined if s not in _LINKER and not resolve(s)]
    if missing:
        return f"calls {', '.join(sorted(missing)[:5])}, which this process does not define"
    return None


__all__ = ["problem", "symbols", "machine_of", "MACHINES"]
