"""LLVM intrinsics, libm functions and small helper functions a kernel module links to.

``exp``, ``log``, ``tanh``, ``erf``, ``sin`` and ``cos`` (``vecmath.NAMES``)
are branch-free functions defined in the module itself (vecmath.py): LLVM
lowers its own ``llvm.exp``... to scalar libm calls, which stop loop
vectorisation.  Math that vectorises natively (sqrt, floor, ceil, fabs, fma)
uses LLVM intrinsics, and so does pow (a libm call, ``powf`` ...) and fmod
(``frem``); the JIT resolves such calls in the process (``LIBM_SYMBOLS``
lists what it may have to find; ``libm`` declares one by name).  Integer
power and saturating float->int conversion are helper functions defined in
the module itself, internal and always inlined.
"""
from __future__ import annotations

from llvmlite import ir

from kdsl import dtypes as dt

from . import vecmath
from .types import DOUBLE, FLOAT, I1, I64, value_type

#: libm functions a generated module may call by name (besides what intrinsics lower to)
LIBM_SYMBOLS = ("tanhf", "tanh", "erf", "expf", "exp", "logf", "log", "sinf", "sin", "cosf",
                "cos", "powf", "pow", "fmodf", "fmod", "sqrtf", "sqrt", "floorf", "floor",
                "ceilf", "ceil", "fmaf", "fma",
                # numpy's other ufuncs (kdsl.ir.nodes.LIBM_UNOPS, ATAN2, HYPOT)
                *(f + s for f in ("tan", "sinh", "cosh", "asin", "acos", "atan", "asinh", "acosh",
                                  "atanh", "log1p", "expm1", "log2", "log10", "exp2", "cbrt",
                                  "atan2", "hypot") for s in ("f", "")))   # llvm.fma calls fma[f] where the CPU lacks FMA


def _suffix(t: ir.Type) -> str:
    return {"half": "f16", "float": "f32", "double": "f64"}[str(t)]


class Intrinsics:
    """Declarations of one module, made once per (name, type)."""

    def __init__(self, module: ir.Module):
        self.module = module
        self._fns: dict = {}

    def _get(self, key, make):
        f = self._fns.get(key)
        if f is None:
            f = make()
            self._fns[key] = f
        return f

    def unary(self, name: str, t: ir.Type) -> ir.Function:
        """``llvm.<name>.<type>`` taking and returning ``t`` (exp, log, sqrt, sin, cos, ...)."""
        return self._get((name, str(t)), lambda: self.module.declare_intrinsic(
            f"llvm.{name}", [t], ir.FunctionType(t, [t])))

    def binary(self, name: str, t: ir.Type) -> ir.Function:
        """``llvm.<name>.<type>(t, t) -> t`` (pow)."""
        return self._get((name, str(t)), lambda: self.module.declare_intrinsic(
            f"llvm.{name}", [t], ir.FunctionType(t, [t, t])))

    def libm(self, name: str, t: ir.Type) -> ir.Function:
        """The C function ``name`` (``tanhf``, ``erf``...) of type ``t -> t``."""
        def make():
            f = ir.Function(self.module, ir.FunctionType(t, [t]), name)
            f.attributes.add("nounwind")
            return f
        return self._get(("libm", name), make)

    def libm2(self, name: str, t: ir.Type) -> ir.Function:
        """The C function ``name`` (``atan2f``, ``hypot``...) of type ``(t, t) -> t``."""
        def make():
            f = ir.Function(self.module, ir.FunctionType(t, [t, t]), name)
            f.attributes.add("nounwind")
            return f
        return self._get(("libm2", name), make)

    def vecmath(self, name: str, t: ir.Type) -> ir.Function:
        """The inline, vectorisable ``name`` for ``t`` (where ``vecmath.has(name, t)``)."""
        return self._get(("vecmath", name, str(t)), lambda: vecmath.make(self.module, name, t))

    def fptosi_sat(self, src: ir.Type) -> ir.Function:
        """``llvm.fptosi.sat.i64.<src>``: defined for NaN and out-of-range values (no poison)."""
        return self._get(("fptosi.sat", str(src)), lambda: self.module.declare_intrinsic(
            "llvm.fptosi.sat", [I64, src], ir.FunctionType(I64, [src])))

    def ipow(self, d: dt.DType) -> ir.Function:
        """Integer power in ``d`` by squaring (wrapping); a negative exponent gives the C-like
        1 (base 1), +-1 (base -1) or 0, as the reference executors do."""
        return self._get(("ipow", d.name), lambda: _make_ipow(self.module, d))


def _make_ipow(module: ir.Module, d: dt.DType) -> ir.Function:
    t = value_type(d)
    f = ir.Function(module, ir.FunctionType(t, [t, t]), f"kdsl.ipow.{d.name}")
    f.linkage = "internal"
    f.attributes.add("alwaysinline")
    f.attributes.add("nounwind")
    a, e = f.args
    entry, neg, loop, body, done = (f.append_basic_block(x) for x in
                                    ("entry", "neg", "loop", "body", "done"))
    b = ir.IRBuilder(entry)
    zero, one = ir.Constant(t, 0), ir.Constant(t, 1)
    if d.is_signed:
        b.cbranch(b.icmp_signed("<", e, zero), neg, loop)
    else:
        b.branch(loop)
    # negative exponent: 1 for base 1, +-1 for base -1 (by parity), else 0
    b.position_at_end(neg)
    odd = b.trunc(e, I1)
    m1 = b.select(odd, ir.Constant(t, -1), one)
    r = b.select(b.icmp_signed("==", a, one), one,
                 b.select(b.icmp_signed("==", a, ir.Constant(t, -1)), m1, zero))
    b.ret(r)
    # square-and-multiply over the bits of e
    b.position_at_end(loop)
    acc = b.phi(t)
    base = b.phi(t)
    ex = b.phi(t)
    acc.add_incoming(one, entry)
    base.add_incoming(a, entry)
    ex.add_incoming(e, entry)
    b.cbranch(b.icmp_unsigned("==", ex, zero), done, body)
    b.position_at_end(body)
    bit = b.trunc(ex, I1)
    acc2 = b.select(bit, b.mul(acc, base), acc)
    base2 = b.mul(base, base)
    ex2 = b.lshr(ex, one)
    acc.add_incoming(acc2, body)
    base.add_incoming(base2, body)
    ex.add_incoming(ex2, body)
    b.branch(loop)
    b.position_at_end(done)
    b.ret(acc)
    return f


def libm_name(op: str, t: ir.Type) -> str:
    """The libm function for ``op`` ('tanh', 'erf') computed in ``t`` (float or double)."""
    if op == "erf":
        return "erf"     # always in double: the reference executors use math.erf
    return op + ("f" if t == FLOAT else "")


__all__ = ["Intrinsics", "LIBM_SYMBOLS", "libm_name", "DOUBLE"]
