"""Vectorized loops -> 16-byte (or 8-byte) loads and stores, with the scalar loop as fallback.

A ``vectorized`` loop ``for v in range(W)`` whose body is (under guards) straight-line code --
lets around one Store or a sequence of Stores -- is printed as

    bool ok = <every guard holds for every lane> && <every vector address is aligned>;
    if (ok) { float4 a4 = *(float4*)&A[base]; ...  W lanes, each the body with v = lane and the
              vector loads' components for those loads; a vector store if the body is one
              contiguous Store }
    else    { the loop as written }

A Load or Store is a *vector access* when it is contiguous in ``v``: a row-major buffer (no
run-time strides), ``v`` only in the last index, as ``X + v`` or ``v``, an element of 4 or 8 bytes,
and ``W * itemsize`` of 8 or 16 bytes.  Alignment is checked on the address at run time, so views
at odd offsets and rows of odd length take the scalar path: never a wrong answer.  Lanes run in
order, so an accumulation (``acc = acc + A[.. + v]``) adds in the loop's order.
"""
from __future__ import annotations

from kdsl.ir import make as mk
from kdsl.ir import nodes as n
from kdsl.ir.simplify import linear, simplify
from kdsl.ir.visitor import collect, substitute, uses_var
from kdsl.ir.conditions import conjuncts, guard_limit

from .offsets import flat_offset
from .types import ctype, is_half, load as mem_load, store as mem_store

#: (C element type, lanes) -> CUDA's built-in vector type
VECTOR_TYPES = {("float", 4): "float4", ("float", 2): "float2", ("int32_t", 4): "int4",
                ("int32_t", 2): "int2", ("uint32_t", 4): "uint4", ("uint32_t", 2): "uint2",
                ("double", 2): "double2", ("int64_t", 2): "longlong2",
                ("uint64_t", 2): "ulonglong2"}
_LANES = "xyzw"
#: test a vectorized loop's lane guards once, at the last lane, where that decides
#: (``_last_lane_decides``); False prints every lane's test (what .devrun/nvrtc/ofc.py compares)
LAST_LANE_GUARDS = True
#: print the scalar fallback of a vectorized loop (row tails, misaligned arrays) as a rolled loop
#: (``#pragma unroll 1``): NVVM and ptxas then handle one copy of the body instead of W, the
#: fast path unchanged, the fallback a loop.  Never where the body indexes a per-thread array
#: by the lane (``_rollable``).  Off until .devrun/nvrtc/ofc.py ("fallback=rolled": misaligned
#: rows and views) shows the fallback no slower on a GPU.
ROLLED_FALLBACK = False
#: 16-bit floats (their raw bits in memory): lanes -> the vector of 32-bit words holding them,
#: two lanes a word, the lower lane in the low half (little-endian)
HALF_VECTORS = {8: "uint4", 4: "uint2"}


def _step(e, v):
    """The coefficient of ``v`` in ``e`` when ``e`` is ``v`` plus or minus terms free of it
    (``X + v``, ``(X + v) + 32``, ``v - Y``), 0 when ``e`` does not use ``v``, else None."""
    if e is v:
        return 1
    if not uses_var(e, v):
        return 0
    if type(e) is n.Binary and e.op in (n.BinOp.ADD, n.BinOp.SUB):
        a, b = _step(e.a, v), _step(e.b, v)
        if a is None or b is None:
            return None
        return a + b if e.op is n.BinOp.ADD else a - b
    return None


def _contiguous_in(indices, v) -> bool:
    """``v`` appears only in the last index, with step 1 (``v``, ``X + v``, ``(X + v) + c``)."""
    if not indices or any(uses_var(i, v) for i in indices[:-1]):
        return False
    return _step(indices[-1], v) == 1


def _vector_type(buf: n.Buffer, lanes: int):
    if buf.strides is not None or buf.scope not in (n.Scope.GLOBAL, n.Scope.SHARED):
        return None
    if is_half(buf.dtype):     # stored as 16 bits, computed in float: words of two lanes
        return HALF_VECTORS.get(lanes)
    return VECTOR_TYPES.get((ctype(buf.dtype), lanes))


def try_vectorize(p, s: n.For, d: int) -> bool:
    """Print ``s`` (a VECTORIZED loop) with vector accesses through KernelPrinter ``p``; False
    when it has none (the caller prints the plain loop)."""
    lanes = s.extent.value if type(s.extent) is n.Const else None
    if lanes not in (2, 4, 8) or type(s.min) is not n.Const:
        return False
    v = s.var
    guards, body = [], s.body
    while type(body) is n.IfThenElse and body.otherwise is None:
        guards.append(body.cond)
        body = body.then
    if type(body) is n.AsyncCopy:
        return _try_async(p, s, d, guards, body)
    stored = _stored_buffers(body)
    if stored is None:
        return False
    store_vec = _vector_stores(body, v, lanes, s.min, stored)
    loads = {}
    for ld in collect(body, lambda x: type(x) is n.Load):
        vt = _vector_type(ld.buffer, lanes)
        # a buffer the body stores to is read lane by lane (a vector load would read it early)
        if vt is None or ld.buffer in stored or not _contiguous_in(ld.indices, v):
            continue
        key = (id(ld.buffer), _base_text(p, ld.buffer, ld.indices, v, s.min))
        loads.setdefault(key, (ld, vt))
    if not loads and store_vec is None:
        return False
    _emit(p, s, d, guards, body, loads, store_vec, lanes)
    return True


def _vector_stores(body, v, lanes: int, lo, stored):
    """[(Store, vector type)] for a body that is one Store or a sequence of Stores (a register
    tile's row and its virtual-thread copies: ``C[r, j + v]``, ``C[r, j + 64 + v]``) each
    contiguous in lane ``v`` with a vector type, reading no buffer the body stores to (the
    stores then go after every lane's value), at addresses that cannot overlap (same buffer:
    offsets a constant at least ``lanes`` apart); else None (lanes store one by one)."""
    stores = [body] if type(body) is n.Store else list(body.stmts) if type(body) is n.Seq else []
    if not stores or any(type(x) is not n.Store or not _contiguous_in(x.indices, v)
                         or _vector_type(x.buffer, lanes) is None for x in stores):
        return None
    if collect(body, lambda x: type(x) is n.Load and x.buffer in stored):
        return None
    offs = [flat_offset(x.buffer, tuple(substitute(i, {v: lo}) for i in x.indices)) for x in stores]
    for a in range(len(stores)):
        for b in range(a):
            if stores[a].buffer is not stores[b].buffer:
                continue
            gap = linear(mk.sub(offs[a], offs[b])) if offs[a] is not None and offs[b] is not None \
                else None
            if gap is None or gap.terms or abs(gap.const) < lanes:
                return None
    return [(x, _vector_type(x.buffer, lanes)) for x in stores]


def _unit_last(buf: n.Buffer) -> bool:
    """Whether ``buf``'s last dimension is contiguous: row-major, or strides (padded shared
    rows) whose last one is the constant 1."""
    if buf.strides is None:
        return True
    last = buf.strides[-1]
    return type(last) is n.Const and last.value == 1


def _scalar_factor(p, t):
    """The kernel parameter (a shape or stride) that term ``t`` of a linear form is a multiple
    of (``t`` is that scalar or a product with it), or None."""
    if type(t) is n.Var:
        return t if id(t) in p._scalars else None
    if type(t) is n.Binary and t.op is n.BinOp.MUL:
        for f in (t.a, t.b):
            if type(f) is n.Var and id(f) in p._scalars:
                return f
    return None


def _alignment(p, buf, indices, v, lo, nbytes: int, address: str) -> str:
    """A C condition that ``buf[indices]`` at lane ``lo`` (C text ``address``) is ``nbytes``
    aligned: the part the index's linear form leaves to kernel parameters (the array's base
    address, its row length ...), uniform over the kernel, or ``""`` when it always is.
    Where a term is neither a constant multiple nor a parameter's, the address itself.  In
    the fast copy of an ``alternatives`` if (``p.assumed`` a list) a uniform condition joins
    that if's condition instead, and the access is printed as aligned."""
    per, item = nbytes // buf.dtype.itemsize, buf.dtype.itemsize
    off = flat_offset(buf, tuple(substitute(i, {v: lo}) for i in indices))
    parts = [] if buf.scope is n.Scope.SHARED else [f"reinterpret_cast<unsigned long long>({p.buf(buf)})"]
    at_run_time = f"((reinterpret_cast<unsigned long long>({address}) & {nbytes - 1}ULL) == 0ULL)"
    if off is not None:
        lin = linear(off)
        if lin.const % per:
            return at_run_time
        for t, c in lin.terms.items():
            if c % per == 0:
                continue
            f = _scalar_factor(p, t)
            if f is None:
                return at_run_time
            # the low bits decide: 32-bit arithmetic is exact for them
            parts.append(f"(unsigned long long)((unsigned)({p.expr.index(f)}) * {(c * item) % nbytes}u)")
    if not parts:
        return ""       # shared memory (16-byte aligned) at a constant multiple
    cond = f"((({' | '.join(parts)}) & {nbytes - 1}ULL) == 0ULL)"
    if p.assumed is not None:       # the fast copy of an ``alternatives`` if: tested there, once
        if cond not in p.assumed:
            p.assumed.append(cond)
        return ""
    return cond


def _split_predicate(pred, v):
    """(the conjuncts of ``pred`` free of lane ``v``, the limits ``N - c`` of those of the form
    ``v + c < N``) or None when some other conjunct uses ``v``.  A lane's copy then holds where
    the first hold and ``v`` is below every limit: the valid lanes are a prefix."""
    if pred is None:
        return [], []
    uniform, limits = [], []
    for c in conjuncts(pred):
        if not uses_var(c, v):
            uniform.append(c)
            continue
        lim = guard_limit(c, v)
        if lim is None:
            return None
        limits.append(lim)
    return uniform, limits


def _try_async(p, s, d, guards, c: n.AsyncCopy) -> bool:
    """A vectorized loop of one ``AsyncCopy`` (under guards) as one 4-, 8- or 16-byte
    ``cp.async`` where every lane's guards hold and both addresses are aligned, else the loop
    as written.  The copy's predicate gives the zero fill: a lane-invariant predicate all or
    nothing, a bound on the lane (``v + c < N``: a padded cache's tile at the array's edge)
    the number of source bytes copied (cp.async's src-size; the rest is zero-filled)."""
    v, ld = s.var, c.value
    item = c.buffer.dtype.itemsize
    size = item * s.extent.value
    split = _split_predicate(c.predicate, v)
    if (type(ld) is not n.Load or ld.buffer.scope is not n.Scope.GLOBAL
            or c.buffer.scope is not n.Scope.SHARED or ld.buffer.dtype != c.buffer.dtype
            or size not in (4, 8, 16) or ld.buffer.strides is not None
            or not _unit_last(c.buffer) or not _contiguous_in(c.indices, v)
            or not _contiguous_in(ld.indices, v) or split is None):
        return False
    ok = p.names.fresh("kd_vok")
    dst = f"&{p.buf(c.buffer)}[{_base_text(p, c.buffer, c.indices, v, s.min)}]"
    src = f"&{p.buf(ld.buffer)}[{_base_text(p, ld.buffer, ld.indices, v, s.min)}]"
    aligned = [a for a in (_alignment(p, c.buffer, c.indices, v, s.min, size, dst),
                           _alignment(p, ld.buffer, ld.indices, v, s.min, size, src)) if a]
    p.emit(d, "{")
    inner = d + 1
    if aligned or guards:      # else: always aligned, no lane guard: no scalar fallback
        p.emit(d + 1, f"bool {ok} = {' && '.join(aligned) or 'true'};")
        _lane_guards(p, s, d + 1, guards, ok)
        p.emit(d + 1, f"if ({ok}) {{")
        inner = d + 2
    uniform, limits = split
    if not limits:
        p.cp_async(inner, size, dst, src, predicate=mk.all_of(uniform))
    else:   # the lanes below every limit: min(limit - first lane, W), clamped at 0
        lanes = f"{s.extent.value}"
        for lim in limits:
            lanes = f"kd_imin<long long>({lanes}, (long long)({p.expr.index(simplify(mk.sub(lim, s.min)))}))"
        valid = f"kd_imax<long long>({lanes}, 0LL)"
        if uniform:
            valid = f"(({p.expr.index(mk.all_of(uniform))}) ? {valid} : 0LL)"
        nb = p.names.fresh("kd_nb")
        p.emit(inner, f"const int {nb} = (int){valid} * {item};")
        p.cp_async(inner, size, dst, src, nbytes=nb)
    if inner > d + 1:
        p.emit(d + 1, "} else {")
        p.plain_loop(s, d + 2, rolled=ROLLED_FALLBACK and _rollable(s))
        p.emit(d + 1, "}")
    p.emit(d, "}")
    return True


def _lane_guards(p, s, d, guards, ok: str) -> None:
    """``ok = ok && <every guard>`` for every lane of vectorized loop ``s``: once, at the last
    lane, when ``_last_lane_decides``; else once per lane (the lane index a constant each time)."""
    if not guards:
        return
    t, lo = p.var_ctype(s.var), s.min.value
    name = p.bind(s.var)
    conds = " && ".join(f"({p.expr.index(g)})" for g in guards)
    lanes = range(s.extent.value)
    if LAST_LANE_GUARDS and _last_lane_decides(guards, s.var):
        lanes = (s.extent.value - 1,)
    for k in lanes:
        p.emit(d, f"{{ const {t} {name} = {lo + k}; {ok} = {ok} && {conds}; }}")
    p.unbind(s.var)


def _last_lane_decides(guards, v) -> bool:
    """Whether the guards hold at every lane exactly when they hold at the last: each conjunct
    is free of lane ``v`` or is ``v + c < N`` / ``v + c <= N`` with ``c``, ``N`` free of ``v``
    (``guard_limit``).  Proof: lanes are ``lo..hi`` in steps of 1 and ``v + c`` rises with
    ``v``, so such a conjunct true at ``hi`` is true at every lane, false at ``hi`` makes the
    ``&&`` of all lanes false; a lane-free one is the same at every lane.  No new evaluation:
    the per-lane form evaluated the ``hi`` lane too (where it got there), in the same 32- or
    64-bit arithmetic; loads in such conjuncts are lane-free (they sit in ``c`` or ``N``), and
    the ``hi`` lane reaches conjunct ``j`` only when the ones before it hold at ``hi``, hence at
    ``lo``, where the per-lane form evaluated the same loads."""
    for g in guards:
        for c in conjuncts(g):
            if uses_var(c, v) and guard_limit(c, v) is None:
                return False
    return True


def _rollable(s: n.For) -> bool:
    """Whether loop ``s`` may stay rolled: no per-thread (LOCAL) array indexed by its variable
    (a register array indexed by a run-time value lives in local memory, fast path included)."""
    v = s.var
    return not collect(s.body, lambda x: type(x) in (n.Load, n.Store)
                       and x.buffer.scope is n.Scope.LOCAL
                       and any(uses_var(i, v) for i in x.indices))


def _stored_buffers(body):
    """The buffers ``body`` stores to, when it is straight-line code (lets around one Store or
    a sequence of Stores: an elementwise value, an accumulation, argmax's value and index);
    None otherwise."""
    while type(body) is n.LetStmt:
        body = body.body
    stmts = body.stmts if type(body) is n.Seq else (body,)
    if not stmts or any(type(x) is not n.Store for x in stmts):
        return None
    return {x.buffer for x in stmts}


def _base_text(p, buf, indices, v, lo) -> str:
    return p.flat_index(buf, tuple(substitute(i, {v: lo}) for i in indices))


def _emit(p, s, d, guards, body, loads, store_vec, lanes):
    v, t = s.var, p.var_ctype(s.var)   # int where the loop's range fits (index32)
    lo = s.min.value
    ok = p.names.fresh("kd_vok")
    p.emit(d, "{")
    p.emit(d + 1, f"bool {ok} = true;")
    _lane_guards(p, s, d + 1, guards, ok)
    accesses = [(ld.buffer, ld.indices, base) for (bid, base), (ld, vt) in loads.items()]
    sbases = [_base_text(p, st.buffer, st.indices, v, s.min) for st, _ in store_vec or ()]
    for (st, _), sbase in zip(store_vec or (), sbases):
        accesses.append((st.buffer, st.indices, sbase))
    for buf, indices, base in accesses:
        cond = _alignment(p, buf, indices, v, s.min, buf.dtype.itemsize * lanes,
                          f"&{p.buf(buf)}[{base}]")
        if cond:
            p.emit(d + 1, f"{ok} = {ok} && {cond};")
        ne = p.nonempty(buf) if buf.empty_reads else None
        if ne:      # vector loads are eager: an empty array (Buffer.empty_reads) goes lane by lane
            p.emit(d + 1, f"{ok} = {ok} && {ne};")
    p.emit(d + 1, f"if ({ok}) {{")
    names = {}
    for key, (ld, vt) in loads.items():
        vn = p.names.fresh("kd_vl")
        names[key] = vn
        p.emit(d + 2, f"const {vt} {vn} = *reinterpret_cast<const {vt}*>(&{p.buf(ld.buffer)}[{key[1]}]);")
    outs = []
    for _, vt in store_vec or ():
        outs.append(p.names.fresh("kd_vs"))
        p.emit(d + 2, f"{vt} {outs[-1]};")
    plain_load = p.expr.load

    def vector_of(e):
        """The vector register holding Load ``e``'s lanes, or None."""
        if type(e) is not n.Load or not _contiguous_in(e.indices, v):
            return None
        return names.get((id(e.buffer), _base_text(p, e.buffer, e.indices, v, s.min)))

    def in_register(e):
        return vector_of(e) is not None
    for k in range(lanes):
        p.emit(d + 2, "{")
        p.emit(d + 3, f"const {t} {p.bind(v)} = {lo + k};")

        def lane_load(e, k=k):
            vn = vector_of(e)
            return plain_load(e) if vn is None else _lane_value(vn, k, e.buffer.dtype)
        p.expr.load = lane_load
        p.expr.in_register = in_register
        try:
            if outs:
                for (st, _), out in zip(store_vec, outs):
                    p.emit(d + 3, _lane_store(out, k, st.buffer.dtype, p.expr(st.value)))
            elif _bits_copy(body, vector_of):
                # a 16-bit copy of a vector lane (a register tile): its bits, no conversions
                p.emit(d + 3, f"{p.buf(body.buffer)}[{p.flat_index(body.buffer, body.indices)}] = "
                              f"{_lane_bits(vector_of(body.value), k)};")
            else:
                p.stmt(body, d + 3)
        finally:
            p.expr.load = plain_load
            p.expr.in_register = lambda e: False
        p.unbind(v)
        p.emit(d + 2, "}")
    for (st, vt), out, sbase in zip(store_vec or (), outs, sbases):
        # the index through an empty asm: NVVM splits the vector store into lanes and merges
        # them back only when it can tell they are adjacent, which it cannot once it has
        # reassociated a 2-D index (row * stride + tile + lane): 4 scalar stores otherwise
        off = p.names.fresh("kd_vo")
        p.emit(d + 2, f"long long {off} = (long long)({sbase});")
        p.emit(d + 2, f'asm("" : "+l"({off}));')
        p.emit(d + 2, f"*reinterpret_cast<{vt}*>(&{p.buf(st.buffer)}[{off}]) = {out};")
    p.emit(d + 1, "} else {")
    p.plain_loop(s, d + 2, rolled=ROLLED_FALLBACK and _rollable(s))
    p.emit(d + 1, "}")
    p.emit(d, "}")


def _lane_bits(vn: str, k: int) -> str:
    """C text of the 16 bits of lane ``k`` of a vector of 32-bit words ``vn``."""
    return f"(uint16_t)({vn}.{_LANES[k // 2]} >> {16 * (k % 2)})"


def _lane_value(vn: str, k: int, dtype) -> str:
    """C text of lane ``k`` of vector register ``vn`` as a register value: a component, or for
    a 16-bit float the half of a 32-bit word that holds it, converted to float."""
    if not is_half(dtype):
        return f"{vn}.{_LANES[k]}"
    return mem_load(dtype, _lane_bits(vn, k))


def _bits_copy(body, vector_of) -> bool:
    """``body`` stores a vector-loaded 16-bit float into a buffer of the same type."""
    return (type(body) is n.Store and type(body.value) is n.Load and is_half(body.buffer.dtype)
            and body.value.buffer.dtype == body.buffer.dtype
            and vector_of(body.value) is not None)


def _lane_store(out: str, k: int, dtype, value: str) -> str:
    """The C statement putting register value ``value`` into lane ``k`` of vector ``out`` (16-bit
    floats: converted to their bits, the even lane sets the word, the odd one ors its top half)."""
    if not is_half(dtype):
        return f"{out}.{_LANES[k]} = {value};"
    bits = f"(unsigned)({mem_store(dtype, value)})"
    word = f"{out}.{_LANES[k // 2]}"
    return f"{word} = {bits};" if k % 2 == 0 else f"{word} |= {bits} << 16;"
