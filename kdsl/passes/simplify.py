"""simplify: fold constants, prove guards, drop empty and unit loops.

Array extents are known to be non-negative.

Assumes: any loop IR.  Guarantees: the same program with index arithmetic in
canonical form, provably-true guards removed, constant-extent-1 loops (except
GPU-bound ones) replaced by their index, and nested sequences flattened.
"""
from __future__ import annotations

import dataclasses

from ..ir import nodes as n
from ..ir.simplify import simplify_stmt


def shape_ranges(func: n.LoweredFunc) -> dict:
    """Var -> (0, None) for every scalar of ``func`` bound to an array extent."""
    bindings = func.attrs.get("bindings", ())
    return {v: (0, None) for v, b in zip(func.scalars, bindings) if b[0] == "shape"}


def simplify_pass(func: n.LoweredFunc) -> n.LoweredFunc:
    """Simplify every expression of ``func``, knowing that array extents are >= 0."""
    body = simplify_stmt(func.body, shape_ranges(func))
    return func if body is func.body else dataclasses.replace(func, body=body)
