"""Basic indexing, transposes and reshapes of traced arrays: index arithmetic only.

Indices are ints (negative counts from the end, as in numpy; checked against
the size while tracing when it is static, else by a call-time check raising
``KernelIndexError`` like numpy's IndexError), static slices (any step, negative
too), ``None``, ``...`` and 0-d traced integers (index-style axes:
``A[i + di, j]``, absolute: never wrapped; kdsl.frontend.access checks them).
"""
from __future__ import annotations

import enum

import numpy as np

from ..errors import KernelError, KernelIndexError, KernelValueError, ShapeError, user_location
from ..graph import Constraint
from ..ir import make as mk
from ..ir import nodes as n
from . import context
from .array import Array, _prod, index_expr, norm_axis, shallow, static_value

_ADV_HINT = ("kdsl supports basic indexing (ints, static slices, None, ...) and 0-d traced "
             "integers; gather with kd.compute(shape, lambda i: A[idx[i]])")


class _Step(enum.Enum):
    """What one output dimension of a basic index does to the source's indices: NEW adds a
    dimension of 1 (``None``), SLICE maps it to ``lo + i * step``, FIX reads a fixed index."""

    NEW = "new"
    SLICE = "slice"
    FIX = "fix"


def _is_scalar_index(k) -> bool:
    if isinstance(k, (bool, np.bool_)):
        return False
    if isinstance(k, (int, np.integer)):
        return True
    return isinstance(k, Array) and k.ndim == 0 and k.dtype.is_int


def _slice_part(v, what):
    if v is None or isinstance(v, Array):
        return v
    if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
        return int(v)
    raise KernelError(f"slice {what} must be an int, None or a traced integer, got "
                      f"{type(v).__name__}", hint=_ADV_HINT)


def _slice(d: n.Expr, sl: slice):
    """(start, step, length) expressions of ``sl`` over a dimension of size ``d``."""
    start, stop = _slice_part(sl.start, "start"), _slice_part(sl.stop, "stop")
    step = 1 if sl.step is None else sl.step
    if isinstance(step, Array) or not isinstance(step, (int, np.integer)) or step == 0:
        raise KernelError("slice step must be a nonzero static int", hint=_ADV_HINT)
    step = int(step)
    sd = static_value(d)
    if sd is not None and not isinstance(start, Array) and not isinstance(stop, Array):
        lo, hi, st = slice(start, stop, step).indices(sd)
        return mk.as_expr(lo), step, mk.as_expr(len(range(lo, hi, st)))
    d = context.current().resolve(d)

    def bound(v, default, pos, neg):
        if v is None:
            return mk.as_expr(default)
        if isinstance(v, Array):
            return index_expr(v)
        return pos(v) if v >= 0 else neg(v)

    # A start past the end gives length <= 0 (clamped) so only what can wrap is clamped.
    if step > 0:
        lo = bound(start, 0, lambda v: mk.as_expr(v), lambda v: mk.max_(mk.add(d, v), 0))
        hi = bound(stop, d, lambda v: mk.min_(mk.as_expr(v), d), lambda v: mk.add(d, v))
        length = mk.max_(mk.floordiv(mk.add(mk.sub(hi, lo), step - 1), step), 0)
    else:
        lo = bound(start, mk.sub(d, 1), lambda v: mk.min_(mk.as_expr(v), mk.sub(d, 1)),
                   lambda v: mk.add(d, v))
        hi = bound(stop, -1, lambda v: mk.as_expr(v), lambda v: mk.max_(mk.add(d, v), -1))
        length = mk.max_(mk.floordiv(mk.add(mk.sub(lo, hi), -step - 1), -step), 0)
    return lo, step, length


def getitem(self: Array, key):
    """``A[key]`` for basic indices (a lazy view; all-scalar keys read one element)."""
    if not isinstance(key, tuple):
        key = (key,)
    if any(isinstance(k, (list, np.ndarray)) or (isinstance(k, Array) and k.ndim > 0) or
           isinstance(k, (bool, np.bool_)) or (isinstance(k, Array) and not k.dtype.is_int)
           for k in key):
        raise KernelError("advanced (array or boolean) indexing is not supported", hint=_ADV_HINT)
    n_ell = sum(k is Ellipsis for k in key)
    if n_ell > 1:
        raise KernelError("an index can only have a single ellipsis ('...')", hint="use one '...'")
    consumed = sum(1 for k in key if k is not None and k is not Ellipsis)
    if consumed > self.ndim:
        raise ShapeError(f"too many indices: array is {self.ndim}-dimensional, but {consumed} "
                         "were indexed", hint=f"use at most {self.ndim} indices")
    if n_ell:
        at = key.index(Ellipsis)
        key = key[:at] + (slice(None),) * (self.ndim - consumed) + key[at + 1:]
    else:
        key = key + (slice(None),) * (self.ndim - consumed)
    recipe, dims, src_dim = [], [], 0
    loc = user_location()
    for k in key:
        if k is None:
            recipe.append((_Step.NEW,))
            dims.append(mk.as_expr(1))
            continue
        if k is Ellipsis:
            continue
        d = self.dims[src_dim]
        src_dim += 1
        if isinstance(k, slice):
            lo, step, length = _slice(d, k)
            recipe.append((_Step.SLICE, shallow(lo), step))
            dims.append(shallow(length))
        elif _is_scalar_index(k):
            if isinstance(k, Array):
                recipe.append((_Step.FIX, index_expr(k)))
                continue
            v, sd = int(k), static_value(d)
            if sd is not None and not -sd <= v < sd:
                raise KernelIndexError(f"index {v} is out of bounds for axis {src_dim - 1}"
                                       f"{_of(self)} with size {sd}", loc=loc,
                                       hint=f"use an index in range({-sd}, {sd})")
            if sd is None:
                _literal_check(self, src_dim - 1, d, v, loc)
            if v < 0:
                recipe.append((_Step.FIX, mk.add(mk.as_expr(sd) if sd is not None else d, v)))
            else:
                recipe.append((_Step.FIX, mk.as_expr(v)))
        else:
            raise KernelError(f"{type(k).__name__} is not a valid index", hint=_ADV_HINT)

    ctx = context.current()

    def fn(idx):
        src, j = [], 0
        for r in recipe:
            if r[0] is _Step.FIX:
                src.append(r[1])
            elif r[0] is _Step.NEW:
                j += 1
            else:
                src.append(mk.add(r[1], mk.mul(idx[j], r[2])))
                j += 1
        e = self.at(tuple(src))
        if type(e) is n.TensorRead:   # messages about this read name the line that wrote it
            ctx.read_locs[id(e)] = (loc, e)
        return e

    deps = [k for k in key if isinstance(k, Array)] + [
        v for k in key if isinstance(k, slice) for v in (k.start, k.stop) if isinstance(v, Array)]
    return Array(dims, self.dtype, fn, op="getitem", weak=self.weak, size=self.size_est,
                 depth=1 + max([self.depth] + [k.depth for k in deps]))


def _of(a: Array) -> str:
    return f" of {a.tensor.name}" if a.tensor is not None else ""


def _literal_check(a: Array, axis: int, d: n.Expr, v: int, loc) -> None:
    """numpy's IndexError for an int index on a symbolic size: checked at each call."""
    cond = mk.compare(n.CmpOp.GT, d, v) if v >= 0 else mk.compare(n.CmpOp.GE, d, -v)
    name = _of(a).replace("{", "{{").replace("}", "}}")
    ctx = context.current()
    if any(c.lhs == cond and c.error is KernelIndexError for c in ctx.constraints):
        return      # the same check made by an earlier index
    ctx.constraints.append(Constraint(
        cond, n.const(True), f"index {v} is out of bounds for axis {axis}{name} with size {{size}}",
        loc, KernelIndexError, (("size", d),),
        "use an index in range(-size, size) (numpy's rule for int indices)"))


def transpose(self: Array, *axes):
    """Permute the dimensions (reverse them by default), like ``ndarray.transpose``."""
    if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
        axes = axes[0]
    if not axes:
        perm = tuple(reversed(range(self.ndim)))
    else:
        perm = tuple(norm_axis(a, self.ndim) for a in axes)
        if sorted(perm) != list(range(self.ndim)):
            raise KernelValueError(f"axes {tuple(axes)} do not form a permutation of "
                                   f"{self.ndim} dimensions",
                                   hint=f"give each of 0..{self.ndim - 1} exactly once")
    inv = [0] * len(perm)
    for k, p in enumerate(perm):
        inv[p] = k
    return Array(tuple(self.dims[p] for p in perm), self.dtype,
                 lambda idx: self.at(tuple(idx[inv[j]] for j in range(len(inv)))),
                 op="transpose", weak=self.weak, size=self.size_est, depth=self.depth + 1)


def reshape(self: Array, *shape, order="C"):
    """A view with a new shape (row-major index arithmetic; one entry may be -1)."""
    if order != "C":
        raise KernelError("only order='C' reshapes are supported", hint="drop the order argument")
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    ctx = context.current()
    new, infer = [], None
    for j, s in enumerate(shape):
        if isinstance(s, (int, np.integer)) and int(s) == -1:
            if infer is not None:
                raise KernelValueError("can only specify one unknown dimension (-1)",
                                       hint="give every size but one")
            infer = j
            new.append(None)
        else:
            e = index_expr(s, "size")
            if isinstance(e, n.Const) and e.value < 0:
                raise KernelValueError(f"negative size {e.value} in reshape", hint="sizes are >= 0")
            new.append(e)
    total = ctx.resolve(_prod(self.dims))
    if infer is not None:
        known = ctx.resolve(_prod([d for d in new if d is not None]))
        if isinstance(total, n.Const) and isinstance(known, n.Const):
            if known.value == 0 or total.value % known.value:
                raise ShapeError(f"cannot reshape array of size {total.value} into shape "
                                 f"{_shape_str(shape)}", hint="the sizes must multiply to the same total")
        if isinstance(known, n.Const) and known.value == 0:
            new[infer] = mk.as_expr(0)
        else:
            new[infer] = mk.floordiv(total, known)
            if not (isinstance(total, n.Const) and isinstance(known, n.Const)):
                ctx.unify(total, mk.mul(new[infer], known), "reshape")
    newtot = ctx.resolve(_prod(new))
    if isinstance(total, n.Const) and isinstance(newtot, n.Const):
        if total.value != newtot.value:
            raise ShapeError(f"cannot reshape array of size {total.value} into shape "
                             f"{_shape_str(shape)}", hint="the sizes must multiply to the same total")
    elif infer is None:
        ctx.unify(total, newtot, "reshape")
    old = list(self.dims)
    strip = lambda ds: [ctx.resolve(d) for d in ds if not (isinstance(ctx.resolve(d), n.Const) and ctx.resolve(d).value == 1)]  # noqa: E731
    if strip(old) == strip(new):
        # only unit dimensions change: map the non-unit indices straight through
        keep_new = [j for j, d in enumerate(new) if not _is_one(ctx, d)]
        keep_old = [j for j, d in enumerate(old) if not _is_one(ctx, d)]

        def fn(idx):
            src = [mk.as_expr(0)] * len(old)
            for jo, jn in zip(keep_old, keep_new):
                src[jo] = idx[jn]
            return self.at(tuple(src))
    else:
        def fn(idx):
            flat = mk.as_expr(0)
            for j, d in enumerate(new):
                flat = mk.add(mk.mul(flat, d), idx[j])
            src, stride = [None] * len(old), mk.as_expr(1)
            for j in reversed(range(len(old))):
                q = mk.floordiv(flat, stride)
                src[j] = q if j == 0 else mk.mod(q, old[j])
                stride = mk.mul(stride, old[j])
            return self.at(tuple(src))
    new = [shallow(d) for d in new]
    return Array(tuple(new), self.dtype, fn, op="reshape", weak=self.weak, size=self.size_est,
                 depth=self.depth + 1)


def _is_one(ctx, d) -> bool:
    r = ctx.resolve(d)
    return isinstance(r, n.Const) and r.value == 1


def _shape_str(shape) -> str:
    return "(" + ", ".join(str(s) if isinstance(s, (int, np.integer)) else "?" for s in shape) + ")"


def expand_dims_at(self: Array, positions: list) -> Array:
    """Insert unit dimensions at sorted ``positions`` of the result (keepdims views)."""
    nd = self.ndim + len(positions)
    keep = [j for j in range(nd) if j not in positions]
    dims = [mk.as_expr(1)] * nd
    for j, d in zip(keep, self.dims):
        dims[j] = d
    return Array(tuple(dims), self.dtype, lambda idx: self.at(tuple(idx[j] for j in keep)),
                 op=self.op, weak=self.weak, size=self.size_est, depth=self.depth + 1)

