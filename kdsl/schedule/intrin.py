"""Tensor intrinsics that ``tensorize`` can map a loop nest onto.

``kd.intrin.wmma(m, n, k)`` is a warp-level matrix multiply-accumulate (CUDA tensor cores,
nvcuda::wmma): ``D = A @ B + C`` on an m x k tile of A, a k x n tile of B and m x n tiles
of C and D.  One intrinsic object serves the four stages of a WMMA schedule: the loads of
A and B into ``wmma.matrix_a``/``wmma.matrix_b`` fragments, the accumulation into a
``wmma.accumulator`` (its zero init becomes a fill) and the store out of it; the
``tensorize`` pass (``kdsl.gpu.tensorize``) checks each nest against what it declares.

``kd.intrin.wgmma(n)`` is the Hopper form (sm_90): the operands of the multiply-accumulate
are tiles of *shared* buffers, read by the tensor cores directly (no fragment loads), and
four warps multiply together.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes as dt

_SHAPES = ((16, 16, 16), (32, 8, 16), (8, 32, 16))
_LAYOUTS = ("row_major", "col_major")


def _check_types_and_layouts(obj, name: str) -> None:
    """The checks both intrinsics share: 16-bit inputs, an accumulator they take (float32;
    float16 for float16 inputs where ``obj`` allows it), known layouts; the dtypes normalised
    on ``obj`` (a frozen dataclass)."""
    from ..errors import ScheduleError
    try:
        d, acc = dt.as_dtype(obj.dtype), dt.as_dtype(obj.acc_dtype)
    except TypeError as e:
        raise ScheduleError(f"kd.intrin.{name}: {e}",
                            hint="pass numpy dtype names such as 'float16' or 'float32'") from None
    if d not in (dt.float16, dt.bfloat16):
        raise ScheduleError(f"kd.intrin.{name}: inputs of {d.name} are not supported",
                            hint="tensor cores take float16 or bfloat16 inputs")
    f16_acc = name == "wmma" and acc is dt.float16 and d is dt.float16
    if acc is not dt.float32 and not f16_acc:
        raise ScheduleError(f"kd.intrin.{name}: a {acc.name} accumulator with {d.name} inputs is not "
                            "supported", hint="accumulate in float32")
    object.__setattr__(obj, "dtype", d)
    object.__setattr__(obj, "acc_dtype", acc)
    for field in ("layout_a", "layout_b", "layout_c"):
        if getattr(obj, field) not in _LAYOUTS:
            raise ScheduleError(f"kd.intrin.{name}: {field}={getattr(obj, field)!r} is not a layout",
                                hint="use 'row_major' or 'col_major'")


def _text(obj, name: str, sizes) -> str:
    """``name(sizes, dtype=.., layout_x=..)`` with the fields that differ from the defaults."""
    extra = [f"{f}={getattr(obj, f)!r}" for f in ("layout_a", "layout_b", "layout_c")
             if getattr(obj, f) != "row_major"]
    if obj.dtype is not dt.float16:
        extra.insert(0, f"dtype={obj.dtype.name}")
    return f"{name}({', '.join([str(x) for x in sizes] + extra)})"


@dataclass(frozen=True)
class WMMA:
    """A warp-level matrix multiply-accumulate tile of shape m x n x k (CUDA tensor cores).

    ``dtype``: the inputs' type (float16 or bfloat16); ``acc_dtype``: the accumulator's
    (float32; float16 too for float16 inputs).  ``layout_a``/``layout_b``/``layout_c``: how
    A, B and the stored C lie in the memory they are loaded from / stored to: "row_major"
    (the tile's rows along the buffer's next-to-last dimension) or "col_major".
    """

    m: int
    n: int
    k: int
    dtype: object = dt.float16
    acc_dtype: object = dt.float32
    layout_a: str = "row_major"
    layout_b: str = "row_major"
    layout_c: str = "row_major"

    def __post_init__(self):
        from ..errors import ScheduleError
        if (self.m, self.n, self.k) not in _SHAPES:
            raise ScheduleError(f"kd.intrin.wmma({self.m}, {self.n}, {self.k}) is not a WMMA shape",
                                hint="use (16, 16, 16), (32, 8, 16) or (8, 32, 16)")
        _check_types_and_layouts(self, "wmma")

    def __str__(self) -> str:
        return _text(self, "wmma", (self.m, self.n, self.k))


@dataclass(frozen=True)
class WGMMA:
    """A warp's share of a Hopper warpgroup matrix multiply-accumulate (``wgmma.mma_async``,
    sm_90): ``D = A @ B + C`` on a 16 x k tile of A and a k x n tile of B, both in shared
    memory, into the warp's 16 x n accumulator tile (k = 16; n a multiple of 8 up to 256).

    A schedule gives each warp 16 rows of the product; four consecutive warps (threadIdx.y
    4g..4g+3, threadIdx.x being the 32 lanes) whose A rows follow each other and who share the
    B tile run as one ``m64nNk16`` instruction.  Only the multiply-accumulate reads shared
    memory: the accumulator's init and its store out are tensorized with the same intrinsic
    (a ``wmma.accumulator`` fragment, as with ``wmma``).  kdsl lays the shared tiles out as the
    tensor cores read them (a 128-byte swizzle), so their rows (the last dimension) must be a
    multiple of 128 bytes (64 elements).  ``layout_a``/``layout_b``: how the tiles lie in their
    shared buffers (``row_major``: the tile's rows along the buffer's next-to-last dimension);
    ``layout_c``: how the stored accumulator lies in its destination.
    """

    n: int
    dtype: object = dt.float16
    acc_dtype: object = dt.float32
    layout_a: str = "row_major"
    layout_b: str = "row_major"
    layout_c: str = "row_major"
    m: int = 16
    k: int = 16

    def __post_init__(self):
        from ..errors import ScheduleError
        if not (isinstance(self.n, int) and 8 <= self.n <= 256 and self.n % 8 == 0):
            raise ScheduleError(f"kd.intrin.wgmma({self.n!r}): n must be a multiple of 8 from 8 to 256",
                                hint="e.g. kd.intrin.wgmma(128) or kd.intrin.wgmma(256)")
        if (self.m, self.k) != (16, 16):
            raise ScheduleError(f"kd.intrin.wgmma: a warp's tile is 16 x n x 16, not {self.m} x n x {self.k}",
                                hint="kd.intrin.wgmma(n) fixes m = k = 16: give only n")
        _check_types_and_layouts(self, "wgmma")

    def __str__(self) -> str:
        return _text(self, "wgmma", (self.n,))


def wgmma(n: int = 256, *, dtype=dt.float16, layout_a: str = "row_major", layout_b: str = "row_major",
          layout_c: str = "row_major") -> WGMMA:
    """A warp's 16 x n x 16 share of a Hopper ``wgmma`` (operands in shared memory) for
    ``tensorize``; float16/bfloat16 inputs, float32 accumulation."""
    return WGMMA(n, dtype, dt.float32, layout_a, layout_b, layout_c)


def wmma(m: int = 16, n: int = 16, k: int = 16, *, dtype=dt.float16, acc_dtype=dt.float32,
         layout_a: str = "row_major", layout_b: str = "row_major", layout_c: str = "row_major") -> WMMA:
    """The WMMA tile for ``tensorize`` (float16/bfloat16 inputs, float32 accumulation)."""
    return WMMA(m, n, k, dtype, acc_dtype, layout_a, layout_b, layout_c)


class BlockIntrinsic:
    """A thread block's whole share of a group of stages, computed by one hand-written device
    routine (a backend's fused kernel body: flash attention's tiles streamed through shared
    memory, products on tensor cores, a softmax in registers), for ``tensorize``.

    ``s[out].tensorize(axis, op)`` on a loop bound to a block index keeps that loop and makes
    the GPU ``tensorize`` pass replace its body (the nests of the stages attached there and the
    output's own) by ``op.build(loop, func)``: an IR statement, typically a thread loop around
    an ``n.Intrinsic`` whose first argument is ``op``.  Executors run such an Intrinsic through
    ``op.simt(executor, stmt)`` (the SIMT interpreter: the block's semantics in numpy) and code
    generators through their own method (kdsl_cuda: ``op.cuda(printer, stmt, depth)``).
    Subclasses are made by backends' default schedules from the stage graph's structure.
    """

    def build(self, loop, func):
        """The statement replacing ``loop``'s body (``loop``: an ``n.For`` bound to a block
        index; ``func``: the LoweredFunc being tensorized)."""
        raise NotImplementedError

    def simt(self, executor, stmt) -> None:
        """Run ``stmt`` (the Intrinsic ``build`` made) for the executor's current block."""
        raise NotImplementedError
