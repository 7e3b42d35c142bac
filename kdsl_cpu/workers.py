"""kdsl's own worker threads: a launcher that never waits for a thread that has not started.

OpenMP's ``GOMP_parallel`` ends with a barrier: the calling thread waits until every thread of
the team has run its share, so when one worker's core is held by another library's spinning
threads (numpy's OpenBLAS, torch's OpenMP) or by other processes, the call waits for the
scheduler to give that worker a time slice -- measured on a shared 2-core machine: 24 ms for
a 128^3 matmul whose quiet time is 0.1 ms (benchmarks/cpu_neighbours.py).

This launcher (a small LLVM module built once per process, like the OpenMP one) keeps a few
detached pthreads and runs a loop as ``block_count(n)`` blocks that the caller and the workers
claim one at a time (a compare-and-swap on ``generation << 32 | next block``).  The caller runs
blocks until none is left and then waits only for the blocks that workers *started*; a worker
that wakes late finds nothing to do.  So a call costs at most about what the calling thread
alone would take, plus the blocks in flight.

- idle workers poll ~1000 times (tens of microseconds: back-to-back kernels find them awake),
  then sleep on a futex -- they never hold a core for long after a call;
- a call made while another thread's call is running (kernels called from several threads)
  runs on its calling thread alone, never blocking;
- a worker that cannot be created (a thread limit) only means fewer threads; after ``fork``
  the child has none of the parent's workers: the launcher sees a new process id and starts
  its own.

x86-64 and AArch64 Linux (the futex system call); elsewhere ``launcher()`` is None.
"""
from __future__ import annotations

import ctypes
import os
import platform
import sys
import threading

from . import jit

_FUTEX = {"x86_64": 202, "aarch64": 98, "arm64": 98}
#: the spin-loop hint between two polls (it also leaves the core's other hyperthread alone)
_RELAX = {"x86_64": "pause", "aarch64": "yield", "arm64": "yield"}
#: polls of the launch counter before an idle worker sleeps on the futex (with ``pause``:
#: 40-140 cycles each, i.e. ~15-50 us in all)
SPIN_POLLS = 1000
#: polls of the done counter before the waiting caller starts yielding its core
WAIT_POLLS = 1000

_IR = r"""
@state = internal global i64 0
@job_chunk = internal global ptr null
@job_data = internal global ptr null
@job_nb = internal global i64 0
@job_nt = internal global i64 0
@done = internal global i64 0
@seq = internal global i32 0
@busy = internal global i32 0
@nworkers = internal global i64 0
@pid = internal global i32 0

declare i32 @pthread_create(ptr, ptr, ptr, ptr)
declare i32 @pthread_detach(i64)
declare i64 @syscall(i64, ...)
declare i32 @sched_yield()
declare i32 @getpid()

; run blocks of the current job until none is left
define internal void @claim() {
entry:
  br label %loop
loop:
  %w = load atomic i64, ptr @state seq_cst, align 8
  %k = and i64 %w, 4294967295
  %nb = load atomic i64, ptr @job_nb seq_cst, align 8
  %chunk = load atomic ptr, ptr @job_chunk seq_cst, align 8
  %data = load atomic ptr, ptr @job_data seq_cst, align 8
  %more = icmp ult i64 %k, %nb
  br i1 %more, label %try, label %out
try:
  %w1 = add i64 %w, 1
  %r = cmpxchg ptr @state, i64 %w, i64 %w1 seq_cst seq_cst
  %ok = extractvalue { i64, i1 } %r, 1
  br i1 %ok, label %run, label %loop
run:
  call void %chunk(ptr %data, i64 %k, i64 %nb)
  %d = atomicrmw add ptr @done, i64 1 seq_cst
  br label %loop
out:
  ret void
}

define internal ptr @worker(ptr %arg) {
entry:
  %id = ptrtoint ptr %arg to i64
  %seen = alloca i32
  %polls = alloca i64
  %s0 = load atomic i32, ptr @seq seq_cst, align 4
  store i32 %s0, ptr %seen
  br label %wait
wait:
  store i64 0, ptr %polls
  br label %poll
poll:
  %s = load atomic i32, ptr @seq seq_cst, align 4
  %old = load i32, ptr %seen
  %changed = icmp ne i32 %s, %old
  br i1 %changed, label %work, label %idle
idle:
  call void asm sideeffect "RELAX", ""()
  %p = load i64, ptr %polls
  %p1 = add i64 %p, 1
  store i64 %p1, ptr %polls
  %long = icmp ugt i64 %p1, SPIN_POLLS
  br i1 %long, label %sleep, label %poll
sleep:
  %f = call i64 (i64, ...) @syscall(i64 FUTEX, ptr @seq, i64 128, i32 %old, ptr null)
  br label %poll
work:
  store i32 %s, ptr %seen
  %nt = load atomic i64, ptr @job_nt seq_cst, align 8
  %id1 = add i64 %id, 1
  %mine = icmp slt i64 %id1, %nt
  br i1 %mine, label %do, label %wait
do:
  call void @claim()
  br label %wait
}

define void @kdsl_pool_launch(ptr %chunk, ptr %data, i64 %n) {
entry:
  %tid = alloca i64
  %polls = alloca i64
  ; a forked child has none of its parent's workers (nor its call in flight): start afresh
  %me = call i32 @getpid()
  %was = load atomic i32, ptr @pid seq_cst, align 4
  %forked = icmp ne i32 %me, %was
  br i1 %forked, label %reset, label %lock
reset:
  store atomic i64 0, ptr @nworkers seq_cst, align 8
  store atomic i32 0, ptr @busy seq_cst, align 4
  store atomic i32 %me, ptr @pid seq_cst, align 4
  br label %lock
lock:
  %r = cmpxchg ptr @busy, i32 0, i32 1 seq_cst seq_cst
  %ok = extractvalue { i32, i1 } %r, 1
  br i1 %ok, label %spawn, label %inline
inline:
  call void %chunk(ptr %data, i64 0, i64 1)
  ret void
spawn:
  %have = load atomic i64, ptr @nworkers seq_cst, align 8
  %want = sub i64 %n, 1
  %short = icmp slt i64 %have, %want
  br i1 %short, label %create, label %go
create:
  %arg = inttoptr i64 %have to ptr
  %rc = call i32 @pthread_create(ptr %tid, ptr null, ptr @worker, ptr %arg)
  %failed = icmp ne i32 %rc, 0
  br i1 %failed, label %go, label %created
created:
  %t = load i64, ptr %tid
  %dr = call i32 @pthread_detach(i64 %t)
  %have1 = add i64 %have, 1
  store atomic i64 %have1, ptr @nworkers seq_cst, align 8
  br label %spawn
go:
  %w = load atomic i64, ptr @state seq_cst, align 8
  %g = lshr i64 %w, 32
  %g1 = add i64 %g, 1
  %gen = shl i64 %g1, 32
  %closed = or i64 %gen, 4294967295
  store atomic i64 %closed, ptr @state seq_cst, align 8
  %nb = mul i64 %n, BLOCKS
  store atomic ptr %chunk, ptr @job_chunk seq_cst, align 8
  store atomic ptr %data, ptr @job_data seq_cst, align 8
  store atomic i64 %nb, ptr @job_nb seq_cst, align 8
  store atomic i64 %n, ptr @job_nt seq_cst, align 8
  store atomic i64 0, ptr @done seq_cst, align 8
  store atomic i64 %gen, ptr @state seq_cst, align 8
  %sq = atomicrmw add ptr @seq, i32 1 seq_cst
  %f = call i64 (i64, ...) @syscall(i64 FUTEX, ptr @seq, i64 129, i64 %want)
  call void @claim()
  store i64 0, ptr %polls
  br label %check
check:
  %d = load atomic i64, ptr @done seq_cst, align 8
  %left = icmp ult i64 %d, %nb
  br i1 %left, label %waiting, label %finish
waiting:
  call void asm sideeffect "RELAX", ""()
  %p = load i64, ptr %polls
  %p1 = add i64 %p, 1
  store i64 %p1, ptr %polls
  %long = icmp ugt i64 %p1, WAIT_POLLS
  br i1 %long, label %yield, label %check
yield:
  %y = call i32 @sched_yield()
  br label %check
finish:
  store atomic i32 0, ptr @busy seq_cst, align 4
  ret void
}

"""

_lock = threading.Lock()
_code = None          # the loaded module, False where it is not available here
_LIBC_SYMS = ("pthread_create", "pthread_detach", "syscall", "sched_yield", "getpid")


def supported() -> bool:
    """Whether this platform has the futex system call the workers sleep on."""
    return sys.platform.startswith("linux") and platform.machine() in _FUTEX


def module_ir(blocks_per_thread: int) -> str:
    """The launcher module's LLVM IR for this machine."""
    arch = platform.machine()
    return (_IR.replace("FUTEX", str(_FUTEX[arch])).replace("RELAX", _RELAX[arch])
            .replace("SPIN_POLLS", str(SPIN_POLLS)).replace("WAIT_POLLS", str(WAIT_POLLS))
            .replace("BLOCKS", str(blocks_per_thread)))


def _load(blocks_per_thread: int):
    from kdsl.runtime import cache as disk
    from kdsl.runtime.fingerprint import source_fingerprint
    libc = ctypes.CDLL(None)
    syms = {s: ctypes.cast(getattr(libc, s), ctypes.c_void_p).value for s in _LIBC_SYMS}
    key = disk.cache_key("kdsl_pool_launch", "cpu-pool-runtime",
                         {"host": jit.host_id(), "glue": "O0", "blocks": blocks_per_thread,
                          "source": source_fingerprint(os.path.dirname(__file__))})
    code = disk.DiskCache().fetch(
        key, lambda: jit.compile_glue(module_ir(blocks_per_thread)),
        lambda obj: jit.load_object(obj, "kdsl_pool_launch", syms),
        what="the worker-thread launcher")[0]
    return code


def launcher(blocks_per_thread: int) -> int | None:
    """Address of ``kdsl_pool_launch(chunk, data, nthreads)``, or None where unsupported."""
    global _code
    if _code is None:
        with _lock:
            if _code is None:
                try:
                    _code = _load(blocks_per_thread) if supported() else False
                except Exception as e:   # no native launcher: the caller falls back, loudly
                    _code = False
                    _fallback_warning(e)
    return _code.address if _code else None


def _fallback_warning(e: Exception) -> None:
    """Say once per process that the worker threads could not be built (parallel loops then
    run on OpenMP's threads, whose end barrier waits for busy cores) and why."""
    import warnings
    warnings.warn(f"kdsl: its worker threads could not be built here ({type(e).__name__}: {e}); "
                  "parallel loops run on OpenMP threads instead (correct, but slower next to "
                  "other busy thread pools). Please report this with the message.",
                  RuntimeWarning, stacklevel=2)


__all__ = ["launcher", "supported", "module_ir"]
