"""The stage graph: what tracing produces and what schedules act on.

A ``Graph`` has parameters (input ``Tensor``s and scalar ``Var``s, in call
order), ``Stage``s in topological order and output tensors.  A stage computes
one tensor: ``out[axes] = body`` where ``body`` is an expression over the
stage's spatial axes, possibly a ``Reduce`` at its root over its reduce axes.
Reads of other tensors are ``TensorRead`` nodes.  Shapes are expressions over
the graph's shape variables (``Var``) or constants.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .dtypes import DType
from .errors import SourceLoc
from .ir import nodes as n
from .ir.visitor import Visitor, collect


@dataclass(eq=False)
class Input:
    """Marks a tensor as the ``index``-th argument of the kernel.

    ``contiguous``: the argument is C-contiguous (its layout class), so its
    strides follow from its shape; otherwise strides are call-time scalars.
    """

    index: int
    contiguous: bool = True


@dataclass(eq=False)
class Tensor:
    """A tensor of the graph: an input (``op`` is ``Input``) or a stage's output."""

    name: str
    shape: tuple
    dtype: DType
    op: object  # Input | Stage
    #: a read in a kd.where branch may address it where it is empty (never taken there, but
    #: evaluated: kdsl.frontend.access): its loads then give a dummy value, touching no memory
    empty_reads: bool = False

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def is_input(self) -> bool:
        return isinstance(self.op, Input)

    @property
    def stage(self) -> "Stage | None":
        return None if self.is_input else self.op

    def __repr__(self) -> str:
        return f"Tensor({self.name}, {self.dtype.name}, ndim={self.ndim})"


@dataclass(eq=False)
class Stage:
    """``output[axes] = body`` (a Reduce at the root of ``body`` reduces over ``reduce_axes``)."""

    name: str
    axes: tuple
    reduce_axes: tuple
    body: n.Expr
    dtype: DType
    loc: SourceLoc | None = None
    output: Tensor = None
    #: what made it: "compute", an op name ("sum", "matmul", ...), "rfactor", "cache_read", ...
    origin: str = "compute"
    #: a ``kd.scan`` stage's ``ScanInfo`` (kdsl.frontend.scan): it reads its own earlier
    #: steps along one axis, which must stay one sequential loop; None for other stages
    scan: object = None

    def __post_init__(self):
        shape = tuple(ax.dom.extent for ax in self.axes)
        if self.output is None:
            self.output = Tensor(self.name, shape, self.dtype, self)
        # A multi-value reduction (argmax reduces (index, value)) keeps one tensor per
        # combiner value; ``output`` is the one at ``body.value_index``.
        self.values = (self.output,)
        if isinstance(self.body, n.Reduce) and len(self.body.combiner.result) > 1:
            vals = []
            for j, ident in enumerate(self.body.combiner.identity):
                if j == self.body.value_index:
                    vals.append(self.output)
                else:
                    vals.append(Tensor(f"{self.name}.v{j}", shape, ident.dtype, self))
            self.values = tuple(vals)

    @property
    def is_reduction(self) -> bool:
        return isinstance(self.body, n.Reduce)

    @property
    def all_axes(self) -> tuple:
        return tuple(self.axes) + tuple(self.reduce_axes)

    def reads(self) -> list:
        """The tensors this stage reads, each once, in order of first use.

        Cached per body object (schedules replace ``body``, never mutate it): graph walks
        ask every stage for its reads, which must not cost a walk of its body each time.
        """
        cached = self.__dict__.get("_reads")
        if cached is not None and cached[0] is self.body:
            return list(cached[1])
        out, seen = [], set()
        for r in collect(self.body, lambda x: isinstance(x, n.TensorRead)):
            if id(r.tensor) not in seen:
                seen.add(id(r.tensor))
                out.append(r.tensor)
        self._reads = (self.body, tuple(out))
        return out

    def __repr__(self) -> str:
        return f"Stage({self.name})"


@dataclass(frozen=True, eq=False)
class Constraint:
    """A call-time check ``lhs == rhs`` on shapes (from broadcasting, matmul, ...) or on
    scalar arguments.

    A check of a condition is ``lhs`` = the boolean expression, ``rhs`` = ``const(True)``.
    ``error`` is the class raised when it fails (None: ShapeError); when ``detail``
    (``(name, Expr)`` pairs) is given, ``message`` is a ``str.format`` template filled with
    those values for the failing call (kdsl.frontend.access uses it for index checks).
    """

    lhs: n.Expr
    rhs: n.Expr
    message: str
    loc: SourceLoc | None = None
    error: type | None = None
    detail: tuple = ()
    hint: str | None = None


@dataclass(frozen=True, eq=False)
class DomainCheck:
    """A condition over a stage's domain that needs the data, checked before the kernel runs.

    ``value`` (an int64 expression over the IterVars ``axes``, which may read tensors) must lie
    in ``[lo, hi]`` (shape expressions; None: no bound on that side) at every point of the
    domain where ``where`` (a bool expression, or None: everywhere) holds.  The runtime
    computes the min and max of ``value`` over those points with hidden reductions
    (kdsl.runtime.checks) and raises ``error`` with ``message`` formatted with ``{min}``,
    ``{max}``, ``{lo}`` and ``{hi}`` for the failing call.  Indices read from arrays
    (``A[idx[i]]``) use it; so can any op whose validity depends on values (integer powers).
    """

    axes: tuple
    value: n.Expr
    lo: n.Expr | None
    hi: n.Expr | None
    where: n.Expr | None
    message: str
    error: type
    loc: SourceLoc | None = None
    hint: str | None = None
    #: more ``(name, Expr)`` shape values the message uses (``{size}``)
    detail: tuple = ()


@dataclass(eq=False)
class Graph:
    """A traced kernel: parameters, stages (topological order) and outputs."""

    name: str
    params: tuple          # Tensor (input) or Var (scalar argument), in call order
    stages: list
    outputs: tuple
    constraints: list = field(default_factory=list)
    #: the user's function's source location (for messages)
    loc: SourceLoc | None = None
    #: DomainCheck records: data-dependent conditions checked before each run
    data_checks: list = field(default_factory=list)

    @property
    def inputs(self) -> tuple:
        return tuple(p for p in self.params if isinstance(p, Tensor))

    @property
    def scalars(self) -> tuple:
        return tuple(p for p in self.params if isinstance(p, n.Var))

    def stage(self, name: str) -> Stage:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(name)

    def readers(self, tensor: Tensor) -> list:
        return [s for s in self.stages if tensor in s.reads()]

    def shape_vars(self) -> list:
        """The symbolic sizes the inputs' shapes use, in parameter order."""
        seen = []
        for t in self.inputs:
            for e in t.shape:
                for v in collect(e, lambda x: isinstance(x, n.Var)):
                    if v not in seen:
                        seen.append(v)
        return seen

    def bind(self, inputs, scalars) -> dict:
        """Var -> value for the scalar parameters and the input shapes' size variables of one
        call (``inputs``: arrays in parameter order, ``scalars``: values)."""
        env = dict(zip(self.scalars, scalars))
        for t, a in zip(self.inputs, inputs):
            for e, size in zip(t.shape, a.shape):
                if type(e) is n.Var and e not in env:
                    env[e] = int(size)
        return env


def live_stages(stages: list, outputs) -> list:
    """The stages of ``stages`` that ``outputs`` (tensors) need, in the order given."""
    need, todo = set(), [t.stage for t in outputs]
    while todo:
        s = todo.pop()
        if s is None or id(s) in need:
            continue
        need.add(id(s))
        todo += [t.stage for t in s.reads()]
    return [s for s in stages if id(s) in need]


def topological(stages: list, outputs) -> list:
    """Order ``stages`` so that producers come before their readers (stable).

    A depth-first post-order with an explicit stack: a chain of thousands of stages is
    ordered without recursion.
    """
    order, seen = [], set()
    for root in stages:
        if id(root) in seen:
            continue
        seen.add(id(root))
        stack = [(root, iter(root.reads()))]
        while stack:
            s, it = stack[-1]
            for t in it:
                p = t.stage
                if p is not None and id(p) not in seen:
                    seen.add(id(p))
                    stack.append((p, iter(p.reads())))
                    break
            else:
                stack.pop()
                order.append(s)
    return order
