"""Every IR node class of kdsl, in one closed module (DESIGN principle 1).

Expressions serve both the stage graph (where they may hold ``TensorRead`` and
``Reduce``) and the loop IR (where those are replaced by ``Load`` and loops).
Nodes are frozen dataclasses without behaviour beyond checking their own
invariants.  ``Var``, ``IterVar``, ``Buffer`` and ``Combiner`` compare by
identity: names are only printing hints.  Source locations never take part in
equality.  Kinds are enums.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from .. import dtypes as dt
from ..dtypes import DType


# ----------------------------------------------------------------- enums
class BinOp(enum.Enum):
    """Binary arithmetic.  DIV is true division (floats); FLOORDIV/MOD follow Python's signs."""

    ADD = "+"
    SUB = "-"
    MUL = "*"
    DIV = "/"
    FLOORDIV = "//"
    MOD = "%"
    POW = "**"
    MIN = "min"
    MAX = "max"
    AND = "&"   # bitwise on ints, logical on bool
    OR = "|"
    XOR = "^"
    # integer shifts: defined for a shift amount in [0, bits) only (the frontend guards the
    # rest with numpy's rule); SHR is arithmetic on signed types, logical on unsigned ones
    SHL = "<<"
    SHR = ">>"
    # float math of two operands (C99 / numpy meaning; the value is the libm and CUDA name)
    ATAN2 = "atan2"
    HYPOT = "hypot"
    FMOD = "fmod"          # C's truncated remainder of floats (np.fmod)
    COPYSIGN = "copysign"


#: BinOps that are float math functions (printed as calls; computed in the operand's dtype)
MATH_BINOPS = frozenset({BinOp.ATAN2, BinOp.HYPOT, BinOp.FMOD, BinOp.COPYSIGN})


class CmpOp(enum.Enum):
    EQ = "=="
    NE = "!="
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="


class UnOp(enum.Enum):
    """Unary operations, math functions included (computed in the operand's dtype)."""

    NEG = "-"
    NOT = "~"        # bitwise not on ints, logical not on bool
    ABS = "abs"
    EXP = "exp"
    LOG = "log"
    SQRT = "sqrt"
    RSQRT = "rsqrt"
    SIN = "sin"
    COS = "cos"
    TANH = "tanh"
    ERF = "erf"
    SIGMOID = "sigmoid"
    ISNAN = "isnan"  # result dtype bool
    FLOOR = "floor"
    CEIL = "ceil"
    # numpy's other float ufuncs (value: the libm / CUDA function name; float16 computes in float)
    TAN = "tan"
    SINH = "sinh"
    COSH = "cosh"
    ASIN = "asin"
    ACOS = "acos"
    ATAN = "atan"
    ASINH = "asinh"
    ACOSH = "acosh"
    ATANH = "atanh"
    LOG1P = "log1p"
    EXPM1 = "expm1"
    LOG2 = "log2"
    LOG10 = "log10"
    EXP2 = "exp2"
    CBRT = "cbrt"
    RINT = "rint"     # round half to even (np.rint)
    TRUNC = "trunc"
    #: reinterpret the operand's bits as the Unary's dtype (equal item sizes; ``x.view(d)``)
    BITCAST = "bitcast"


#: UnOps that are libm-style float functions added for numpy's ufuncs (same handling everywhere)
LIBM_UNOPS = frozenset({UnOp.TAN, UnOp.SINH, UnOp.COSH, UnOp.ASIN, UnOp.ACOS, UnOp.ATAN,
                        UnOp.ASINH, UnOp.ACOSH, UnOp.ATANH, UnOp.LOG1P, UnOp.EXPM1, UnOp.LOG2,
                        UnOp.LOG10, UnOp.EXP2, UnOp.CBRT, UnOp.RINT, UnOp.TRUNC})


class IterKind(enum.Enum):
    SPATIAL = "spatial"
    REDUCE = "reduce"


class ForKind(enum.Enum):
    SERIAL = "serial"
    PARALLEL = "parallel"
    VECTORIZED = "vectorized"
    UNROLLED = "unrolled"
    BOUND = "bound"   # bound to a GPU block/thread/vthread index: see For.thread


class ThreadTag(enum.Enum):
    BLOCK_X = "blockIdx.x"
    BLOCK_Y = "blockIdx.y"
    BLOCK_Z = "blockIdx.z"
    THREAD_X = "threadIdx.x"
    THREAD_Y = "threadIdx.y"
    THREAD_Z = "threadIdx.z"
    VTHREAD_X = "vthread.x"
    VTHREAD_Y = "vthread.y"

    @property
    def is_block(self) -> bool:
        return self.value.startswith("blockIdx")

    @property
    def is_thread(self) -> bool:
        return self.value.startswith("threadIdx")

    @property
    def is_vthread(self) -> bool:
        return self.value.startswith("vthread")


class Scope(enum.Enum):
    """Where a buffer lives.  GLOBAL: device (or host) memory every thread sees; SHARED: one
    copy per GPU block; LOCAL: one copy per thread; the WMMA scopes: a warp's tensor-core
    fragments (``tensorize`` with ``kd.intrin.wmma``), owned by the 32 threads of a warp."""

    GLOBAL = "global"
    SHARED = "shared"
    LOCAL = "local"
    WMMA_MATRIX_A = "wmma.matrix_a"
    WMMA_MATRIX_B = "wmma.matrix_b"
    WMMA_ACCUMULATOR = "wmma.accumulator"

    @property
    def is_fragment(self) -> bool:
        return self.value.startswith("wmma.")


# ----------------------------------------------------------------- expressions
@dataclass(frozen=True)
class Expr:
    """Base of all expressions; every expression has a dtype."""

    dtype: DType


@dataclass(frozen=True, eq=False)
class Var(Expr):
    """A scalar variable (loop index, shape, stride or scalar argument); identity-compared."""

    name: str = "v"

    # eq=False alone would inherit Expr's field-wise __eq__/__hash__: compare by identity.
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"Var({self.name})"


def var(name: str, dtype: DType = dt.index) -> Var:
    return Var(dtype, name)


@dataclass(frozen=True)
class Const(Expr):
    """A literal of ``dtype`` (value is a Python bool/int/float)."""

    value: Any = 0

    def __post_init__(self):
        if not isinstance(self.value, (bool, int, float)):
            raise TypeError(f"Const value must be a Python scalar, got {type(self.value).__name__}")


def const(value, dtype: DType | None = None) -> Const:
    if dtype is None:
        dtype = dt.bool_ if isinstance(value, bool) else dt.index if isinstance(value, int) else dt.float64
    if dtype.is_bool:
        value = bool(value)
    elif dtype.is_int:
        value = int(value)
    else:
        value = float(value)
    return Const(dtype, value)


@dataclass(frozen=True)
class Binary(Expr):
    op: BinOp = BinOp.ADD
    a: Expr = None
    b: Expr = None


@dataclass(frozen=True)
class Compare(Expr):
    """A comparison; its dtype is always bool."""

    op: CmpOp = CmpOp.EQ
    a: Expr = None
    b: Expr = None


@dataclass(frozen=True)
class Unary(Expr):
    op: UnOp = UnOp.NEG
    a: Expr = None


@dataclass(frozen=True)
class Select(Expr):
    """``t if cond else f`` evaluated without branching semantics (both sides are pure)."""

    cond: Expr = None
    t: Expr = None
    f: Expr = None


@dataclass(frozen=True)
class Cast(Expr):
    a: Expr = None


@dataclass(frozen=True)
class Load(Expr):
    """Read ``buffer[indices]`` (logical, multi-dimensional indices; strides live on the buffer)."""

    buffer: "Buffer" = None
    indices: tuple = ()


@dataclass(frozen=True)
class TensorRead(Expr):
    """Stage-graph only: read element ``indices`` of a graph tensor (kdsl.graph.Tensor)."""

    tensor: Any = None
    indices: tuple = ()


@dataclass(frozen=True, eq=False)
class Range:
    """The half-open interval [min, min + extent)."""

    min: Expr
    extent: Expr


@dataclass(frozen=True, eq=False)
class IterVar:
    """An axis of a stage: a variable, its domain and whether it is spatial or a reduction."""

    var: Var
    dom: Range
    kind: IterKind = IterKind.SPATIAL

    @property
    def name(self) -> str:
        return self.var.name

    def __repr__(self) -> str:
        return f"IterVar({self.var.name}, {self.kind.value})"


#: Python operators on stage axes: name -> (kdsl.ir.axis_expr builder, op, operands swapped).
#: ``C.set_store_predicate(C.axes[0] * 2 + C.axes[1] < 10)``: IterVar and AxisExpr take their
#: operator methods from this table (``==`` between two IterVars stays identity: IterVars are
#: dict keys; ``-i`` is ``0 - i``).
AXIS_OPERATORS = {
    "__lt__": ("compare", CmpOp.LT, False), "__le__": ("compare", CmpOp.LE, False),
    "__gt__": ("compare", CmpOp.GT, False), "__ge__": ("compare", CmpOp.GE, False),
    **{name: ("arith", op, swap)
       for op, names in ((BinOp.ADD, "add"), (BinOp.SUB, "sub"), (BinOp.MUL, "mul"),
                         (BinOp.FLOORDIV, "floordiv"), (BinOp.MOD, "mod"), (BinOp.DIV, "truediv"))
       for name, swap in ((f"__{names}__", False), (f"__r{names}__", True))},
    "__neg__": ("arith", BinOp.SUB, True),
}


def _axis_operator(how, op, swap):
    def method(self, other=0):
        from . import axis_expr       # the builders live above the IR (they raise ScheduleError)
        build = getattr(axis_expr, how)
        return build(op, other, self) if swap else build(op, self, other)
    return method


for _name, _spec in AXIS_OPERATORS.items():
    setattr(IterVar, _name, _axis_operator(*_spec))


class CombinerKind(enum.Enum):
    """Which built-in reduction kdsl made a ``Combiner`` as."""

    SUM = "sum"
    PROD = "prod"
    MAX = "max"
    MIN = "min"
    ANY = "any"
    ALL = "all"
    ARGMAX = "argmax"
    ARGMIN = "argmin"


@dataclass(frozen=True, eq=False)
class Combiner:
    """A commutative, associative reduction: result_j(lhs, rhs) with identity per value.

    ``lhs``/``rhs`` are Vars standing for the accumulator and the new value
    (one per reduced value: argmax reduces (index, value) pairs).
    ``identity`` holds one expression per value, already in the value's dtype.
    ``kind`` says which built-in reduction kdsl made it as (a ``CombinerKind``: SUM, PROD,
    MAX, MIN, ANY, ALL, ARGMAX, ARGMIN); None for a user's ``kd.reducer``.  Semantics come from
    ``kind`` (or from ``result`` itself), never from ``name``, which only labels output.
    """

    name: str
    lhs: tuple
    rhs: tuple
    result: tuple
    identity: tuple
    kind: CombinerKind | None = None

    def __post_init__(self):
        if self.kind is not None and type(self.kind) is not CombinerKind:
            from ..errors import InternalCompilerError
            raise InternalCompilerError(f"Combiner {self.name!r}: kind {self.kind!r} is not a CombinerKind")


@dataclass(frozen=True)
class Reduce(Expr):
    """Stage-graph only: reduce ``sources`` over ``axes`` with ``combiner``.

    ``value_index`` picks which of the combiner's values this expression is
    (argmax: 0 is the index, 1 the value).  ``condition`` (or None) masks elements.
    """

    combiner: Combiner = None
    sources: tuple = ()
    axes: tuple = ()
    condition: Expr | None = None
    value_index: int = 0


# ----------------------------------------------------------------- buffers
@dataclass(frozen=True, eq=False)
class Buffer:
    """A block of memory: arguments (``param=True``) or temporaries with a scope.

    ``strides`` are in elements, one expression per dimension (may be negative);
    ``None`` means compact row-major.  ``swizzle`` (bytes, 0 or 128) is a physical layout of
    a compact SHARED buffer that only code generators see (``kdsl.gpu.shared_layout``):
    the last dimension is cut into 128-byte column blocks stored one after another (each
    block all rows x 128 bytes), and in each row the 16-byte chunks are permuted by XOR with
    the row index modulo 8 -- the layout Hopper's ``wgmma`` reads.  Indices stay logical:
    executors that index logically ignore it.
    ``empty_reads``: a load in the untaken branch of a select may address it while it is
    empty (kdsl.frontend.access: such a load is dead there); backends then give any value
    without touching memory (an empty array may have no storage at all).
    """

    name: str
    dtype: DType
    shape: tuple
    strides: tuple | None = None
    scope: Scope = Scope.GLOBAL
    param: bool = False
    swizzle: int = 0
    empty_reads: bool = False

    def __repr__(self) -> str:
        return f"Buffer({self.name}, {self.dtype.name}, {self.scope.value})"


# ----------------------------------------------------------------- statements
@dataclass(frozen=True)
class Stmt:
    """Base of all statements."""


@dataclass(frozen=True)
class For(Stmt):
    """``for var in [min, min+extent)`` of ``kind``; BOUND loops carry their ``thread`` tag."""

    var: Var
    min: Expr
    extent: Expr
    kind: ForKind
    body: Stmt
    thread: ThreadTag | None = None

    def __post_init__(self):
        if (self.kind is ForKind.BOUND) != (self.thread is not None):
            raise ValueError("a BOUND loop needs a thread tag and only a BOUND loop has one")


@dataclass(frozen=True)
class IfThenElse(Stmt):
    """``if cond: then else: otherwise``.  ``alternatives``: both branches have the same effect
    (``otherwise`` is the general code, ``then`` a faster copy valid where ``cond`` holds, as
    ``interior_blocks`` makes), so a backend may take ``otherwise`` even where ``cond`` holds,
    i.e. strengthen ``cond`` with assumptions of its own."""

    cond: Expr
    then: Stmt
    otherwise: Stmt | None = None
    alternatives: bool = False


@dataclass(frozen=True)
class Store(Stmt):
    buffer: Buffer
    indices: tuple
    value: Expr


@dataclass(frozen=True)
class Allocate(Stmt):
    """Allocate ``buffer`` (shape, dtype and scope on the buffer) for the extent of ``body``.

    ``double_buffer`` asks backends to multi-buffer it across ``stages`` copies.
    """

    buffer: Buffer
    body: Stmt
    stages: int = 1


@dataclass(frozen=True)
class LetStmt(Stmt):
    var: Var
    value: Expr
    body: Stmt


@dataclass(frozen=True)
class Seq(Stmt):
    stmts: tuple

    def __post_init__(self):
        for s in self.stmts:
            if not isinstance(s, Stmt):
                raise TypeError(f"Seq holds statements, got {type(s).__name__}")


@dataclass(frozen=True)
class Barrier(Stmt):
    """Synchronise the threads of a block (between phases that exchange shared memory)."""

    scope: Scope = Scope.SHARED


@dataclass(frozen=True)
class Evaluate(Stmt):
    """Evaluate an expression for its effect (used for intrinsic calls)."""

    value: Expr


@dataclass(frozen=True)
class CrossThreadReduce(Stmt):
    """Reduce ``values`` across the threads of a block along the ``threads`` tags.

    Per-thread view: it sits inside the BOUND loops of those tags and every thread of the
    block reaches it (like a barrier: never under a condition on the reduced thread indices).
    Each thread contributes ``values`` (one expression per combiner value, e.g. its partial
    sum; a thread with nothing to add contributes the identity).  Afterwards every thread's
    ``results[j][0]`` (LOCAL buffers of shape (1,)) holds ``combiner`` over the threads that
    share its indices along the other tags.  A store predicate (``tid == 0`` by default) then
    picks who writes.  GPU backends lower it to warp shuffles plus shared memory; the core
    ``lower_cross_thread`` pass lowers it to shared-memory phases for sequential executors.
    """

    combiner: Combiner
    values: tuple          # Expr per combiner value
    threads: tuple         # tuple[ThreadTag, ...] reduced over
    results: tuple         # tuple[Buffer, ...] LOCAL, shape (1,)
    #: an inclusive *scan* instead (issue 25): each thread's ``results`` get ``combiner``
    #: over the members of its group up to and including itself, in increasing thread order
    #: (x fastest), earlier values on the left (kdsl.gpu.scan_tiles makes them)
    scan: bool = False


@dataclass(frozen=True)
class AsyncCopy(Stmt):
    """Start copying ``value`` (a ``Load`` of global memory) into ``buffer[indices]`` (shared).

    The copy is only guaranteed complete after a ``WaitGroup`` that covers the commit group
    it belongs to (every AsyncCopy issued before a ``CommitGroup`` joins that group).  Where
    ``predicate`` is false the destination is filled with zero instead (cp.async's src-size
    0).  Sequential executors copy at issue, which is exact: nothing may read the destination
    before the wait.
    """

    buffer: Buffer
    indices: tuple
    value: Expr
    predicate: Expr | None = None


@dataclass(frozen=True)
class CommitGroup(Stmt):
    """Close the group of the AsyncCopies this thread issued since the last commit."""


@dataclass(frozen=True)
class WaitGroup(Stmt):
    """Wait until at most ``pending`` of this thread's committed copy groups are still in flight
    (a ``Barrier`` after it makes the other threads' copies visible)."""

    pending: int = 0


@dataclass(frozen=True)
class CarryLoop(Stmt):
    """A sequential loop carrying whole arrays (``kd.fori_loop`` run inside one kernel).

    ``for var in [min, min+extent)``: each step runs ``body``, which reads the carries of
    the step from ``cur[k]`` and writes every element of the next ones into ``nxt[k]``
    (``cur``/``nxt``: compact GLOBAL buffers bound by this loop, never parameters).  Before
    the first step the carries are the contents of ``inits[k]`` (read only); afterwards
    ``results[k]`` holds the last carries (``inits[k]``'s contents for ``extent <= 0``).
    ``inits``/``results`` are buffers in scope (the function's parameters), compact, of
    ``cur[k]``'s shape and dtype.  Executors ping-pong: a step's ``nxt`` becomes the next
    step's ``cur`` (kdsl.passes.fori_loop builds it; docs/kernels.md, kd.fori_loop).  A carry
    with ``nxt[k] is cur[k]`` is updated in place: ``results[k]`` gets a copy of
    ``inits[k]`` before the first step and every step reads and writes it there.
    """

    var: Var
    min: Expr
    extent: Expr
    inits: tuple
    cur: tuple
    nxt: tuple
    results: tuple
    body: Stmt


@dataclass(frozen=True)
class Launch:
    """Launch dimensions of a device kernel: ``grid`` (x, y, z) blocks as Exprs of the shapes and
    scalars; ``block`` (x, y, z) threads as ints (thread extents are constant per kernel);
    ``dynamic_shared``: the bytes of the kernel's shared buffers whose size is known only at
    launch (an Expr of the scalars, ``kdsl.ir.shared_memory`` lays them out), or None."""

    grid: tuple = ()
    block: tuple = (1, 1, 1)
    dynamic_shared: Expr | None = None


@dataclass(frozen=True)
class DeviceKernel(Stmt):
    """One GPU kernel of a host program, launched on ``launch``; ``body`` still holds its
    block and thread loops (``For`` of kind BOUND), so sequential executors run it as loops
    and a GPU code generator replaces those loops by the block and thread indices."""

    name: str
    launch: Launch
    body: Stmt


@dataclass(frozen=True)
class Intrinsic(Stmt):
    """A backend intrinsic (tensorize target) on buffers, e.g. a WMMA fragment op.

    ``name`` identifies it (``wmma.load_a``...), ``args`` are expressions or buffers.
    """

    name: str
    args: tuple = ()


# ----------------------------------------------------------------- warp-level matrix ops
# (kdsl/ir/warp_nodes.py: defined there on the classes above, re-exported here)
from .warp_nodes import (WMMA_STMTS, WgmmaCommit, WgmmaMma, WgmmaWait, WmmaFill, WmmaLayout,  # noqa: E402,F401
                         WmmaLoad, WmmaMma, WmmaStore)



# ----------------------------------------------------------------- functions
class BindingKind(enum.Enum):
    """Where the call supplies one of ``LoweredFunc.scalars``."""

    SHAPE = "shape"      # buffers[index].shape[dim]
    STRIDE = "stride"    # buffers[index]'s stride along dim, in elements
    SCALAR = "scalar"    # the graph's scalar argument number ``index``


@dataclass(frozen=True)
class Binding:
    """How the runtime fills one scalar of a ``LoweredFunc`` (see ``BindingKind``).

    ``index`` is into ``func.buffers`` (inputs then outputs) for SHAPE/STRIDE,
    into ``graph.scalars`` for SCALAR; ``dim`` is None for SCALAR.
    """

    kind: BindingKind
    index: int
    dim: int | None = None


@dataclass(frozen=True, eq=False)
class TensorizeRequest:
    """``tensorize(axis, intrin)`` on a stage: the loop of ``axis`` (an IterVar of
    ``stage``'s schedule, loop variable ``axis.var``) should become ``intrin``.
    Loops stay scalar (correct) until a backend pass maps them."""

    stage: Any       # kdsl.graph.Stage
    axis: IterVar
    intrin: Any
    loc: Any = None  # the user's tensorize line (kdsl.errors.SourceLoc), for messages


#: keys that were semantic ``LoweredFunc.attrs`` entries and are typed fields now
_TYPED_ATTRS = ("bindings", "tensorize", "launch")


@dataclass(frozen=True, eq=False)
class LoweredFunc:
    """A lowered kernel: parameters in call order and the loop-nest body.

    ``inputs``/``outputs`` are param buffers; ``scalars`` the scalar Vars a call
    must supply (shape sizes, strides, scalar arguments), in a fixed order, each
    filled as its ``bindings`` entry says.  ``tensorize`` lists the schedule's
    tensorize requests.  After the GPU table (``kdsl.gpu.pipeline.PIPELINE``) the body is a
    host program: root ``Allocate``s (the ``workspaces``) around the ``kernels``, each a
    ``DeviceKernel`` with its ``Launch``; sequential tables leave the loops at the root (no
    kernels).  ``attrs`` is for diagnostics only (``pass_times``); nothing may depend on it
    for semantics.
    """

    name: str
    inputs: tuple
    outputs: tuple
    scalars: tuple
    body: Stmt
    attrs: dict = field(default_factory=dict)
    bindings: tuple = ()      # tuple[Binding, ...], one per scalar
    tensorize: tuple = ()     # tuple[TensorizeRequest, ...]
    #: ((shape Var, lo, hi), ...): the sizes each symbolic dim can have in this specialisation
    #: (the schedule's ``size_hints``, from the dispatch key); codegens may rely on them
    #: (the cuda backend proves 32-bit index arithmetic with them)
    size_hints: tuple = ()
    #: buffers of padded caches (``cache_read(pad=True)``): every element of their region is
    #: written, zero where it lies beyond the source array, so a reader may read whole tiles
    padded: tuple = ()
    #: ((Var, Var), ...): sizes every call checks equal (the graph's constraints between two
    #: shape Vars, e.g. A @ B's inner dims); passes may use them as facts
    equal_sizes: tuple = ()

    def __post_init__(self):
        old = [k for k in _TYPED_ATTRS if k in self.attrs]
        if old:
            from ..errors import InternalCompilerError
            raise InternalCompilerError(f"LoweredFunc {self.name!r}: attrs {old} are typed fields now "
                                        "(LoweredFunc.bindings / tensorize / kernels)")

    @property
    def buffers(self) -> tuple:
        return self.inputs + self.outputs

    @property
    def workspaces(self) -> tuple:
        """Buffers of the Allocates at the root (outside every loop and kernel), outermost first:
        the global temporaries a runtime allocates once per call (a GPU: device workspaces)."""
        out, s = [], self.body
        while type(s) is Allocate:
            out.append(s.buffer)
            s = s.body
        return tuple(out)

    @property
    def kernels(self) -> tuple:
        """The ``DeviceKernel``s of the host program, in launch order (() before the GPU table's
        ``device_kernels`` pass, and for sequential targets)."""
        s = self.body
        while type(s) is Allocate:
            s = s.body
        stmts = s.stmts if type(s) is Seq else (s,)
        return tuple(x for x in stmts if type(x) is DeviceKernel)

    def __str__(self) -> str:
        from .printer import format_func   # late: the printer imports this module
        return format_func(self)


EXPR_TYPES = (Var, Const, Binary, Compare, Unary, Select, Cast, Load, TensorRead, Reduce)
STMT_TYPES = (For, IfThenElse, Store, Allocate, LetStmt, Seq, Barrier, Evaluate, Intrinsic,
              CrossThreadReduce, CarryLoop, AsyncCopy, CommitGroup, WaitGroup, DeviceKernel, WgmmaCommit, WgmmaWait) + WMMA_STMTS


# ----------------------------------------------------------------- cached structural hashes
#: the instance attribute holding a node's structural hash once computed (a derived cache:
#: never pickled, skipped by kdsl.runtime.fingerprint; Vars inside hash by identity, so a
#: hash is only valid in the process that computed it)
HASH_ATTR = "_kd_hash"


def _cache_hash(cls) -> None:
    """Wrap the dataclass-generated ``__hash__`` of ``cls`` so each node hashes its tree once:
    the generated one hashes the tuple of fields, i.e. re-hashes the whole subtree on every
    call (dict lookups keyed by expressions in the simplifier and interval analysis)."""
    base = cls.__dict__.get("__hash__")
    if base is None or base is object.__hash__:
        return

    def __hash__(self):
        d = self.__dict__
        h = d.get(HASH_ATTR)
        if h is None:
            h = d[HASH_ATTR] = base(self)   # frozen: write the cache past __setattr__
        return h

    __hash__.__qualname__ = f"{cls.__qualname__}.__hash__"
    cls.__hash__ = __hash__


def _getstate(self):
    """Pickle/copy state without the cached hash (Vars get other identities elsewhere)."""
    d = self.__dict__
    if HASH_ATTR in d:
        d = dict(d)
        del d[HASH_ATTR]
    return d


for _cls in (*EXPR_TYPES, *(c for c in STMT_TYPES if c.__module__ == __name__), Binding):
    _cache_hash(_cls)
del _cls
Expr.__getstate__ = _getstate
Stmt.__getstate__ = _getstate
Binding.__getstate__ = _getstate

# the expression nodes lowering builds most: hand-written __init__/__eq__/__hash__ (same
# meaning, a fraction of the cost; kdsl/ir/fast_nodes.py)
from . import fast_nodes as _fast  # noqa: E402  (the classes above first)
_fast.install(HASH_ATTR, Binary, Compare, Unary, Cast, Const, Select)
del _fast
