"""Readable, Python-like text for IR: the debugging UI and a test oracle (DESIGN principle 6).

Names on Vars, Buffers and graph Tensors are only hints: a ``Namer`` gives
every object one name, unique within one printed unit (``i``, ``i_1``...).
Parentheses are minimal under Python's precedence rules, so the text reads
like Python.  Constants carry their dtype where it is not obvious:
``3`` (int64), ``int32(3)``, ``1.0`` (float64), ``1.0f`` (float32),
``1.0h`` (float16), ``bfloat16(1.0)``, ``float32(inf)``.
"""
from __future__ import annotations

import enum
import math

from .. import dtypes as dt
from . import nodes as n

INDENT = "  "


class Namer:
    """Unique display names for identity-compared objects (Vars, Buffers, Tensors).

    ``reserve`` first gives each distinct hint to the first object carrying it, so
    that an object literally named ``i_1`` keeps its name; the others get suffixes.
    """

    def __init__(self):
        self._names: dict[int, str] = {}
        self._keep: list = []   # keep objects alive so their ids stay unique
        self._used: set[str] = set()
        self._next: dict = {}   # base -> next suffix to try

    def reserve(self, objs) -> None:
        """Give each object whose hint is still free exactly that hint, in order."""
        for obj in objs:
            base = getattr(obj, "name", None) or "v"
            if id(obj) not in self._names and base not in self._used:
                self._used.add(base)
                self._names[id(obj)] = base
                self._keep.append(obj)

    def __call__(self, obj, hint: str | None = None) -> str:
        key = id(obj)
        name = self._names.get(key)
        if name is None:
            base = hint if hint is not None else getattr(obj, "name", None) or "v"
            base = base or "v"
            k = self._next.get(base, 0)   # linear in the repeats of one name
            name = f"{base}_{k}" if k else base
            while name in self._used:
                k += 1
                name = f"{base}_{k}"
            self._used.add(name)
            self._next[base] = k + 1
            self._names[key] = name
            self._keep.append(obj)
        return name


def named_objects(node) -> list:
    """Vars, Buffers and graph Tensors below ``node`` in pre-order (for ``Namer.reserve``)."""
    from .visitor import collect
    out = []

    def visit(x):
        if isinstance(x, n.Var):
            out.append(x)
        elif isinstance(x, (n.Load, n.Store, n.Allocate, n.AsyncCopy)):
            out.append(x.buffer)
        elif isinstance(x, n.CrossThreadReduce):
            out.extend(x.results)
        elif isinstance(x, n.TensorRead):
            out.append(x.tensor)
        elif isinstance(x, n.Reduce):
            out.extend(ax.var for ax in x.axes)
        elif isinstance(x, n.Intrinsic):
            stack = list(x.args)
            while stack:
                a = stack.pop(0)
                if isinstance(a, n.Buffer):
                    out.append(a)
                elif isinstance(a, tuple):
                    stack[:0] = list(a)
        elif isinstance(x, n.Buffer):
            out.append(x)
        elif isinstance(x, n.WMMA_STMTS):
            out.extend(getattr(x, f) for f in ("d", "a", "b", "c", "frag", "src", "dst") if hasattr(x, f))
        return False

    collect(node, visit)
    return out


# Python precedence, low to high; atoms (names, calls, subscripts) are highest.
_P_TERNARY, _P_OR, _P_AND, _P_NOT, _P_CMP = 1, 2, 3, 4, 5
_P_BOR, _P_BXOR, _P_BAND, _P_ADD, _P_MUL, _P_UNARY, _P_POW, _P_ATOM = 6, 7, 8, 10, 11, 12, 13, 20

_BIN_PREC = {
    n.BinOp.ADD: _P_ADD, n.BinOp.SUB: _P_ADD, n.BinOp.MUL: _P_MUL, n.BinOp.DIV: _P_MUL,
    n.BinOp.FLOORDIV: _P_MUL, n.BinOp.MOD: _P_MUL, n.BinOp.POW: _P_POW,
    n.BinOp.AND: _P_BAND, n.BinOp.OR: _P_BOR, n.BinOp.XOR: _P_BXOR,
    n.BinOp.SHL: _P_BAND + 1, n.BinOp.SHR: _P_BAND + 1,   # Python's shift precedence
}
_FLOAT_SUFFIX = {"float32": "f", "float16": "h", "float64": ""}


def _is_ceildiv(e: n.Binary) -> bool:
    """``(x + (c-1)) // c`` for a constant c > 1: what ``make.ceildiv`` builds."""
    a, b = e.a, e.b
    return (e.op is n.BinOp.FLOORDIV and type(b) is n.Const and e.dtype.is_int and b.value > 1
            and type(a) is n.Binary and a.op is n.BinOp.ADD and type(a.b) is n.Const
            and a.b.value == b.value - 1)


def format_const(c: n.Const) -> str:
    """A constant with its dtype made visible where Python's reading would differ."""
    d, v = c.dtype, c.value
    if d.is_bool:
        return "True" if v else "False"
    if d.is_int:
        return str(int(v)) if d is dt.index else f"{d.name}({int(v)})"
    v = float(v)
    text = repr(v)
    if not math.isfinite(v) or d.name not in _FLOAT_SUFFIX:
        return f"{d.name}({text})"
    return text + _FLOAT_SUFFIX[d.name]


class ExprPrinter:
    """Formats expressions with one ``Namer``; ``axis_ranges`` shows reduce axes' domains."""

    def __init__(self, namer: Namer | None = None, axis_ranges: bool = False):
        self.namer = namer if namer is not None else Namer()
        self.axis_ranges = axis_ranges
        self._table = {
            n.Var: self._var, n.Const: self._const, n.Binary: self._binary,
            n.Compare: self._compare, n.Unary: self._unary, n.Select: self._select,
            n.Cast: self._cast, n.Load: self._load, n.TensorRead: self._tread,
            n.Reduce: self._reduce,
        }

    def __call__(self, e) -> str:
        return self.fmt(e)[0]

    def fmt(self, e) -> tuple[str, int]:
        """(text, precedence) of ``e``."""
        fn = self._table.get(type(e))
        if fn is None:
            return f"<{type(e).__name__}?>", _P_ATOM
        return fn(e)

    def sub(self, e, min_prec: int) -> str:
        """``e``'s text, parenthesised if it binds looser than ``min_prec``."""
        text, p = self.fmt(e)
        return f"({text})" if p < min_prec else text

    def _var(self, v):
        return self.namer(v), _P_ATOM

    def _const(self, c):
        text = format_const(c)
        neg = text.startswith("-")
        return text, _P_UNARY if neg else _P_ATOM

    def _binary(self, e):
        op = e.op
        if op in (n.BinOp.MIN, n.BinOp.MAX) or op in n.MATH_BINOPS:
            return f"{op.value}({self(e.a)}, {self(e.b)})", _P_ATOM
        if e.dtype.is_bool and op in (n.BinOp.AND, n.BinOp.OR):
            p = _P_AND if op is n.BinOp.AND else _P_OR
            word = "and" if op is n.BinOp.AND else "or"
            return f"{self.sub(e.a, p)} {word} {self.sub(e.b, p + 1)}", p
        if _is_ceildiv(e):
            return f"ceildiv({self(e.a.a)}, {self(e.b)})", _P_ATOM
        p = _BIN_PREC[op]
        if op is n.BinOp.POW:   # right-associative; -x**2 is -(x**2) in Python
            return f"{self.sub(e.a, p + 1)}**{self.sub(e.b, _P_UNARY)}", p
        if op is n.BinOp.MUL:
            # (x // 4)*8 rather than x // 4*8: the tight * would mislead the eye
            a_text, a_prec = self.fmt(e.a)
            tight = a_prec > p or (type(e.a) is n.Binary and e.a.op is n.BinOp.MUL)
            return f"{a_text if tight else f'({a_text})'}*{self.sub(e.b, p + 1)}", p
        return f"{self.sub(e.a, p)} {op.value} {self.sub(e.b, p + 1)}", p

    def _compare(self, e):
        # comparison operands never chain: a < b < c would mean something else
        return f"{self.sub(e.a, _P_CMP + 1)} {e.op.value} {self.sub(e.b, _P_CMP + 1)}", _P_CMP

    def _unary(self, e):
        if e.op is n.UnOp.NEG:
            return f"-{self.sub(e.a, _P_UNARY)}", _P_UNARY
        if e.op is n.UnOp.NOT:
            if e.dtype.is_bool:
                return f"not {self.sub(e.a, _P_NOT)}", _P_NOT
            return f"~{self.sub(e.a, _P_UNARY)}", _P_UNARY
        return f"{e.op.value}({self(e.a)})", _P_ATOM

    def _select(self, e):
        return f"select({self(e.cond)}, {self(e.t)}, {self(e.f)})", _P_ATOM

    def _cast(self, e):
        return f"{e.dtype.name}({self(e.a)})", _P_ATOM

    def _indices(self, idx) -> str:
        return ", ".join(self(i) for i in idx) if idx else "()"

    def _load(self, e):
        return f"{self.namer(e.buffer)}[{self._indices(e.indices)}]", _P_ATOM

    def _tread(self, e):
        return f"{self.namer(e.tensor)}[{self._indices(e.indices)}]", _P_ATOM

    def end(self, lo: n.Expr, extent: n.Expr) -> str:
        """The text of ``lo + extent``, simplified (the end of a half-open range)."""
        if lo.dtype is not extent.dtype:
            return f"{self.sub(lo, _P_ADD)} + {self.sub(extent, _P_ADD + 1)}"
        from .simplify import simplify   # late: simplify imports nothing from here
        return self(simplify(n.Binary(lo.dtype, n.BinOp.ADD, lo, extent)))

    def format_range(self, r: n.Range) -> str:
        """``lo..hi`` (half-open) of a Range."""
        return f"{self(r.min)}..{self.end(r.min, r.extent)}"

    def _reduce(self, e):
        if len(e.sources) == 1:
            src = self(e.sources[0])
        else:
            src = "(" + ", ".join(self(s) for s in e.sources) + ")"
        axes = []
        for ax in e.axes:
            name = self.namer(ax.var)
            axes.append(f"{name} in {self.format_range(ax.dom)}" if self.axis_ranges else name)
        text = f"{getattr(e.combiner, 'name', 'reduce')}({src}, axis=[{', '.join(axes)}]"
        if e.condition is not None:
            text += f", where={self(e.condition)}"
        text += ")"
        if len(e.sources) > 1:
            text += f"[{e.value_index}]"
        return text, _P_ATOM


class StmtPrinter:
    """Formats statements as indented lines, sharing an ``ExprPrinter``'s Namer."""

    def __init__(self, namer: Namer | None = None):
        self.expr = ExprPrinter(namer)
        self.namer = self.expr.namer
        self._table = {
            n.For: self._for, n.IfThenElse: self._if, n.Store: self._store,
            n.Allocate: self._allocate, n.LetStmt: self._let, n.Seq: self._seq,
            n.Barrier: self._barrier, n.Evaluate: self._evaluate, n.Intrinsic: self._intrinsic,
            n.CrossThreadReduce: self._cross_thread, n.AsyncCopy: self._async_copy,
            n.CommitGroup: self._commit, n.WaitGroup: self._wait, n.WgmmaWait: self._wgmma_wait, n.WgmmaCommit: self._wgmma_commit, n.DeviceKernel: self._kernel,
            n.WmmaFill: self._wmma_fill, n.WmmaLoad: self._wmma_load, n.WmmaMma: self._wmma_mma,
            n.WmmaStore: self._wmma_store, n.WgmmaMma: self._wgmma_mma,
            n.CarryLoop: self._carry_loop,
        }

    def lines(self, s, depth: int, out: list):
        fn = self._table.get(type(s))
        if fn is None:
            out.append(INDENT * depth + f"<{type(s).__name__}?>")
        else:
            fn(s, depth, out)

    def block(self, s, depth: int, out: list):
        """A nested block; an empty one prints ``pass`` so the text stays well-formed."""
        start = len(out)
        self.lines(s, depth, out)
        if len(out) == start:
            out.append(INDENT * depth + "pass")

    def _for(self, s, depth, out):
        e = self.expr
        if isinstance(s.min, n.Const) and s.min.value == 0:
            rng = f"range({e(s.extent)})"
        else:
            rng = f"range({e(s.min)}, {e.end(s.min, s.extent)})"
        head = f"for {self.namer(s.var)} in {rng}:"
        if s.kind is n.ForKind.BOUND:
            head += f"  # bound {s.thread.value}"
        elif s.kind is not n.ForKind.SERIAL:
            head += f"  # {s.kind.value}"
        out.append(INDENT * depth + head)
        self.block(s.body, depth + 1, out)

    def _carry_loop(self, s, depth, out):
        """``for i in range(..):  # kd.fori_loop`` with the carries it ping-pongs."""
        e, nm = self.expr, self.namer
        rng = f"range({e(s.min)}, {e.end(s.min, s.extent)})"
        out.append(INDENT * depth + f"for {nm(s.var)} in {rng}:  # kd.fori_loop steps, in order")
        for b, c, x, r in zip(s.inits, s.cur, s.nxt, s.results):
            how = f"-> {nm(x)}: {self.buffer_type(c)}, ping-pong" if x is not c else \
                f"{self.buffer_type(c)}, in place"
            out.append(INDENT * (depth + 1) + f"# carry {nm(c)} (first {nm(b)}) {how}; "
                       f"last into {nm(r)}")
        self.block(s.body, depth + 1, out)

    def _if(self, s, depth, out, word="if"):
        note = "  # alternatives: else is right everywhere" if s.alternatives else ""
        out.append(INDENT * depth + f"{word} {self.expr(s.cond)}:{note}")
        self.block(s.then, depth + 1, out)
        other = s.otherwise
        if other is None:
            return
        if isinstance(other, n.IfThenElse) and not s.alternatives:
            self._if(other, depth, out, "elif")
        else:
            out.append(INDENT * depth + "else:")
            self.block(other, depth + 1, out)

    def _store(self, s, depth, out):
        e = self.expr
        out.append(INDENT * depth + f"{self.namer(s.buffer)}[{e._indices(s.indices)}] = {e(s.value)}")

    def buffer_type(self, b: n.Buffer) -> str:
        """``float32[n, m]`` plus `` strides (s0, s1)`` when the buffer has explicit strides."""
        e = self.expr
        text = f"{b.dtype.name}[{', '.join(e(x) for x in b.shape)}]"
        if b.strides is not None:
            text += f" strides ({', '.join(e(x) for x in b.strides)})"
        return text

    def _allocate(self, s, depth, out):
        # a chain of Allocates (one per intermediate stage) prints as a run of lines at one
        # indentation, in a loop: thousands of stages would otherwise nest that deep
        while True:
            b = s.buffer
            head = f"allocate {self.namer(b)}: {self.buffer_type(b)} {b.scope.value}"
            if s.stages > 1:
                head += f", stages={s.stages}"
            out.append(INDENT * depth + head)
            if type(s.body) is not n.Allocate:
                break
            s = s.body
        self.block(s.body, depth + 1, out)

    def _let(self, s, depth, out):
        out.append(INDENT * depth + f"let {self.namer(s.var)} = {self.expr(s.value)}")
        self.lines(s.body, depth, out)

    def _seq(self, s, depth, out):
        for x in s.stmts:
            self.lines(x, depth, out)

    def _barrier(self, s, depth, out):
        out.append(INDENT * depth + f"barrier({s.scope.value})")

    def _cross_thread(self, s, depth, out):
        res = ", ".join(f"{self.namer(b)}[0]" for b in s.results)
        vals = ", ".join(self.expr(v) for v in s.values)
        tags = ", ".join(t.value for t in s.threads)
        op = "cross_thread_scan" if s.scan else "cross_thread"
        out.append(INDENT * depth + f"{res} = {op}_{s.combiner.name}({vals}; over {tags})")

    def _async_copy(self, s, depth, out):
        e = self.expr
        text = f"async_copy({self.namer(s.buffer)}[{e._indices(s.indices)}], {e(s.value)}"
        if s.predicate is not None:
            text += f", when={e(s.predicate)}"
        out.append(INDENT * depth + text + ")")

    def _commit(self, s, depth, out):
        out.append(INDENT * depth + "commit_group()")

    def _wgmma_commit(self, s, depth, out):
        out.append(INDENT * depth + "wgmma.commit_group()")

    def _wgmma_wait(self, s, depth, out):
        out.append(INDENT * depth + f"wgmma.wait_group({s.pending})")

    def _wait(self, s, depth, out):
        out.append(INDENT * depth + f"wait_group({s.pending})")

    def _kernel(self, s, depth, out):
        e = self.expr
        grid = ", ".join(e(g) for g in s.launch.grid)
        block = ", ".join(str(b) for b in s.launch.block)
        dyn = "" if s.launch.dynamic_shared is None else f", shared={e(s.launch.dynamic_shared)}"
        out.append(INDENT * depth + f"kernel {s.name}<<<grid=({grid}), block=({block}){dyn}>>>:")
        self.block(s.body, depth + 1, out)

    def _evaluate(self, s, depth, out):
        out.append(INDENT * depth + self.expr(s.value))

    def _arg(self, a) -> str:
        if isinstance(a, n.Buffer):
            return self.namer(a)
        if isinstance(a, n.Expr):
            return self.expr(a)
        if isinstance(a, tuple):
            return "(" + ", ".join(self._arg(x) for x in a) + ")"
        if isinstance(a, enum.Enum):
            return a.value
        return repr(a)

    def _intrinsic(self, s, depth, out):
        out.append(INDENT * depth + f"{s.name}({', '.join(self._arg(a) for a in s.args)})")

    # warp-level matrix operations: fragment tiles print as ``frag[r:r+16, c:c+16]``
    def _tile(self, frag, tile, rows, cols) -> str:
        e = self.expr
        r, c = tile
        return (f"{self.namer(frag)}[{e(r)}:{e.end(r, n.const(rows, r.dtype))}, "
                f"{e(c)}:{e.end(c, n.const(cols, c.dtype))}]")

    def _valid(self, extents, rows, cols) -> str:
        full = all(isinstance(x, n.Const) and x.value == t for x, t in zip(extents, (rows, cols)))
        return "" if full else f", valid=({self.expr(extents[0])}, {self.expr(extents[1])})"

    def _wmma_fill(self, s, depth, out):
        m, nn, _ = s.shape
        out.append(INDENT * depth + f"wmma.fill({self._tile(s.frag, s.tile, m, nn)}, {self.expr(s.value)})")

    def _wmma_load(self, s, depth, out):
        m, nn, k = s.shape
        rows, cols = {n.Scope.WMMA_MATRIX_A: (m, k), n.Scope.WMMA_MATRIX_B: (k, nn)}.get(s.frag.scope, (m, nn))
        what = {n.Scope.WMMA_MATRIX_A: "load_a", n.Scope.WMMA_MATRIX_B: "load_b"}.get(s.frag.scope, "load_c")
        src = f"{self.namer(s.src)}[{self.expr._indices(s.origin)}]"
        out.append(INDENT * depth + f"wmma.{what}({self._tile(s.frag, s.tile, rows, cols)}, {src}, "
                   f"{s.layout.value}{self._dims(s)}{self._valid(s.extents, rows, cols)})")

    def _wmma_mma(self, s, depth, out):
        m, nn, k = s.shape
        out.append(INDENT * depth + f"wmma.mma({self._tile(s.d, s.d_tile, m, nn)} = "
                   f"{self._tile(s.a, s.a_tile, m, k)} @ {self._tile(s.b, s.b_tile, k, nn)} + "
                   f"{self._tile(s.c, s.c_tile, m, nn)})  # {m}x{nn}x{k}")

    def _wgmma_mma(self, s, depth, out):
        m, nn, k = s.shape

        def mem(buf, origin, layout, rows, cols):
            spans = (rows, cols) if layout is n.WmmaLayout.ROW_MAJOR else (cols, rows)
            ix = [self.expr(e) for e in origin[:-2]]
            ix += [f"{self.expr(e)}:{self.expr.end(e, n.const(w, e.dtype))}" for e, w in zip(origin[-2:], spans)]
            t = "" if layout is n.WmmaLayout.ROW_MAJOR else ".T"
            return f"{self.namer(buf)}[{', '.join(ix)}]{t}"
        out.append(INDENT * depth + f"wgmma.mma({self._tile(s.d, s.d_tile, m, nn)} = "
                   f"{mem(s.a, s.a_origin, s.a_layout, m, k)} @ {mem(s.b, s.b_origin, s.b_layout, k, nn)} + "
                   f"{self._tile(s.c, s.c_tile, m, nn)})  # {m}x{nn}x{k}, a warp's share")

    def _wmma_store(self, s, depth, out):
        m, nn, _ = s.shape
        dst = f"{self.namer(s.dst)}[{self.expr._indices(s.origin)}]"
        frag = self._tile(s.frag, s.tile, m, nn)
        if s.is_converting:
            frag = f"{s.dst.dtype.name}({frag})"
        out.append(INDENT * depth + f"wmma.store({dst}, {frag}, "
                   f"{s.layout.value}{self._dims(s)}{self._valid(s.extents, m, nn)})")

    @staticmethod
    def _dims(s) -> str:
        """The memory dimensions of a tile not on the last two (``WmmaLoad.dims``)."""
        return "" if tuple(s.dims) == (-2, -1) else f", dims={tuple(s.dims)}"


def format_expr(e, namer: Namer | None = None) -> str:
    """One expression as Python-like text."""
    p = ExprPrinter(namer)
    p.namer.reserve(named_objects(e))
    return p(e)


def format_stmt(s, namer: Namer | None = None, depth: int = 0) -> str:
    """A statement as indented lines (no trailing newline)."""
    out: list = []
    p = StmtPrinter(namer)
    p.namer.reserve(named_objects(s))
    p.lines(s, depth, out)
    return "\n".join(out)


def format_func(f: n.LoweredFunc) -> str:
    """A lowered function: a ``def`` header with its buffers, then the body.

    Scalars that are not shape or stride expressions of a buffer are listed
    after the buffers as ``name: dtype``.
    """
    p = StmtPrinter()
    namer = p.namer
    namer.reserve(list(f.buffers) + list(f.scalars) + named_objects(f.body))
    shape_vars = set()
    from .visitor import free_vars
    for b in f.buffers:
        for x in tuple(b.shape) + tuple(b.strides or ()):
            shape_vars |= free_vars(x)
    params = [f"{namer(b)}: {p.buffer_type(b)}" for b in f.buffers]
    params += [f"{namer(v)}: {v.dtype.name}" for v in f.scalars if v not in shape_vars]
    out = [f"def {f.name}({', '.join(params)}):"]
    p.block(f.body, 1, out)
    return "\n".join(out)


def format_graph(graph) -> str:
    """A ``kdsl.graph.Graph``: a header with its parameters, then one line per stage.

    ``B[i] = sum(A[i, k], axis=[k in 0..m])``; outputs are listed last.
    """
    e = ExprPrinter(axis_ranges=True)
    namer = e.namer
    objs = list(graph.params)
    for prm in graph.params:
        for x in getattr(prm, "shape", ()):
            objs.extend(named_objects(x))
    for s in graph.stages:
        objs.append(s.output)
        objs.extend(ax.var for ax in s.all_axes)
        objs.extend(named_objects(s.body))
    namer.reserve(objs)
    params = []
    for prm in graph.params:
        if isinstance(prm, n.Var):
            params.append(f"{namer(prm)}: {prm.dtype.name}")
        else:
            params.append(f"{namer(prm)}: {prm.dtype.name}[{', '.join(e(x) for x in prm.shape)}]")
    out = [f"graph {graph.name}({', '.join(params)}):"]
    for s in graph.stages:
        axes = ", ".join(namer(ax.var) for ax in s.axes)
        line = f"{namer(s.output)}[{axes}] = {e(s.body)}"
        if s.origin != "compute":
            line += f"  # {s.origin}"
        out.append(INDENT + line)
    out.append(INDENT + "return " + ", ".join(namer(t) for t in graph.outputs))
    return "\n".join(out)
