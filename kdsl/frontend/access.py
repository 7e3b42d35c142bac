"""Every tensor read of a traced graph is proven in range, checked per call, or checked on data.

``check_accesses(graph, ctx)`` runs at the end of tracing (kdsl.frontend.trace), so
every backend gets the same guarantee: no array is ever accessed outside its extent.
Index-style indices are absolute (TVM's semantics: ``x[i - 1]`` at ``i = 0`` is out of
range, never ``x[-1]``).  For each index of each ``TensorRead`` of each stage, over the
stage's domain (its spatial and reduce axes; shape variables are >= 0):

1. proven in range (``access_prove.Prover``): nothing to do -- the usual case;
2. affine in the axes (``x[i + 3]``, ``x[2*i - k]``): its extremes are shape expressions,
   checked once per call by the launcher (a ``graph.Constraint`` raising
   ``KernelIndexError`` with the line, the read, the index range and the extent; only
   when the domain is not empty);
3. anything else -- indices read from arrays (``A[idx[i]]``), ``%`` or ``min`` that the
   prover cannot bound: a ``graph.DomainCheck`` (hidden min/max reductions of the
   index run before the kernel, kdsl.runtime.checks), and the index is clamped into the
   array so that memory stays safe whatever the data.

Reads inside one branch of ``kd.where`` (or under a reduction's ``where=``) need only be
in range where that branch is taken: ``kd.where(i > 0, x[i - 1], 0)`` is the usual padded
stencil.  Conditions comparing one axis with a shape expression (``i > 0``,
``(j >= 1) & (j < m - 1)``) narrow the domain for the proof and for the call-time check;
other conditions (on data, or on two axes) leave the check to the data (3, restricted to
where the branch is taken).  Backends evaluate both branches, so the index of such a read
is clamped into the array (the value read there is discarded).  An array that is empty
along that axis has nothing to read, but then the branch is never taken (the checks above
say so): the array is marked (``Tensor.empty_reads``, F44) and backends load nothing from
a marked buffer while it is empty (np.pad of an empty axis, an empty part of a
concatenate).  An *unguarded* read of an empty array is a call-time ``KernelIndexError``.
"""
from __future__ import annotations

import dataclasses

from ..errors import KernelIndexError, KernelValueError
from ..graph import Constraint, DomainCheck
from ..ir import make as mk
from ..ir import nodes as n
from ..ir.simplify import simplify
from ..ir.visitor import _child_fields, collect
from .access_prove import Poly, Prover, negate, refine

C = n.CmpOp
_TRUE = n.const(True)
_HINT = ("index-style indices are absolute (no wrap-around from the end): keep every index in "
         "range(0, size), e.g. make the compute's shape smaller or guard the read with "
         "kd.where(cond, x[...], 0)")
_EMPTY_HINT = ("kd.where evaluates both of its branches (as np.where does; so are a reduction's "
               "elements outside its where=), so a read in either needs an element to read: "
               "handle empty arrays outside the kernel")


def check_accesses(graph, ctx=None) -> None:
    """Prove, check or clamp every read of ``graph``'s stages (see the module docstring).

    Appends call-time checks to ``graph.constraints``, data checks to ``graph.data_checks``
    and rewrites stage bodies where an index is clamped.
    """
    resolve = ctx.resolve if ctx is not None else (lambda e: e)
    locs = getattr(ctx, "read_locs", None) or {}
    base = {v: (n.const(0), None) for v in graph.shape_vars()}
    for c in graph.constraints:        # checked before any index check, so usable as facts
        if type(c.lhs) is n.Compare and type(c.rhs) is n.Const and c.rhs.value is True:
            _learn(base, _nonneg_form(c.lhs))
    added: list = []
    for st in graph.stages:
        _StageReads(graph, st, base, resolve, locs, added).run()
    graph.constraints.extend(added)


# ----------------------------------------------------------------- facts about shapes
def _nonneg_form(c: n.Compare):
    """``a op b`` as an expression that is >= 0 when it holds (None if not an order)."""
    d = {C.GT: (c.a, c.b, 1), C.GE: (c.a, c.b, 0), C.LT: (c.b, c.a, 1), C.LE: (c.b, c.a, 0)}
    if c.op not in d or not (c.a.dtype.is_int and c.b.dtype.is_int):
        return None
    a, b, k = d[c.op]
    return mk.sub(mk.sub(a, b), k)


def _learn(ranges: dict, e, axes=(), depth: int = 0) -> None:
    """Tighten shape-variable ranges from ``e >= 0`` (``n - 3 >= 0``; ``n*m - 1 >= 0``;
    ``max(n - 1, 0) - 1 >= 0``); the ranges of ``axes`` are left alone."""
    if e is None or depth > 4:
        return
    poly = Poly()
    try:
        p = poly.of(e)
    except Exception:
        return
    c0 = p.get((), 0)
    terms = [(m, c) for m, c in p.items() if m]
    if len(terms) != 1:
        return
    (mono, c) = terms[0]
    atoms = [poly.atoms.exprs[k] for k in mono]
    if len(atoms) == 1 and type(atoms[0]) is n.Var:
        v = atoms[0]
        if v not in ranges or v in axes:
            return
        lo, hi = ranges[v]
        if c > 0:
            k = -(c0 // c)                      # c*v + c0 >= 0  ->  v >= ceil(-c0 / c)
            if lo is None or (type(lo) is n.Const and lo.value < k):
                ranges[v] = (n.const(k), hi)
        else:
            k = c0 // -c                        # v <= floor(c0 / -c)
            if hi is None or (type(hi) is n.Const and hi.value > k):
                ranges[v] = (lo, n.const(k))
    elif len(atoms) == 1 and c == 1 and type(atoms[0]) is n.Binary and atoms[0].op is n.BinOp.MAX:
        a = atoms[0]                            # max(x, k) >= -c0 with k < -c0: x >= -c0
        for x, y in ((a.a, a.b), (a.b, a.a)):
            if type(y) is n.Const and y.value < -c0:
                _learn(ranges, mk.add(x, c0), axes, depth + 1)
    elif c == 1 and c0 <= -1 and all(Prover(ranges, axes).nonneg(a) for a in atoms):
        for a in atoms:                         # a product of sizes >= 1: each size >= 1
            _learn(ranges, mk.sub(a, 1), axes, depth + 1)


def _same(new, old) -> bool:
    if isinstance(new, tuple):
        return all(x is y for x, y in zip(new, old))
    return new is old


def _end(iv: n.IterVar):
    return simplify(mk.sub(mk.add(iv.dom.min, iv.dom.extent), 1))


def _mentions_axes(dom: n.Range, domain) -> bool:
    """``dom``'s bounds use one of the stage's axes (a triangular reduction)."""
    return any(v in domain for x in (dom.min, dom.extent)
               for v in collect(x, lambda y: isinstance(y, n.Var)))


def _has_data(e) -> bool:
    return bool(collect(e, lambda x: isinstance(x, (n.TensorRead, n.Load))))


def _esc(s: str) -> str:
    return s.replace("{", "{{").replace("}", "}}")


# ----------------------------------------------------------------- one stage
class _StageReads:
    """The reads of one stage: walked with the kd.where conditions above each of them."""

    def __init__(self, graph, stage, base, resolve, locs, added):
        self.graph, self.stage, self.resolve = graph, stage, resolve
        self.locs, self.added = locs, added
        axes = list(stage.axes) + list(stage.reduce_axes)
        for r in collect(stage.body, lambda x: isinstance(x, n.Reduce)):
            axes += [a for a in r.axes if all(a is not b for b in axes)]
        self.axes = tuple(axes)
        self.domain = {a.var: (a.dom.min, _end(a)) for a in axes}
        ranges = dict(base)
        for a in list(stage.axes) + list(stage.reduce_axes):   # no access unless all are non-empty
            _learn(ranges, mk.sub(a.dom.extent, 1), self.domain)
        ranges.update(self.domain)
        self.ranges = ranges
        # an extent over other axes (``kd.reduce_axis((0, i))``) is no call-time condition:
        # such an axis may be empty at some points only, so it never rules a read out
        self.nonempty = [mk.compare(C.GT, a.dom.extent, 0)
                         for a in list(stage.axes) + list(stage.reduce_axes)
                         if not _mentions_axes(a.dom, self.domain)]
        self.memo: dict = {}
        self.fits: dict = {}            # (index, extent, id(ranges)) -> (ranges, answer)
        self.narrowed: dict = {}        # path key -> _narrow(path)
        self.guarded: set = set()       # (tensor, axis) pairs with an empty-array check
        self._nonempty_ranges = None    # (shape var, self.ranges with that var >= 1)

    # ------------------------------------------------------------- walk and rebuild
    def run(self) -> None:
        body = self.stage.body
        new = self._rebuild(body)
        if new is not body:
            self.stage.body = new

    @staticmethod
    def _children(node, path):
        t = type(node)
        if t is n.Select:
            return [(node.cond, path), (node.t, path + ((node.cond, True),)),
                    (node.f, path + ((node.cond, False),))]
        if t is n.Reduce:
            inner = path if node.condition is None else path + ((node.condition, True),)
            out = [] if node.condition is None else [(node.condition, path)]
            return out + [(s, inner) for s in node.sources]
        kids = []
        for name in _child_fields(t):
            v = getattr(node, name)
            if isinstance(v, n.Expr):
                kids.append((v, path))
            elif isinstance(v, tuple):
                kids += [(x, path) for x in v if isinstance(x, n.Expr)]
        return kids

    @staticmethod
    def _key(node, path):
        return (id(node), tuple((id(c), p) for c, p in path))

    def _rebuild(self, root):
        """Post-order, iterative (bodies can be thousands of nodes deep)."""
        memo = self.memo
        stack = [(root, (), False)]
        while stack:
            node, path, done = stack.pop()
            key = self._key(node, path)
            if key in memo:
                continue
            kids = self._children(node, path)
            if not kids:
                memo[key] = (node, node)
                continue
            if not done:
                stack.append((node, path, True))
                stack += [(c, p, False) for c, p in reversed(kids)]
                continue
            new = self._replace(node, [memo[self._key(c, p)][1] for c, p in kids])
            rule = RULES.get(type(node))
            if rule is not None:
                new = rule(self, node, new, path)
            memo[key] = (node, new)     # (node kept alive: its id stays unique)
        return memo[self._key(root, ())][1]

    @staticmethod
    def _replace(node, new_kids):
        t = type(node)
        if t is n.Select:
            names, vals = ("cond", "t", "f"), new_kids
        elif t is n.Reduce:
            k = 0 if node.condition is None else 1
            names = (("condition",) if k else ()) + ("sources",)
            vals = list(new_kids[:k]) + [tuple(new_kids[k:])]
        else:
            names, vals, i = [], [], 0
            for name in _child_fields(t):
                v = getattr(node, name)
                if isinstance(v, n.Expr):
                    names.append(name)
                    vals.append(new_kids[i])
                    i += 1
                elif isinstance(v, tuple):
                    cnt = sum(isinstance(x, n.Expr) for x in v)
                    names.append(name)
                    vals.append(tuple(new_kids[i:i + cnt]))
                    i += cnt
        changes = {a: b for a, b in zip(names, vals) if not _same(b, getattr(node, a))}
        return dataclasses.replace(node, **changes) if changes else node

    def _cond(self, path, k):
        """The rebuilt condition of the ``k``-th kd.where above a read."""
        c, pos = path[k]
        new = self.memo[self._key(c, path[:k])][1]
        return new if pos else negate(new)

    # ------------------------------------------------------------- one read
    def _read(self, orig: n.TensorRead, new: n.TensorRead, path) -> n.Expr:
        t = orig.tensor
        out = list(new.indices)
        for d, idx in enumerate(orig.indices):
            ext = self.resolve(t.shape[d])
            lo_ok, hi_ok = self._fits(idx, ext, self.ranges)
            if lo_ok and hi_ok:
                continue
            if self._fits_if_nonempty(idx, ext):
                # a clamp to the tensor's own edges (np.pad's edge/reflect/wrap modes, clip):
                # in range wherever the axis has an element, which one call-time check of
                # its length guarantees (no data check: it would run the producers)
                self._empty_guard(orig, d, ext, bool(path))
                continue
            data = _has_data(idx)
            if not path and not data and self._call_check(orig, d, idx, ext, lo_ok, hi_ok,
                                                          self.domain, self.ranges, ()):
                continue        # checked before the kernel runs: never out of range there
            x = out[d]
            if not lo_ok:
                x = mk.max_(x, 0)
            if not hi_ok:
                x = mk.min_(x, mk.sub(ext, 1))
            out[d] = x
            if path:        # checked where taken (below): an empty array is never read
                self._empty_read(orig.tensor, ext)
            else:
                self._empty_guard(orig, d, ext, False)
            if path and not data:
                sub = self._narrow(path)
                if sub is None:
                    continue            # the branch is never taken
                ranges, uniform, residual = sub
                lo_b, hi_b = self._fits(idx, ext, ranges)
                lo_b, hi_b = lo_ok or lo_b, hi_ok or hi_b
                if lo_b and hi_b:
                    continue
                box = {v: r for v, r in ranges.items() if v in self.domain}
                if not residual and self._call_check(orig, d, idx, ext, lo_b, hi_b, box, ranges,
                                                     uniform):
                    continue
            self._data_check(orig, new, d, ext, lo_ok, hi_ok, path)
        if all(a is b for a, b in zip(out, new.indices)):
            return new
        return n.TensorRead(new.dtype, new.tensor, tuple(out))

    def _fits(self, idx, ext, ranges):
        """(index >= 0 proven, index < extent proven) over ``ranges``."""
        if type(idx) is n.Var and idx in self.domain:
            a = next(a for a in self.axes if a.var is idx)
            if type(a.dom.min) is n.Const and a.dom.min.value >= 0 and \
                    self.resolve(a.dom.extent) == ext:
                return True, True
        if type(idx) is n.Const and type(ext) is n.Const:
            return idx.value >= 0, idx.value < ext.value
        key = (idx, ext, id(ranges))
        hit = self.fits.get(key)
        if hit is None or hit[0] is not ranges:
            if _has_data(idx):
                res = (False, False)
            else:
                p = Prover(ranges, self.domain)
                res = (p.nonneg(idx), p.nonneg(mk.sub(mk.sub(ext, 1), idx)))
            hit = self.fits[key] = (ranges, res)
        return hit[1]

    def _fits_if_nonempty(self, idx, ext) -> bool:
        """The index is proven in range once the extent ``ext`` (a shape variable) is >= 1."""
        if type(ext) is not n.Var or ext not in self.ranges or _has_data(idx):
            return False
        lo, hi = self.ranges[ext]
        if type(lo) is not n.Const or lo.value >= 1:
            return False
        if self._nonempty_ranges is None or self._nonempty_ranges[0] is not ext:
            r = dict(self.ranges)
            r[ext] = (n.const(1), hi)
            self._nonempty_ranges = (ext, r)
        return all(self._fits(idx, ext, self._nonempty_ranges[1]))

    def _narrow(self, path):
        """The stage's ranges narrowed by the conditions above a read, or None if never taken."""
        key = tuple((id(c), p) for c, p in path)
        if key not in self.narrowed:
            try:
                self.narrowed[key] = self._narrow_now(path)
            except Exception:   # outside the model: no narrowing, the data check decides
                self.narrowed[key] = (self.ranges, [], [c for c, _ in path])
        return self.narrowed[key]

    def _narrow_now(self, path):
        ranges, uniform, residual = self.ranges, [], []
        for c, pos in path:
            ranges, u, r = refine(ranges, c, pos, self.domain)
            if ranges is None:
                return None
            uniform += u
            residual += r
        ranges = dict(ranges)
        for v in self.domain:          # a non-empty branch tells more about the shapes
            lo, hi = ranges[v]
            _learn(ranges, mk.sub(hi, lo), self.domain)
        return ranges, uniform, residual

    def _loc(self, orig):
        hit = self.locs.get(id(orig))
        return hit[0] if hit is not None and hit[1] is orig else self.stage.loc

    def _text(self, orig):
        from ..ir.printer import format_expr   # only for a check's message (~1 ms to import)
        return _esc(format_expr(orig)), _esc(orig.tensor.name)

    # ------------------------------------------------------------- records
    def _call_check(self, orig, d, idx, ext, lo_ok, hi_ok, box, ranges, uniform) -> bool:
        """Add the per-call check of an affine index over ``box``; False if not affine."""
        span = _extremes(idx, box, self.domain)
        if span is None:
            return False
        lo, hi = span
        conds = []
        if not lo_ok:
            conds.append(mk.compare(C.GE, lo, 0))
        if not hi_ok:
            conds.append(mk.compare(C.LT, hi, ext))
        ok = simplify(_all(conds))
        if type(ok) is n.Const and ok.value:
            return True             # in range after all
        if box is self.domain:
            happens = list(self.nonempty)
        else:
            happens = [mk.compare(C.GE, box[v][1], box[v][0]) for v in box] + list(uniform)
        fail = []
        for h in happens:
            h = simplify(h)
            if type(h) is n.Const:
                if not h.value:
                    return True     # the read never happens
                continue
            fail.append(negate(h))
        lhs = _any(fail + [ok])
        text, tname = self._text(orig)
        where = "" if box is self.domain else " where its kd.where condition holds"
        msg = (f"index out of range: {text} reads {tname} at indices {{lo}}..{{hi}} along axis "
               f"{d}{where} in this call, but {tname}.shape[{d}] is {{size}}")
        self.added.append(Constraint(lhs, _TRUE, msg, self._loc(orig), KernelIndexError,
                                     (("lo", lo), ("hi", hi), ("size", ext)), _HINT))
        return True

    def _empty_read(self, tensor, ext) -> None:
        """A read in a kd.where branch whose index is checked in range wherever the branch is
        taken: where ``ext`` is 0 the branch is never taken, but backends evaluate both
        branches, so ``tensor`` is marked (``Tensor.empty_reads``): its loads must not touch
        memory while it is empty (numpy's lazy ``np.pad``/``concatenate`` of an empty part)."""
        if not tensor.empty_reads and not Prover(self.ranges).nonneg(mk.sub(ext, 1)):
            tensor.empty_reads = True

    def _empty_guard(self, orig, d, ext, guarded: bool) -> None:
        """A clamped read needs one element to read: check ``ext >= 1`` unless proven."""
        key = (orig.tensor, d)
        if key in self.guarded or Prover(self.ranges).nonneg(mk.sub(ext, 1)):
            return
        self.guarded.add(key)
        fail = []
        for h in self.nonempty:
            h = simplify(h)
            if type(h) is n.Const:
                if not h.value:
                    return          # the stage never runs
                continue
            fail.append(negate(h))
        lhs = _any(fail + [mk.compare(C.GT, ext, 0)])
        text, tname = self._text(orig)
        if guarded:
            msg = (f"{text} is evaluated at every point of {_esc(self.stage.name)}'s domain, but "
                   f"{tname}.shape[{d}] is 0: there is no element to read")
        else:
            msg = f"index out of range: {text} reads {tname}, but {tname}.shape[{d}] is 0"
        self.added.append(Constraint(lhs, _TRUE, msg, self._loc(orig), KernelIndexError,
                                     (), _EMPTY_HINT if guarded else _HINT))

    def require(self, value, lo, hi, path, message: str, error, loc=None, hint=None,
                detail=()) -> None:
        """The facility behind the data checks, for any rule: ``lo <= value <= hi`` (shape
        expressions, None: unbounded) must hold wherever the conditions of ``path`` hold.
        Proven: nothing; else a ``DomainCheck`` run before the kernel (``message`` is
        formatted with ``{min}``, ``{max}``, ``{lo}``, ``{hi}`` and ``detail``'s names)."""
        ranges = self.ranges
        if path:
            sub = self._narrow(path)
            if sub is None:
                return
            ranges = sub[0]
        if not _has_data(value):
            p = Prover(ranges, self.domain)
            lo_ok = lo is None or p.nonneg(mk.sub(value, lo))
            hi_ok = hi is None or p.nonneg(mk.sub(hi, value))
            if lo_ok and hi_ok:
                return
        where = _all([self._cond(path, k) for k in range(len(path))]) if path else None
        self.graph.data_checks.append(DomainCheck(self.axes, value, lo, hi, where, message, error,
                                                  loc or self.stage.loc, hint, tuple(detail)))

    def _data_check(self, orig, new, d, ext, lo_ok, hi_ok, path) -> None:
        where = _all([self._cond(path, k) for k in range(len(path))]) if path else None
        text, tname = self._text(orig)
        cond = " where its kd.where condition holds" if path else ""
        msg = (f"index out of range: {text} reads {tname} at indices {{min}}..{{max}} along axis "
               f"{d}{cond} in this call, but {tname}.shape[{d}] is {{size}}")
        self.graph.data_checks.append(DomainCheck(
            self.axes, new.indices[d], None if lo_ok else n.const(0),
            None if hi_ok else simplify(mk.sub(ext, 1)), where, msg, KernelIndexError,
            self._loc(orig), _HINT, (("size", ext),)))


def _int_power(walk, orig, new, path):
    """numpy raises ValueError for an integer to a negative integer power: a signed integer
    exponent must be >= 0 wherever the power is evaluated (proven, or checked on the data
    before the kernel runs; literal and scalar-argument exponents are checked earlier, by
    kdsl.frontend.by_value)."""
    if orig.op is n.BinOp.POW and orig.dtype.is_int and orig.b.dtype.is_signed:
        walk.require(new.b, n.const(0, new.b.dtype), None, path,
                     "integers to negative integer powers are not allowed (numpy raises "
                     "ValueError): the exponents are {min}..{max} in this call", KernelValueError,
                     hint="cast the base to a float type first, or keep the exponents >= 0")
    return new


#: node type -> rule(walk, original node, rebuilt node, path) -> node, run in post-order on
#: every stage body; a rule may rewrite the node and add checks (``walk.require``)
RULES = {n.TensorRead: _StageReads._read, n.Binary: _int_power}


def register_rule(node_type, rule) -> None:
    """Add a rule for ``node_type`` (e.g. integer ``**`` needing a non-negative exponent)."""
    RULES[node_type] = rule


def _all(conds):
    out = None
    for c in conds:
        out = c if out is None else n.Binary(c.dtype, n.BinOp.AND, out, c)
    return _TRUE if out is None else out


def _any(conds):
    out = None
    for c in conds:
        out = c if out is None else n.Binary(c.dtype, n.BinOp.OR, out, c)
    return out


def _extremes(idx, box: dict, domain: dict):
    """(min, max) of ``idx`` over ``box`` when it is affine in the axes (exact), else None."""
    if type(idx) is n.Binary and idx.op is n.BinOp.FLOORDIV and type(idx.b) is n.Const \
            and idx.b.value > 0:
        span = _extremes(idx.a, box, domain)
        return None if span is None else tuple(simplify(mk.floordiv(x, idx.b)) for x in span)
    if _has_data(idx):
        return None
    try:
        return _affine_span(idx, box, domain)
    except Exception:   # outside the model: the data check decides
        return None


def _affine_span(idx, box, domain):
    """Extremes of an affine ``idx``: the axes are eliminated innermost first, each at the end
    of its range that the sign of its coefficient picks, so a range may use earlier axes (a
    triangular reduction ``k < i + 1``): exact where every range is non-empty."""
    poly = Poly()
    p = poly.of(idx)
    lo_p, hi_p = p, p
    for v in reversed(list(box)):
        lo, hi = (_nonempty_end(x) for x in box[v])
        lo_p = _eliminate(poly, lo_p, v, lo, hi, domain)
        hi_p = _eliminate(poly, hi_p, v, hi, lo, domain)
        if lo_p is None or hi_p is None:
            return None
    for q in (lo_p, hi_p):      # every axis eliminated, or something opaque holds one
        for mono in q:
            if any(a in domain for k in mono
                   for a in collect(poly.atoms.exprs[k], lambda x: isinstance(x, n.Var))):
                return None
    return simplify(poly.expr(lo_p)), simplify(poly.expr(hi_p))


def _eliminate(poly, p, v, at_pos, at_neg, domain):
    """``p`` with axis ``v`` (linear) replaced by ``at_pos`` where its coefficient is positive,
    else ``at_neg``; None where ``v`` is not linear or the range end is not affine."""
    out = {}
    for mono, c in p.items():
        atoms = [poly.atoms.exprs[k] for k in mono]
        if not any(a is v for a in atoms):
            out[mono] = out.get(mono, 0) + c
            continue
        if len(atoms) != 1 or (at_pos is None or at_neg is None):
            return None
        for m2, c2 in poly.of(at_pos if c > 0 else at_neg).items():
            out[m2] = out.get(m2, 0) + c * c2
    return {m: c for m, c in out.items() if c}


def _nonempty_end(e):
    """A range end with ``max(x, 0)`` (an extent clamped to be >= 0) read as ``x``: the
    same wherever the range is non-empty, the case the extremes are taken over."""
    if e is None:
        return None
    def strip(x):
        if type(x) is n.Binary and x.op is n.BinOp.MAX and type(x.b) is n.Const and x.b.value == 0:
            return strip(x.a)
        if type(x) is n.Binary and x.op in (n.BinOp.ADD, n.BinOp.SUB):
            a, b = strip(x.a), strip(x.b)
            return x if a is x.a and b is x.b else dataclasses.replace(x, a=a, b=b)
        return x
    return strip(e)
