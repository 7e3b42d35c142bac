"""Running outlined parallel loops: the OpenMP runtime, or a thread pool where it is missing.

Kernel code calls ``runtime.launch(chunk, data, nthreads)`` through the
runtime table ``{ptr launch, i64 nthreads}`` passed to the entry function;
``chunk(data, tid, nthreads)`` runs one static block of the loop.  The same
object code therefore works with either launcher:

- ``omp``: a tiny LLVM module (built once per process) whose launcher calls
  ``GOMP_parallel`` of ``libgomp.so.1`` (loaded by soname) with a trampoline
  that asks ``omp_get_thread_num``/``omp_get_num_threads`` for its block;
- ``pool``: a ctypes callback that runs the chunks on a Python thread pool,
  each chunk called through ctypes, i.e. with the GIL released.
"""
from __future__ import annotations

import ctypes
import functools
import threading

from llvmlite import ir

from kdsl import config

from . import jit

CHUNK_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
LAUNCH_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


class RuntimeTable(ctypes.Structure):
    """What kernel code reads through its ``runtime`` argument (layout fixed by codegen)."""

    _fields_ = [("launch", ctypes.c_void_p), ("nthreads", ctypes.c_int64)]


# ----------------------------------------------------------------- OpenMP
@functools.lru_cache(maxsize=None)
def _libgomp():
    """libgomp.so.1, or None where it cannot be loaded."""
    try:
        return ctypes.CDLL("libgomp.so.1")
    except OSError:
        return None


def _omp_module_ir() -> str:
    i32, i64, ptr, void = ir.IntType(32), ir.IntType(64), ir.PointerType(), ir.VoidType()
    m = ir.Module("kdsl_cpu_omp")
    gomp = ir.Function(m, ir.FunctionType(void, [ptr, ptr, i32, i32]), "GOMP_parallel")
    tnum = ir.Function(m, ir.FunctionType(i32, []), "omp_get_thread_num")
    tcount = ir.Function(m, ir.FunctionType(i32, []), "omp_get_num_threads")
    chunk_ty = ir.FunctionType(void, [ptr, i64, i64])
    # trampoline(ctx): ctx = {chunk, data}; run my static block
    tr = ir.Function(m, ir.FunctionType(void, [ptr]), "kdsl_omp_trampoline")
    b = ir.IRBuilder(tr.append_basic_block("entry"))
    chunk = b.load(tr.args[0], typ=ptr)
    data = b.load(b.gep(tr.args[0], [i64(1)], source_etype=ptr), typ=ptr)
    tid = b.sext(b.call(tnum, []), i64)
    cnt = b.sext(b.call(tcount, []), i64)

    class _Ptr:   # call through a function pointer (see codegen.stmt._FnPtr)
        function_type = chunk_ty
        def __init__(self, p): self.p = p
        def __getattr__(self, k): return getattr(self.p, k)
    b.call(_Ptr(chunk), [data, tid, cnt])
    b.ret_void()
    # launch(chunk, data, nthreads)
    ln = ir.Function(m, ir.FunctionType(void, [ptr, ptr, i64]), "kdsl_omp_launch")
    b = ir.IRBuilder(ln.append_basic_block("entry"))
    ctx = b.alloca(ptr, size=i64(2))
    b.store(ln.args[0], ctx)
    b.store(ln.args[1], b.gep(ctx, [i64(1)], source_etype=ptr))
    b.call(gomp, [tr, ctx, b.trunc(ln.args[2], i32), i32(0)])
    b.ret_void()
    return str(m)


_omp_lock = threading.Lock()
_omp_code = None


def omp_launcher() -> int | None:
    """Address of the GOMP-based launcher, or None where libgomp is missing."""
    global _omp_code
    gomp = _libgomp()
    if gomp is None:
        return None
    with _omp_lock:
        if _omp_code is None:
            import llvmlite.binding as llvm
            jit._init()
            for sym in ("GOMP_parallel", "omp_get_thread_num", "omp_get_num_threads"):
                llvm.add_symbol(sym, ctypes.cast(getattr(gomp, sym), ctypes.c_void_p).value)
            _omp_code = jit.load_object(_omp_object(), "kdsl_omp_launch")
        return _omp_code.address


def _omp_object() -> bytes:
    """Object code of the OpenMP launcher module, through the disk cache like kernels."""
    from kdsl.runtime import cache as disk
    text = _omp_module_ir()
    store = disk.DiskCache()
    key = disk.cache_key(text, "cpu-omp-runtime", {**jit.options(), "glue": "O0"})
    obj = store.get(key)
    if not obj:
        obj = jit.compile_glue(text)   # a few calls, no loops: optimising would only cost time
        store.put(key, obj)
    return obj




# ----------------------------------------------------------------- thread pool fallback
_pool_lock = threading.Lock()
_pool = None


def _get_pool(workers: int):
    global _pool
    with _pool_lock:
        if _pool is None or _pool._max_workers < workers:
            # imported here: concurrent.futures (and logging) cost ~3 ms at startup
            from concurrent.futures import ThreadPoolExecutor
            _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kdsl-cpu")
        return _pool


def _pool_launch(chunk_addr, data, nthreads):
    """Run chunks 1..n-1 on the pool and chunk 0 here; every chunk call releases the GIL."""
    chunk = CHUNK_FN(chunk_addr)
    futures = [_get_pool(nthreads - 1).submit(chunk, data, t, nthreads) for t in range(1, nthreads)]
    chunk(data, 0, nthreads)
    for f in futures:
        f.result()


_POOL_LAUNCH = LAUNCH_FN(_pool_launch)   # kept alive for the life of the process


def pool_launcher() -> int:
    """Address of the thread-pool launcher (a ctypes callback)."""
    return ctypes.cast(_POOL_LAUNCH, ctypes.c_void_p).value


# ----------------------------------------------------------------- selection
def runtime_table(mode: str = "auto", nthreads: int | None = None) -> RuntimeTable:
    """A runtime table: ``mode`` "omp", "pool" or "auto" (omp where libgomp loads);
    ``nthreads`` defaults to ``KDSL_NUM_THREADS`` (all cores)."""
    if nthreads is None:
        nthreads = config.num_threads()
    addr = None
    if mode in ("auto", "omp"):
        addr = omp_launcher()
        if addr is None and mode == "omp":
            raise RuntimeError("libgomp.so.1 is not available; use threading='pool'")
    if addr is None:
        addr = pool_launcher()
    return RuntimeTable(addr, max(1, int(nthreads)))


__all__ = ["RuntimeTable", "runtime_table", "omp_launcher", "pool_launcher"]
