"""Shared memory of one device kernel: static buffers and the dynamic ones laid out at launch.

A SHARED buffer whose shape is constant is *static* (a CUDA ``__shared__`` array).  One whose
shape depends on the function's scalars (a row of symbolic length cached on chip) is
*dynamic*: every dynamic buffer of a kernel is a slice of one block of memory sized when the
kernel is launched (CUDA's ``extern __shared__``), at an offset rounded up to ``ALIGN`` bytes,
in the order the kernel allocates them.  Where the constant-shaped buffers alone exceed
``STATIC_MAX`` (large GEMM tiles), they are dynamic slices too (of constant size).  ``shared_layout`` gives both; ``device_kernels``
stores the dynamic total in ``Launch.dynamic_shared``; code generators and the SIMT executor
take the offsets from here, so the host's byte count and the kernel's slices agree.

Swizzled buffers (``Buffer.swizzle``: the operand tiles of Hopper tensor-core products) must
start on a ``SWIZZLE_ALIGN``-byte boundary of the shared window: a kernel with one keeps every
buffer dynamic, puts the swizzled ones at multiples of ``SWIZZLE_ALIGN`` and asks for
``SWIZZLE_ALIGN`` bytes more, so that a code generator can round the dynamic block's start up.

``LIMIT`` is the most shared memory one block may use on the devices kdsl models (sm_80/sm_90
with the opt-in attribute: 227 KB); a launch beyond it is refused with ``too_much_shared``.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import ArgumentError
from . import make as mk
from . import nodes as n
from .simplify import simplify

#: alignment of every dynamic slice (bytes): 16-byte vector accesses stay aligned
ALIGN = 16
#: alignment (bytes) of swizzled buffers, and the slack a kernel with one asks for
SWIZZLE_ALIGN = 1024
#: shared memory per block with the opt-in attribute on sm_80 / sm_90 (227 KB)
LIMIT = 227 * 1024
#: shared memory per block without the opt-in attribute (48 KB)
DEFAULT_LIMIT = 48 * 1024
#: the most bytes of constant-shaped buffers kept static: CUDA refuses more than 48 KB of
#: ``__shared__`` arrays, and code generators add scratch of their own (cross-thread
#: reductions: at most a few hundred bytes); beyond it every buffer is a dynamic slice
STATIC_MAX = DEFAULT_LIMIT - 1024


@dataclass(frozen=True)
class SharedLayout:
    """``static``: (Buffer, bytes) of constant-shaped shared buffers; ``dynamic``: (Buffer,
    offset Expr in bytes) in allocation order; ``dynamic_bytes``: their total (an Expr, a
    multiple of ALIGN), None when there are none."""

    static: tuple
    dynamic: tuple
    dynamic_bytes: n.Expr | None

    @property
    def static_bytes(self) -> int:
        return sum(b for _, b in self.static)

    def offset(self, buffer) -> n.Expr | None:
        """The byte offset of dynamic ``buffer`` (None when it is not one)."""
        for b, off in self.dynamic:
            if b is buffer:
                return off
        return None


def is_dynamic(b: n.Buffer) -> bool:
    """A shared buffer whose size is known only at launch."""
    return b.scope is n.Scope.SHARED and any(type(e) is not n.Const for e in b.shape)


def _extents(b: n.Buffer) -> tuple:
    """The extents whose product is the buffer's element count: its shape, or for padded rows
    (``passes.shared_layout``: explicit strides) the outermost extent and its stride."""
    return tuple(b.shape) if b.strides is None else (b.shape[0], b.strides[0])


def _bytes(b: n.Buffer):
    size = mk.as_expr(b.dtype.itemsize)
    for e in _extents(b):
        size = mk.mul(size, mk.max_(e, 0))
    return size


def element_count(b: n.Buffer) -> int:
    """Elements a buffer of constant shape occupies (padded rows included; at least 1)."""
    count = 1
    for e in _extents(b):
        count *= max(int(e.value), 0)
    return max(count, 1)


def _const_bytes(b: n.Buffer) -> int:
    return element_count(b) * b.dtype.itemsize


def _aligned(e, align=ALIGN):
    return mk.mul(mk.floordiv(mk.add(e, align - 1), align), align)


def _shared_allocations(body) -> list:
    """The SHARED buffers allocated in ``body``, once each, in program order."""
    out, seen, stack = [], set(), [body]
    while stack:
        s = stack.pop()
        t = type(s)
        if t is n.Allocate:
            if s.buffer.scope is n.Scope.SHARED and id(s.buffer) not in seen:
                seen.add(id(s.buffer))
                out.append(s.buffer)
            stack.append(s.body)
        elif t is n.Seq:
            stack.extend(reversed(s.stmts))
        elif t is n.IfThenElse:
            if s.otherwise is not None:
                stack.append(s.otherwise)
            stack.append(s.then)
        elif t in (n.For, n.LetStmt, n.DeviceKernel):
            stack.append(s.body)
    return out


def shared_layout(body) -> SharedLayout:
    """The layout of the shared buffers allocated in a kernel's ``body`` (module docstring)."""
    static, dynamic, total = [], [], None
    bufs = _shared_allocations(body)
    swizzled = any(b.swizzle for b in bufs)
    if swizzled:        # the swizzled first, each on a SWIZZLE_ALIGN boundary
        bufs.sort(key=lambda b: not b.swizzle)
    fixed = sum(_const_bytes(b) for b in bufs if not is_dynamic(b))
    spill = fixed > STATIC_MAX or swizzled  # constant buffers beyond what __shared__ arrays may hold
    for b in bufs:
        if spill or is_dynamic(b):
            off = mk.as_expr(0) if total is None else total
            if b.swizzle:
                off = _aligned(off, SWIZZLE_ALIGN)
            dynamic.append((b, off))
            size = _aligned(_bytes(b))
            total = mk.add(off, size)
        else:
            static.append((b, _const_bytes(b)))
    if swizzled:
        total = mk.add(total, SWIZZLE_ALIGN)
    return SharedLayout(tuple(static), tuple((b, simplify(o)) for b, o in dynamic),
                        None if total is None else simplify(total))


def too_much_shared(kernel: str, nbytes: int, limit: int, buffers=()) -> ArgumentError:
    """The error of a launch that needs more shared memory per block than the device has."""
    names = ", ".join(repr(b.name) for b in buffers)
    which = f" (buffers {names})" if names else ""
    return ArgumentError(
        f"kernel {kernel!r} needs {nbytes} bytes of shared memory per block for these array "
        f"sizes{which}, more than the device allows ({limit} bytes)",
        hint="call it with smaller arrays, or schedule the stage that is cached in shared memory "
             "with smaller tiles (or leave it in global memory); kdsl's default schedules keep "
             "longer rows in global memory")


__all__ = ["ALIGN", "SWIZZLE_ALIGN", "LIMIT", "DEFAULT_LIMIT", "SharedLayout", "shared_layout", "is_dynamic",
           "too_much_shared", "STATIC_MAX"]
