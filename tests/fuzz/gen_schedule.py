"""Schedules: random hint sets and random primitive sequences, legal by construction.

A primitive sequence is generated against a *live* ``Schedule`` of the kernel's
traced graph: each step is chosen among the primitives whose documented
preconditions hold in the current state (``PRIMITIVES``: name, weight, the
profiles it belongs to, a generator), rendered as one line of a schedule
function, and applied to the live schedule by executing that same line.  So the
schedule a case runs is exactly the text in its reproducer.

Profiles say which primitives a backend understands: ``host`` (numpy, interp,
cpu) and ``gpu`` (adds ``bind``, cross-thread reductions, ``cache_read`` into
shared memory; for a SIMT interpreter or ``cuda``).  A new primitive is one
more ``Prim`` entry; a new backend names its profile in ``backends.py``.

Outcome of generation (``SchedSpec``): the lines, what kdsl rejected that the
model thought legal (with kdsl's message), and whether the last line is a
deliberately illegal primitive (then the kernel call must raise a fair
ScheduleError).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from kdsl.errors import KdslUserError
from kdsl.ir import nodes as n
from kdsl.schedule.records import AttachKind

SERIAL = n.ForKind.SERIAL


@dataclass
class SchedSpec:
    """A generated schedule: ``kind`` 'none', 'hints' (``hints`` dict) or 'explicit' (``lines``)."""

    kind: str = "none"
    hints: dict = field(default_factory=dict)
    lines: list = field(default_factory=list)
    illegal: str | None = None         # what the deliberately illegal step does
    meaningful: bool = True            # hints: a combination that must compose
    rejected: list = field(default_factory=list)   # (line, error type, message)
    crashed: tuple | None = None       # (line, exception) raised by a primitive at generation

    def render(self, target: str) -> tuple[str, str]:
        """(decorator line or '', schedule-function text or '') for ``target``."""
        if self.kind == "hints":
            args = "".join(f", {k}={v!r}" for k, v in self.hints.items())
            return f"@kd.schedule({target!r}{args})", ""
        if self.kind == "explicit":
            body = "\n".join("    " + ln for ln in self.lines) or "    pass"
            return "", f"def schedule(s):\n{body}\n"
        return "", ""


# ------------------------------------------------------------------ live state helpers
class Live:
    """The live schedule plus the namespace its lines run in."""

    def __init__(self, sched, rng):
        self.s, self.rng = sched, rng
        self.ns = {"s": sched}
        self.alias = {}              # stage name -> local variable in the schedule function
        self.lines = []

    def p(self, x):
        return bool(self.rng.random() < x)

    def choice(self, seq):
        seq = list(seq)
        return seq[int(self.rng.integers(len(seq)))] if seq else None

    def stage_var(self, name: str) -> str:
        """The local name of a stage handle (adds ``st0 = s["sum"]`` the first time)."""
        v = self.alias.get(name)
        if v is None:
            v = f"st{len(self.alias)}"
            self.alias[name] = v
            self.run(f"{v} = s[{name!r}]")
        return v

    def run(self, line: str):
        exec(compile(line, "<schedule>", "exec"), {"kd": _kd()}, self.ns)
        self.lines.append(line)

    def ax(self, h, a) -> str:
        return f"{self.stage_var(h.name)}.axis({a.name!r})"

    # facts
    def stages(self):
        return [h for h in self.s.stages if h.attach is not AttachKind.INLINE]

    def is_output(self, h) -> bool:
        return h.stage.output in self.s.output_tensors()

    @staticmethod
    def free(h, a) -> bool:
        attr = h.attrs.get(a)
        return attr is None or attr.kind is SERIAL

    @staticmethod
    def unique(h, a) -> bool:
        return sum(1 for b in h.leaf if b.name == a.name) == 1

    @staticmethod
    def const_extent(a):
        e = a.dom.extent
        return e.value if isinstance(e, n.Const) else None


def _kd():
    import kdsl
    return kdsl


# ------------------------------------------------------------------ primitives (legal)
def p_split(L: Live):
    cands = [(h, a) for h in L.stages() for a in h.leaf if L.free(h, a) and L.unique(h, a)]
    if not cands:
        return None
    h, a = L.choice(cands)
    if L.p(0.15):
        return f"{L.stage_var(h.name)}.split({L.ax(h, a)}, nparts={L.choice([2, 3, 4])})"
    f = L.choice([1, 2, 2, 3, 4, 4, 5, 7, 8, 8, 16, 32])
    return f"{L.stage_var(h.name)}.split({L.ax(h, a)}, factor={f})"


def p_tile(L: Live):
    cands = [h for h in L.stages() if sum(1 for a in h.leaf if L.free(h, a)
                                          and a.kind is n.IterKind.SPATIAL) >= 2]
    h = L.choice(cands)
    if h is None:
        return None
    sp = [a for a in h.leaf if L.free(h, a) and a.kind is n.IterKind.SPATIAL and L.unique(h, a)]
    if len(sp) < 2:
        return None
    x, y = sp[0], sp[1]
    fx, fy = L.choice([2, 3, 4, 8]), L.choice([2, 4, 5, 16])
    return f"{L.stage_var(h.name)}.tile({L.ax(h, x)}, {L.ax(h, y)}, {fx}, {fy})"


def p_fuse(L: Live):
    cands = []
    for h in L.stages():
        for a, b in zip(h.leaf, h.leaf[1:]):
            if a.kind is b.kind and L.free(h, a) and L.free(h, b) and L.unique(h, a) and L.unique(h, b):
                cands.append((h, a, b))
    if not cands:
        return None
    h, a, b = L.choice(cands)
    return f"{L.stage_var(h.name)}.fuse({L.ax(h, a)}, {L.ax(h, b)})"


def p_reorder(L: Live):
    cands = [h for h in L.stages() if len(h.leaf) >= 2 and all(L.unique(h, a) for a in h.leaf)]
    h = L.choice(cands)
    if h is None:
        return None
    k = int(L.rng.integers(2, len(h.leaf) + 1))
    pick = [h.leaf[int(i)] for i in L.rng.choice(len(h.leaf), k, replace=False)]
    return f"{L.stage_var(h.name)}.reorder({', '.join(L.ax(h, a) for a in pick)})"


def _spatial_free(L: Live) -> list:
    """(stage, leaf axis) pairs a parallel/vectorize may take: spatial, unannotated, unique."""
    return [(h, a) for h in L.stages() for a in h.leaf
            if a.kind is n.IterKind.SPATIAL and L.free(h, a) and L.unique(h, a)]


def p_parallel(L: Live):
    cands = _spatial_free(L)
    if not cands:
        return None
    outer = [c for c in cands if c[0].leaf.index(c[1]) == 0]
    h, a = L.choice(outer) if outer and L.p(0.7) else L.choice(cands)
    return f"{L.stage_var(h.name)}.parallel({L.ax(h, a)})"


def p_vectorize(L: Live):
    cands = _spatial_free(L)
    if not cands:
        return None
    inner = [c for c in cands if c[0].leaf[-1] is c[1] and (L.const_extent(c[1]) or 99) <= 64]
    h, a = L.choice(inner) if inner and L.p(0.8) else L.choice(cands)
    return f"{L.stage_var(h.name)}.vectorize({L.ax(h, a)})"


def p_unroll(L: Live):
    cands = [(h, a) for h in L.stages() for a in h.leaf if L.free(h, a) and L.unique(h, a)]
    small = [c for c in cands if (L.const_extent(c[1]) or 999) <= 16]
    if small and L.p(0.9):
        h, a = L.choice(small)
    elif cands and L.p(0.3):
        h, a = L.choice(cands)
    else:
        return None
    return f"{L.stage_var(h.name)}.unroll({L.ax(h, a)})"


def p_rfactor(L: Live):
    cands = []
    for h in L.stages():
        red = [a for a in h.leaf if a.kind is n.IterKind.REDUCE]
        if not h.stage.is_reduction or not red or h.attach is not AttachKind.ROOT:
            continue
        if any(a.kind is n.IterKind.REDUCE for a in h.attrs):
            continue
        cands += [(h, a) for a in red if L.unique(h, a)]
    if not cands:
        return None
    h, a = L.choice(cands)
    return f"s.rfactor({L.stage_var(h.name)}, {L.ax(h, a)})"


def p_compute_at(L: Live):
    cands = []
    for h in L.stages():
        if L.is_output(h) or h.attach is not AttachKind.ROOT:
            continue
        for t in L.stages():
            if t is h or not t.leaf:
                continue
            # a direct consumer; sometimes a later stage that reads it through others (legal
            # when that loop encloses every reader) or a producer it reads elementwise
            if L.s.reads(t, h) or (L.p(0.15) and L.s.depends(t, h)) or (
                    L.p(0.1) and L.s.reads(h, t) and not h.stage.is_reduction):
                cands += [(h, t, a) for a in t.leaf if L.unique(t, a)]
    if not cands:
        return None
    h, t, a = L.choice(cands)
    return f"{L.stage_var(h.name)}.compute_at({L.stage_var(t.name)}, {L.ax(t, a)})"


def p_compute_inline(L: Live):
    cands = [h for h in L.stages() if not h.stage.is_reduction and not L.is_output(h)
             and h.attach is AttachKind.ROOT]
    h = L.choice(cands)
    return None if h is None else f"{L.stage_var(h.name)}.compute_inline()"


def p_cache_write(L: Live):
    names = {h.name for h in L.s.stages}
    cands = [h for h in L.stages() if not h.relations and not h.attrs and h.attach is AttachKind.ROOT
             and h.stage.origin not in ("cache_write", "cache_read") and f"{h.name}.local" not in names]
    h = L.choice(cands)
    return None if h is None else f"s.cache_write({L.stage_var(h.name)}, 'local')"


def p_cache_read(L: Live, scope="local"):
    pairs = []
    for h in L.stages():
        for t in h.stage.reads():
            pairs.append((t, h))
    if not pairs:
        return None
    t, h = L.choice(pairs)
    return f"s.cache_read({t.name!r}, {scope!r}, [{L.stage_var(h.name)}])"


# GPU profile
_BLOCK, _THREAD = ["blockIdx.x", "blockIdx.y"], ["threadIdx.x", "threadIdx.y"]


def p_bind(L: Live):
    cands = [(h, a) for h in L.stages() for a in h.leaf if L.free(h, a) and L.unique(h, a)]
    if not cands:
        return None
    h, a = L.choice(cands)
    used = {attr.thread.value for attr in h.attrs.values() if attr.thread is not None}
    if a.kind is n.IterKind.REDUCE:
        tags = [t for t in _THREAD if t not in used]
    else:
        tags = [t for t in (_BLOCK if h.leaf.index(a) == 0 else _THREAD + _BLOCK) if t not in used]
    tag = L.choice(tags)
    return None if tag is None else f"{L.stage_var(h.name)}.bind({L.ax(h, a)}, {tag!r})"


def p_cache_shared(L: Live):
    return p_cache_read(L, "shared")


@dataclass(frozen=True)
class Prim:
    name: str
    weight: float
    profiles: tuple
    gen: object


PRIMITIVES = [
    Prim("split", 6, ("host", "gpu"), p_split),
    Prim("tile", 1.5, ("host", "gpu"), p_tile),
    Prim("fuse", 2, ("host", "gpu"), p_fuse),
    Prim("reorder", 2.5, ("host", "gpu"), p_reorder),
    Prim("parallel", 2, ("host",), p_parallel),
    Prim("vectorize", 2, ("host", "gpu"), p_vectorize),
    Prim("unroll", 1.5, ("host", "gpu"), p_unroll),
    Prim("rfactor", 2, ("host", "gpu"), p_rfactor),
    Prim("compute_at", 3, ("host", "gpu"), p_compute_at),
    Prim("compute_inline", 1.5, ("host", "gpu"), p_compute_inline),
    Prim("cache_write", 0.7, ("host", "gpu"), p_cache_write),
    Prim("cache_read", 0.5, ("host",), p_cache_read),
    Prim("bind", 4, ("gpu",), p_bind),
    Prim("cache_read_shared", 1, ("gpu",), p_cache_shared),
]


# ------------------------------------------------------------------ illegal primitives
def i_reduce_marked(L: Live):
    c = [(h, a) for h in L.stages() for a in h.leaf if a.kind is n.IterKind.REDUCE and L.unique(h, a)]
    if not c:
        return None
    h, a = L.choice(c)
    return f"{L.stage_var(h.name)}.{L.choice(['parallel', 'vectorize'])}({L.ax(h, a)})", \
        "marks a reduction axis parallel/vectorized"


def i_bad_factor(L: Live):
    c = [(h, a) for h in L.stages() for a in h.leaf if L.unique(h, a) and L.free(h, a)]
    if not c:
        return None
    h, a = L.choice(c)
    return f"{L.stage_var(h.name)}.split({L.ax(h, a)}, factor={L.choice([0, -2, 1.5])})", \
        "splits by a factor that is not a positive int"


def i_fuse_gap(L: Live):
    c = [h for h in L.stages() if len(h.leaf) >= 3 and all(L.unique(h, a) for a in h.leaf)]
    h = L.choice(c)
    if h is None:
        return None
    return f"{L.stage_var(h.name)}.fuse({L.ax(h, h.leaf[0])}, {L.ax(h, h.leaf[2])})", \
        "fuses axes that are not adjacent"


def i_inline_bad(L: Live):
    c = [h for h in L.stages() if h.stage.is_reduction or L.is_output(h)]
    h = L.choice(c)
    return None if h is None else (f"{L.stage_var(h.name)}.compute_inline()",
                                   "inlines a reduction or an output")


def i_unknown_axis(L: Live):
    h = L.choice(L.stages())
    return None if h is None else (f"{L.stage_var(h.name)}.split({L.stage_var(h.name)}.axis('zz'), factor=2)",
                                   "names an axis that does not exist")


def i_unknown_stage(L: Live):
    return "s['no_such_stage']", "names a stage that does not exist"


def i_stale_axis(L: Live):
    c = [(h, a) for h in L.stages() for a in h.leaf if L.unique(h, a) and L.free(h, a)]
    if not c:
        return None
    h, a = L.choice(c)
    v = L.stage_var(h.name)
    return (f"_ax = {L.ax(h, a)}; {v}.split(_ax, factor=2); {v}.split(_ax, factor=3)",
            "splits an axis that was already split")


def i_rfactor_spatial(L: Live):
    c = [(h, a) for h in L.stages() if h.stage.is_reduction for a in h.leaf
         if a.kind is n.IterKind.SPATIAL and L.unique(h, a)]
    if not c:
        return None
    h, a = L.choice(c)
    return f"s.rfactor({L.stage_var(h.name)}, {L.ax(h, a)})", "rfactors a spatial axis"


def i_output_at(L: Live):
    outs = [h for h in L.stages() if L.is_output(h)]
    if not outs:
        return None
    h = L.choice(outs)
    # a consumer of the output, or a stage unrelated to it (never a producer it reads)
    others = [t for t in L.stages() if t.leaf and t is not h and not L.s.reads(h, t)
              and not L.s.depends(h, t)]
    t = L.choice(others)
    if t is None:
        return None
    return f"{L.stage_var(h.name)}.compute_at({L.stage_var(t.name)}, {L.ax(t, t.leaf[0])})", \
        "attaches a kernel output (or an unrelated stage)"


ILLEGAL = [i_reduce_marked, i_bad_factor, i_fuse_gap, i_inline_bad, i_unknown_axis,
           i_unknown_stage, i_stale_axis, i_rfactor_spatial, i_output_at]


# ------------------------------------------------------------------ generation
def _unfinished(sched, spec) -> bool:
    """True when the finished schedule is illegal (a placement conflict that primitives may
    leave for a later one to fix, TVM-style, checked by ``Schedule.finish``): the kernel call
    must then raise a fair ScheduleError (``spec.illegal``)."""
    try:
        sched.finish()
    except KdslUserError as e:
        spec.rejected.append(("finish", "", type(e).__name__, e.message, e.hint))
        spec.illegal = f"finished schedule: {e.message}"
        return True
    return False


def explicit(sched, rng, profile="host", steps=None, p_illegal=0.06) -> SchedSpec:
    """A random primitive sequence for ``sched`` (a live kdsl Schedule)."""
    L = Live(sched, rng)
    prims = [p for p in PRIMITIVES if profile in p.profiles]
    w = [p.weight for p in prims]
    tot = sum(w)
    steps = steps if steps is not None else int(rng.integers(1, 7))
    spec = SchedSpec("explicit")
    done = 0
    for _ in range(steps * 3):
        if done >= steps:
            break
        prim = prims[int(rng.choice(len(prims), p=[x / tot for x in w]))]
        line = prim.gen(L)
        if line is None:
            continue
        n_before = len(L.lines)
        try:
            L.run(line)
            done += 1
        except KdslUserError as e:
            del L.lines[n_before:]
            spec.rejected.append((prim.name, line, type(e).__name__, e.message, e.hint))
            if not _fair(e):
                L.lines.append(line)   # the kernel call will show the unfair error
                break
        except Exception as e:            # a primitive itself broke: keep it, the call shows it
            spec.crashed = (line, f"{type(e).__name__}: {e}")
            L.lines.append(line)
            break
    if spec.crashed is None and _unfinished(sched, spec):
        spec.lines = L.lines
        return spec
    if spec.crashed is None and rng.random() < p_illegal:
        for _ in range(4):
            got = ILLEGAL[int(rng.integers(len(ILLEGAL)))](L)
            if got is None:
                continue
            line, what = got
            spec.illegal = what
            try:
                L.run(line)
            except Exception:
                L.lines.append(line)
            break
    spec.lines = L.lines
    return spec


def hints(sched, rng, p_invalid=0.06) -> SchedSpec:
    """A random ``@kd.schedule`` hint set for ``sched``."""
    L = Live(sched, rng)
    stages = [h for h in sched.stages]
    h = sched.outputs[0]
    hv = {}
    if len(stages) > 1 and L.p(0.2):
        h = L.choice(stages)
        hv["stage"] = h.name
    sp = [a.name for a in h.axes]
    meaningful = True
    if L.p(0.5):
        hv["parallel"] = True if not sp or L.p(0.5) else L.choice(sp)
        meaningful &= bool(sp)
    if L.p(0.5):
        hv["vectorize"] = L.choice([2, 4, 8, 16]) if not sp or L.p(0.7) else sp[-1]
        meaningful &= bool(sp)
    if L.p(0.4):
        hv["unroll"] = L.choice([2, 4, 8]) if L.p(0.7) or not sp else L.choice(sp)
    if L.p(0.3) and sp:
        hv["tile"] = {a: L.choice([2, 4, 8, 16, 32]) for a in sp[-2:] if L.p(0.8)} or {sp[-1]: 8}
    if h.stage.is_reduction and L.p(0.4):
        hv["rfactor"] = L.choice([2, 4, 8, 16])
    named = [hv[k] for k in ("parallel", "vectorize", "unroll") if isinstance(hv.get(k), str)]
    if len(named) != len(set(named)):    # one loop asked to be two things: a fair rejection
        meaningful = False
    info = getattr(h.stage, "scan", None)
    if hasattr(info, "init_steps") and sp[info.axis] in (
            [hv.get("parallel"), hv.get("vectorize")] + list(hv.get("tile", {}))):
        meaningful = False               # a kd.scan's axis named: it stays in order (refused)
    if not any(k in hv for k in ("parallel", "vectorize", "unroll", "tile", "rfactor")):
        hv["parallel"] = True
        meaningful &= bool(sp)
    spec = SchedSpec("hints", hv, meaningful=meaningful)
    if L.p(p_invalid):
        bad = L.choice([("vectorize", 0), ("unroll", 1.5), ("threads", -2), ("stages", 1),
                        ("tile", {"zz": 4}), ("parallel", "zz"), ("vectorize", -4),
                        ("rfactor", 0), ("unroll", "zz")])
        hv[bad[0]] = bad[1]
        spec.illegal = f"hint {bad[0]}={bad[1]!r}"
        spec.meaningful = False
    return spec


def _fair(e) -> bool:
    from .check import fairness
    return not fairness(e, explicit=True)


# ------------------------------------------------------------------ TVM-style GPU schedules
def gpu_tvm(sched, rng) -> SchedSpec:
    """A TVM-style GPU schedule for any generated kernel (profile ``gpu-tvm``, backend
    ``interp-cuda-tvm``): elementwise intermediates inlined (or kept), then every root stage
    its own kernel: spatial axes fused and split over ``blockIdx.x`` x ``threadIdx.x`` (or
    ``threadIdx.y`` when its reduction is cross-thread: reduction axes fused, split into
    ``nparts`` bound to ``threadIdx.x``).  Each line runs on the live schedule; a fair refusal
    drops it (``rejected``), an unfair one is kept for the call to show."""
    L = Live(sched, rng)
    spec = SchedSpec("explicit")

    def step(line) -> bool:
        n_before = len(L.lines)
        try:
            L.run(line)
            return True
        except KdslUserError as e:
            del L.lines[n_before:]
            spec.rejected.append(("gpu_tvm", line, type(e).__name__, e.message, e.hint))
            if not _fair(e):
                L.lines.append(line)
                raise _Stop from None
            return False
        except Exception as e:
            spec.crashed = (line, f"{type(e).__name__}: {e}")
            L.lines.append(line)
            raise _Stop from None

    try:
        for h in list(L.stages()):
            zero_d = not any(a.kind is n.IterKind.SPATIAL for a in h.leaf)   # nothing to bind: inline it
            if not h.stage.is_reduction and not L.is_output(h) and (zero_d or L.p(0.6)):
                step(f"{L.stage_var(h.name)}.compute_inline()")
        for h in list(L.stages()):
            if h.attach is not AttachKind.ROOT:
                continue
            v = L.stage_var(h.name)
            sp = [a for a in h.leaf if a.kind is n.IterKind.SPATIAL]
            red = [a for a in h.leaf if a.kind is n.IterKind.REDUCE]
            xthread = bool(red) and (not sp or L.p(0.4))   # a 0-d reduction: its threads are all it can bind
            T = L.choice([1, 4, 32, 64]) if not xthread else L.choice([1, 2, 4, 8])
            if sp:
                f = L.ax(h, sp[0]) if len(sp) == 1 else f"{v}.fuse({', '.join(L.ax(h, a) for a in sp)})"
                if step(f"{v}_bo, {v}_bt = {v}.split({f}, factor={T})"):
                    step(f"{v}.bind({v}_bo, 'blockIdx.x')")
                    step(f"{v}.bind({v}_bt, {'threadIdx.y' if xthread else 'threadIdx.x'!r})")
            if xthread:
                r = L.ax(h, red[0]) if len(red) == 1 else f"{v}.fuse({', '.join(L.ax(h, a) for a in red)})"
                if step(f"{v}_kt, {v}_ks = {v}.split({r}, nparts={L.choice([2, 8, 32])})"):
                    step(f"{v}.bind({v}_kt, 'threadIdx.x')")
    except _Stop:
        pass
    spec.lines = L.lines
    return spec


class _Stop(Exception):
    """Generation ends: a primitive broke or refused unfairly (the call shows it)."""
