"""The verifier's GPU rules: what must hold inside every ``DeviceKernel`` (GPU_PLAN, "The
execution model of BOUND loops").  ``verify(func)`` runs ``kdsl.ir.verifier.verify`` with
``RULES``: ``check_kernel`` on each kernel and ``check_host`` on the root (the GPU table's
verifier, ``kdsl.gpu.pipeline``); a failure is an InternalCompilerError (``device_kernels``
turns the user's mistakes into ScheduleErrors first).

Rules, inside a kernel:
- launch: grid entries are index Exprs of the function's scalars, block entries ints >= 0;
  ``dynamic_shared`` set exactly when the kernel has shared buffers sized at launch
  (``shared_memory.shared_layout``), as an index Expr of the scalars;
- thread extents constant: every loop bound to ``threadIdx.*`` has a ``Const`` extent;
- thread extents within the launch: every loop bound to one ``threadIdx`` tag has at most the
  launch's block size along it (a shorter one is masked); block loops only outside thread loops;
- no ``Barrier``/``CrossThreadReduce`` under divergence: not under a condition (``if``, a
  serial loop's bounds) that depends on a thread index, and not inside a thread loop shorter
  than the block (the threads past its extent never reach it);
- shared allocations at block level: no ``Allocate`` of a SHARED buffer inside a threadIdx loop;
- local buffers inside the thread loops that write them: every thread tag around a write of a
  LOCAL buffer is also around its ``Allocate`` (a local is per thread; one written outside the
  thread loops is computed whole by every thread, and may be read inside them), except a loop
  of one iteration (thread 0 of its tag: ``single_thread``) and a store guarded to index 0 of
  a loop (``if k == 0: B[0] = ...``: one thread writes its own copy).
On the root: DeviceKernels only there (not nested in loops or kernels), and, once a function
has kernels, no BOUND block/thread loop outside them.
"""
from __future__ import annotations

from ..ir import nodes as n
from ..ir.shared_memory import shared_layout
from ..ir.visitor import collect, free_vars

_AXIS = {n.ThreadTag.THREAD_X: 0, n.ThreadTag.THREAD_Y: 1, n.ThreadTag.THREAD_Z: 2}
_SYNC = (n.Barrier, n.CrossThreadReduce)


def _expr_fields(s) -> tuple:
    """The expressions a statement evaluates itself (not those of its sub-statements)."""
    t = type(s)
    if t is n.Store:
        return tuple(s.indices) + (s.value,)
    if t is n.For:
        return (s.min, s.extent)
    if t is n.IfThenElse:
        return (s.cond,)
    if t is n.LetStmt:
        return (s.value,)
    if t is n.Evaluate:
        return (s.value,)
    if t is n.AsyncCopy:
        return tuple(s.indices) + (s.value,) + ((s.predicate,) if s.predicate is not None else ())
    if t is n.CrossThreadReduce:
        return tuple(s.values)
    if t is n.Intrinsic:
        return tuple(a for a in s.args if isinstance(a, n.Expr))
    return ()


class _Kernel:
    """Walks one kernel's body with the thread loops, divergence and locals in force."""

    def __init__(self, k: n.DeviceKernel, func: n.LoweredFunc, fail):
        self.k, self.func, self.fail = k, func, fail
        self.threads: list = []          # enclosing thread loops (For), outermost first
        self.tdep: set = set()           # Vars whose value differs between threads
        self.divergent = 0               # depth of thread-dependent conditions
        self.local_tags: dict = {}       # LOCAL Buffer -> thread tags around its Allocate
        self.conds: list = []            # conditions of the enclosing ``then`` branches

    def where(self) -> str:
        return f"kernel {self.k.name!r}"

    def run(self):
        lau = self.k.launch
        if len(lau.grid) != 3 or len(lau.block) != 3:
            self.fail(f"{self.where()}: a launch has three grid and three block entries, got {lau}")
        scal = set(self.func.scalars)
        for g in lau.grid:
            if not isinstance(g, n.Expr) or not g.dtype.is_int or not free_vars(g) <= scal:
                self.fail(f"{self.where()}: grid size {g!r} is not an index expression of the "
                          f"function's scalars")
        for b in lau.block:
            if type(b) is not int or b < 0:
                self.fail(f"{self.where()}: block size {b!r} is not an int >= 0")
        self._dynamic_shared(scal)
        self.visit(self.k.body)

    def _dynamic_shared(self, scal):
        """``launch.dynamic_shared`` is set exactly when ``shared_layout`` has dynamic slices
        (shared buffers of non-constant shape, or constant ones beyond 48 KB), as an index
        Expr of the scalars."""
        dyn = self.k.launch.dynamic_shared
        layout = shared_layout(self.k.body)
        if (dyn is None) != (layout.dynamic_bytes is None):
            what = "no" if dyn is None else "a"
            self.fail(f"{self.where()}: {what} dynamic shared size in the launch, but "
                      f"{len(layout.dynamic)} shared buffers sized at launch")
        if dyn is not None and (not isinstance(dyn, n.Expr) or not dyn.dtype.is_int
                                or not free_vars(dyn) <= scal):
            self.fail(f"{self.where()}: dynamic shared size {dyn!r} is not an index expression "
                      f"of the function's scalars")

    def _tdep(self, e) -> bool:
        return any(v in self.tdep for v in free_vars(e))

    def visit(self, s):
        t = type(s)
        self._uses(s)
        if t is n.For:
            self._for(s)
        elif t is n.IfThenElse:
            div = self._tdep(s.cond)
            self.divergent += div
            self.conds.append(s.cond)
            self.visit(s.then)
            self.conds.pop()
            if s.otherwise is not None:
                self.visit(s.otherwise)
            self.divergent -= div
        elif t is n.Seq:
            for x in s.stmts:
                self.visit(x)
        elif t is n.LetStmt:
            if self._tdep(s.value):
                self.tdep.add(s.var)
            self.visit(s.body)
        elif t is n.Allocate:
            self._allocate(s)
        elif t is n.DeviceKernel:
            self.fail(f"{self.where()}: kernel {s.name!r} nested inside it")
        elif t in _SYNC:
            self._sync(s)

    def _for(self, s: n.For):
        tag = s.thread
        if s.kind is n.ForKind.BOUND and tag.is_thread:
            if type(s.extent) is not n.Const:
                self.fail(f"{self.where()}: the extent of the {tag.value} loop {s.var.name} is "
                          f"not a constant")
            ext = int(s.extent.value)
            if ext > self.k.launch.block[_AXIS[tag]]:
                self.fail(f"{self.where()}: the {tag.value} loop {s.var.name} has {ext} iterations, "
                          f"more than the launch's {self.k.launch.block[_AXIS[tag]]} threads")
            self.threads.append(s)
            self.tdep.add(s.var)
            self.visit(s.body)
            self.threads.pop()
            return
        if s.kind is n.ForKind.BOUND and tag.is_block and self.threads:
            self.fail(f"{self.where()}: the {tag.value} loop {s.var.name} is inside a thread loop")
        div = self._tdep(s.min) or self._tdep(s.extent)
        if div:
            self.tdep.add(s.var)
        self.divergent += div
        self.visit(s.body)
        self.divergent -= div

    def _sync(self, s):
        what = "a barrier" if type(s) is n.Barrier else "a cross-thread reduction"
        if self.divergent:
            self.fail(f"{self.where()}: {what} under a condition on a thread index (divergent: "
                      f"some threads would wait forever)")
        for f in self.threads:
            size = self.k.launch.block[_AXIS[f.thread]]
            if int(f.extent.value) < size:
                self.fail(f"{self.where()}: {what} inside the {f.thread.value} loop {f.var.name} of "
                          f"{int(f.extent.value)} iterations, shorter than the block's {size} "
                          f"threads (the others never reach it)")

    def _allocate(self, s: n.Allocate):
        b = s.buffer
        if b.scope is n.Scope.SHARED and self.threads:
            self.fail(f"{self.where()}: shared buffer {b.name!r} is allocated inside the "
                      f"{self.threads[-1].thread.value} loop {self.threads[-1].var.name}: shared "
                      f"memory is allocated once per block, outside every thread loop")
        if b.scope is n.Scope.LOCAL:
            self.local_tags[b] = {f.thread for f in self.threads}
        self.visit(s.body)
        self.local_tags.pop(b, None)

    def _uses(self, s):
        """Local buffers written by ``s`` itself: inside every thread loop around the write.
        (A read under more thread loops than the allocation sees the copy its thread computed
        whole outside them: TVM's local stage attached at a block loop.)"""
        bufs = [s.buffer] if type(s) in (n.Store, n.AsyncCopy) else []
        if type(s) is n.CrossThreadReduce:
            bufs.extend(s.results)
        if not bufs or not self.threads:
            return
        # a loop of one iteration runs on thread 0 of its tag (single_thread): it reads the
        # copy of the one thread that runs it; a store on thread 0 of a tag (a cross-thread
        # reduction's result) writes that thread's own copy
        pinned = {f.var for f in self.threads if type(f.extent) is n.Const and f.extent.value == 1}
        if type(s) is n.Store:
            pinned |= {c.a for c in self.conds if type(c) is n.Compare and c.op is n.CmpOp.EQ
                       and type(c.b) is n.Const and c.b.value == 0}
        here = {f.thread for f in self.threads if f.var not in pinned}
        for b in bufs:
            tags = self.local_tags.get(b)
            if tags is not None and not here <= tags:
                f = next(f for f in self.threads if f.thread not in tags and f.var not in pinned)
                self.fail(f"{self.where()}: local buffer {b.name!r} is used inside the "
                          f"{f.thread.value} loop {f.var.name} but allocated outside it (a local "
                          f"buffer is per thread: allocate it inside the thread loops that use it)")


def check_kernel(k: n.DeviceKernel, func: n.LoweredFunc, fail) -> None:
    """The GPU rules of the module docstring on one kernel; ``fail(msg)`` raises."""
    _Kernel(k, func, fail).run()


def _statements(s):
    """Every statement below ``s`` (pre-order; expressions are not walked)."""
    stack = [s]
    while stack:
        x = stack.pop()
        yield x
        t = type(x)
        if t is n.Seq:
            stack.extend(reversed(x.stmts))
        elif t is n.IfThenElse:
            if x.otherwise is not None:
                stack.append(x.otherwise)
            stack.append(x.then)
        elif t in (n.For, n.Allocate, n.LetStmt, n.DeviceKernel):
            stack.append(x.body)


def check_host(func: n.LoweredFunc, fail) -> None:
    """Root rules: DeviceKernels only at the root; with kernels, no bound loop outside them."""
    kernels = func.kernels
    every = sum(1 for x in _statements(func.body) if type(x) is n.DeviceKernel)
    if every != len(kernels):
        fail("a DeviceKernel below the root of the function (kernels are launched by the host)")
    if not kernels:
        return
    s = func.body
    while type(s) is n.Allocate:
        s = s.body
    for x in (s.stmts if type(s) is n.Seq else (s,)):
        if type(x) is not n.DeviceKernel and any(
                type(y) is n.For and y.kind is n.ForKind.BOUND and not y.thread.is_vthread
                for y in _statements(x)):
            fail("a loop bound to a GPU block or thread outside every DeviceKernel")




def __getattr__(name):
    """``RULES``: the GPU rules as the loop-IR verifier takes them (``kdsl.ir.verifier`` is
    imported when something is verified: a compile outside the tests verifies nothing)."""
    if name == "RULES":
        from ..ir.verifier import KernelRules
        rules = globals()["RULES"] = KernelRules(check_kernel, check_host)
        return rules
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def verify(func: n.LoweredFunc) -> None:
    """The loop-IR rules and, on DeviceKernels and the root, the GPU rules of this module."""
    from ..ir.verifier import verify as verify_loop_ir
    verify_loop_ir(func, globals().get("RULES") or __getattr__("RULES"))


__all__ = ["check_kernel", "check_host", "RULES", "verify"]
