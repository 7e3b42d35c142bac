"""LLVM IR text -> optimised host object code -> loaded, callable machine code (llvmlite MCJIT).

``compile_object`` parses, verifies and optimises (the O3 pipeline with loop
and SLP vectorisation, for the host CPU's name and features) and returns the
relocatable object bytes, which is what the disk cache stores.
``load_object`` maps object bytes into memory -- with kdsl_cpu.elfload on x86-64
Linux (no LLVM needed: a process that only loads cached kernels never imports
``llvmlite.binding``), else with an MCJIT engine of its own -- and returns the
entry address; symbols the code calls (libm, malloc) are resolved in the process.
LLVM's global state is not thread-safe, so every step that touches it holds
``LLVM_LOCK``.  ``host_id`` names the host and toolchain for cache keys without LLVM.
"""
from __future__ import annotations

import functools
import hashlib
import platform
import threading

import llvmlite

from kdsl.errors import BackendCompileError

from . import elfload

LLVM_LOCK = threading.RLock()
OPT_LEVEL = 3


class _Binding:
    """``llvmlite.binding``, imported on first use (~30-70 ms: a large shared library)."""

    def __getattr__(self, name):
        import llvmlite.binding as binding
        globals()["llvm"] = binding
        return getattr(binding, name)


llvm = _Binding()


@functools.lru_cache(maxsize=None)
def _init() -> None:
    """Initialise the native target once and make libm's symbols visible to the JIT."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    llvm.initialize_native_asmparser()
    # libgcc_s: half-precision conversions LLVM calls on CPUs without F16C (__truncsfhf2...)
    for soname, name in (("libm.so.6", "m"), ("libc.so.6", "c"), ("libgcc_s.so.1", "gcc_s")):
        try:   # the glibc soname first: find_library runs ldconfig/gcc (milliseconds)
            llvm.load_library_permanently(soname)
            continue
        except RuntimeError:
            pass
        import ctypes.util   # imports subprocess: only where the sonames are unknown
        path = ctypes.util.find_library(name)
        if path:
            try:
                llvm.load_library_permanently(path)
            except RuntimeError:
                pass   # already part of the process image: the JIT finds it anyway


@functools.lru_cache(maxsize=None)
def host() -> tuple:
    """(triple, cpu name, cpu features) of this machine."""
    _init()
    try:
        features = llvm.get_host_cpu_features().flatten()
    except RuntimeError:
        features = ""
    return llvm.get_process_triple(), llvm.get_host_cpu_name(), features


@functools.lru_cache(maxsize=None)
def target_machine():
    """The target machine for the host CPU (its name and features: AVX2/AVX-512 where present)."""
    return new_target_machine()


def new_target_machine(opt: int = OPT_LEVEL):
    """A fresh host target machine (an MCJIT engine takes ownership of the one it is given)."""
    triple, cpu, features = host()
    target = llvm.Target.from_triple(triple)
    return target.create_target_machine(cpu=cpu, features=features, opt=opt,
                                        reloc="pic", codemodel="jitdefault", jit=True)


@functools.lru_cache(maxsize=None)
def glue_target_machine():
    """A host target machine that does not optimise code generation (see ``compile_glue``)."""
    return new_target_machine(0)


def data_layout() -> str:
    return str(target_machine().target_data)


def options() -> dict:
    """Everything about the toolchain and target that changes the object code (for cache keys)."""
    triple, cpu, features = host()
    return {"triple": triple, "cpu": cpu, "features": features, "opt": OPT_LEVEL,
            "llvm": ".".join(map(str, llvm.llvm_version_info)), "llvmlite": llvmlite.__version__}


@functools.lru_cache(maxsize=None)
def host_id() -> str:
    """What decides the object code of a given LLVM IR on this host, without importing LLVM:
    the machine, the CPU's identity and feature flags (/proc/cpuinfo), llvmlite's version
    (which pins LLVM's) and the optimisation level; ``options()`` where /proc is absent."""
    try:
        with open("/proc/cpuinfo") as f:
            block = f.read().split("\n\n", 1)[0]
    except OSError:
        return repr(sorted(options().items()))
    keep = ("vendor_id", "cpu family", "model", "model name", "flags", "features",
            "cpu implementer", "cpu architecture", "cpu variant", "cpu part", "isa")
    lines = sorted(ln for ln in block.splitlines()
                   if ln.split(":", 1)[0].strip().lower() in keep)
    digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()
    return f"{platform.machine()}|{digest}|llvmlite {llvmlite.__version__}|O{OPT_LEVEL}"


def optimize(ir_text: str, passes: bool = True):
    """Parse, verify and optimise ``ir_text``; returns the llvmlite ModuleRef.

    ``passes=False`` skips the optimisation pipeline (for straight-line glue code)."""
    with LLVM_LOCK:
        tm = target_machine()
        try:
            mod = llvm.parse_assembly(ir_text)
            mod.verify()
        except RuntimeError as e:
            raise BackendCompileError("LLVM rejected the IR the cpu backend generated (a kdsl "
                                      "bug)", log=str(e)) from None
        mod.triple = tm.triple
        mod.data_layout = str(tm.target_data)
        if not passes:
            return mod
        pto = llvm.create_pipeline_tuning_options(speed_level=OPT_LEVEL)
        pto.loop_vectorization = True
        pto.slp_vectorization = True
        pto.loop_unrolling = True
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
        return mod


def compile_object(ir_text: str) -> bytes:
    """Optimised relocatable object code of ``ir_text`` for the host."""
    mod = optimize(ir_text)
    with LLVM_LOCK:
        return bytes(target_machine().emit_object(mod))


def compile_glue(ir_text: str) -> bytes:
    """Object code of glue without loops (launchers, trampolines): no optimisation pipeline and
    LLVM's fast instruction selection build it ~3x sooner (~2 ms instead of ~7), and the few
    instructions saved would not show next to the calls the glue makes."""
    mod = optimize(ir_text, passes=False)
    with LLVM_LOCK:
        return bytes(glue_target_machine().emit_object(mod))


def assembly(ir_text: str) -> str:
    """Host assembly of ``ir_text`` after optimisation (to check for vector instructions)."""
    mod = optimize(ir_text)
    with LLVM_LOCK:
        return target_machine().emit_assembly(mod)


def object_problem(obj: bytes, entry: str) -> str | None:
    """Why ``obj`` cannot run in this process (format, machine, entry, unresolved calls), or None.

    Checked before the JIT maps any object code: an unresolved call would jump to address 0."""
    from . import objcheck
    if elfload.supported():     # the loader kernels use here resolves symbols the same way
        return objcheck.problem(obj, entry, "x86_64", elfload.resolve)
    _init()
    return objcheck.problem(obj, entry, host()[0], llvm.address_of_symbol)


class LoadedCode:
    """Object code mapped into memory; keeps its engine alive as long as the code is used."""

    def __init__(self, obj: bytes, entry: str, extra: dict | None = None):
        why = objcheck_problem(obj, entry, extra) if extra else object_problem(obj, entry)
        if why is not None:
            raise BackendCompileError(f"object code for {entry!r} cannot be loaded: {why}")
        with LLVM_LOCK:
            self._engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""),
                                                      new_target_machine())
            self._engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
            self._engine.finalize_object()
            self.address = self._engine.get_function_address(entry)
        if not self.address:
            raise BackendCompileError(f"the object code does not define its entry {entry!r}")


def load_object(obj: bytes, entry: str, extra: dict | None = None):
    """Map ``obj`` into memory and find ``entry`` (``.address``); ``extra``: name -> address of
    symbols the code may call besides the process's (libgomp's).  kdsl_cpu.elfload where it
    handles the object, else MCJIT."""
    if elfload.supported():
        why = objcheck_problem(obj, entry, extra)
        if why is not None:
            raise BackendCompileError(f"object code for {entry!r} cannot be loaded: {why}")
        try:
            return elfload.load(obj, entry, extra)
        except elfload.Unsupported:
            pass
    if extra:
        _init()
        for name, addr in extra.items():
            llvm.add_symbol(name, addr)
    return LoadedCode(obj, entry, extra)


def objcheck_problem(obj: bytes, entry: str, extra: dict | None = None) -> str | None:
    """``object_problem`` with ``extra`` symbols counted as defined."""
    from . import objcheck
    if elfload.supported():
        return objcheck.problem(obj, entry, "x86_64",
                                lambda s: (extra or {}).get(s) or elfload.resolve(s))
    _init()
    return objcheck.problem(obj, entry, host()[0],
                            lambda s: (extra or {}).get(s) or llvm.address_of_symbol(s))


def load_cached(blob: bytes, entry: str, unpack):
    """Load the object code in a disk-cache payload (``unpack(blob, entry)`` gives it); a
    payload that holds none raises, so that the cache discards the entry."""
    obj = unpack(blob, entry)
    if obj is None:
        raise BackendCompileError(f"the cache entry holds no object code for {entry!r}")
    return load_object(obj, entry)


__all__ = ["LLVM_LOCK", "host", "host_id", "object_problem", "target_machine", "options", "optimize", "compile_object",
           "compile_glue", "glue_target_machine",
           "assembly", "load_object", "load_cached", "LoadedCode", "data_layout"]
