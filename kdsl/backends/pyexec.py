"""Translate a ``LoweredFunc`` into the text of one Python function (the interpreter's codegen).

Loops become ``for`` loops over ``range`` (every loop kind, thread-bound ones
included, runs sequentially: lowering emits barrier-separated phases, so
running them in order is exact), guards become ``if``, ``Allocate`` a fresh
numpy array where it stands, Loads/Stores index the numpy arrays with the
IR's logical indices, checked against the array's shape (numpy would wrap a
negative index silently).  Scalar semantics live in ``pyexec_rt``.

Python allows 20 nested ``for`` blocks and a bounded parenthesis depth, so a
deep loop nest is outlined into a helper function taking the live names, and
a deep expression is split into temporaries (expressions are pure, so
evaluating a part early changes nothing).
"""
from __future__ import annotations

import builtins
import keyword
import re
from dataclasses import dataclass

from .. import dtypes as dt
from ..errors import InternalCompilerError
from ..ir import nodes as n
from ..ir.bindings import SCALAR, SHAPE, STRIDE, scalar_slots
from ..ir.visitor import allocate_chain
from ..numerics import pyexec_rt as rt
from ..numerics.numpy_eval import NUMPY_MATH

_MAX_LOOPS = 16        # nested for-blocks per function before outlining (Python allows 20)
_MAX_INDENT = 60       # indentation levels per function (the tokenizer allows 100)
_MAX_EXPR_DEPTH = 40   # nesting of one expression before splitting off a temporary
_SIMPLE = re.compile(r"^(?:[A-Za-z_]\w*|\d+)$")   # index codes usable as they are
_RESERVED = set(keyword.kwlist) | set(dir(builtins)) | {"np", "math"}

_BIN_SYM = {n.BinOp.ADD: "+", n.BinOp.SUB: "-", n.BinOp.MUL: "*", n.BinOp.DIV: "/",
            n.BinOp.FLOORDIV: "//", n.BinOp.MOD: "%", n.BinOp.POW: "**",
            n.BinOp.AND: "&", n.BinOp.OR: "|", n.BinOp.XOR: "^", n.BinOp.SHR: ">>"}
_NP_BINARY = {n.BinOp.ATAN2: "arctan2", n.BinOp.HYPOT: "hypot", n.BinOp.FMOD: "fmod",
              n.BinOp.COPYSIGN: "copysign"}
_NP_MATH = {n.UnOp.EXP: "np.exp", n.UnOp.LOG: "np.log", n.UnOp.SQRT: "np.sqrt",
            n.UnOp.SIN: "np.sin", n.UnOp.COS: "np.cos", n.UnOp.TANH: "np.tanh",
            n.UnOp.FLOOR: "np.floor", n.UnOp.CEIL: "np.ceil"}


from .pyexec_loops import carry_loop_handler  # noqa: E402


@dataclass(frozen=True)
class Program:
    """Generated Python for one LoweredFunc: ``source`` text, ``globals`` it links to, entry name."""

    source: str
    globals: dict
    entry: str


class _Emitter:
    """Lines of one Python function being written."""

    def __init__(self, header: str):
        self.lines = [header]
        self.indent = 1
        self.loops = 0

    def line(self, text: str):
        self.lines.append("    " * self.indent + text)


class _Gen:
    def __init__(self, func: n.LoweredFunc):
        self.func = func
        self.globals = dict(rt.GLOBALS)
        self.globals["_kname"] = func.name
        self._names: dict[int, str] = {}
        self._keep = []                      # keep named objects alive: ids stay unique
        self._used = set(self.globals)
        self._next: dict = {}                # base name -> next suffix to try
        self._consts: dict = {}
        self._helpers: dict = {}
        self._tmp = 0
        self.scope: dict = {}                # Var -> python name, while defined
        self.bufs: dict = {}                 # Buffer -> (name, [shape names]), while live
        self.functions: list = []            # finished functions (lists of lines)
        self.pre: list = []                  # temporaries split off the current statement
        self.out: _Emitter | None = None
        self._expr_table = {
            n.Var: self._var, n.Const: self._const, n.Binary: self._binary,
            n.Compare: self._compare, n.Unary: self._unary, n.Select: self._select,
            n.Cast: self._cast, n.Load: self._load,
        }
        self._stmt_table = {
            n.For: self._for, n.IfThenElse: self._if, n.Store: self._store,
            n.Allocate: self._allocate, n.LetStmt: self._let, n.Seq: self._seq,
            n.Barrier: self._barrier, n.Evaluate: self._evaluate, n.Intrinsic: self._intrinsic,
            **async_copy_handlers(self),
            **{t: self._wmma for t in n.WMMA_STMTS},
            **carry_loop_handler(self),       # kd.fori_loop inside the kernel
        }

    # ------------------------------------------------------------- naming
    def name(self, obj, hint: str) -> str:
        key = id(obj)
        got = self._names.get(key)
        if got is None:
            got = self.fresh(hint)
            self._names[key] = got
            self._keep.append(obj)
        return got

    def fresh(self, hint: str) -> str:
        base = re.sub(r"\W", "_", hint or "v").lstrip("_") or "v"
        if base[0].isdigit():
            base = "v" + base
        k = self._next.get(base, 0)     # linear in the repeats of one base (thousands of stages)
        name = f"{base}_{k}" if k else base
        while name in self._used or name in _RESERVED:
            k += 1
            name = f"{base}_{k}"
        self._used.add(name)
        self._next[base] = k + 1
        return name

    def tmp(self, hint: str = "t") -> str:
        self._tmp += 1
        return f"_{hint}{self._tmp}"

    def helper(self, key, make, hint: str) -> str:
        """A global bound to ``make()``, shared by every use of ``key``."""
        got = self._helpers.get(key)
        if got is None:
            got = self.tmp(hint)
            self.globals[got] = make()
            self._helpers[key] = got
        return got

    # ------------------------------------------------------------- expressions
    def expr(self, e: n.Expr) -> str:
        return self._expr(e)[0]

    def _expr(self, e) -> tuple[str, int]:
        fn = self._expr_table.get(type(e))
        if fn is None:
            raise InternalCompilerError(f"the IR interpreter cannot execute a {type(e).__name__} "
                                        f"expression (only loop IR after lowering)")
        code, depth = fn(e)
        if depth > _MAX_EXPR_DEPTH:
            t = self.tmp("e")
            self.pre.append(f"{t} = {code}")
            return t, 0
        return code, depth

    def _var(self, v):
        name = self.scope.get(v)
        if name is None:
            raise InternalCompilerError(f"variable {v.name!r} is used where it is not defined "
                                        f"(kernel {self.func.name!r})")
        return name, 0

    def _const(self, c):
        d = c.dtype
        if d.is_bool:
            return ("True" if c.value else "False"), 0
        if d is dt.index and isinstance(c.value, int):
            return (str(c.value) if c.value >= 0 else f"({c.value})"), 0
        key = (d.name, repr(c.value))
        name = self._consts.get(key)
        if name is None:
            name = self.tmp("c")
            self.globals[name] = rt.make_value(c.value, d)
            self._consts[key] = name
        return name, 0

    def _bf16(self, d, code):
        return f"_rb({code})" if d is dt.bfloat16 else code

    def _binary(self, e):
        d, op = e.dtype, e.op
        (a, da), (b, db) = self._expr(e.a), self._expr(e.b)
        depth = max(da, db) + 1
        if d.is_bool:
            op = {n.BinOp.ADD: n.BinOp.OR, n.BinOp.MUL: n.BinOp.AND,
                  n.BinOp.MIN: n.BinOp.AND, n.BinOp.MAX: n.BinOp.OR}.get(op, op)
            if op not in (n.BinOp.AND, n.BinOp.OR, n.BinOp.XOR):
                raise InternalCompilerError(f"binary {op.value} on bool values")
        if op in n.MATH_BINOPS:
            return self._bf16(d, f"np.{_NP_BINARY[op]}({a}, {b})"), depth
        if op is n.BinOp.SHL:     # Python ints (index values) do not wrap by themselves
            f = self.helper(("shl", d.name), lambda: rt.make_shl(d), "shl")
            return f"{f}({a}, {b})", depth
        if op in (n.BinOp.MIN, n.BinOp.MAX):
            fn = ("_fmin" if op is n.BinOp.MIN else "_fmax") if d.is_float else op.value
            return f"{fn}({a}, {b})", depth
        if d.is_int:
            if op is n.BinOp.FLOORDIV:
                return f"_ifloordiv({a}, {b})", depth
            if op is n.BinOp.MOD:
                return f"_imod({a}, {b})", depth
            if op is n.BinOp.POW:
                f = self.helper(("ipow", d.name), lambda: rt.make_ipow(d), "ipow")
                return f"{f}({a}, {b})", depth
            if op is n.BinOp.DIV:
                f = self.helper(("idiv", d.name), lambda: rt.make_int_div(d), "idiv")
                return f"{f}({a}, {b})", depth
        elif d.is_float and op in (n.BinOp.AND, n.BinOp.OR, n.BinOp.XOR):
            raise InternalCompilerError(f"bitwise {op.value} on {d.name} values")
        return self._bf16(d, f"({a} {_BIN_SYM[op]} {b})"), depth

    def _compare(self, e):
        (a, da), (b, db) = self._expr(e.a), self._expr(e.b)
        return f"({a} {e.op.value} {b})", max(da, db) + 1

    def _unary(self, e):
        d, op = e.dtype, e.op
        src = e.a.dtype
        a, depth = self._expr(e.a)
        depth += 1
        if op is n.UnOp.ISNAN:
            return (f"np.isnan({a})" if src.is_float else "False"), depth
        if op is n.UnOp.BITCAST:
            f = self.helper(("bitcast", src.name, d.name), lambda: rt.make_bitcast(src, d), "bitcast")
            return f"{f}({a})", depth
        if op in n.LIBM_UNOPS:
            if not d.is_float:
                return a, depth
            return self._bf16(d, f"np.{NUMPY_MATH[op]}({a})"), depth
        if op is n.UnOp.NOT:
            return (f"(not {a})" if d.is_bool else f"(~{a})"), depth
        if op is n.UnOp.ABS:
            return (a if d.is_bool else f"abs({a})"), depth
        if op is n.UnOp.NEG:
            if d.is_bool:
                raise InternalCompilerError("negation of a bool value")
            return f"(-{a})", depth
        if op in (n.UnOp.FLOOR, n.UnOp.CEIL) and not d.is_float:
            return a, depth
        if not d.is_float:
            raise InternalCompilerError(f"{op.value} of a {d.name} value")
        if op in (n.UnOp.RSQRT, n.UnOp.SIGMOID, n.UnOp.ERF):
            f = self.helper((op.value, d.name), lambda: rt.make_math(op.value, d), op.value)
            return f"{f}({a})", depth
        return self._bf16(d, f"{_NP_MATH[op]}({a})"), depth

    def _select(self, e):
        parts = [self._expr(x) for x in (e.cond, e.t, e.f)]
        return f"_sel({', '.join(p for p, _ in parts)})", max(d for _, d in parts) + 1

    def _cast(self, e):
        a, depth = self._expr(e.a)
        src, dst = e.a.dtype, e.dtype
        if src is dst:
            return a, depth
        f = self.helper(("cast", src.name, dst.name), lambda: rt.make_cast(src, dst), "cast")
        return f"{f}({a})", depth + 1

    def _buffer(self, b: n.Buffer, what: str):
        got = self.bufs.get(b)
        if got is None:
            raise InternalCompilerError(f"{what} of buffer {b.name!r} outside its allocation "
                                        f"(kernel {self.func.name!r})")
        return got

    def _indices(self, b: n.Buffer, indices, what: str):
        if len(indices) != len(b.shape):
            raise InternalCompilerError(f"{what} of {len(b.shape)}-d buffer {b.name!r} with "
                                        f"{len(indices)} indices")
        for i in indices:
            if not (i.dtype.is_int):
                raise InternalCompilerError(f"{what} of buffer {b.name!r} with a {i.dtype.name} index")
        return [self._expr(i) for i in indices]

    def _load(self, e):
        b = e.buffer
        if e.dtype is not b.dtype:
            raise InternalCompilerError(f"load of {b.dtype.name} buffer {b.name!r} as {e.dtype.name}")
        name, shape = self._buffer(b, "load")
        idx = self._indices(b, e.indices, "load")
        if not idx:
            code, depth = f"{name}[()]", 0
        else:
            # evaluate every index once (walrus, in a tuple: always truthy), then check each
            temps = [c if _SIMPLE.match(c) else self.tmp("i") for c, _ in idx]
            assign = "".join(f"({t} := {c}), " for t, (c, _) in zip(temps, idx) if t != c)
            checks = " and ".join(f"0 <= {t} < {sh}" for t, sh in zip(temps, shape))
            tup = ", ".join(temps)
            cond = f"({assign}) and {checks}" if assign else checks
            oob = f"_oob(_kname, 'load', {b.name!r}, ({tup},), {name}.shape)"
            if b.empty_reads:   # a dead read of an empty array (Buffer.empty_reads): any value
                oob = f"({name}.dtype.type(0) if {name}.size == 0 else {oob})"
            code = f"({name}[{tup}] if {cond} else {oob})"
            depth = max(dd for _, dd in idx) + 2
        if b.dtype is dt.bfloat16:
            code = f"np.float32({code})"
        return code, depth

    # ------------------------------------------------------------- statements
    def stmt(self, s: n.Stmt):
        fn = self._stmt_table.get(type(s))
        if fn is None:
            raise InternalCompilerError(f"the IR interpreter cannot execute a {type(s).__name__} "
                                        f"statement")
        fn(s)

    def flush(self):
        """Emit the temporaries split off the current statement's expressions."""
        for p in self.pre:
            self.out.line(p)
        self.pre = []

    def emit(self, text: str):
        """Emit ``text`` after the temporaries its expressions split off."""
        self.flush()
        self.out.line(text)

    def block(self, s: n.Stmt | None):
        self.out.indent += 1
        start = len(self.out.lines)
        if s is not None:
            self.stmt(s)
        if len(self.out.lines) == start:
            self.out.line("pass")
        self.out.indent -= 1

    def bind(self, v: n.Var) -> str:
        if v in self.scope:
            raise InternalCompilerError(f"variable {v.name!r} is bound again inside its own scope")
        name = self.name(v, v.name)
        self.scope[v] = name
        return name

    def _for(self, s: n.For):
        if self.out.loops >= _MAX_LOOPS or self.out.indent >= _MAX_INDENT:
            return self._outline(s)
        lo, ext = self.expr(s.min), self.expr(s.extent)
        kind = s.thread.value if s.kind is n.ForKind.BOUND else s.kind.value
        note = "" if s.kind is n.ForKind.SERIAL else f"  # {kind}"
        if isinstance(s.min, n.Const) and s.min.value == 0:
            rng = f"range({ext})"
        else:
            t = self.tmp("lo")
            self.pre.append(f"{t} = {lo}")
            rng = f"range({t}, {t} + {ext})"
        v = self.bind(s.var)
        self.emit(f"for {v} in {rng}:{note}")
        self.out.loops += 1
        self.block(s.body)
        self.out.loops -= 1
        del self.scope[s.var]

    def _outline(self, s: n.For):
        """Move a deep loop into a function of its own, called with the live names."""
        live = list(self.scope.values())
        for name, shape in self.bufs.values():
            live += [name, *shape]
        fname = self.fresh(f"{self.func.name}_part")
        self.emit(f"{fname}({', '.join(live)})")
        outer, self.out = self.out, _Emitter(f"def {fname}({', '.join(live)}):")
        self.stmt(s)
        self.functions.append(self.out.lines)
        self.out = outer

    def _if(self, s: n.IfThenElse):
        self.emit(f"if {self.expr(s.cond)}:")
        self.block(s.then)
        if s.otherwise is not None:
            self.out.line("else:")
            self.block(s.otherwise)

    def _store(self, s: n.Store):
        b = s.buffer
        if s.value.dtype is not b.dtype:
            raise InternalCompilerError(f"store of a {s.value.dtype.name} value into "
                                        f"{b.dtype.name} buffer {b.name!r}")
        name, shape = self._buffer(b, "store")
        idx = self._indices(b, s.indices, "store")
        value = self.expr(s.value)
        if not idx:
            self.emit(f"{name}[()] = {value}")
            return
        temps = [c if _SIMPLE.match(c) else self.tmp("i") for c, _ in idx]
        tup = ", ".join(temps)
        self.pre += [f"{t} = {c}" for t, (c, _) in zip(temps, idx) if t != c]
        self.flush()
        checks = " and ".join(f"0 <= {t} < {sh}" for t, sh in zip(temps, shape))
        self.out.line(f"if not ({checks}): _oob(_kname, 'store', {b.name!r}, ({tup},), {name}.shape)")
        self.out.line(f"{name}[{tup}] = {value}")

    def _allocate(self, s: n.Allocate):
        chain, inner = allocate_chain(s)   # in a loop: one Allocate per stage, nested
        for a in chain:
            b = a.buffer
            if b in self.bufs:
                raise InternalCompilerError(f"buffer {b.name!r} is allocated again inside its "
                                            "own scope")
            shape = [self.expr(x) for x in b.shape]
            name = self.name(b, b.name)
            npd = self.helper(("dtype", b.dtype.name), lambda b=b: rt.storage_np(b.dtype), "dt")
            tup = "".join(f"{x}, " for x in shape)
            self.emit(f"{name} = _alloc(({tup}), {npd}, {b.name!r})  # {b.scope.value}")
            snames = self._shape_names(name, len(shape))
            self.bufs[b] = (name, snames)
        self.stmt(inner)
        for a in chain:
            del self.bufs[a.buffer]

    def _shape_names(self, name: str, ndim: int) -> list:
        snames = [self.fresh(f"{name}_n{k}") for k in range(ndim)]
        if snames:
            self.out.line(f"{''.join(x + ', ' for x in snames)}= {name}.shape")
        return snames

    def _let(self, s: n.LetStmt):
        value = self.expr(s.value)
        v = self.bind(s.var)
        self.emit(f"{v} = {value}")
        self.stmt(s.body)
        del self.scope[s.var]

    def _seq(self, s: n.Seq):
        for x in s.stmts:
            self.stmt(x)

    def _barrier(self, s):
        self.out.line(f"pass  # barrier ({s.scope.value}): phases already run in order")

    def _evaluate(self, s):
        self.emit(f"_ = {self.expr(s.value)}")

    def _intrinsic(self, s):
        self.out.line(f"_intrinsic({s.name!r})")

    def _wmma(self, s):
        from ..gpu.wmma_defs import emit_python    # warp-level matrix statements, run by definition
        emit_python(self, s)

    # ------------------------------------------------------------- function
    def function(self) -> Program:
        f = self.func
        entry = self.fresh(f.name)
        self.out = _Emitter(f"def {entry}(_inputs, _outputs, _scalars):")
        self.out.line(f'"""Kernel {f.name!r}, generated by kdsl\'s IR interpreter."""')
        for k, b in enumerate(f.buffers):
            name = self.name(b, b.name)
            src = f"_inputs[{k}]" if k < len(f.inputs) else f"_outputs[{k - len(f.inputs)}]"
            self.out.line(f"{name} = {src}")
            self.bufs[b] = (name, self._shape_names(name, len(b.shape)))
        self._bindings()
        self._shape_checks()
        self.stmt(f.body)
        self.functions.insert(0, self.out.lines)
        source = "\n\n".join("\n".join(lines) for lines in self.functions) + "\n"
        return Program(source, self.globals, entry)

    def _bindings(self):
        f = self.func
        for v, sl in zip(f.scalars, scalar_slots(f)):
            kind, i, dim = sl.kind, sl.index, sl.dim
            if kind == SHAPE:
                src = self.bufs[f.buffers[i]][1][dim]
            elif kind == STRIDE:
                src = f"_stride({self.bufs[f.buffers[i]][0]}, {dim}, _kname, {sl.buffer!r})"
            else:
                src = f"_scalars[{i}]"
            if v.dtype is not dt.index:     # int64 stays a Python int; others become numpy
                f_ = self.helper(("value", v.dtype.name), lambda d=v.dtype: (lambda x: rt.make_value(x, d)), "val")
                src = f"{f_}({src})"
            elif kind == SCALAR:
                src = f"np.int64({src})"  # user int64 arithmetic wraps like numpy's
            self.out.line(f"{self.bind(v)} = {src}")

    def _shape_checks(self):
        """Compare each argument's shape with the IR's shape (when computable from the scalars)."""
        from ..ir.visitor import free_vars
        for b in self.func.buffers:
            if not b.shape or any(v not in self.scope for x in b.shape for v in free_vars(x)):
                continue
            name, snames = self.bufs[b]
            want = ", ".join(self.expr(x) for x in b.shape) + ","
            got = ", ".join(snames) + ","
            self.emit(f"if ({got}) != ({want}): _bad_shape(_kname, {b.name!r}, {name}.shape, ({want}))")


def generate(func: n.LoweredFunc) -> Program:
    """The Python program that executes ``func`` (pure: no execution happens here)."""
    if not isinstance(func, n.LoweredFunc):
        raise InternalCompilerError(f"generate() needs a LoweredFunc, got {type(func).__name__}")
    return _Gen(func).function()


__all__ = ["Program", "generate"]


def async_copy_handlers(c) -> dict:
    """DeviceKernel, AsyncCopy / CommitGroup / WaitGroup for the interpreter: the copy completes at issue
    (``kdsl.gpu.sequential.lower_async_copies``), commits and waits do nothing."""
    from ..gpu.sequential import as_stores
    skip = lambda s: c.out.line(f"pass  # {type(s).__name__}: copies completed at issue")  # noqa: E731
    return {n.AsyncCopy: lambda s: c.stmt(as_stores(s)), n.CommitGroup: skip, n.WaitGroup: skip, n.WgmmaWait: skip, n.WgmmaCommit: skip,
            # a DeviceKernel of GPU-form IR runs its block and thread loops as loops
            n.DeviceKernel: lambda s: c.stmt(s.body)}
