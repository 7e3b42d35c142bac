"""shared_layout: padded rows for shared tiles, so that accesses down a column of a tile do
not pile onto one shared-memory bank (IR pass, GPU table only).

Shared memory has 32 banks of 4 bytes; an address's bank is (byte offset / 4) % 32.  In a
compact row-major tile whose rows are a multiple of 128 bytes, every element of a column
sits in one bank: a warp reading a column (a transposed tile, the rows of a fragment load)
is served one address at a time.  Rows of 32 or 64 bytes (the 16-bit tiles of a tensor-core
GEMM, k steps of 16 or 32) give 2- and 4-way conflicts on the eight 16-byte rows a fragment
load reads together.  Padding each row by 16 bytes shifts consecutive rows by four banks:
the eight 16-byte rows of a fragment load fall in distinct bank groups, a column of 32-bit
elements spreads over eight banks instead of one, and every row stays 16-byte aligned (for
16-byte vector and asynchronous copies and fragment loads).

Assumes: the GPU table's loop IR after ``sync`` (``device_kernels`` comes next and sizes each
kernel's shared memory from the strides); shared buffers are compact (``strides`` None).
Guarantees: every shared buffer of two or more dimensions with a constant shape and rows
(last dimension) of a multiple of 32 bytes has ``strides`` whose row pitch is the row plus
16 bytes (outer dimensions compact over the padded rows; a ring's slot dimension too), and
every reference to it (loads, stores, asynchronous copies, fragment loads and stores, its
Allocate) names the padded buffer.  Indices are unchanged: executors that index logically
(the SIMT interpreter) see the same program; the codegen addresses through the strides and
allocates ``strides[0] * shape[0]`` elements.  Other buffers are left alone.

The operand tiles of shared-memory tensor-core products (``WgmmaMma``) are not padded: they
get the 128-byte swizzle Hopper's ``wgmma`` reads (``Buffer.swizzle``; its 16-byte chunks
permuted within each 128-byte line, so that the eight rows a core matrix spans, and the
16-byte copies of a warp, fall in distinct banks), compact otherwise.
"""
from __future__ import annotations

import dataclasses

from ..ir import make as mk
from ..ir import nodes as n
from ..ir.visitor import Mutator, collect_stmts

#: the padding of a row, in bytes
PAD_BYTES = 16
#: rows of a multiple of this many bytes are padded
ROW_MULTIPLE = 32


def padded_strides(b: n.Buffer) -> tuple | None:
    """The padded strides (elements) of shared buffer ``b``, or None when it keeps its layout."""
    if b.scope is not n.Scope.SHARED or b.strides is not None or len(b.shape) < 2:
        return None
    dims = [d.value if isinstance(d, n.Const) else None for d in b.shape]
    if None in dims:
        return None
    item = b.dtype.itemsize
    row = dims[-1] * item
    if row == 0 or row % ROW_MULTIPLE or PAD_BYTES % item:
        return None
    strides = [1, dims[-1] + PAD_BYTES // item]
    for d in reversed(dims[1:-1]):
        strides.append(strides[-1] * d)
    return tuple(mk.as_expr(s) for s in reversed(strides))


class _Swap(Mutator):
    """Every Buffer-valued field that names a padded buffer gets the padded one."""

    def __init__(self, swap: dict):
        super().__init__()
        self.swap = swap

    def generic(self, node):
        node = super().generic(node)
        names = _FIELD_NAMES.get(type(node))
        if names is None:
            names = _FIELD_NAMES[type(node)] = tuple(f.name for f in dataclasses.fields(node))
        changes = {f: self.swap[v] for f in names
                   if isinstance(v := getattr(node, f), n.Buffer) and v in self.swap}
        return dataclasses.replace(node, **changes) if changes else node


#: node type -> its field names (``dataclasses.fields`` per node was most of this pass)
_FIELD_NAMES: dict = {}


#: the swizzle (bytes) of the operand tiles of shared-memory products
SWIZZLE = 128


def shared_layout(func: n.LoweredFunc) -> n.LoweredFunc:
    """The pass (see the module docstring); the function itself when nothing changes."""
    swap = {}
    operands = {id(b) for s in collect_stmts(func.body, lambda x: type(x) is n.WgmmaMma) for b in (s.a, s.b)}
    for a in collect_stmts(func.body, lambda x: type(x) is n.Allocate):
        if id(a.buffer) in operands:
            swap[a.buffer] = dataclasses.replace(a.buffer, swizzle=SWIZZLE)
            continue
        st = padded_strides(a.buffer)
        if st is not None:
            swap[a.buffer] = dataclasses.replace(a.buffer, strides=st)
    if not swap:
        return func
    return dataclasses.replace(func, body=_Swap(swap).visit(func.body))
