"""Storage scopes of attached stages and the loops a scope is shared across (not a pass).

Used by ``bound_inference`` (which loops a buffer's region is relaxed over) and ``storage``
(which scope a buffer gets, where a shared buffer is allocated), so both agree.

- The default scope of a stage attached inside loops: LOCAL inside a threadIdx loop, SHARED
  inside only blockIdx loops, LOCAL inside plain loops; GLOBAL at the root.
- A buffer is shared by every iteration of the enclosing loops bound to a tag its scope
  spans (``shares``): SHARED spans threadIdx and vthread loops (all threads of a block see
  one copy), GLOBAL spans block, thread and vthread loops, LOCAL (and warp fragments) none.
  Its region is the union over those loops (the execution model of BOUND loops,
  notes/GPU_PLAN.md: all loops of one tag in a kernel are the same hardware index).
"""
from __future__ import annotations

from ..ir import nodes as n
from ..schedule.records import AttachKind, IterAttr

_NONE = IterAttr()


def attr_table(handles) -> dict:
    """IterVar -> IterAttr for every leaf of ``handles`` (the loop's kind and thread tag)."""
    return {iv: h.attrs.get(iv, _NONE) for h in handles for iv in h.leaf}


def loop_attrs(table: dict, loops) -> list:
    """The IterAttr of each (IterVar, extent) of ``loops`` (``table`` from ``attr_table``)."""
    return [table.get(iv, _NONE) for iv, _ in loops]


def default_scope(enclosing_attrs) -> n.Scope:
    """The scope of an attached stage's buffer when the schedule set none."""
    tags = [a.thread for a in enclosing_attrs if a.thread is not None]
    if any(t.is_thread for t in tags):
        return n.Scope.LOCAL
    if any(t.is_block for t in tags):
        return n.Scope.SHARED
    return n.Scope.LOCAL if enclosing_attrs else n.Scope.GLOBAL


def stage_scope(h, table: dict, enclosing, whole: bool) -> n.Scope:
    """The scope of stage ``h``'s buffers (``enclosing``: the loops around its attach point;
    ``whole``: its buffer holds its whole domain, allocated at the root)."""
    if h.attach is not AttachKind.AT or whole:
        return h.scope or n.Scope.GLOBAL
    return h.scope or default_scope(loop_attrs(table, enclosing))


def shares(scope: n.Scope, tag: n.ThreadTag) -> bool:
    """True when one buffer of ``scope`` serves every iteration of a loop bound to ``tag``."""
    if scope is n.Scope.SHARED:
        return tag.is_thread or tag.is_vthread
    if scope is n.Scope.GLOBAL:
        return True
    return False


def relaxed_loops(scope: n.Scope, table: dict, enclosing) -> list:
    """The (IterVar, extent) loops of ``enclosing`` that a buffer of ``scope`` is shared across."""
    return [(iv, ext) for (iv, ext), a in zip(enclosing, loop_attrs(table, enclosing))
            if a.thread is not None and shares(scope, a.thread)]


def first_thread_loop(table: dict, enclosing) -> int | None:
    """The position in ``enclosing`` of the outermost loop bound to threadIdx or vthread."""
    for k, a in enumerate(loop_attrs(table, enclosing)):
        if a.thread is not None and (a.thread.is_thread or a.thread.is_vthread):
            return k
    return None
