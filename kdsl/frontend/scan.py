"""Sequential loops with carried state: ``kd.scan`` (TVM's ``te.scan``) and cumulative ops.

``kd.scan(shape, init, update, axis=0, init_steps=1, dtype=None, name=None)`` is a stage
``s`` of ``shape`` computed in order along its ``axis`` (the *scan axis*, ``t``):

- ``s[..., t, ...] = init(*axes)`` for ``t < init_steps``;
- ``s[..., t, ...] = update(s, *axes)`` for the later steps, where ``update`` may read the
  state ``s`` at earlier steps only (``s[t - 1, i]``, ``s[t - 2, j + 1]``: the scan index
  must be ``t - c`` with a constant ``c >= 1``) and any other array.

Both functions take one traced axis per dimension, as ``kd.compute``'s lambda does.  The
result's dtype is ``dtype`` or that of ``init``'s expression (``update``'s value is cast
to it, as a numpy accumulator would be).

The stage reads its own output: ``Stage.scan`` (a ``ScanInfo``) records the scan axis.
Lowering keeps the scan axis one serial loop (kdsl.passes.scan_check refuses a schedule
that splits, fuses, parallelises, vectorises or binds it to GPU threads/blocks); the other
axes stay parallel where the state is read at the same position along them
(``ScanInfo.pointwise``: each GPU thread then runs its own sequential loop).  The ``numpy``
reference evaluates the stage one step at a time (kdsl.backends.numpy_backend).

A *tuple state*: ``init`` returns a tuple, ``update(s, *axes)`` gets ``s`` as a tuple of
arrays and returns a tuple; the members live in one stage with a trailing member axis
(``ScanInfo.members``) of their common dtype, and ``kd.scan`` returns one array per member.

``cumsum``, ``cumprod``, ``cummax``, ``cummin`` (``np.cumsum``/``np.cumprod``/
``np.maximum.accumulate``/``np.minimum.accumulate`` along one axis) and the associative
ufuncs' ``accumulate`` are scans marked associative (``ScanInfo.assoc``), as is a user's
scan ``init = g``, ``update = s[t - 1] op g``; the default schedules may run those as a
parallel blocked scan (kdsl.backends.scan_blocked: float sums reassociated).
"""
from __future__ import annotations

from dataclasses import replace

from .. import dtypes as dt
from ..errors import KernelError, ShapeError, user_location
from ..graph import Tensor
from ..ir import make as mk
from ..ir import nodes as n
from ..ir.visitor import collect, free_vars
from . import context
from .access_prove import Poly, Prover
from .array import Array, from_tensor, index_expr
from .scan_info import ScanInfo, StepOf
from .compute import _arity, _axis_proxy, _require_nonneg_size
from .reduce_empty import running_from
from .ops import asarray
from .stages import make_stage, new_axis


def _scalar_of(result, loc, what: str) -> n.Expr:
    r = asarray(result)
    if r.ndim != 0:
        raise ShapeError(f"kd.scan's {what} must return a scalar (0-d) expression, got a "
                         f"{r.ndim}-d array", loc=loc,
                         hint="index every dimension of the arrays it reads, e.g. X[t, i]")
    return r.at(())


def _body(fn, args, loc, what: str, members: int | None = None):
    """``fn(*args)`` as one expression, or (``members``: a tuple state) a list of them."""
    result = fn(*args)
    if isinstance(result, list):
        result = tuple(result)
    if members is None:
        if isinstance(result, tuple):
            return [_scalar_of(r, loc, f"{what}'s member {j}") for j, r in enumerate(result)]
        return _scalar_of(result, loc, what)
    if not isinstance(result, tuple) or len(result) != members:
        got = f"a tuple of {len(result)}" if isinstance(result, tuple) else "one value"
        raise KernelError(f"kd.scan's {what} must return a tuple of {members} values (one per "
                          f"member of the state init returned), got {got}", loc=loc,
                          hint="return (new_a, new_b, ...) in the order init gives them")
    return [_scalar_of(r, loc, f"{what}'s member {j}") for j, r in enumerate(result)]


def _common_dtype(exprs, loc) -> dt.DType:
    """The dtype one buffer holds every member of a tuple state in: numpy's result type of
    theirs, refused when a member would not convert to it exactly ('safe' casting)."""
    import numpy as np
    nps = [e.dtype.np for e in exprs]
    common = np.result_type(*nps)
    mant = {2: 11, 4: 24, 8: 53}.get(common.itemsize, 0) if common.kind == "f" else None

    def exact(d):       # numpy calls int64 -> float64 'safe'; it is not exact past 2**53
        if not np.can_cast(d.np, common, "safe"):
            return False
        return mant is None or not d.is_int or d.bits - (1 if d.is_signed else 0) <= mant
    bad = [e.dtype.name for e in exprs if not exact(e.dtype)]
    if bad:
        raise KernelError(f"kd.scan: a tuple state keeps its members in one {common} buffer, "
                          f"which does not hold every {', '.join(bad)} value exactly", loc=loc,
                          hint="give the members types that convert exactly (e.g. int32 with "
                          "float64), or cast them with .astype first")
    return dt.as_dtype(common)


def scan(shape, init, update, axis: int = 0, init_steps: int = 1, dtype=None, name=None) -> Array:
    """A stage computed in order along ``axis`` that reads its own earlier steps (see the
    module docstring): ``kd.scan(X.shape, lambda t, i: X[t, i],
    lambda s, t, i: s[t - 1, i] + X[t, i])`` is ``np.cumsum(X, axis=0)``.  When ``init``
    returns a tuple the state is a tuple (``update`` gets and returns one) and so is the
    result."""
    ctx = context.current()
    loc = user_location()
    if not isinstance(shape, (tuple, list)):
        shape = (shape,)
    dims = [index_expr(s, "size") for s in shape]
    if not dims:
        raise ShapeError("kd.scan needs at least one dimension (the scan axis)", loc=loc,
                         hint="give the shape of the result, e.g. kd.scan((T, m), ...)")
    if isinstance(axis, bool) or not isinstance(axis, int) or not -len(dims) <= axis < len(dims):
        raise KernelError(f"kd.scan: axis must be an int in range({-len(dims)}, {len(dims)}), "
                          f"got {axis!r}", loc=loc, hint="axis=0 scans along the first dimension")
    axis %= len(dims)
    if isinstance(init_steps, bool) or not isinstance(init_steps, int) or init_steps < 1:
        raise KernelError(f"kd.scan: init_steps must be an int >= 1, got {init_steps!r}", loc=loc,
                          hint="init gives the first init_steps steps (1 for a recurrence of order 1)")
    for j, d in enumerate(dims):
        if isinstance(d, n.Const) and d.value < 0:
            raise ShapeError(f"negative size {d.value} in kd.scan's shape", loc=loc,
                             hint="sizes must be >= 0")
        _require_nonneg_size(ctx, j, d, loc)
    names = _arity(init, len(dims))
    axes = tuple(new_axis(ctx, nm, d) for nm, d in zip(names, dims))
    proxies = [_axis_proxy(ax) for ax in axes]
    init_body = _body(init, proxies, loc, "init")
    if isinstance(init_body, list):
        return _tuple_scan(ctx, loc, dims, axes, proxies, init_body, update, axis, init_steps,
                           dtype, name)
    out_dtype = dt.as_dtype(dtype) if dtype is not None else init_body.dtype
    sname = ctx.unique(name or "scan")
    state = Tensor(sname, tuple(dims), out_dtype, None)
    with running_from(ctx, axes[axis], init_steps):
        upd = _body(update, [from_tensor(state)] + proxies, loc, "update")
    if isinstance(upd, list):
        raise KernelError("kd.scan's update returned a tuple but init returned one value", loc=loc,
                          hint="return a tuple from both init and update (a tuple state), or "
                          "one value from both")
    t = axes[axis]
    pointwise = _check_reads(upd, state, axes, axis, loc, init_steps=init_steps)
    cond = mk.lt(t.var, mk.add(t.dom.min, init_steps))
    body = mk.select(cond, mk.cast(init_body, out_dtype), mk.cast(upd, out_dtype))
    st, steps = _make(ctx, sname, axes, body, state, t, loc)
    st.scan = ScanInfo(axis, init_steps, pointwise, tuple(a.name for a in steps))
    if init_steps == 1 and not steps:
        kind = _associative(mk.cast(init_body, out_dtype), mk.cast(upd, out_dtype), state, axes, axis)
        if kind is not None:
            st.scan = replace(st.scan, assoc=_binop_combiner(kind, out_dtype), assoc_kind=kind)
    return from_tensor(state)


#: BinOps whose scan ``s[t] = s[t - 1] op g(t)`` is associative (commutative too), by kind;
#: float max/min are left out (their NaN rule is the backend's, not numpy's accumulate's)
_ASSOC_OPS = {n.BinOp.ADD: "sum", n.BinOp.MUL: "prod", n.BinOp.MAX: "max", n.BinOp.MIN: "min",
              n.BinOp.AND: "and", n.BinOp.OR: "or", n.BinOp.XOR: "xor"}


def _associative(init: n.Expr, upd: n.Expr, state, axes, axis):
    """The kind of a user's scan ``init = g``, ``update = s[t - 1] op g`` (either order), op
    in ``_ASSOC_OPS`` computed in the state's dtype, the state read at its own position on
    the other axes; else None (the scan stays as written, serial along its axis)."""
    if type(upd) is not n.Binary or upd.op not in _ASSOC_OPS or upd.dtype is not init.dtype:
        return None
    d = upd.dtype
    if (upd.op in (n.BinOp.MAX, n.BinOp.MIN) and d.is_float) or \
            (upd.op in (n.BinOp.ADD, n.BinOp.MUL) and d.is_bool):
        return None
    t = axes[axis].var
    for prev, g in ((upd.a, upd.b), (upd.a, upd.b)[::-1]):
        if type(prev) is not n.TensorRead or prev.tensor is not state:
            continue
        ix = prev.indices
        if not all(e is a.var for k, (e, a) in enumerate(zip(ix, axes)) if k != axis):
            continue
        step = ix[axis]
        if not (type(step) is n.Binary and step.op is n.BinOp.SUB and step.a is t
                and type(step.b) is n.Const and step.b.value == 1):
            continue
        try:
            same = g == init and not collect(g, lambda x: isinstance(x, n.TensorRead)
                                             and x.tensor is state)
        except RecursionError:      # a very deep expression: not worth proving
            same = False
        if same:
            return _ASSOC_OPS[upd.op]
    return None


def _binop_combiner(kind: str, d: dt.DType) -> n.Combiner:
    op = next(o for o, k in _ASSOC_OPS.items() if k == kind)
    x, y = n.var("x", d), n.var("y", d)
    return n.Combiner(f"scan_{kind}", (x,), (y,), (mk.binary(op, x, y),), (_identity(kind, d),),
                      None)


def _make(ctx, sname, axes, body, state, t, loc):
    """The scan stage of ``body`` over ``axes`` computing ``state`` (the tensor its update
    reads), and its per-step reduction stages."""
    before = len(ctx.stages)
    out = make_stage(ctx, sname, "scan", axes, body, loc)
    st = out.stage
    made = [a for a in ctx.stages[before:] if a is not st]   # reductions hoisted out of update
    # the stage computes the tensor its update read: one tensor, read by its own stage
    state.op = st
    st.output = state
    st.values = (state,)
    st.body = _retarget(st.body, out, state)
    return st, _step_stages(made, st, state, t, loc)


class _State(tuple):
    """The state ``update`` gets in a tuple-state scan: one array per member (``a, b = s``;
    ``s[0][t - 1]``); indexing it with a step is a mistake said in the user's words."""

    def __getitem__(self, key):
        import numbers
        if isinstance(key, (numbers.Integral, slice)) and not isinstance(key, bool):
            return tuple.__getitem__(self, key)
        raise KernelError(f"kd.scan: the state is a tuple of {len(self)} arrays (one per member "
                          "init returned): pick a member before indexing a step",
                          loc=user_location(), hint="write s[0][t - 1] or a, b = s; a[t - 1]")


def _tuple_scan(ctx, loc, dims, axes, proxies, inits, update, axis, init_steps, dtype, name):
    """A scan whose state is a tuple (``init`` and ``update`` return tuples): one stage over
    the scan's axes plus a trailing *member* axis (``ScanInfo.members``), member ``j`` of
    step ``t`` at ``[..., t, ..., j]``, every member of a step computed by the thread that
    computes that position; returns one array per member (in its own dtype)."""
    k = len(inits)
    if k == 0:
        raise KernelError("kd.scan's init returned an empty tuple", loc=loc,
                          hint="return one value, or a tuple of them (one per member)")
    common = dt.as_dtype(dtype) if dtype is not None else _common_dtype(inits, loc)
    sname = ctx.unique(name or "scan")
    state = Tensor(sname, tuple(dims) + (mk.as_expr(k),), common, None)
    full = from_tensor(state)
    views = tuple(Array(tuple(dims), common, (lambda j: lambda idx: n.TensorRead(
        common, state, tuple(idx) + (n.const(j, dt.index),)))(j), op=sname) for j in range(k))
    with running_from(ctx, axes[axis], init_steps):
        upds = _body(update, [_State(views)] + proxies, loc, "update", members=k)
    m = new_axis(ctx, "member", mk.as_expr(k))
    allx = tuple(axes) + (m,)
    t = axes[axis]
    pointwise = True
    for u in upds:
        pointwise = _check_reads(u, state, allx, axis, loc, members=len(axes),
                                 init_steps=init_steps) and pointwise
    cond = mk.lt(t.var, mk.add(t.dom.min, init_steps))
    body = None
    for j in reversed(range(k)):
        bj = mk.select(cond, mk.cast(inits[j], common), mk.cast(upds[j], common))
        body = bj if body is None else mk.select(mk.eq(m.var, j), bj, body)
    st, steps = _make(ctx, sname, allx, body, state, t, loc)
    st.scan = ScanInfo(axis, init_steps, pointwise, tuple(a.name for a in steps), members=len(axes))
    out = []
    for j, e in enumerate(inits):
        member = full[(Ellipsis, j)]
        member.op = f"{sname}_{j}"      # names the copy made where it is returned
        want = dt.as_dtype(dtype) if dtype is not None else e.dtype
        out.append(member.astype(want) if want is not common else member)
    return tuple(out)


def _step_stages(made, st, state, t, loc) -> list:
    """The stages made while tracing ``update`` that read the state (directly or through
    each other): each becomes a ``StepOf`` the scan, along the axis the scan reads it at ``t``."""
    reading = set()
    for a in made:
        if any(r is state or id(r.stage) in reading for r in a.reads()):
            reading.add(id(a))
    steps = [a for a in made if id(a) in reading]
    users = steps + [st]
    for a in steps:
        axis = None
        for u in users:
            for r in collect(u.body, lambda x: isinstance(x, n.TensorRead) and x.tensor is a.output):
                for k, ix in enumerate(r.indices):
                    if ix is t.var or (type(ix) is n.Binary and ix.a is t.var and type(ix.b) is n.Const
                                       and ix.b.value == 0):
                        axis = k if axis in (None, k) else -1
        if axis is None or axis < 0:
            raise KernelError("kd.scan: a reduction in the update reads the state but does not run "
                              "along the scan axis", loc=loc,
                              hint="keep reductions over the state inside one step, e.g. "
                              "kd.sum(L[t, j] * s[j], axis=j) with j = kd.reduce_axis((0, t))")
        a.scan = StepOf(st.name, axis)
    return steps


def _retarget(body, old: Tensor, new: Tensor):
    from ..ir.visitor import Mutator

    class _R(Mutator):
        def visit_TensorRead(self, r):
            r = self.generic(r)
            return n.TensorRead(r.dtype, new, r.indices) if r.tensor is old else r
    return _R().visit(body)


def _check_reads(body, state, axes, axis, loc, members=None, init_steps=1) -> bool:
    """Every read of the state is at ``t - c`` (constant ``c >= 1``) along the scan axis;
    returns whether every such read is at the axes' own values along the other axes (the
    member axis of a tuple state, position ``members``, is read at constants: not counted)."""
    t = axes[axis].var
    pointwise = True
    for r in collect(body, lambda x: isinstance(x, n.TensorRead) and x.tensor is state):
        idx = r.indices[axis]
        poly = Poly()
        try:
            p = poly.of(idx)
        except Exception:       # noqa: BLE001  (outside the polynomial model: refused below)
            p = None
        ok = p is not None and set(p) <= {(), (poly.atoms.id(t),)} and \
            p.get((poly.atoms.id(t),)) == 1 and p.get((), 0) <= -1
        if not ok:      # an earlier step through a reduction: s[j] for j in kd.reduce_axis((0, t))
            ok = _proven_earlier(body, idx, axes, t, init_steps)
        if not ok:
            raise KernelError(
                "kd.scan's update may read the state only at earlier steps along the scan "
                f"axis {axes[axis].name!r}, at {axes[axis].name} - c for a constant c >= 1",
                loc=loc, hint=f"read s[{axes[axis].name} - 1, ...] (the previous step)")
        for j, (ix, ax) in enumerate(zip(r.indices, axes)):
            if j != axis and j != members and ix is not ax.var:
                pointwise = False
        if any(v is t for j, ix in enumerate(r.indices) if j != axis for v in free_vars(ix)):
            pointwise = False
    return pointwise


def _proven_earlier(body, idx, axes, t, init_steps=1) -> bool:
    """``idx <= t - 1`` wherever it is read: over the stage's axes (the update runs from step
    ``init_steps`` on) and the ranges of the reductions in ``body`` (which may use ``t``: a
    triangular solve's ``x[j]``, ``j < t``)."""
    from ..ir.simplify import simplify
    if collect(idx, lambda x: isinstance(x, (n.TensorRead, n.Load))):
        return False
    ranges = {}
    for a in axes:
        lo = mk.add(a.dom.min, init_steps) if a.var is t else a.dom.min
        ranges[a.var] = (lo, simplify(mk.sub(mk.add(a.dom.min, a.dom.extent), 1)))
    for r in collect(body, lambda x: isinstance(x, n.Reduce)):
        for a in r.axes:
            ext = a.dom.extent
            if type(ext) is n.Binary and ext.op is n.BinOp.MAX and type(ext.b) is n.Const \
                    and ext.b.value == 0:
                ext = ext.a          # read only where the range is not empty
            ranges[a.var] = (a.dom.min, simplify(mk.sub(mk.add(a.dom.min, ext), 1)))
    try:
        return Prover(ranges, set(ranges)).nonneg(mk.sub(mk.sub(t, 1), idx))
    except Exception:       # noqa: BLE001  (outside the prover's model: not shown)
        return False


# ----------------------------------------------------------------- cumulative ops
#: the associative combines of the cumulative ops (``kind`` -> numpy ufunc name)
UFUNCS = {"sum": "add", "prod": "multiply", "max": "maximum", "min": "minimum",
          "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor"}
_BITWISE = ("and", "or", "xor")


def _accum_dtype(d: dt.DType, op: str) -> dt.DType:
    """numpy's result type of ``np.cumsum``/``np.cumprod`` (``np.add.accumulate``...): small
    integers and bools widen to the platform integer (int64, uint64 for unsigned); others
    (and every max/min/bitwise accumulate) keep their type."""
    if op not in ("sum", "prod"):
        return d
    if d.is_bool or (d.is_int and d.is_signed and d.bits < 64):
        return dt.int64
    if d.is_int and not d.is_signed and d.bits < 64:
        return dt.uint64
    return d


def _combine(op: str):
    return {"and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b,
            "sum": lambda a, b: a + b, "prod": lambda a, b: a * b,
            "max": lambda a, b: _nanmax(a, b), "min": lambda a, b: _nanmin(a, b)}[op]


def _assoc_combiner(op: str, d: dt.DType) -> n.Combiner:
    """The Combiner of ``op`` on ``d`` as traced (kind None: its expression is the meaning)."""
    from .array import scalar
    x, y = n.var("x", d), n.var("y", d)
    e = mk.cast(asarray(_combine(op)(scalar(x, op="x"), scalar(y, op="y"))).at(()), d)
    return n.Combiner(f"scan_{op}", (x,), (y,), (e,), (_identity(op, d),), None)


def _identity(op: str, d: dt.DType) -> n.Expr:
    from .reduce import _extreme
    if op in ("sum", "or", "xor"):
        return n.const(False if d.is_bool else 0, d)
    if op == "prod":
        return n.const(True if d.is_bool else 1, d)
    if op == "and":
        return n.const(True, d) if d.is_bool else n.const(-1 if d.is_signed else (1 << d.bits) - 1, d)
    return _extreme(d, op == "max")


def _cumulative(x, axis, dtype, op: str, name: str) -> Array:
    x = asarray(x)
    loc = user_location()
    if axis is None:
        if x.ndim != 1:
            x = x.reshape((-1,))
        axis = 0
    if x.ndim == 0:
        raise ShapeError(f"kd.{name} of a 0-d array: give a 1-d or larger array", loc=loc,
                         hint="np.cumsum of a scalar is a 1-element array: use x.reshape((1,))")
    if isinstance(axis, bool) or not isinstance(axis, int) or not -x.ndim <= axis < x.ndim:
        raise KernelError(f"kd.{name}: axis {axis!r} is out of range for a {x.ndim}-d array",
                          loc=loc, hint=f"give an int in range({-x.ndim}, {x.ndim})")
    axis %= x.ndim
    out = dt.as_dtype(dtype) if dtype is not None else _accum_dtype(x.dtype, op)
    if op in _BITWISE and not (out.is_int or out.is_bool):
        raise KernelError(f"kd.{name}: np.{UFUNCS[op]}.accumulate needs integer or bool values, "
                          f"got {out.name}", loc=loc,
                          hint="cast the values to an integer type first (x.astype(np.int32))")
    xs = x.astype(out) if x.dtype is not out else x
    combine = _combine(op)

    def init(*ix):
        return xs[ix]

    def update(s, *ix):
        prev = list(ix)
        prev[axis] = ix[axis] - 1
        return combine(s[tuple(prev)], xs[ix])
    res = scan(x.shape, init, update, axis=axis, dtype=out, name=name)
    st = res.tensor.stage
    st.scan = replace(st.scan, assoc=_assoc_combiner(op, out), assoc_kind=op)
    return res


def _nanmax(a, b):
    from . import api
    return api.maximum(a, b)


def _nanmin(a, b):
    from . import api
    return api.minimum(a, b)


def cumsum(x, axis=None, dtype=None) -> Array:
    """``np.cumsum(x, axis, dtype)``: a scan along ``axis`` (a parallel blocked scan where the
    default schedules choose it: float sums are then reassociated, as numpy's pairwise sum)."""
    return _cumulative(x, axis, dtype, "sum", "cumsum")


def cumprod(x, axis=None, dtype=None) -> Array:
    """``np.cumprod(x, axis, dtype)``: a scan along ``axis`` (as cumsum)."""
    return _cumulative(x, axis, dtype, "prod", "cumprod")


def cummax(x, axis=None) -> Array:
    """``np.maximum.accumulate(x, axis)`` (NaN propagates, as np.maximum does)."""
    return _cumulative(x, 0 if axis is None and asarray(x).ndim == 1 else axis, None, "max", "cummax")


def cummin(x, axis=None) -> Array:
    """``np.minimum.accumulate(x, axis)`` (NaN propagates)."""
    return _cumulative(x, 0 if axis is None and asarray(x).ndim == 1 else axis, None, "min", "cummin")


#: numpy ufunc name -> cumulative kind, for ``np.<ufunc>.accumulate`` inside kernels
ACCUMULATE = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min",
              "bitwise_and": "and", "bitwise_or": "or", "bitwise_xor": "xor",
              "logical_and": "and", "logical_or": "or", "logical_xor": "xor"}


def accumulate(ufunc: str, x, axis=0, dtype=None) -> Array:
    """``np.<ufunc>.accumulate(x, axis, dtype)`` for the associative ufuncs (``ACCUMULATE``):
    numpy's default axis is 0 and its dtypes (logical ones give bool)."""
    x = asarray(x)
    if ufunc.startswith("logical_"):
        x = x.astype(dt.bool_)
        dtype = dt.bool_ if dtype is None else dtype
    if axis is None:
        raise KernelError(f"np.{ufunc}.accumulate(axis=None) is not supported (numpy refuses "
                          "it for arrays of more than one dimension)", loc=user_location(),
                          hint="give an axis, e.g. axis=0")
    return _cumulative(x, axis, dtype, ACCUMULATE[ufunc], f"{ufunc}_accumulate")
