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


#: type -> ``_child_fields(type)`` (a dict lookup: the walkers ask once per node)
_FIELDS: dict = {}


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
        names = _FIELDS.get(type(node))
        if names is None:
            names = _FIELDS[type(node)] = _child_fields(type(node))
        for name in names:
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
        t = type(node)
        if t is n.Allocate and type(self).generic is Mutator.generic and not hasattr(
                self, "visit_Allocate"):
            chain, inner = allocate_chain(node)
            return rewrap(chain, self.visit(inner))
        names = _FIELDS.get(t)
        if names is None:
            names = _FIELDS[t] = _child_fields(t)
        changes = None
        for name in names:
            old = getattr(node, name)
            new = self._mutate_value(old)
            if new is not old:
                if changes is None:
                    changes = {}
                changes[name] = new
        if changes is None:
            return node
        return dataclasses.replace(node, **changes)

    def _mutate_value(self, v):
        k = _WALK.get(type(v))
        if k is None:
            k = _walk_kind(type(v))
        if type(k) is tuple:         # a node
            return self.visit(v)
        if k is _TUPLE:
            out = tuple([self._mutate_value(x) for x in v])
            for a, b in zip(out, v):
                if a is not b:
                    return out
            return v
        if k is _RANGE:
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


#: type -> what ``collect`` pushes for a value of that type: a node's child field names,
#: or one of the markers below (filled lazily by ``_walk_kind``)
_WALK: dict = {}
_TUPLE, _RANGE, _ITERVAR, _LEAF = "tuple", "range", "itervar", "leaf"


def _walk_kind(t):
    if issubclass(t, _NODE_BASES):
        k = tuple(reversed(_child_fields(t)))    # pushed last-first: popped in field order
    elif issubclass(t, tuple):
        k = _TUPLE
    elif issubclass(t, n.Range):
        k = _RANGE
    elif issubclass(t, n.IterVar):
        k = _ITERVAR
    else:
        k = _LEAF
    _WALK[t] = k
    return k


def collect(node, pred) -> list:
    """All nodes below (and including) ``node`` for which ``pred`` holds, in pre-order.

    Iterative (an explicit stack): it walks stage bodies and whole kernels of any depth.
    (Hot: lowering calls it thousands of times, so it dispatches on ``type`` through a table.)
    """
    found, stack = [], [node]
    pop, push, walk = stack.pop, stack.append, _WALK
    while stack:
        v = pop()
        k = walk.get(type(v))
        if k is None:
            k = _walk_kind(type(v))
        if type(k) is tuple:         # a node
            if pred(v):
                found.append(v)
            for name in k:
                push(getattr(v, name))
        elif k is _TUPLE:
            stack.extend(reversed(v))
        elif k is _RANGE:
            push(v.extent)
            push(v.min)
        elif k is _ITERVAR:
            push(v.dom)
    return found


def collect_stmts(node, pred) -> list:
    """``collect(node, pred)`` for a ``pred`` that holds for statements only (a Store, an
    Allocate, a bound loop): the same list in the same order, without walking expressions
    (they never hold statements), so a few times faster on whole kernels."""
    found, stack = [], [node]
    pop, push, walk, Expr = stack.pop, stack.append, _WALK, n.Expr
    while stack:
        v = pop()
        t = type(v)
        k = walk.get(t)
        if k is None:
            k = _walk_kind(t)
        if type(k) is tuple:
            if isinstance(v, Expr):
                continue
            if pred(v):
                found.append(v)
            for name in k:
                push(getattr(v, name))
        elif k is _TUPLE:
            stack.extend(reversed(v))
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


def _var_list(node) -> list:
    """``collect(node, lambda x: isinstance(x, n.Var))`` without a call per node."""
    found, stack = [], [node]
    pop, push, walk, Var = stack.pop, stack.append, _WALK, n.Var
    while stack:
        v = pop()
        t = type(v)
        if t is Var:
            found.append(v)
            continue
        k = walk.get(t)
        if k is None:
            k = _walk_kind(t)
        if type(k) is tuple:
            for name in k:
                push(getattr(v, name))
        elif k is _TUPLE:
            stack.extend(reversed(v))
        elif k is _RANGE:
            push(v.extent)
            push(v.min)
        elif k is _ITERVAR:
            push(v.dom)
    return found


def free_vars(node) -> set:
    """The Vars used in ``node`` (loop variables bound inside are included)."""
    return set(_var_list(node))


def uses_var(node, v) -> bool:
    return any(x is v for x in _var_list(node))
