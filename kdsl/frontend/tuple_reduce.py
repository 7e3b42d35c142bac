"""Tuple reducers: ``kd.reducer(combine, identity=(a, b, ...))`` (TVM's comm_reducer over tuples).

``combine`` maps two tuples (the running result and the next element) to a tuple of
the same length; the identity holds one number (or function of the dtype) per
member.  Applied to a tuple of values it gives a tuple of results, one per member,
each in its member's dtype:

- index style, inside ``kd.compute``: ``r((A[i, k], k), axis=k)`` gives a tuple of
  0-d values; ``kd.compute(shape, lambda i: r(...))`` makes *one* stage computing
  every member (``Stage.values``) and returns a tuple of arrays;
- numpy style: ``r((x, y), axis=1)`` (members broadcast together) makes one stage and
  returns a tuple of arrays.

The traced ``Combiner`` has one lhs/rhs Var, result and identity per member (the
representation argmax already uses), so every backend reduces it like argmax.
Like scalar reducers, commutativity and the absorbed identity are checked on
sample tuples when the reducer is traced (float members to a relative 1e-12 in float64,
1e-5 in float32: Welford's update is commutative up to rounding only).
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import KdslError, KdslUserError, KernelError, KernelValueError, ShapeError, \
    user_location
from ..ir import nodes as n
from ..ir.visitor import collect


def is_tuple_identity(identity) -> bool:
    """True when ``identity`` makes a tuple reducer (a tuple or list of identities)."""
    return isinstance(identity, (tuple, list))


def member_exprs(value, label: str, loc):
    """The traced 0-d-or-array members of a tuple argument (a KernelError if not a tuple)."""
    from .ops import asarray
    if not isinstance(value, (tuple, list)):
        raise KernelError(f"{label} is a tuple reducer: apply it to a tuple of values, got "
                          f"{type(value).__name__}", loc=loc,
                          hint="e.g. r((A[i, k], k), axis=k) for an argmax-like reducer")
    return [asarray(v) for v in value]


def _sample_tuples(dts) -> list:
    """Sample tuples: member j cycles through its dtype's samples at its own pace, so that
    the tuples mix values (and include ties of one member with different others)."""
    from .reducer import _samples
    samples = [_samples(d) for d in dts]
    count = max(24, *(len(s) for s in samples))
    return [np.array([s[(t * (j + 1) + t // len(s)) % len(s)] for t in range(count)],
                     dtype=s.dtype) for j, s in enumerate(samples)]


def _close(a: np.ndarray, b: np.ndarray, d: dt.DType) -> np.ndarray:
    from .reducer import _same
    if d.is_float:
        # rounding differs between the two orders (Welford's update): a relative tolerance
        tol = 1e-12 if d.itemsize >= 8 else 1e-5 if d.itemsize == 4 else 1e-2
        with np.errstate(all="ignore"):
            near = np.abs(a - b) <= tol * np.maximum(np.abs(a), np.abs(b))
        return _same(a, b) | near
    return _same(a, b)


class _TupleCheck:
    """Evaluates a traced tuple combine on numpy values of its members' dtypes."""

    def __init__(self, comb: n.Combiner):
        from ..numerics.numpy_eval import ExprEval, fix
        self.comb, self._eval, self._fix = comb, ExprEval, fix

    def usable(self) -> bool:
        mine = {id(v) for v in self.comb.lhs + self.comb.rhs}
        for r in self.comb.result:
            if collect(r, lambda e: isinstance(e, (n.TensorRead, n.Reduce, n.Load))
                       or (isinstance(e, n.Var) and id(e) not in mine)):
                return False
        return True

    def __call__(self, a: list, b: list) -> list:
        c = self.comb
        with np.errstate(all="ignore"):
            env = {v: self._fix(np.asarray(x), v.dtype) for v, x in zip(c.lhs, a)}
            env.update({v: self._fix(np.asarray(x), v.dtype) for v, x in zip(c.rhs, b)})
            ev = self._eval(env, {})
            shape = np.broadcast_shapes(*(np.shape(x) for x in list(a) + list(b)))
            return [np.broadcast_to(self._fix(np.asarray(ev(r)), v.dtype), shape)
                    for r, v in zip(c.result, c.lhs)]


def _show(vals) -> str:
    return "(" + ", ".join(repr(np.asarray(v).item()) for v in vals) + ")"


def _check(comb: n.Combiner, idents: list, label: str, loc, sources=()) -> None:
    """Commutativity on sample states and the absorbed identity.

    Members of a tuple are correlated (a Welford state of count 0 has mean 0), so the
    samples are states a reduction of these ``sources`` can reach: elements (a member the
    sources give as a constant keeps it, the others take sample values) and partial results
    combining two elements, and the identity."""
    chk = _TupleCheck(comb)
    if not chk.usable():
        return
    dts = [v.dtype for v in comb.lhs]
    elems = [chk._fix(x, d) for x, d in zip(_sample_tuples(dts), dts)]
    for j, src in enumerate(sources):
        if isinstance(src, n.Const):
            elems[j] = chk._fix(np.full(elems[j].shape, src.value), dts[j])
    parts = chk(elems, [np.roll(x, 1) for x in elems])
    s = [np.concatenate([e, np.asarray(p), np.asarray(i, e.dtype).reshape(1)])
         for e, p, i in zip(elems, parts, idents)]
    a, b = [x[:, None] for x in s], [x[None, :] for x in s]
    ab, ba = chk(a, b), chk(b, a)
    bad = np.zeros(ab[0].shape, bool)
    for p, q, d in zip(ab, ba, dts):
        bad |= ~_close(p, q, d)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        x, y = [v[i] for v in s], [v[j] for v in s]
        raise KernelValueError(
            f"the combine function of {label} is not commutative: combine({_show(x)}, "
            f"{_show(y)}) = {_show([v[i, j] for v in ab])} but combine({_show(y)}, {_show(x)}) "
            f"= {_show([v[i, j] for v in ba])}",
            hint="backends combine elements in any order (threads, vector lanes, rfactor "
                 "slices): combine(x, y) must equal combine(y, x); break ties on a member "
                 "that differs (argmax: the smaller index wins)", loc=loc)
    ii = chk(idents, idents)
    if not all(_close(np.asarray(p), np.asarray(q), d).all() for p, q, d in zip(ii, idents, dts)):
        raise KernelValueError(
            f"the identity {_show(idents)} of {label} changes when combined with itself: "
            f"combine(identity, identity) = {_show(ii)}",
            hint="every partial result starts from the identity, so combine(identity, identity) "
                 "must give it back; guard divisions and exp(-inf - -inf) with kd.where "
                 "(e.g. kd.where(n == 0, 0.0, ...))", loc=loc)


def trace_tuple(red, dts: tuple) -> n.Combiner:
    """The Combiner of tuple reducer ``red`` for member dtypes ``dts``."""
    from .array import scalar
    from .ops import asarray, cast_to
    from .reducer import _identity_value
    k = len(red.identity)
    if len(dts) != k:
        raise KernelError(f"{red.label} has an identity of {k} members but is applied to a "
                          f"tuple of {len(dts)} values", loc=user_location(),
                          hint=f"pass {k} values, one per member of the identity")
    xs = tuple(n.var(f"x{j}", d) for j, d in enumerate(dts))
    ys = tuple(n.var(f"y{j}", d) for j, d in enumerate(dts))
    try:
        out = red.combine(tuple(scalar(x, op=x.name) for x in xs),
                          tuple(scalar(y, op=y.name) for y in ys))
    except KdslError:
        raise
    except Exception as e:
        raise KernelError(f"the combine function of {red.label} raised {type(e).__name__} when "
                          f"traced on two tuples of ({', '.join(d.name for d in dts)}): {e}",
                          hint="combine(a, b) receives two tuples and returns one, e.g. "
                               "lambda a, b: (a[0] + b[0], kd.maximum(a[1], b[1]))",
                          loc=red.loc) from e
    if not isinstance(out, (tuple, list)) or len(out) != k:
        got = f"a tuple of {len(out)}" if isinstance(out, (tuple, list)) else type(out).__name__
        raise KernelError(f"the combine function of {red.label} must return a tuple of {k} "
                          f"values (one per member of the identity), got {got}",
                          hint="return (first, second, ...) in the order of the identity",
                          loc=red.loc)
    results = []
    for j, (o, d) in enumerate(zip(out, dts)):
        r = asarray(o)
        if r.ndim != 0:
            raise ShapeError(f"member {j} returned by the combine function of {red.label} is a "
                             f"{r.ndim}-d array, not a scalar", loc=red.loc,
                             hint="combine the members of the two tuples elementwise")
        results.append(cast_to(r.at(()), d))
    idents = [_identity_value(i, d, red.label, red.loc) for i, d in zip(red.identity, dts)]
    return n.Combiner(red.name, xs, ys, tuple(results),
                      tuple(n.const(v, d) for v, d in zip(idents, dts)))


def checked(red, comb: n.Combiner, sources: tuple) -> None:
    """Run the sample checks of ``comb`` for this application's ``sources`` (once per set of
    constant members: the samples depend on them)."""
    key = (id(comb), tuple(s.value if isinstance(s, n.Const) else None for s in sources))
    done = red.__dict__.setdefault("_checked", set())
    if key in done:
        return
    idents = [np.asarray(i.value) for i in comb.identity]
    try:
        _check(comb, idents, red.label, red.loc, sources)
    except KdslUserError as e:
        use = user_location()
        if use is not None and use != e.loc:
            e.message += f" (applied at {use.short}: {use.code})"
        raise
    done.add(key)


def reduce_tuple_index(red, value, axis, where=None) -> tuple:
    """``r((a, b), axis=k)`` inside kd.compute: one 0-d value per member."""
    from .array import Array
    from .reduce import reduce_index
    loc = user_location()
    members = member_exprs(value, red.label, loc)
    for j, m in enumerate(members):
        if m.ndim != 0:
            raise ShapeError(f"member {j} of the tuple given to {red.label} is a {m.ndim}-d "
                             "array; an index-style reduction reduces 0-d expressions", loc=loc,
                             hint="index every dimension, e.g. r((A[i, k], k), axis=k)")
    comb = red.combiner(tuple(m.dtype for m in members))
    # reduce_index checks the axes and the where= mask on the first member
    first = reduce_index(red.name, members[0], axis, where=where, comb=_first_only(comb))
    r0 = first.at(())
    from .ops import cast_to
    srcs = tuple(cast_to(m.at(()), v.dtype) for m, v in zip(members, comb.lhs))
    checked(red, comb, srcs)
    base = n.Reduce(comb.lhs[0].dtype, comb, srcs, r0.axes, r0.condition, 0)
    out = []
    for j, v in enumerate(comb.lhs):
        r = base if j == 0 else n.Reduce(v.dtype, comb, srcs, r0.axes, r0.condition, j)
        out.append(Array((), v.dtype, (lambda e: lambda _idx: e)(r), op=red.name,
                         size=sum(m.size_est for m in members) + 1,
                         depth=max(m.depth for m in members) + 1))
    return tuple(out)


def _first_only(comb: n.Combiner) -> n.Combiner:
    """A one-member stand-in used only to run reduce_index's axis and mask checks."""
    return n.Combiner(comb.name, comb.lhs[:1], comb.rhs[:1], (comb.lhs[0],), comb.identity[:1])


def reduce_tuple_np(red, value, axis=None, keepdims=False) -> tuple:
    """``r((x, y), axis=1)`` on arrays: one stage, a tuple of result arrays."""
    from . import context
    from .array import from_tensor
    from .ops import broadcast_dims, cast_to
    from .reduce import _norm_axes, reduction_axes
    from .stages import make_stage
    loc = user_location()
    members = member_exprs(value, red.label, loc)
    dims, maps = broadcast_dims([list(m.dims) for m in members], red.label)
    comb = red.combiner(tuple(m.dtype for m in members))
    ctx = context.current()
    axes = _norm_axes(axis, len(dims))
    spatial, idx, rax = reduction_axes(ctx, dims, axes, keepdims)
    srcs = tuple(cast_to(m.at(mp(tuple(idx))), v.dtype)
                 for m, mp, v in zip(members, maps, comb.lhs))
    checked(red, comb, srcs)
    body = n.Reduce(comb.lhs[0].dtype, comb, srcs, tuple(rax))
    t = make_stage(ctx, ctx.unique(red.name), red.name, tuple(spatial), body, loc)
    return tuple(from_tensor(v) for v in t.stage.values)


def same_reduction(a: n.Reduce, b: n.Reduce) -> bool:
    """Two members of the same multi-value reduction (they differ only in value_index)."""
    return (a.combiner is b.combiner and a.condition is b.condition
            and len(a.axes) == len(b.axes) and all(x is y for x, y in zip(a.axes, b.axes))
            and len(a.sources) == len(b.sources)
            and all(x is y for x, y in zip(a.sources, b.sources)))


def compute_tuple(ctx, result, axes: tuple, name, loc) -> tuple:
    """``kd.compute(shape, lambda i: (a, b))``: a tuple of arrays, one per member.

    Members that are the values of one multi-value reduction (``r((x, y), axis=k)``) come
    from *one* stage (its ``values``); every other member is a stage of its own over fresh
    copies of the axes (the cpu backend's ``fuse_loops`` merges such sibling loops).
    """
    from .array import from_tensor
    from .ops import asarray
    from .stages import make_stage, new_axis
    from ..ir.visitor import substitute
    if not result:
        raise KernelError("kd.compute's function returned an empty tuple", loc=loc,
                          hint="return one expression, or a tuple of them")
    members = []
    for j, r in enumerate(result):
        a = asarray(r)
        if a.ndim != 0:
            raise ShapeError(f"member {j} of the tuple kd.compute's function returned is a "
                             f"{a.ndim}-d array, not a scalar (0-d) expression", loc=loc,
                             hint="index every dimension of the arrays it reads, e.g. A[i, j]")
        members.append(a.at(()))
    out, made, first = [], [], True
    for e in members:
        hit = None
        if isinstance(e, n.Reduce) and len(e.combiner.result) > 1:
            hit = next((t for r, t in made if same_reduction(r, e)), None)
        if hit is not None:
            out.append(from_tensor(hit.stage.values[e.value_index]))
            continue
        own = axes
        if not first:           # every stage owns its axes
            own = tuple(new_axis(ctx, iv.name, iv.dom.extent, lo=iv.dom.min) for iv in axes)
            e = substitute(e, {a.var: b.var for a, b in zip(axes, own)})
        first = False
        t = make_stage(ctx, ctx.unique(name or "compute"), "compute", own, e, loc)
        if isinstance(members[len(out)], n.Reduce):
            made.append((members[len(out)], t))
        out.append(from_tensor(t.stage.values[e.value_index] if isinstance(e, n.Reduce) else t))
    return tuple(out)
