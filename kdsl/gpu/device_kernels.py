"""device_kernels: a lowered function becomes a host program of GPU kernels (the GPU table's last pass).

A *kernel* is a root nest whose outermost loop is bound to a ``blockIdx`` tag, or to a
``threadIdx`` tag with no block loop around it (a kernel of one block).  Each becomes a
``DeviceKernel`` named ``<func>_kernel<k>`` (k counts from 0 in launch order) with its
``Launch``: ``grid`` = per block tag the extent of the loops bound to it (an Expr of the
function's shape and scalar arguments; 1 when unbound), ``block`` = per thread tag the
largest extent of the loops bound to it (an int: thread extents are constant within a kernel;
a shorter loop of that tag is masked, GPU_PLAN's execution model).
The loops stay in the body as ``For(kind=BOUND)`` (sequential executors run them; a CUDA
code generator replaces them by the indices).  Root nests that a schedule does not fuse stay
separate kernels, in order (an unfused softmax: up to three; a fused one: one).

The host program is what is left at the root: the chain of root ``Allocate``s around the
kernels.  Their buffers are the *workspaces* (``LoweredFunc.workspaces``): global temporaries
that the runtime allocates once per call and that the kernels exchange data through (a
softmax's row maxima and sums).  Code outside every kernel (a stage whose loops are not bound)
is not allowed on a GPU target: the pass raises a ScheduleError naming the stage and saying to
bind its loops (TVM: "did you forget to bind?"); so is a root buffer in shared or local memory.
A shared buffer whose shape depends on the call's shapes and scalars is *dynamic shared
memory*: its bytes (``shared_memory.shared_layout``) become ``Launch.dynamic_shared``; a
local buffer of non-constant shape, or a shared one whose shape varies between blocks, is a
ScheduleError.
A root statement with no loops at all (a 0-d stage such as ``x.sum() / n``) has nothing to bind:
it becomes a kernel of one thread.

Assumes: simplified loop IR (constant extents are ``Const``); the root is a chain of
``Allocate``s around a ``Seq`` of root nests (``loop_nests``); no DeviceKernel yet.
Guarantees: the root holds only Allocates (GLOBAL), a Seq and DeviceKernels; every BOUND
loop is inside a DeviceKernel; each kernel's Launch matches its loops (thread extents
constant, the block's size per tag their largest extent; grid extents use only ``func.scalars``); the body of each kernel
is the root nest unchanged, so unwrapping the kernels (``sequential.sequential_kernels``)
gives back the input IR.  A function without BOUND loops is an error (all host code), as
above; the sequential table (``pipeline.SEQUENTIAL``) does not run this pass.
"""
from __future__ import annotations

import dataclasses

from ..errors import ScheduleError, user_location
from ..ir import make as mk
from ..ir import nodes as n
from ..ir import warp_nodes
from ..ir.visitor import allocate_chain, any_statement, collect_stmts, free_vars
from ..ir.shared_memory import shared_layout

_BLOCK_TAGS = (n.ThreadTag.BLOCK_X, n.ThreadTag.BLOCK_Y, n.ThreadTag.BLOCK_Z)
_THREAD_TAGS = (n.ThreadTag.THREAD_X, n.ThreadTag.THREAD_Y, n.ThreadTag.THREAD_Z)


def device_kernels(func: n.LoweredFunc) -> n.LoweredFunc:
    """The pass (see the module docstring)."""
    chain, inner = allocate_chain(func.body)
    for a in chain:
        if a.buffer.scope is not n.Scope.GLOBAL:
            raise ScheduleError(
                f"{func.name}: buffer {a.buffer.name!r} is in {a.buffer.scope.value} memory but "
                f"allocated outside every GPU kernel (its stage is computed at the root)",
                hint=f"compute_at the stage of {a.buffer.name!r} inside a blockIdx loop of its "
                     f"consumer ({a.buffer.scope.value} memory lives in one block or thread)",
                loc=user_location())
    stmts = inner.stmts if type(inner) is n.Seq else (inner,)
    out = []
    for s in stmts:
        # a root statement without loops (a 0-d stage: x.sum() / n) runs as a one-thread kernel
        if not _kernel_head(s) and any_statement(s, lambda x: type(x) is n.For):
            raise _host_code(func, s)
        _check_locals(func, s)
        _check_sizes(func, s)
        launch = launch_of(func, s)
        dyn = shared_layout(s).dynamic_bytes
        if dyn is not None:
            launch = dataclasses.replace(launch, dynamic_shared=dyn)
        out.append(n.DeviceKernel(f"{func.name}_kernel{len(out)}", launch, s))
    body = out[0] if len(out) == 1 else n.Seq(tuple(out))
    body = _rewrap(chain, body)
    return dataclasses.replace(func, body=body)


def _check_locals(func, nest) -> None:
    """A LOCAL buffer (one copy per thread) allocated outside the thread loops but written inside
    them would hand each thread its own copy of a value other threads computed: refused (the
    verifier's rule "local buffers inside the thread loops that use them", in user terms).  One
    written only outside them is computed whole by every thread (TVM's local stage attached at
    a block loop): accepted."""
    outside = []                        # LOCAL allocations met with no thread loop around

    def walk(s, in_thread):
        stack = [(s, in_thread)]
        while stack:
            x, t = stack.pop()
            k = type(x)
            if k is n.For:
                stack.append((x.body, t or (x.thread is not None and x.thread.is_thread)))
            elif k is n.Allocate:
                if x.buffer.scope is n.Scope.LOCAL and not t:
                    outside.append(x.buffer)
                stack.append((x.body, t))
            elif k is n.Seq:
                stack.extend((y, t) for y in x.stmts)
            elif k is n.IfThenElse:
                stack.append((x.then, t))
                if x.otherwise is not None:
                    stack.append((x.otherwise, t))
            elif k is n.LetStmt:
                stack.append((x.body, t))
            elif t and outside:
                # written inside the thread loops: each thread holds only its share. A buffer
                # each thread computes whole outside them (a local stage attached at a block
                # loop, TVM's form) is each thread's own full copy: redundant, correct
                used = {y.buffer for y in collect_stmts(x, lambda y: isinstance(y, n.Store))}
                bad = [b for b in outside if b in used]
                if bad:
                    b = bad[0]
                    raise ScheduleError(
                        f"{func.name}: stage {b.name!r} is in local memory (one copy per thread) but "
                        f"is attached outside the thread loops that compute and read it: on a GPU "
                        f"each thread would see only its own copy, not the block's value",
                        hint=f"leave {b.name!r} in shared memory (the default for a stage computed at "
                             f"a block loop) so the block's threads share it, or compute_at it inside "
                             f"the thread loop of its reader", loc=user_location())
    walk(nest, False)


def _check_sizes(func, nest) -> None:
    """Buffers of a kernel whose size is not a constant: a shared one is sized at launch
    (dynamic shared memory), so its shape may use only the call's shapes and scalars, not
    the block's position; a local one (registers, one copy per thread) must be constant."""
    scalars = set(func.scalars)
    for a in collect_stmts(nest, lambda x: type(x) is n.Allocate):
        b = a.buffer
        if all(type(e) is n.Const for e in b.shape):
            continue
        shape = "[" + ", ".join(str(e) for e in b.shape) + "]"
        if b.scope is n.Scope.LOCAL:
            raise ScheduleError(
                f"{func.name}: stage {b.name!r} is in local memory (registers, one copy per "
                f"thread) with a size known only at run time ({shape})",
                hint=f"give {b.name!r} a constant size: compute_at it inside a loop whose inner "
                     f"loops have constant extents (split by a constant factor), or "
                     f"set_scope('shared') to size it when the kernel is launched",
                loc=user_location())
        if b.scope is n.Scope.SHARED:
            extra = set().union(*(free_vars(e) for e in b.shape)) - scalars
            if extra:
                raise ScheduleError(
                    f"{func.name}: the shared buffer of stage {b.name!r} has a size ({shape}) "
                    f"that changes from one block to the next (it uses "
                    f"{', '.join(sorted(v.name for v in extra))}); shared memory is sized once "
                    f"per launch", hint=f"compute_at {b.name!r} at a loop whose region has the "
                    f"same size in every block (split by a constant factor)", loc=user_location())


def _rewrap(chain, body):
    for a in reversed(chain):
        body = dataclasses.replace(a, body=body)
    return body


def _peel(s):
    """The statement under uniform root wrappers (a guard without else, a let)."""
    while True:
        if type(s) is n.IfThenElse and s.otherwise is None:
            s = s.then
        elif type(s) is n.LetStmt:
            s = s.body
        else:
            return s


def _kernel_head(s) -> bool:
    h = _peel(s)
    return type(h) is n.For and h.kind is n.ForKind.BOUND and (h.thread.is_block or h.thread.is_thread)


def _written(x):
    """The buffer statement ``x`` writes (stores, asynchronous copies, fragment statements),
    or None."""
    t = type(x)
    if t is n.Store or t is n.AsyncCopy:
        return x.buffer
    if t in n.WMMA_STMTS:
        return warp_nodes.written(x)
    return None


def _stores(s) -> list:
    return [_written(x) for x in collect_stmts(s, lambda x: _written(x) is not None)]


def _stage_names(s) -> list:
    """The stages a nest computes, for messages: the buffers it writes that are not allocated
    inside it (producers attached inside the nest write their own buffers)."""
    inside = {a.buffer for a in collect_stmts(s, lambda x: isinstance(x, n.Allocate))}
    names = []
    for b in _stores(s):
        if b not in inside and b.name not in names:
            names.append(b.name)
    return names or [b.name for b in _stores(s)][:1] or ["?"]


def _stage_of(s) -> str:
    """The stage that owns loop nest ``s``: the last one it writes (producers attached
    inside the nest, such as a shared tile, run before their consumer)."""
    inside = {a.buffer for a in collect_stmts(s, lambda x: isinstance(x, n.Allocate))}
    last = [b.name for b in _stores(s) if b not in inside]
    return last[-1] if last else _stage_names(s)[0]


def _host_code(func, s) -> ScheduleError:
    stage = _stage_of(s)
    inner = [f for f in collect_stmts(s, lambda x: isinstance(x, n.For) and x.kind is n.ForKind.BOUND)]
    if inner:
        f = inner[0]
        return ScheduleError(
            f"{func.name}: stage {stage!r} has its loop {f.var.name} bound to {f.thread.value} "
            f"inside a loop that is not bound: a GPU kernel's block and thread loops must be its "
            f"outermost loops", hint=f"reorder the axes of stage {stage!r} so that the bound ones "
            f"come first, or bind its outer loops too", loc=user_location())
    names = _stage_names(s)
    which = f"stage {stage!r}" if len(names) == 1 else "stages " + ", ".join(map(repr, names))
    return ScheduleError(
        f"{func.name}: {which} runs outside every GPU kernel: none of its loops is bound "
        f"to blockIdx or threadIdx", hint=f"bind its loops, e.g. xo, xi = s[{stage!r}].split(axis, "
        f"factor=64); s[{stage!r}].bind(xo, 'blockIdx.x'); s[{stage!r}].bind(xi, 'threadIdx.x') "
        f"(or compute_at / compute_inline it into a stage that is bound)", loc=user_location())


def _block_in_block(func, f: n.For, stage: str, outer: n.For) -> ScheduleError:
    """A loop bound to a blockIdx tag inside a block loop of another stage (or of the same
    tag): the stage is attached inside one block, whose threads alone can run it; its loop
    cannot spread over other blocks (each block would compute part of the tile and read all
    of it: issue 24)."""
    return ScheduleError(
        f"{func.name}: stage {stage!r} binds {f.var.name} to {f.thread.value} inside the "
        f"{outer.thread.value} loop {outer.var.name} of stage {_stage_of(outer)!r}: a stage "
        f"computed inside a block runs in that block and cannot be spread over other blocks",
        hint=f"bind {f.var.name} to a thread index instead, e.g. s[{stage!r}].bind({f.var.name}, "
             f"'threadIdx.y') (the block's threads then share its work), or leave it unbound",
        loc=user_location())


def _walk(s, outer: tuple, found: list):
    """(loop, the BOUND/serial loops around it) for every For below ``s`` (statements only)."""
    stack = [(s, outer)]
    while stack:
        x, around = stack.pop()
        t = type(x)
        if t is n.For:
            found.append((x, around))
            stack.append((x.body, around + (x,)))
        elif t is n.Seq:
            stack.extend((y, around) for y in reversed(x.stmts))
        elif t is n.IfThenElse:
            if x.otherwise is not None:
                stack.append((x.otherwise, around))
            stack.append((x.then, around))
        elif t in (n.Allocate, n.LetStmt, n.DeviceKernel):
            stack.append((x.body, around))


def launch_of(func: n.LoweredFunc, nest) -> n.Launch:
    """The Launch of the kernel ``nest`` (ScheduleError where it cannot have one)."""
    loops: list = []
    _walk(nest, (), loops)
    grid = {t: [] for t in _BLOCK_TAGS}
    block = {t: [] for t in _THREAD_TAGS}
    scalars = set(func.scalars)
    for f, around in loops:
        if f.kind is not n.ForKind.BOUND or f.thread.is_vthread:
            continue
        stage = _stage_of(f)
        if f.thread.is_block:
            if any(not (g.kind is n.ForKind.BOUND and g.thread.is_block) for g in around):
                raise ScheduleError(
                    f"{func.name}: stage {stage!r} binds {f.var.name} to {f.thread.value} inside "
                    f"a loop that is not a block loop: blockIdx loops must be a kernel's "
                    f"outermost loops", hint=f"reorder stage {stage!r} so that its blockIdx "
                    f"axes come first", loc=user_location())
            outer = next((g for g in around if g.thread is f.thread or _stage_of(g) != stage), None)
            if outer is not None:
                raise _block_in_block(func, f, stage, outer)
            if not free_vars(f.extent) <= scalars:
                raise ScheduleError(
                    f"{func.name}: the number of blocks of stage {stage!r} along {f.thread.value} "
                    f"(the extent of {f.var.name}) changes from one block to the next",
                    hint="bind axes whose extent depends only on the arguments' shapes",
                    loc=user_location())
            grid[f.thread].append(f)
        else:
            if type(f.extent) is not n.Const:
                raise ScheduleError(
                    f"{func.name}: stage {stage!r} binds {f.var.name} to {f.thread.value} over a "
                    f"number of iterations that is not a constant: the threads of a GPU block "
                    f"are fixed when the kernel is launched",
                    hint=f"split the axis by a constant factor and bind the inner loop: "
                         f"xo, xi = s[{stage!r}].split(axis, factor=64); "
                         f"s[{stage!r}].bind(xi, {f.thread.value!r})", loc=user_location())
            block[f.thread].append(f)
    dims = []
    for t in _THREAD_TAGS:
        # the block's size along a tag is its longest loop; shorter loops of that tag (a thread
        # tile capped by a constant extent, a stage pinned to thread 0) are masked: the
        # threads past their extent skip them (GPU_PLAN, the execution model of BOUND loops)
        dims.append(max((int(f.extent.value) for f in block[t]), default=1))
    if dims[0] == 1 and any_statement(nest, lambda x: type(x) in n.WMMA_STMTS):
        dims[0] = 32     # wmma statements run on whole warps: 32 lanes along threadIdx.x
    sizes = []
    for t in _BLOCK_TAGS:
        exts = []
        for f in grid[t]:
            if not any(f.extent == e for e in exts):
                exts.append(f.extent)
        size = exts[0] if exts else mk.as_expr(1)
        for e in exts[1:]:
            size = mk.max_(size, e)
        sizes.append(size)
    return n.Launch(tuple(sizes), tuple(dims))


__all__ = ["device_kernels", "launch_of"]
