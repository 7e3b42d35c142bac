"""The warp-level matrix statements of the loop IR (tensor cores), part of ``kdsl.ir.nodes``
(which re-exports every name here; import them from there).

``WmmaFill``/``WmmaLoad``/``WmmaMma``/``WmmaStore``: nvcuda::wmma-style fragments and tiles;
``WgmmaMma``: a warp's share of a Hopper warpgroup product read from shared memory, with
``WgmmaCommit``/``WgmmaWait`` for products left in flight."""
from __future__ import annotations

import enum
from dataclasses import dataclass

from .nodes import Buffer, Expr, Stmt  # noqa: F401  (Expr: the annotations' names)


class WmmaLayout(enum.Enum):
    """How a tile lies in memory: ROW_MAJOR puts the tile's rows along the buffer's next-to-last
    dimension and its columns along the last (``ldm`` = that buffer's stride of dimension -2);
    COL_MAJOR the other way round (nvcuda::wmma's row_major / col_major).  (For a tile on
    other dimensions, ``WmmaLoad.dims``: its first and second dimension.)"""

    ROW_MAJOR = "row_major"
    COL_MAJOR = "col_major"


# The four statements below are executed by a whole warp (32 threads), like nvcuda::wmma's
# ``*_sync`` functions: every thread of the warp reaches them, with the same operands.  A
# fragment is a Buffer of a WMMA scope, owned by one warp, shaped as a grid of tiles in the
# canonical orientation (matrix_a: rows x k, matrix_b: k x cols, accumulator: rows x cols,
# each a multiple of the m x k, k x n, m x n tile); ``tile`` is the (row, col) of the first
# element of the tile an operation uses (multiples of the tile's shape).  ``shape`` is the
# intrinsic's (m, n, k).  Fragment data is only accessible through these statements.
@dataclass(frozen=True)
class WmmaFill(Stmt):
    """Set the accumulator tile ``frag[tile]`` to ``value`` (fill_fragment)."""

    frag: Buffer
    tile: tuple            # (row, col) Exprs
    shape: tuple           # (m, n, k)
    value: Expr


@dataclass(frozen=True)
class WmmaLoad(Stmt):
    """Load the tile ``frag[tile]`` from ``src`` (load_matrix_sync).

    ``origin`` indexes ``src`` (one Expr per dimension) at the tile's element (0, 0); the tile
    spans ``src``'s dimensions ``dims`` (two, counted from the end, in memory order: by
    default the last two; ``(-3, -1)`` is a channels x columns tile of one row of an NCHW
    image) as ``layout`` says, ROW_MAJOR putting its rows along ``dims[0]``.  ``extents`` = (rows, cols): the
    tile's valid part (clamped to [0, tile size]); elements outside it are set to zero and
    ``src`` is not read there (a partial tile of a non-divisible shape).  ``whole``: the whole
    tile lies inside ``src``'s allocation and is initialised (a padded cache), so a backend may
    read it all and zero what lies outside ``extents`` afterwards.
    """

    frag: Buffer
    tile: tuple
    shape: tuple
    src: Buffer
    origin: tuple
    layout: WmmaLayout
    extents: tuple
    whole: bool = False
    dims: tuple = (-2, -1)


@dataclass(frozen=True)
class WmmaMma(Stmt):
    """``d[d_tile] = a[a_tile] @ b[b_tile] + c[c_tile]`` (mma_sync): products of the inputs
    exact, accumulated in the accumulator's dtype."""

    d: Buffer
    d_tile: tuple
    a: Buffer
    a_tile: tuple
    b: Buffer
    b_tile: tuple
    c: Buffer
    c_tile: tuple
    shape: tuple


@dataclass(frozen=True)
class WmmaStore(Stmt):
    """Store the accumulator tile ``frag[tile]`` into ``dst`` at ``origin`` (store_matrix_sync);
    only its valid part ``extents`` = (rows, cols) is written (see ``WmmaLoad``, also for
    ``dims``).  A float32
    accumulator may store into a float16 or bfloat16 ``dst``: each value is rounded to the
    nearest (ties to even), as a cast would (``is_converting``)."""

    dst: Buffer
    origin: tuple
    layout: WmmaLayout
    frag: Buffer
    tile: tuple
    shape: tuple
    extents: tuple
    dims: tuple = (-2, -1)

    @property
    def is_converting(self) -> bool:
        """The values change type on the way out (float32 -> float16/bfloat16)."""
        return self.dst.dtype is not self.frag.dtype


@dataclass(frozen=True)
class WgmmaMma(Stmt):
    """``d[d_tile] = a-tile @ b-tile + c[c_tile]`` with both operand tiles read from shared
    memory (a warp's share of a Hopper warpgroup product, ``wgmma.mma_async``): shape (m, n,
    k) = (16, n, 16), n a multiple of 8 up to 256.  The m x k tile of ``a`` starts at
    ``a_origin`` and spans ``a``'s last two dimensions as ``a_layout`` says (ROW_MAJOR: its
    rows along dimension -2), the k x n tile of ``b`` likewise.  Products exact, accumulated in
    the accumulator's dtype (float32).

    Executed by a warp, like the wmma statements; four consecutive warps (a warpgroup: warps
    4g..4g+3 of the block) run it together as one ``m64nNk16`` instruction, so they must
    reach it together with A tiles of consecutive rows (warp 4g+i at ``a_origin`` of warp 4g
    plus 16 i rows), the same B tile and the same accumulator tile."""

    d: Buffer
    d_tile: tuple
    a: Buffer
    a_origin: tuple
    a_layout: WmmaLayout
    b: Buffer
    b_origin: tuple
    b_layout: WmmaLayout
    c: Buffer
    c_tile: tuple
    shape: tuple


@dataclass(frozen=True)
class WgmmaCommit(Stmt):
    """Close the group of the ``WgmmaMma`` products this warp issued since its last commit
    (``wgmma.commit_group``).  A kernel that holds one runs its products asynchronously: each
    keeps reading its shared tiles and writing its accumulator until a ``WgmmaWait`` covers its
    group; without one, products complete where their run (one unrolled loop of them, or one
    product) ends.  Sequential executors run products at issue (exact: nothing reads an
    accumulator or overwrites an operand tile before the wait)."""


@dataclass(frozen=True)
class WgmmaWait(Stmt):
    """Wait until at most ``pending`` of this warp's committed product groups are still in
    flight (``wgmma.wait_group``; see ``WgmmaCommit``)."""

    pending: int = 0


#: the warp-level statements (executed by every thread of a warp together)
WMMA_STMTS = (WmmaFill, WmmaLoad, WmmaMma, WmmaStore, WgmmaMma)


def memory_reads(s) -> tuple:
    """The memory (non-fragment) buffers warp statement ``s`` reads: a load's source, a
    shared-operand product's two tiles."""
    t = type(s)
    if t is WmmaLoad:
        return (s.src,)
    if t is WgmmaMma:
        return (s.a, s.b)
    return ()


def written(s) -> Buffer:
    """The buffer warp statement ``s`` writes: a fragment, or a store's destination."""
    t = type(s)
    if t is WmmaStore:
        return s.dst
    if t is WmmaMma or t is WgmmaMma:
        return s.d
    return s.frag

__all__ = ["WmmaLayout", "WmmaFill", "WmmaLoad", "WmmaMma", "WmmaStore", "WgmmaMma",
           "WgmmaCommit", "WgmmaWait", "WMMA_STMTS", "memory_reads", "written"]
