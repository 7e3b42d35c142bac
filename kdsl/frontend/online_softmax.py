"""The online-normaliser (online-softmax) fusion: a graph rewrite run at the end of tracing.

The identity (Milakov & Gimelshein 2018; FlashAttention's forward pass): for a row ``x_j``
with maximum ``M = max_j x_j`` and any weights ``h_j``,

    sum_j exp(x_j - M) * h_j  ==  a   where   (m, a) = fold over j of the state
                                              (running max m, rescaled partial sum a)

with the element ``(x_j, h_j)`` and the combine ``online_softmax`` below:
``m = max(m1, m2)``, ``a = a1 * exp(m1 - m) + a2 * exp(m2 - m)`` (one ``exp`` per step,
``exp(-|m1 - m2|)``, the larger side keeps weight 1).  At the end ``m == M``, so the sum
is computed in *one* streaming pass over ``j``, never storing ``exp(x - M)``, and without
the separate pass that computes ``M``.

**What is rewritten** (by algebra, on the stage graph, never by a stage's name): a stage
``M`` that is a max reduction (``CombinerKind.MAX``) over one axis of one source ``x``, and
every stage ``R`` that reads ``M`` and is a float sum reduction (``CombinerKind.SUM``) over
one axis whose source is a product/quotient of factors of which exactly one reads ``M``,
as ``exp(x' - M[idx])``.  ``R`` becomes

    <R>_online[axes] = online_softmax over j of (x'_j, h_j)   (a tuple reduction: m, a)
    R[axes]          = a * (the factors not using j)          (1 / p.sum(), a scale...)

where ``h_j`` is the product of the factors that use ``j``.  So softmax-weighted sums,
``sum(exp(s - max))`` (logsumexp's sum), ``(p / p.sum()) @ v`` and ``p @ v / p.sum()`` all
stream: ``p.sum()`` becomes one online stage, the contraction ``p @ v`` another.  ``M``
itself is dropped when every reader was rewritten.

The rewrite fires for a max whose rewritable sums include a contraction (a factor ``h_j``
that uses ``j``: ``p @ v``, a weighted sum); a plain softmax or logsumexp (sums of
``exp(x - M)`` alone) keeps the row-wise schedules the backends tune for it (its online
form is ``kd.online_softmax((x, 1), axis=...)`` by hand).  Other reads of ``M``
(logsumexp's ``M + log(sum)``) read the running max of a rewritten sum over the same rows
(exact: a max rounds nothing); if there is none, ``M`` stays.

**Legal exactly when** (checked; otherwise the graph is left as it is):

1. ``M``'s body is a max over one reduce axis, one source, no ``where=`` mask;
2. ``R``'s body is a sum over one reduce axis with the same extent, one source, a float
   dtype, no ``where=`` mask;
3. ``x'`` is ``M``'s source with ``M``'s reduce axis renamed to ``R``'s and ``M``'s axes
   replaced by the indices ``idx`` of the read, and ``idx`` does not use ``R``'s reduce axis
   (``M[idx]`` is the maximum of the very row ``R`` sums over);
4. the exp factor is a factor of ``R``'s source: the source is a tree of ``*`` and ``/``
   (float) whose leaves are the factors; no other factor reads ``M``;
   factors that do not use the reduce axis come out of the sum (distributivity; divisors
   too), the rest are ``h_j``.

A causal mask in the row values, ``where(a >= j + c, s, -inf)``, ends the online stages'
key axis after key ``a - c`` (``_masked_tail``: masked keys are never visited; exact,
since a ``-inf`` element adds nothing to a state).

Numerics: the state is float32 for float16/bfloat16/float32 rows (float64 for float64),
so 16-bit inputs get float32 softmax state and accumulation.  A row whose maximum is
``+-inf`` (a fully masked row: every score ``-inf``) gives NaN like numpy's
``exp(-inf - -inf)``.  An empty row never reaches the fused stages: the max's own check
(a max over an empty axis has no identity; numpy raises too) stays with the graph.

The fused stages carry ``origin=FUSED`` (a str, ``"online_softmax"``, tested by identity:
``st.origin is FUSED``); ``kernel.lower()`` shows the state
buffers (``<R>_online.v0``: the running max, ``<R>_online``: the sum) and no
``exp(x - max)`` temporary.  The same rewrite is reachable by hand:
``m, a = kd.online_softmax((x, h), axis=-1)`` is the tuple reducer this module builds its
stages with (the same ``Combiner`` object).

The placement of the fused chains (one query row per work item, the blocked cpu
schedule's helpers) is ``kdsl.frontend.online_placement``.
"""
from __future__ import annotations

import dataclasses

from .. import dtypes as dt
from ..graph import Stage, topological
from ..ir import make as mk
from ..ir import nodes as n
from ..ir.visitor import collect, substitute, uses_var
from .context import MemoMutator

NEG_INF = float("-inf")


class FusedOrigin(str):
    """The ``Stage.origin`` of the stages this rewrite makes: one object, which schedules
    test by identity (``st.origin is FUSED``), never by its text; a str (``"online_softmax"``)
    wherever origins are printed.  Pickling (a graph kept by the trace cache) and copying
    give the same object back."""

    _one = None

    def __new__(cls):
        if cls._one is None:
            cls._one = super().__new__(cls, "online_softmax")
        return cls._one

    def __reduce__(self):
        return (FusedOrigin, ())

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


#: the origin of the fused stages (``FusedOrigin``)
FUSED = FusedOrigin()


def _online_combine(a, b):
    """(m, a) states: the larger maximum keeps weight 1, the other is scaled by exp(-|dm|)."""
    from .ops import abs as kabs, exp, maximum, where
    m = maximum(a[0], b[0])
    # equal maxima (both -inf included: exp(-inf - -inf) would be NaN) scale by 1
    e = where(a[0] == b[0], 1.0, exp(-kabs(a[0] - b[0])))
    ge = a[0] >= b[0]
    return m, where(ge, a[1] + b[1] * e, a[1] * e + b[1])


_REDUCER = []


def reducer():
    """``kd.online_softmax``: the tuple reducer ``(x, h) -> (max x, sum exp(x - max x) * h)``
    (made on first use: the frontend's modules import each other in one order)."""
    if not _REDUCER:
        from . import api  # noqa: F401  (loads the frontend in its import order)
        from .reducer import Reducer
        _REDUCER.append(Reducer(_online_combine, identity=(NEG_INF, 0.0), name="online_softmax"))
    return _REDUCER[0]


def __getattr__(name):
    if name == "online_softmax":
        return reducer()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def state_dtype(d: dt.DType) -> dt.DType:
    """The softmax state's dtype for rows of ``d``: float32 unless ``d`` is float64."""
    return dt.float64 if d is dt.float64 else dt.float32


# ----------------------------------------------------------------------- matching


def _is_max(st: Stage) -> bool:
    b = st.body
    return (isinstance(b, n.Reduce) and b.combiner.kind is n.CombinerKind.MAX
            and len(b.sources) == 1 and len(b.axes) == 1 and b.condition is None
            and len(b.combiner.result) == 1 and st.dtype.is_float)


def _is_sum(st: Stage) -> bool:
    b = st.body
    return (isinstance(b, n.Reduce) and b.combiner.kind is n.CombinerKind.SUM
            and len(b.sources) == 1 and len(b.axes) == 1 and b.condition is None
            and len(b.combiner.result) == 1 and st.dtype.is_float)


def _factors(e: n.Expr, num: list, den: list) -> None:
    """Split a tree of float ``*`` and ``/`` into numerator and denominator leaves."""
    if isinstance(e, n.Binary) and e.dtype.is_float:
        if e.op is n.BinOp.MUL:
            _factors(e.a, num, den)
            _factors(e.b, num, den)
            return
        if e.op is n.BinOp.DIV:
            _factors(e.a, num, den)
            _factors(e.b, den, num)
            return
    if isinstance(e, n.Cast) and e.dtype.is_float and e.a.dtype.is_float:
        # a float cast of a product: its leaves (the state dtype is at least as wide)
        inner_num, inner_den = [], []
        _factors(e.a, inner_num, inner_den)
        if len(inner_num) + len(inner_den) > 1:
            num += inner_num
            den += inner_den
            return
    num.append(e)


def _reads(e, tensor) -> list:
    return collect(e, lambda x: isinstance(x, n.TensorRead) and x.tensor is tensor)


def _strip_cast(e):
    while isinstance(e, n.Cast) and e.dtype.is_float and e.a.dtype.is_float:
        e = e.a
    return e


@dataclasses.dataclass
class Match:
    """How one sum ``R`` reads the max ``M``: ``x'`` (the exp's row values), the factors
    that use the reduce axis (``inner``, ``inner_den``) and those that do not (``outer``,
    ``outer_den``)."""

    x: n.Expr
    inner: list
    inner_den: list
    outer: list
    outer_den: list
    idx: tuple = ()


def match(R: Stage, M: Stage) -> Match | None:
    """The factorisation of ``R``'s source around ``exp(x' - M[idx])``, or None when the
    rewrite is not legal (the conditions of the module docstring)."""
    if not (_is_sum(R) and _is_max(M)) or R is M:
        return None
    rax, max_ax = R.body.axes[0], M.body.axes[0]
    if not (rax.dom.min == max_ax.dom.min and rax.dom.extent == max_ax.dom.extent):
        return None
    r = rax.var
    num, den = [], []
    _factors(R.body.sources[0], num, den)
    if any(_reads(f, M.output) for f in den):
        return None
    hits = [f for f in num if _reads(f, M.output)]
    if len(hits) != 1:
        return None
    ex = _strip_cast(hits[0])
    if not (isinstance(ex, n.Unary) and ex.op is n.UnOp.EXP):
        return None
    arg = ex.a
    if not (isinstance(arg, n.Binary) and arg.op is n.BinOp.SUB):
        return None
    mread = _strip_cast(arg.b)
    if not (isinstance(mread, n.TensorRead) and mread.tensor is M.output):
        return None
    if any(uses_var(i, r) for i in mread.indices) or _reads(arg.a, M.output):
        return None
    # x' must be M's own row: M's source, renamed to this read
    mapping = {max_ax.var: r}
    mapping.update({ax.var: i for ax, i in zip(M.axes, mread.indices)})
    if substitute(M.body.sources[0], mapping) != arg.a or not uses_var(arg.a, r):
        return None
    rest = [f for f in num if f is not hits[0]]
    return Match(arg.a, [f for f in rest if uses_var(f, r)], [f for f in den if uses_var(f, r)],
                 [f for f in rest if not uses_var(f, r)], [f for f in den if not uses_var(f, r)],
                 mread.indices)


# ----------------------------------------------------------------------- rewriting


def _product(factors: list, d: dt.DType):
    out = None
    for f in factors:
        f = mk.cast(f, d)
        out = f if out is None else mk.mul(out, f)
    return out


class _Retarget(MemoMutator):
    def __init__(self, mapping: dict):
        super().__init__()
        self.mapping = mapping

    def visit_TensorRead(self, r):
        r2 = self.generic(r)
        t = self.mapping.get(r2.tensor)
        return r2 if t is None else n.TensorRead(t.dtype, t, r2.indices)


def _same_rows(R: Stage, M: Stage, mt: Match) -> bool:
    """Whether ``R``'s running max is ``M`` element for element: same axes' extents, and
    ``R`` reads ``M`` at its own axes (an axis of extent 1 at 0)."""
    if len(R.axes) != len(M.axes) or state_dtype(R.dtype) is not M.dtype:
        return False
    for ax, mx, i in zip(R.axes, M.axes, mt.idx):
        if ax.dom.extent != mx.dom.extent or ax.dom.min != mx.dom.min:
            return False
        if not (i is ax.var or (mk.is_const(ax.dom.extent, 1) and mk.is_const(i, 0))):
            return False
    return True


def _tail_end(x: n.Expr, j: n.Var):
    """``end`` when the row values ``x`` are ``where(a >= j + c, s, -inf)`` (or ``j + c <=
    a``, ``>``, ``<``; ``a`` free of ``j``): keys ``j >= end`` are ``-inf``; else None."""
    if not (isinstance(x, n.Select) and mk.is_const(x.f) and x.f.value == NEG_INF
            and isinstance(x.cond, n.Compare)):
        return None
    c = x.cond
    flip = {n.CmpOp.LE: n.CmpOp.GE, n.CmpOp.LT: n.CmpOp.GT}
    op, a, b = (flip[c.op], c.b, c.a) if c.op in flip else (c.op, c.a, c.b)
    if op not in (n.CmpOp.GE, n.CmpOp.GT) or uses_var(a, j):
        return None
    if b is j:
        off = None
    elif (isinstance(b, n.Binary) and b.op is n.BinOp.ADD and b.a is j
          and not uses_var(b.b, j)):
        off = b.b
    else:
        return None
    if not (a.dtype.is_int and (off is None or off.dtype.is_int)):
        return None
    end = mk.cast(a, dt.index)                          # keys j <= a - off (GE), < (GT)
    if off is not None:
        end = mk.sub(end, mk.cast(off, dt.index))
    if op is n.CmpOp.GE:
        end = mk.add(end, mk.as_expr(1))
    return end


def _tail_extent(end, lo):
    return mk.max_(mk.sub(end, lo), mk.as_expr(0))


def _masked_tail(x: n.Expr, rax: n.IterVar) -> n.IterVar:
    """The key axis ``rax`` ending where a causal mask starts: when the row values are
    ``where(a >= j + c, s, -inf)`` (``_tail_end``), keys past ``a - c`` are ``-inf`` and add
    nothing to any state (``exp(-inf - m) = 0``; a row with no key left keeps the identity's
    ``-inf`` max and gives NaN, as numpy's fully masked rows do), so the loop stops there:
    masked keys are never computed."""
    end = _tail_end(x, rax.var)
    if end is None:
        return rax
    lo, ext = rax.dom.min, rax.dom.extent
    ext = mk.min_(ext, _tail_extent(end, lo))
    return n.IterVar(rax.var, n.Range(lo, ext), rax.kind)


def unmasked(x: n.Expr, rax: n.IterVar) -> n.Expr:
    """``x`` without its causal mask where the axis ``rax`` already ends at the mask
    (``_masked_tail`` made it): over the keys it visits the mask always holds, so
    ``where(i >= j, s, -inf)`` is ``s`` there.  Else ``x`` itself."""
    end = _tail_end(x, rax.var)
    if end is None:
        return x
    want = _tail_extent(end, rax.dom.min)
    ext, todo = rax.dom.extent, [rax.dom.extent]
    while todo:
        e = todo.pop()
        if e == want:
            return x.t
        if isinstance(e, n.Binary) and e.op is n.BinOp.MIN:
            todo += [e.a, e.b]
    del ext
    return x


def _rewrite(ctx, R: Stage, mt: Match) -> list:
    """``R`` as its online stage and its finishing stage (which takes ``R``'s name)."""
    from .stages import new_axis
    sd = state_dtype(R.dtype)
    h = _product(mt.inner, sd) or mk.as_expr(1.0, sd)
    if mt.inner_den:
        h = mk.binary(n.BinOp.DIV, h, _product(mt.inner_den, sd))
    comb = reducer().combiner((sd, sd))
    srcs = (mk.cast(mt.x, sd), mk.cast(h, sd))
    rax = _masked_tail(mt.x, R.body.axes[0])
    body = n.Reduce(sd, comb, srcs, (rax,), None, 1)
    online = Stage(ctx.unique(f"{R.name}_online"), R.axes, (rax,), body, sd, R.loc,
                   origin=FUSED)
    m_t, a_t = online.values
    fresh = tuple(new_axis(ctx, ax.name, ax.dom.extent, lo=ax.dom.min) for ax in R.axes)
    ren = {ax.var: f.var for ax, f in zip(R.axes, fresh)}
    idx = tuple(f.var for f in fresh)
    a = n.TensorRead(sd, a_t, idx)
    m = n.TensorRead(sd, m_t, idx)
    val = a
    if mt.outer:
        val = mk.mul(val, substitute(_product(mt.outer, sd), ren))
    if mt.outer_den:
        val = mk.binary(n.BinOp.DIV, val, substitute(_product(mt.outer_den, sd), ren))
    # numpy: a row whose max is +-inf sums exp(inf - inf) = NaN (an empty row sums to 0)
    inf = mk.as_expr(float("inf"), sd)
    bad = mk.compare(n.CmpOp.EQ, mk.unary(n.UnOp.ABS, m), inf)
    val = mk.select(bad, mk.as_expr(float("nan"), sd), val)
    finish = Stage(R.name, fresh, (), mk.cast(val, R.dtype), R.dtype, R.loc,
                   origin=FUSED)
    return [online, finish]


def _lead(stages: list, made_all: list, new_order: dict) -> None:
    """Put a group's online stages together before its first sum, the plain sums
    (``p.sum()``) first, when what they read is computed by then: a row's state is then
    complete before anything reads it, whatever order the user wrote the sums in
    (``p @ v / p.sum()``), and a sequential schedule may weight by the final max."""
    first = min(stages.index(R) for R, _, _ in made_all)
    before = {id(t) for s in stages[:first] for t in s.values}
    onl = [made[0] for _, _, made in made_all]
    if any(t.stage is not None and id(t) not in before for o in onl for t in o.reads()):
        return
    onl.sort(key=lambda o: not mk.is_const(o.body.sources[1], 1.0))
    for R, _, made in made_all:
        new_order[id(R)] = made[1:]
    new_order[id(stages[first])] = onl + new_order[id(stages[first])]


def fuse(ctx, outputs: list) -> list:
    """Apply the online-softmax rewrite to the trace's stages (``ctx.stages``, in place);
    returns ``outputs`` with rewritten tensors replaced.  Dead stages are left for the
    trace's liveness walk to drop."""
    stages = ctx.stages
    if not any(_is_max(s) for s in stages):
        return outputs
    readers = {}
    for s in stages:
        for t in s.reads():
            readers.setdefault(id(t), []).append(s)
    replaced, new_order = {}, {}
    for M in list(stages):
        if not _is_max(M):
            continue
        found = [(R, match(R, M)) for R in readers.get(id(M.output), ())
                 if id(R) not in new_order]
        found = [(R, mt) for R, mt in found if mt is not None]
        # a chain with a contraction (p @ v): plain softmax / logsumexp keep the row-wise
        # schedules backends tune for them (kd.online_softmax writes their online form)
        if not any(mt.inner or mt.inner_den for _, mt in found):
            continue
        made_all = []
        for R, mt in found:
            made = _rewrite(ctx, R, mt)
            new_order[id(R)] = made
            made_all.append((R, mt, made))
            replaced[R.output] = made[-1].output
            if M.output not in replaced and _same_rows(R, M, mt):
                # M's other readers (logsumexp's M + log(sum)) read the running max instead
                replaced[M.output] = made[0].values[0]
        _lead(stages, made_all, new_order)
    if not replaced:
        return outputs
    out = []
    for s in stages:
        out += new_order.get(id(s), [s])
    re = _Retarget(replaced)
    for s in out:
        body = re.visit(s.body)
        if body is not s.body:
            s.body = body
    # a reader of the max made before the sums now reads a running max placed later
    stages[:] = topological(out, outputs)
    return [replaced.get(t, t) for t in outputs]
