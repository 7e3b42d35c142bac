"""What a generated kernel is, as data: sizes (``Dim``), index expressions (``Idx``) and value nodes.

The generator builds these trees and renders them as kdsl source; the oracle
(``oracle.py``) evaluates the same trees with numpy.  Neither side uses kdsl's
own interpretation of the kernel, so the comparison is independent.
"""
from __future__ import annotations

from dataclasses import dataclass, field


# ------------------------------------------------------------------ sizes
@dataclass(frozen=True)
class Dim:
    """A size: a named symbol (an input's dimension), a constant, or a derived size.

    kind: 'sym' (name), 'const' (value), 'slice' (base, sl=(start, stop, step)),
    'sub' (base - value), 'half' ((base + 1) // 2), 'dbl' (base * 2).
    """

    kind: str
    name: str = ""
    value: int = 0
    base: "Dim | None" = None
    sl: tuple = ()

    def eval(self, b: dict) -> int:
        k = self.kind
        if k == "sym":
            return b[self.name]
        if k == "const":
            return self.value
        v = self.base.eval(b)
        if k == "slice":
            return len(range(*slice(*self.sl).indices(v)))
        if k == "sub":
            return v - self.value
        if k == "half":
            return (v + 1) // 2
        if k == "dbl":
            return 2 * v
        raise ValueError(k)

    def code(self) -> str:
        """The size as an expression of the kernel's size variables (compute shapes)."""
        k = self.kind
        if k == "sym":
            return self.name
        if k == "const":
            return str(self.value)
        if k == "sub":
            return f"{self.base.code()} - {self.value}"
        if k == "half":
            return f"({self.base.code()} + 1) // 2"
        if k == "dbl":
            return f"{self.base.code()} * 2"
        raise ValueError(f"no code for a {k} size")

    def codeable(self) -> bool:
        """Whether ``code()`` can spell this size."""
        return self.kind != "slice" and (self.base is None or self.base.codeable())

    def syms(self) -> set:
        if self.kind == "sym":
            return {self.name}
        return self.base.syms() if self.base is not None else set()

    @property
    def is_one(self) -> bool:
        return self.kind == "const" and self.value == 1


def sym(name: str) -> Dim:
    return Dim("sym", name=name)


def const(v: int) -> Dim:
    return Dim("const", value=v)


ONE = const(1)


# ------------------------------------------------------------------ index expressions
@dataclass(frozen=True)
class Idx:
    """An index expression in an index-style compute: 'var' (axis name), 'const' (value),
    'dim' (a size), 'add'/'sub' (a, b), 'mul'/'fdiv'/'mod' (a, by a constant ``value``)."""

    kind: str
    name: str = ""
    value: int = 0
    a: "Idx | None" = None
    b: "Idx | None" = None
    dim: Dim | None = None

    def code(self) -> str:
        k = self.kind
        if k == "var":
            return self.name
        if k == "const":
            return str(self.value)
        if k == "dim":
            return self.dim.code()
        if k == "add":
            if self.b.kind == "const" and self.b.value < 0:
                return f"{self.a.code()} - {-self.b.value}"
            return f"{self.a.code()} + {self.b.code()}"
        if k == "sub":
            b = self.b.code()
            return f"{self.a.code()} - {('(' + b + ')') if self.b.kind in ('add', 'sub') else b}"
        if k == "mul":
            return f"{self.value} * {_paren(self.a)}"
        if k == "fdiv":
            return f"{_paren(self.a)} // {self.value}"
        if k == "mod":
            return f"{_paren(self.a)} % {self.value}"
        raise ValueError(k)


def _paren(i: Idx) -> str:
    return f"({i.code()})" if i.kind in ("add", "sub") else i.code()


def ivar(name):
    return Idx("var", name=name)


def iconst(v):
    return Idx("const", value=v)


def iadd(a, b):
    if b.kind == "const" and b.value == 0:
        return a
    return Idx("add", a=a, b=b)


def isub(a, b):
    return Idx("sub", a=a, b=b)


# ------------------------------------------------------------------ value nodes
@dataclass(eq=False)
class Node:
    """One value of the kernel.  ``op`` and ``args``/``attrs`` say what it computes:

    input(k) | sarg(k) | lit(value, dtype=None) | axis(name) | size(dim) | un(op, x) |
    bin(op, a, b) | where(c, a, b) | cast(x, dtype) | clip(x, lo, hi) | view(x, kind, params) |
    red(kind, x, axis, keepdims, dtype, reducer) | matmul(a, b, dtype) |
    compute(dims, axes, body) | read(src, idx) | ired(kind, body, raxes, where, dtype, reducer)
    """

    op: str
    args: tuple = ()
    attrs: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"Node({self.op}, {self.attrs})"


@dataclass(frozen=True)
class ReducerSpec:
    """A ``kd.reducer``: what ``combine`` computes ('add', 'mul', 'max', 'min', 'and', 'or',
    'xor'), how it is written, its identity and the name it is given."""

    rid: str
    what: str
    combine_code: str
    identity: object
    name: str | None

    def source(self) -> str:
        name = "" if self.name is None else f", name={self.name!r}"
        ident = self.identity
        text = f"float({str(ident)!r})" if isinstance(ident, float) and ident in (
            float("inf"), float("-inf")) else repr(ident)
        return f"{self.rid} = kd.reducer({self.combine_code}, identity={text}{name})"
