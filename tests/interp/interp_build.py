"""Small builders for hand-written loop IR in the interpreter tests."""
from __future__ import annotations

from kdsl import dtypes as dt
from kdsl.ir import make as mk
from kdsl.ir import nodes as n

F = n.ForKind


def c(value, dtype=None):
    return n.const(value, dtype)


def load(buf, *idx):
    return n.Load(buf.dtype, buf, tuple(mk.as_expr(i) for i in idx))


def store(buf, idx, value):
    return n.Store(buf, tuple(mk.as_expr(i) for i in idx), value)


def loop(var, extent, body, kind=F.SERIAL, thread=None, lo=0):
    return n.For(var, mk.as_expr(lo), mk.as_expr(extent), kind, body, thread)


def bound(var, extent, tag, body):
    return n.For(var, mk.as_expr(0), mk.as_expr(extent), F.BOUND, body, n.ThreadTag(tag))


def seq(*stmts):
    return n.Seq(tuple(stmts))


def binop(op, a, b):
    return n.Binary(a.dtype, op, a, b)


def kernel(name, ins, outs, body_fn, scalars=()):
    """A LoweredFunc whose param shapes are symbolic Vars bound from the arrays.

    ``ins``/``outs``: ``(name, dtype, ndim)``; ``scalars``: ``(name, dtype)`` bound to the
    graph scalars in order.  ``body_fn(*buffers, *scalar_vars)`` returns the body.
    """
    buffers, svars, binds = [], [], []
    for k, (bname, dtype, ndim) in enumerate(list(ins) + list(outs)):
        shape = []
        for d in range(ndim):
            v = n.var(f"{bname}_{d}")
            shape.append(v)
            svars.append(v)
            binds.append(n.Binding(n.BindingKind.SHAPE, k, d))
        buffers.append(n.Buffer(bname, dt.as_dtype(dtype), tuple(shape), param=True))
    user = []
    for i, (sname, dtype) in enumerate(scalars):
        v = n.var(sname, dt.as_dtype(dtype))
        user.append(v)
        svars.append(v)
        binds.append(n.Binding(n.BindingKind.SCALAR, i))
    body = body_fn(*buffers, *user)
    return n.LoweredFunc(name, tuple(buffers[:len(ins)]), tuple(buffers[len(ins):]),
                         tuple(svars), body, bindings=tuple(binds))


def elementwise(name, dtype_in, dtype_out, fn, nin=1):
    """``out[i] = fn(in0[i], in1[i], ...)`` over 1-d arrays of the first input's length."""
    def body(*bufs):
        i = n.var("i")
        ins, out = bufs[:nin], bufs[nin]
        return loop(i, ins[0].shape[0], store(out, (i,), fn(*[load(b, i) for b in ins])))
    return kernel(name, [(f"x{k}", dtype_in, 1) for k in range(nin)], [("out", dtype_out, 1)], body)
