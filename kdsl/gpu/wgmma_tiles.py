"""The shared-operand multiply-accumulate of ``kd.intrin.wgmma`` (helpers of the ``tensorize``
pass, not a pass).

A nest tensorized with ``kd.intrin.wgmma(n)`` whose store is

    acc[i, j] = acc[i, j] + float32(As[.., i, k]) * float32(Bs[.., k, j])

with ``acc`` a ``wmma.accumulator`` fragment and ``As``/``Bs`` SHARED buffers becomes one
``WgmmaMma``: a warp's 16 x n x 16 product read straight from shared memory.  Checked here,
each at the user's ``tensorize`` line:

* the tile: loops of 16 (rows), n (columns), 16 (reduction), each tile a block of consecutive
  rows and columns of its buffer's last two dimensions, laid out as the intrinsic declares;
* where the tiles may start: Hopper reads shared tiles in 128-byte swizzled lines (the layout
  ``shared_layout`` gives the operand buffers), so a tile starts on an 8-row boundary, along a
  contiguous k on a 16-element one and along a contiguous m or n on a 64-element one (a line);
* the warpgroup: four consecutive warps (threadIdx.y 4g..4g+3, threadIdx.x the 32 lanes) run
  the statement as one instruction, so A's first row is 16 * threadIdx.y plus a part common to
  the group, B's tile and the accumulator tile do not depend on threadIdx.y, threadIdx.y has a
  multiple of 4 iterations, and no condition on a thread index encloses the statement;
* partial tiles: a guard on the rows or columns only marks results that are never stored; a
  guard on the reduction (its end inside a tile) must find zeros in both shared tiles, because
  the tensor cores multiply whole 16-deep tiles: padded caches (``cache_read(pad=True)``),
  whose copies are clipped at the reduction's end where their array may be longer
  (``reduction_clips``).
"""
from __future__ import annotations

from .. import dtypes as dt
from ..ir import make as mk
from ..ir import nodes as n
from ..ir.simplify import linear, prove, simplify
from ..ir.visitor import collect, collect_stmts, free_vars
from .tensor_nests import (LAYOUT, S, Fail, check_multiple, const_extent, limits, mem_index, show,
                           tile_index, tile_loops)
from ..ir.conditions import conjuncts
from .wmma_padding import covers, terms

#: elements of a 128-byte swizzle line, and of one of its 16-byte chunks, for 16-bit operands
LINE, CHUNK = 64, 8


def match(fail, st: n.Store, intrin) -> dict:
    """The operand Loads (``a``, ``b``) of ``acc[..] = acc[..] + cast(a) * cast(b)`` with both
    operands in shared memory, or a ScheduleError saying what differs."""
    acc, v = st.buffer, st.value
    want = (f"{acc.name}[i, j] = {acc.name}[i, j] + float32(As[i, k]) * float32(Bs[k, j]) with As and "
            "Bs shared buffers")
    if acc.dtype is not dt.float32:
        fail(f"the accumulator {acc.name} is {acc.dtype.name}; {intrin} accumulates in float32",
             hint="compute the product in float32 (cast the inputs: A.astype(kd.float32))")
    same = lambda x: type(x) is n.Load and x.buffer is acc and x.indices == st.indices  # noqa: E731
    prod = None
    if type(v) is n.Binary and v.op is n.BinOp.ADD:
        prod = v.b if same(v.a) else v.a if same(v.b) else None
    if prod is None or not (type(prod) is n.Binary and prod.op is n.BinOp.MUL):
        fail(f"it computes {show(st)}; a wgmma multiply-accumulate is {want}")
    ops = []
    for x in (prod.a, prod.b):
        y = x.a if type(x) is n.Cast else x
        if type(y) is not n.Load or y.buffer.scope is not S.SHARED:
            name = y.buffer.name if type(y) is n.Load else show(y)
            what = f"the {y.buffer.scope.value} buffer {name}" if type(y) is n.Load else name
            fail(f"it multiplies {show(x)}: {what} is not in shared memory; wgmma reads both operand "
                 "tiles from shared memory", hint=f"cache_read it with scope 'shared' for {acc.name}'s stage")
        if y.buffer.dtype is not intrin.dtype:
            fail(f"the shared buffer {y.buffer.name} holds {y.buffer.dtype.name}; {intrin} takes "
                 f"{intrin.dtype.name} inputs", hint=f"declare kd.intrin.wgmma(..., dtype=kd.{y.buffer.dtype.name}) "
                 "if it is float16 or bfloat16")
        if x.dtype is not acc.dtype:
            fail(f"it multiplies {show(x)}; a wgmma product is cast to the accumulator's float32")
        ops.append(y)
    return {"ops": ops}


def analyze(plan, nest) -> None:
    """Match the tile (loops, operand roles, layouts, origins) of a wgmma nest into
    ``nest.info``; fix the accumulator's orientation in ``plan``."""
    fail, intrin, st = Fail(nest.req), nest.req.intrin, nest.store
    tv = tile_loops(fail, nest, f"wgmma multiply-accumulate has 3: the 16 rows, {intrin.n} "
                    "columns and 16-deep reduction of one warp's tile")
    acc = st.buffer
    acc_ix = tile_index(fail, acc, st.indices, tv, f"the accumulator {acc.name}")
    x, y = nest.info["ops"]
    dx, ox = mem_index(fail, x.buffer, x.indices, tv, x.buffer.name)
    dy, oy = mem_index(fail, y.buffer, y.indices, tv, y.buffer.name)
    acc_vars = {v for v, _ in acc_ix}
    ks = set(dx) & set(dy)
    if len(acc_vars) != 2 or len(ks) != 1 or set(dx) - ks == set(dy) - ks:
        fail(f"it computes {show(st)}; a wgmma multiply-accumulate is c[i, j] = c[i, j] + a[i, k] * b[k, j]")
    (k,) = ks
    # A is the operand that shares the accumulator's row variable (its first tile index)
    row_var = acc_ix[0][0] if not plan.is_transposed(acc) else acc_ix[1][0]
    (a, da, oa), (b, db, ob) = ((x, dx, ox), (y, dy, oy)) if row_var in dx else ((y, dy, oy), (x, dx, ox))
    (i,) = set(da) - ks
    (j,) = set(db) - ks
    if {i, j} != acc_vars:
        fail(f"it computes {show(st)}; a wgmma multiply-accumulate is c[i, j] = c[i, j] + a[i, k] * b[k, j]")
    ext = {f.var: const_extent(fail, f) for f in nest.loops}
    for v, want, what in ((i, intrin.m, "m: a warp's 16 rows"), (j, intrin.n, "n: columns"),
                          (k, intrin.k, "k: reduction")):
        if ext[v] != want:
            fail(f"the loop under {v.name} has extent {ext[v]}, {intrin} needs {want} ({what})",
                 hint=f"split that axis by {want} and tensorize the inner loops")
    plan.orient(fail, acc, acc_ix[0][0] is j, nest)
    for v, rest in acc_ix:
        check_multiple(fail, rest, ext[v], f"the tile of {acc.name} used here")
    nd_a, nd_b = len(a.indices), len(b.indices)
    layout_a = n.WmmaLayout.ROW_MAJOR if da[i] == nd_a - 2 else n.WmmaLayout.COL_MAJOR
    layout_b = n.WmmaLayout.ROW_MAJOR if db[k] == nd_b - 2 else n.WmmaLayout.COL_MAJOR
    for buf, layout, field in ((a.buffer, layout_a, "layout_a"), (b.buffer, layout_b, "layout_b")):
        declared = getattr(intrin, field)
        if layout is not LAYOUT[declared]:
            how = "last" if layout is n.WmmaLayout.COL_MAJOR else "next-to-last"
            fail(f"{buf.name} holds its tile with the tile's rows along its {how} dimension: that is "
                 f"{layout.value}, and {intrin} declares {field}={declared!r}",
                 hint=f"declare {field}={layout.value!r} in kd.intrin.wgmma, or reorder the data")
    if layout_a is not n.WmmaLayout.ROW_MAJOR:
        fail(f"{a.buffer.name} holds A's tile with k along its next-to-last dimension (a column-major A); "
             "wgmma reads A with k along the rows (row_major) here",
             hint="cache A with its k axis last (transpose it first), or use kd.intrin.wmma")
    _check_lines(fail, a.buffer, oa, da, i, k, "A")
    _check_lines(fail, b.buffer, ob, db, j, k, "B")
    lim = limits(fail, nest.guards, tv)
    nest.info.update(i=i, j=j, k=k, acc_ix=acc_ix, a=a, b=b, a_origin=oa, b_origin=ob,
                     layout_a=layout_a, layout_b=layout_b, dims_a=da, dims_b=db, klimit=lim.get(k))


def _check_lines(fail, buf: n.Buffer, origin, dims, mn, k, name: str) -> None:
    """Where a tile may start in a 128-byte swizzled buffer (module docstring), and rows of
    whole lines."""
    last = len(origin) - 1
    row, rows = buf.shape[-1], buf.shape[-2]
    if not (type(rows) is n.Const and rows.value % CHUNK == 0):
        fail(f"the shared buffer {buf.name} ({name}) has {show(rows)} rows; wgmma reads shared tiles in "
             f"atoms of {CHUNK} rows", hint=f"make the shared tile's rows a multiple of {CHUNK}")
    if not (type(row) is n.Const and row.value % LINE == 0):
        fail(f"the shared buffer {buf.name} ({name}) has rows of {show(row)} elements; wgmma reads "
             f"shared tiles in 128-byte lines, so its rows must be a multiple of {LINE} elements",
             hint=f"make the shared tile's last axis a multiple of {LINE} (e.g. a k step of 64)")
    contiguous = k if dims[k] == last else mn
    for v in (mn, k):
        d = dims[v]
        step = (16 if v is k else LINE) if v is contiguous else CHUNK
        check_multiple(fail, linear(origin[d]), step,
                       f"the {name} tile in {buf.name} (along dimension {d})")


def build(plan, nest) -> n.WgmmaMma:
    """The ``WgmmaMma`` of an analysed nest."""
    fail, intrin, inf = Fail(nest.req), nest.req.intrin, nest.info
    acc = nest.store.buffer
    rests = [simplify(rest.to_expr()) for _, rest in inf["acc_ix"]]
    tile = tuple(rests[::-1]) if plan.is_transposed(acc) else tuple(rests)
    frag = plan.buffer(fail, acc, intrin)
    return n.WgmmaMma(frag, tile, inf["a"].buffer, inf["a_origin"], inf["layout_a"],
                      inf["b"].buffer, inf["b_origin"], inf["layout_b"], frag, tile,
                      (intrin.m, intrin.n, intrin.k))


# ------------------------------------------------------------------ the warpgroup
def check_warpgroup(nest, stack: list, conds: list) -> None:
    """The warpgroup rules of the module docstring, on the enclosing loops ``stack`` and the
    enclosing conditions ``conds`` of a wgmma nest."""
    fail, inf = Fail(nest.req), nest.info
    threads = [f for f in stack if f.kind is n.ForKind.BOUND and f.thread.is_thread]
    ys = [f for f in threads if f.thread is n.ThreadTag.THREAD_Y]
    hint = ("bind the warps to threadIdx.y (4, 8, 12 or 16 of them: threadIdx.x is the 32 lanes), "
            "each with 16 rows of A: A's row = 16 * threadIdx.y + ...")
    if len(ys) != 1 or not (type(ys[0].extent) is n.Const and ys[0].extent.value % 4 == 0):
        got = "no loop" if not ys else f"a loop of {show(ys[0].extent)} iterations"
        fail(f"{got} bound to threadIdx.y encloses it; a wgmma runs on warpgroups of four warps "
             "counted along threadIdx.y", hint=hint)
    wy = ys[0].var
    for c in conds:
        bad = [f.var.name for f in threads if f.var in free_vars(c)]
        if bad:
            fail(f"it lies under the condition {show(c)}, which depends on {', '.join(bad)}; the four "
                 "warps of a warpgroup must run a wgmma together", hint="keep thread-dependent guards out "
                 "of the loops around the tensorized nest (pad the shared tiles: cache_read(..., pad=True))")
    a_layout = inf["layout_a"]
    row_dim = len(inf["a_origin"]) - (2 if a_layout is n.WmmaLayout.ROW_MAJOR else 1)
    for d, e in enumerate(inf["a_origin"]):
        c = linear(e).terms.get(wy, 0)
        if d == row_dim and c != 16:
            fail(f"warp {wy.name} (threadIdx.y) reads A's tile from row {show(e)} of {inf['a'].buffer.name}; "
                 "the four warps of a warpgroup multiply 64 consecutive rows, 16 each: the row must be "
                 f"16 * {wy.name} plus a part common to the group", hint=hint)
        if d != row_dim and wy in free_vars(e):
            fail(f"warp {wy.name} (threadIdx.y) reads A's tile at {show(e)} along dimension {d}; only "
                 "its rows may depend on the warp", hint=hint)
    acc_tile = tuple(simplify(rest.to_expr()) for _, rest in inf["acc_ix"])
    for what, exprs in (("B's tile", inf["b_origin"]), ("the accumulator tile", acc_tile)):
        for e in exprs:
            if wy in free_vars(e):
                fail(f"{what} starts at {show(e)}, which depends on the warp {wy.name}; the four warps of "
                     "a warpgroup share one B tile", hint=hint)


# ------------------------------------------------------------------ partial reductions
def _padded_copy(body, buf: n.Buffer):
    """The ``if`` of the copy that fills shared ``buf`` when it is a padded cache's
    (``loop_nests``' form ``if c: X[..] = A[..] else: X[..] = 0``: zeros where ``c`` fails),
    the only store into ``buf``; else None."""
    stores = collect_stmts(body, lambda x: type(x) is n.Store and x.buffer is buf)
    ifs = collect(body, lambda x: type(x) is n.IfThenElse and type(x.then) is n.Store
                  and x.then.buffer is buf and type(x.otherwise) is n.Store and x.otherwise.buffer is buf
                  and type(x.otherwise.value) is n.Const and x.otherwise.value.value == 0)
    if len(stores) != 2 or len(ifs) != 1 or type(ifs[0].then.value) is not n.Load:
        return None
    return ifs[0]


def zero_from(copy: n.IfThenElse, dim: int):
    """The index of dimension ``dim`` of the buffer a padded ``copy`` fills from which the copy
    leaves zeros (where the source array ends: its guard ``src_index < N``), as an Expr in the
    variables of the loops around the copy; None when that cannot be read off."""
    st = copy.then
    x = st.indices[dim]
    inner = free_vars(linear(x).to_expr())
    for e in st.value.indices:
        off = linear(e).add(linear(x), -1)              # source index - buffer index
        if not (free_vars(e) & inner) or free_vars(off.to_expr()) & inner:
            continue
        for g in conjuncts(copy.cond):
            if type(g) is not n.Compare or g.op not in (n.CmpOp.LT, n.CmpOp.LE) or not g.a.dtype.is_int:
                continue
            rest = linear(g.a).add(linear(g.b), -1).add(linear(e), -1)   # g: e + rest < 0 (<= 0)
            if free_vars(rest.to_expr()) & inner:
                continue
            end = rest.scale(-1).add(type(rest)(rest.dtype, {}, 1 if g.op is n.CmpOp.LE else 0))
            return simplify(end.add(off, -1).to_expr())   # e < end  <=>  x < end - off
    return None


def reduction_clips(nest, body, ranges: dict, equal, scalars) -> dict:
    """A guard on the reduction inside a wgmma tile (``klimit``) must find zeros in both shared
    tiles from the reduction's end on.  A padded cache holds zeros from its array's end on;
    where the array may be longer than the reduction (``sum(A[i, r] * B[r, j])`` over r < K
    with B taller), its copy is clipped at the reduction's end too (it then reads less of an
    array the kernel does not use beyond K).  Returns {id(copy if): conjuncts to add to its
    condition}; a ScheduleError where neither holds."""
    inf = nest.info
    klim = inf["klimit"]
    if klim is None:
        return {}
    fail, size = Fail(nest.req), nest.req.intrin.k
    out = {}
    for op, dims, origin in (("a", inf["dims_a"], inf["a_origin"]), ("b", inf["dims_b"], inf["b_origin"])):
        buf = inf[op].buffer
        d = dims[inf["k"]]
        copy = _padded_copy(body, buf)
        start = None if copy is None else zero_from(copy, d)
        if start is not None and covers(klim, simplify(mk.sub(start, origin[d])), size, ranges, equal):
            continue
        allowed = (free_vars(start) | set(scalars)) if start is not None else set()
        ends = [simplify(mk.add(t, origin[d])) for t in terms(klim)
                if prove(mk.compare(n.CmpOp.GE, t, mk.as_expr(size)), ranges) is not True]
        if start is None or any(free_vars(e) - allowed for e in ends):
            fail(f"the accumulation stops at k < {show(klim)} inside a 16-deep tile, and the tensor cores "
                 f"multiply whole tiles: {buf.name} must hold zeros from the reduction's end on",
                 hint="cache both operands with cache_read(..., 'shared', ..., pad=True), attached "
                      "(compute_at) at the reduction's tile loop")
        x = copy.then.indices[d]
        out.setdefault(id(copy), []).extend(mk.compare(n.CmpOp.LT, x, e) for e in ends)
    return out


__all__ = ["match", "analyze", "build", "check_warpgroup", "reduction_clips", "zero_from"]
