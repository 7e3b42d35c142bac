"""``kd.fori_loop(lower, upper, body, init)``: a loop over a run-time count carrying arrays.

JAX's meaning: ``carry = init; for i in range(lower, upper): carry = body(i, carry)``;
the result is the last carry (``init`` itself for zero or negative counts).  ``init`` is
an array or a tuple/list of arrays (0-d arrays for scalars); ``body(i, carry)`` returns a
carry of the same structure, shapes and dtypes.  ``lower``/``upper`` are ints, scalar
kernel arguments or shape expressions (``A.shape[0] - 1``): never unrolled while tracing.

Tracing runs ``body`` once, on placeholder arrays: the stages it makes that depend on the
carry or on ``i`` form the *body graph* (a closed kdsl Graph: the carries, the arrays it
reads from outside, the enclosing kernel's inputs and scalars and ``i`` are its
parameters; its outputs are the new carries).  Stages the body makes that depend on
neither are loop-invariant: they stay in the enclosing graph and run once.  The loop's
results are ``LoopStage``s of the enclosing graph (one per carry, all sharing one
``LoopInfo``).  kdsl.runtime.fori_program cuts a graph with loops into parts at its
loops and runs them: each part and each body is compiled by the backend like any
kernel (schedules and hints apply to their stages); on backends that run loops inside a
kernel (cpu, interp) the body is compiled as the whole loop (kdsl.passes.fori_loop),
elsewhere the loop runs on the host; both ping-pong two buffers per carry.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .. import dtypes as dt
from ..errors import KernelError, ShapeError, user_location
from ..graph import Input, Stage, Tensor
from ..ir import make as mk
from ..ir import nodes as n
from ..ir.simplify import simplify
from ..ir.visitor import collect, free_vars
from . import context
from .array import Array, from_tensor, scalar
from .ops import asarray, materialize
from .stages import new_axis


@dataclass(eq=False)
class LoopInfo:
    """One ``kd.fori_loop``: what the enclosing graph and the runtime need of it."""

    lower: n.Expr             # int64 expressions over the enclosing graph's scalars/shapes
    upper: n.Expr
    index: n.Var              # the body's ``i``
    placeholders: tuple       # body-side carries (Tensors, op=Input(k))
    body_stages: list         # the body's stages (read placeholders/captured tensors)
    body_results: tuple       # body-side Tensors: the new carries
    inits: tuple              # enclosing-side Tensors: the initial carries (fresh copies)
    captured: tuple           # enclosing-side Tensors the body reads
    results: list             # enclosing-side Tensors (LoopStage outputs), None if unused
    ctx: object = None        # the trace (sizes unified later are resolved from it)
    loc: object = None
    cache: dict = field(default_factory=dict)   # the closed body graph, built once
    #: ``captured`` as traced (the tensors the body's stages read); a loop nested in another
    #: loop's body gets ``captured`` mapped to the enclosing body graph's tensors
    traced_captured: tuple = ()
    #: call-time checks of the body that use ``i``: checked at each step
    constraints: tuple = ()


class LoopStage(Stage):
    """The ``k``-th result of a ``kd.fori_loop`` in the enclosing graph (its body is a
    placeholder constant: the runtime computes it; ``reads()`` lists the loop's inputs)."""

    loop: LoopInfo = None
    carry: int = 0

    def reads(self) -> list:
        out, seen = [], set()
        for t in tuple(self.loop.inits) + tuple(self.loop.captured):
            if id(t) not in seen:
                seen.add(id(t))
                out.append(t)
        return out


def has_loops(graph) -> bool:
    """Whether ``graph`` runs a ``kd.fori_loop`` (then kdsl.runtime.fori_program runs it)."""
    return any(isinstance(s, LoopStage) for s in graph.stages)


# ----------------------------------------------------------------- the public function
def fori_loop(lower, upper, body, init):
    """``carry = init; for i in range(lower, upper): carry = body(i, carry)`` (module doc)."""
    ctx = context.current()
    loc = user_location()
    lo, hi = _bound(lower, "lower", loc), _bound(upper, "upper", loc)
    if not callable(body):
        raise KernelError(f"kd.fori_loop's body must be a function body(i, carry), got "
                          f"{type(body).__name__}", loc=loc,
                          hint="kd.fori_loop(0, n, lambda i, x: x + 1, x0)")
    tupled = isinstance(init, (tuple, list))
    inits = [_carry_array(x, k, loc) for k, x in enumerate(init if tupled else [init])]
    for a in inits:
        _whole_arrays(a, ctx, loc)
    if not inits:
        raise KernelError("kd.fori_loop needs at least one carried array", loc=loc,
                          hint="pass init=x (an array) or a tuple of arrays")
    # the loop only reads init's arrays (its steps write buffers of their own): a computed
    # array or a C-contiguous argument is read in place; other values are computed first
    init_ts = [x.tensor if _readable(x) else materialize(x, "fori_init", loc).tensor
               for x in inits]
    index = n.Var(dt.int64, ctx.unique("i"))
    holders = tuple(Tensor(ctx.unique("carry"), t.shape, t.dtype, Input(k, True))
                    for k, t in enumerate(init_ts))
    before, ncons = len(ctx.stages), len(ctx.constraints)
    args = [from_tensor(h, op="carry") for h in holders]
    out = body(scalar(index, weak=True, op="i"), _like(init, args) if tupled else args[0])
    outs = _check_result(out, tupled, init_ts, ctx, loc)
    made = ctx.stages[before:]
    variant = _variant(made, holders, index)
    res = []
    for k, o in enumerate(outs):
        if o.tensor is None or o.tensor.stage is None or o.tensor in res \
                or id(o.tensor.stage) not in variant:
            o = materialize(o, "fori_carry", loc)       # a stage of the body computes it
            variant.add(id(o.tensor.stage))
        res.append(o.tensor)
    made = ctx.stages[before:]
    variant |= _variant(made, holders, index)   # with the stages materialising made
    ctx.stages[before:] = [s for s in made if id(s) not in variant]   # invariant: run once
    body_stages = [s for s in made if id(s) in variant]
    # call-time checks made while tracing the body that use i (a reduction over
    # kd.reduce_axis((i + 1, n)) must not be negative...) are checked at each step
    local = [c for c in ctx.constraints[ncons:]
             if index in free_vars(c.lhs) | free_vars(c.rhs)
             or any(index in free_vars(e) for _, e in c.detail)]
    ctx.constraints[ncons:] = [c for c in ctx.constraints[ncons:] if all(c is not d for d in local)]
    made_ids = {id(s) for s in body_stages}
    captured, seen = [], set()
    for s in body_stages:
        for t in s.reads():
            if t.stage is not None and id(t.stage) in made_ids or any(t is h for h in holders):
                continue
            if id(t) not in seen:
                seen.add(id(t))
                captured.append(t)
    info = LoopInfo(lo, hi, index, holders, body_stages, tuple(res), tuple(init_ts),
                    tuple(captured), [None] * len(res), ctx, loc, traced_captured=tuple(captured),
                    constraints=tuple(local))
    results = []
    for k, t in enumerate(init_ts):
        axes = tuple(new_axis(ctx, f"i{j}", d) for j, d in enumerate(t.shape))
        st = LoopStage(ctx.unique("fori_loop"), axes, (), n.const(0, dt.int64), t.dtype, loc,
                       origin="fori_loop")
        st.loop, st.carry = info, k
        info.results[k] = st.output
        ctx.stages.append(st)
        results.append(from_tensor(st.output))
    return _like(init, results) if tupled else results[0]


def _like(init, items):
    """``items`` in ``init``'s container type (a tuple, list or namedtuple)."""
    if hasattr(init, "_fields"):
        return type(init)(*items)
    return type(init)(items)


# ----------------------------------------------------------------- checks
def _bound(x, what: str, loc) -> n.Expr:
    """A loop bound: an int or a 0-d integer traced value computed from scalars and shapes."""
    if isinstance(x, bool) or (isinstance(x, Array) and x.dtype.is_bool):
        raise KernelError(f"kd.fori_loop's {what} bound is a boolean", loc=loc,
                          hint="give an int, a scalar argument or a shape such as A.shape[0]")
    if isinstance(x, int) or (hasattr(x, "dtype") and not isinstance(x, Array)
                              and getattr(x, "ndim", None) == 0 and x.dtype.kind in "iu"):
        return n.const(int(x), dt.int64)
    if not isinstance(x, Array):
        raise KernelError(f"kd.fori_loop's {what} bound must be an integer, got "
                          f"{type(x).__name__}", loc=loc,
                          hint="give an int, a scalar argument or a shape such as A.shape[0]")
    if x.ndim != 0 or not x.dtype.is_int:
        raise KernelError(f"kd.fori_loop's {what} bound must be a scalar integer, got a "
                          f"{x.ndim}-d {x.dtype.name} value", loc=loc,
                          hint="give an int, a scalar argument or a shape such as A.shape[0]"
                          + ("; a float count: int(...) it outside the kernel" if x.ndim == 0
                             else ""))
    e = x.at(())
    ctx = context.current()
    if collect(e, lambda y: isinstance(y, (n.TensorRead, n.Load, n.Reduce))) or \
            any(v in ctx.ivs for v in free_vars(e)):
        raise KernelError(f"kd.fori_loop's {what} bound is computed from array values", loc=loc,
                          hint="bounds are run-time scalars (kernel arguments) or shapes; pass "
                          "the count as a scalar argument of the kernel")
    return mk.cast(e, dt.int64)


def _readable(x: Array) -> bool:
    """Whether the body may read ``x``'s tensor as the first carry (contiguous, computed)."""
    t = x.tensor
    if t is None:
        return False
    return t.op.contiguous if isinstance(t.op, Input) else True


def _whole_arrays(a: Array, ctx, loc) -> None:
    """A carry may not use the axes of an enclosing ``kd.compute`` lambda (a loop per element)."""
    e = a.at(tuple(n.var(f"_fori{k}") for k in range(a.ndim)))
    axes = [v.name for v in free_vars(e) if v in ctx.ivs]
    if axes:
        raise KernelError(f"kd.fori_loop inside a kd.compute lambda: its init uses the axis "
                          f"{axes[0]!r}; the loop carries whole arrays, not one element", loc=loc,
                          hint="call kd.fori_loop outside kd.compute and carry the array "
                          "(kd.fori_loop(0, n, lambda i, c: c * 0.5 + x, x)); a recurrence per "
                          "element along an axis is a kd.scan")


def _carry_array(x, k: int, loc) -> Array:
    try:
        a = asarray(x)
    except KernelError:
        raise KernelError(f"kd.fori_loop: carry {k} of init is a {type(x).__name__}, not an "
                          "array", loc=loc, hint="init is an array or a tuple of arrays "
                          "(np.float32(0) or kd.zeros(()) for a scalar)") from None
    return a


def _check_result(out, tupled: bool, inits, ctx, loc) -> list:
    """The body's carry: the structure, shapes and dtypes of ``init``."""
    want = "a tuple" if tupled else "one array"
    if tupled != isinstance(out, (tuple, list)):
        raise KernelError(f"kd.fori_loop's body must return the carry ({want}, as init), got "
                          f"{type(out).__name__}", loc=loc,
                          hint="return body(i, carry)'s new carry with init's structure")
    outs = list(out) if tupled else [out]
    if len(outs) != len(inits):
        raise KernelError(f"kd.fori_loop's body returned {len(outs)} carried arrays, init has "
                          f"{len(inits)}", loc=loc, hint="return one new value per carried array")
    res = []
    for k, (o, t) in enumerate(zip(outs, inits)):
        try:
            a = asarray(o)
        except KernelError:
            raise KernelError(f"kd.fori_loop's body returned a {type(o).__name__} as carry {k}",
                              loc=loc, hint="return traced arrays") from None
        if a.dtype is not t.dtype:
            raise KernelError(f"kd.fori_loop's body changes carry {k} from {t.dtype.name} to "
                              f"{a.dtype.name}", loc=loc,
                              hint=f"cast the new value: (...).astype(np.{t.dtype.name}); a "
                              "Python scalar init is float64/int64: give np.float32(0) for "
                              "float32")
        if a.ndim != len(t.shape):
            raise ShapeError(f"kd.fori_loop's body changes the shape of carry {k} from "
                             f"{len(t.shape)}-d to {a.ndim}-d", loc=loc,
                             hint="the carry keeps init's shape at every step")
        for j, (d, e) in enumerate(zip(a.dims, t.shape)):
            rd, re = simplify(ctx.resolve(d)), simplify(ctx.resolve(e))
            if rd != re and not (isinstance(rd, n.Const) and isinstance(re, n.Const)) \
                    and not free_vars(rd) & free_vars(re):
                # sizes of different arguments (M @ x with M of shape (M_0, M_1)): assumed
                # equal, checked per call, as broadcasting does
                ctx.unify(re, rd, f"kd.fori_loop's carry {k}", loc)
            elif rd != re:      # JAX's rule: the same shape, known while tracing
                raise ShapeError(f"kd.fori_loop's body changes carry {k}'s size in dim {j} "
                                 f"from {ctx.describe(re)} to {ctx.describe(rd)}", loc=loc,
                                 hint="the carry keeps init's shape at every step (pad or "
                                 "mask with kd.where instead of slicing)")
        res.append(a)
    return res


def _variant(made: list, holders, index) -> set:
    """ids of the stages that depend on the carry or on ``i`` (the others run once)."""
    hold = {id(h) for h in holders}
    var = set()
    for s in made:
        if isinstance(s, LoopStage) or _uses(s, index) or \
                any(id(t) in hold or (t.stage is not None and id(t.stage) in var)
                    for t in s.reads()):
            var.add(id(s))
    return var


def _uses(s, v) -> bool:
    exprs = [s.body] + [e for a in s.all_axes for e in (a.dom.min, a.dom.extent)]
    return any(v in free_vars(e) for e in exprs)
