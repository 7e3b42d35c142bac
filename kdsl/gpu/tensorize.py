"""tensorize: the loop nests under tensorized axes become warp-level WMMA statements (IR pass).

Assumes: ``func.tensorize`` lists the schedule's requests (``loop_nests``); each request's
axis is a loop variable of the body (a reduction's spatial axis: of its init and update
nests); nothing after ``loop_nests`` has changed the nests yet.
Guarantees: without requests, ``func`` itself.  Otherwise every nest under a tensorized
loop is checked against ``kd.intrin.wmma(m, n, k)`` and replaced by one statement:
- a copy into a ``wmma.matrix_a``/``wmma.matrix_b`` buffer -> ``WmmaLoad``;
- the identity init of a ``wmma.accumulator`` -> ``WmmaFill``;
- ``acc[i, j] = acc[i, j] + cast(a[i, k]) * cast(b[k, j])`` -> ``WmmaMma``;
- a copy out of an accumulator, as it is or cast from float32 to a 16-bit float -> ``WmmaStore``;
with loop extents = the tile's, dtypes = the intrinsic's, layouts read off the index maps
(checked against the declared ones) and fragment buffers turned to the canonical orientation
(matrix_a rows x k, matrix_b k x cols, accumulator rows x cols).  Any other nest, or a
fragment still read or written element by element, is a ScheduleError at the user's
``tensorize`` line saying what differs.

Partial tiles (shapes the tiles do not divide): the guards inside a tensorized nest must
each bound one tile axis from above (``base + x < N``, what bound inference emits); they
become the statement's valid ``extents``.  A load zero-fills the tile outside them and a
store writes only inside them, so the multiply-accumulate always runs on whole tiles: the
zeros beyond the end of the reduction add nothing (checked: both operand loads stop where
the accumulation's own reduction guard does).  Rows and columns beyond the output's end are
computed from zeros and never stored.

Warps: the statements run once per warp, so a tensorized nest must not lie inside a loop
bound to ``threadIdx.x``: that index is the 32 lanes of a warp (TVM's convention: warps are
indexed by ``threadIdx.y``/``z``), and every ``threadIdx.x`` loop of such a kernel has
extent 32.  A kernel without one still runs 32 lanes per warp (``Launch`` block x = 32).
"""
from __future__ import annotations

import dataclasses

from .. import dtypes as dt
from ..errors import InternalCompilerError, ScheduleError
from ..ir import make as mk
from ..ir import nodes as n
from ..ir.simplify import simplify
from ..ir.visitor import Mutator, collect, collect_stmts, free_vars
from ..schedule.intrin import WGMMA, WMMA, BlockIntrinsic
from . import wgmma_tiles as wg
from .gates import wants_tensorize
from .wmma_padding import covers, loop_ranges, widen
from .tensor_nests import (FRAG_ROLE, LAYOUT, Fail, Nest, S, check_multiple, const_extent, frag_dims,
                           limits, mem_index, parse_nest, show, tile_index, tile_loops)

def _accumulator_read(v: n.Expr):
    """The accumulator Load that a store copies out, unchanged or cast from float32 to a
    16-bit float (a converting store), else None."""
    if type(v) is n.Cast and v.dtype in (dt.float16, dt.bfloat16) and v.a.dtype is dt.float32:
        v = v.a
    if type(v) is n.Load and v.buffer.scope is S.WMMA_ACCUMULATOR:
        return v
    return None


def _classify(nest: Nest):
    """Set ``nest.role`` or fail saying what the nest computes instead."""
    fail = Fail(nest.req)
    st = nest.store
    b, v = st.buffer, st.value
    shared_ops = isinstance(nest.req.intrin, WGMMA)
    if b.scope in (S.WMMA_MATRIX_A, S.WMMA_MATRIX_B):
        if shared_ops:
            fail(f"it loads the {b.scope.value} fragment {b.name}; {nest.req.intrin} reads its operands "
                 "from shared memory, with no fragment loads",
                 hint="cache_read A and B with scope 'shared' for the accumulator's stage, or use kd.intrin.wmma")
        if type(v) is n.Load and not v.buffer.scope.is_fragment:
            nest.role = "load"
            return
        fail(f"it stores {show(v)} into the {b.scope.value} fragment {b.name}; a wmma load copies "
             "a tile of memory into it unchanged")
    if b.scope is S.WMMA_ACCUMULATOR:
        if type(v) is n.Const:
            nest.role = "fill"
            return
        nest.role = "wgmma" if shared_ops else "mma"
        nest.info.update((wg.match if shared_ops else _match_mma)(fail, st, nest.req.intrin))
        return
    if _accumulator_read(v) is not None:
        nest.role = "store"
        return
    fail(f"its nest computes\n    {show(st)}\n  which is none of what wmma does: a copy into a "
         "wmma.matrix_a/matrix_b fragment (load), c[i, j] = c[i, j] + float32(a[i, k]) * "
         "float32(b[k, j]) into a wmma.accumulator (multiply-accumulate, with its zero init), or "
         "a copy out of an accumulator (store)",
         hint="cache_read the inputs with scopes 'wmma.matrix_a'/'wmma.matrix_b' and cache_write "
              "the product with 'wmma.accumulator', then tensorize each of those stages and the copy out")


def _match_mma(fail, st: n.Store, intrin) -> dict:
    acc, v = st.buffer, st.value
    want = f"{acc.name}[..] = {acc.name}[..] + {intrin.acc_dtype.name}(a[i, k]) * {intrin.acc_dtype.name}(b[k, j])"
    if acc.dtype is not intrin.acc_dtype:
        fail(f"the accumulator {acc.name} is {acc.dtype.name}; {intrin} accumulates in {intrin.acc_dtype.name}",
             hint=f"compute the product in {intrin.acc_dtype.name} (cast the inputs: A.astype(kd.{intrin.acc_dtype.name}))")
    if not (type(v) is n.Binary and v.op is n.BinOp.ADD):
        fail(f"it computes {show(st)}; a wmma multiply-accumulate is {want}")
    same = lambda x: type(x) is n.Load and x.buffer is acc and x.indices == st.indices  # noqa: E731
    prod = v.b if same(v.a) else v.a if same(v.b) else None
    if prod is None or not (type(prod) is n.Binary and prod.op is n.BinOp.MUL):
        fail(f"it computes {show(st)}; a wmma multiply-accumulate is {want}")
    ops = {}
    for x in (prod.a, prod.b):
        y = x.a if type(x) is n.Cast else x
        if type(y) is not n.Load or y.buffer.scope not in (S.WMMA_MATRIX_A, S.WMMA_MATRIX_B):
            name = y.buffer.name if type(y) is n.Load else show(y)
            fail(f"it multiplies {show(x)}: {name} is not a wmma.matrix_a or wmma.matrix_b fragment",
                 hint=f"cache_read it with scope 'wmma.matrix_a' (or 'wmma.matrix_b') for {acc.name}'s stage")
        if x is not y and x.dtype is not acc.dtype:
            fail(f"it multiplies {show(x)}; a wmma product is cast to the accumulator's {acc.dtype.name}")
        if y.buffer.dtype is not intrin.dtype:
            fail(f"the fragment {y.buffer.name} holds {y.buffer.dtype.name}; {intrin} takes "
                 f"{intrin.dtype.name} inputs", hint=f"give the kernel {intrin.dtype.name} inputs, or "
                 f"declare kd.intrin.wmma(..., dtype=kd.{y.buffer.dtype.name}) if tensor cores take it")
        if x is y and y.dtype is not acc.dtype:
            fail(f"it multiplies {y.buffer.dtype.name} values into a {acc.dtype.name} accumulator without a cast")
        if y.buffer.scope in ops:
            fail(f"it multiplies two {y.buffer.scope.value} fragments; a wmma product is matrix_a times matrix_b")
        ops[y.buffer.scope] = y
    return {"a": ops[S.WMMA_MATRIX_A], "b": ops[S.WMMA_MATRIX_B]}


# ------------------------------------------------------------------ analysis per role
def _tile_dims(intrin, scope) -> tuple:
    """(rows, cols) of one tile of a fragment of ``scope``."""
    m, nn, k = intrin.m, intrin.n, intrin.k
    return {S.WMMA_MATRIX_A: (m, k), S.WMMA_MATRIX_B: (k, nn), S.WMMA_ACCUMULATOR: (m, nn)}[scope]


def _dim_words(scope) -> tuple:
    return {S.WMMA_MATRIX_A: ("m", "k"), S.WMMA_MATRIX_B: ("k", "n"), S.WMMA_ACCUMULATOR: ("m", "n")}[scope]


class _Plan:
    """Everything the rewrite needs: matched nests, fragment orientations, canonical buffers."""

    def __init__(self, padded=(), equal=()):
        self.padded = set(padded)      # buffers of padded caches (LoweredFunc.padded)
        self.equal = dict(equal)       # shape Var -> a Var every call checks equal to it
        self.nests: dict = {}          # id(For) -> Nest
        self.transposed: dict = {}     # fragment Buffer -> (bool, the nest that decided it)
        self.canon: dict = {}          # fragment Buffer -> canonical Buffer

    def orient(self, fail, buf, transposed: bool, nest):
        got = self.transposed.get(buf)
        if got is not None and got[0] != transposed:
            fail(f"the fragment {buf.name} is indexed one way round by {got[1].req.stage.name} and the "
                 "other way round here")
        self.transposed[buf] = (transposed, nest)

    def is_transposed(self, buf) -> bool:
        return self.transposed.get(buf, (False, None))[0]

    def buffer(self, fail, buf, intrin) -> n.Buffer:
        """``buf`` in the canonical orientation (shape checked against the tile)."""
        got = self.canon.get(buf)
        if got is not None:
            return got
        shape = tuple(buf.shape)
        keep = frag_dims(buf)
        if keep is not None and len(shape) > 2:   # one matrix of a batch: the tile grid alone
            shape = tuple(shape[d] for d in keep)
        if self.is_transposed(buf):
            shape = shape[::-1]
        tile = _tile_dims(intrin, buf.scope)
        if len(shape) != 2 or not all(isinstance(x, n.Const) and x.value % t == 0 for x, t in zip(shape, tile)):
            fail(f"the fragment {buf.name} has shape [{', '.join(show(x) for x in buf.shape)}]; a "
                 f"{buf.scope.value} fragment holds whole {tile[0]}x{tile[1]} tiles",
                 hint="attach its stage (compute_at) inside the loops that pick one warp's tiles")
        got = buf if shape == tuple(buf.shape) else dataclasses.replace(buf, shape=shape)
        self.canon[buf] = got
        return got


def _analyze_mma(plan: _Plan, nest: Nest):
    fail, intrin, st = Fail(nest.req), nest.req.intrin, nest.store
    tv = tile_loops(fail, nest, "wmma multiply-accumulate has 3: the rows, columns and "
                    f"reduction of one {intrin.m}x{intrin.n}x{intrin.k} tile")
    acc, a, b = st.buffer, nest.info["a"], nest.info["b"]
    acc_ix = tile_index(fail, acc, st.indices, tv, f"the accumulator {acc.name}")
    a_ix = tile_index(fail, a.buffer, a.indices, tv, f"the fragment {a.buffer.name}")
    b_ix = tile_index(fail, b.buffer, b.indices, tv, f"the fragment {b.buffer.name}")
    sets = [{v for v, _ in ix} for ix in (acc_ix, a_ix, b_ix)]
    ks, is_, js = sets[1] & sets[2], sets[1] & sets[0], sets[2] & sets[0]
    if not (all(len(x) == 2 for x in sets) and len(ks) == len(is_) == len(js) == 1):
        fail(f"it computes {show(st)}; a wmma multiply-accumulate is c[i, j] = c[i, j] + a[i, k] * b[k, j]")
    (i,), (j,), (k,) = is_, js, ks
    ext = {f.var: const_extent(fail, f) for f in nest.loops}
    for v, want, what in ((i, intrin.m, "m: rows"), (j, intrin.n, "n: columns"), (k, intrin.k, "k: reduction")):
        if ext[v] != want:
            fail(f"the loop under {v.name} has extent {ext[v]}, {intrin} needs {want} ({what})",
                 hint=f"split that axis by {want} and tensorize the inner loops")
    for buf, ix, first in ((acc, acc_ix, j), (a.buffer, a_ix, k), (b.buffer, b_ix, j)):
        plan.orient(fail, buf, ix[0][0] is first, nest)
        for v, rest in ix:
            check_multiple(fail, rest, ext[v], f"the tile of {buf.name} used here")
    lim = limits(fail, nest.guards, tv)
    nest.info.update(i=i, j=j, k=k, acc_ix=acc_ix, a_ix=a_ix, b_ix=b_ix, klimit=lim.get(k))


def _tile_origin(plan, buf, ix) -> tuple:
    rests = [simplify(rest.to_expr()) for _, rest in ix]
    return tuple(rests[::-1]) if plan.is_transposed(buf) else tuple(rests)


def _row_col_vars(plan, buf, ix) -> tuple:
    vs = [v for v, _ in ix]
    return tuple(vs[::-1]) if plan.is_transposed(buf) else tuple(vs)


def _copy_parts(plan, nest, frag, frag_indices, mem, mem_indices, what):
    """Shared by loads and stores: (fragment tile, memory origin, layout, valid extents)."""
    fail, intrin = Fail(nest.req), nest.req.intrin
    if len(nest.loops) != 2:
        fail(f"the nest under {nest.req.axis.name} has {len(nest.loops)} loops "
             f"({', '.join(f.var.name for f in nest.loops)}); a wmma {what} has 2: the rows and "
             "columns of one tile", hint="tensorize at the first of the two loops of one tile")
    tv = [f.var for f in nest.loops]
    ix = tile_index(fail, frag, frag_indices, tv, f"the fragment {frag.name}")
    rv, cv = _row_col_vars(plan, frag, ix)
    rows, cols = _tile_dims(intrin, frag.scope)
    words = _dim_words(frag.scope)
    ext = {f.var: const_extent(fail, f) for f in nest.loops}
    for v, want, word in ((rv, rows, words[0]), (cv, cols, words[1])):
        if ext[v] != want:
            fail(f"the loop under {v.name} has extent {ext[v]}, {intrin} needs {want} (the {word} of a "
                 f"{frag.scope.value} tile)", hint=f"split that axis by {want} and tensorize the inner loops")
    for v, rest in ix:
        check_multiple(fail, rest, ext[v], f"the tile of {frag.name} used here")
    dims, origin = mem_index(fail, mem, mem_indices, tv, f"{mem.name}", any_dims=True)
    # the tile's rows along the earlier of its two memory dimensions: row-major
    layout = n.WmmaLayout.ROW_MAJOR if dims[rv] < dims[cv] else n.WmmaLayout.COL_MAJOR
    nd = len(mem_indices)
    span = tuple(sorted(d - nd for d in (dims[rv], dims[cv])))
    lim = limits(fail, nest.guards, tv)
    extents = (lim.get(rv, mk.as_expr(rows)), lim.get(cv, mk.as_expr(cols)))
    return _tile_origin(plan, frag, ix), origin, layout, extents, span


def _check_layout(nest, layout, declared: str, mem, frag, field: str):
    if layout is LAYOUT[declared]:
        return
    intrin = nest.req.intrin
    how = "along its last dimension" if layout is n.WmmaLayout.COL_MAJOR else "along its next-to-last dimension"
    role = FRAG_ROLE.get(frag.scope, "accumulator")
    Fail(nest.req)(f"{mem.name} holds the {role} tile with the tile's rows {how}: that is a "
                    f"{layout.value} {role}, and {intrin} declares {field}={declared!r}",
                    hint=f"declare kd.intrin.wmma({intrin.m}, {intrin.n}, {intrin.k}, {field}={layout.value!r}), "
                         f"or reorder the data so that it is {declared}")


def _build(plan: _Plan, nest: Nest) -> n.Stmt:
    fail, intrin, st = Fail(nest.req), nest.req.intrin, nest.store
    if nest.role == "wgmma":
        return wg.build(plan, nest)
    shape = (intrin.m, intrin.n, intrin.k)
    if nest.role == "mma":
        inf = nest.info
        acc, a, b = st.buffer, inf["a"].buffer, inf["b"].buffer
        acc_t = _tile_origin(plan, acc, inf["acc_ix"])
        canon = lambda x: plan.buffer(fail, x, intrin)  # noqa: E731
        return n.WmmaMma(canon(acc), acc_t, canon(a), _tile_origin(plan, a, inf["a_ix"]),
                         canon(b), _tile_origin(plan, b, inf["b_ix"]), canon(acc), acc_t, shape)
    if nest.role == "fill":
        frag = st.buffer
        if len(nest.loops) != 2:
            fail(f"the init nest under {nest.req.axis.name} has {len(nest.loops)} loops; a wmma fill "
                 "has 2: the rows and columns of one accumulator tile")
        tv = [f.var for f in nest.loops]
        ix = tile_index(fail, frag, st.indices, tv, f"the accumulator {frag.name}")
        rv, cv = _row_col_vars(plan, frag, ix)
        ext = {f.var: const_extent(fail, f) for f in nest.loops}
        for v, want, word in ((rv, intrin.m, "m"), (cv, intrin.n, "n")):
            if ext[v] != want:
                fail(f"the loop under {v.name} has extent {ext[v]}, {intrin} needs {want} (the {word} of "
                     "an accumulator tile)", hint=f"split that axis by {want} and tensorize the inner loops")
        limits(fail, nest.guards, tv)      # checked; a fill writes the whole tile
        return n.WmmaFill(plan.buffer(fail, frag, intrin), _tile_origin(plan, frag, ix), shape, st.value)
    if nest.role == "load":
        frag, src = st.buffer, st.value
        if src.buffer.dtype is not frag.dtype:
            fail(f"it loads {src.buffer.dtype.name} {src.buffer.name} into the {frag.dtype.name} fragment {frag.name}")
        if frag.dtype is not intrin.dtype:
            fail(f"the fragment {frag.name} holds {frag.dtype.name}; {intrin} takes {intrin.dtype.name} inputs",
                 hint=f"give the kernel {intrin.dtype.name} inputs")
        tile, origin, layout, extents, span = _copy_parts(plan, nest, frag, st.indices, src.buffer,
                                                          src.indices, "load")
        field = "layout_a" if frag.scope is S.WMMA_MATRIX_A else "layout_b"
        _check_layout(nest, layout, getattr(intrin, field), src.buffer, frag, field)
        load = n.WmmaLoad(plan.buffer(fail, frag, intrin), tile, shape, src.buffer, origin, layout, extents,
                          dims=span)
        load, clipped = widen(load, _tile_dims(intrin, frag.scope), plan.padded, nest.info["ranges"])
        nest.info.update(frag=frag, layout=layout, extents=load.extents, clipped=clipped)
        return load
    read = _accumulator_read(st.value)              # store (converting where cast)
    frag, dst = read.buffer, st.buffer
    if dst.dtype is not st.value.dtype:
        fail(f"{dst.name} is {dst.dtype.name} and the stored value {st.value.dtype.name}; a wmma "
             "store writes the accumulator's values unchanged or cast to a 16-bit float",
             hint=f"make {dst.name} {st.value.dtype.name}")
    tile, origin, layout, extents, span = _copy_parts(plan, nest, frag, read.indices, dst, st.indices, "store")
    _check_layout(nest, layout, intrin.layout_c, dst, frag, "layout_c")
    return n.WmmaStore(dst, origin, layout, plan.buffer(fail, frag, intrin), tile, shape, extents, span)


def _pad_to_reduction(plan: _Plan, built: dict, scalars):
    """An accumulation cut short along k runs on whole tiles, so both operand tiles must be zero
    beyond its reduction's end: each load of an operand fragment stops there too (its valid k
    extent becomes the smaller of its own and the accumulation's; the rest is zero-filled).
    A whole-tile load of a padded cache keeps its whole tile where its memory is zero from the
    reduction's end on (``wmma_padding.covers``)."""
    for nest in plan.nests.values():
        if nest.role != "mma" or nest.info["klimit"] is None:
            continue
        klim, intrin_k = nest.info["klimit"], nest.req.intrin.k
        for op, k_at in (("a", 1), ("b", 0)):
            frag = nest.info[op].buffer
            for key, ld in plan.nests.items():
                if ld.role != "load" or ld.info["frag"] is not frag:
                    continue
                stmt = built[key]
                got = stmt.extents[k_at]
                if got == klim:
                    continue
                clipped = ld.info.get("clipped")
                if clipped is not None and covers(klim, clipped[k_at], intrin_k, ld.info["ranges"],
                                                  plan.equal):
                    continue        # a whole tile of a padded cache: zeros from memory
                if not free_vars(klim) <= ld.info["scope"] | set(scalars):
                    Fail(nest.req)(
                        f"the accumulation stops at k < {show(klim)}, which the load of {frag.name} "
                        f"({ld.req.stage.name}) cannot see; a wmma tile is multiplied whole, so both operand "
                        "tiles must be zero beyond the reduction's end",
                        hint="attach the loads (compute_at) inside the reduction's tile loop of this stage")
                ext = list(stmt.extents)
                ext[k_at] = simplify(mk.min_(got, klim))
                built[key] = dataclasses.replace(stmt, extents=tuple(ext))


# ------------------------------------------------------------------ the walk
def _find(s, reqs: dict, plan: _Plan, stack: list, kernels: list, conds: tuple = ()):
    """Record the nest under every tensorized loop of ``s`` (``stack``: enclosing Fors,
    ``conds``: enclosing conditions)."""
    t = type(s)
    if t is n.For:
        req = reqs.get(s.var)
        if req is not None:
            fail = Fail(req)
            lanes = [f for f in stack if f.thread is n.ThreadTag.THREAD_X]
            if lanes:
                fail(f"its tile nest lies inside loop {lanes[-1].var.name}, bound to threadIdx.x; wmma "
                     "statements run once per warp, and threadIdx.x is the 32 lanes of a warp",
                     hint="bind the loops that pick a warp's tiles to threadIdx.y / threadIdx.z")
            nest = parse_nest(req, s)
            nest.store = _index_simplified(nest.store, loop_ranges(stack + nest.loops))
            nest.info["scope"] = {f.var for f in stack}
            nest.info["ranges"] = loop_ranges(stack)
            nest.info["stack"], nest.info["conds"] = list(stack), list(conds)
            plan.nests[id(s)] = nest
            root = next((f for f in stack if f.kind is n.ForKind.BOUND), None)
            if root is not None and all(r is not root for r, _ in kernels):
                kernels.append((root, req))
            return
        stack.append(s)
        _find(s.body, reqs, plan, stack, kernels, conds)
        stack.pop()
    elif t is n.Seq:
        for x in s.stmts:
            _find(x, reqs, plan, stack, kernels, conds)
    elif t is n.IfThenElse:
        _find(s.then, reqs, plan, stack, kernels, conds + (s.cond,))
        if s.otherwise is not None:
            _find(s.otherwise, reqs, plan, stack, kernels, conds + (s.cond,))
    elif t in (n.Allocate, n.LetStmt, n.DeviceKernel):
        _find(s.body, reqs, plan, stack, kernels, conds)


class _Indices(Mutator):
    """Every Load's and Store's indices simplified with the loops' ranges."""

    def __init__(self, ranges):
        super().__init__()
        self.ranges = ranges

    def _ix(self, node):
        ix = tuple(simplify(i, self.ranges) for i in node.indices)
        return node if all(a is b for a, b in zip(ix, node.indices)) else dataclasses.replace(node, indices=ix)

    def visit_Load(self, e):
        return self._ix(e)

    def visit_Store(self, s):
        s = self.generic(s)
        return self._ix(s)


def _index_simplified(store: n.Store, ranges) -> n.Store:
    """``store`` with its indices and its loads' simplified in the nest's loop ranges: a
    channels-last pack read at ``P[k // 16, .., k % 16]`` with ``k = 16 k.outer + k.inner``
    is ``P[k.outer, .., k.inner]`` there (an affine tile)."""
    return _Indices(ranges).visit(store)


class _Rewrite(Mutator):
    def __init__(self, built: dict, canon: dict, clips: dict):
        super().__init__()
        self.built, self.canon, self.clips = built, canon, clips

    def visit_IfThenElse(self, s):
        extra = self.clips.get(id(s))
        s = self.generic(s)
        if extra:       # a padded copy clipped at the reduction's end (wgmma_tiles.reduction_clips)
            cond = s.cond
            for c in extra:
                cond = mk.logical_and(cond, c)
            s = dataclasses.replace(s, cond=cond)
        return s

    def visit_For(self, s):
        got = self.built.get(id(s))
        return got if got is not None else self.generic(s)

    def visit_Allocate(self, s):
        s = self.generic(s)
        b = self.canon.get(s.buffer)
        return s if b is None or b is s.buffer else dataclasses.replace(s, buffer=b)


def _check_lanes(kernels):
    for root, req in kernels:
        for f in collect_stmts(root, lambda x: isinstance(x, n.For) and x.thread is n.ThreadTag.THREAD_X):
            if not (isinstance(f.extent, n.Const) and f.extent.value == 32):
                Fail(req)(f"the kernel binds loop {f.var.name} of extent {show(f.extent)} to threadIdx.x; "
                           "in a kernel with wmma statements threadIdx.x is the 32 lanes of a warp",
                           hint="split that axis by 32 for threadIdx.x, or bind it to threadIdx.y / threadIdx.z")


def _check_no_scalar_access(body, reqs, canon):
    frags = set(canon) | set(canon.values())
    bad = collect(body, lambda x: isinstance(x, (n.Load, n.Store)) and x.buffer.scope.is_fragment)
    if not bad:
        return
    x = bad[0]
    stmt = next((s for s in collect(body, lambda y: isinstance(y, n.Store))
                 if s is x or collect(s, lambda z: z is x)), x)
    req = next(iter(reqs.values()))
    where_ = "the fragment" if x.buffer in frags else "the fragment buffer"
    raise ScheduleError(
        f"{where_} {x.buffer.name} ({x.buffer.scope.value}) is accessed element by element in\n    "
        f"{show(stmt)}\n  but a wmma fragment belongs to a warp and only wmma statements can read or write it",
        loc=req.loc, hint=f"tensorize the stage that computes {getattr(stmt, 'buffer', x.buffer).name} at the loop of its tile "
                          f"(e.g. .tensorize(axis, {req.intrin}))")


def tensorize(func: n.LoweredFunc) -> n.LoweredFunc:
    """The ``tensorize`` pass (see the module docstring)."""
    if not wants_tensorize(func):
        return func
    blocks = [r for r in func.tensorize if isinstance(r.intrin, BlockIntrinsic)]
    if blocks:
        func = _block_intrinsics(func, blocks)
        rest = tuple(r for r in func.tensorize if not isinstance(r.intrin, BlockIntrinsic))
        if not rest:
            return func
        func = dataclasses.replace(func, tensorize=rest)
    reqs = {}
    for r in func.tensorize:
        if not isinstance(r.intrin, (WMMA, WGMMA)):
            raise InternalCompilerError(f"tensorize request with intrinsic {r.intrin!r}")
        reqs[r.axis.var] = r
    plan, kernels, clips = _Plan(func.padded, func.equal_sizes), [], {}
    _find(func.body, reqs, plan, [], kernels)
    found = {x.req.axis.var for x in plan.nests.values()}
    for v, r in reqs.items():
        if v not in found:
            Fail(r)(f"loop {r.axis.name} is not in the lowered kernel (is stage {r.stage.name} inlined?)")
    for nest in plan.nests.values():
        _classify(nest)
    for nest in plan.nests.values():        # the multiply-accumulates fix the fragments' orientation
        if nest.role == "mma":
            _analyze_mma(plan, nest)
        elif nest.role == "wgmma":
            wg.analyze(plan, nest)
            wg.check_warpgroup(nest, nest.info["stack"], nest.info["conds"])
            clips.update(wg.reduction_clips(nest, func.body, nest.info["ranges"], plan.equal, func.scalars))
    built = {k: _build(plan, nest) for k, nest in plan.nests.items()}
    _pad_to_reduction(plan, built, func.scalars)
    _check_lanes(kernels)
    body = _Rewrite(built, plan.canon, clips).visit(func.body)
    _check_no_scalar_access(body, reqs, plan.canon)
    return dataclasses.replace(func, body=body)


class _BlockBodies(Mutator):
    """Each loop of a ``BlockIntrinsic`` request keeps its header; its body is the op's."""

    def __init__(self, func, reqs: dict):
        super().__init__()
        self.func, self.reqs, self.done = func, reqs, set()

    def visit_For(self, s):
        r = self.reqs.get(s.var)
        if r is None:
            return self.generic(s)
        if s.thread is None or not s.thread.is_block:
            raise ScheduleError(f"tensorize with {type(r.intrin).__name__}: loop {r.axis.name} of "
                                f"stage {r.stage.name} is not bound to a block index", loc=r.loc,
                                hint="bind the loop to blockIdx.x/y/z before tensorizing it")
        self.done.add(s.var)
        return dataclasses.replace(s, body=r.intrin.build(s, self.func))


def _block_intrinsics(func: n.LoweredFunc, reqs: list) -> n.LoweredFunc:
    """The loops of ``BlockIntrinsic`` requests with their bodies replaced (the block's share
    of the stages attached there, and of the output, comes from the op)."""
    m = _BlockBodies(func, {r.axis.var: r for r in reqs})
    body = m.visit(func.body)
    for r in reqs:
        if r.axis.var not in m.done:
            Fail(r)(f"loop {r.axis.name} is not in the lowered kernel")
    return dataclasses.replace(func, body=body)


__all__ = ["tensorize"]
