"""What Dask needs to know about a kernel, read from its stage graph.

Every axis of every stage gets a *label*: ``("out", k)`` for the output's k-th axis (the
output stage's axes, then whatever each read maps to them), ``("red", stage, k)`` for a
reduce axis, each with the range of constant offsets it is read at (a stencil reads
``A[i + c]``).  Reads are walked from the outputs back to the inputs, so every input dim ends
with the set of labels it is read along:

- one ``out`` label at offset 0: the dim is split like the output (blockwise);
- one ``out`` label at offsets ``[lo, hi]``: a stencil along it (a halo of ``hi`` cells);
- one ``red`` label: a reduction across it (a tree reduction when it is chunked);
- a size-1 dim read at index 0: broadcast;
- anything else (an index computed from data or scaled, two labels on one dim, a scan
  axis, an axis used as a value: a condition on absolute positions) must be one chunk.

``analyse(graph)`` returns an ``Analysis``; ``kdsl.dask.mapping`` decides from it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..graph import Graph
from ..ir import nodes as n
from ..ir.visitor import collect


@dataclass
class Analysis:
    """Labels of a graph's axes and the input dims they reach."""

    graph: Graph
    #: per input position: per dim a dict label -> (lo, hi) offsets, or "bcast"
    dims: list
    #: per input position: per dim the reasons it must be one chunk (empty: splittable)
    whole: list
    #: labels whose positions a stage uses as values (argmax's index aside): label -> why
    position: dict = field(default_factory=dict)
    #: reduce stages by name
    reductions: dict = field(default_factory=dict)
    #: the output stages' axis labels (per output: tuple of labels or None for size-1)
    out_labels: tuple = ()
    #: labels compared with constants or with their extent (edge guards): label ->
    #: (cells before, cells after) a block needs so that the guard sees the array's edges
    guards: dict = field(default_factory=dict)
    #: the inputs' size Vars used as values, not as extents (a block would see its own size)
    sizes: set = field(default_factory=set)


def _offset(e, shapes=frozenset()):
    """``(var, c)`` for an index ``var + c`` / ``var - c`` / ``var``, also clamped to the
    array (``max(i - 1, 0)``, ``min(i + 1, n - 1)``: what a read guarded by ``kd.where``
    becomes; the clamp acts only within the halo, which is cut off); None otherwise."""
    while type(e) is n.Binary and e.op in (n.BinOp.MAX, n.BinOp.MIN):
        if type(e.b) is n.Const or (e.op is n.BinOp.MIN and _sizes_only(e.b, shapes)):
            e = e.a
        elif type(e.a) is n.Const or (e.op is n.BinOp.MIN and _sizes_only(e.a, shapes)):
            e = e.b
        else:
            return None
    if type(e) is n.Var:
        return e, 0
    if type(e) is n.Binary and e.op in (n.BinOp.ADD, n.BinOp.SUB):
        a, b = e.a, e.b
        if type(a) is n.Var and type(b) is n.Const and isinstance(b.value, int):
            return a, (b.value if e.op is n.BinOp.ADD else -b.value)
        if e.op is n.BinOp.ADD and type(b) is n.Var and type(a) is n.Const \
                and isinstance(a.value, int):
            return b, a.value
    return None


def _sizes_only(e, shapes) -> bool:
    """Is ``e`` an expression of the inputs' sizes only (``shapes``: their Vars)?"""
    return all(v in shapes for v in collect(e, lambda x: type(x) is n.Var))


def _is_one(e) -> bool:
    return type(e) is n.Const and e.value == 1


def _merge(into: dict, label, lo, hi):
    old = into.get(label)
    into[label] = (lo, hi) if old is None else (min(old[0], lo), max(old[1], hi))


def analyse(graph: Graph) -> Analysis:
    """Label every stage axis and input dim of ``graph`` (see the module docstring)."""
    labels = {}         # stage name -> per axis dict label -> (lo, hi)
    reds = {}
    out_labels = []
    for t in graph.outputs:
        st = t.stage
        if st is None:      # an input returned as it is: its dims are the output's
            out_labels.append(tuple(("out", k) for k in range(t.ndim)))
            continue
        ax = labels.setdefault(st.name, [dict() for _ in st.axes])
        for k in range(len(st.axes)):
            _merge(ax[k], ("out", k), 0, 0)
        out_labels.append(tuple(("out", k) for k in range(len(st.axes))))
    inputs = graph.inputs
    dims = [[dict() for _ in t.shape] for t in inputs]
    whole = [[[] for _ in t.shape] for t in inputs]
    position = {}
    guards = {}     # label -> (cells needed before, after each block) by edge guards
    sizes = set()   # the inputs' size Vars used as values (``A.sum() / n``)
    pos_of = {id(t): j for j, t in enumerate(inputs)}
    shapes = frozenset(graph.shape_vars())
    for st in reversed(graph.stages):
        ax = labels.setdefault(st.name, [dict() for _ in st.axes])
        env = {}            # Var -> dict label -> (lo, hi)
        for k, a in enumerate(st.axes):
            env[a.var] = ax[k]
        for k, a in enumerate(st.reduce_axes):
            lab = ("red", st.name, k)
            env[a.var] = {lab: (0, 0)}
        if st.is_reduction:
            reds[st.name] = st
        scan_axis = st.scan.axis if st.scan is not None else None
        # uses of an axis outside read indices: its absolute position matters
        idx_vars = set()
        reads = collect(st.body, lambda x: isinstance(x, n.TensorRead))
        for r in reads:
            for e in r.indices:
                for v in collect(e, lambda x: type(x) is n.Var):
                    idx_vars.add(id(v))
        body = st.body
        skip = set()
        if isinstance(body, n.Reduce) and body.combiner.kind in (n.CombinerKind.ARGMAX,
                                                                 n.CombinerKind.ARGMIN):
            skip = {id(s) for s in body.sources if type(s) is n.Var}   # the index source
        extents = {a.var: a.dom.extent for a in st.axes}
        found = []
        vals = _value_vars(body, skip, extents, found)
        sizes.update(v for v in vals if v in shapes)
        uses = [v for v in vals if v in env]
        for v in uses:
            for lab in env[v]:
                position[lab] = f"stage {st.name!r} uses the position along it as a value"
        for v, left, right in found:        # edge guards: kd.where(i > 0, ...), i < n - 1
            for lab, (lo, hi) in env.get(v, {}).items():
                gl, gr = guards.get(lab, (0, 0))
                guards[lab] = (max(gl, left - lo), max(gr, right + hi))
        if scan_axis is not None:
            for lab in env[st.axes[scan_axis].var]:
                position[lab] = f"stage {st.name!r} scans along it"
        for r in reads:
            t = r.tensor
            if t.is_input:
                j = pos_of[id(t)]
                target, tw = dims[j], whole[j]
            else:
                target = labels.setdefault(t.stage.name, [dict() for _ in t.stage.axes])
                tw = None
            for d, e in enumerate(r.indices):
                if type(e) is n.Const and _is_one(t.shape[d]):
                    if t.is_input and not target[d]:
                        target[d]["bcast"] = (0, 0)
                    continue
                vo = _offset(e, shapes)
                if vo is None or vo[0] not in env:
                    why = f"it is read at a computed index ({r.tensor.name}[...] in stage " \
                          f"{st.name!r}: a gather or a scaled index)"
                    if tw is not None:
                        tw[d].append(why)
                    else:       # an intermediate read so: every label reaching it is whole
                        target[d][("opaque", st.name)] = (0, 0)
                    for lab in env.get(vo[0], {}) if vo else ():
                        position[lab] = why
                    continue
                v, c = vo
                for lab, (lo, hi) in env[v].items():
                    _merge(target[d], lab, lo + c, hi + c)
    an = Analysis(graph, dims, whole, position, reds, tuple(out_labels), guards, sizes)
    for j, t in enumerate(inputs):
        for d in range(t.ndim):
            labs = {k: v for k, v in dims[j][d].items() if k != "bcast"}
            if "bcast" in dims[j][d] and labs:
                dims[j][d].pop("bcast")
            for lab in labs:        # a scan or a position used: said first
                if lab in position:
                    whole[j][d].insert(0, position[lab])
            if any(k[0] == "opaque" for k in labs):
                whole[j][d].append("an intermediate stage reads it at a computed index")
            elif len([k for k in labs if k[0] == "out"]) > 1:
                kinds = sorted({describe_label(graph, k) for k in labs})
                whole[j][d].append("it is read along several axes (" + ", ".join(kinds) + ")")
    return an


def _guard(e, extents):
    """``(var, before, after)`` for an edge guard ``var + c  <op>  k`` or ``var + c  <op>
    extent + k`` (either side; ``extents``: axis Var -> its extent): the condition changes
    only within ``before`` cells of the start or ``after`` cells of the end; else None."""
    for a, b in ((e.a, e.b), (e.b, e.a)):
        vo = _offset(a)
        if vo is None or vo[0] not in extents:
            continue
        v, c = vo
        if type(b) is n.Const and isinstance(b.value, int):
            return v, max(0, b.value - c + 1), 0
        ext = extents[v]
        k = 0
        if type(b) is n.Binary and b.op in (n.BinOp.ADD, n.BinOp.SUB) and b.a is ext \
                and type(b.b) is n.Const and isinstance(b.b.value, int):
            k = b.b.value if b.op is n.BinOp.ADD else -b.b.value
        elif b is not ext:
            continue
        return v, 0, max(0, c - k + 1)
    return None


def _value_vars(body, skip, extents=None, guards=None) -> list:
    """Vars used in ``body`` outside read indices (``skip``: ids of nodes not walked); edge
    guards (``_guard``) go to ``guards`` instead when ``extents`` is given."""
    out, stack = [], [body]
    while stack:
        e = stack.pop()
        if id(e) in skip:
            continue
        if extents is not None and type(e) is n.Compare:
            g = _guard(e, extents)
            if g is not None:
                guards.append(g)
                continue
        if type(e) is n.Var:
            out.append(e)
            continue
        if isinstance(e, n.TensorRead):
            continue
        if isinstance(e, n.Reduce):
            stack.extend(e.sources)
            if e.condition is not None:
                stack.append(e.condition)
            continue
        for name in getattr(type(e), "__dataclass_fields__", {}):
            if name == "dtype":
                continue
            v = getattr(e, name)
            if isinstance(v, n.Expr):
                stack.append(v)
            elif isinstance(v, tuple):
                stack.extend(x for x in v if isinstance(x, n.Expr))
    return out


def describe_label(graph, lab) -> str:
    """A label in the user's words: ``output axis 1``, ``the reduction of stage 'sum'``."""
    if lab[0] == "out":
        return f"output axis {lab[1]}"
    if lab[0] == "red":
        return f"the reduction of stage {lab[1]!r}"
    return f"a computed index in stage {lab[1]!r}"


class SizeValues:
    """Replace the size Vars in ``vmap`` (Var -> value) where a stage body uses them as
    values: outside reads' indices, edge guards and axes (there they are the block's)."""

    def __init__(self, vmap, extents):
        self.vmap, self.extents = vmap, extents

    def visit(self, e):
        import dataclasses
        if type(e) is n.Var:
            v = self.vmap.get(e)
            return e if v is None else n.const(int(v), e.dtype)
        if isinstance(e, n.TensorRead):
            return e
        if type(e) is n.Compare and _guard(e, self.extents) is not None:
            return e
        changes = {}
        for name in getattr(type(e), "__dataclass_fields__", {}):
            if name in ("dtype", "axes", "combiner"):
                continue
            v = getattr(e, name)
            if isinstance(v, n.Expr):
                nv = self.visit(v)
            elif isinstance(v, tuple) and any(isinstance(x, n.Expr) for x in v):
                nv = tuple(self.visit(x) if isinstance(x, n.Expr) else x for x in v)
            else:
                continue
            if nv is not v and nv != v:
                changes[name] = nv
        return dataclasses.replace(e, **changes) if changes else e
