"""The oracle of the issue-25 array functions (``afn`` nodes): shape functions, scans,
contractions (einsum), var/std, sort/argsort, tuple-reducer argmax and kd.random.

Data movement (concatenate, stack, pad, roll, flip, tril/triu, take) applies numpy's own
function to the values, the error bounds and the undetermined masks alike.  Arithmetic
ones bound their error like ``oracle_red``: a sum or product in any order, the propagated
operand bounds, the result's rounding.  ``philox`` is written here from Random123's
description (independent of kdsl.random, checked against Random123's known answer).
"""
from __future__ import annotations

import numpy as np

from . import fdtypes as fd
from .oracle import OracleRaise, OVal, _abs, as_float, binary, finish, gamma, native, view
from .oracle_red import reduce_last


def _np_dtype_of(o: OVal) -> np.dtype:
    return fd.np_dtype(o.dtype)


def _move(o: OVal, f, fill_err=0.0) -> OVal:
    """``f`` applied to values, bounds and masks (data movement)."""
    val = f(np.asarray(o.val))
    err = None if o.err is None else f(np.asarray(o.err))
    mask = None if o.mask is None else f(np.asarray(o.mask))
    return OVal(o.dtype, val, err, mask)


def _as(o: OVal, R: str) -> OVal:
    """``o`` converted to dtype ``R`` (numpy's casting of a function's operands)."""
    if fd.is_float(R):
        v, e, m = as_float(o, R)
        return finish(R, v, e, m, e)
    if fd.is_float(o.dtype):
        raise OracleRaise("promotion", f"float operand of an {R} result")
    return OVal(R, native(o, R), None, o.mask)


def afn(fn: str, args: list, at: dict) -> OVal:
    """Evaluate array function ``fn`` of ``args`` (OVals) with attributes ``at``."""
    try:
        return _FN[fn](args, at)
    except IndexError as e:
        raise OracleRaise("index", f"np.{fn}: {e}") from None
    except ValueError as e:
        raise OracleRaise("value", f"np.{fn}: {e}") from None


# ------------------------------------------------------------------ shape functions
def _join(args, at):
    R = np.result_type(*[_np_dtype_of(a) for a in args]).name
    parts = [_as(a, R) for a in args]
    f = np.concatenate if at["fn"] == "concatenate" else np.stack
    k = at["axis"]

    def j(arrs):
        return f([np.asarray(x) for x in arrs], axis=k)
    err = j([p.E() for p in parts]) if fd.is_float(R) else None
    return OVal(R, j([p.val for p in parts]), err, j([p.M() for p in parts]))


def _pad(args, at):
    x = args[0]
    pw, mode, cv = at["pad_width"], at["mode"], at.get("value", 0)
    kw = {"constant_values": cv} if mode == "constant" else {}
    val = np.pad(np.asarray(x.val), pw, mode, **kw)
    err = None if x.err is None else np.pad(x.E(), pw, mode, **({"constant_values": 0}
                                                                if mode == "constant" else {}))
    mask = np.pad(x.M(), pw, mode, **({"constant_values": False} if mode == "constant" else {}))
    if not fd.is_float(x.dtype):
        val = val.astype(x.dtype)
    return OVal(x.dtype, val, err, mask)


def _simple(f):
    return lambda args, at: _move(args[0], lambda a: f(a, at))


def _take(args, at):
    x, idx = args
    iv = native(idx, "int64")
    k = at["axis"]
    out = _move(x, lambda a: np.take(a, iv, axis=k))
    out.mask = np.take(x.M(), iv, axis=k) | _expand_mask(idx, x, k, at["fn"])
    return out


def _expand_mask(idx, x, k, fn):
    m = idx.M()
    if not m.any():
        return np.zeros((), bool)
    if fn == "take":
        sh = [1] * (np.ndim(x.val) + np.ndim(m) - 1)
        return m.reshape(tuple(sh[:k]) + m.shape + tuple(sh[k + np.ndim(m):]))
    return m


def _take_along(args, at):
    x, idx = args
    iv = native(idx, "int64")
    k = at["axis"]
    out = _move(x, lambda a: np.take_along_axis(a, iv, axis=k))
    out.mask = np.take_along_axis(x.M(), iv, axis=k) | idx.M()
    return out


def _diff(args, at):
    x, k = args[0], at["axis"]
    nd = np.ndim(x.val)
    for _ in range(at["n"]):
        hi = [slice(None)] * nd
        lo = [slice(None)] * nd
        hi[k], lo[k] = slice(1, None), slice(None, -1)
        x = binary("ne" if x.dtype == "bool" else "sub", view(x, "index", tuple(hi)),
                   view(x, "index", tuple(lo)), False)
    return x


def _round(args, at):
    x, d = args[0], at["decimals"]
    if not fd.is_float(x.dtype):
        v = native(x, x.dtype)
        with np.errstate(all="ignore"):
            return OVal(x.dtype, np.round(v, d).astype(x.dtype), None, x.mask)
    R = x.dtype
    A, ea, m = as_float(x, R)
    s = A * 10.0 ** d
    es = (ea * 10.0 ** d) + 2 * fd.round_unit(R) * _abs(s) + (fd.TINY[R] if d else 0)
    with np.errstate(all="ignore"):
        r = np.round(A, d)
        frac = _abs(s - np.floor(s) - 0.5)
        und = (frac <= es) & np.isfinite(s)
        if d == 0:
            und = und & (ea > 0)
        err = np.where(np.isfinite(r), 2 * fd.round_unit(R) * _abs(r) + (fd.TINY[R] if d else 0), 0.0)
        err = np.where((d == 0), 0.0, err)
    return finish(R, r, err, m | und, ea)


def _nan_to_num(args, at):
    x = args[0]
    if not fd.is_float(x.dtype):
        return x
    R = x.dtype
    A, ea, m = as_float(x, R)
    big = fd.MAXF[R]
    pos = at.get("posinf")
    neg = at.get("neginf")
    r = np.nan_to_num(A, nan=at.get("nan", 0.0), posinf=big if pos is None else pos,
                      neginf=-big if neg is None else neg)
    return OVal(R, r, np.where(np.isfinite(A), ea, 0.0), m)


# ------------------------------------------------------------------ scans
def _scan(args, at):
    x, kind, axis = args[0], at["fn"], at["axis"]
    if axis is None:
        x = _move(x, lambda a: np.reshape(a, -1))
        axis = 0
    proxy = np.zeros(1, "float16" if x.dtype == "bfloat16" else x.dtype)
    if kind in ("cumsum", "cumprod"):
        kw = {} if at.get("dtype") is None else {"dtype": fd.np_dtype(at["dtype"])}
        R = getattr(np, kind)(proxy, **kw).dtype.name
    else:
        R = x.dtype
    M = np.logical_or.accumulate(x.M(), axis=axis) if np.size(x.val) else x.M()
    if not fd.is_float(R):
        v = native(x, R)
        uf = {"cumsum": np.add, "cumprod": np.multiply, "cummax": np.maximum,
              "cummin": np.minimum}[kind]
        if R == "bool":
            uf = {"cumsum": np.logical_or, "cumprod": np.logical_and}.get(kind, uf)
        with np.errstate(all="ignore"):
            r = uf.accumulate(v, axis=axis) if v.size else v
        return OVal(R, np.asarray(r).astype(R), None, M)
    X, E, m = as_float(x, R)
    X, E = np.broadcast_to(X, np.shape(x.val)), np.broadcast_to(E, np.shape(x.val))
    X, E = np.where(M, 0.0, X), np.where(M, 0.0, E)
    u = fd.round_unit(R)
    n = np.shape(X)[axis]
    k = np.arange(1, n + 1).reshape([-1 if j == axis % X.ndim else 1 for j in range(X.ndim)])
    with np.errstate(all="ignore"):
        if kind == "cumsum":
            r = np.cumsum(X, axis=axis)
            mag = np.cumsum(_abs(X) + E, axis=axis)
            err = np.cumsum(E, axis=axis) + gamma(k, u) * mag
            ovf = mag >= fd.MAXF[R]
        elif kind == "cumprod":
            r = np.cumprod(X, axis=axis)
            A = np.cumprod(_abs(X) + E, axis=axis)
            err = A - np.cumprod(_abs(X), axis=axis) + gamma(k, u) * A
            ovf = A >= fd.MAXF[R]
        else:
            uf = np.fmax if False else (np.maximum if kind == "cummax" else np.minimum)
            r = uf.accumulate(X, axis=axis) if X.size else X
            err = np.maximum.accumulate(E, axis=axis) if X.size else E
            ovf = False
        nonfin = ~np.isfinite(X)
        if kind in ("cumsum", "cumprod") and X.size:     # inf/NaN inputs: exact non-finite rules
            err = np.where(np.logical_or.accumulate(nonfin, axis=axis), 0.0, err)
    return finish(R, r, err, M | ovf, err)


# ------------------------------------------------------------------ var / std
def _var(args, at):
    x, axis, ddof, keep = args[0], at["axis"], at["ddof"], at["keepdims"]
    R = np.var(np.zeros(2, "float16" if x.dtype == "bfloat16" else x.dtype)).dtype.name
    X, E, m = as_float(x, R)
    X, E = np.broadcast_to(X, np.shape(x.val)), np.broadcast_to(E, np.shape(x.val))
    M = np.broadcast_to(x.M() | m, np.shape(x.val))
    ax = tuple(range(X.ndim)) if axis is None else ((axis,) if isinstance(axis, int) else axis)
    ax = tuple(a % X.ndim for a in ax)
    n = int(np.prod([X.shape[a] for a in ax]))
    u = fd.round_unit(fd.compute_dtype(R)) + fd.round_unit(R)
    with np.errstate(all="ignore"):
        Xs = np.where(M, 0.0, X)
        Es = np.where(M, 0.0, E)
        mean = np.mean(Xs, axis=ax, keepdims=True) if n else np.sum(Xs, axis=ax, keepdims=True)
        em = (np.sum(Es, axis=ax, keepdims=True) + gamma(n + 1, u) *
              np.sum(_abs(Xs), axis=ax, keepdims=True)) / max(n, 1) + u * _abs(mean)
        dev = Xs - mean
        eta = Es + em + u * (_abs(dev) + Es + em)
        S = np.sum(dev * dev, axis=ax, keepdims=True)
        big = np.sum((_abs(dev) + eta) ** 2, axis=ax, keepdims=True)
        eS = np.sum(2 * _abs(dev) * eta + eta * eta, axis=ax, keepdims=True) + gamma(n + 2, u) * big
        div = max(n - ddof, 0)
        v = S / div if div else S / 0.0
        ev = eS / div + u * _abs(v) if div else np.zeros(np.shape(S))
        if at["fn"] == "std":
            r = np.sqrt(v)
            err = np.sqrt(v + ev) - np.sqrt(np.maximum(v - ev, 0)) + u * r
        else:
            r, err = v, ev
        nonfin = ~np.all(np.isfinite(Xs), axis=ax, keepdims=True)
        err = np.where(nonfin | ~np.isfinite(r), 0.0, err)
        mask = np.any(M, axis=ax, keepdims=True) | (big >= fd.MAXF[R])
    if not keep:
        r, err, mask = (np.squeeze(a, axis=ax) for a in (r, err, mask))
    return finish(R, r, err, mask, err)


# ------------------------------------------------------------------ sort / argsort
def _sort(args, at):
    x, k = args[0], at["axis"]
    A, E, m = (as_float(x, x.dtype) if fd.is_float(x.dtype) else (native(x, x.dtype), 0.0, False))
    A = np.broadcast_to(A, np.shape(x.val))
    M = np.broadcast_to(x.M() | m, np.shape(x.val))
    Mk = np.any(M, axis=k, keepdims=True) if A.size else M
    if at["fn"] == "sort":
        r = np.sort(A, axis=k)
        if not fd.is_float(x.dtype):
            return OVal(x.dtype, r.astype(x.dtype), None, np.broadcast_to(Mk, r.shape).copy())
        Ek = np.max(np.broadcast_to(E, A.shape), axis=k, keepdims=True) if A.size else E
        return finish(x.dtype, r, np.broadcast_to(Ek, r.shape), np.broadcast_to(Mk, r.shape))
    r = np.argsort(A, axis=k, kind="stable")
    if not at.get("stable") and A.size:     # numpy's default sort leaves the order of ties open
        s = np.sort(A, axis=k)
        kk = k % A.ndim
        same = np.take(s, range(1, A.shape[kk]), axis=kk) == np.take(s, range(A.shape[kk] - 1), axis=kk)
        same |= np.isnan(np.take(s, range(1, A.shape[kk]), axis=kk)) & \
            np.isnan(np.take(s, range(A.shape[kk] - 1), axis=kk)) if fd.is_float(x.dtype) else False
        Mk = Mk | np.any(same, axis=kk, keepdims=True)
    if fd.is_float(x.dtype) and A.size:
        Eb = np.broadcast_to(E, A.shape)
        a1, a2 = np.expand_dims(A, k + 1 if k >= 0 else k), np.expand_dims(A, k)
        e1, e2 = np.expand_dims(Eb, k + 1 if k >= 0 else k), np.expand_dims(Eb, k)
        with np.errstate(all="ignore"):
            near = (e1 + e2 > 0) & (_abs(a1 - a2) <= e1 + e2)
        kk = k % A.ndim
        n = A.shape[kk]
        eye = np.eye(n, dtype=bool).reshape([n if j in (kk, kk + 1) else 1 for j in range(A.ndim + 1)])
        near = near & ~eye
        Mk = Mk | np.any(near, axis=(kk, kk + 1)).reshape(Mk.shape)
    return OVal("int64", r.astype(np.int64), None, np.broadcast_to(Mk, r.shape).copy())


# ------------------------------------------------------------------ einsum
def _einsum(args, at):
    sub = at["subscripts"]
    proxies = [np.zeros([1] * np.ndim(a.val), "float16" if a.dtype == "bfloat16" else a.dtype)
               for a in args]
    R = np.einsum(sub, *proxies).dtype.name
    if not fd.is_float(R):
        with np.errstate(all="ignore"):
            r = np.einsum(sub, *[native(a, R) for a in args], dtype=R) if R != "bool" else \
                np.einsum(sub, *[native(a, R) for a in args])
        ms = [a.M().astype(np.float64) for a in args]
        mask = _mask_spread(sub, args, ms)
        return OVal(R, np.asarray(r).astype(R), None, mask)
    acc = fd.compute_dtype(R)
    vals, errs = [], []
    for a in args:
        v, e, m = as_float(a, R)
        v = np.broadcast_to(v, np.shape(a.val))
        vals.append(np.where(a.M(), 0.0, v))
        errs.append(np.where(a.M(), 0.0, np.broadcast_to(e, np.shape(a.val))))
    ins, out = sub.split("->")
    letters = set(ins.replace(",", ""))
    K = 1
    for c in letters - set(out):
        for s, a in zip(ins.split(","), vals):
            if c in s:
                K *= a.shape[s.index(c)]
                break
    with np.errstate(all="ignore"):
        r = np.einsum(sub, *vals)
        absv = [np.nan_to_num(_abs(v), nan=0, posinf=0) for v in vals]
        mag = np.einsum(sub, *absv)
        if len(vals) == 1:
            prop = np.einsum(sub, errs[0])
        else:
            prop = (np.einsum(sub, absv[0], errs[1]) + np.einsum(sub, errs[0], absv[1])
                    + np.einsum(sub, errs[0], errs[1]))
        # (numpy's einsum accumulates 16-bit floats in their own type: the looser bound)
        err = prop + gamma(K, fd.round_unit(R)) * mag
        if R != acc:
            err = err + fd.round_unit(R) * _abs(np.where(np.isfinite(r), r, 0)) + fd.TINY[R]
        mask = _mask_spread(sub, args, [a.M().astype(np.float64) for a in args]) | (mag + prop >= fd.MAXF[acc])
    return finish(R, r, err, mask, prop)


def _mask_spread(sub, args, ms):
    ones = [np.ones(np.shape(a.val)) for a in args]
    tot = 0
    for j in range(len(args)):
        ops = [ms[i] if i == j else ones[i] for i in range(len(args))]
        tot = tot + np.einsum(sub, *ops)
    return np.asarray(tot > 0)


# ------------------------------------------------------------------ tuple reducer argmax
def _targmax(args, at):
    x, k = args[0], at["axis"]
    moved = _move(x, lambda a: np.moveaxis(a, k, -1))
    if at["member"] == 1:
        return reduce_last("argmax", moved, "int64", "int64")
    r = reduce_last("max", moved, x.dtype, x.dtype)
    if fd.is_float(x.dtype):      # the value the argmax picked: NaN wins, as np.max
        X = np.asarray(moved.val, np.float64)
        has_nan = np.any(np.isnan(X), axis=-1) if X.size else np.zeros(r.shape, bool)
        r.val = np.where(has_nan, np.nan, r.val)
    return r


# ------------------------------------------------------------------ random
_M0, _M1, _W0, _W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85


def philox(k0, k1, c0, c1, c2=0, c3=0, rounds=10):
    """Random123's Philox-4x32 (uint64 arrays holding 32-bit words, so products are exact)."""
    m32 = np.uint64(0xFFFFFFFF)
    c = [np.asarray(v, np.uint64) & m32 for v in (c0, c1, c2, c3)]
    k0, k1 = np.uint64(k0) & m32, np.uint64(k1) & m32
    for _ in range(rounds):
        p0 = c[0] * np.uint64(_M0)
        p1 = c[2] * np.uint64(_M1)
        hi0, lo0 = p0 >> np.uint64(32), p0 & m32
        hi1, lo1 = p1 >> np.uint64(32), p1 & m32
        c = [hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0]
        k0, k1 = (k0 + np.uint64(_W0)) & m32, (k1 + np.uint64(_W1)) & m32
    return c


def _random(args, at):
    seed = int(at["seed"]) if "seed" in at else int(args[1].pyval if args[1].pyval is not None
                                                     else np.asarray(args[1].val).item())
    offs = native(args[0], "int64").astype(np.int64).view(np.uint64)
    s = np.uint64(seed & (2 ** 64 - 1))
    with np.errstate(all="ignore"):
        w = philox(s & np.uint64(0xFFFFFFFF), s >> np.uint64(32), offs & np.uint64(0xFFFFFFFF),
                   offs >> np.uint64(32))
    kind, d = at["kind"], at.get("dtype", "float32")
    if kind == "randint":
        return OVal("uint32", w[0].astype(np.uint32), None, args[0].mask)
    bits = {"float16": 11, "bfloat16": 8, "float32": 24}.get(d)
    if kind == "uniform":
        if d == "float64":
            r = ((w[0] << np.uint64(21)) | (w[1] >> np.uint64(11))).astype(np.float64) * 2.0 ** -53
        else:
            r = (w[0] >> np.uint64(32 - bits)).astype(np.float64) * 2.0 ** -bits
        return OVal(d, r, np.zeros(r.shape), args[0].mask)
    if d == "float64":
        u1 = (((w[0] << np.uint64(21)) | (w[1] >> np.uint64(11))) + np.uint64(1)).astype(np.float64) * 2.0 ** -53
        u2 = ((w[2] << np.uint64(21)) | (w[3] >> np.uint64(11))).astype(np.float64) * 2.0 ** -53
        c = "float64"
    else:
        u1 = ((w[0] >> np.uint64(8)) + np.uint64(1)).astype(np.float64) * 2.0 ** -24
        u2 = (w[1] >> np.uint64(8)).astype(np.float64) * 2.0 ** -24
        c = "float32"
    rad = np.sqrt(-2 * np.log(u1))
    r = rad * np.cos(2 * np.pi * u2)
    U = fd.UNIT[c]
    err = 16 * U * (rad * (1 + 2 * np.pi * 4) + 1) + fd.round_unit(d) * _abs(r) + fd.TINY[d]
    return finish(d, r, err, args[0].M(), err)


_FN = {"concatenate": _join, "stack": _join, "pad": _pad,
       "roll": _simple(lambda a, at: np.roll(a, at["shift"], axis=at["axis"])),
       "flip": _simple(lambda a, at: np.flip(a, axis=at["axis"])),
       "tril": _simple(lambda a, at: np.tril(a, at["k"])),
       "triu": _simple(lambda a, at: np.triu(a, at["k"])),
       "take": _take, "take_along_axis": _take_along, "diff": _diff, "round": _round,
       "nan_to_num": _nan_to_num, "cumsum": _scan, "cumprod": _scan, "cummax": _scan,
       "cummin": _scan, "var": _var, "std": _var, "sort": _sort, "argsort": _sort,
       "einsum": _einsum, "targmax": _targmax, "random": _random}
