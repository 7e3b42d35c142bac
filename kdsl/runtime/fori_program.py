"""Running a graph with ``kd.fori_loop``s (kdsl.frontend.fori): parts, bodies, a host loop.

``compile_program(kernel, backend, sig, graph)`` cuts ``graph`` at its loops: each maximal
run of ordinary stages between loops is a *part*, a closed Graph of its own; each loop's
body is a closed Graph whose parameters are the carries, the arrays it reads from the
enclosing graph, the enclosing graph's inputs (they bind its sizes) and scalars, and
``i``.  Every part and body is compiled by ``backend`` through ``dispatch.compile_for``
(its default schedules and the user's hints for the stages it holds apply; a body with a
loop inside is a program again) and launched through its own generated launcher (its
index checks run per launch).  The returned ``Program`` is the Compiled of ``graph``:

- tensors passed between parts live in buffers it allocates (``backend.empty``);
- a loop ping-pongs two buffers per carry: step ``i`` reads the carries from one and
  writes the next carries into the other; the first step reads ``init``'s arrays, which
  are never written (a strided argument was copied while tracing); the last step writes
  a result the kernel returns into its output (when that has the body's layout; else it
  is copied there, as is ``init`` itself for zero or negative counts, by a copy kernel).

A backend with ``fori_loops`` true (cpu, interp) runs a loop as one launch of its *loop
graph* (``loop_graph``: the body graph with the bounds as two more scalars, lowered and then
wrapped by kdsl.passes.fori_loop into a ``CarryLoop`` over every step: ``_KernelLoop``); the
body's checks that use ``i`` are done for every step first (kdsl.runtime.fori_kernel).  The host loop (``_Loop``) remains for other backends (on GPUs: one launch
of each of the body's kernels per step, the portable grid-wide barrier), for a body holding
a loop of its own, and for a body whose data checks change from step to step
(``fori_kernel.in_kernel_loop``).
"""
from __future__ import annotations

import copy
import dataclasses

from .. import config
from ..graph import Graph, Input, Tensor, live_stages
from ..ir import nodes as n
from ..ir.evaluate import eval_expr
from ..ir.visitor import Mutator
from .. import compile_log
from .fori_kernel import in_kernel_loop, loop_graph
from .signature import ArraySig, ScalarSig, Signature


# ----------------------------------------------------------------- closed graphs
class _Retarget(Mutator):
    """Reads of the tensors in ``tmap`` read their replacements."""

    def __init__(self, tmap: dict):
        super().__init__()
        self.tmap = tmap

    def visit_TensorRead(self, r):
        r = self.generic(r)
        t = self.tmap.get(r.tensor)
        return r if t is None else n.TensorRead(r.dtype, t, r.indices)


def _rebuild(stages: list, tmap: dict) -> list:
    """Copies of ``stages`` with their own output tensors, reading through ``tmap`` (which
    gains old output -> new output); a loop's records follow its tensors."""
    from ..frontend.fori import LoopStage
    out, infos = [], {}
    for st in stages:
        new = copy.copy(st)
        vals = tuple(Tensor(t.name, t.shape, t.dtype, new, t.empty_reads) for t in st.values)
        new.values = vals
        new.output = vals[next(j for j, t in enumerate(st.values) if t is st.output)]
        for a, b in zip(st.values, vals):
            tmap[a] = b
        out.append(new)
    for new, st in zip(out, stages):
        new.body = _Retarget(tmap).visit(st.body)
        if isinstance(st, LoopStage):
            info = infos.get(id(st.loop))
            if info is None:
                m = lambda ts: tuple(tmap.get(t, t) for t in ts)     # noqa: E731
                info = infos[id(st.loop)] = dataclasses.replace(
                    st.loop, inits=m(st.loop.inits), captured=m(st.loop.captured),
                    results=[None] * len(st.loop.results))
            new.loop = info
            info.results[st.carry] = new.output
    return out


def closed_graph(name, stages, outputs, enclosing, lead=(), extra_scalars=(), loc=None):
    """A Graph computing ``outputs`` (tensors of ``stages``) from its parameters: ``lead``
    (Input tensors already read by ``stages``), then every other tensor ``stages`` read,
    then ``enclosing``'s remaining inputs (they bind its sizes), then its scalars and
    ``extra_scalars``.  Returns ``(graph, sources)``: per parameter the enclosing-side
    tensor or Var whose value it takes (None for ``lead``)."""
    tmap, params, sources = {}, list(lead), [None] * len(lead)
    made = {id(t) for s in stages for t in s.values}
    lead_ids = {id(t) for t in lead}

    def param(t):
        if t in tmap:
            return
        c = t.op.contiguous if isinstance(t.op, Input) else True
        tmap[t] = Tensor(t.name, t.shape, t.dtype, Input(len(params), c), t.empty_reads)
        params.append(tmap[t])
        sources.append(t)

    for s in stages:
        for t in s.reads():
            if id(t) not in made and id(t) not in lead_ids:
                param(t)
    for t in enclosing.inputs:
        param(t)
    for v in tuple(enclosing.scalars) + tuple(extra_scalars):
        params.append(v)
        sources.append(v)
    new = _rebuild(stages, tmap)
    outs = tuple(tmap[t] for t in outputs)
    return Graph(name, tuple(params), live_stages(new, outs), outs, [], loc=loc), sources


def body_graph(info, enclosing):
    """The closed body graph of loop ``info`` inside ``enclosing`` (built once per pair)."""
    key = id(enclosing)
    got = info.cache.get(key)
    if got is not None and got[2] is enclosing:
        return got[:2]
    ctx = info.ctx
    if not info.cache.get("finalized"):
        # sizes unified after the loop was traced: the body's stages and carries use the
        # representatives too
        info.cache["finalized"] = True
        ctx.finalize(info.body_stages)
        for h in info.placeholders:
            h.shape = tuple(ctx.resolve(e) for e in h.shape)
        info.lower, info.upper = ctx.resolve(info.lower), ctx.resolve(info.upper)
    graph, sources = closed_graph(f"{enclosing.name}_body", info.body_stages, info.body_results,
                                  enclosing, lead=info.placeholders,
                                  extra_scalars=(info.index,), loc=info.loc)
    graph.constraints.extend(ctx.resolve_constraint(c) if hasattr(ctx, "resolve_constraint")
                             else c for c in info.constraints)
    remap = dict(zip(info.traced_captured, info.captured))   # this enclosing graph's tensors
    sources = [remap.get(s, s) if isinstance(s, Tensor) else s for s in sources]
    from ..frontend.access import check_accesses
    check_accesses(graph, ctx)      # the body's reads: proven, checked per step, or clamped
    info.cache[key] = (graph, sources, enclosing)
    return graph, sources


class StepChecks:
    """The checks of a loop body that use ``i``, for every step of ``[lo, hi)`` at once
    (generated Python: a few tenths of a microsecond per check and step)."""

    def __init__(self, name, checks, index):
        from . import dispatch
        from ..ir.visitor import free_vars
        self.checks, self.index = checks, index
        vars_ = []
        for c in checks:
            for e in [c.lhs, c.rhs]:
                vars_ += [v for v in free_vars(e) if v is not index and v not in vars_]
        names = {v: f"v{k}" for k, v in enumerate(vars_)}
        names[index] = "i"
        self.vars = vars_
        body = "".join(f"        if {dispatch.py_expr(c.lhs, names)} != "
                       f"{dispatch.py_expr(c.rhs, names)}: return i, {j}\n"
                       for j, c in enumerate(checks))
        src = (f"def check(lo, hi, {''.join(names[v] + ', ' for v in vars_)}):\n"
               f"    for i in range(lo, hi):\n{body}    return None\n")
        ns = {"_fdiv": dispatch._fdiv, "_fmod": dispatch._fmod}
        exec(compile(src, f"<kd.fori_loop step checks {name}>", "exec"), ns)
        self.fn = ns["check"]
        self.name = name             # dispatch._Fail reads name and constraints (a plan's)
        self.fail = dispatch._Fail(self, ())

    @property
    def constraints(self):       # the failing check, as a CallPlan's constraints
        return self.checks

    def __call__(self, lo, hi, vals):
        bad = self.fn(lo, hi, *[vals[v] for v in self.vars])
        if bad is not None:
            i, j = bad
            env = {**vals, self.index: i}
            c = self.checks[j]
            self.fail.constraint(j, eval_expr(c.lhs, env), eval_expr(c.rhs, env),
                                 *[eval_expr(e, env) for _, e in c.detail])


# ----------------------------------------------------------------- compiling
class _Part:
    """A kernel-like object for ``dispatch.compile_for``: the user's hints for one part."""

    def __init__(self, kernel, name, hints):
        self.__name__ = name
        self._hints = hints
        self._parent = kernel


def _hints_for(kernel, graph, default: bool) -> list:
    """The hints of ``kernel`` that concern ``graph``'s stages: a hint naming a stage of
    it; with ``default``, hints naming no stage or one no part has (their errors show)."""
    names = {s.name for s in graph.stages}
    out = []
    for h in kernel._hints:
        if getattr(h, "fn", None) is not None:
            out.append(h)           # explicit schedule functions see every part
            continue
        st = h.hints.get("stage")
        if st in names or (default and st not in _all_names(kernel)):
            out.append(h)
    return out


def _all_names(kernel) -> set:
    return getattr(kernel, "_names", set())


def _compile(kernel, backend, graph, name, default, out_contiguous):
    from . import callplan, dispatch
    part = _Part(kernel, name, _hints_for(kernel, graph, default))
    part._names = _all_names(kernel)
    sig = _sig_of(graph, out_contiguous)
    _req, compiled = dispatch.compile_for(part, backend, sig, graph)
    names = [getattr(p, "name", f"a{k}") for k, p in enumerate(graph.params)]
    plan = callplan.make(name, graph, sig, "tuple", compiled=compiled)
    return dispatch.build_launcher(plan, backend, compiled, names)


class _Fallback(Exception):
    """A relaxed data check of a loop kernel failed: this call takes the host loop."""


def _nothing(inputs, outputs, scalars, stream=None):
    return None


class _Relaxed:
    """A loop kernel behind data checks relaxed to a larger domain (fori_kernel._check_form):
    where one fails, the call raises ``_Fallback`` (the host loop then checks each step)."""

    fast = None     # the relaxed checks run first: no fast launcher skips them

    def __init__(self, main, loose, errors):
        self.main, self.loose, self.errors = main, loose, errors

    def __call__(self, inputs, outputs, scalars, stream=None):
        extra = {} if stream is None else {"stream": stream}
        try:
            self.loose(inputs, outputs, scalars, **extra)
        except self.errors:
            raise _Fallback() from None
        return self.main(inputs, outputs, scalars, **extra)


def _compile_loop(kernel, backend, graph, spec, default, relaxed=()):
    """The launcher of loop graph ``graph`` compiled as the whole loop (``spec``), behind the
    ``relaxed`` data checks (fori_kernel.loop_graph) when there are some."""
    from . import dispatch
    part = _Part(kernel, graph.name, _hints_for(kernel, graph, default))
    part._names = _all_names(kernel)
    req = _loop_request(part, backend, graph, spec)
    with compile_log.stage("backend compile"):
        compiled = backend.compile(req)
    if graph.data_checks:    # once, before the loop (loop_graph: over every step's domain)
        from ..passes.fori_loop import OPTION
        from .checks import with_checks
        compiled = with_checks(backend, req.signature, graph, compiled,
                               {k: v for k, v in req.options.items() if k != OPTION})
    if relaxed:
        from ..passes.fori_loop import OPTION
        from .checks import with_checks
        loose = Graph(f"{graph.name}_relaxed", graph.params, graph.stages, graph.outputs, [],
                      loc=graph.loc, data_checks=list(relaxed))
        compiled = _Relaxed(compiled, with_checks(
            backend, req.signature, loose, _nothing,
            {k: v for k, v in req.options.items() if k != OPTION}),
            tuple({c.error for c in relaxed}))
    if config.dump():
        dispatch.dump(graph.name, backend, req.signature, req)
    from . import callplan
    names = [getattr(p, "name", f"a{k}") for k, p in enumerate(graph.params)]
    plan = callplan.make(graph.name, graph, req.signature, "tuple", compiled=compiled)
    return dispatch.build_launcher(plan, backend, compiled, names)


def _loop_request(part, backend, graph, spec):
    """The CompileRequest of a loop graph: scheduled like any graph, asking for the loop."""
    from . import dispatch
    from ..passes.fori_loop import OPTION
    with compile_log.stage("schedule"):
        req = dispatch.prepare(part, backend, _sig_of(graph, ()), graph)
    req.options[OPTION] = spec
    return req


@dataclasses.dataclass
class _Seg:
    launch: object
    sources: list
    outs: tuple          # enclosing-side tensors it computes


@dataclasses.dataclass
class _Loop:
    info: object
    launch: object
    sources: list


@dataclasses.dataclass
class _KernelLoop:
    """A loop run by one launch of its loop kernel (every step inside it)."""

    info: object
    launch: object
    sources: list
    checks: object       # StepChecks or None
    fallback: object = None   # () -> the host loop's _Loop (relaxed data checks), built once


class Program:
    """The Compiled of a graph with loops (module docstring): ``(inputs, outputs, scalars)``."""

    fast = None     # a host loop of kernel calls: no fast launcher

    def __init__(self, graph, backend, steps, out_contiguous):
        global _COPY
        if _COPY is None:
            _COPY = make_kernel(_copy_fn)
        self.graph, self.backend, self.steps = graph, backend, steps
        self.backend_name = backend.spec.name
        self.out_index = {t: j for j, t in enumerate(graph.outputs)}
        # results written in place by a loop's last step: contiguous like the body's outputs
        self.direct = {t: bool(c) for t, c in zip(graph.outputs, out_contiguous)}
        self.shape_vars = [(k, d, e) for k, t in enumerate(graph.inputs)
                           for d, e in enumerate(t.shape) if type(e) is n.Var]

    def __call__(self, inputs, outputs, scalars, stream=None):
        g = self.graph
        env = dict(zip(g.inputs, inputs))
        env.update(zip(g.outputs, outputs))
        vals = dict(zip(g.scalars, scalars))
        for k, d, v in self.shape_vars:
            vals.setdefault(v, int(inputs[k].shape[d]))
        like = inputs[0] if inputs else (outputs[0] if outputs else None)
        for step in self.steps:
            if isinstance(step, _Seg):
                args = [env[s] if isinstance(s, Tensor) else vals[s] for s in step.sources]
                out = tuple(env[t] if t in env else self._empty(t, vals, like) for t in step.outs)
                step.launch(args, out, stream)
                env.update(zip(step.outs, out))
            elif isinstance(step, _KernelLoop):
                self._kernel_loop(step, env, vals, like, stream)
            else:
                self._loop(step, env, vals, like, stream)

    def _empty(self, t, vals, like):
        return self.backend.empty(tuple(int(eval_expr(e, vals)) for e in t.shape), t.dtype, like)

    def _loop(self, step, env, vals, like, stream):
        info = step.info
        lo, hi = int(eval_expr(info.lower, vals)), int(eval_expr(info.upper, vals))
        count = max(hi - lo, 0)
        cur = [env[t] for t in info.inits]        # read only: steps write buffers of their own
        # a result the kernel returns: the last step writes it in place (when its layout is
        # the body's), else it is copied there at the end
        dest = [env.get(t) if t is not None and self.direct.get(t) else None for t in info.results]
        if count:
            ping = [d if d is not None and count % 2 == 1 else self._empty(t, vals, like)
                    for d, t in zip(dest, info.inits)]
            pong = [d if d is not None and count % 2 == 0 else
                    (self._empty(t, vals, like) if count > 1 else None)
                    for d, t in zip(dest, info.inits)]
            args = [None if s is None or s is info.index else env[s] if isinstance(s, Tensor)
                    else vals[s] for s in step.sources]
            k = len(cur)
            for n_, i in enumerate(range(lo, hi)):
                nxt = ping if n_ % 2 == 0 else pong
                args[:k] = cur
                args[-1] = i
                step.launch(args, tuple(nxt), stream)
                cur = nxt
        self._store(info, cur, env, stream)

    def _kernel_loop(self, step, env, vals, like, stream):
        """One launch runs every step (the kernel ping-pongs the carries and writes the last
        ones into the results: into the kernel's outputs when they have its layout)."""
        info = step.info
        lo, hi = int(eval_expr(info.lower, vals)), int(eval_expr(info.upper, vals))
        if step.checks is not None and hi > lo:
            step.checks(lo, hi, vals)
        outs = tuple(env[t] if t is not None and self.direct.get(t) and t in env
                     else self._empty(c, vals, like)
                     for t, c in zip(info.results, info.inits))
        args = [None if s is None or s is info.index else env[s] if isinstance(s, Tensor)
                else vals[s] for s in step.sources]
        k = len(info.inits)
        args[:k] = [env[t] for t in info.inits]
        args[-1] = 0        # i: the loop's variable inside the kernel
        try:
            step.launch(args + [lo, hi], outs, stream)
        except _Fallback:   # a relaxed check failed: the host loop checks step by step
            self._loop(step.fallback(), env, vals, like, stream)
            return
        self._store(info, outs, env, stream)

    def _store(self, info, finals, env, stream):
        """The loop's final carries as its results: copied into an out= array the program
        was given (when it is not that array already), else bound as the results."""
        for t, a in zip(info.results, finals):
            if t is None:
                continue
            if t in self.out_index and env[t] is not a:
                self._copy(a, env[t], stream)
            else:
                env[t] = a

    def _copy(self, src, dst, stream):
        """``dst[...] = src`` on the backend (a loop's result into an out= of another layout,
        or zero steps: init's array into the kernel's result)."""
        _COPY(src, out=dst, backend=self.backend_name, **({} if stream is None
                                                          else {"stream": stream}))


def _copy_fn(x):
    return x


_COPY = None
#: ``kdsl.kernel.kernel``, set by kdsl.kernel when it is imported (the runtime sits below the
#: kernel object in the layers: docs/design.md); a Program copies a carry with a kdsl kernel
make_kernel = None


def _plan(kernel, graph, outc) -> tuple:
    """``(kernel, steps)``: per part ``("part", graph, sources, outs, default, out_contiguous)``,
    per loop ``("loop", info, body graph, sources, default)``, in order."""
    from ..frontend.fori import LoopStage
    if not hasattr(kernel, "_names"):
        names = set()
        _collect_names(graph, names)
        kernel = _Part(kernel, kernel.__name__, list(kernel._hints))
        kernel._names = names
    groups, cur = [], []
    for st in graph.stages:
        if isinstance(st, LoopStage):
            if cur:
                groups.append(cur)
                cur = []
            if not (groups and groups[-1] is st.loop):
                groups.append(st.loop)
        else:
            cur.append(st)
    if cur:
        groups.append(cur)
    first = graph.outputs[0].stage
    steps = []
    for j, grp in enumerate(groups):
        later = [t for g in groups[j + 1:] for t in _reads_of(g)]
        if isinstance(grp, list):
            made = {id(t) for s in grp for t in s.values}
            outs, seen = [], set()
            for t in list(graph.outputs) + later:
                if id(t) in made and id(t) not in seen:
                    seen.add(id(t))
                    outs.append(t)
            part, sources = closed_graph(f"{graph.name}_part{j}", grp, outs, graph, loc=graph.loc)
            oc = [outc[graph.outputs.index(t)] if t in graph.outputs else True for t in outs]
            steps.append(("part", part, sources, tuple(outs), any(s is first for s in grp), oc))
        else:
            body, sources = body_graph(grp, graph)
            # hints naming no stage go where the kernel's first result is computed
            steps.append(("loop", grp, body, sources,
                          isinstance(first, LoopStage) and first.loop is grp))
    return kernel, steps


def _host_loop(kernel, backend, info, body, sources, default):
    """A function compiling the host loop of a loop (once, when first called)."""
    got = []

    def make():
        if not got:
            got.append(_Loop(info, _compile(kernel, backend, body, body.name, default, ()),
                             sources))
        return got[0]
    return make


def compile_program(kernel, backend, sig, graph) -> Program:
    """Compile the parts and loop bodies of ``graph`` for ``backend`` (module docstring)."""
    outc = sig.out_contiguous or (True,) * len(graph.outputs)
    kernel, plan = _plan(kernel, graph, outc)
    steps = []
    for st in plan:
        if st[0] == "part":
            _, part, sources, outs, default, oc = st
            steps.append(_Seg(_compile(kernel, backend, part, part.name, default, oc),
                              sources, outs))
        else:
            _, info, body, sources, default = st
            if in_kernel_loop(backend, info, body):
                lg, spec, checks, relaxed = loop_graph(info, body)
                steps.append(_KernelLoop(
                    info, _compile_loop(kernel, backend, lg, spec, default, relaxed), sources,
                    StepChecks(lg.name, checks, info.index) if checks else None,
                    _host_loop(kernel, backend, info, body, sources, default)))
                continue
            steps.append(_Loop(info, _compile(kernel, backend, body, body.name, default, ()),
                               sources))
    return Program(graph, backend, steps, outc)


class ProgramText:
    """What ``kernel.lower``/``kernel.source`` show for a kernel with loops: the host loop
    and, inside, what each part and body lowers to (or the backend's source of it)."""

    def __init__(self, lines):
        self.lines = lines

    def __str__(self) -> str:
        return "\n".join(self.lines)

    __repr__ = __str__


def describe(kernel, backend, sig, graph, source: bool = False, indent: str = "") -> ProgramText:
    """The ProgramText of ``graph`` for ``backend`` (``source``: the backend's text)."""
    from . import dispatch
    from ..frontend.fori import has_loops
    from ..ir.printer import format_expr
    outc = sig.out_contiguous or (True,) * len(graph.outputs)
    kernel, plan = _plan(kernel, graph, outc)
    lines = [f"{indent}# {graph.name}: a host program (kd.fori_loop; kdsl.runtime.fori_program)"]

    def show(g, default, oc, pad):
        part = _Part(kernel, g.name, _hints_for(kernel, g, default))
        part._names = _all_names(kernel)
        if has_loops(g):
            lines.extend(describe(part, backend, _sig_of(g, oc), g, source, pad).lines)
            return
        req = dispatch.prepare(part, backend, _sig_of(g, oc), g)
        text = backend.source(req) if source else dispatch.lower_request(backend, req)
        lines.extend(pad + ln for ln in str(text).splitlines())

    for st in plan:
        if st[0] == "part":
            _, part, _src, outs, default, oc = st
            lines.append(f"{indent}# part: computes {', '.join(t.name for t in outs)}")
            show(part, default, oc, indent)
        else:
            _, info, body, _src, default = st
            at = f" (kd.fori_loop at {info.loc.short})" if info.loc is not None else ""
            if in_kernel_loop(backend, info, body):
                lg, spec, _checks, relaxed = loop_graph(info, body)
                lines.append(f"{indent}# for {info.index.name} in range({format_expr(info.lower)}, "
                             f"{format_expr(info.upper)}): inside one kernel{at}, every step "
                             "in the kernel below")
                if relaxed:
                    lines.append(f"{indent}# (indices under a kd.where reading the carries: "
                                 "checked on the whole domain first; where that fails, the "
                                 "call runs a host loop, one launch per step)")
                part = _Part(kernel, lg.name, _hints_for(kernel, lg, default))
                part._names = _all_names(kernel)
                req = _loop_request(part, backend, lg, spec)
                text = backend.source(req) if source else dispatch.lower_request(backend, req)
                lines.extend(indent + ln for ln in str(text).splitlines())
                continue
            lines.append(f"{indent}for {info.index.name} in range({format_expr(info.lower)}, "
                         f"{format_expr(info.upper)}):  # host loop{at}: one launch per step, "
                         "carries in two buffers each")
            show(body, default, (), indent + "    ")
    return ProgramText(lines)


def _sig_of(graph, out_contiguous) -> Signature:
    params = tuple(ScalarSig(p.dtype) if isinstance(p, n.Var) else
                   ArraySig(p.dtype, (None,) * p.ndim, p.op.contiguous) for p in graph.params)
    return Signature(params, tuple(out_contiguous))


def _reads_of(group) -> list:
    from ..frontend.fori import LoopInfo
    if isinstance(group, LoopInfo):
        return list(group.inits) + list(group.captured)
    return [t for s in group for t in s.reads()]


def _collect_names(graph, names: set) -> None:
    """Every stage name of ``graph`` and of its loop bodies (hint routing)."""
    from ..frontend.fori import LoopStage
    todo = list(graph.stages)
    while todo:
        s = todo.pop()
        names.add(s.name)
        if isinstance(s, LoopStage):
            todo += [b for b in s.loop.body_stages if b.name not in names]
