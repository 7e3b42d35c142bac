"""The kernel builder: random values of a kernel as (oracle node, shape, dtype, source text).

A ``Builder`` owns one kernel being generated: its parameters, the lines of its
body, module-level reducers, the size symbols and what each requires (a
minimum, so that e.g. ``x[1]`` and ``n - 2`` stay valid), and a record of the
features used (for reports).  ``families.py`` drives it.  Every operation
builds the numpy-side node and the kdsl text together, so the reproducer is
exactly what runs.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from . import fdtypes as fd
from .fdtypes import PromotionError, resolve
from .oracle import COMPARE, PY_INT_BIN, PY_INT_UN
from .model import ONE, Dim, Node, ReducerSpec, sym


def _py_int_spec(spec):
    """The spec of a weak bool as the weak int that Python's arithmetic makes of it."""
    d, weak, pyval = spec
    if weak != "b":
        return spec
    return ("int64", "i", None if pyval is None else int(pyval))


@dataclass(eq=False)
class V:
    """A value while generating: its node, dims (Dim per axis), dtype, weak kind and text."""

    node: Node
    dims: tuple
    dtype: str
    weak: str | None
    code: str
    atom: bool = True        # the text needs no parentheses as an operand
    pyval: object = None     # the Python scalar of a literal
    py: bool = False         # a plain Python value while tracing (literal, constant scalar)

    @property
    def ndim(self):
        return len(self.dims)

    @property
    def spec(self):
        return (self.dtype, self.weak, self.pyval)


@dataclass
class Param:
    """A kernel parameter: an array (dims, dtype) or a scalar (kind 'int'/'float'/'bool')."""

    name: str
    kind: str
    dims: tuple = ()
    dtype: str = ""
    scalar_kind: str = ""
    const: bool = False
    static: bool = False        # array with only constant dims (e.g. a 3x3 filter)


def broadcast(*dim_lists):
    """numpy broadcasting of generator shapes (None if the Dims may differ)."""
    nd = max((len(d) for d in dim_lists), default=0)
    out = []
    for j in range(nd):
        cur = None
        for dl in dim_lists:
            p = len(dl) - nd + j
            if p < 0:
                continue
            d = dl[p]
            if d.is_one:
                continue
            if cur is None:
                cur = d
            elif cur != d:
                return None
        out.append(cur if cur is not None else ONE)
    return tuple(out)


_BIN_SYM = {"add": "+", "sub": "-", "mul": "*", "div": "/", "fdiv": "//", "mod": "%", "pow": "**",
            "and": "&", "or": "|", "xor": "^", "eq": "==", "ne": "!=", "lt": "<", "le": "<=",
            "gt": ">", "ge": ">="}
_BIN_FUNC = {"max": ("kd.maximum", "np.maximum"), "min": ("kd.minimum", "np.minimum"),
             "land": ("np.logical_and",), "lor": ("np.logical_or",), "lxor": ("np.logical_xor",)}
_UN_FUNC = {"exp": ("kd.exp", "np.exp"), "log": ("kd.log", "np.log"), "sqrt": ("kd.sqrt", "np.sqrt"),
            "rsqrt": ("kd.rsqrt",), "sin": ("kd.sin", "np.sin"), "cos": ("kd.cos", "np.cos"),
            "tanh": ("kd.tanh", "np.tanh"), "erf": ("kd.erf",), "sigmoid": ("kd.sigmoid",),
            "floor": ("np.floor",), "ceil": ("np.ceil",), "abs": ("abs", "np.abs", "np.absolute"),
            "isnan": ("np.isnan",), "lnot": ("np.logical_not",)}


class Builder:
    """One kernel under construction."""

    def __init__(self, rng: np.random.Generator, max_rank: int = 3):
        self.rng = rng
        self.params: list[Param] = []
        self.lines: list[str] = []
        self.reducers: dict[str, ReducerSpec] = {}
        self.sym_min: dict[str, int] = {}
        self.sym_src: dict[str, tuple] = {}       # name -> (param name, dim index)
        self.used_syms: set = set()
        self.features: set = set()
        self.ntemp = 0
        self.max_rank = max_rank
        self.expect_error = False                 # a deliberately invalid kernel
        self.in_body = False                      # inside a kd.compute lambda: no temps
        self.specialize = False                   # needs static shapes (sort's axis)

    # ------------------------------------------------------------ randomness
    def p(self, prob: float) -> bool:
        return bool(self.rng.random() < prob)

    def choice(self, seq, weights=None):
        seq = list(seq)
        if weights is None:
            return seq[int(self.rng.integers(len(seq)))]
        w = np.asarray(weights, np.float64)
        return seq[int(self.rng.choice(len(seq), p=w / w.sum()))]

    # ------------------------------------------------------------ sizes and parameters
    def new_sym(self, minimum: int = 0) -> Dim:
        name = f"n{len(self.sym_min)}"
        self.sym_min[name] = minimum
        return sym(name)

    def require(self, d: Dim, minimum: int):
        """Make ``d`` (a symbol, or a size derived from one) at least ``minimum``."""
        if d.kind == "sym":
            self.sym_min[d.name] = max(self.sym_min[d.name], minimum)
        elif d.kind == "const":
            pass
        elif d.kind == "sub":
            self.require(d.base, minimum + d.value)
        elif d.kind == "slice":
            start, stop, step = d.sl
            need = minimum * abs(step or 1) + (start or 0 if (start or 0) >= 0 else 0) + (
                -stop if isinstance(stop, int) and stop < 0 else 0)
            self.require(d.base, need)
        elif d.kind in ("half", "dbl"):
            self.require(d.base, minimum if d.kind == "dbl" else 2 * minimum)

    def size_code(self, d: Dim) -> str:
        """A size as text in the kernel (binding the symbols it uses)."""
        self.used_syms |= d.syms()
        return d.code()

    def array_param(self, dims, dtype) -> V:
        name = f"a{sum(1 for p in self.params if p.kind == 'array')}"
        prm = Param(name, "array", tuple(dims), dtype, static=all(d.kind == "const" for d in dims))
        self.params.append(prm)
        for j, d in enumerate(dims):
            if d.kind == "sym" and d.name not in self.sym_src:
                self.sym_src[d.name] = (name, j)
        k = len(self.params) - 1
        return V(Node("input", (), {"k": k}), tuple(dims), dtype, None, name)

    def scalar_param(self, kind: str, const: bool = False) -> V:
        name = f"s{sum(1 for p in self.params if p.kind == 'scalar')}"
        self.params.append(Param(name, "scalar", scalar_kind=kind, const=const))
        k = len(self.params) - 1
        d = {"int": "int64", "float": "float64", "bool": "bool"}[kind]
        self.features.add("const_scalar" if const else "scalar_arg")
        return V(Node("sarg", (), {"k": k, "const": const}), (), d, kind[0], name, py=const)

    def universe(self, rank: int, minimum: int = 0) -> tuple:
        return tuple(self.new_sym(minimum) for _ in range(rank))

    def sub_dims(self, dims, p_one=0.2, p_drop=0.3) -> tuple:
        """Dims broadcast-compatible with ``dims``: a suffix, some replaced by 1."""
        k = len(dims)
        if k and self.p(p_drop):
            k = int(self.rng.integers(0, len(dims) + 1))
        out = list(dims[len(dims) - k:])
        for j in range(len(out)):
            if self.p(p_one):
                out[j] = ONE
        return tuple(out)

    def pick_dtype(self, kinds="any") -> str:
        table = {"any": (fd.ARRAY_DTYPES, (5, 3, 2, 4, 3, 3, 4, 10, 5)),
                 "float": (("float16", "float32", "float64"), (2, 5, 3)),
                 "num": (fd.INTS + ("float16", "float32", "float64"), (3, 2, 3, 2, 3, 2, 6, 4)),
                 "int": (fd.INTS, (3, 2, 3, 2, 3))}
        names, w = table[kinds]
        return self.choice(names, w)

    # ------------------------------------------------------------ text helpers
    def temp(self, v: V, prefix="t") -> V:
        """Bind ``v`` to a new local name (one line of the kernel body)."""
        name = f"{prefix}{self.ntemp}"
        self.ntemp += 1
        self.lines.append(f"{name} = {v.code}")
        return V(v.node, v.dims, v.dtype, v.weak, name, True, v.pyval, v.py)

    def maybe_temp(self, v: V) -> V:
        if self.in_body:
            return v
        if len(v.code) > 70 or (not v.atom and self.p(0.15)):
            return self.temp(v)
        return v

    @staticmethod
    def par(v: V) -> str:
        return v.code if v.atom else f"({v.code})"

    # ------------------------------------------------------------ leaves
    def lit(self, kind=None, value=None) -> V:
        r = self.rng
        if value is None:
            kind = kind or self.choice(["int", "float", "bool"], [4, 5, 1])
            if kind == "int":
                value = int(self.choice([0, 1, 2, 3, -1, -2, 5, 7, 100]))
            elif kind == "float":
                value = float(self.choice([0.5, 1.5, -2.0, 0.25, 3.0, 0.1, -0.75, 2.5, 1e-3, 10.0]))
            else:
                value = bool(r.random() < 0.5)
        k = "b" if isinstance(value, bool) else "i" if isinstance(value, int) else "f"
        d = {"b": "bool", "i": "int64", "f": "float64"}[k]
        code = repr(value)
        return V(Node("lit", (), {"value": value}), (), d, k, code, value >= 0 if k != "b" else True,
                 value, py=True)

    def np_scalar(self) -> V:
        """A numpy scalar literal (strong, numpy's rules)."""
        d = self.choice(["float32", "float64", "int32", "int8", "float16"])
        value = float(self.choice([0.5, 2.0, -1.5, 3.0])) if fd.is_float(d) else int(self.choice([1, 2, -3]))
        self.features.add("np_scalar")
        return V(Node("lit", (), {"value": value, "dtype": d}), (), d, None, f"np.{d}({value!r})",
                 py=True)

    # ------------------------------------------------------------ elementwise ops
    def binary(self, op: str, a: V, b: V, style=None) -> V | None:
        dims = broadcast(a.dims, b.dims)
        if dims is None or (a.py and b.py):    # Python values: Python's rules, not numpy's
            return None
        operator = op in _BIN_SYM and (style is None or style == "op")
        sa, sb = a.spec, b.spec
        if operator and a.weak and b.weak and op in PY_INT_BIN:    # Python: True + True == 2
            sa, sb = _py_int_spec(sa), _py_int_spec(sb)
        try:
            R = resolve(_np_name(op), [sa, sb])
        except PromotionError:
            R = None
        if R is None:
            self.expect_error = True
            self.features.add("invalid_dtype_op")
        node = Node("bin", (a.node, b.node), {"op": op})
        for x, y in ((a, b), (b, a)):
            if type(x.pyval) is int and fd.is_int(y.dtype) and y.weak is None and not (
                    np.iinfo(y.dtype).min <= x.pyval <= np.iinfo(y.dtype).max):
                self.features.add("cmp_out_of_range" if op in ("eq", "ne", "lt", "le", "gt", "ge")
                                  else "literal_out_of_range")
        if operator:
            code = f"{self.par(a)} {_BIN_SYM[op]} {self.par(b)}"
            atom = False
        else:
            fn = self.choice(_BIN_FUNC.get(op, (f"np.{_np_name(op)}",)))
            code = f"{fn}({a.code}, {b.code})"
            atom = True
            node.attrs["weak_result"] = False   # a numpy function returns a strong value
            if a.weak and b.weak:
                self.features.add("fn_of_weak")
        dtype = R or a.dtype
        weak = ("b" if dtype == "bool" else "f" if fd.is_float(dtype) else "i") \
            if (a.weak and b.weak and atom is False) else None
        if op in ("eq", "ne", "lt", "le", "gt", "ge", "land", "lor", "lxor"):
            # a comparison of Python scalars is a Python bool (weak)
            dtype, weak = "bool", ("b" if weak and op in COMPARE else None)
        return V(node, dims, dtype, weak, code, atom)

    def unary(self, op: str, x: V) -> V:
        if x.py:
            return x
        if op == "neg":
            code, atom = f"-{self.par(x)}", False
            node = Node("un", (x.node,), {"op": "neg", "weak_result": True})
        elif op == "invert":
            code, atom = f"~{self.par(x)}", False
            node = Node("un", (x.node,), {"op": "invert", "weak_result": True})
        else:
            fn = self.choice(_UN_FUNC[op])
            code, atom = f"{fn}({x.code})", True
            node = Node("un", (x.node,), {"op": op, "weak_result": fn == "abs"})
            if x.weak and fn != "abs":
                self.features.add("fn_of_weak")
        spec = x.spec
        if node.attrs.get("weak_result") and op in PY_INT_UN:    # Python: -True == -1
            spec = _py_int_spec(spec)
        try:
            R = "bool" if op in ("isnan", "lnot") else resolve(
                {"neg": "negative", "invert": "invert", "abs": "absolute", "rsqrt": "sqrt",
                 "erf": "exp", "sigmoid": "exp"}.get(op, op), [spec])
        except PromotionError:
            R = x.dtype
            self.expect_error = True
            self.features.add("invalid_dtype_op")
        weak = x.weak if node.attrs.get("weak_result") else None
        return V(node, x.dims, R, weak, code, atom)

    def cast(self, x: V, d: str) -> V:
        if x.py:       # a Python or numpy value: numpy casts it itself, eagerly
            return x
        style = self.choice(["method", "method_str", "kd"] if d != "bfloat16" else ["method"])
        if style == "method_str" and d != "bfloat16":
            code = f"{self.par(x)}.astype({d!r})"
        elif style == "kd" and d != "bfloat16":
            code = f"{self.par(x)}.astype(kd.{d if d != 'bool' else 'bool_'})"
        else:
            code = f"{self.par(x)}.astype({fd.code(d)})"
        if d == "bfloat16":
            self.features.add("bfloat16")
        return V(Node("cast", (x.node,), {"dtype": d}), x.dims, d, None, code)

    def where(self, c: V, a: V, b: V) -> V | None:
        dims = broadcast(c.dims, a.dims, b.dims)
        if dims is None or (c.py and a.py and b.py):
            return None
        try:
            R = resolve("where", [("bool", None, None), a.spec, b.spec])
        except PromotionError:
            return None
        fn = self.choice(["kd.where", "np.where"])
        if a.weak and b.weak:
            self.features.add("fn_of_weak")
        return V(Node("where", (c.node, a.node, b.node)), dims, R, None,
                 f"{fn}({c.code}, {a.code}, {b.code})")

    def clip(self, x: V) -> V | None:
        lo = self.choice([None, 0, -1, 0.5, -2.0])
        hi = self.choice([None, 3, 2.5, 1]) if lo is not None else self.choice([3, 2.5])
        try:
            R = fd.resolve_clip(x.spec, lo, hi)
        except PromotionError:
            return None
        style = self.choice(["kd", "np", "method"] if not x.weak else ["kd", "np"])
        if x.weak:
            self.features.add("fn_of_weak")
        args = f"{lo!r}, {hi!r}"
        code = {"kd": f"kd.clip({x.code}, {args})", "np": f"np.clip({x.code}, {args})",
                "method": f"{self.par(x)}.clip({args})"}[style]
        self.features.add("clip")
        return V(Node("clip", (x.node,), {"lo": lo, "hi": hi}), x.dims, R, None, code)

    # ------------------------------------------------------------ views
    def view(self, x: V) -> V | None:
        """A basic-indexing view or transpose of an array value."""
        if x.ndim == 0:
            return None
        r = self.rng
        kind = self.choice(["T", "transpose", "slice", "int", "newaxis"], [3, 2, 5, 2, 2])
        if kind in ("T", "transpose") and x.ndim >= 2:
            perm = tuple(int(p) for p in r.permutation(x.ndim))
            if kind == "T":
                perm = tuple(reversed(range(x.ndim)))
                code = f"{self.par(x)}.T"
            else:
                code = f"{self.par(x)}.transpose({', '.join(map(str, perm))})"
            self.features.add("transpose")
            return V(Node("view", (x.node,), {"kind": "transpose", "params": perm}),
                     tuple(x.dims[p] for p in perm), x.dtype, None, code)
        if kind == "newaxis" and x.ndim < self.max_rank:
            pos = int(r.integers(0, x.ndim + 1))
            key = [slice(None)] * x.ndim
            key.insert(pos, None)
            dims = list(x.dims)
            dims.insert(pos, ONE)
            return self._index(x, tuple(key), tuple(dims))
        j = int(r.integers(x.ndim))
        d = x.dims[j]
        if kind == "int" and not d.is_one:
            v = int(self.choice([0, 1, -1, 2]))
            self.require(d, (v + 1) if v >= 0 else -v)
            key = [slice(None)] * x.ndim
            key[j] = v
            self.features.add("int_index")
            return self._index(x, tuple(key), x.dims[:j] + x.dims[j + 1:])
        sl = self.choice([(None, None, -1), (1, None, None), (None, None, 2), (1, -1, None),
                          (None, -1, 2), (None, None, -2), (2, None, None)])
        if d.is_one or d.kind == "const":
            return None
        key = [slice(None)] * x.ndim
        key[j] = slice(*sl)
        nd = Dim("slice", base=d, sl=sl)
        self.features.add("neg_step" if (sl[2] or 1) < 0 else "slice")
        return self._index(x, tuple(key), x.dims[:j] + (nd,) + x.dims[j + 1:])

    def view_slice(self, x: V, o: int, c: int) -> V:
        """``x[o:o - c]`` of a 1-D value: the window of a ``c + 1``-point stencil at offset o."""
        stop = o - c if o < c else None
        return self._index(x, (slice(o, stop),), (Dim("sub", base=x.dims[0], value=c),))

    def _index(self, x: V, key: tuple, dims: tuple) -> V:
        parts = []
        for k in key:
            if k is None:
                parts.append("None")
            elif isinstance(k, int):
                parts.append(str(k))
            else:
                s = "" if k.start is None else str(k.start)
                s += ":" + ("" if k.stop is None else str(k.stop))
                if k.step is not None:
                    s += f":{k.step}"
                parts.append(s)
        while parts and parts[-1] == ":":
            parts.pop()
        code = f"{self.par(x)}[{', '.join(parts) if parts else '...'}]"
        return V(Node("view", (x.node,), {"kind": "index", "params": key}), dims, x.dtype, None,
                 code)

    # ------------------------------------------------------------ reducers
    def reducer(self, dtype: str) -> ReducerSpec:
        """A kd.reducer suited to values of ``dtype`` (with its identity for that dtype)."""
        rid = f"red{len(self.reducers)}"
        ints = not fd.is_float(dtype)
        whats = ["add", "mul", "max", "min"] + (["and", "or", "xor"] if ints else [])
        what = self.choice(whats)
        forms = {"add": ["lambda x, y: x + y", "lambda x, y: y + x"],
                 "mul": ["lambda x, y: x * y"],
                 "max": ["lambda x, y: kd.maximum(x, y)", "lambda x, y: np.maximum(x, y)"],
                 "min": ["lambda x, y: kd.minimum(x, y)", "lambda x, y: kd.where(x < y, x, y)"],
                 "and": ["lambda x, y: x & y"], "or": ["lambda x, y: x | y"],
                 "xor": ["lambda x, y: x ^ y"]}
        code = self.choice(forms[what])
        if "where" in code and fd.is_float(dtype):
            code = forms[what][0]
        ident = _identity(what, dtype)
        name = self.choice([None, rid, "mine", "sum", "max", "prod", "min"], [3, 4, 1, 1, 1, 1, 1])
        if name in ("sum", "max", "prod", "min"):
            self.features.add("reducer_builtin_name")
        spec = ReducerSpec(rid, what, code, ident, name)
        self.reducers[rid] = spec
        self.features.add("custom_reducer")
        return spec

    # ------------------------------------------------------------ source
    def source(self, outputs: list, fname: str = "kern", decorators=()) -> str:
        """The kernel module (without schedule functions): reducers, then the function."""
        out = ["import numpy as np", "import kdsl as kd", ""]
        out += [r.source() for r in self.reducers.values()]
        if self.reducers:
            out.append("")
        out.append("")
        args = ", ".join(p.name for p in self.params)
        out += [d for d in decorators if d]
        out.append(f"def {fname}({args}):")
        body = []
        ret = ", ".join(o.code for o in outputs)
        lines = _live_lines(self.lines, ret)
        for name in sorted(self.used_syms, key=lambda s: int(s[1:])):
            if any(re.search(rf"\b{name}\b", ln) for ln in lines + [ret]):
                pname, j = self.sym_src[name]
                body.append(f"{name} = {pname}.shape[{j}]")
        body += lines
        body.append(f"return {ret}")
        out += ["    " + ln for ln in body]
        return "\n".join(out) + "\n"


def _live_lines(lines: list, ret: str) -> list:
    """The body lines the return value needs (dead temporaries would run in numpy, not kdsl)."""
    need = set(re.findall(r"[A-Za-z_]\w*", ret))
    keep = []
    for ln in reversed(lines):
        targets = {t.strip() for t in ln.split("=", 1)[0].split(",")}    # (v, i = ...: a tuple)
        if targets & need:
            keep.append(ln)
            need |= set(re.findall(r"[A-Za-z_]\w*", ln.split("=", 1)[1]))
    return list(reversed(keep))


def _np_name(op: str) -> str:
    return {"add": "add", "sub": "subtract", "mul": "multiply", "div": "true_divide",
            "fdiv": "floor_divide", "mod": "remainder", "pow": "power", "max": "maximum",
            "min": "minimum", "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor",
            "eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal", "gt": "greater",
            "ge": "greater_equal", "land": "logical_and", "lor": "logical_or",
            "lxor": "logical_xor"}[op]


def _identity(what: str, d: str):
    if d == "bool":
        return {"add": False, "or": False, "xor": False, "mul": True, "and": True,
                "max": False, "min": True}[what]
    if what in ("add", "or", "xor"):
        return 0 if not fd.is_float(d) else 0.0
    if what == "mul":
        return 1 if not fd.is_float(d) else 1.0
    if what == "and":
        return 255 if d == "uint8" else -1
    if fd.is_float(d):
        return float("-inf") if what == "max" else float("inf")
    info = np.iinfo(d)
    return int(info.min) if what == "max" else int(info.max)
