"""Placement legality: where each stage runs, and whether every read sees finished values.

SPEC: an illegal primitive raises at that call.  ``check(sched, call)`` runs
after every primitive that moves stages or loops (compute_at, compute_inline,
reorder, rfactor, the cache primitives...), so a schedule is legal after each
call that returns; when a later call breaks an earlier placement, the error
names both calls.  Lowering builds the same ``Placement`` (root order, which
attached stages keep a whole buffer) and so never meets an illegal placement.

The model follows the lowering (``passes/loop_nests``): root stages run in
order; a stage attached at loop ``x`` of ``T`` runs in the body of ``x``:
producers of ``T`` before ``T``'s inner loops, other stages after them.

* A consumer ``U`` attached to its producer ``T`` reads ``T`` at its own axes
  (in any order) or at indices along axes of ``T`` that one iteration of ``x``
  computes whole (``sum[i, 0]`` in a softmax), and outside ``T``'s reduction
  loops.  ``T`` must compute all of itself over the run (not be a producer
  attached elsewhere) when ``U`` is an output or read outside ``x``; ``U`` then
  keeps a whole buffer (``full_buffer``).
* A read of ``P`` by ``R`` inside ``P``'s own loops is legal when ``R`` is
  attached to ``P`` through consumer attachments and reads only what the
  current iteration computed.  Otherwise ``P``'s nest comes before ``R``'s
  statement and ``P``'s buffer is in scope: a producer attached at ``x``
  serves readers inside ``x`` only; a consumer attached at ``x`` serves
  readers inside ``x`` attached to the same loop that read it elementwise.
* Roots are ordered so that a root and everything attached inside it come
  after the roots they read (``order``); a cycle there is an error.
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..ir import nodes as n
from ..frontend.scan_info import reads_earlier_steps
from ..ir.visitor import Mutator, collect, substitute
from .records import AttachKind, Split, where


def _body(d: int) -> tuple:
    """The path into the body of loop ``d`` of a nest: (j, 1, 0) for j = 0 .. d-1."""
    return _BODY[:d] if d <= len(_BODY) else tuple((j, 1, 0) for j in range(d))


_BODY = tuple((j, 1, 0) for j in range(64))


def _names(ivs) -> str:
    return ", ".join(a.name for a in ivs) or "(none)"


def consumer_dims(reads, h, t):
    """How consumer ``h`` reads producer ``t``: per axis of ``t``, the axis of ``h`` that indexes
    it (the same one in every read) or None for an index free of ``h``'s spatial axes
    (a broadcast ``t[i, 0]``, a reduction variable).  None when some index mixes an axis
    into an expression (``t[i + 1]``) or uses one axis twice.
    """
    own = {a.var: a for a in h.stage.axes}
    dims = None
    for r in reads:
        cur, used = [], set()
        for idx in r.indices:
            a = own.get(idx) if isinstance(idx, n.Var) else None
            if a is None:
                if any(v in own for v in collect(idx, lambda x: isinstance(x, n.Var))):
                    return None
            elif a in used:
                return None
            else:
                used.add(a)
            cur.append(a)
        if dims is None:
            dims = cur
        elif any(x is not y for x, y in zip(dims, cur)):
            return None
    return dims


def fixed_roots(t, d: int) -> set:
    """Root axes of ``t`` that some loop at or outside position ``d`` of its nest iterates over."""
    roots = {a: {a} for a in list(t.stage.axes) + list(t.stage.reduce_axes)}
    for rel in t.relations:
        if isinstance(rel, Split):
            roots[rel.outer] = roots[rel.inner] = roots.get(rel.parent, set())
        else:
            roots[rel.fused] = roots.get(rel.outer, set()) | roots.get(rel.inner, set())
    out = set()
    for iv in t.leaf[:d + 1]:
        out |= roots.get(iv, set())
    return out


class _Inline(Mutator):
    """Reads of inlined tensors -> their (already inlined) bodies."""

    def __init__(self, bodies: dict):
        super().__init__()
        self.bodies = bodies     # Tensor -> (axes, body)

    def visit_TensorRead(self, r):
        r = self.generic(r)
        hit = self.bodies.get(r.tensor)
        if hit is None:
            return r
        axes, body = hit
        return substitute(body, {a.var: i for a, i in zip(axes, r.indices)})


class Placement:
    """The placement structure of a schedule (see the module docstring); raises ScheduleError."""

    def __init__(self, sched, call: str = "lowering"):
        self.sched, self.call = sched, call
        stages = sched.stages
        self.index = {h: k for k, h in enumerate(stages)}
        self.handles = [h for h in stages if h.attach is not AttachKind.INLINE]
        self.owner = {}
        for h in stages:
            for t in h.stage.values:
                self.owner[t] = h
        self._bodies(stages)
        self._loops: dict = {}
        self.kind: dict = {}        # attached handle -> "producer" | "consumer"
        attached = [h for h in self.handles if h.attach is AttachKind.AT]
        for h in attached:
            self._check_attach(h)
        for h in attached:
            self._check_cycle(h)
        for h in attached:
            if self.kind[h] == "consumer":
                self._check_consumer(h, h.attach_stage, h.attach_axis)
        for h in self.handles:
            self.loops(h)
        outputs = set(sched.output_tensors())
        for h in self.handles:
            if self.kind.get(h) == "consumer" and h.stage.output in outputs:
                self._check_covers(h, "it is a kernel output: all of it is needed")
        self.full_buffer: set = set()
        for r in self.handles:
            for p, reads in self.reads[r].items():
                self._check_scope(p, r, reads)
        self.cluster = {h: self._root(h) for h in self.handles}
        self.order = self._root_order()
        self._rank = {h: k for k, h in enumerate(self.order)}
        self.attached: dict = {}    # (T, iv) -> [handles], in stage order
        for h in self.handles:
            if h.attach is AttachKind.AT:
                self.attached.setdefault((h.attach_stage, h.attach_axis), []).append(h)
        self._slot: dict = {}       # attached handle -> (0, k) before its stage's inner loops, (2, k) after
        for here in self.attached.values():
            before = [a for a in here if self.kind.get(a) == "producer"]
            after = [a for a in here if self.kind.get(a) != "producer"]
            self._slot.update({a: (0, k) for k, a in enumerate(before)})
            self._slot.update({a: (2, k) for k, a in enumerate(after)})
        self._pos: dict = {}
        self._stmt: dict = {}
        for r in self.handles:
            for p in self.reads[r]:
                self._check_order(p, r)

    # ------------------------------------------------------------ bodies and reads
    def _bodies(self, stages):
        """Effective bodies (inlined stages substituted) and per-reader reads by producer."""
        inl = {}
        for h in stages:    # topological: an inlined stage's own reads are inlined already
            if h.attach is AttachKind.INLINE:
                body = _Inline(inl).visit(h.stage.body) if inl else h.stage.body
                inl[h.stage.output] = (h.stage.axes, body)
        self.body = {}
        self.reads = {}     # reader -> {producer handle: [TensorRead]}
        self.readers = {h: [] for h in self.handles}
        cache = self.sched.__dict__.setdefault("_reads_cache", {})
        for h in self.handles:
            body = _Inline(inl).visit(h.stage.body) if inl else h.stage.body
            self.body[h] = body
            hit = cache.get(id(body))
            if hit is None or hit[0] is not body:     # bodies are immutable: collect each once
                hit = (body, collect(body, lambda x: isinstance(x, n.TensorRead)))
                if body is h.stage.body:
                    cache[id(body)] = hit
            per: dict = {}
            for r in hit[1]:
                p = self.owner.get(r.tensor)
                if p is not None and p is not h and not reads_earlier_steps(h.stage, p.stage):
                    per.setdefault(p, []).append(r)
            self.reads[h] = per
            for p in per:
                if p in self.readers:
                    self.readers[p].append(h)
        self._anc: dict = {}

    def depends(self, consumer, producer) -> bool:
        """``consumer`` reads ``producer``'s values, directly or through other stages."""
        return bool(self._ancestors(consumer) >> self.index[producer] & 1)

    def _ancestors(self, h) -> int:
        """Bit set (by stage index) of every stage ``h`` reads through (iterative: deep graphs)."""
        todo, waiting = [h], set()
        while todo:
            cur = todo[-1]
            if cur in self._anc:
                todo.pop()
                continue
            missing = [p for p in self.reads[cur] if p not in self._anc]
            if missing:
                # everything pushed while cur waits is an ancestor of cur: reaching a waiting
                # stage again is a cycle (an internal error, never a hang)
                if any(p in waiting for p in missing):
                    from ..errors import InternalCompilerError
                    raise InternalCompilerError(f"stage {cur.name} reads itself through a cycle "
                                                "of stages (a schedule primitive made it)")
                waiting.add(cur)
                todo.extend(missing)
                continue
            waiting.discard(cur)
            bits = 0
            for p in self.reads[cur]:
                bits |= self._anc[p] | (1 << self.index[p])
            self._anc[cur] = bits
            todo.pop()
        return self._anc[h]

    # ------------------------------------------------------------ attachments
    def _fail(self, msg: str, hint: str | None = None):
        raise ScheduleError(f"{self.call}: {msg}", hint=hint)

    def _at(self, h) -> str:
        """``compute_at (at file.py:12)`` for a stage's attach call."""
        return f"compute_at{where(getattr(h, 'attach_loc', None))}"

    def _check_attach(self, h):
        t, ax = h.attach_stage, h.attach_axis
        if t.attach is AttachKind.INLINE:
            self._fail(f"stage {h.name} is attached to loop {ax.name} of stage {t.name} ({self._at(h)}), but "
                       f"{t.name} is inlined and has no loops",
                       hint=f"compute {t.name} in its own loops (compute_root) or attach {h.name} elsewhere")
        if ax not in t.leaf:
            self._fail(f"stage {h.name} is attached to loop {ax.name} of stage {t.name} ({self._at(h)}), "
                       f"which {t.name} no longer has ({t._describe()})",
                       hint=f"attach {h.name} to one of {t.name}'s loops after changing them")
        if self.depends(t, h):
            self.kind[h] = "producer"
        elif t in self.reads[h]:
            self.kind[h] = "consumer"
        elif self.call == "compute_at":
            self._fail(f"stage {h.name} ({self._at(h)}) neither reads nor is read by stage {t.name}",
                       hint="attach a stage to a loop of a stage that uses its result (or of its producer)")
        else:
            self._fail(f"stage {h.name} is attached to loop {ax.name} of {t.name} ({self._at(h)}), and after "
                       f"this call it no longer reads {t.name} nor is read by it",
                       hint=f"call {self.call} before compute_at, or attach {h.name} to a stage it is related to")

    def _check_cycle(self, h):
        seen, cur = [h], h.attach_stage
        while cur.attach is AttachKind.AT:
            if cur in seen:
                chain = " inside ".join(x.name for x in seen + [cur])
                self._fail(f"compute_at placements form a cycle: {chain}",
                           hint="compute one of these stages at the root (compute_root)")
            seen.append(cur)
            cur = cur.attach_stage

    def _check_consumer(self, h, t, ax):
        d = t.leaf.index(ax)
        if t.stage.is_reduction:
            red = [a for a in t.leaf[:d + 1] if a.kind is n.IterKind.REDUCE]
            if red:
                self._fail(f"stage {h.name} reads the finished result of {t.name}, so it cannot be computed "
                           f"inside {t.name}'s reduction loop {red[0].name} ({self._at(h)})",
                           hint=f"attach it to a spatial loop of {t.name} outside its reduction loops "
                           f"(loops of {t.name}: {_names(t.leaf)})")
        dims = consumer_dims(self.reads[h][t], h, t)
        if dims is None:
            self._fail(f"stage {h.name} ({self._at(h)}) is computed inside loop {ax.name} of its "
                       f"producer {t.name}, so it must read {t.name} at its own axes "
                       f"({t.name}[{_names(h.stage.axes)}], in any order, or a broadcast index)",
                       hint=f"attach {t.name} inside {h.name}'s loops instead (compute_at({h.name}, axis))")
        whole = self._whole(t, d)
        for a, mine in zip(t.stage.axes, dims):
            if mine is None and a not in whole:
                self._fail(f"stage {h.name} ({self._at(h)}) reads {t.name} along {t.name}'s axis {a.name} at "
                           f"an index that is not one of its own axes, but one iteration of loop {ax.name} of "
                           f"{t.name} computes only part of that axis",
                           hint=f"attach {h.name} to a loop of {t.name} outside every loop over {a.name}")

    def _whole(self, t, d: int) -> set:
        """Root axes of ``t`` that one iteration of its loop ``d`` computes entirely."""
        fixed = fixed_roots(t, d)
        one = {a for a in t.stage.axes if type(a.dom.extent) is n.Const and a.dom.extent.value == 1}
        free = {a for a in t.stage.axes if a not in fixed}
        if t.attach is AttachKind.AT:       # t's own region is restricted by its attach point
            kind = self.kind.get(t)
            if kind != "consumer":
                free = set()
            else:
                p = t.attach_stage
                dims = consumer_dims(self.reads[t][p], t, p)
                outer = self._whole(p, p.leaf.index(t.attach_axis)) if dims is not None else set()
                mapped = {a: pa for pa, a in zip(p.stage.axes, dims or ()) if a is not None}
                free = {a for a in free if a not in mapped or mapped[a] in outer}
        return free | one

    @staticmethod
    def _elementwise(r, h) -> bool:
        return len(r.indices) == len(h.stage.axes) and all(i is a.var for i, a in zip(r.indices, h.stage.axes))

    def loops(self, h) -> list:
        """[(handle, leaf IterVar)] of every loop around ``h``'s statement, outermost first."""
        got = self._loops.get(h)
        if got is None:
            if h.attach is AttachKind.AT:
                t = h.attach_stage
                outer = self.loops(t)
                k = len(outer) - len(t.leaf) + t.leaf.index(h.attach_axis) + 1
                got = outer[:k] + [(h, iv) for iv in h.leaf]
            else:
                got = [(h, iv) for iv in h.leaf]
            self._loops[h] = got
        return got

    def _root(self, h):
        while h.attach is AttachKind.AT:
            h = h.attach_stage
        return h

    # ------------------------------------------------------------ root order
    def _root_order(self) -> list:
        """Roots in stage order, moved after the roots that their clusters read (stable)."""
        roots = [h for h in self.handles if h.attach is not AttachKind.AT]
        preds = {r: set() for r in roots}
        why = {}
        for r in self.handles:
            for p in self.reads[r]:
                if p.attach is AttachKind.INLINE:
                    continue
                a, b = self.cluster[p], self.cluster[r]
                if a is not b:
                    preds[b].add(a)
                    why.setdefault((a, b), (p, r))
        order, done = [], set()
        while len(order) < len(roots):
            ready = [r for r in roots if r not in done and preds[r] <= done]
            if not ready:
                stuck = [r for r in roots if r not in done]
                b = stuck[0]
                a = next(x for x in preds[b] if x not in done)
                p, r = why[(a, b)]
                self._fail(f"stage {r.name} is computed inside the loops of {b.name} "
                           f"({self._at(r) if r is not b else 'at the root'}) and reads {p.name}, which needs "
                           f"{b.name}'s finished result first" if r is not b else
                           f"stage {r.name} reads {p.name}, which is computed inside {a.name}'s loops "
                           f"({self._at(p)}) and needs {r.name}'s result",
                           hint="compute one of them at the root (compute_root), or attach both to the same loop")
            order.append(ready[0])
            done.add(ready[0])
        return order

    # ------------------------------------------------------------ positions
    def pos(self, h) -> tuple:
        """Where ``h``'s nest starts in program order (tuples compare like positions)."""
        got = self._pos.get(h)
        if got is None:
            if h.attach is AttachKind.AT:
                t = h.attach_stage
                d = t.leaf.index(h.attach_axis)
                got = self.pos(t) + _body(d) + ((d,) + self._slot[h],)
            else:
                got = ((self._rank[h],),)
            self._pos[h] = got
        return got

    def stmt_pos(self, h) -> tuple:
        got = self._stmt.get(h)
        if got is None:
            got = self._stmt[h] = self.pos(h) + _body(len(h.leaf))
        return got

    # ------------------------------------------------------------ reads
    def _where_runs(self, r) -> str:
        if r.attach is not AttachKind.AT:
            return f"{r.name} runs at the root"
        return f"{r.name} runs inside loop {r.attach_axis.name} of {r.attach_stage.name} ({self._at(r)})"

    def _consumer_chain(self, r, t):
        """The loop of ``t`` that ``r`` reaches through consumer attachments (or None)."""
        cur = r
        while cur.attach is AttachKind.AT and self.kind.get(cur) == "consumer":
            if cur.attach_stage is t:
                return cur.attach_axis
            cur = cur.attach_stage
        return None

    def _positions(self, h, t) -> list:
        """Per axis of ``t``: the position of the axis of ``h`` that reads it (None: a free index)."""
        dims = consumer_dims(self.reads[h][t], h, t) if t in self.reads[h] else None
        return None if dims is None else [None if a is None else h.stage.axes.index(a) for a in dims]

    def _reads_current(self, r, p, reads) -> bool:
        """``r`` runs inside ``p``'s loops through consumer attachments and reads only what the
        current iteration of ``p`` computed: each index of ``p`` is the axis of ``r`` that the
        attachments relate to that axis of ``p``, or an axis ``p`` computes whole there."""
        corr = {a: a for a in r.stage.axes}   # axis of r -> axis of the stage reached so far
        cur = r
        while True:
            if cur.attach is not AttachKind.AT or self.kind.get(cur) != "consumer":
                return False
            t = cur.attach_stage
            dims = consumer_dims(self.reads[cur][t], cur, t)
            if dims is None:
                return False
            inv = {a: pa for pa, a in zip(t.stage.axes, dims) if a is not None}
            corr = {ra: None if ca is None else inv.get(ca) for ra, ca in corr.items()}
            if t is p:
                break
            cur = t
        whole = self._whole(p, p.leaf.index(cur.attach_axis))
        mine = {a.var: a for a in r.stage.axes}
        for rd in reads:
            for pk, idx in zip(p.stage.axes, rd.indices):
                a = mine.get(idx) if isinstance(idx, n.Var) else None
                if a is not None and corr[a] is pk:
                    continue
                if a is None and any(v in mine for v in collect(idx, lambda x: isinstance(x, n.Var))):
                    return False
                if pk not in whole:
                    return False
        return True

    def _check_scope(self, p, r, reads):
        """``p``'s buffer holds what ``r`` reads, where ``r`` reads it."""
        loops_r = self.loops(r)
        own = [iv for h, iv in loops_r if h is p]
        if own:     # r runs inside p's own loops: only what this iteration wrote
            direct = r.attach is AttachKind.AT and r.attach_stage is p and self.kind.get(r) == "consumer"
            if not direct and not self._reads_current(r, p, reads):
                self._fail(f"stage {r.name} runs inside loop {own[-1].name} of {p.name} ({self._at(r)}) and "
                           f"reads {p.name}, which is not finished there",
                           hint=f"a stage computed inside {p.name}'s loops may read {p.name} only at its own "
                           f"axes, attached with compute_at({p.name}, axis); or compute {r.name} at the root")
            return
        if p.attach is not AttachKind.AT:
            return
        t, x = p.attach_stage, p.attach_axis
        inside = (t, x) in loops_r
        if self.kind[p] == "producer":
            if not inside:
                self._fail(f"stage {p.name} is computed inside loop {x.name} of {t.name} ({self._at(p)}), "
                           f"but its reader {self._where_runs(r)}, outside that loop",
                           hint=f"attach {p.name} to a loop that encloses every reader of it, or attach "
                           f"{r.name} inside loop {x.name} of {t.name} first")
            return
        if not inside:
            self._check_covers(p, f"its reader {self._where_runs(r)}, outside that loop")
            self.full_buffer.add(p)
            return
        same = (r.attach is AttachKind.AT and r.attach_stage is t and r.attach_axis is x
                and self.kind.get(r) == "consumer" and self._positions(r, t) == self._positions(p, t))
        if not same or not all(self._elementwise(y, r) for y in reads):
            self._fail(f"stage {r.name} reads {p.name}, which is computed per iteration of loop {x.name} of "
                       f"{t.name} ({self._at(p)}), but {r.name} does not read it elementwise from a stage "
                       f"attached to that same loop",
                       hint=f"attach {r.name} with compute_at({t.name}, {x.name}) or compute_at({p.name}, "
                       "axis) and read it elementwise, or compute it at the root")

    def _covers(self, h) -> bool:
        """Every element of ``h`` is computed over the whole run (not only what readers need)."""
        while h.attach is AttachKind.AT:
            if self.kind[h] == "producer":
                return False
            h = h.attach_stage
        return True

    def _check_covers(self, p, why: str):
        """A consumer attached to a stage that computes only part of itself gets only that part."""
        if self._covers(p):
            return
        t = p.attach_stage
        cur = t
        while self.kind.get(cur) != "producer":
            cur = cur.attach_stage
        self._fail(f"stage {p.name} is computed inside the loops of {t.name} ({self._at(p)}), which compute "
                   f"only the part of {cur.name} that {cur.attach_stage.name} reads ({cur.name}: {self._at(cur)}), "
                   f"but {why}",
                   hint=f"compute {p.name} at the root, or attach it where {cur.attach_stage.name} needs it")

    def _check_order(self, p, r):
        """``p``'s nest runs before ``r``'s statement (reads inside p's own loops: see _check_scope)."""
        if self.cluster[p] is self.cluster[r] and any(h is p for h, _ in self.loops(r)):
            return
        if not self.stmt_pos(r) > self.pos(p):
            self._fail(f"stage {r.name} reads {p.name} before {p.name} is computed: {self._where_runs(r)}, "
                       f"and {p.name} is computed after it ({self._describe_place(p)})",
                       hint=f"attach {p.name} to a loop that runs before {r.name}, or compute it at the root")

    def _describe_place(self, p) -> str:
        if p.attach is not AttachKind.AT:
            return "at the root"
        return f"inside loop {p.attach_axis.name} of {p.attach_stage.name}, {self._at(p)}"


def check(sched, call: str) -> Placement:
    """Validate every placement of ``sched``; raise ScheduleError naming ``call`` on a conflict."""
    return Placement(sched, call)
