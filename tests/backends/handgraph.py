"""Build small stage graphs by hand (the frontend may not exist yet)."""
from __future__ import annotations

from kdsl import dtypes as dt
from kdsl.graph import Graph, Input, Stage, Tensor
from kdsl.ir import make as mk
from kdsl.ir import nodes as n


class Builder:
    """Collects params and stages; ``dim(name)`` returns one shared shape Var per name."""

    def __init__(self, name="k"):
        self.name, self.vars, self.params, self.stages = name, {}, [], []

    def dim(self, name):
        return self.vars.setdefault(name, n.var(name))

    def _shape(self, s):
        return n.const(s) if isinstance(s, int) else self.dim(s) if isinstance(s, str) else s

    def input(self, name, shape, dtype=dt.float64, contiguous=True):
        t = Tensor(name, tuple(self._shape(s) for s in shape), dt.as_dtype(dtype),
                   Input(len(self.inputs()), contiguous))
        self.params.append(t)
        return t

    def inputs(self):
        return [p for p in self.params if isinstance(p, Tensor)]

    def scalar(self, name, dtype=dt.float64):
        v = n.Var(dt.as_dtype(dtype), name)
        self.params.append(v)
        return v

    @staticmethod
    def axis(name, extent, kind=n.IterKind.SPATIAL):
        return n.IterVar(n.var(name), n.Range(n.const(0), mk.as_expr(extent)), kind)

    def raxis(self, name, extent):
        return self.axis(name, extent, n.IterKind.REDUCE)

    def compute(self, name, axes, body, reduce_axes=()):
        st = Stage(name, tuple(axes), tuple(reduce_axes), body, body.dtype)
        self.stages.append(st)
        return st.output

    def graph(self, *outputs, constraints=()):
        return Graph(self.name, tuple(self.params), list(self.stages), tuple(outputs),
                     list(constraints))


def read(t, *idx):
    return n.TensorRead(t.dtype, t, tuple(mk.as_expr(i.var if isinstance(i, n.IterVar) else i)
                                         for i in idx))


def combiner(name, dtype, op, identity):
    x, y = n.Var(dtype, "x"), n.Var(dtype, "y")
    return n.Combiner(name, (x,), (y,), (n.Binary(dtype, op, x, y),), (n.const(identity, dtype),))


def sum_(src, axes, dtype=None, name="sum"):
    d = dtype or src.dtype
    return n.Reduce(d, combiner(name, d, n.BinOp.ADD, 0), (src,), tuple(axes))


def argmax_combiner(dtype):
    """(index, value) pairs; ties keep the left (earlier) index, like numpy."""
    il, vl, ir_, vr = n.var("il"), n.Var(dtype, "vl"), n.var("ir"), n.Var(dtype, "vr")
    take = n.Compare(dt.bool_, n.CmpOp.GT, vr, vl)
    lo = float("-inf") if dtype.is_float else -(1 << (dtype.bits - 1))
    return n.Combiner("argmax", (il, vl), (ir_, vr),
                      (n.Select(dt.int64, take, ir_, il), n.Select(dtype, take, vr, vl)),
                      (n.const(-1, dt.int64), n.const(lo, dtype)))


def rowsum_graph(dtype=dt.float32, contig=True):
    """B[i] = sum_k A[i, k] over symbolic (n, m) (``contig=False``: A is a strided view)."""
    b = Builder("rowsum")
    A = b.input("A", ("n", "m"), dtype, contiguous=contig)
    i, k = b.axis("i", b.dim("n")), b.raxis("k", b.dim("m"))
    return b.graph(b.compute("B", [i], sum_(read(A, i, k), [k]), [k]))


def matmul_graph(dtype=dt.float32):
    """C[i, j] = sum_r A[i, r] * B[r, j] over symbolic (n, k) x (k, m)."""
    b = Builder("mm")
    A = b.input("A", ("n", "k"), dtype)
    B = b.input("B", ("k", "m"), dtype)
    i, j, r = b.axis("i", b.dim("n")), b.axis("j", b.dim("m")), b.raxis("r", b.dim("k"))
    prod = n.Binary(dt.as_dtype(dtype), n.BinOp.MUL, read(A, i, r), read(B, r, j))
    return b.graph(b.compute("C", [i, j], sum_(prod, [r]), [r]))
