"""Device limits a schedule must respect: CUDA's block of at most 1024 threads.

Checked where the extent is known: at ``bind`` (a constant extent of one
loop, and the product of the stage's own thread loops), at the ``threads``
hint of a GPU target, and on the finished schedule (``check_blocks``: the
threads of every stage that runs inside one kernel's blocks, whose block is
the largest extent bound to each threadIdx).
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..ir import nodes as n
from .records import AttachKind, where

#: threads in a CUDA block, and per dimension (x, y, z) of the block
MAX_THREADS = 1024
MAX_DIM = {"threadIdx.x": 1024, "threadIdx.y": 1024, "threadIdx.z": 64}

_HINT = ("a CUDA block holds at most 1024 threads (threadIdx.x and .y at most 1024 each, "
         "threadIdx.z at most 64)")


def const_extent(iv) -> int | None:
    """The loop's extent when it is a constant."""
    e = iv.dom.extent
    return e.value if isinstance(e, n.Const) else None


def check_bind(h, iv, tag) -> None:
    """``h.bind(iv, tag)`` with a thread tag: the loop and the stage's thread loops fit a block."""
    if not tag.is_thread:
        return
    ext = stage_block(h).get(tag.value) if h.attrs.get(iv) is not None else const_extent(iv)
    if ext is not None and ext > MAX_DIM[tag.value]:
        raise ScheduleError(f"bind: loop {iv.name} of stage {h.name} has {ext} iterations, more "
                            f"than the {MAX_DIM[tag.value]} threads {tag.value} can index",
                            hint=f"{_HINT}; split {iv.name} by a smaller factor and bind the inner "
                            f"part (e.g. s[{h.name!r}].split(axis, factor=256))")
    block = stage_block(h)
    total = _product(block)
    if total > MAX_THREADS:
        raise ScheduleError(f"bind: stage {h.name} now spreads over a block of "
                            f"{_shape(block)} = {total} threads, more than a CUDA block holds",
                            hint=f"{_HINT}; use smaller thread tiles (e.g. 16 x 16 or 32 x 8)")


def stage_block(h) -> dict:
    """{threadIdx tag: constant extent} of the loops of ``h`` bound to thread indices (the
    extents lowering gives them: a split leading to a thread keeps its factor, ``leaf_values``)."""
    from .schedule import leaf_values
    bound = [(iv, attr.thread) for iv, attr in h.attrs.items()
             if iv in h.leaf and attr.thread is not None and attr.thread.is_thread]
    if not bound:
        return {}
    exts = leaf_values(h)[1]
    out = {}
    for iv, tag in bound:
        e = exts.get(iv, iv.dom.extent)
        ext = e.value if isinstance(e, n.Const) else None
        if ext is not None:
            out[tag.value] = max(out.get(tag.value, 1), ext)
    return out


def _product(block: dict) -> int:
    p = 1
    for v in block.values():
        p *= v
    return p


def _shape(block: dict) -> str:
    return " x ".join(f"{v} ({k})" for k, v in sorted(block.items()))


def check_threads_hint(value, loc) -> None:
    """The cuda ``threads`` hint (an int or a block shape) fits a CUDA block."""
    dims = (value,) if isinstance(value, int) else tuple(value)
    total = 1
    for d in dims:
        total *= d
    names = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
    over = [(nm, d) for nm, d in zip(names, dims) if d > MAX_DIM[nm]]
    if total > MAX_THREADS or over:
        what = f"{over[0][1]} threads along {over[0][0]}" if over and total <= MAX_THREADS else \
            f"{total} threads"
        raise ScheduleError(f"schedule hint threads={value!r} asks for blocks of {what}, more than "
                            "a CUDA block holds", hint=f"{_HINT}: e.g. threads=256 or threads=(32, 8)",
                            loc=loc)


def check_blocks(sched) -> None:
    """Every kernel's block (the stages computed inside one root stage's loops) fits in 1024
    threads; the error is at the bind line of the stage with the most threads."""
    groups: dict = {}
    for h in sched.stages:
        if h.attach is AttachKind.INLINE:
            continue
        root = h
        while root.attach is AttachKind.AT:
            root = root.attach_stage
        groups.setdefault(root, []).append(h)
    for root, members in groups.items():
        block: dict = {}
        for h in members:
            for tag, ext in stage_block(h).items():
                block[tag] = max(block.get(tag, 1), ext)
        total = _product(block)
        if total <= MAX_THREADS:
            continue
        worst = max(members, key=lambda h: _product(stage_block(h)))
        locs = [loc for iv, loc in worst.bind_locs.items() if iv in worst.leaf and loc is not None]
        names = ", ".join(h.name for h in members if stage_block(h))
        raise ScheduleError(f"the kernel of stage {root.name} runs blocks of {_shape(block)} = {total} "
                            f"threads (the largest extent bound to each threadIdx by {names}), more "
                            f"than a CUDA block holds{where(locs[-1]) if locs else ''}",
                            hint=f"{_HINT}; bind smaller loops (split by a smaller factor)",
                            loc=locs[-1] if locs else None)
