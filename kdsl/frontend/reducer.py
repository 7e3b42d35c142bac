"""``kd.reducer(combine, identity, name)``: user-defined reductions, checked when made and traced.

At the call, ``combine`` must be a function of two values and ``identity`` a
number or a function of the dtype.  When the reducer is traced for a dtype,
``combine`` is traced on two fresh scalars into a ``Combiner`` (kind None: its
semantics are its ``result`` expression, whatever its ``name``), and two
properties every backend relies on are checked on sample values of that dtype:

- commutativity: backends combine elements in any order (threads, vector
  lanes, pairwise trees), so ``combine(a, b)`` must equal ``combine(b, a)``;
- the identity is absorbed: every partial result (one per thread, lane or
  rfactor slice) starts from the identity, so the identity is combined in at
  least once and perhaps several times.  ``combine(identity, identity) ==
  identity`` makes that count irrelevant: the result is always
  ``identity (+) x0 (+) x1 ...`` with the identity once (numpy's ``initial=``).
  A true neutral element (0 for +) satisfies it, and so does a start value
  such as 0 for a max that clamps at 0.
"""
from __future__ import annotations

import inspect

import numpy as np

from .. import dtypes as dt
from ..errors import KdslError, KdslUserError, KernelError, KernelValueError, ShapeError, \
    for_user, user_location
from ..ir import nodes as n
from ..ir.visitor import collect
from .ops import asarray, cast_to
from .reduce import _index_style, reduce_index, reduce_np
from .tuple_reduce import is_tuple_identity, reduce_tuple_index, reduce_tuple_np, trace_tuple

_EXAMPLE = "kd.reducer(lambda x, y: x + y, identity=0)"


# ------------------------------------------------------------------ checks at kd.reducer(...)
def _takes(fn, count: int):
    """None if ``fn`` can be called with ``count`` positional values, else what it takes."""
    nin = getattr(fn, "nin", None)
    if isinstance(fn, np.ufunc):
        return None if nin == count else f"{nin} input(s)"
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None          # a builtin without a signature: calling it will tell
    try:
        sig.bind(*range(count))
    except TypeError:
        params = [p.name for p in sig.parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if not params:
            return "no positional parameters"
        return f"{len(params)} parameter(s) ({', '.join(params)})"
    return None


def _is_number(v) -> bool:
    if isinstance(v, (bool, int, float)):
        return True
    if isinstance(v, (np.generic, np.ndarray)):
        return np.ndim(v) == 0 and np.asarray(v).dtype.kind in "biuf"
    return False


def _validate(combine, identity, name):
    what = f"kd.reducer({'name=' + repr(name) if isinstance(name, str) else '...'})"
    if not callable(combine):
        raise KernelError(f"{what}: combine must be a function of two values, got "
                          f"{type(combine).__name__} {combine!r}",
                          hint=f"pass the combine function first, e.g. {_EXAMPLE}")
    got = _takes(combine, 2)
    if got is not None:
        raise KernelError(f"{what}: combine takes {got}, but a reduction calls it with two "
                          "values (the running result and the next element)",
                          hint=f"define it as a function of two values, e.g. {_EXAMPLE}")
    if is_tuple_identity(identity):
        if not identity:
            raise KernelError(f"{what}: a tuple identity needs at least one member",
                              hint="identity=(-np.inf, 0) for an argmax-like (value, index) pair")
        for member in identity:
            _validate(combine, member, name)
        return
    if callable(identity) and not _is_number(identity):
        got = _takes(identity, 1)
        if got is not None:
            raise KernelError(f"{what}: identity is a function taking {got}; kdsl calls it with "
                              "the dtype being reduced",
                              hint="identity=0, or a function of the dtype: identity=lambda d: "
                                   "np.iinfo(d.np).min if d.is_int else -np.inf")
    elif not _is_number(identity):
        raise KernelError(f"{what}: identity must be a number or a function of the dtype, got "
                          f"{type(identity).__name__} {identity!r}",
                          hint=f"the value that starts every partial result, e.g. {_EXAMPLE}")
    if name is not None and not isinstance(name, str):
        raise KernelError(f"kd.reducer: name must be a string, got {type(name).__name__}",
                          hint="name='mysum' (it only labels the stage)")


# ------------------------------------------------------------------ checks when traced
def _samples(d: dt.DType) -> np.ndarray:
    """A few values of ``d`` to test combine functions on (no NaN: a max written with
    kd.where is commutative on every other value, and that is the common idiom)."""
    if d.is_bool:
        vals = [False, True]
    elif d.is_int:
        info = np.iinfo(d.np)
        vals = [v for v in (0, 1, 2, 3, 7, 100, -1, -5, int(info.min), int(info.max))
                if info.min <= v <= info.max]
    else:
        vals = [0.0, 1.0, -1.0, 2.5, -3.75, 0.1, 1000.0, -0.007]
    return np.array(vals, dtype=np.float64 if d.is_float else d.np if not d.is_bool else bool)


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise equality where two NaNs count as equal."""
    eq = a == b
    if a.dtype.kind == "f":
        eq |= np.isnan(a) & np.isnan(b)
    return eq


def _show(v) -> str:
    return repr(v.item() if isinstance(v, np.generic) else v)


class _Check:
    """Evaluates a traced combine expression on numpy values of its dtype."""

    def __init__(self, result: n.Expr, x: n.Var, y: n.Var, d: dt.DType):
        from ..numerics.numpy_eval import ExprEval, fix
        self.result, self.x, self.y, self.d = result, x, y, d
        self._eval, self._fix = ExprEval, fix

    def usable(self) -> bool:
        """Only x and y inside, no tensor reads (a combine closing over arrays is not checked)."""
        odd = collect(self.result, lambda e: isinstance(e, (n.TensorRead, n.Reduce, n.Load))
                      or (isinstance(e, n.Var) and e is not self.x and e is not self.y))
        return not odd

    def value(self, v) -> np.ndarray:
        return self._fix(np.asarray(v), self.d)

    def __call__(self, a, b) -> np.ndarray:
        with np.errstate(all="ignore"):
            env = {self.x: self.value(a), self.y: self.value(b)}
            r = self._fix(self._eval(env, {})(self.result), self.d)
            return np.broadcast_to(r, np.broadcast_shapes(np.shape(a), np.shape(b)))


def _check_commutative(chk: _Check, label: str, loc):
    s = chk.value(_samples(chk.d))
    a, b = s[:, None], s[None, :]
    ab, ba = chk(a, b), chk(b, a)
    bad = np.argwhere(~_same(ab, ba))
    if bad.size:
        i, j = bad[0]
        x, y = s[i], s[j]
        raise KernelValueError(
            f"the combine function of {label} is not commutative on {chk.d.name} values: "
            f"combine({_show(x)}, {_show(y)}) = {_show(ab[i, j])} but combine({_show(y)}, "
            f"{_show(x)}) = {_show(ba[i, j])}",
            hint="backends combine elements in any order (threads, vector lanes, pairwise "
                 "trees): combine(x, y) must equal combine(y, x), e.g. x + y, x * y, "
                 "kd.maximum(x, y)", loc=loc)


def _check_identity(chk: _Check, label: str, ident, loc):
    i = chk.value(ident)
    ii = chk(i, i)
    if not _same(np.asarray(ii), np.asarray(i)).all():
        raise KernelValueError(
            f"the identity {_show(i[()])} of {label} changes when combined with itself: "
            f"combine({_show(i[()])}, {_show(i[()])}) = {_show(ii[()])} ({chk.d.name})",
            hint="every partial result (one per thread, vector lane or rfactor slice) starts "
                 "from the identity, so combine(identity, identity) must give the identity back: "
                 "use the neutral element (0 for +, 1 for *, -inf for max), or a start value "
                 "that absorbs itself (0 for a max clamped at 0)", loc=loc)


def _identity_value(identity, d: dt.DType, label: str, loc):
    """The identity for dtype ``d`` as a Python scalar that ``d`` represents."""
    v = identity(d) if callable(identity) and not _is_number(identity) else identity
    if not _is_number(v):
        raise KernelError(f"the identity of {label} for {d.name} must be a number, got "
                          f"{type(v).__name__} {v!r}", hint="return a number from the identity "
                          "function", loc=loc)
    v = np.asarray(v).item()
    if d.is_int:
        fits = isinstance(v, (bool, int)) or (np.isfinite(v) and float(v).is_integer())
        if not fits or not dt.can_cast_value(int(v), d):
            raise KernelValueError(
                f"the identity {v!r} of {label} is not a {d.name} value",
                hint="give a function of the dtype, e.g. identity=lambda d: np.iinfo(d.np).min "
                     "if d.is_int else -np.inf", loc=loc)
        return int(v)
    if d.is_bool and v not in (0, 1):
        raise KernelValueError(f"the identity {v!r} of {label} is not a bool value",
                               hint="use True or False for bool reductions", loc=loc)
    return v


# ------------------------------------------------------------------ the reducer
class Reducer:
    """A user-defined commutative reduction made by ``kd.reducer(combine, identity, name)``.

    Call it like ``kd.sum``: ``r(x, axis=1)`` (numpy style) or ``r(A[i, k], axis=k)``
    inside ``kd.compute`` (index style).  With a tuple identity it takes and returns tuples:
    ``r((A[i, k], k), axis=k)``.
    """

    def __init__(self, combine, identity, name=None):
        _validate(combine, identity, name)
        self.combine = combine
        self.identity = identity
        fname = getattr(combine, "__name__", "")
        self.name = name or (fname if fname.isidentifier() else "reduce")
        #: how messages name it: by its name when it has one, else as the reducer made here
        self.label = f"reducer {self.name!r}" if name or fname.isidentifier() else "kd.reducer"
        self.loc = user_location()
        self._cache = {}

    def combiner(self, d) -> n.Combiner:
        """The Combiner for values of dtype ``d`` (``combine`` traced on two fresh Vars); a
        tuple reducer takes a tuple of member dtypes (kdsl.frontend.tuple_reduce)."""
        if d not in self._cache:
            self._cache[d] = trace_tuple(self, d) if isinstance(d, tuple) else self._trace(d)
        return self._cache[d]

    def _trace(self, d: dt.DType) -> n.Combiner:
        from .array import scalar
        x, y = n.var("x", d), n.var("y", d)
        try:
            out = self.combine(scalar(x, op="x"), scalar(y, op="y"))
        except KdslError:
            raise
        except Exception as e:
            raise KernelError(f"the combine function of {self.label} raised "
                              f"{type(e).__name__} when traced on two {d.name} values: {e}",
                              hint="combine two traced scalars with kdsl operations, e.g. "
                                   "x + y, kd.maximum(x, y), kd.where(x > y, x, y)",
                              loc=self.loc) from e
        if out is None:
            raise KernelError(f"the combine function of {self.label} returned None",
                              hint="return the combined value, e.g. lambda x, y: x + y",
                              loc=self.loc)
        r = asarray(out)
        if r.ndim != 0:
            raise ShapeError(f"the combine function of {self.label} must return a "
                             f"scalar, got a {r.ndim}-d array",
                             hint="combine two scalars, e.g. lambda x, y: x * y", loc=self.loc)
        result = cast_to(r.at(()), d)
        try:
            v = _identity_value(self.identity, d, self.label, self.loc)
            chk = _Check(result, x, y, d)
            if chk.usable():
                _check_commutative(chk, self.label, self.loc)
                _check_identity(chk, self.label, v, self.loc)
        except KdslUserError as e:
            use = user_location()       # the kernel line that applies the reducer
            if use is not None and use != e.loc:
                e.message += f" (applied at {use.short}: {use.code})"
            raise
        return n.Combiner(self.name, (x,), (y,), (result,), (n.const(v, d),))

    def __call__(self, a, axis=None, keepdims=False, where=None):
        if is_tuple_identity(self.identity):
            # a tuple reducer: a tuple of values in, a tuple of results out
            if _index_style(axis):
                return reduce_tuple_index(self, a, axis, where=where)
            if where is not None:
                raise KernelError(f"{self.label}(where=...) is supported in index style only",
                                  hint="use kd.where(mask, x, identity) on each member first")
            return reduce_tuple_np(self, a, axis, keepdims)
        if _index_style(axis):
            e = asarray(a)
            return reduce_index(self.name, e, axis, where=where, comb=self.combiner(e.dtype))
        x = asarray(a)
        return reduce_np(self.name, x, axis, keepdims, comb=self.combiner(x.dtype), name=self.name,
                         where=where)

    def __repr__(self) -> str:
        return f"kd.reducer({self.name})"


def reducer(combine, identity, name=None) -> Reducer:
    """A commutative reduction from ``combine(x, y)`` and ``identity`` (a number, or a
    function of the dtype giving one).

    ``combine`` must be commutative and ``combine(identity, identity) == identity`` (the
    identity starts every partial result); both are checked on sample values when the
    reducer is traced.  ``name`` only labels the stage: semantics come from ``combine``.
    A tuple ``identity`` makes a tuple reducer: ``combine`` maps two tuples to a tuple and
    the reducer is applied to a tuple of values (kdsl.frontend.tuple_reduce).
    """
    try:
        return Reducer(combine, identity, name)
    except KdslUserError as e:
        __tracebackhide__ = True  # noqa: F841
        raise for_user(e) from None
