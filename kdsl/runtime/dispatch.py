"""The compile flow and the per-signature launcher (a cached call costs microseconds).

``compile_for`` runs trace -> Schedule -> (explicit schedule functions or ``backend.schedule``)
-> ``backend.compile`` once per (backend, signature).  A backend whose class says
``defers_schedule = True`` (kdsl's cpu and cuda) gets a ``DeferredRequest`` when no explicit
schedule function applies: it looks its disk cache up first, and the schedule is made only
when it reads ``request.schedule`` (a miss).  ``build_launcher`` generates one Python function
per specialisation from its ``callplan.CallPlan`` (the reference emitter).
"""
from __future__ import annotations

import os
import sys

import numpy as np

from .. import compile_log, config
from ..backends.protocol import CompileRequest
from ..errors import ArgumentError, InternalCompilerError, ShapeError, user_location
from ..ir import nodes as n

_HERE = os.path.dirname(os.path.abspath(__file__))


def trace_graph(fn, specs, name=None, constants=()):
    """Trace ``fn`` for ``specs`` (kdsl.frontend.trace.trace)."""
    from ..frontend.trace import trace
    return trace(fn, specs, name=name, constants=constants)


def has_loops(graph) -> bool:
    """kdsl.frontend.fori.has_loops, without importing it where no trace has (a graph runs a
    ``kd.fori_loop`` only if it holds a ``LoopStage``, a class of that module)."""
    fori = sys.modules.get("kdsl.frontend.fori")
    return fori is not None and fori.has_loops(graph)


def make_schedule(graph):
    """A fresh ``kdsl.schedule.Schedule`` of ``graph``."""
    from ..schedule import Schedule
    return Schedule(graph)


#: ``f(kernel, backend, sig, graph, sched, declarative) -> [Hint]``: a persisted tuning winner's
#: hints for this specialisation ([] when none); set by kdsl.kernel at import (kdsl.tune sits
#: above the runtime)
tuned_hints = None


def _targets(hint_target, backend) -> bool:
    """Whether a schedule for ``hint_target`` applies on ``backend`` (``spec.schedule_target``)."""
    return hint_target is None or hint_target == backend.spec.schedule_target


def size_hints(graph, sig) -> dict:
    """``{shape Var: (lo, hi)}``: the sizes each symbolic dim of the parameters can have in
    this specialisation (from ``sig.size_classes``; empty when the signature has none)."""
    if not sig.size_classes:
        return {}
    from .signature import ConstSig, size_range
    out = {}
    classes = [c for c, p in zip(sig.size_classes, sig.params) if not isinstance(p, ConstSig)]
    for p, cls in zip(graph.params, classes):
        if isinstance(p, n.Var) or len(cls) != len(p.shape):
            continue
        for e, c in zip(p.shape, cls):
            if type(e) is n.Var and c is not None:
                lo, hi = size_range(c)
                if e in out:   # one name in several places: the sizes are equal
                    lo, hi = max(lo, out[e][0]), min(hi, out[e][1])
                out[e] = (lo, hi)
    return out


def prepare(kernel, backend, sig, graph) -> CompileRequest:
    """Schedule ``graph`` for ``backend`` and wrap it in a CompileRequest (nothing compiled).
    A graph with ``kd.fori_loop``s gives a ``ProgramRequest`` (its parts are scheduled when
    shown: kdsl.runtime.fori_program.describe)."""
    if has_loops(graph):
        return ProgramRequest(kernel, backend, sig, graph)
    sched = schedule_for(kernel, backend, sig, graph)
    outc = sig.out_contiguous or (True,) * len(graph.outputs)
    return CompileRequest(graph, sched, sig, tuple(outc), dict(backend.spec.options))


def schedule_for(kernel, backend, sig, graph):
    """The finished schedule of ``graph`` for ``backend``: the kernel's explicit schedule
    functions for its target, else ``backend.schedule`` with the declarative hints."""
    sched = make_schedule(graph)
    sched.size_hints = size_hints(graph, sig)
    hints = [h for h in kernel._hints if _targets(h.target, backend)]
    explicit = [h.fn for h in hints if h.fn is not None]
    for f in explicit:
        f(sched)
    if not explicit:
        declarative = [h for h in hints if h.fn is None]
        from ..schedule.hints import validate_hint
        for h in declarative:  # names are checked for every backend, even one that ignores hints
            validate_hint(sched, h)
        if tuned_hints is not None:     # kernel.tune's winner adjusts the user's hints (kdsl.tune)
            declarative = declarative + tuned_hints(kernel, backend, sig, graph, sched, declarative)
        backend.schedule(sched, declarative)
        spec = backend.spec     # host backends with schedules of their own (not a GPU's)
        if spec.device == "host" and spec.target is None and any(st.origin for st in graph.stages):
            from ..frontend.online_placement import FUSED, place_rows
            if any(st.origin is FUSED for st in graph.stages):
                place_rows(sched)   # fused softmax chains stream one query row at a time
    sched.finish()      # placements left illegal by the schedule, at the user's primitive line
    return sched


class DeferredRequest(CompileRequest):
    """A CompileRequest whose schedule is made when first read (``schedule_for``), so that a
    warm process never schedules.  ``schedule_roots`` -- what the default schedule is a function
    of: (graph, the declarative hints for this target and a persisted tune winner's, the size
    hints, signature, output layouts, options) -- is what the backend keys its compiled code by
    (with its own inputs: kdsl.runtime.fingerprint.schedule_key)."""

    def __init__(self, kernel, backend, sig, graph):
        outc = tuple(sig.out_contiguous or (True,) * len(graph.outputs))
        self._make = (kernel, backend, sig, graph)
        self._sched = None
        super().__init__(graph, None, sig, outc, dict(backend.spec.options))
        hints = tuple(h for h in kernel._hints if _targets(h.target, backend))
        tuned = tuple(tuned_hints(kernel, backend, sig, graph, None, list(hints))
                      if tuned_hints is not None else ())
        self.schedule_roots = (graph, hints + tuned, size_hints(graph, sig), sig, outc,
                               self.options)

    @property
    def scheduled(self) -> bool:
        """Has the schedule been made (read) yet?"""
        return self._sched is not None

    @property
    def schedule(self):
        if self._sched is None:
            with compile_log.stage("schedule"):
                self._sched = schedule_for(*self._make)
        return self._sched

    @schedule.setter
    def schedule(self, value):
        self._sched = value


def _explicit(kernel, backend) -> bool:
    return any(h.fn is not None for h in kernel._hints if _targets(h.target, backend))


class ProgramRequest:
    """``prepare``'s answer for a graph with loops: ``lower_request`` and ``Kernel.source``
    show its host loop and what each part lowers to (kdsl.runtime.fori_program)."""

    def __init__(self, kernel, backend, sig, graph):
        self.kernel, self.backend, self.signature, self.graph = kernel, backend, sig, graph

    def show(self, source: bool = False):
        from .fori_program import describe
        return describe(self.kernel, self.backend, self.signature, self.graph, source)


def lower_request(backend, req):
    """The LoweredFunc of a request (``backend.lower``: its own passes, else the core table of
    its target), or a ``ProgramRequest``'s description."""
    return req.show() if isinstance(req, ProgramRequest) else backend.lower(req)


def dump(kernel_name, backend, sig, req) -> None:
    """KDSL_DUMP=1: print the lowered IR and the backend source of a new specialisation."""
    bname = backend.spec.name
    print(f"=== kdsl: {kernel_name} for {bname} {sig.describe()} ===", file=sys.stderr)
    for what, show in (("lowering for the dump", lambda: lower_request(backend, req)),
                       ("source", lambda: backend.source(req))):
        try:    # dumping must never break a call
            print(show(), file=sys.stderr)
        except Exception as e:
            print(f"({what} failed: {type(e).__name__}: {e})", file=sys.stderr)
        if what != "source":
            print(f"--- source ({bname}) ---", file=sys.stderr)


def compile_for(kernel, backend, sig, graph):
    """Schedule and compile ``graph`` for ``backend``; returns (request, compiled).  A graph
    with ``kd.fori_loop``s compiles into a kdsl.runtime.fori_program.Program (request None)."""
    if has_loops(graph):
        from .fori_program import compile_program
        req, compiled = None, compile_program(kernel, backend, sig, graph)
    else:
        if getattr(type(backend), "defers_schedule", False) is True and not _explicit(kernel,
                                                                                     backend):
            req = DeferredRequest(kernel, backend, sig, graph)   # scheduled on a miss only
        else:
            with compile_log.stage("schedule"):
                req = prepare(kernel, backend, sig, graph)
        with compile_log.stage("backend compile"):   # lower/codegen inside time themselves
            compiled = backend.compile(req)
    if graph.data_checks:   # conditions on the data (indices read from arrays): run first
        from .checks import with_checks
        compiled = with_checks(backend, sig, graph, compiled, req.options if req is not None
                               else dict(backend.spec.options))
    if config.dump() and req is not None:
        dump(kernel.__name__, backend, sig, req)
    return req, compiled


# ----------------------------------------------------------------- shape expressions -> Python
_PYOP = {n.BinOp.ADD: "+", n.BinOp.SUB: "-", n.BinOp.MUL: "*", n.BinOp.DIV: "/",
         n.BinOp.POW: "**", n.BinOp.AND: "&", n.BinOp.OR: "|", n.BinOp.XOR: "^",
         n.BinOp.SHL: "<<", n.BinOp.SHR: ">>"}
_PYCMP = {c: c.value for c in n.CmpOp}


def _fdiv(a, b):
    return 0 if b == 0 else a // b


def _fmod(a, b):
    return 0 if b == 0 else a % b


def py_expr(e, names: dict) -> str:
    """Python source computing a shape expression (Var -> local name in ``names``)."""
    t = type(e)
    if t is n.Var:
        try:
            return names[e]
        except KeyError:
            raise InternalCompilerError(f"shape expression uses {e.name}, which no argument "
                                        "binds") from None
    if t is n.Const:
        return repr(e.value)
    if t is n.Binary:
        a, b = py_expr(e.a, names), py_expr(e.b, names)
        if e.op in (n.BinOp.MIN, n.BinOp.MAX):
            return f"{e.op.value}({a}, {b})"
        if e.op in (n.BinOp.FLOORDIV, n.BinOp.MOD):
            if isinstance(e.b, n.Const) and e.b.value != 0:
                return f"({a} {e.op.value} {b})"
            return f"{'_fdiv' if e.op is n.BinOp.FLOORDIV else '_fmod'}({a}, {b})"
        return f"({a} {_PYOP[e.op]} {b})"
    if t is n.Compare:
        return f"({py_expr(e.a, names)} {_PYCMP[e.op]} {py_expr(e.b, names)})"
    if t is n.Select:
        return f"({py_expr(e.t, names)} if {py_expr(e.cond, names)} else {py_expr(e.f, names)})"
    if t is n.Cast:
        f = "bool" if e.dtype.is_bool else "int" if e.dtype.is_int else "float"
        return f"{f}({py_expr(e.a, names)})"
    if t is n.Unary and e.op in (n.UnOp.NEG, n.UnOp.ABS):
        a = py_expr(e.a, names)
        return f"(-{a})" if e.op is n.UnOp.NEG else f"abs({a})"
    if t is n.Unary and e.op is n.UnOp.NOT:
        a = py_expr(e.a, names)
        return f"(not {a})" if e.dtype.is_bool else f"(~{a})"
    raise InternalCompilerError(f"cannot compute a shape from {t.__name__}")


# ----------------------------------------------------------------- launcher
class _Fail:
    """Call-time error builders (kept out of the generated code, which only calls them)."""

    def __init__(self, plan, names):
        self.plan, self.names = plan, names

    def dim(self, pos, d, got, what, want):
        raise ShapeError(
            f"{self.plan.name}: argument {self.names[pos]!r} has size {got} in dim {d}, but "
            f"the kernel needs {what} = {want} there (from the other arguments' shapes)",
            hint="pass arrays whose shapes agree", loc=user_location())

    def constraint(self, j, lhs, rhs, *values):
        c = self.plan.constraints[j]
        call = user_location()
        at = f" (called at {call.short})" if call is not None else ""
        if c.detail:   # a template filled with this call's values (index checks)
            msg = c.message.format(**{name: v for (name, _), v in zip(c.detail, values)})
            raise (c.error or ShapeError)(f"{msg}{at}", loc=c.loc if c.loc is not None else call,
                                          hint=c.hint)
        detail = "" if isinstance(c.rhs, n.Const) and c.rhs.dtype.is_bool else f": {lhs} != {rhs}"
        raise (c.error or ShapeError)(f"{c.message}{detail} for this call{at}",
                                      loc=c.loc if c.loc is not None else call, hint=c.hint)

    def out(self, j, got, want):
        raise ArgumentError(f"{self.plan.name}: out= array {j} has shape {tuple(got)}, "
                            f"but the result has shape {tuple(want)}",
                            hint="allocate out with the result's shape", loc=user_location())

    def scalar(self, pos, v, lo, hi):
        name, d = self.names[pos], self.plan.scalar_dtypes[self.plan.scalars.index(pos)]
        raise ArgumentError(f"{self.plan.name}: Python integer {v} (argument {name!r}) is out of "
                            f"bounds for {d.name}", loc=user_location(), hint=f"pass a value "
                            f"within [{lo}, {hi}], or a float (float({name})) if the kernel "
                            "computes in floating point")


def build_launcher(plan, backend, compiled, arg_names, like_kind=None):
    """The reference emitter of a ``callplan.CallPlan``: a generated ``launch(args, out,
    stream)`` binding, checking, allocating (or checking ``out=``) and calling
    ``compiled(inputs, outputs, scalars[, stream=])``.  ``arg_names``: the parameter names
    (messages); ``like_kind``: the first array argument's type, for the backend's
    ``result_wrapper``."""
    names, lines, ns = {}, [], {"_fdiv": _fdiv, "_fmod": _fmod, "_run": compiled,
                                "_empty": backend.empty, "_f": _Fail(plan, arg_names)}
    scalars = [f"s{pos}" for pos in plan.scalars]
    inputs = [f"args[{pos}]" for pos in plan.inputs]
    like = inputs[0] if inputs else None
    for pos, d in zip(plan.scalars, plan.scalar_dtypes):
        lines.append(f"s{pos} = args[{pos}]")
        if d.is_int:   # a Python int the scalar cannot hold: the same error everywhere
            lo, hi = int(np.iinfo(d.np).min), int(np.iinfo(d.np).max)
            lines.append(f"if not {lo} <= s{pos} <= {hi}: _f.scalar({pos}, s{pos}, {lo}, {hi})")
    for e, src in plan.sources:
        if src[0] == "scalar":
            names[e] = f"s{src[1]}"
    read = {src[1] for _, src in plan.sources if src[0] == "shape"} | {p for p, _, _ in plan.checks}
    for pos in plan.inputs:
        if pos in read:     # each shape read once
            lines.append(f"sh{pos} = args[{pos}].shape")
        for e, src in plan.sources:
            if src[0] == "shape" and src[1] == pos:
                names[e] = f"v{len(names)}"
                lines.append(f"{names[e]} = sh{pos}[{src[2]}]")
        for cpos, d, e in plan.checks:
            if cpos == pos:
                got, want = f"sh{pos}[{d}]", py_expr(e, names)
                what = repr(e.name) if type(e) is n.Var else "a size"
                lines.append(f"if {got} != {want}: _f.dim({pos}, {d}, {got}, {what!r}, {want})")
    for j, c in enumerate(plan.constraints):
        lhs, rhs = py_expr(c.lhs, names), py_expr(c.rhs, names)
        extra = "".join(f", {py_expr(e, names)}" for _, e in c.detail)  # only on failure
        lines.append(f"if {lhs} != {rhs}: _f.constraint({j}, {lhs}, {rhs}{extra})")
    outs = []
    for j, o in enumerate(plan.outputs):
        shape = "(" + "".join(py_expr(e, names) + ", " for e in o.shape) + ")"
        outs.append(f"o{j}")
        if plan.out_mode is None:
            ns[f"_dt{j}"] = o.dtype
            lines.append(f"o{j} = _empty({shape}, _dt{j}, {like or 'None'})")
        else:
            src = "out" if plan.out_mode == "one" else f"out[{j}]"
            lines.append(f"o{j} = {src}")
            lines.append(f"if tuple(o{j}.shape) != {shape}: _f.out({j}, o{j}.shape, {shape})")
    call = f"[{', '.join(inputs)}], [{', '.join(outs)}], [{', '.join(scalars)}]"
    lines.append(f"if stream is None: _run({call})")
    lines.append(f"else: _run({call}, stream=stream)")
    wrapper = backend.spec.result_wrapper
    wrap = wrapper(like_kind) if wrapper is not None and like_kind is not None else None
    if wrap is not None:
        ns["_wrap"] = wrap
        outs = [f"_wrap({o})" for o in outs]
    if plan.out_mode is not None:
        lines.append("return out")
    else:
        lines.append(f"return {outs[0]}" if len(outs) == 1 else f"return ({', '.join(outs)},)")
    src = "def launch(args, out, stream):\n" + "".join(f"    {ln}\n" for ln in lines)
    # a file name inside kdsl, so that user_location() skips the launcher's frame
    exec(compile(src, os.path.join(_HERE, f"<launcher {plan.name}>"), "exec"), ns)
    launch = ns["launch"]
    launch.__kdsl_source__ = src
    launch.__kdsl_plan__ = plan
    return launch
