"""Expressions of the loop IR -> LLVM values, with numpy's scalar semantics.

Integers wrap; ``//`` and ``%`` floor with Python's signs and give 0 for a
zero divisor (and never hit LLVM's undefined ``INT_MIN / -1``); float ``//``
and ``%`` follow numpy's ``npy_divmod``; MIN/MAX propagate NaN (a select, as
``np.minimum``); float->int casts give numpy's x86 results (never poison:
``numpy_eval.float_to_int``);
unsigned types divide, compare, extend and convert as unsigned;
``x -> bool`` is ``x != 0``.  16-bit floats compute in float and round once
per operation (see types.py).
"""
from __future__ import annotations

from llvmlite import ir

from kdsl import dtypes as dt
from kdsl.errors import InternalCompilerError
from kdsl.ir import nodes as n

from . import types as T
from . import vecmath

_ICMP = {n.CmpOp.EQ: "==", n.CmpOp.NE: "!=", n.CmpOp.LT: "<", n.CmpOp.LE: "<=",
         n.CmpOp.GT: ">", n.CmpOp.GE: ">="}
_INTRINSIC_UNARY = {n.UnOp.EXP: "exp", n.UnOp.LOG: "log", n.UnOp.SQRT: "sqrt",
                    n.UnOp.SIN: "sin", n.UnOp.COS: "cos", n.UnOp.FLOOR: "floor",
                    n.UnOp.CEIL: "ceil", n.UnOp.ABS: "fabs", n.UnOp.RINT: "rint",
                    n.UnOp.TRUNC: "trunc"}
_BOOL_OPS = {n.BinOp.ADD: n.BinOp.OR, n.BinOp.MUL: n.BinOp.AND, n.BinOp.MIN: n.BinOp.AND,
             n.BinOp.MAX: n.BinOp.OR}


#: integer BinOps that map to one IRBuilder method
_INT_OPS = {n.BinOp.ADD: "add", n.BinOp.SUB: "sub", n.BinOp.MUL: "mul",
            n.BinOp.AND: "and_", n.BinOp.OR: "or_", n.BinOp.XOR: "xor"}

class ExprGen:
    """Translate expressions; ``fn`` is the function context (builder ``b``, ``env``, ``load``)."""

    def __init__(self, fn, intrinsics):
        self.fn = fn
        self.intr = intrinsics
        self._table = {n.Var: self._var, n.Const: self._const, n.Binary: self._binary,
                       n.Compare: self._compare, n.Unary: self._unary, n.Select: self._select,
                       n.Cast: self._cast, n.Load: self._load}

    @property
    def b(self) -> ir.IRBuilder:
        return self.fn.b

    def __call__(self, e: n.Expr):
        f = self._table.get(type(e))
        if f is None:
            raise InternalCompilerError(f"the cpu backend cannot compile a {type(e).__name__} "
                                        "expression (only loop IR after lowering)")
        return f(e)

    # ------------------------------------------------------------- leaves
    def _var(self, v):
        try:
            return self.fn.env[v]
        except KeyError:
            raise InternalCompilerError(f"variable {v.name!r} is used where it is not "
                                        "defined") from None

    def _const(self, c):
        return T.const(c.dtype, c.value)

    def _load(self, e):
        return self.fn.load(e.buffer, [self(i) for i in e.indices])

    def _select(self, e):
        return self.b.select(self(e.cond), self(e.t), self(e.f))

    # ------------------------------------------------------------- binary
    def _binary(self, e):
        d, op = e.dtype, e.op
        a, c = self(e.a), self(e.b)
        b = self.b
        if d.is_bool:
            op = _BOOL_OPS.get(op, op)
            if op not in (n.BinOp.AND, n.BinOp.OR, n.BinOp.XOR):
                raise InternalCompilerError(f"binary {op.value} on bool values")
        if d.is_float:
            return self._float_binary(d, op, a, c)
        simple = _INT_OPS.get(op)
        if simple is not None:       # wraparound arithmetic and bitwise ops: one instruction
            return getattr(b, simple)(a, c)
        if op in (n.BinOp.MIN, n.BinOp.MAX):
            cmp = b.icmp_signed if d.is_signed else b.icmp_unsigned
            return b.select(cmp("<=" if op is n.BinOp.MIN else ">=", a, c), a, c)
        if op in (n.BinOp.FLOORDIV, n.BinOp.MOD):
            return self._int_divmod(d, op, a, c)
        if op is n.BinOp.POW:
            return b.call(self.intr.ipow(d), [a, c])
        if op is n.BinOp.SHL:   # the amount is in [0, bits): the frontend guards the rest
            return b.shl(a, c)
        if op is n.BinOp.SHR:
            return b.ashr(a, c) if d.is_signed else b.lshr(a, c)
        if op is n.BinOp.DIV:   # true division with an int result: in double, then cast
            q = b.fdiv(self._int_to_float(d, a, T.DOUBLE), self._int_to_float(d, c, T.DOUBLE))
            return self._float_to_int(q, d)
        raise InternalCompilerError(f"binary {op.value} on {d.name} values")

    def _int_to_float(self, d, v, t):
        return self.b.sitofp(v, t) if d.is_signed else self.b.uitofp(v, t)

    def _int_divmod(self, d, op, a, c):
        """Python-style floor division / modulo; a zero divisor gives 0; no UB for MIN / -1."""
        b, t = self.b, a.type
        zero, one = ir.Constant(t, 0), ir.Constant(t, 1)
        is0 = b.icmp_unsigned("==", c, zero)
        if not d.is_signed:
            safe = b.select(is0, one, c)
            r = b.udiv(a, safe) if op is n.BinOp.FLOORDIV else b.urem(a, safe)
            return b.select(is0, zero, r)
        ism1 = b.icmp_signed("==", c, ir.Constant(t, -1))
        special = b.or_(is0, ism1)
        safe = b.select(special, one, c)
        q, r = b.sdiv(a, safe), b.srem(a, safe)
        adjust = b.and_(b.icmp_signed("!=", r, zero), b.icmp_signed("<", b.xor(r, safe), zero))
        if op is n.BinOp.FLOORDIV:
            q = b.select(adjust, b.sub(q, one), q)
            return b.select(is0, zero, b.select(ism1, b.sub(zero, a), q))
        r = b.select(adjust, b.add(r, safe), r)
        return b.select(special, zero, r)

    def _float_binary(self, d, op, a, c):
        b = self.b
        if op in (n.BinOp.MIN, n.BinOp.MAX):
            # np.minimum/maximum: a NaN in either operand wins
            pick = b.fcmp_ordered("<=" if op is n.BinOp.MIN else ">=", a, c)
            return b.select(b.fcmp_unordered("uno", a, a), a, b.select(pick, a, c))
        if d is dt.float16:
            a, c = b.fpext(a, T.FLOAT), b.fpext(c, T.FLOAT)
        if op is n.BinOp.ADD:
            r = b.fadd(a, c)
        elif op is n.BinOp.SUB:
            r = b.fsub(a, c)
        elif op is n.BinOp.MUL:
            r = b.fmul(a, c)
        elif op is n.BinOp.DIV:
            r = b.fdiv(a, c)
        elif op is n.BinOp.POW:
            r = b.call(self.intr.binary("pow", a.type), [a, c])
        elif op in (n.BinOp.FLOORDIV, n.BinOp.MOD):
            r = self._float_divmod(op, a, c)
        elif op is n.BinOp.FMOD:
            r = b.frem(a, c)          # C's fmod (exact, so float16 computed in float is too)
        elif op is n.BinOp.COPYSIGN:
            r = b.call(self.intr.binary("copysign", a.type), [a, c])
        elif op in (n.BinOp.ATAN2, n.BinOp.HYPOT):
            r = b.call(self.intr.libm2(op.value + ("f" if a.type == T.FLOAT else ""), a.type), [a, c])
        else:
            raise InternalCompilerError(f"binary {op.value} on {d.name} values")
        return T.narrow(b, d, r)

    def _float_divmod(self, op, a, c):
        """numpy's npy_divmod (floor_divide / remainder for floats)."""
        b, t = self.b, a.type
        zero, one = ir.Constant(t, 0.0), ir.Constant(t, 1.0)
        mod = b.frem(a, c)
        czero = b.fcmp_ordered("==", c, zero)
        fixsign = b.and_(b.fcmp_unordered("une", mod, zero),
                         b.xor(b.fcmp_ordered("<", c, zero), b.fcmp_ordered("<", mod, zero)))
        if op is n.BinOp.MOD:
            m = b.select(fixsign, b.fadd(mod, c), mod)
            copysign = self.intr.binary("copysign", t)
            m = b.select(b.fcmp_ordered("==", mod, zero), b.call(copysign, [zero, c]), m)
            return b.select(czero, mod, m)
        div = b.fdiv(b.fsub(a, mod), c)
        div = b.select(fixsign, b.fsub(div, one), div)
        fl = b.call(self.intr.unary("floor", t), [div])
        fl = b.select(b.fcmp_ordered(">", b.fsub(div, fl), ir.Constant(t, 0.5)), b.fadd(fl, one), fl)
        copysign = self.intr.binary("copysign", t)
        fl = b.select(b.fcmp_unordered("une", div, zero), fl, b.call(copysign, [zero, b.fdiv(a, c)]))
        return b.select(czero, b.fdiv(a, c), fl)

    # ------------------------------------------------------------- compare
    def _compare(self, e):
        a, c = self(e.a), self(e.b)
        d = e.a.dtype
        sym = _ICMP[e.op]
        if d.is_float:
            if e.op is n.CmpOp.NE:
                return self.b.fcmp_unordered("!=", a, c)
            return self.b.fcmp_ordered(sym, a, c)
        if d.is_signed:
            return self.b.icmp_signed(sym, a, c)
        return self.b.icmp_unsigned(sym, a, c)

    # ------------------------------------------------------------- unary
    def _unary(self, e):
        d, op, src = e.dtype, e.op, e.a.dtype
        a = self(e.a)
        b = self.b
        if op is n.UnOp.ISNAN:
            return b.fcmp_unordered("uno", a, a) if src.is_float else ir.Constant(T.I1, 0)
        if op is n.UnOp.BITCAST:
            return self._bitcast(a, src, d)
        if op is n.UnOp.NOT:
            return b.xor(a, ir.Constant(a.type, -1 if not d.is_bool else 1))
        if not d.is_float:
            if op is n.UnOp.NEG and not d.is_bool:
                return b.sub(ir.Constant(a.type, 0), a)
            if op is n.UnOp.ABS:
                if not d.is_signed:
                    return a
                return b.select(b.icmp_signed("<", a, ir.Constant(a.type, 0)),
                                b.sub(ir.Constant(a.type, 0), a), a)
            if op in (n.UnOp.FLOOR, n.UnOp.CEIL):
                return a
            raise InternalCompilerError(f"{op.value} of a {d.name} value")
        if op is n.UnOp.NEG:
            return b.fneg(a)
        x = T.widen(b, d, a)
        t = x.type
        name = _INTRINSIC_UNARY.get(op) or op.value
        if vecmath.has(name, t):
            # inline branch-free code (exp, log, tanh, erf, sin, cos): llvm.exp & co. become
            # scalar libm calls, which would keep the loop from being vectorised
            r = b.call(self.intr.vecmath(name, t), [x])
        elif op in _INTRINSIC_UNARY:
            r = b.call(self.intr.unary(name, t), [x])
        elif op in n.LIBM_UNOPS:
            # libm (glibc, what numpy's non-SIMD loops call too): correct, not vectorised
            r = b.call(self.intr.libm(name + ("f" if t == T.FLOAT else ""), t), [x])
        elif op is n.UnOp.RSQRT:
            r = b.fdiv(ir.Constant(t, 1.0), b.call(self.intr.unary("sqrt", t), [x]))
        elif op is n.UnOp.SIGMOID:
            # e = exp(-|x|) never overflows: 1 / (1 + e) for x >= 0, e / (1 + e) below
            # (1 / (1 + exp(-x)) would give 0 instead of a denormal for x < -88.7 in float)
            ax = b.call(self.intr.unary("fabs", t), [x])
            ex = b.call(self.intr.vecmath("exp", t), [b.fneg(ax)])
            num = b.select(b.fcmp_ordered("<", x, ir.Constant(t, 0.0)), ex, ir.Constant(t, 1.0))
            r = b.fdiv(num, b.fadd(ir.Constant(t, 1.0), ex))
        else:
            raise InternalCompilerError(f"unary {op.value} is not implemented by the cpu backend")
        return T.narrow(b, d, r)

    def _bitcast(self, v, src: dt.DType, dst: dt.DType):
        """The bits of ``v`` as ``dst`` (equal sizes; float16 is ``half`` in registers, bfloat16
        views are refused by the frontend)."""
        return self.b.bitcast(v, T.value_type(dst))

    # ------------------------------------------------------------- casts
    def _cast(self, e):
        src, dst = e.a.dtype, e.dtype
        v = self(e.a)
        if src is dst:
            return v
        return self.convert(v, src, dst)

    def convert(self, v, src: dt.DType, dst: dt.DType):
        """``v`` of ``src`` as a value of ``dst`` (numpy's astype for one element)."""
        b = self.b
        if dst.is_bool:
            if src.is_float:
                return b.fcmp_unordered("!=", v, ir.Constant(v.type, 0.0))
            return b.icmp_unsigned("!=", v, ir.Constant(v.type, 0))
        if dst.is_int:
            dt_ = T.value_type(dst)
            if src.is_float:
                return self._float_to_int(v, dst)
            if src.bits == dst.bits and src.kind != "b":
                return v
            if src.bits > dst.bits:
                return b.trunc(v, dt_)
            return b.sext(v, dt_) if src.is_signed else b.zext(v, dt_)
        # dst is a float
        if src.is_float:
            if src is dt.bfloat16 or src is dt.float16:
                v = T.widen(b, src, v)       # exact
            st = v.type
            if dst is dt.bfloat16:
                v = b.fptrunc(v, T.FLOAT) if st == T.DOUBLE else v
                return T.bf16_round(b, v)
            dt_ = T.value_type(dst)
            if st == dt_:
                return v
            if st == T.DOUBLE and dt_ == T.HALF:
                return self._double_to_half(v)
            return b.fpext(v, dt_) if _fbits(st) < _fbits(dt_) else b.fptrunc(v, dt_)
        target = T.FLOAT if dst is dt.bfloat16 else T.value_type(dst)
        r = self._int_to_float(src, v, target) if not src.is_bool else b.uitofp(v, target)
        return T.bf16_round(b, r) if dst is dt.bfloat16 else r

    def _double_to_half(self, v):
        """double -> half rounded once, without the ``__truncdfhf2`` libcall LLVM would emit
        (not every process can resolve it: libgcc_s has it only since GCC 12).

        Round to odd into float first (truncate toward zero, then set the last bit when
        inexact): float keeps 13 more bits than half, so rounding that float to half gives the
        correctly rounded result, ties included.  NaNs compare unordered and pass through."""
        b = self.b
        f = b.fptrunc(v, T.FLOAT)
        back = b.fpext(f, T.DOUBLE)
        fabs = self.intr.unary("fabs", T.DOUBLE)
        away = b.fcmp_ordered(">", b.call(fabs, [back]), b.call(fabs, [v]))   # rounded up in size
        inexact = b.fcmp_ordered("!=", back, v)
        u = b.sub(b.bitcast(f, T.I32), b.zext(away, T.I32))
        u = b.or_(u, b.zext(inexact, T.I32))
        return b.fptrunc(b.bitcast(u, T.FLOAT), T.HALF)

    def _cvtt(self, v, bits: int):
        """x86's ``cvttsd2si`` of width ``bits`` on double ``v`` as an i64: the truncated
        value where it fits, else INT_MIN (NaN too); ``fptosi.sat`` never makes poison."""
        b = self.b
        lim = 2.0 ** (bits - 1)
        ok = b.and_(b.fcmp_ordered(">=", v, ir.Constant(T.DOUBLE, -lim)),
                    b.fcmp_ordered("<", v, ir.Constant(T.DOUBLE, lim)))
        return b.select(ok, b.call(self.intr.fptosi_sat(T.DOUBLE), [v]),
                        ir.Constant(T.I64, -(1 << (bits - 1))))

    def _float_to_int(self, v, dst: dt.DType):
        """numpy's x86 float -> int results (``numpy_eval.float_to_int`` says which)."""
        b = self.b
        half = v.type == T.HALF
        if v.type != T.DOUBLE:
            v = b.fpext(v, T.DOUBLE)          # exact
        if dst in (dt.uint64, dt.uint32) and not (dst is dt.uint32 and half):
            bits = dst.bits
            top = ir.Constant(T.DOUBLE, 2.0 ** (bits - 1))
            hi = b.fcmp_ordered(">=", v, top)
            flipped = b.xor(self._cvtt(b.fsub(v, top), bits), ir.Constant(T.I64, 1 << (bits - 1)))
            r = b.select(hi, flipped, self._cvtt(v, bits))
        else:
            r = self._cvtt(v, 64 if dst.bits == 64 or dst is dt.uint32 else 32)
        return r if dst.bits == 64 else b.trunc(r, T.value_type(dst))


def _fbits(t: ir.Type) -> int:
    return {"half": 16, "float": 32, "double": 64}[str(t)]
