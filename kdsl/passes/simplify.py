"""simplify: fold constants, prove guards, drop empty and unit loops.

Assumes: any loop IR.  Guarantees: the same program with index arithmetic in
canonical form, provably-true guards removed, constant-extent-1 loops (except
GPU-bound ones) replaced by their index, and nested sequences flattened.
"""
from __future__ import annotations

import dataclasses

from ..ir import nodes as n
from ..ir.simplify import simplify_stmt


def simplify_pass(func: n.LoweredFunc) -> n.LoweredFunc:
    """Simplify every expression of ``func``."""
    body = simplify_stmt(func.body)
    return func if body is func.body else dataclasses.replace(func, body=body)
