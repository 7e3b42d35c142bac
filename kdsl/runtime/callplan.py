"""One specialisation's call contract, derived once: the ``CallPlan``.

A call binds each symbolic size from the first argument dim (or scalar) carrying it, checks
the other dims and the graph's constraints, computes (or checks ``out=``) the outputs' shapes
and fills the compiled function's scalar slots.  ``make`` derives all of it once per
signature; every launcher emits the plan (``dispatch.build_launcher``, the reference;
``kdsl_cpu.fastcall``; ``kdsl_cuda.runtime.fastlaunch``).  ``key_function`` builds the key a
call is cached under (hot path and miss).
"""
from __future__ import annotations

import functools
from collections import namedtuple
from typing import NamedTuple

import numpy as np

from ..ir import nodes as n
from ..ir.bindings import SCALAR, SHAPE, STRIDE, Slot, scalar_slots  # noqa: F401 (re-exported)
from .arrays import array_info
from .signature import ConstSig, size_classes

_PY_SCALARS = (int, float, bool)


# ----------------------------------------------------------------- the key (hot path)
#: the key part of a numpy array ``a{i}`` (its shape read into ``sh``): its dtype object, which
#: dims have size 1 (its rank when none has) -- the whole shape with ``specialize`` -- and
#: its C-contiguity
_ND = "(a{i}.dtype, tuple([s == 1 for s in sh]) if 1 in sh else len(sh), a{i}.flags.c_contiguous)"
_ND_SPECIALIZED = "(a{i}.dtype, sh, a{i}.flags.c_contiguous)"


@functools.lru_cache(maxsize=None)
def key_function(nargs: int, consts: tuple, specialize: bool):
    """The cache-key builder of a kernel: ``key(args, backend, gen, out, classed, host_array)``
    for a call of exactly ``nargs`` arguments (``consts[i]``: argument ``i`` is a compile-time
    constant): the backend, the registry generation, one part per argument (an array: the
    ``_ND`` form; a scalar: its type; a constant or None: its value), ``out_key(out)`` where
    out= is given, the size classes of the arguments where the backend is ``classed``.  None
    when an argument has no key; ``FOREIGN`` when ``host_array(a, backend)`` says an argument
    is read as numpy first (kdsl.runtime.foreign).  Generated: unrolled, no call for arrays."""
    nd = _ND_SPECIALIZED if specialize else _ND
    lines = [f"{''.join(f'a{i}, ' for i in range(nargs))}= args" if nargs else "pass"]
    for i in range(nargs):
        if consts[i]:
            lines += [f"k{i} = _part(a{i}, True, False, None, None)", f"if k{i} is None: return"]
        else:
            lines += [f"if type(a{i}) is _ndarray: sh = a{i}.shape; k{i} = {nd.format(i=i)}",
                      f"else: k{i} = _part(a{i}, False, {specialize}, host_array, backend)",
                      f"if k{i} is None or k{i} is _FOREIGN: return k{i}"]
    key = f"(backend, gen{''.join(f', k{i}' for i in range(nargs))})"
    lines += [f"if out is None and not classed: return {key}",
              f"return {key} + ((_out_key(out),) if out is not None else ()) + "
              "((_size_classes(args),) if classed else ())"]
    src = "def key(args, backend, gen, out, classed, host_array):\n" + "".join(
        f"    {ln}\n" for ln in lines)
    ns = {"_ndarray": np.ndarray, "_part": _part, "_FOREIGN": FOREIGN,
          "_out_key": out_key, "_size_classes": size_classes}
    exec(compile(src, f"<kdsl key of {nargs} arguments>", "exec"), ns)
    return ns["key"]


def _part(a, const, specialize, host_array, backend):
    """The key part of an argument that is not a numpy array (None: it has none; FOREIGN:
    read it as numpy)."""
    t = type(a)
    if const or a is None:      # a compile-time constant: any hashable value
        try:
            hash(a)
        except TypeError:
            return None
        return ("const", t, a)
    if t in _PY_SCALARS or isinstance(a, np.generic):
        return (t,)
    if host_array is not None and host_array(a, backend):
        return FOREIGN
    info = array_info(a)
    if info is None:
        return None
    dtype, shape, contiguous = info
    return (t, dtype, shape if specialize else tuple([s == 1 for s in shape]), contiguous)


#: the key's answer for a call whose arrays are read as numpy first
FOREIGN = object()


def out_key(out):
    """The ``out=`` part of the key: per array its key part (``_ND``) and writeability (a
    read-only out= array misses the cache: the miss reports it), whether out= is a tuple."""
    if type(out) is np.ndarray:
        sh = out.shape
        return ((out.dtype, tuple([s == 1 for s in sh]) if 1 in sh else len(sh),
                 out.flags.c_contiguous), out.flags.writeable, False)
    outs = out if isinstance(out, tuple) else (out,)
    parts = key_function(len(outs), (False,) * len(outs), False)(outs, None, None, None, False,
                                                                 None)
    return tuple([(k, bool(getattr(getattr(o, "flags", None), "writeable", True))) for k, o in
                  zip(parts[2:] if type(parts) is tuple else (None,) * len(outs), outs)]) \
        + (isinstance(out, tuple),)


# ----------------------------------------------------------------- argument checks
# named tuples, not dataclasses: `import kdsl` should not pay ~0.4 ms per class
class ArrayArg(namedtuple("ArrayArg", "pos dtype dims contiguous kind classes",
                          defaults=(np.ndarray, None))):
    """An array argument a fast launcher accepts: exactly ``kind`` (``numpy.ndarray`` unless
    the compiled kernel takes device arrays: ``compiled.fast.device_arrays``) with this dtype
    object (identity), rank, C-contiguity flag and per-dim sizes (``None``: any size but 1;
    an int: exactly that size); ``classes``: per dim the size's bit length, for size-classed
    backends (``Signature.size_classes``), else None."""

    __slots__ = ()


class ScalarArg(namedtuple("ScalarArg", "pos pytype")):
    """A scalar argument: exactly ``pytype`` (``int``, ``float`` or ``bool``, never a subclass)."""

    __slots__ = ()


class Output(NamedTuple):
    """One result: its kdsl dtype, the numpy dtype object allocated, its shape expressions."""

    dtype: object
    np: object
    shape: tuple


# ----------------------------------------------------------------- the plan
class CallPlan(NamedTuple):
    """The call contract of one specialisation (argument positions are the call's).

    - ``name``: the kernel's; ``key``: the cache key it serves; ``nargs``: the call's arguments.
    - ``inputs``: positions of the array parameters, in the compiled kernel's order;
      ``scalars``: positions of the scalar parameters; ``scalar_dtypes``: their dtypes.
    - ``sources``: ``(Var, ("scalar", pos) | ("shape", pos, dim))``: where each shape variable
      is bound, in binding order (scalars first, then array dims in order).
    - ``checks``: ``(pos, dim, Expr)``: dim ``dim`` of argument ``pos`` must equal it (a
      repeated name or a computed size), each after the sources it uses.
    - ``constraints``: the graph's Constraint records (index checks are ``(cond, True)``).
    - ``outputs``: ``Output`` per result; ``out_mode``: None (allocated), "one" or "tuple".
    - ``args``: ``ArrayArg``/``ScalarArg`` per non-constant argument -- what a fast launcher
      checks exactly (dtype objects of the call that built the plan) -- or None where the
      calls cannot be checked exactly (no fast launcher); ``out_args``: the same per out= array.
    - ``slots``: the compiled function's ``Slot``s (None: its ``fast`` names no ``func``).
    """

    name: str
    key: object
    nargs: int
    inputs: tuple
    scalars: tuple
    scalar_dtypes: tuple
    sources: tuple
    checks: tuple
    constraints: tuple
    outputs: tuple
    out_mode: object
    args: object
    out_args: tuple
    slots: object


def make(name, graph, sig, out_mode=None, args=None, out=None, compiled=None,
         key=None) -> CallPlan:
    """The CallPlan of ``graph`` compiled as ``compiled`` for ``sig`` (whose non-constant
    parameters are ``graph.params``, in order); ``args``/``out``: the call that built it (None:
    no ``args`` checks, no fast launcher)."""
    param_pos = [i for i, p in enumerate(sig.params) if not isinstance(p, ConstSig)]
    nargs = len(sig.params)
    scalars, arrays, sources, checks, bound = [], [], [], [], set()
    for p, pos in zip(graph.params, param_pos):
        if isinstance(p, n.Var):
            scalars.append((p, pos))
            sources.append((p, ("scalar", pos)))
            bound.add(p)
        else:
            arrays.append((p, pos))
    for p, pos in arrays:
        for d, e in enumerate(p.shape):
            if type(e) is n.Var and e not in bound:
                sources.append((e, ("shape", pos, d)))
                bound.add(e)
            elif type(e) is not n.Const:
                checks.append((pos, d, e))
    outputs = tuple(Output(t.dtype, np.dtype(t.dtype.np), tuple(t.shape)) for t in graph.outputs)
    fast = None if compiled is None else compiled.fast
    func = None if fast is None else fast.func
    checked = None
    if args is not None and len(param_pos) == nargs and not graph.data_checks:
        checked = _arg_checks(sig, args, scalars, arrays, outputs, out_mode, out,
                              fast is not None and fast.device_arrays)
    return CallPlan(name, key, nargs, tuple(pos for _, pos in arrays),
                    tuple(pos for _, pos in scalars), tuple(p.dtype for p, _ in scalars),
                    tuple(sources), tuple(checks), tuple(graph.constraints), outputs, out_mode,
                    None if checked is None else checked[0],
                    () if checked is None else checked[1],
                    None if func is None else scalar_slots(func))


def _arg_checks(sig, args, scalars, arrays, outputs, out_mode, out, device):
    """``(args, out_args)`` checks of a plan, or None when its calls cannot be checked exactly
    (numpy scalars, which the normal path converts; arrays of a kind the backend's fast
    launcher does not read; out= of another count)."""
    classes = sig.size_classes or (None,) * len(args)
    checked = []
    for _p, pos in scalars:
        t = type(args[pos])
        if t not in _PY_SCALARS:
            return None
        checked.append(ScalarArg(pos, t))
    for _p, pos in arrays:
        a, ps = args[pos], sig.params[pos]
        kind = getattr(ps, "kind", None)
        if type(a) is not kind or (kind is not np.ndarray and not device):
            return None
        checked.append(ArrayArg(pos, a.dtype, tuple(ps.shape), bool(ps.contiguous), kind,
                                classes[pos]))
    out_args = ()
    if out_mode is not None:
        outs = out if out_mode == "tuple" else (out,)
        if len(outs) != len(outputs) or any(type(o) is not np.ndarray and not device
                                            for o in outs):
            return None
        infos = [array_info(o) for o in outs]     # out= keys carry each dim's size-1 flag
        if any(i is None for i in infos):
            return None
        out_args = tuple(ArrayArg(-1, o.dtype, tuple(1 if s == 1 else None for s in info[1]),
                                  bool(info[2]), type(o)) for o, info in zip(outs, infos))
    return tuple(checked), out_args

