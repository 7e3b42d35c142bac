"""Running outlined parallel loops: kdsl's own workers, the OpenMP runtime, or a thread pool.

Kernel code calls ``runtime.launch(chunk, data, nthreads)`` through the
runtime table ``{ptr launch, i64 nthreads}`` passed to the entry function;
``chunk(data, b, blocks)`` runs block ``b`` of ``blocks`` static blocks of the loop (a block
past the loop's end is empty).  Every launcher cuts a launch on ``n`` threads into
``block_count(n)`` blocks that the threads claim one at a time, so that a thread that starts
late runs fewer of them.  The same object code works with any launcher:

- ``workers`` (the default where supported): kdsl_cpu.workers, detached pthreads and a
  compare-and-swap block counter; the caller never waits for a worker that has not started;
- ``omp``: a tiny LLVM module (built once per process) whose launcher calls
  ``GOMP_parallel`` of ``libgomp.so.1`` (loaded by soname) with a trampoline
  that claims blocks (an atomic counter); GOMP's closing barrier still waits for every
  thread of the team to arrive;
- ``pool``: a ctypes callback that runs the blocks on a Python thread pool,
  each chunk called through ctypes, i.e. with the GIL released; tasks that have not
  started when the caller runs out of blocks are cancelled.

Playing well with other threads in the process and on the machine:

- kdsl's own workers poll for a few tens of microseconds after a loop, then sleep on a
  futex (kdsl_cpu.workers);
- idle OpenMP workers sleep: libgomp reads ``OMP_WAIT_POLICY`` once, when it
  is loaded, and by default spins for a while after every parallel loop,
  stealing the cores of other processes and of other libraries' workers
  (numpy's OpenBLAS, a ``multiprocessing`` pool).  kdsl loads it with
  ``OMP_WAIT_POLICY=PASSIVE`` in the environment for the duration of the load
  only, unless the user set ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` (then
  theirs applies).  Where another library loaded libgomp first, kdsl shares
  that runtime as it is (one OpenMP runtime per process; ``wait_policy()``
  says which case holds);
- a forked child cannot use the OpenMP team its parent started (libgomp
  hangs), so after ``fork`` every OpenMP runtime table of the child switches to the
  thread pool, and so do tables made later in the child (kdsl's own workers restart in
  the child by themselves);
- the thread count is not compiled in: kernel code reads ``nthreads`` from its
  table at every call, and kernels without a count of their own share one
  process-wide table per launcher whose count follows ``kd.set_num_threads`` >
  ``KDSL_NUM_THREADS`` > ``OMP_NUM_THREADS`` > the usable cores (kdsl.threads);
  kernel code runs small loops on fewer threads (kdsl_cpu/codegen/stmt.py).
"""
from __future__ import annotations

import ctypes
import itertools
import os
import threading
import weakref

from kdsl import threads

from . import jit, workers

CHUNK_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
LAUNCH_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


class RuntimeTable(ctypes.Structure):
    """What kernel code reads through its ``runtime`` argument (layout fixed by codegen)."""

    _fields_ = [("launch", ctypes.c_void_p), ("nthreads", ctypes.c_int64)]


# ----------------------------------------------------------------- OpenMP
_GOMP = "libgomp.so.1"
#: variables through which a user chooses libgomp's wait policy (kdsl then leaves it alone)
USER_POLICY_VARS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
_gomp = None            # the loaded library, False where it cannot be loaded
_policy = None          # wait_policy()'s answer once libgomp is loaded
_forked_gomp = False    # this process is a fork of one that had libgomp: its team is unusable


def _gomp_in_process() -> bool:
    """Whether libgomp is already mapped into this process (some library loaded it).

    Reads /proc/self/maps (a plain file read, safe in a freshly forked child, where dlopen
    might wait on a loader lock held by a thread that did not survive the fork)."""
    try:
        with open("/proc/self/maps", "rb") as f:
            return b"/libgomp.so.1" in f.read()   # not a vendored libgomp-<hash>.so.1
    except OSError:
        try:   # no procfs: ask the loader without loading
            ctypes.CDLL(_GOMP, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
            return True
        except (OSError, AttributeError):
            return False


def _load_gomp():
    """libgomp, loaded with a passive wait policy unless the user chose one (see the module
    docstring); returns (library or None, policy)."""
    if _gomp_in_process():
        policy = "inherited"
    elif any(os.environ.get(k, "").strip() for k in USER_POLICY_VARS):
        policy = "user"
    else:
        policy = "passive"
    try:
        if policy != "passive":
            return ctypes.CDLL(_GOMP), policy
        # libgomp reads its environment in a constructor that runs inside dlopen: set the
        # variable for that moment only, so that subprocesses and libraries loaded later
        # see the user's environment unchanged
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
        try:
            return ctypes.CDLL(_GOMP), policy
        finally:
            os.environ.pop("OMP_WAIT_POLICY", None)
    except OSError:
        return None, None


def _libgomp():
    """libgomp.so.1, or None where it cannot be loaded (or this is a fork of a process that
    used it: the parent's OpenMP team does not exist in the child, and libgomp would hang)."""
    global _gomp, _policy
    if _forked_gomp:
        return None
    if _gomp is None:
        with _omp_lock:
            if _gomp is None:
                lib, _policy = _load_gomp()
                _gomp = lib if lib is not None else False
    return _gomp or None


def wait_policy() -> str | None:
    """How idle OpenMP workers of kdsl's loops wait: "passive" (kdsl loaded libgomp with
    ``OMP_WAIT_POLICY=PASSIVE``), "user" (the user's ``OMP_WAIT_POLICY``/``GOMP_SPINCOUNT``
    applies), "inherited" (another library loaded libgomp first; its setting applies),
    "pool" (no usable libgomp: the thread pool, whose idle workers block), or None before
    the first parallel kernel is compiled."""
    if _forked_gomp or _gomp is False:
        return "pool"
    return _policy


#: blocks each launch is cut into per thread: the threads claim blocks one at a time (an
#: atomic counter), so a thread that starts late -- its core held by another library's spinning
#: workers (numpy's OpenBLAS, torch's OpenMP) or by another process -- takes fewer blocks and
#: the others, the caller included, run the rest instead of waiting for its static share;
#: uneven iterations (a GEMM's partial edge tiles) balance the same way
BLOCKS_PER_THREAD = 4


def block_count(nthreads: int) -> int:
    """How many blocks a launch on ``nthreads`` threads claims (``chunk(data, b, blocks)`` for
    each ``b``; a block past the loop's extent is empty): one per thread for one thread."""
    return nthreads if nthreads <= 1 else nthreads * BLOCKS_PER_THREAD


def _omp_module_ir() -> str:
    from llvmlite import ir    # only when the launcher is compiled (a miss of its disk entry)
    i32, i64, ptr, void = ir.IntType(32), ir.IntType(64), ir.PointerType(), ir.VoidType()
    m = ir.Module("kdsl_cpu_omp")
    gomp = ir.Function(m, ir.FunctionType(void, [ptr, ptr, i32, i32]), "GOMP_parallel")
    # declared (the launcher resolves them) though the dynamic trampoline no longer asks them
    ir.Function(m, ir.FunctionType(i32, []), "omp_get_thread_num")
    ir.Function(m, ir.FunctionType(i32, []), "omp_get_num_threads")
    chunk_ty = ir.FunctionType(void, [ptr, i64, i64])

    class _Ptr:   # call through a function pointer (see codegen.stmt._FnPtr)
        function_type = chunk_ty
        def __init__(self, p): self.p = p
        def __getattr__(self, k): return getattr(self.p, k)

    # trampoline(ctx): ctx = {chunk, data, next block, blocks}; claim blocks until none is left
    tr = ir.Function(m, ir.FunctionType(void, [ptr]), "kdsl_omp_trampoline")
    entry, loop, body, done = (tr.append_basic_block(x) for x in ("entry", "loop", "body", "done"))
    b = ir.IRBuilder(entry)
    ctx = tr.args[0]
    chunk = b.load(ctx, typ=ptr)
    data = b.load(b.gep(ctx, [i64(1)], source_etype=ptr), typ=ptr)
    nxt = b.gep(ctx, [i64(2)], source_etype=ptr)
    nblocks = b.load(b.gep(ctx, [i64(3)], source_etype=ptr), typ=i64)
    b.branch(loop)
    b.position_at_end(loop)
    blk = b.atomic_rmw("add", nxt, i64(1), "monotonic")
    b.cbranch(b.icmp_signed("<", blk, nblocks), body, done)
    b.position_at_end(body)
    b.call(_Ptr(chunk), [data, blk, nblocks])
    b.branch(loop)
    b.position_at_end(done)
    b.ret_void()
    # launch(chunk, data, nthreads): nthreads * BLOCKS_PER_THREAD blocks on nthreads threads
    ln = ir.Function(m, ir.FunctionType(void, [ptr, ptr, i64]), "kdsl_omp_launch")
    b = ir.IRBuilder(ln.append_basic_block("entry"))
    ctx = b.alloca(ptr, size=i64(4))     # four 8-byte slots (pointers and i64s)
    b.store(ln.args[0], ctx)
    b.store(ln.args[1], b.gep(ctx, [i64(1)], source_etype=ptr))
    b.store(i64(0), b.gep(ctx, [i64(2)], source_etype=ptr))
    b.store(b.mul(ln.args[2], i64(BLOCKS_PER_THREAD)), b.gep(ctx, [i64(3)], source_etype=ptr))
    b.call(gomp, [tr, ctx, b.trunc(ln.args[2], i32), i32(0)])
    b.ret_void()
    return str(m)


_omp_lock = threading.RLock()
_omp_code = None


def omp_launcher() -> int | None:
    """Address of the GOMP-based launcher, or None where libgomp is missing."""
    global _omp_code
    gomp = _libgomp()
    if gomp is None:
        return None
    with _omp_lock:
        if _omp_code is None:
            syms = {sym: ctypes.cast(getattr(gomp, sym), ctypes.c_void_p).value
                    for sym in ("GOMP_parallel", "omp_get_thread_num", "omp_get_num_threads")}
            _omp_code = _omp_object(lambda obj: jit.load_object(obj, "kdsl_omp_launch", syms))
        return _omp_code.address


def omp_cache_key() -> str:
    """The disk-cache key of the OpenMP launcher's object code: the host and toolchain
    (``jit.host_id``) and this package's source (``_omp_module_ir`` lives here), so that a warm
    process finds it without importing LLVM or building the module's IR."""
    from kdsl.runtime import cache as disk
    from kdsl.runtime.fingerprint import source_fingerprint
    return disk.cache_key("kdsl_omp_launch", "cpu-omp-runtime",
                          {"host": jit.host_id(), "glue": "O0",
                           "source": source_fingerprint(os.path.dirname(__file__))})


def _omp_object(load):
    """``load(object code)`` of the OpenMP launcher module, through the disk cache like kernels
    (an entry that fails to load is discarded and rebuilt: ``DiskCache.fetch``)."""
    from kdsl.runtime import cache as disk
    store = disk.DiskCache()
    # a few calls, no loops: optimising would only cost time
    return store.fetch(omp_cache_key(), lambda: jit.compile_glue(_omp_module_ir()), load,
                       what="the OpenMP launcher")[0]


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
    """Run the blocks on the calling thread and up to ``nthreads - 1`` pool threads, each
    claiming the next block; every chunk call releases the GIL.  Workers that have not
    started once the caller ran out of blocks are cancelled, never waited for."""
    chunk = CHUNK_FN(chunk_addr)
    nblocks = block_count(nthreads)
    claim = itertools.count().__next__     # one C call: atomic under the GIL

    def work():
        while (blk := claim()) < nblocks:
            chunk(data, blk, nblocks)
    futures = [_get_pool(nthreads - 1).submit(work) for _ in range(1, nthreads)]
    work()
    for f in futures:
        if not f.cancel():
            f.result()


_POOL_LAUNCH = LAUNCH_FN(_pool_launch)   # kept alive for the life of the process


def workers_launcher() -> int | None:
    """Address of the launcher on kdsl's own worker threads (kdsl_cpu.workers: never waits for
    a thread that has not started), or None where the platform lacks it."""
    return workers.launcher(BLOCKS_PER_THREAD)


def launcher_kind(mode: str = "auto") -> str:
    """Which launcher ``runtime_table(mode)`` uses now: "workers", "omp" or "pool"."""
    addr = runtime_table(mode).launch
    return ("workers" if addr == workers_launcher() else
            "omp" if _omp_code is not None and addr == _omp_code.address else "pool")


def pool_launcher() -> int:
    """Address of the thread-pool launcher (a ctypes callback)."""
    return ctypes.cast(_POOL_LAUNCH, ctypes.c_void_p).value


# ----------------------------------------------------------------- selection
#: every table handed out, by id (ctypes structures are not hashable)
_tables: "weakref.WeakValueDictionary[int, RuntimeTable]" = weakref.WeakValueDictionary()


#: the process-wide tables, by launcher address: every kernel without a count of its own
#: shares one, and ``_set_shared`` rewrites their ``nthreads`` when kdsl.threads' count changes
_shared: dict[int, RuntimeTable] = {}


def _set_shared(n: int) -> None:
    """kdsl.threads listener: the next call of every kernel sharing a table runs ``n`` threads."""
    for table in list(_shared.values()):
        table.nthreads = n


def runtime_table(mode: str = "auto", nthreads: int | None = None) -> RuntimeTable:
    """A runtime table: ``mode`` "workers" (kdsl's own threads, kdsl_cpu.workers), "omp",
    "pool" or "auto" (workers where the platform has them, else omp where libgomp loads, else
    the pool).

    ``nthreads`` None: the process-wide table of that launcher, whose count follows
    ``kd.set_num_threads`` / ``KDSL_NUM_THREADS`` / ``OMP_NUM_THREADS`` / the usable cores at
    every call (kdsl.threads); an int: a table of its own with that fixed count."""
    addr = None
    if mode in ("auto", "workers"):
        addr = workers_launcher()
    if addr is None and mode in ("auto", "omp"):
        addr = omp_launcher()
        if addr is None and mode == "omp" and not _forked_gomp:
            raise RuntimeError("libgomp.so.1 is not available; use threading='pool'")
    if addr is None:
        addr = pool_launcher()
    if nthreads is None:
        count = threads.refresh()      # re-reads the environment (errors name the variable)
        with _pool_lock:
            table = _shared.get(addr)
            if table is None:
                table = _shared[addr] = RuntimeTable(addr, count)
                _tables[id(table)] = table
        table.nthreads = threads.resolve()
        return table
    table = RuntimeTable(addr, max(1, int(nthreads)))
    _tables[id(table)] = table
    return table


def _after_fork_in_child() -> None:
    """A forked child has only the forking thread: the parent's OpenMP team and pool threads
    are gone (libgomp would wait for them forever), and a lock held by one of them at the
    fork would stay held.  Start over with fresh locks and the thread pool."""
    global _forked_gomp, _pool, _pool_lock, _omp_lock
    _pool_lock, _omp_lock, _pool = threading.Lock(), threading.RLock(), None
    if _gomp or _gomp_in_process():
        _forked_gomp = True
        pool = pool_launcher()
        omp = _omp_code.address if _omp_code is not None else None
        for table in list(_tables.values()):
            if table.launch == omp:    # kdsl's own workers restart by themselves (a new pid)
                table.launch = pool


threads.on_change(_set_shared)
from . import threadpool  # noqa: E402  (threadpoolctl sees and limits the count: optional)
threadpool.install()

if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


__all__ = ["RuntimeTable", "runtime_table", "omp_launcher", "pool_launcher", "workers_launcher",
           "launcher_kind", "block_count", "BLOCKS_PER_THREAD", "wait_policy",
           "USER_POLICY_VARS"]
