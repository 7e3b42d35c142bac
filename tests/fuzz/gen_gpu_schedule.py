"""Explicit GPU schedules, TVM style (issue 24): a kernel, a random schedule function, inputs.

``generate(seed, index)`` is deterministic.  A case is one of the families below
(``FAMILIES``), each a kernel written as kdsl source, its float64 numpy oracle, and
a *recipe*: a random TVM-style GPU schedule built as a ``gpu_plan.Plan`` of steps
emitted in a random order their data flow allows (so TVM's tutorial orders come
out too).  Recipes draw from: multi-level tiling bound to blockIdx/threadIdx
(``tile`` or ``split`` + ``reorder``, ``nparts=`` or ``factor=``), ``vthread``,
``cache_write`` local, ``cache_read`` shared (block- or thread-level attach) and a
local copy of it at the inner reduction loop, cooperative fetch (fuse, split by the
block, bind; optionally vectorised), ``double_buffer`` / ``pipeline(3)``, rfactor +
cross-thread reductions, wmma / wgmma ``tensorize`` on float16 products,
``compute_inline`` / ``compute_at`` at block or thread loops, unroll/vectorize of a
thread's own loops; sizes 0 and 1, ``specialize=True`` and strided inputs.

A plan's ``intent`` says what a right answer is: ``legal`` (TVM accepts it: kdsl must
run it and match the oracle), ``may`` (a stage left unspread over its block's
threads and the like: a fair refusal or the right answer), ``illegal`` (a block of more
than 1024 threads: it must be refused).  ``features`` name the risky parts, which
``known.py`` matchers use.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .gpu_plan import Plan

F32_EPS = 2.0 ** -23


@dataclass
class GpuCase:
    seed: int
    index: int
    family: str
    kernel_src: str
    lines: list
    args: list
    expected: list            # per output: (dtype name, float64/int array, error bound array or None)
    features: set = field(default_factory=set)
    intent: str = "legal"
    why: str = ""

    @property
    def name(self) -> str:
        return f"{self.seed}:{self.index}"

    def source(self) -> str:
        body = "\n".join("    " + ln for ln in self.lines) or "    pass"
        return (f"import numpy as np\nimport kdsl as kd\n\n{self.kernel_src}\n\n"
                f"def schedule(s):\n{body}\n\n\nkern.schedule('cuda')(schedule)\n")


def _pick(rng, seq, p=None):
    seq = list(seq)
    if p is not None:
        p = np.asarray(p, np.float64)
        return seq[int(rng.choice(len(seq), p=p / p.sum()))]
    return seq[int(rng.integers(len(seq)))]


def _size(rng, big=33):
    return int(_pick(rng, [0, 1, 1, 2, 3, 5, 7, 8, 13, 16, 17, 24, 31, 32, big]))


def _deco(rng, plan: Plan) -> str:
    if rng.random() < 0.12:
        plan.feature("specialize")
        return "@kd.kernel(specialize=True)"
    return "@kd.kernel"


def _vals(rng, shape, dtype="float32", ties=False):
    if ties:
        v = rng.integers(-3, 4, size=shape).astype(np.float64)
    else:
        v = rng.integers(-16, 17, size=shape) / 8.0
    return v.astype(dtype)


def _layout(rng, a: np.ndarray, plan: Plan) -> np.ndarray:
    """``a`` as is, or the same values in a strided / transposed / offset view."""
    r = rng.random()
    if a.ndim < 1 or r < 0.7:
        return a
    plan.feature("strided")
    gap = np.nan if a.dtype.kind == "f" else -77      # garbage in the gaps a kernel must not read
    if r < 0.8 and a.ndim == 2:
        return np.asfortranarray(a)
    if r < 0.9:
        base = np.full(tuple(d * 2 for d in a.shape), gap, a.dtype)
        v = base[tuple(slice(None, None, 2) for _ in a.shape)]
        v[...] = a
        return v
    base = np.full((a.size + 1,), gap, a.dtype)         # unaligned start
    v = base[1:].reshape(a.shape)
    v[...] = a
    return v


def _sum_bound(absum, terms):
    """The float32 error bound of a sum of ``terms`` products with absolute sum ``absum``."""
    return (terms + 4) * F32_EPS * absum * 2 + 1e-30


# ------------------------------------------------------------------ shared recipe parts
def block_threads(rng, plan: Plan):
    """(TY, TX): the thread block; rarely > 1024 threads (must be refused)."""
    if rng.random() < 0.03:
        ty, tx = _pick(rng, [(32, 64), (2, 1024), (40, 32)])
        plan.mark("illegal", f"a block of {ty * tx} threads (the limit is 1024)", "threads_over_1024")
        return ty, tx
    return int(_pick(rng, [1, 1, 2, 4, 8])), int(_pick(rng, [1, 2, 4, 8, 16, 32]))


def tile2d(rng, plan: Plan, M: str, ty: int, tx: int, inner_red=(), vthread=True):
    """Tile stage ``M``'s two spatial axes over blocks and threads (and maybe vthreads).

    Gives names ``{M}_by, {M}_bx, {M}_ty, {M}_tx, {M}_yi, {M}_xi`` (and ``{M}_vy/vx``).
    ``inner_red``: (names, step) of reduction loops to put between the thread loops and
    the per-thread tile (a stage without a local accumulator)."""
    wy, wx = int(_pick(rng, [1, 1, 2, 4])), int(_pick(rng, [1, 1, 2, 4]))
    vy = vx = 1
    if vthread and rng.random() < 0.2:
        vy, vx = int(_pick(rng, [1, 2])), int(_pick(rng, [1, 2, 2]))
        if vy * vx > 1:
            plan.feature("vthread")
    BY, BX = vy * ty * wy, vx * tx * wx
    n = {k: f"{M}_{k}" for k in ("by", "bx", "ty", "tx", "yi", "xi", "vy", "vx", "yr", "xr")}
    n["BY"], n["BX"] = BY, BX
    ready = f"{M}:ready"
    if rng.random() < 0.4:
        plan.feature("tile")
        plan.add(f"{n['by']}, {n['bx']}, {n['yr']}, {n['xr']} = {M}.tile({M}.axes[0], {M}.axes[1], {BY}, {BX})",
                 needs=[M], gives=[n["by"], n["bx"], n["yr"], n["xr"]], after=[ready])
    else:
        plan.add(f"{n['by']}, {n['yr']} = {M}.split({M}.axes[0], factor={BY})",
                 needs=[M], gives=[n["by"], n["yr"]], after=[ready])
        plan.add(f"{n['bx']}, {n['xr']} = {M}.split({M}.axes[1], factor={BX})",
                 needs=[M], gives=[n["bx"], n["xr"]], after=[ready])
    order = [n["by"], n["bx"]]
    for d, v, t, w in (("y", vy, ty, wy), ("x", vx, tx, wx)):
        src = n[f"{d}r"]
        if v > 1:
            plan.add(f"{n['v' + d]}, {M}_{d}v = {M}.split({src}, nparts={v})", needs=[src],
                     gives=[n["v" + d], f"{M}_{d}v"])
            src = f"{M}_{d}v"
            order.append(n["v" + d])
        if rng.random() < 0.5:
            plan.add(f"{n['t' + d]}, {n[d + 'i']} = {M}.split({src}, nparts={t})", needs=[src],
                     gives=[n["t" + d], n[d + "i"]])
        else:
            plan.add(f"{n['t' + d]}, {n[d + 'i']} = {M}.split({src}, factor={w})", needs=[src],
                     gives=[n["t" + d], n[d + "i"]])
    order = [n["by"], n["bx"]] + [n[k] for k in ("vy", "vx") if n[k] in order] + [n["ty"], n["tx"]]
    order += list(inner_red) + [n["yi"], n["xi"]]
    plan.add(f"{M}.reorder({', '.join(order)})", needs=[M, *order], gives=[f"{M}:reordered"])
    for ax, tag in (("by", "blockIdx.y"), ("bx", "blockIdx.x"), ("ty", "threadIdx.y"), ("tx", "threadIdx.x"),
                    ("vy", "vthread.y"), ("vx", "vthread.x")):
        if ax in ("vy", "vx") and n[ax] not in order:
            continue
        plan.add(f"{M}.bind({n[ax]}, {tag!r})", needs=[M, n[ax]], gives=[f"{M}:bound:{ax}"])
    r = rng.random()
    if r < 0.12:
        plan.add(f"{M}.unroll({n['yi']})", needs=[M, n["yi"]], gives=[])
    elif r < 0.22:
        plan.feature("vectorize_out")
        plan.add(f"{M}.vectorize({n['xi']})", needs=[M, n["xi"]], gives=[])
    return n


def coop_fetch(rng, plan: Plan, X: str, at_stage: str, at_axis: str, ty: int, tx: int, tz: int = 1):
    """Attach copy stage ``X`` at ``at_stage``'s ``at_axis`` and spread it over the block's
    threads (fuse, split by the block, bind; maybe vectorised), or rarely leave it unspread."""
    plan.add(f"{X}.compute_at({at_stage}, {at_axis})", needs=[X, at_stage, at_axis], gives=[f"{X}:at"])
    if rng.random() < 0.1:
        plan.feature("fetch_unspread")   # legal: kdsl runs it on one thread + barrier
        return
    plan.add(f"{X}_f = {X}.fuse(*{X}.axes)", needs=[X], gives=[f"{X}_f"], after=[f"{X}:ready"])
    src = f"{X}_f"
    if rng.random() < 0.35:
        v = int(_pick(rng, [2, 4]))
        plan.feature("vec_copy")
        plan.add(f"{X}_g, {X}_v = {X}.split({src}, factor={v})", needs=[src], gives=[f"{X}_g", f"{X}_v"])
        plan.add(f"{X}.vectorize({X}_v)", needs=[f"{X}_v"], gives=[])
        src = f"{X}_g"
    plan.add(f"{X}_o, {X}_t = {X}.split({src}, factor={ty * tx * tz})", needs=[src], gives=[f"{X}_o", f"{X}_t"])
    if tz > 1:
        plan.add(f"{X}_zy, {X}_x = {X}.split({X}_t, factor={tx})", needs=[f"{X}_t"], gives=[f"{X}_zy", f"{X}_x"])
        plan.add(f"{X}_z, {X}_y = {X}.split({X}_zy, factor={ty})", needs=[f"{X}_zy"], gives=[f"{X}_z", f"{X}_y"])
        plan.add(f"{X}.bind({X}_z, 'threadIdx.z')", needs=[f"{X}_z"], gives=[])
    else:
        plan.add(f"{X}_y, {X}_x = {X}.split({X}_t, factor={tx})", needs=[f"{X}_t"], gives=[f"{X}_y", f"{X}_x"])
    plan.add(f"{X}.bind({X}_y, 'threadIdx.y')", needs=[f"{X}_y"], gives=[])
    plan.add(f"{X}.bind({X}_x, 'threadIdx.x')", needs=[f"{X}_x"], gives=[])
    plan.feature("coop_fetch")


def multibuffer(rng, plan: Plan, X: str, stages=None):
    """``double_buffer()`` or ``pipeline(k)`` on copy ``X`` (``stages``: the count the plan's
    other copies over the same loop use; kdsl asks for one count per loop, documented)."""
    r = rng.random()
    k = stages or plan.memo.get("stages") or (2 if r < 0.22 else 3)
    if r < 0.3:
        plan.memo["stages"] = k
        plan.feature("double_buffer" if k == 2 else "pipeline")
        plan.add(f"{X}.double_buffer()" if k == 2 and rng.random() < 0.8 else f"{X}.pipeline({k})",
                 needs=[X], gives=[])


def handle(plan: Plan, name: str, var: str | None = None, ready: bool = True):
    """``var = s[name]``; ``ready=False`` when a later ``cache_write`` must precede its transforms."""
    var = var or name.replace(".", "_")
    plan.add(f"{var} = s[{name!r}]", gives=[var] + ([f"{var}:ready"] if ready else []))
    return var
