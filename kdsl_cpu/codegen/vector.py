"""Explicit vector code for short vectorized loops (the register blocks of GEMM-like nests).

A ``vectorize``d loop of constant extent ``W`` whose body is a few stores of
simple arithmetic on loads that are contiguous in the loop variable (or do
not depend on it) is emitted as straight-line ``<W x T>`` code instead of a
scalar loop with ``llvm.loop.vectorize`` metadata.  The difference matters for
register blocking: with constant offsets into a local tile, SROA keeps the
whole tile in vector registers across the enclosing reduction loop, which
LLVM's loop vectorizer does not achieve on its own.  Anything else (strided
accesses, guards, math calls but ``exp``, narrow float types) falls back to the loop.
``exp`` is vecmath's on the whole vector (the loop vectoriser would pick its own width:
256 bits on AVX-512 hosts that prefer it).

Edge tiles: a loop whose extent is known only at run time but has a constant
upper bound ``W`` (a split's tail, ``min(64, N - j)``) is emitted the same way at
width ``W`` under a lane mask ``lane < extent`` (and only when the extent is
positive: lane-invariant loads run once, as in the loop's first iteration).
Loads and stores of arrays use ``llvm.masked.load``/``llvm.masked.store`` (no
memory past the extent is touched); a temporary allocated in this function
whose last index provably stays inside it is read whole and written back with
``select(mask, new, old)``, which SROA keeps in registers like a full tile.
"""
from __future__ import annotations

from llvmlite import ir

from kdsl import dtypes as dt
from kdsl.ir import nodes as n
from kdsl.ir.bounds import const_upper
from kdsl.ir.simplify import linear, simplify
from kdsl.ir.visitor import substitute, uses_var

from . import types as T
from . import vecmath

#: widest explicit vector (elements); wider loops use the loop vectorizer
MAX_WIDTH = 64
_DTYPES = (dt.float32, dt.float64, dt.int32, dt.int64)
_MATH_DTYPES = (dt.float32, dt.float64)
_FLOAT_OPS = {n.BinOp.ADD: "fadd", n.BinOp.SUB: "fsub", n.BinOp.MUL: "fmul", n.BinOp.DIV: "fdiv"}
_INT_OPS = {n.BinOp.ADD: "add", n.BinOp.SUB: "sub", n.BinOp.MUL: "mul"}
_CONTRACT = ("contract",)


class _NotSimple(Exception):
    """The loop body is outside what this emitter handles: use the scalar loop."""


def _contiguous_last(buf: n.Buffer) -> bool:
    return buf.strides is None or (isinstance(buf.strides[-1], n.Const) and buf.strides[-1].value == 1)


def _lane_step(idx: tuple, var: n.Var) -> int:
    """0 when no index uses ``var``; 1 when only the last does, with coefficient 1."""
    if any(uses_var(i, var) for i in idx[:-1]):
        raise _NotSimple
    if not idx or not uses_var(idx[-1], var):
        return 0
    lin = linear(idx[-1])
    if lin.terms.get(var) != 1 or any(uses_var(t, var) for t in lin.terms if t is not var):
        raise _NotSimple
    return 1


def same_element(e, store) -> bool:
    """Is ``e`` a load of exactly the element ``store`` writes (an accumulator update)?"""
    return type(e) is n.Load and e.buffer is store.buffer and e.indices == store.indices


def _stores(s: n.Stmt) -> list:
    if type(s) is n.Store:
        return [s]
    if type(s) is n.Seq:
        return [x for y in s.stmts for x in _stores(y)]
    raise _NotSimple


class VectorEmitter:
    """Emits one vectorized loop ``s`` through the statement generator ``gen`` (or declines)."""

    def __init__(self, gen, s: n.For):
        self.gen, self.s, self.var = gen, s, s.var
        #: masked: the extent is a run-time value bounded by ``width`` (an edge tile)
        self.masked = not isinstance(s.extent, n.Const)
        if self.masked:
            self.width = const_upper(s.extent) or 0
        else:
            self.width = int(s.extent.value)
        self._update = False
        self._mask = None

    def qualifies(self) -> bool:
        """Would ``emit`` generate vector code?  (A check of the loop alone; needs no builder.)"""
        if not 2 <= self.width <= MAX_WIDTH:
            return False
        try:
            for st in _stores(self.s.body):
                self._check_store(st)
        except _NotSimple:
            return False
        return True

    def emit(self) -> bool:
        """Generate the loop as vector code; False (nothing emitted) when it does not qualify."""
        if not self.qualifies():     # check everything before emitting anything
            return False
        if not self.masked:
            for st in _stores(self.s.body):
                self._store(st)
            return True
        b = self.b
        count = self.gen.expr(self.s.extent)
        with b.if_then(b.icmp_signed(">", count, ir.Constant(count.type, 0))):
            # the low ``count`` (1..W) bits of a W-bit integer, as <W x i1>: scalar code LLVM
            # hoists out of the reduction loop (a vector compare against the lane numbers is
            # sunk back next to every masked use: ~6 instructions per tile row and step)
            wt = ir.IntType(self.width)
            k = b.trunc(count, wt) if self.width < count.type.width else (
                b.zext(count, wt) if self.width > count.type.width else count)
            bits = b.lshr(ir.Constant(wt, -1), b.sub(ir.Constant(wt, self.width), k))
            self._mask = b.bitcast(bits, ir.VectorType(T.I1, self.width))
            for st in _stores(self.s.body):
                self._store(st)
        return True

    # ------------------------------------------------------------- checks
    def _check_store(self, st):
        if st.buffer.dtype not in _DTYPES or not _contiguous_last(st.buffer):
            raise _NotSimple
        if _lane_step(st.indices, self.var) != 1:
            raise _NotSimple
        self._check(st.value)

    def _check(self, e):
        if not uses_var(e, self.var):
            return
        t = type(e)
        if t is n.Load:
            if e.buffer.dtype not in _DTYPES or not _contiguous_last(e.buffer):
                raise _NotSimple
            _lane_step(e.indices, self.var)
        elif t is n.Binary:
            ops = _FLOAT_OPS if e.dtype.is_float else _INT_OPS
            if e.dtype not in _DTYPES or e.op not in ops:
                raise _NotSimple
            self._check(e.a)
            self._check(e.b)
        elif t is n.Unary and e.op is n.UnOp.EXP and e.dtype in _MATH_DTYPES:
            self._check(e.a)       # vecmath's exp at this width (vecmath.VECTOR_NAMES)
        elif t is n.Var and e is self.var:
            raise _NotSimple       # lane indices as values: leave to the loop vectorizer
        else:
            raise _NotSimple

    # ------------------------------------------------------------- emission
    @property
    def b(self) -> ir.IRBuilder:
        return self.gen.fn.b

    def _vtype(self, d: dt.DType) -> ir.VectorType:
        return ir.VectorType(T.value_type(d), self.width)

    def _splat(self, x, d: dt.DType):
        vt = self._vtype(d)
        one = self.b.insert_element(ir.Constant(vt, ir.Undefined), x, ir.Constant(T.I32, 0))
        return self.b.shuffle_vector(one, ir.Constant(vt, ir.Undefined),
                                     ir.Constant(ir.VectorType(T.I32, self.width), [0] * self.width))

    def _whole(self, buf, indices) -> bool:
        """May the masked-off lanes of this access be read and written back?  (A temporary
        of this function, private to the thread, whose last index stays inside it for all
        ``width`` lanes.)"""
        if buf not in self.gen.fn.private or not isinstance(buf.shape[-1], n.Const):
            return False
        first = simplify(substitute(indices[-1], {self.var: self.s.min}))
        return (isinstance(first, n.Const) and first.value >= 0
                and first.value + self.width <= buf.shape[-1].value)

    def _intrinsic(self, name: str, vt: ir.VectorType, fnty: ir.FunctionType):
        sfx = {"float": "f32", "double": "f64", "i32": "i32", "i64": "i64"}[str(vt.element)]
        full = f"llvm.masked.{name}.v{vt.count}{sfx}.p0"
        module = self.gen.module
        got = module.globals.get(full)
        return got if got is not None else ir.Function(module, fnty, full)

    def _load_vec(self, buf, indices, vt):
        b, addr, align = self.b, self._addr(buf, indices), self.gen.fn._align(buf)
        if self._mask is None or self._whole(buf, indices):
            v = b.load(addr, typ=vt, align=align)
        else:
            mask_t = ir.VectorType(T.I1, self.width)
            fn = self._intrinsic("load", vt, ir.FunctionType(vt, [T.PTR, T.I32, mask_t, vt]))
            v = b.call(fn, [addr, ir.Constant(T.I32, align), self._mask, ir.Constant(vt, None)])
        self._tag(v, buf)
        return v

    def _store_vec(self, v, buf, indices):
        b, addr, align = self.b, self._addr(buf, indices), self.gen.fn._align(buf)
        if self._mask is not None and self._whole(buf, indices):
            old = b.load(addr, typ=v.type, align=align)
            self._tag(old, buf)
            v = b.select(self._mask, v, old)
        if self._mask is None or self._whole(buf, indices):
            ins = b.store(v, addr, align=align)
        else:
            mask_t = ir.VectorType(T.I1, self.width)
            fn = self._intrinsic("store", v.type,
                                 ir.FunctionType(ir.VoidType(), [v.type, T.PTR, T.I32, mask_t]))
            ins = b.call(fn, [v, addr, ir.Constant(T.I32, align), self._mask])
        self._tag(ins, buf)

    def _addr(self, buf, indices):
        first = [substitute(i, {self.var: self.s.min}) for i in indices]
        return self.gen.fn.address(buf, [self.gen.expr(i) for i in first])

    def _tag(self, instr, buf):
        if self.gen.fn.alias is not None:
            self.gen.fn.alias.tag(instr, buf)

    def _value(self, e):
        """(LLVM value, is_vector) of ``e``."""
        if not uses_var(e, self.var):
            return self.gen.expr(e), False
        t = type(e)
        if t is n.Load:
            if _lane_step(e.indices, self.var) == 0:
                return self.gen.expr(e), False
            return self._load_vec(e.buffer, e.indices, self._vtype(e.dtype)), True
        if t is n.Unary:        # exp (checked): vecmath's, on the whole vector
            a, _ = self._value(e.a)
            vt = self._vtype(e.dtype)
            return self.b.call(vecmath.make(self.gen.module, "exp", vt), [a]), True
        a, va = self._value(e.a)
        c, vc = self._value(e.b)
        if va != vc:
            a = a if va else self._splat(a, e.a.dtype)
            c = c if vc else self._splat(c, e.b.dtype)
        if e.dtype.is_float:
            # in an accumulation, a*b may fuse into an FMA (as in the scalar path)
            flags = _CONTRACT if self._update and e.op in (n.BinOp.ADD, n.BinOp.MUL) else ()
            return getattr(self.b, _FLOAT_OPS[e.op])(a, c, flags=flags), True
        return getattr(self.b, _INT_OPS[e.op])(a, c), True

    def _store(self, st):
        val = st.value
        self._update = (type(val) is n.Binary and val.op is n.BinOp.ADD
                        and (same_element(val.a, st) or same_element(val.b, st)))
        v, is_vec = self._value(st.value)
        if not is_vec:
            v = self._splat(v, st.value.dtype)
        self._store_vec(v, st.buffer, st.indices)
