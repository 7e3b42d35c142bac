"""The SIMT executor: runs a ``LoweredFunc`` as a GPU would, checking GPU rules as it goes.

A *kernel* is an outermost loop bound to a ``blockIdx`` tag (or a ``threadIdx`` loop under
no block loop: a kernel of one block).  Code outside kernels is host code, run by one
thread.  Inside a kernel, blocks run one after another (each iteration of a block loop is
a new block, in order or shuffled); the threads of a block run together, every value being
a numpy vector over them (evaluated by ``numpy_eval.ExprEval``, so arithmetic means what
it means in the numpy backend and the sequential interpreter).  Control flow is masks:
a ``threadIdx`` loop binds its variable to the thread indices and keeps the threads below
its extent (one nested in another of its tag too: the same index); statements outside thread loops run on every thread (CUDA semantics); ``if``
splits the mask; a serial loop whose bounds differ between threads runs to the largest
extent under a mask; vthread loops run serially (each thread does every virtual thread).

Memory: global = the call's arrays (and host temporaries); shared, and global temporaries
allocated inside a kernel, = one array per block, kept across re-allocation within the
block (GPU memory does not move between loop iterations); local = one array per thread.

Checked (as ``races.SimtError``s naming the kernel, block, buffer, statements and threads):
every access in bounds; no element of a shared buffer read by one thread after another
thread wrote it, or written after another thread read or wrote it, since the last barrier
(within one statement too: its loads happen before its store); no element of a block's
shared buffer (or global temporary) read before some thread of the block wrote it; the same
race rules for the global
buffers kernels write (outputs, workspaces) between the threads of a block, and between
blocks for the whole kernel (blocks never synchronise: an element one block wrote may not be
read or written by another block of the same kernel); every barrier reached by all threads
of the block or by none; a launch's shared memory per block (static buffers plus dynamic
ones sized by the call's shapes) within the modelled device's limit (227 KB).
"""
from __future__ import annotations

import numpy as np

from ...errors import InternalCompilerError
from ...ir import nodes as n
from ...ir.printer import StmtPrinter, named_objects
from ...ir.shared_memory import LIMIT as SHARED_LIMIT, shared_layout, too_much_shared
from ...ir.visitor import collect, free_vars
from ...numerics import pyexec_rt as rt
from ...numerics.numpy_eval import ExprEval, internal_np
from . import wmma
from .cross_thread import cross_thread_reduce
from .races import BarrierDivergence, RaceError, Shadow, SimtOutOfBounds, UninitializedRead, _Mem
from . import async_copy, async_mma

_AXIS = {n.ThreadTag.THREAD_X: 0, n.ThreadTag.THREAD_Y: 1, n.ThreadTag.THREAD_Z: 2,
         n.ThreadTag.BLOCK_X: 0, n.ThreadTag.BLOCK_Y: 1, n.ThreadTag.BLOCK_Z: 2}


class _Eval(ExprEval):
    """``ExprEval`` plus ``Load`` (vector gathers through the executor)."""

    def __init__(self, ex: "Executor"):
        super().__init__(ex.env, {})
        self._table[n.Load] = ex.load
        self._table[n.Const] = self._const_cached
        self._consts: dict = {}

    def _const_cached(self, e):
        """Constants evaluated once (their value does not depend on the threads)."""
        v = self._consts.get(e)
        if v is None:
            v = self._consts[e] = self._const(e)
        return v


class Executor:
    """Runs one LoweredFunc under SIMT semantics (see the module docstring)."""

    def __init__(self, func: n.LoweredFunc, block_order=None):
        self.func = func
        self.block_order = block_order     # None: in order; a numpy Generator: shuffled
        self.env: dict = {}
        self.ev = _Eval(self)
        self.mem: dict = {}                # Buffer -> _Mem, while allocated
        self.block_mem: dict = {}          # Buffer -> _Mem of this block's shared buffers
        self.frags: dict = {}              # fragment Buffer -> _Mem, one array per warp (simt.wmma)
        self.global_mem: list = []         # outputs and workspaces: race-checked in kernels
        self._stmt_ids: dict = {}
        self._stmts: list = []
        self._kernels: dict = {}
        self._layouts: dict = {}           # id(DeviceKernel) -> its SharedLayout
        self._printer = None
        self.cur = -1                      # id of the statement being executed
        self.thread_ext = [1, 1, 1]        # extent of the enclosing loop per threadIdx axis
        self._host()
        self._table = {
            n.For: self._for, n.IfThenElse: self._if, n.Store: self._store,
            n.Allocate: self._allocate, n.LetStmt: self._let, n.Seq: self._seq,
            n.Barrier: self._barrier, n.Evaluate: self._evaluate, n.Intrinsic: self._intrinsic,
            n.DeviceKernel: self._device_kernel,
            **async_copy.handlers(self),
            **async_mma.handlers(self),
            **{t: self._wmma for t in n.WMMA_STMTS},
            n.CrossThreadReduce: lambda s: cross_thread_reduce(self, s),
        }

    # ------------------------------------------------------------- thread state
    def _host(self):
        self.kernel = None
        self.async_mma = False          # (kernels set it: async_mma.enabled)
        self.dims = (1, 1, 1)
        self.T = 1
        self.tid = np.zeros(1, np.int64)
        self.comp = [self.tid] * 3
        self.block = [0, 0, 0]
        self.bound: set = set()            # thread tags bound by enclosing loops
        self._set_mask(np.ones(1, bool))

    def _set_mask(self, mask):
        self.mask = mask
        self.lanes = np.flatnonzero(mask)

    def thread(self, t: int) -> tuple:
        """Thread ``t`` of the block as (x, y, z)."""
        x, y, _ = self.dims
        t = int(t)
        return (t % x, t // x % y, t // (x * y))

    # ------------------------------------------------------------- statements
    def run(self, s: n.Stmt):
        if self.lanes.size == 0:
            return
        fn = self._table.get(type(s))
        if fn is None:
            raise InternalCompilerError(f"the SIMT executor cannot execute a {type(s).__name__}")
        if type(s) is not n.Seq:
            sid = self._stmt_ids.get(id(s))
            if sid is None:
                sid = self._stmt_ids[id(s)] = len(self._stmts)
                self._stmts.append(s)
            self.cur = sid
        fn(s)

    def _seq(self, s):
        for x in s.stmts:
            self.run(x)

    def _uniform(self, e, what: str) -> int:
        """``e``'s value, the same on every active thread."""
        v = np.asarray(self.ev(e))
        if v.ndim:
            v = v[self.lanes]
            if v.size and np.any(v != v[0]):
                raise InternalCompilerError(f"kernel {self.kernel!r}: {what} differs between the "
                                            f"threads of a block")
            v = v[0]
        return int(v)

    def _for(self, s: n.For):
        tag = s.thread
        if tag is not None and (tag.is_block or tag.is_thread) and self.kernel is None:
            return self._kernel(s)
        if tag is not None and tag.is_block:
            return self._block_loop(s)
        if tag is not None and tag.is_thread:
            return self._thread_loop(s)
        lo, ext = self.ev(s.min), self.ev(s.extent)
        if np.ndim(lo) == 0 and np.ndim(ext) == 0:
            lo, ext = int(lo), int(ext)
            for i in range(lo, lo + ext):
                self.env[s.var] = i
                self.run(s.body)
        else:   # bounds that differ between threads: to the largest extent, under a mask
            lo = np.broadcast_to(lo, (self.T,)).astype(np.int64)
            ext = np.broadcast_to(ext, (self.T,)).astype(np.int64)
            outer = self.mask
            top = int(ext[self.lanes].max()) if self.lanes.size else 0
            for i in range(max(top, 0)):
                self.env[s.var] = lo + i
                self._set_mask(outer & (i < ext))
                self.run(s.body)
            self._set_mask(outer)
        self.env.pop(s.var, None)

    def _block_loop(self, s: n.For):
        if self.bound:
            raise InternalCompilerError(f"kernel {self.kernel!r}: a {s.thread.value} loop inside "
                                        f"a thread loop")
        lo, ext = self._uniform(s.min, "a block loop's start"), self._uniform(s.extent, "a block extent")
        order = np.arange(ext)
        if self.block_order is not None:
            order = self.block_order.permutation(ext)
        axis = _AXIS[s.thread]
        for i in order:
            self.env[s.var] = lo + int(i)
            self.block[axis] = int(i)
            self.block_mem = {}            # a new block: fresh shared memory
            for m in self.global_mem:      # other blocks' accesses: in ``m.blocks``
                m.shadow.reset()
            self.run(s.body)
            async_copy.check_block_end(self)
            async_mma.check_block_end(self)
        self.env.pop(s.var, None)

    def _thread_loop(self, s: n.For):
        # a thread loop inside another of the same tag is the same hardware index (GPU_PLAN's
        # execution model): it binds its variable to the same thread indices, under its extent
        nested = s.thread in self.bound
        lo, ext = self._uniform(s.min, "a thread loop's start"), self._uniform(s.extent, "a thread extent")
        comp = self.comp[_AXIS[s.thread]]
        self.thread_ext[_AXIS[s.thread]] = ext
        outer = self.mask
        self.env[s.var] = comp + lo
        self.bound.add(s.thread)
        self._set_mask(outer & (comp < ext))
        self.run(s.body)
        self._set_mask(outer)
        if not nested:
            self.bound.discard(s.thread)
        del self.env[s.var]

    def _kernel(self, s: n.For):
        """Enter a kernel at its outermost bound loop: size the blocks, run, back to host."""
        dims = [1, 1, 1]
        for f in collect(s, lambda x: isinstance(x, n.For) and x.thread is not None
                         and x.thread.is_thread):
            missing = [v.name for v in free_vars(f.extent) if v not in self.env]
            if missing:
                raise InternalCompilerError(f"kernel of {self.func.name!r}: the extent of a "
                                            f"{f.thread.value} loop depends on {missing} (block "
                                            f"sizes must be known at launch)")
            ext = self._uniform(f.extent, "a thread extent")
            axis = _AXIS[f.thread]
            dims[axis] = max(dims[axis], ext)
        if wmma.has_wmma(s):               # warps of 32 lanes along threadIdx.x
            dims = wmma.kernel_dims(self, s, dims)
        k = self._kernels.setdefault(id(s), len(self._kernels))
        self._launch(f"{self.func.name}.kernel{k}", dims, s)

    def _device_kernel(self, s: n.DeviceKernel):
        """A ``DeviceKernel`` (GPU-form IR): its launch sizes the block, its body runs on it."""
        if self.kernel is not None:
            raise InternalCompilerError(f"kernel {s.name!r} inside kernel {self.kernel!r}")
        self._check_shared(s)
        self._launch(s.name, [int(b) for b in s.launch.block], s.body)

    def _check_shared(self, s: n.DeviceKernel):
        """Refuse a launch whose shared memory per block (static buffers plus the dynamic ones
        sized for this call) exceeds what the modelled device allows (``shared_memory.LIMIT``)."""
        layout = self._layouts.get(id(s))
        if layout is None:
            layout = self._layouts[id(s)] = shared_layout(s.body)
        total = layout.static_bytes
        if layout.dynamic_bytes is not None:
            total += int(self._uniform(layout.dynamic_bytes, "the dynamic shared memory size"))
        if total > SHARED_LIMIT:
            raise too_much_shared(s.name, total, SHARED_LIMIT,
                                  [b for b, _ in layout.static] + [b for b, _ in layout.dynamic])

    def _launch(self, name: str, dims, s):
        """Run ``s`` as kernel ``name`` on blocks of ``dims`` threads, then back to host code."""
        self.kernel = name
        self.dims = tuple(dims)
        self.T = dims[0] * dims[1] * dims[2]
        self.tid = np.arange(self.T, dtype=np.int64)
        self.comp = [self.tid % dims[0], self.tid // dims[0] % dims[1], self.tid // (dims[0] * dims[1])]
        self.block = [0, 0, 0]
        self.block_mem = {}
        self.async_mma = async_mma.enabled(s)       # tensor-core products in flight past issue
        self._set_mask(np.ones(self.T, bool))
        for m in self.global_mem:          # a new kernel: the previous one has completed
            m.shadow.reset()
            m.blocks.reset()
        try:
            self.run(s)
        finally:
            self._host()

    def _if(self, s: n.IfThenElse):
        c = np.broadcast_to(np.asarray(self.ev(s.cond), bool), (self.T,))
        outer = self.mask
        self._set_mask(outer & c)
        self.run(s.then)
        if s.otherwise is not None:
            self._set_mask(outer & ~c)
            self.run(s.otherwise)
        self._set_mask(outer)

    def _let(self, s: n.LetStmt):
        self.env[s.var] = self.ev(s.value)
        self.run(s.body)
        del self.env[s.var]

    def _evaluate(self, s):
        self.ev(s.value)

    def _intrinsic(self, s):
        from ...schedule.intrin import BlockIntrinsic
        if s.args and isinstance(s.args[0], BlockIntrinsic):   # a backend's block routine
            s.args[0].simt(self, s)
            return
        raise NotImplementedError(f"the SIMT executor cannot execute the intrinsic {s.name!r} "
                                  f"of kernel {self.func.name!r}")

    def _wmma(self, s):
        wmma.run(self, s)

    def _barrier(self, s):
        if self.kernel is None:
            return
        if not self.mask.all():
            here = [self.thread(t) for t in self.lanes[:4]]
            away = [self.thread(t) for t in np.flatnonzero(~self.mask)[:4]]
            raise BarrierDivergence(
                f"kernel {self.kernel!r}, block {tuple(self.block)}: a barrier reached by threads "
                f"{_few(here, self.lanes.size)} and not by threads "
                f"{_few(away, self.T - self.lanes.size)}:\n    {self._line(self.cur)}", self.kernel)
        for m in self.block_mem.values():
            m.shadow.reset()
        for m in self.global_mem:          # a barrier orders the block's global accesses too
            m.shadow.reset()

    def _allocate(self, s: n.Allocate):
        b = s.buffer
        shape = tuple(self._uniform(x, f"the shape of {b.name!r}") for x in b.shape)
        if any(x < 0 for x in shape):
            raise InternalCompilerError(f"allocation of buffer {b.name!r} with negative shape {shape}")
        npd = rt.storage_np(b.dtype)
        if b.scope.is_fragment:            # one per warp, outside self.mem: wmma statements only
            prev = self.frags.get(b)
            self.frags[b] = wmma.alloc_fragment(self, b, shape)
            self.run(s.body)
            if prev is None:
                del self.frags[b]
            else:
                self.frags[b] = prev
            return
        if self.kernel is None and b.scope is n.Scope.GLOBAL:     # a workspace
            m = global_mem(rt.alloc(shape, npd, b.name))
            self.global_mem.append(m)
        elif self.kernel is None:
            m = _Mem(rt.alloc(shape, npd, b.name))
        elif b.scope is n.Scope.LOCAL:
            m = _Mem(rt.alloc((self.T,) + shape, npd, b.name), per_thread=True)
        else:   # shared (and a global temporary in a kernel): one per block, race-checked
            m = self.block_mem.get(b)
            if m is None or m.data.shape != shape:
                m = _Mem(rt.alloc(shape, npd, b.name), shadow=Shadow(int(np.prod(shape))))
                self.block_mem[b] = m
        prev = self.mem.get(b)
        self.mem[b] = m
        self.run(s.body)
        if m.blocks is not None:
            self.global_mem.remove(m)
        if prev is None:
            del self.mem[b]
        else:
            self.mem[b] = prev

    # ------------------------------------------------------------- memory
    def _access(self, b: n.Buffer, indices, what: str):
        """The live buffer and the active lanes' indices (checked in bounds)."""
        m = self.mem.get(b)
        if m is None:
            if b in self.frags:
                wmma.scalar_access(self, b, what)
            raise InternalCompilerError(f"{what} of buffer {b.name!r} outside its allocation "
                                        f"(kernel {self.func.name!r})")
        lanes = self.lanes
        full = lanes.size == self.T        # every thread active: no gathers by lane
        idx = []
        for e in indices:
            v = np.asarray(self.ev(e))
            if v.ndim == 0:
                idx.append(np.full(lanes.size, v, np.int64))
            else:
                idx.append((v if full else v[lanes]).astype(np.int64, copy=False))
        shape = m.data.shape[1:] if m.per_thread else m.data.shape
        for i, size in zip(idx, shape):
            if i.size and (i.min() < 0 or i.max() >= size):
                k = np.flatnonzero((i < 0) | (i >= size))[0]
                at = tuple(int(x[k]) for x in idx)
                raise SimtOutOfBounds(
                    f"{self._where()}: out-of-bounds {what} of {b.scope.value} buffer {b.name!r} "
                    f"(shape {shape}) at {at} by thread {self.thread(lanes[k])}:\n"
                    f"    {self._line(self.cur)}", self.kernel or self.func.name)
        return m, tuple(idx)

    def load(self, e: n.Load):
        b = e.buffer
        out = np.zeros(self.T, internal_np(b.dtype))
        if self.lanes.size == 0:
            return out
        if b.empty_reads and b in self.mem and self.mem[b].data.size == 0:
            return out      # a dead read of an empty array (Buffer.empty_reads): any value
        m, idx = self._access(b, e.indices, "load")
        lanes = self.lanes
        vals = m.data[(lanes,) + idx] if m.per_thread else m.data[idx] if idx else m.data[()]
        if m.shadow is not None and self.kernel is not None:
            async_copy.check_access(self, m, b, idx, "read")
            if m.blocks is None:           # the block's own buffer: written before it is read
                self._check_written(m, b, idx)
            self._check(m, b, idx, m.shadow.on_load)
            if m.blocks is not None:
                self._check(m, b, idx, m.blocks.on_load, across=True)
        if lanes.size == self.T:
            return np.broadcast_to(vals, (self.T,)).astype(out.dtype)
        out[lanes] = vals
        return out

    def _store(self, s: n.Store):
        b = s.buffer
        value = np.asarray(self.ev(s.value))       # its loads happen before the store
        m, idx = self._access(b, s.indices, "store")
        lanes = self.lanes
        vals = value[lanes] if value.ndim else value
        if m.shadow is not None and self.kernel is not None:
            async_copy.check_access(self, m, b, idx, "wrote")
            if self.async_mma:
                async_mma.check_write(self, m, b, np.ravel_multi_index(idx, m.data.shape) if idx else 0)
            self._check(m, b, idx, m.shadow.on_store)
            if m.blocks is not None:
                self._check(m, b, idx, m.blocks.on_store, across=True)
        if m.per_thread:
            m.data[(lanes,) + idx] = vals
        elif idx:
            m.data[idx] = vals
        else:
            m.data[()] = vals if np.ndim(vals) == 0 else vals[-1]

    def _check_written(self, m: _Mem, b: n.Buffer, idx):
        """Raise ``UninitializedRead`` where an active lane reads an element of a block-level
        buffer that no thread of the block has written (issue 24: a masked cooperative copy
        left part of a tile unwritten and the GPU read garbage)."""
        shape = m.data.shape
        flat = np.ravel_multi_index(idx, shape) if idx else np.zeros(self.lanes.size, np.int64)
        bad = m.shadow.unwritten(flat)
        if bad is None:
            return
        k = int(bad[0])
        element = tuple(int(x) for x in np.unravel_index(int(flat[k]), shape)) if shape else ()
        who = self.thread(self.lanes[k])
        raise UninitializedRead(
            f"{self._where()}: thread {who} read element {element} of {b.scope.value} buffer "
            f"{b.name!r}, which no thread of the block wrote:\n    {self._line(self.cur)}",
            self.kernel, b.name, element, who)

    def _check(self, m: _Mem, b: n.Buffer, idx, on, across=False):
        """Record one access in a shadow (``on``: its on_load/on_store), raising a RaceError on a
        conflict; ``across``: the shadow over blocks, whose ids stand for the threads."""
        shape = m.data.shape
        flat = (np.ravel_multi_index(idx, shape) if idx
                else np.zeros(self.lanes.size, np.int64))
        if across:
            who = np.full(self.lanes.size, _block_id(self.block), np.int64)
            if flat.size > 1:      # lanes of one block may share elements: one record each
                flat, first = np.unique(flat, return_index=True)
                who = who[first]
        else:
            who = self.lanes
        got = on(flat, who, self.cur)
        if got is None:
            return
        kind, f, (t1, s1), (t2, s2) = got
        element = tuple(int(x) for x in np.unravel_index(int(f), shape)) if shape else ()
        th = (self.thread(t1), self.thread(t2)) if not across else tuple(
            f"of block {_block_of(t)}" for t in (t1, t2))
        if across:
            kind = kind + " across blocks"
        first, second = self._line(s1), self._line(s2)
        verb1 = "read" if kind.startswith("write-after-read") else "wrote"
        verb2 = "read" if kind.startswith("read") else "wrote"
        raise RaceError(
            f"{self._where()}: {kind} race on {b.scope.value} buffer {b.name!r} element "
            f"{element}: thread {th[1]} {verb2} it in\n    {second}\n  after thread {th[0]} "
            f"{verb1} it in\n    {first}\n  with no barrier between them",
            self.kernel, kind, b.name, element, th, (first, second))

    # ------------------------------------------------------------- reports
    def _where(self) -> str:
        if self.kernel is None:
            return f"kernel {self.func.name!r} (host code)"
        return f"kernel {self.kernel!r}, block {tuple(self.block)}"

    def _line(self, sid: int) -> str:
        """Statement ``sid`` as one printed line (a loop or ``if`` by its header)."""
        if sid < 0:
            return "<none>"
        if self._printer is None:
            f = self.func
            self._printer = StmtPrinter()
            self._printer.namer.reserve(list(f.buffers) + list(f.scalars) + named_objects(f.body))
        out: list = []
        self._printer.lines(self._stmts[sid], 0, out)
        return out[0].strip() if out else "<?>"


def _few(threads: list, total: int) -> str:
    text = ", ".join(str(t) for t in threads)
    return text + (f" (and {total - len(threads)} more)" if total > len(threads) else "")


__all__ = ["Executor"]


def _block_id(block) -> int:
    """One int for a block's (x, y, z) indices (the race shadow over blocks records these)."""
    x, y, z = block
    return (z << 42) | (y << 21) | x


def _block_of(bid: int) -> tuple:
    return (bid & (2 ** 21 - 1), (bid >> 21) & (2 ** 21 - 1), bid >> 42)


def global_mem(data) -> _Mem:
    """A global buffer the kernels write (an output, a workspace): race-checked between the
    threads of a block (reset at barriers) and between blocks (for the whole kernel)."""
    size = int(np.prod(data.shape))
    return _Mem(data, shadow=Shadow(size), blocks=Shadow(size))

