"""What schedule primitives record (DESIGN principle 3: schedules are data).

Primitives check legality when called and append these records; the lowering
passes (``placement`` .. ``loop_nests``) turn them into loops.  Relations are TVM's: a split
turns one IterVar into (outer, inner), a fuse two into one.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

from ..errors import SourceLoc
from ..ir import nodes as n


@dataclass(frozen=True, eq=False)
class Split:
    """``parent = outer * inner_extent + inner``; give ``factor`` (inner extent) or ``nparts``."""

    parent: n.IterVar
    outer: n.IterVar
    inner: n.IterVar
    factor: int | None
    nparts: int | None
    #: the user's line that called split (for messages about later conflicts)
    loc: SourceLoc | None = None


@dataclass(frozen=True, eq=False)
class Fuse:
    """``fused = outer * extent(inner) + inner``."""

    outer: n.IterVar
    inner: n.IterVar
    fused: n.IterVar
    loc: SourceLoc | None = None


def relation_axes(rel) -> tuple:
    """Every axis a relation (Split or Fuse) names: what it consumed and what it made."""
    if isinstance(rel, Split):
        return (rel.parent, rel.outer, rel.inner)
    return (rel.outer, rel.inner, rel.fused)


class AttachKind(enum.Enum):
    ROOT = "root"
    INLINE = "inline"
    AT = "at"


@dataclass(frozen=True)
class IterAttr:
    """How one leaf axis becomes a loop."""

    kind: n.ForKind = n.ForKind.SERIAL
    thread: n.ThreadTag | None = None


@dataclass(frozen=True)
class Tensorize:
    axis: n.IterVar
    intrin: object
    loc: SourceLoc | None = None


def where(loc: SourceLoc | None) -> str:
    """`` at file.py:12`` for a recorded call, or nothing when unknown."""
    return "" if loc is None else f" at {loc.short}"
