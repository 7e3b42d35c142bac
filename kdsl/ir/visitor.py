"""Traversal of IR trees by dispatch table (DESIGN principle 5).

``Mutator`` rebuilds a tree bottom-up; a subclass overrides ``visit_<Class>``
for the nodes it cares about and inherits a generic rebuild for the rest.
A mutator returns the very same object when nothing below it changed, so
passes can cheaply tell whether they did anything.  ``Visitor`` walks without
rebuilding.  Children are the fields holding nodes, tuples of nodes, Ranges
and IterVars; Buffers and Combiners are leaves (walk them explicitly if needed).

Depth: expressions are shallow (tracing bounds their depth, see
kdsl.frontend.array.MAX_DEPTH), but a kernel of thousands of stages nests
thousands of ``Allocate`` statements directly in one another.  The generic
walks step through such a chain in a loop (``allocate_chain``/``rewrap``), and
so must every walker that handles ``Allocate`` itself; ``collect`` (and
``free_vars``, ``uses_var``) never recurse at all.
"""
from __future__ import annotations

import dataclasses
from functools import lru_cache

from . import nodes as n

_NODE_BASES = (n.Expr, n.Stmt)


@lru_cache(maxsize=None)
def _child_fields(cls) -> tuple:
    """Names of the fields of ``cls`` that may hold sub-nodes."""
    skip = {"dtype", "name", "op", "kind", "thread", "buffer", "combiner", "tensor", "value_index",
            "stages", "scope", "launch", "pending", "threads", "results"}
    if cls is n.Const:
        return ()
    return tuple(f.name for f in dataclasses.fields(cls) if f.name not in skip)


def _is_node(x) -> bool:
    return isinstance(x, _NODE_BASES)


def allocate_chain(s) -> tuple[list, object]:
    """The Allocates nested directly in one another from ``s`` on (outermost first) and the
    statement inside the innermost one: walkers loop over the chain instead of recursing."""
    chain = []
    while type(s) is n.Allocate:
        chain.append(s)
        s = s.body
    return chain, s


def rewrap(chain: list, body):
    """``chain`` (from ``allocate_chain``) around ``body``; unchanged nodes are reused."""
    for a in reversed(chain):
        if body is not a.body:
            a = dataclasses.replace(a, body=body)
        body = a
    return body


class Visitor:
    """Walk a tree, calling ``visit_<Class>(node)`` where defined, else ``generic``."""

    def __init__(self):
        self._table = {}

    def visit(self, node):
        fn = self._table.get(type(node))
        if fn is None:
            fn = getattr(self, "visit_" + type(node).__name__, self.generic)
            self._table[type(node)] = fn
        return fn(node)

    def generic(self, node):
        if type(node) is n.Allocate and self._plain_allocate():
            self.visit(allocate_chain(node)[1])    # an Allocate's only child is its body
            return
        for name in _child_fields(type(node)):
            self._visit_value(getattr(node, name))

    def _plain_allocate(self) -> bool:
        """No subclass hook sees Allocates (so a chain of them may be stepped through)."""
        t = type(self)
        return t.generic is Visitor.generic and not hasattr(self, "visit_Allocate")

    def _visit_value(self, v):
        if _is_node(v):
            self.visit(v)
        elif isinstance(v, tuple):
            for x in v:
                self._visit_value(x)
        elif isinstance(v, n.Range):
            self.visit(v.min)
            self.visit(v.extent)
        elif isinstance(v, n.IterVar):
            self._visit_value(v.dom)


class Mutator:
    """Rebuild a tree, calling ``visit_<Class>(node)`` where defined, else ``generic``.

    ``generic`` mutates the children and returns ``node`` itself when none changed.
    """

    def __init__(self):
        self._table = {}

    def visit(self, node):
        fn = self._table.get(type(node))
        if fn is None:
            fn = getattr(self, "visit_" + type(node).__name__, self.generic)
            self._table[type(node)] = fn
        return fn(node)

    def generic(self, node):
        if type(node) is n.Allocate and type(self).generic is Mutator.generic and not hasattr(
                self, "visit_Allocate"):
            chain, inner = allocate_chain(node)
            return rewrap(chain, self.visit(inner))
        changes = {}
        for name in _child_fields(type(node)):
            old = getattr(node, name)
            new = self._mutate_value(old)
            if new is not old:
                changes[name] = new
        if not changes:
            return node
        return dataclasses.replace(node, **changes)

    def _mutate_value(self, v):
        if _is_node(v):
            return self.visit(v)
        if isinstance(v, tuple):
            out = tuple(self._mutate_value(x) for x in v)
            return v if all(a is b for a, b in zip(out, v)) else out
        if isinstance(v, n.Range):
            mn, ex = self.visit(v.min), self.visit(v.extent)
            return v if (mn is v.min and ex is v.extent) else n.Range(mn, ex)
        return v


class Substitute(Mutator):
    """Replace Vars by expressions (``mapping``: Var -> Expr)."""

    def __init__(self, mapping: dict):
        super().__init__()
        self.mapping = mapping

    def visit_Var(self, v):
        return self.mapping.get(v, v)


def substitute(node, mapping: dict):
    """``node`` with every Var in ``mapping`` replaced (same object if none occurs)."""
    if not mapping:
        return node
    return Substitute(mapping).visit(node)


def collect(node, pred) -> list:
    """All nodes below (and including) ``node`` for which ``pred`` holds, in pre-order.

    Iterative (an explicit stack): it walks stage bodies and whole kernels of any depth.
    """
    found, stack = [], [node]
    while stack:
        v = stack.pop()
        if isinstance(v, _NODE_BASES):
            if pred(v):
                found.append(v)
            fields = _child_fields(type(v))
            for name in reversed(fields):
                stack.append(getattr(v, name))
        elif isinstance(v, tuple):
            stack.extend(reversed(v))
        elif isinstance(v, n.Range):
            stack.append(v.extent)
            stack.append(v.min)
        elif isinstance(v, n.IterVar):
            stack.append(v.dom)
    return found


def any_statement(s, pred) -> bool:
    """Whether ``pred`` holds for ``s`` or a statement below it, walking statements only (never
    expressions) and stopping at the first: cheap enough to run on every CPU lowering, and
    iterative (a chain of thousands of stages nests thousands of allocations)."""
    stack = [s]
    while stack:
        x = stack.pop()
        if pred(x):
            return True
        t = type(x)
        if t is n.Seq:
            stack.extend(x.stmts)
        elif t is n.IfThenElse:
            stack.append(x.then)
            if x.otherwise is not None:
                stack.append(x.otherwise)
        elif t in (n.For, n.Allocate, n.LetStmt, n.DeviceKernel, n.CarryLoop):
            stack.append(x.body)
    return False


def free_vars(node) -> set:
    """The Vars used in ``node`` (loop variables bound inside are included)."""
    return set(collect(node, lambda x: isinstance(x, n.Var)))


def uses_var(node, v) -> bool:
    return any(x is v for x in collect(node, lambda x: isinstance(x, n.Var)))
