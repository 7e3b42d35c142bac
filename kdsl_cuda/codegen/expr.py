"""Loop-IR expressions -> CUDA C++ expression text, with numpy's scalar semantics.

Fully parenthesised.  Integer ``//``/``%`` floor with Python's signs (zero divisor -> 0), float
``//``/``%`` follow numpy's divmod, MIN/MAX propagate NaN (prelude helpers); small integer types
are cast back after C++'s promotion to int so that they wrap; ``x -> bool`` is ``x != 0``; math
functions are CUDA's, in the operand's precision (``expf`` for float32, ``exp`` for float64;
``rsqrt`` is ``1 / sqrt``, correctly rounded like numpy's).  16-bit floats compute in float and
round after every operation (``types.rounded``), like numpy's float16 and the interpreter's
bfloat16; their loads and stores convert (``types.load``/``store``, in the kernel printer).

Index widths: ``index(e)`` prints ``e`` where it is index arithmetic (offsets, loop bounds,
guards); there every int64 sub-expression the kernel's ``IndexWidths`` proves narrow is printed
in ``int`` (plain literals, ``int`` template arguments, unsigned ``/`` and ``%`` when the
operands are provably non-negative).  ``__call__`` prints values (data): int64 stays int64
except narrow arithmetic of indices alone (no loads), and an int64 operation whose operands
are both ``int`` is widened first (``((int64_t)a) * b``), so values are exact.
"""
from __future__ import annotations

from kdsl.errors import BackendCompileError, InternalCompilerError
from kdsl.ir import nodes as n
from kdsl.ir.visitor import collect

from kdsl import dtypes as dt

from .types import CTYPE_BY_ID, SMALL_INTS, ctype, literal, rounded, value_only

#: float operators whose result of a NaN operand is the GPU's canonical NaN whatever the
#: operand's payload (CUDA: "the result of an operation involving one or more input NaNs is
#: the quiet NaN of bit pattern 0x7fffffff"): their float16 operands convert by value only
#: (``types.value_only``), unless the other operand is a constant (NVVM may fold ``x * 1``)
_VALUE_OPS = frozenset({n.BinOp.ADD, n.BinOp.SUB, n.BinOp.MUL, n.BinOp.DIV})

_SYM = {n.BinOp.ADD: "+", n.BinOp.SUB: "-", n.BinOp.MUL: "*", n.BinOp.DIV: "/",
        n.BinOp.AND: "&", n.BinOp.OR: "|", n.BinOp.XOR: "^",
        n.BinOp.SHL: "<<", n.BinOp.SHR: ">>"}   # shift amounts are in [0, bits) (frontend)
_BOOL_SYM = {n.BinOp.ADD: "||", n.BinOp.OR: "||", n.BinOp.MAX: "||",
             n.BinOp.MUL: "&&", n.BinOp.AND: "&&", n.BinOp.MIN: "&&", n.BinOp.XOR: "!="}
_CMP = {n.CmpOp.EQ: "==", n.CmpOp.NE: "!=", n.CmpOp.LT: "<", n.CmpOp.LE: "<=",
        n.CmpOp.GT: ">", n.CmpOp.GE: ">="}
#: CUDA math function per unary op (float64 name; float32 adds "f")
_MATH = {n.UnOp.EXP: "exp", n.UnOp.LOG: "log", n.UnOp.SQRT: "sqrt",
         n.UnOp.SIN: "sin", n.UnOp.COS: "cos", n.UnOp.TANH: "tanh", n.UnOp.ERF: "erf",
         n.UnOp.FLOOR: "floor", n.UnOp.CEIL: "ceil", n.UnOp.ABS: "fabs",
         **{op: op.value for op in n.LIBM_UNOPS}}     # tan, asinh, log1p, cbrt, rint...
#: bit reinterpretations: (source C type family, target) -> CUDA intrinsic
_AS_BITS = {dt.float32: "__float_as_uint", dt.float64: "__double_as_longlong", dt.float16: "kd_f2h"}
_FROM_BITS = {dt.float32: ("__uint_as_float", "unsigned"),
              dt.float64: ("__longlong_as_double", "long long"),
              dt.float16: ("kd_h2f", "uint16_t")}


#: signed types whose negation is done in their unsigned type (wraps like numpy, no C overflow)
_WRAP_NEG = {dt.int32: "unsigned", dt.int64: "unsigned long long"}


def _math(name: str, d) -> str:
    return name if d is dt.float64 else name + "f"


class ExprPrinter:
    """Prints expressions; ``var_name(v)`` names Vars, ``load(e)`` prints a Load (both supplied
    by the kernel printer, which owns the names and the buffers' index arithmetic)."""

    def __init__(self, var_name, load, widths=None):
        self.var_name = var_name      # (Var, narrow: bool) -> C name (narrow: an int value)
        self.load = load
        #: ``index32.IndexWidths`` of the kernel, or None (everything int64)
        self.widths = widths
        self._index = False           # printing index arithmetic (see the module docstring)
        #: text of an integer // or % -> the name of a variable holding it (set by the kernel
        #: printer for divisions that depend only on block/thread indices and parameters)
        self.hoisted: dict = {}
        #: Load -> whether it prints as a register (set while a vectorized lane is printed)
        self.in_register = lambda e: False
        self._table = {n.Var: lambda e: self.var_name(e, self._n32(e)), n.Const: self._const,
                       n.Binary: self._binary, n.Compare: self._compare, n.Unary: self._unary,
                       n.Select: self._select, n.Cast: self._cast, n.Load: lambda e: self.load(e)}

    def _branch_free(self, e) -> bool:
        """Whether ``a && b`` may evaluate both sides: neither reads global or shared memory (a
        short-circuit may guard such a read; registers and local arrays are always in range)."""
        return not collect(e, lambda x: type(x) is n.Load and x.buffer.scope is not n.Scope.LOCAL
                           and not self.in_register(x))

    def __call__(self, e) -> str:
        fn = self._table.get(type(e))
        if fn is None:
            raise InternalCompilerError(f"cuda codegen: {type(e).__name__} expression in loop IR")
        if id(e.dtype) not in CTYPE_BY_ID:
            ctype(e.dtype)      # refuses unsupported dtypes with a clear message
        return fn(e)

    def index(self, e) -> str:
        """``e`` printed as index arithmetic: narrow where proven (see the module docstring)."""
        if self._index:
            return self(e)
        self._index = True
        try:
            return self(e)
        finally:
            self._index = False

    def value(self, e) -> str:
        """``e`` printed as a value (data: int64 stays int64), also inside index arithmetic."""
        if not self._index:
            return self(e)
        self._index = False
        try:
            return self(e)
        finally:
            self._index = True

    # ------------------------------------------------------------- index widths
    def _n32(self, e) -> bool:
        """Whether ``e`` prints as 32-bit index arithmetic here (in a value: only arithmetic
        of indices, no loaded data; the value's parent widens it)."""
        if self.widths is None or e.dtype is not dt.index:     # (DTypes are interned)
            return False
        return self.widths.narrow(e) if self._index else self.widths.pure_narrow(e)

    def is32(self, e) -> bool:
        """Whether the C type of ``e``'s text is ``int`` (in the current mode)."""
        if self._n32(e):
            return True
        if type(e) is n.Var:
            return self.widths is not None and self.widths.declared32(e)
        if type(e) is n.Select and e.dtype == dt.index:
            return self.is32(e.t) and self.is32(e.f)
        if (type(e) is n.Cast and e.a.dtype == e.dtype) or (
                type(e) is n.Unary and e.op in (n.UnOp.FLOOR, n.UnOp.CEIL) and e.dtype.is_int):
            return self.is32(e.a)     # printed as the operand's text
        return False

    def _const(self, e):
        return literal(e.value, dt.int32 if self._n32(e) else e.dtype)

    # ------------------------------------------------------------- binary
    def _binary(self, e):
        text = self._binary_text(e)
        return rounded(e.dtype, text) if e.dtype.is_float else text

    def _binary_text(self, e):
        d, op = e.dtype, e.op
        a, b = self(e.a), self(e.b)
        if d.is_bool:
            sym = _BOOL_SYM.get(op)
            if sym is None:
                raise BackendCompileError(f"cuda codegen: binary {op.value} on bool values")
            if sym in ("&&", "||") and self._branch_free(e):
                sym = sym[0]   # both sides evaluated: selects instead of branches (argmax's combine)
            return f"({a} {sym} {b})"
        t = ctype(d)
        if d.is_float:
            if op in (n.BinOp.MIN, n.BinOp.MAX):
                return f"kd_f{op.value}<{t}>({a}, {b})"
            if op is n.BinOp.FLOORDIV:
                return f"kd_ffloordiv<{t}>({a}, {b})"
            if op is n.BinOp.MOD:
                return f"kd_fmod<{t}>({a}, {b})"
            if op is n.BinOp.POW:
                return f"{_math('pow', d)}({a}, {b})"
            if op is n.BinOp.HYPOT and d is dt.float64:
                return f"kd_hypot<double>({a}, {b})"
            if op in n.MATH_BINOPS:     # atan2, hypot, fmod, copysign
                return f"{_math(op.value, d)}({a}, {b})"
            sym = _SYM.get(op)
            if sym is None or op in (n.BinOp.AND, n.BinOp.OR, n.BinOp.XOR):
                raise BackendCompileError(f"cuda codegen: binary {op.value} on {d.name} values")
            if op in _VALUE_OPS and d in (dt.float32, dt.float16):
                a = value_only(a) if type(e.b) is not n.Const else a
                b = value_only(b) if type(e.a) is not n.Const else b
            return f"({a} {sym} {b})"
        # integers
        n32 = self._n32(e)
        if n32:
            t = "int"
        elif d == dt.index and op in _SYM and self.is32(e.a) and self.is32(e.b):
            a = f"((int64_t){a})"   # two int variables: the operation happens in 64 bits
        if op in (n.BinOp.FLOORDIV, n.BinOp.MOD) and d.is_signed and self.widths is not None \
                and self.widths.nonneg_by_positive(e):
            # a >= 0, b >= 1: C's unsigned / and % are Python's (and cheaper than kd_s*)
            u = "unsigned" if n32 else "uint64_t"
            sym = "/" if op is n.BinOp.FLOORDIV else "%"
            bt = f"{e.b.value}u" if n32 and type(e.b) is n.Const else f"({u})({b})"
            text = f"(({t})(({u})({a}) {sym} {bt}))"
            return self.hoisted.get(text, text)   # computed once per thread (kernel.py)
        if op in (n.BinOp.MIN, n.BinOp.MAX):
            return f"kd_i{op.value}<{t}>({a}, {b})"
        if op in (n.BinOp.FLOORDIV, n.BinOp.MOD):
            kind = "s" if d.is_signed else "u"
            fn = "floordiv" if op is n.BinOp.FLOORDIV else "mod"
            text = f"kd_{kind}{fn}<{t}>({a}, {b})"
            return self.hoisted.get(text, text)   # computed once per thread (kernel.py)
        if op is n.BinOp.POW:
            return f"kd_ipow<{t}>({a}, {b})"
        if op is n.BinOp.DIV:     # true division with an int result: in double, then truncate
            return f"(({t})(long long)((double)({a}) / (double)({b})))"
        sym = _SYM[op]
        if d in SMALL_INTS:
            return f"(({t})({a} {sym} {b}))"
        return f"({a} {sym} {b})"

    def _compare(self, e):
        return f"({self(e.a)} {_CMP[e.op]} {self(e.b)})"

    # ------------------------------------------------------------- unary
    def _unary(self, e):
        text = self._unary_text(e)
        return rounded(e.dtype, text) if e.dtype.is_float and e.op not in (
            n.UnOp.NEG, n.UnOp.BITCAST) else text

    def _unary_text(self, e):
        d, op, src = e.dtype, e.op, e.a.dtype
        a = self(e.a)
        if op is n.UnOp.ISNAN:
            return f"({a} != {a})" if src.is_float else "false"
        if op is n.UnOp.BITCAST:
            if src.is_float:
                return f"(({ctype(d)}){_AS_BITS[src]}({a}))"
            if d.is_float:
                fn, t = _FROM_BITS[d]
                return f"{fn}(({t})({a}))"
            return f"(({ctype(d)})({a}))"
        if op is n.UnOp.NOT:
            return f"(!{a})" if d.is_bool else f"(({ctype(d)})(~{a}))"
        if op is n.UnOp.NEG:
            if d.is_bool:
                return a
            if d in SMALL_INTS:
                return f"(({ctype(d)})(-{a}))"
            if d == dt.index and not self._n32(e) and self.is32(e.a):
                return f"(-(int64_t){a})"
            if d in _WRAP_NEG and not self._n32(e):   # numpy wraps -INT_MIN (C overflows)
                return f"(({ctype(d)})(0 - ({_WRAP_NEG[d]})({a})))"
            return f"(-{a})"
        if not d.is_float:
            if op is n.UnOp.ABS:
                if d.is_bool or not d.is_signed:
                    return a
                neg = f"(0 - ({_WRAP_NEG[d]})({a}))" if d in _WRAP_NEG else f"-{a}"
                return f"(({ctype(d)})({a} < 0 ? {neg} : {a}))"
            if op in (n.UnOp.FLOOR, n.UnOp.CEIL):
                return a
            raise BackendCompileError(f"cuda codegen: {op.value} of {d.name} values")
        if op is n.UnOp.SIGMOID:
            one = "1.0" if d is dt.float64 else "1.0f"
            return f"({one} / ({one} + {_math('exp', d)}(-{a})))"
        if op is n.UnOp.RSQRT:      # numpy: 1 / sqrt, both correctly rounded (CUDA's rsqrt is not)
            one = "1.0" if d is dt.float64 else "1.0f"
            return f"({one} / {_math('sqrt', d)}({a}))"
        name = _MATH.get(op)
        if name is None:
            raise InternalCompilerError(f"cuda codegen: unary {op.value}")
        return f"{_math(name, d)}({a})"

    def _select(self, e):
        return f"({self(e.cond)} ? {self(e.t)} : {self(e.f)})"

    def _cast(self, e):
        d, src = e.dtype, e.a.dtype
        a = self(e.a)
        if d == src:
            return a
        if d.is_bool:
            return f"({a} != 0)"
        t = ctype(d)
        if d is dt.float16 and src is dt.float64:     # numpy rounds once, from double
            return f"kd_h2f(kd_d2h({a}))"
        if d.is_float and d.bits == 16:     # bfloat16: via float32, like the interpreter
            return rounded(d, f"((float)({a}))")
        if self._n32(e):        # an index from a narrower int (or bool) that fits
            return f"((int)({a}))"
        if src.is_float and d.is_int:
            # numpy's x86 results (numpy_eval.float_to_int; prelude kd_cvt*)
            if d is dt.uint64:
                return f"kd_cvtu64((double)({a}))"
            if d is dt.uint32:
                fn = "kd_cvt64" if src is dt.float16 else "kd_cvtu32"
                return f"(({t}){fn}((double)({a})))"
            fn = "kd_cvt64" if d.bits == 64 else "kd_cvt32"
            return f"(({t}){fn}((double)({a})))"
        return f"(({t})({a}))"
