"""The loop nests under tensorized axes, read for the ``tensorize`` pass (helpers, not a pass):
the perfect nest under a tensorized loop (``Nest``, ``parse_nest``), how its indices address a
fragment's tile or a memory tile (``tile_index``, ``mem_index``), the valid extents its guards
allow (``limits``), and the ScheduleErrors of one request (``Fail``), each naming the user's
``tensorize`` line.  Shared by the wmma (fragment) and wgmma (shared-operand) rewrites."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..errors import ScheduleError
from ..ir import nodes as n
from ..ir.printer import format_expr, format_stmt
from ..ir.simplify import linear, simplify
from ..ir.visitor import collect, free_vars
from ..ir import make as mk
from ..schedule.records import where
from ..ir.conditions import conjuncts

S = n.Scope
FRAG_ROLE = {S.WMMA_MATRIX_A: "matrix_a", S.WMMA_MATRIX_B: "matrix_b", S.WMMA_ACCUMULATOR: "accumulator"}
LAYOUT = {"row_major": n.WmmaLayout.ROW_MAJOR, "col_major": n.WmmaLayout.COL_MAJOR}


@dataclass
class Nest:
    """The perfect nest under one tensorized loop."""

    req: n.TensorizeRequest
    loop: n.For
    loops: list            # the For nodes, outermost first
    guards: list           # conjuncts of the ifs inside the nest
    store: n.Store
    role: str = ""         # "load", "fill", "mma", "store"
    info: dict = dataclasses.field(default_factory=dict)


class Fail:
    """Builds the ScheduleErrors of one request (its stage, axis and line)."""

    def __init__(self, req):
        self.req = req

    def __call__(self, msg, hint=None):
        r = self.req
        raise ScheduleError(f"{r.stage.name}.tensorize({r.axis.name}, {r.intrin}){where(r.loc)}: {msg}",
                            loc=r.loc, hint=hint)


def show(x) -> str:
    return format_expr(x) if isinstance(x, n.Expr) else format_stmt(x).strip()


# ------------------------------------------------------------------ parsing
def parse_nest(req, loop: n.For) -> Nest:
    fail = Fail(req)
    loops, guards, s = [], [], loop
    while True:
        t = type(s)
        if t is n.For:
            if s.kind is n.ForKind.BOUND:
                fail(f"loop {s.var.name} inside the tensorized nest is bound to {s.thread.value}; "
                     "the loops of a wmma tile are the warp's own", hint="bind only the loops outside it")
            loops.append(s)
            s = s.body
        elif t is n.IfThenElse and s.otherwise is None:
            guards.extend(conjuncts(s.cond))
            s = s.then
        elif t is n.Store:
            return Nest(req, loop, loops, guards, s)
        else:
            fail(f"the nest under {req.axis.name} is not one loop nest around one store:\n    "
                 + show(s).replace("\n", "\n    "),
                 hint="tensorize at the loop of the tile's first axis, with no other stage attached inside it")


def tile_loops(fail, nest: Nest, what: str) -> list:
    """The variables of a multiply-accumulate nest's three loops (rows, columns, reduction);
    ``fail`` names the loops there are otherwise (``what``: the intrinsic's tile, in words)."""
    if len(nest.loops) != 3:
        fail(f"the nest under {nest.req.axis.name} has {len(nest.loops)} loops "
             f"({', '.join(f.var.name for f in nest.loops)}); a {what}",
             hint="tensorize at the first of the three loops of one tile")
    return [f.var for f in nest.loops]


def const_extent(fail, loop: n.For) -> int:
    if not (isinstance(loop.min, n.Const) and loop.min.value == 0 and isinstance(loop.extent, n.Const)):
        fail(f"loop {loop.var.name} has extent {show(loop.extent)}; a wmma tile needs constant extents",
             hint="split the axis by the tile size and tensorize the inner loop")
    return loop.extent.value


def affine(fail, e: n.Expr, tvars, what: str):
    """(coefficients of the tile vars, the rest as a Linear) of index ``e``."""
    if not e.dtype.is_int:
        fail(f"{what} is indexed by {show(e)}, not an integer")
    lin = linear(e)
    coeffs, rest = {}, {}
    for term, c in lin.terms.items():
        if term in tvars:
            coeffs[term] = c
        elif free_vars(term) & set(tvars):
            fail(f"{what} is indexed by {show(e)}, which is not affine in the tile's loops")
        else:
            rest[term] = c
    return coeffs, type(lin)(lin.dtype, rest, lin.const)


def unit_lead(buf: n.Buffer) -> int:
    """How many leading dimensions of fragment ``buf`` there are before its last two, each of
    extent 1 (a batched product's fragment holds one matrix), or -1 when one is longer."""
    lead = len(buf.shape) - 2
    if lead < 0 or not all(type(x) is n.Const and x.value == 1 for x in buf.shape[:lead]):
        return -1
    return lead


def frag_dims(buf: n.Buffer):
    """The two dimensions of fragment ``buf`` that hold its tile grid: the dimensions of
    extent other than 1 (a fragment computed for one matrix of a batch, or for one image row
    of a convolution, has extent 1 in the others, wherever they lie), else the last two;
    None when more than two dimensions are longer than 1."""
    long = [d for d, x in enumerate(buf.shape) if not (type(x) is n.Const and x.value == 1)]
    if len(long) > 2:
        return None
    if len(long) < 2:       # (a tile dimension of extent 1: keep the last ones in order)
        rest = [d for d in range(len(buf.shape)) if d not in long]
        long = sorted(long + rest[len(rest) - (2 - len(long)):])
    return tuple(long)


def tile_index(fail, buf: n.Buffer, indices, tvars, what: str):
    """For each of the last two dimensions of fragment ``buf``: (its tile var, the tile's first
    index); leading dimensions of extent 1 (one matrix of a batch) have index 0."""
    keep = frag_dims(buf)
    if keep is not None and len(buf.shape) > 2 and len(indices) == len(buf.shape):
        indices = [indices[d] for d in keep]
    out = []
    for d, e in enumerate(indices):
        coeffs, rest = affine(fail, e, tvars, what)
        if len(coeffs) != 1 or next(iter(coeffs.values())) != 1:
            fail(f"{what} is indexed by {show(e)} in dimension {d}; a tile is addressed by one "
                 "of its loops in each dimension")
        out.append((next(iter(coeffs)), rest))
    return out


def mem_index(fail, buf, indices, tvars, what: str, any_dims: bool = False):
    """(dimension of ``buf`` holding each tile var, origin Exprs) of a load or store's index.
    The tile spans ``buf``'s last two dimensions, or with ``any_dims`` any two (a wmma tile
    of an NCHW image: channels x columns at one row)."""
    dims, origin = {}, []
    for d, e in enumerate(indices):
        coeffs, rest = affine(fail, e, tvars, what)
        for v, c in coeffs.items():
            if c != 1 or v in dims or len(coeffs) > 1:
                fail(f"{buf.name} is read as [{', '.join(show(x) for x in indices)}]; a wmma tile "
                     "is a block of consecutive rows and columns of it")
            dims[v] = d
        origin.append(simplify(rest.to_expr()))
    nd = len(indices)
    if any_dims and len(set(dims.values())) == 2:
        return dims, tuple(origin)
    if set(dims.values()) != {nd - 2, nd - 1}:
        fail(f"{buf.name} is accessed as [{', '.join(show(x) for x in indices)}]; a wmma tile "
             f"spans {buf.name}'s last two dimensions")
    return dims, tuple(origin)


def limits(fail, guards, tvars) -> dict:
    """tile var -> the valid extent its guards allow (``base + x < N`` gives ``N - base``); a
    guard on none of the tile's loops keeps the whole tile or none of it (the first tile
    var's extent is 0 where it fails)."""
    out, whole = {}, []
    for g in guards:
        used = [v for v in tvars if v in free_vars(g)]
        if not used and g.dtype.is_bool and not collect(g, lambda x: isinstance(x, n.Load)):
            whole.append(g)     # the whole tile or none of it (one image row of a convolution)
            continue
        if collect(g, lambda x: isinstance(x, n.Load)):
            fail(f"the tile is guarded by {show(g)}, which reads memory; a wmma tile can only be "
                 "cut short at the end of its rows or columns")
        ok = type(g) is n.Compare and g.a.dtype.is_int and len(used) == 1
        if ok:
            lin = linear(g.a).add(linear(g.b), -1)         # a - b
            op, v = g.op, used[0]
            if op in (n.CmpOp.GT, n.CmpOp.GE):              # a > b  <=>  b - a < 0
                lin, op = lin.scale(-1), {n.CmpOp.GT: n.CmpOp.LT, n.CmpOp.GE: n.CmpOp.LE}[op]
            rest = type(lin)(lin.dtype, {t: c for t, c in lin.terms.items() if t is not v}, lin.const)
            ok = op in (n.CmpOp.LT, n.CmpOp.LE) and lin.terms.get(v) == 1 and not (free_vars(rest.to_expr()) & set(tvars))
        if not ok:
            fail(f"the tile is guarded by {show(g)}; a wmma tile can only be cut short at the end "
                 "of its rows or columns (x < N on one tile axis)",
                 hint="pad the input to whole tiles or change the schedule so the tile loops are unguarded")
        # v + rest < 0  <=>  v < -rest ;  v + rest <= 0  <=>  v < 1 - rest
        lim = rest.scale(-1)
        if op is n.CmpOp.LE:
            lim = lim.add(type(lim)(lim.dtype, {}, 1))
        e = simplify(lim.to_expr())
        out[v] = e if v not in out else simplify(mk.min_(out[v], e))
    if whole and tvars:      # no valid row where a condition fails (the extents clamp above)
        v = tvars[0]
        cond = whole[0]
        for g in whole[1:]:
            cond = mk.logical_and(cond, g)
        out[v] = simplify(mk.select(cond, out.get(v, mk.as_expr(WHOLE)), mk.as_expr(0)))
    return out


#: the valid extent of a tile axis no guard bounds (the extents clamp to the tile's size)
WHOLE = 1 << 30


def check_multiple(fail, rest, size: int, what: str):
    if rest.const % size or any(c % size for c in rest.terms.values()):
        fail(f"{what} starts at {show(rest.to_expr())}, not at a multiple of the tile's {size}")


__all__ = ['FRAG_ROLE', 'Fail', 'LAYOUT', 'Nest', 'affine', 'check_multiple', 'const_extent', 'frag_dims', 'limits', 'mem_index', 'parse_nest', 'show', 'tile_index', 'unit_lead', 'S']
