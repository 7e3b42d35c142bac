"""``trace(fn, specs)``: run a kernel function once on traced arrays -> ``graph.Graph``.

Each array argument becomes an input Tensor whose symbolic sizes are Vars
(``A_0``, ``A_1``... or the name given in the spec); scalar arguments become
scalar Vars (weakly typed), constants are passed as Python values.  Returned
values that are not already stage outputs are materialised into a copy stage
named after their last op.
"""
from __future__ import annotations

import inspect
import linecache

import numpy as np

from .. import dtypes as dt
from ..errors import ArgumentError, KdslUserError, KernelError, SourceLoc, for_user
from ..graph import Graph, Input, Tensor, live_stages
from ..ir import nodes as n
from . import context
from .access import check_accesses
from .array import Array, from_tensor, scalar
from .ops import materialize
from .spec import ScalarSpec, TensorSpec


def _fn_loc(fn) -> SourceLoc | None:
    code = getattr(fn, "__code__", None)
    if code is None:    # a callable object: its __call__
        code = getattr(getattr(fn, "__call__", None), "__code__", None)
    if code is None:
        return None
    return SourceLoc(code.co_filename, code.co_firstlineno,
                     linecache.getline(code.co_filename, code.co_firstlineno).strip())


def _param_names(fn, count: int) -> tuple[list, int]:
    """The names of the parameters ``count`` specs stand for, and how many of them are
    positional (the rest are keyword-only parameters, passed by name)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return [f"arg{j}" for j in range(count)], count
    names, kwonly = [], []
    for p in params:
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
        elif p.kind is p.VAR_POSITIONAL:
            names += [f"{p.name}{j}" for j in range(count - len(names))]
            break
        elif p.kind is p.KEYWORD_ONLY:
            kwonly.append(p)
    required = sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                   and p.default is p.empty)
    if count > len(names) and kwonly and count <= len(names) + len(kwonly):
        return names + [p.name for p in kwonly[:count - len(names)]], len(names)
    if count < required or count > len(names):
        raise ArgumentError(f"{getattr(fn, '__name__', 'kernel')} takes {len(names)} argument(s) "
                            f"but {count} were given", loc=_fn_loc(fn),
                            hint="pass one array or scalar per parameter")
    return names[:count], count


def _input(ctx, index: int, name: str, spec: TensorSpec, named: dict):
    dims = []
    for j, s in enumerate(spec.shape):
        if isinstance(s, int):
            dims.append(n.const(s, dt.index))
            continue
        if isinstance(s, str):
            v = named.get(s)
            if v is None:
                v = named[s] = n.var(s)
        else:
            v = n.var(f"{name}_{j}")
        ctx.dim_desc.setdefault(v, f"{name}.shape[{j}]")
        dims.append(v)
    return Tensor(name, tuple(dims), spec.dtype, Input(index, spec.contiguous))


def trace(fn, specs, *, name=None, constants=()) -> Graph:
    """Trace ``fn`` on ``specs`` (one TensorSpec/ScalarSpec/constant per parameter) into a Graph."""
    try:
        return _trace(fn, list(specs), name, set(constants))
    except KdslUserError as e:
        __tracebackhide__ = True  # noqa: F841  (pytest/IPython hide this frame)
        raise for_user(e) from None


def _trace(fn, specs, name, constants) -> Graph:
    names, npos = _param_names(fn, len(specs))
    ctx = context.TraceContext(name or getattr(fn, "__name__", None) or type(fn).__name__)
    params, args, named = [], [], {}
    for j, (pname, spec) in enumerate(zip(names, specs)):
        if pname in constants:
            if isinstance(spec, TensorSpec):
                raise ArgumentError(f"argument {pname!r} is listed in constants= but is an array",
                                    loc=_fn_loc(fn), hint="constants are Python values (ints, "
                                    "floats, tuples...); pass arrays as ordinary arguments")
            if isinstance(spec, ScalarSpec):
                if spec.value is None:
                    raise ArgumentError(f"constant argument {pname!r} has no value", loc=_fn_loc(fn),
                                        hint="give ScalarSpec(dtype, value=...) for constants")
                spec = spec.value
            args.append(spec)
        elif isinstance(spec, TensorSpec):
            t = _input(ctx, j, pname, spec, named)
            params.append(t)
            args.append(from_tensor(t))
        elif isinstance(spec, ScalarSpec):
            if spec.value is not None:
                args.append(spec.value)
                continue
            weak = getattr(spec, "weak", True)
            if weak and spec.dtype not in (dt.int64, dt.float64, dt.bool_):
                raise ArgumentError(f"scalar argument {pname!r} has dtype {spec.dtype.name}, but "
                                    "Python scalars are int64, float64 or bool",
                                    loc=_fn_loc(fn), hint="give ScalarSpec(dtype, weak=False) for "
                                    "a numpy scalar of another dtype")
            v = n.Var(spec.dtype, pname)
            params.append(v)
            args.append(scalar(v, weak=weak, op=pname))
        elif isinstance(spec, (bool, int, float, str, tuple, np.generic)) or spec is None:
            args.append(spec)   # a compile-time constant given directly
        else:
            raise ArgumentError(f"argument {pname!r}: cannot trace a {type(spec).__name__}",
                                loc=_fn_loc(fn), hint="pass TensorSpec, ScalarSpec or a constant")
    with context.tracing(ctx):
        result = fn(*args[:npos], **dict(zip(names[npos:], args[npos:])))
        outs = list(result) if isinstance(result, (tuple, list)) else [result]
        if not outs:
            raise KernelError("the kernel returned an empty tuple", loc=_fn_loc(fn),
                              hint="return a traced array or a tuple of them")
        tensors = []
        for o in outs:
            if not isinstance(o, Array):
                raise KernelError(f"a kernel must return traced arrays, not {type(o).__name__}",
                                  loc=_fn_loc(fn), hint="return an array computed from the "
                                  "arguments (or a tuple of them)")
            if o.tensor is None or o.tensor.stage is None or o.tensor in tensors:
                o = materialize(o, "copy" if o.tensor is not None else o.op)
            tensors.append(o.tensor)
        # softmax-weighted sums stream with a running max (kdsl.frontend.online_softmax)
        from .online_softmax import fuse
        tensors = fuse(ctx, tensors)
    stages = live_stages(ctx.stages, tensors)
    ctx.finalize(stages)
    graph = Graph(ctx.name, tuple(params), stages, tuple(tensors), list(ctx.constraints),
                  loc=_fn_loc(fn))
    check_accesses(graph, ctx)   # every read proven in range, checked per call, or clamped
    return graph
