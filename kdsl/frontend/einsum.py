"""``np.einsum`` and the contractions written with it: ``tensordot``, ``inner``, ``vdot``,
``outer`` and ``dot`` of any rank.

An einsum with summed labels is one reduce stage named ``einsum`` (spatial axes
``i0, i1, ...`` for the output labels, reduce axes ``r0, r1, ...`` for the
summed ones), the same structure ``@`` makes, so the scheduler treats it as any
contraction; one without summed labels (``'ij->ji'``, ``'ii->i'``, ``'i,j->ij'``)
is a lazy view or elementwise product.  numpy's rules: implicit output (labels
used once, sorted, after the broadcast ``...`` dims), repeated labels in one
operand take the diagonal, size-1 dims broadcast, the result type is
``np.result_type`` of the operands (Python scalars count as numpy arrays here,
as in ``np.einsum``), 16-bit floats accumulate in float32, bools sum with ``or``.
"""
from __future__ import annotations


import numpy as np

from .. import dtypes as dt
from ..errors import DTypeError, KernelError, KernelValueError, ShapeError, user_location
from ..ir import make as mk
from ..ir import nodes as n
from . import context
from .array import Array, from_tensor, norm_axis
from .ops import _as_dtype, asarray, binary, broadcast_dims, cast_to, elementwise
from .reduce import combiner
from .stages import make_stage, new_axis

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"   # string.ascii_letters
_HINT = "write subscripts like 'ij,jk->ik' (letters, one '...' per operand, optional '->out')"


def _err(msg, hint=_HINT):
    raise KernelValueError(f"einsum: {msg}", hint=hint)


def _term(t: str) -> list:
    """The labels of one operand's subscripts: letters and at most one ``...``."""
    out, k = [], 0
    while k < len(t):
        if t.startswith("...", k):
            if "..." in out:
                _err(f"more than one ellipsis in the subscripts {t!r}")
            out.append("...")
            k += 3
        elif t[k] in _LETTERS:
            out.append(t[k])
            k += 1
        else:
            _err(f"invalid subscript {t[k]!r} in {t!r}")
    return out


def _sublist(lst) -> str:
    """numpy's interleaved form ``einsum(a, [0, 1], b, [1, 2], [0, 2])`` as subscripts."""
    s = ""
    for x in lst:
        if x is Ellipsis:
            s += "..."
        elif isinstance(x, (int, np.integer)) and 0 <= int(x) < len(_LETTERS):
            s += _LETTERS[int(x)]
        else:
            _err(f"subscript list entries are ints in [0, 52) or Ellipsis, got {x!r}")
    return s


def _parse_args(args):
    if args and isinstance(args[0], str):
        return args[0], list(args[1:])
    ops, subs = list(args[0::2]), list(args[1::2])
    out = None
    if len(ops) > len(subs):
        ops, out = ops[:len(subs)], ops[-1] if len(args) % 2 else None
    s = ",".join(_sublist(x) for x in subs)
    return (s + "->" + _sublist(out) if out is not None else s), ops


def einsum(*args, dtype=None, out=None, optimize=False, casting="safe", order="K"):
    """numpy's ``einsum`` on traced arrays (one stage when labels are summed)."""
    if out is not None:
        raise KernelError("einsum(out=...) is not supported inside kernels", hint="return the result")
    if not args:
        _err("no subscripts given")
    subscripts, operands = _parse_args(args)
    if not operands:
        _err("at least one operand is needed")
    s = subscripts.replace(" ", "")
    if s.count("->") > 1:
        _err("more than one '->' in the subscripts")
    lhs, out_s = s.split("->") if "->" in s else (s, None)
    terms = [_term(t) for t in lhs.split(",")]
    if len(terms) != len(operands):
        _err(f"{len(terms)} subscript terms for {len(operands)} operands",
             hint="give one comma-separated term per operand")
    arrays = [asarray(o) for o in operands]
    if optimize and len(arrays) > 2 and dtype is None and not any("..." in t for t in terms):
        return _pairwise(terms, arrays, out_s)
    ell_dims, per_op = [], []          # per operand: its ellipsis dims, label -> dims
    for k, (t, a) in enumerate(zip(terms, arrays)):
        nl = len(t) - ("..." in t)
        if ("..." in t and nl > a.ndim) or ("..." not in t and nl != a.ndim):
            _err(f"operand {k} has {a.ndim} dimension(s) but the subscripts {''.join(t)!r} name "
                 f"{nl}", hint="one letter per dimension, or '...' for the leading ones")
        ne = a.ndim - nl
        pos, dims = 0, []
        for lab in t:
            if lab == "...":
                ell_dims.append(a.dims[pos:pos + ne])
                dims.append(("...", pos))
                pos += ne
            else:
                dims.append((lab, pos))
                pos += 1
        per_op.append(dims)
    if not ell_dims:
        ell_dims = [()]
    ell, ell_maps = broadcast_dims(list(ell_dims), "einsum '...' dimensions")
    counts: dict = {}
    for t in terms:
        for lab in t:
            if lab != "...":
                counts[lab] = counts.get(lab, 0) + 1
    has_ell = any("..." in t for t in terms)
    if out_s is None:
        out_t = (["..."] if has_ell else []) + sorted(lab for lab, c in counts.items() if c == 1)
    else:
        out_t = _term(out_s)
        for lab in out_t:
            if lab != "..." and lab not in counts:
                _err(f"output subscript {lab!r} does not appear in the inputs")
            if lab != "..." and out_t.count(lab) > 1:
                _err(f"output subscript {lab!r} appears more than once")
        if "..." not in out_t and len(ell) and not _all_one(ell):
            _err("the operands have '...' dimensions but the output names no '...'",
                 hint="add '...' to the output subscripts (numpy raises here too)")
    # each label's extent: numpy broadcasts size-1 dims of a label too
    occ = {lab: [] for lab in counts}
    for k, (dims, a) in enumerate(zip(per_op, arrays)):
        for lab, pos in dims:
            if lab != "...":
                occ[lab].append((k, pos, a.dims[pos]))
    extent, lab_map = {}, {}
    for lab, lst in occ.items():
        ext, maps = broadcast_dims([(d,) for _, _, d in lst], f"einsum label {lab!r}")
        extent[lab] = ext[0]
        lab_map[lab] = maps
    return _build(arrays, per_op, ell, ell_maps, ell_dims, out_t, occ, extent, lab_map,
                  _result_dtype(arrays, dtype, casting), [lab for lab in counts if lab not in out_t])


def _pairwise(terms, arrays, out_s):
    """``optimize=True`` with three or more operands: contract left to right, two at a time,
    keeping only the labels used later (a chain of matrices costs n^3, not n^(k+1))."""
    counts: dict = {}
    for t in terms:
        for lab in t:
            counts[lab] = counts.get(lab, 0) + 1
    out = "".join(_term(out_s)) if out_s is not None else "".join(
        sorted(lab for lab, c in counts.items() if c == 1))
    cur_t, cur = "".join(terms[0]), arrays[0]
    for k in range(1, len(terms)):
        later = set(out).union(*[set(t) for t in terms[k + 1:]])
        keep = "".join(lab for lab in dict.fromkeys(cur_t + "".join(terms[k])) if lab in later)
        cur = einsum(f"{cur_t},{''.join(terms[k])}->{keep}", cur, arrays[k])
        cur_t = keep
    return einsum(f"{cur_t}->{out}", cur)


def _all_one(dims) -> bool:
    ctx = context.current()
    return all(isinstance(ctx.resolve(d), n.Const) and ctx.resolve(d).value == 1 for d in dims)


def _result_dtype(arrays, dtype, casting="safe"):
    if dtype is not None:
        res = _as_dtype(dtype)
        for a in arrays:
            if casting != "unsafe" and dt.bfloat16 not in (a.dtype, res) and \
                    not np.can_cast(a.dtype.np, res.np, casting):
                raise DTypeError(f"einsum: an operand of type {a.dtype.name} cannot be cast to "
                                 f"{res.name} with casting={casting!r} (numpy raises here too)",
                                 hint="pass casting='unsafe', or cast the operands first")
        return res
    # np.einsum converts Python scalars with np.asarray: float64/int64/bool, never weak
    return dt.promote(*[a.dtype for a in arrays])


def _build(arrays, per_op, ell, ell_maps, ell_dims, out_t, occ, extent, lab_map, res, summed):
    ctx = context.current()
    loc = user_location()
    acc = res.compute
    out_dims, slots = [], []       # slots: ("...", j) or (label,)
    for lab in out_t:
        if lab == "...":
            for j, d in enumerate(ell):
                out_dims.append(d)
                slots.append(("...", j))
        else:
            out_dims.append(extent[lab])
            slots.append((lab,))
    nell = len(ell)

    def element(var):
        """The product of the operands' elements, ``var`` giving each label/ellipsis index."""
        ell_idx = tuple(var[("...", j)] for j in range(nell))
        prod, ell_k = None, 0
        for k, (dims, a) in enumerate(zip(per_op, arrays)):
            idx = [None] * a.ndim
            for lab, pos in dims:
                if lab == "...":
                    ne = len(ell_dims[ell_k]) if any(lb == "..." for lb, _ in dims) else 0
                    sub = ell_maps[ell_k](ell_idx)
                    for q in range(ne):
                        idx[pos + q] = sub[q]
                    ell_k += 1
                else:
                    which = [m for m, (kk, pp, _) in enumerate(occ[lab]) if kk == k and pp == pos][0]
                    idx[pos] = lab_map[lab][which]((var[(lab,)],))[0]
            v = cast_to(a.at(tuple(idx)), acc)
            prod = v if prod is None else mk.binary(n.BinOp.AND if acc.is_bool else n.BinOp.MUL,
                                                    prod, v)
        return prod

    if not summed:
        def fn(idx):
            var = dict(zip([tuple(s) for s in slots], idx))
            return cast_to(element(var), res)
        return Array(tuple(out_dims), res, fn, op="einsum",
                     size=1 + sum(a.size_est for a in arrays),
                     depth=1 + max(a.depth for a in arrays))
    axes = tuple(new_axis(ctx, f"i{j}", d) for j, d in enumerate(out_dims))
    rax = tuple(new_axis(ctx, f"r{j}", extent[lab], n.IterKind.REDUCE) for j, lab in enumerate(summed))
    var = {tuple(s): ax.var for s, ax in zip(slots, axes)}
    var.update({(lab,): r.var for lab, r in zip(summed, rax)})
    body = n.Reduce(acc, combiner("sum", acc), (element(var),), rax)
    t = make_stage(ctx, ctx.unique("einsum"), "einsum", axes, body, loc)
    result = from_tensor(t)
    if res is not acc:
        result = elementwise("einsum", [result], lambda e: cast_to(e, res), res)
    return result


# ------------------------------------------------------------------ written with einsum
def _labels(k: int, start: int = 0) -> str:
    if start + k > len(_LETTERS):
        raise KernelError("too many dimensions for a contraction (at most 52 labels)",
                          hint="reshape the operands to fewer dimensions")
    return _LETTERS[start:start + k]


def tensordot(a, b, axes=2):
    """numpy's ``tensordot``: sum over ``axes`` (an int N: the last N of ``a`` with the
    first N of ``b``; or a pair of axis sequences)."""
    a, b = asarray(a), asarray(b)
    if isinstance(axes, (int, np.integer)) and not isinstance(axes, bool):
        nax = int(axes)
        if nax < 0 or nax > a.ndim or nax > b.ndim:
            raise ShapeError(f"tensordot: axes={nax} but the operands have {a.ndim} and {b.ndim} "
                             "dimensions", hint="axes must be at most the smaller rank")
        ax_a, ax_b = list(range(a.ndim - nax, a.ndim)), list(range(nax))
    else:
        try:
            ax_a, ax_b = axes
        except (TypeError, ValueError):
            raise KernelError("tensordot: axes must be an int or a pair of axis sequences",
                              hint="axes=2 or axes=([1, 0], [0, 1])") from None
        ax_a = [ax_a] if isinstance(ax_a, (int, np.integer)) else list(ax_a)
        ax_b = [ax_b] if isinstance(ax_b, (int, np.integer)) else list(ax_b)
        if len(ax_a) != len(ax_b):
            raise ShapeError("tensordot: the two axis lists have different lengths",
                             hint="pair each axis of a with one of b")
        ax_a = [norm_axis(x, a.ndim) for x in ax_a]
        ax_b = [norm_axis(x, b.ndim) for x in ax_b]
    la, lb = list(_labels(a.ndim)), list(_labels(b.ndim, a.ndim))
    for x, y in zip(ax_a, ax_b):
        lb[y] = la[x]
        _same_size(a.dims[x], b.dims[y], "tensordot")
    outl = [c for j, c in enumerate(la) if j not in ax_a] + [c for j, c in enumerate(lb) if j not in ax_b]
    return einsum(f"{''.join(la)},{''.join(lb)}->{''.join(outl)}", a, b)


def _same_size(x, y, what):
    """Contracted dims must be equal (no broadcasting, as numpy's dot/tensordot)."""
    ctx = context.current()
    rx, ry = ctx.resolve(x), ctx.resolve(y)
    if isinstance(rx, n.Const) and isinstance(ry, n.Const):
        if rx.value != ry.value:
            raise ShapeError(f"{what}: shape mismatch for sum: {rx.value} and {ry.value}",
                             hint="the contracted dimensions must have the same size")
    elif rx != ry:
        ctx.unify(x, y, what)


def inner(a, b):
    """numpy's ``inner``: sum over the last axes (a product when either is 0-d)."""
    a, b = asarray(a), asarray(b)
    if a.ndim == 0 or b.ndim == 0:
        return binary("multiply", a, b, strong=True)
    _same_size(a.dims[-1], b.dims[-1], "inner")
    la, lb = _labels(a.ndim - 1), _labels(b.ndim - 1, a.ndim - 1)
    z = _labels(1, a.ndim + b.ndim - 2)
    return einsum(f"{la}{z},{lb}{z}->{la}{lb}", a, b)


def vdot(a, b):
    """numpy's ``vdot`` of real arrays: the flattened arrays' dot product."""
    a, b = asarray(a).reshape(-1), asarray(b).reshape(-1)
    _same_size(a.dims[0], b.dims[0], "vdot")
    return einsum("i,i->", a, b)


def outer(a, b, out=None):
    """numpy's ``outer``: ``a.ravel()[:, None] * b.ravel()[None, :]`` (lazy)."""
    if out is not None:
        raise KernelError("outer(out=...) is not supported inside kernels", hint="return the result")
    a, b = asarray(a).reshape(-1), asarray(b).reshape(-1)
    return binary("multiply", a[:, None], b[None, :], strong=True)


def dot(a, b, out=None):
    """numpy's ``dot`` of any rank: matmul for 1-D/2-D, else a sum over the last axis of
    ``a`` and the second-to-last of ``b``."""
    from .linalg import matmul
    if out is not None:
        raise KernelError("dot(out=...) is not supported inside kernels", hint="return the result")
    a, b = asarray(a), asarray(b)
    if a.ndim == 0 or b.ndim == 0:
        return binary("multiply", a, b, strong=True)
    if a.ndim <= 2 and b.ndim <= 2:
        return matmul(a, b)
    return tensordot(a, b, axes=([-1], [-2 if b.ndim > 1 else -1]))
