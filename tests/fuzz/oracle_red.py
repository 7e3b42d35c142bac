"""The oracle's reductions and matmul (see oracle.py for the value model).

Bounds: a float sum of n terms in accumulator type ``acc`` is within
``sum(e_i) + gamma(n-1, u_acc) * sum|x_i|`` of the exact sum whatever the order
(serial, pairwise, blocked, split across threads); when every term is an exact
multiple of one power of two and the sum of magnitudes fits ``acc``'s mantissa,
every order is exact.  Products likewise with ``gamma(n)`` and first-order
propagation through the other factors; max/min are 1-Lipschitz.
"""
from __future__ import annotations

import numpy as np

from . import fdtypes as fd
from .oracle import OracleRaise, OVal, _abs, as_float, cast, finish, gamma, native, truth

#: custom reducer operations and the numpy ufunc with the same meaning
CUSTOM_UFUNC = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum,
                "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}


def _lowbit(x: np.ndarray) -> np.ndarray:
    """The value of the lowest set mantissa bit of each float64 (inf for 0)."""
    m, e = np.frexp(x)
    M = (_abs(m) * 2.0 ** 53).astype(np.int64)
    low = (M & -M).astype(np.float64)
    return np.where(M == 0, np.inf, np.ldexp(low, (e - 53).astype(np.int64)))


def _exact_sum(X, E, acc):
    """Per slot: is every summation order of the last axis exact in ``acc``?"""
    if X.shape[-1] == 0:
        return np.ones(X.shape[:-1], bool)
    with np.errstate(all="ignore"):
        q = np.min(_lowbit(X), axis=-1)
        tot = np.sum(_abs(X), axis=-1)
        ok = np.all(E == 0, axis=-1) & np.all(np.isfinite(X), axis=-1)
        ok &= (tot == 0) | (tot / q < 2.0 ** fd.MANT[acc])
    return ok


def _identity(what: str, d: str):
    if what in ("add", "sum", "or", "xor", "any"):
        return 0
    if what in ("mul", "prod", "all"):
        return 1
    if what == "and":
        return -1 if d != "uint8" else 255
    if fd.is_float(d):
        return -np.inf if what == "max" else np.inf
    if d == "bool":
        return what == "min"
    info = np.iinfo(d)
    return info.min if what == "max" else info.max


def reduce_last(kind: str, x: OVal, R: str, acc: str, custom: str | None = None,
                include=None, und=None) -> OVal:
    """Reduce the last axis of ``x`` (values already of dtype R, or floats converted to acc).

    ``kind``: sum, prod, max, min, any, all, argmax, argmin, mean, or 'custom' with
    ``custom`` one of CUSTOM_UFUNC.  ``include``: elements that take part (index-style
    ``where=``), ``und``: elements whose inclusion is undetermined.
    """
    n = x.shape[-1]
    mask_in = x.M()
    what = custom if kind == "custom" else kind
    if include is not None:
        include = np.broadcast_to(include, x.shape)
    if und is not None:
        mask_in = mask_in | np.broadcast_to(und, x.shape)
    rmask = np.any(mask_in, axis=-1)
    if kind in ("any", "all"):
        t, u = truth(x)
        if include is not None:
            t = np.where(include, t, kind == "all")
            u = u & include
        if kind == "any":
            sure = np.any(t & ~u, axis=-1)
            r = sure | np.any(t, axis=-1)
            m = ~sure & np.any(u, axis=-1)
        else:
            sure_false = np.any(~t & ~u, axis=-1)
            r = np.all(t, axis=-1) & ~sure_false
            m = ~sure_false & np.any(u, axis=-1)
        return OVal("bool", r, None, rmask | m)
    if kind in ("argmax", "argmin"):
        X, E = (np.asarray(x.val, np.float64), x.E()) if fd.is_float(x.dtype) else \
            (np.asarray(x.val), np.zeros(x.shape))
        if fd.is_float(x.dtype):
            Xs = np.where(mask_in, 0.0, X)
        else:
            Xs = X
        idx = np.argmax(Xs, axis=-1) if kind == "argmax" else np.argmin(Xs, axis=-1)
        if fd.is_float(x.dtype) and n:
            best = np.take_along_axis(Xs, idx[..., None], -1)
            eb = np.take_along_axis(E, idx[..., None], -1)
            with np.errstate(all="ignore"):
                near = (Xs >= best - (eb + E)) if kind == "argmax" else (Xs <= best + (eb + E))
                near &= (eb + E > 0) & ~np.isnan(Xs)
            near[np.arange(n) == idx[..., None]] = False
            has_nan = np.any(np.isnan(Xs), axis=-1)
            rmask = rmask | (np.any(near, axis=-1) & ~has_nan)
        return OVal("int64", idx.astype(np.int64), None, rmask)
    if not fd.is_float(R):
        v = native(x, R)
        if include is not None:
            v = np.where(include, v, np.asarray(_identity(what, R)).astype(R))
        uf = CUSTOM_UFUNC[what] if kind == "custom" else \
            {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}[what]
        if R == "bool" and what in ("sum", "add"):
            uf = np.logical_or
        elif R == "bool" and what in ("prod", "mul"):
            uf = np.logical_and
        with np.errstate(all="ignore"):
            r = uf.reduce(v, axis=-1, dtype=R if uf not in (np.logical_or, np.logical_and) else None,
                          initial=np.asarray(_identity(what, R)).astype(R)[()])
        return OVal(R, np.asarray(r).astype(R), None, rmask)
    # floats
    X, E, m = as_float(x, acc)
    X, E = np.broadcast_to(X, x.shape), np.broadcast_to(E, x.shape)
    X = np.where(mask_in, 0.0, X)
    E = np.where(mask_in, 0.0, E)
    if include is not None:
        ident = _identity(what, R)
        X = np.where(include, X, float(ident))
        E = np.where(include, E, 0.0)
    u = fd.round_unit(acc) if kind != "custom" else fd.round_unit(R)
    big = fd.MAXF[acc if kind != "custom" else R]
    ovf = False
    with np.errstate(all="ignore"):
        # some summation order may overflow the accumulator on the way (then inf - inf, inf * 0)
        if what in ("sum", "add", "mean"):
            ovf = np.sum(_abs(X) + E, axis=-1) >= big
        elif what in ("prod", "mul"):
            ovf = np.prod(np.maximum(_abs(X) + E, 1.0), axis=-1) >= big
    with np.errstate(all="ignore"):
        if what in ("sum", "add", "mean"):
            r = np.sum(X, axis=-1)
            ok = _exact_sum(X, E, acc)
            err = np.sum(E, axis=-1) + np.where(ok, 0.0, gamma(max(n - 1, 0), u) * np.sum(_abs(X), axis=-1))
            if what == "mean":
                r = r / n if n else np.full(r.shape, np.nan)
                err = err / max(n, 1) + fd.round_unit(R) * _abs(r) + fd.TINY[R]
            elif R != acc or kind == "custom":
                rep = fd.representable(np.where(np.isfinite(r), r, 0), R)
                err = err + np.where(ok & rep, 0.0, fd.round_unit(R) * _abs(r) + fd.TINY[R])
            inc = np.sum(E, axis=-1)
        elif what in ("prod", "mul"):
            r = np.prod(X, axis=-1)
            A = _abs(X) + E
            pre = np.cumprod(np.concatenate([np.ones(X.shape[:-1] + (1,)), A[..., :-1]], -1), -1)
            suf = np.cumprod(np.concatenate([np.ones(X.shape[:-1] + (1,)), A[..., ::-1][..., :-1]], -1), -1)[..., ::-1]
            others = pre * suf
            err = np.sum(np.where(E > 0, E * others, 0.0), axis=-1) + gamma(n + 1, u) * _abs(r) + fd.TINY[R] * (n > 0)
            if R != acc or kind == "custom":
                err = err + fd.round_unit(R) * _abs(np.where(np.isfinite(r), r, 0)) + fd.TINY[R]
            inc = np.sum(E, axis=-1)
        elif what in ("max", "min"):
            if n == 0:
                r = np.full(X.shape[:-1], float(_identity(what, R)))
                err = np.zeros(r.shape)
            else:
                r = np.max(X, axis=-1) if what == "max" else np.min(X, axis=-1)
                err = np.max(E, axis=-1)
            inc = err
        else:
            raise OracleRaise("promotion", f"{what} reduction over {R}")
    return finish(R, r, err, rmask | ovf | np.any(np.broadcast_to(m, x.shape), axis=-1), inc)


def _move_last(a, axes):
    if a is None:
        return None
    a = np.asarray(a)
    rest = [d for d in range(a.ndim) if d not in axes]
    t = np.transpose(a, rest + list(axes))
    n = int(np.prod([a.shape[d] for d in axes])) if axes else 1
    return t.reshape(t.shape[:len(rest)] + (n,))


def _probe(kind, x: OVal, axis, keepdims, dtype):
    """numpy's result dtype for this reduction (raises OracleRaise where numpy raises)."""
    pd = "float16" if x.dtype == "bfloat16" else x.dtype
    proxy = np.zeros(x.shape, pd)
    fn = {"sum": np.sum, "prod": np.prod, "mean": np.mean, "max": np.max, "min": np.min,
          "any": np.any, "all": np.all, "argmax": np.argmax, "argmin": np.argmin}[kind]
    kw = {"axis": axis, "keepdims": keepdims}
    if dtype is not None:
        kw["dtype"] = fd.np_dtype(dtype) if dtype != "bfloat16" else np.float16
    try:
        with np.errstate(all="ignore"):
            r = fn(proxy, **kw)
    except (TypeError, ValueError, np.exceptions.AxisError) as e:
        raise OracleRaise("empty" if "zero-size" in str(e) or "empty" in str(e) else "reduction",
                          f"np.{kind}: {type(e).__name__}: {e}") from None
    R = np.asarray(r).dtype.name
    if (x.dtype == "bfloat16" and dtype is None or dtype == "bfloat16") and R == "float16":
        R = "bfloat16"
    return R, np.shape(r)


def _norm_axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, int):
        return (axis % ndim,) if ndim else ()
    return tuple(sorted(a % ndim for a in axis))


def reduce_np(kind: str, x: OVal, axis, keepdims: bool, dtype: str | None,
              custom: str | None = None) -> OVal:
    """A numpy-style reduction (``custom``: a kd.reducer's operation, result in x's dtype)."""
    if custom is None:
        R, shape = _probe(kind, x, axis, keepdims, dtype)
    else:
        R, shape = x.dtype, _probe("sum", x, axis, keepdims, None)[1]
    axes = _norm_axes(axis, len(x.shape))
    if custom is None and kind in ("sum", "prod", "mean") and fd.is_float(R):
        acc = fd.compute_dtype(R)
    else:
        acc = R
    src = x
    if custom is None and kind in ("sum", "prod") and dtype is not None and not fd.is_float(R):
        src = cast(x, R)            # numpy casts the elements to dtype= first
    moved = OVal(src.dtype, _move_last(src.val, axes), _move_last(src.err, axes),
                 _move_last(src.mask, axes), None, None)
    out = reduce_last("custom" if custom else kind, moved, R, acc, custom)
    return _reshape(out, shape)


def _reshape(o: OVal, shape) -> OVal:
    def r(a):
        return None if a is None else np.asarray(a).reshape(shape)
    return OVal(o.dtype, r(o.val), r(o.err), r(o.mask))


def matmul(a: OVal, b: OVal, dtype: str | None = None) -> OVal:
    pa = np.zeros(a.shape, "float16" if a.dtype == "bfloat16" else a.dtype)
    pb = np.zeros(b.shape, "float16" if b.dtype == "bfloat16" else b.dtype)
    try:
        r = np.matmul(pa, pb) if dtype is None else np.matmul(pa, pb, dtype=fd.np_dtype(dtype))
    except (TypeError, ValueError) as e:
        raise OracleRaise("matmul", f"np.matmul: {type(e).__name__}: {e}") from None
    R = r.dtype.name if dtype is None else dtype
    if R == "float16" and dtype is None and "bfloat16" in (a.dtype, b.dtype):
        R = "float32" if "float16" in (a.dtype, b.dtype) else "bfloat16"
    mask = _mm_mask(a, b)
    if not fd.is_float(R):
        with np.errstate(all="ignore"):
            v = np.matmul(native(a, R), native(b, R))
        return OVal(R, np.asarray(v).astype(R), None, mask)
    acc = fd.compute_dtype(R)
    A, ea, _ = as_float(a, R)
    B, eb, _ = as_float(b, R)
    A, ea = np.where(a.M(), 0.0, A), np.where(a.M(), 0.0, ea)
    B, eb = np.where(b.M(), 0.0, B), np.where(b.M(), 0.0, eb)
    K = a.shape[-1]
    with np.errstate(all="ignore"):
        val = np.matmul(A, B)
        fa, fb = np.nan_to_num(_abs(A), nan=0, posinf=0), np.nan_to_num(_abs(B), nan=0, posinf=0)
        prop = np.matmul(fa, eb) + np.matmul(ea, fb) + np.matmul(ea, eb)
        mag = np.matmul(fa, fb)
        err = prop + gamma(K, fd.UNIT[acc]) * mag
        mask = mask | (mag + prop >= fd.MAXF[acc])
        if R != acc:
            err = err + fd.round_unit(R) * _abs(np.where(np.isfinite(val), val, 0)) + fd.TINY[R]
    return finish(R, val, err, mask, prop)


def _mm_mask(a, b):
    if a.mask is None and b.mask is None:
        return np.zeros(np.broadcast_shapes(np.shape(np.matmul(np.zeros(a.shape), np.zeros(b.shape)))), bool)
    ma = a.M().astype(np.float64)
    mb = b.M().astype(np.float64)
    return (np.matmul(ma, np.ones(b.shape)) + np.matmul(np.ones(a.shape), mb)) > 0
