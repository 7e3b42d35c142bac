"""Default cuda schedules: what a kernel gets on ``cuda`` (and ``interp-cuda``) without an
explicit schedule.

``schedule(sched, hints)`` gives each computed stage a ``StagePlan`` (kdsl/schedule/plan.py)
whose recipe maps it onto blocks and threads by kind (rules.kind):

* elementwise: threads over contiguous ``vec``-element vectors, blocks over the rest;
* row reductions (the reads walk the reduce axis; argmax too): a warp per row for short
  rows, a block per row for long ones, cut across blocks with a second pass when there are
  few rows (and always for a full reduction); per-thread lanes then a cross-thread reduction;
* column reductions: threads across adjacent outputs, rows accumulated in registers, cut
  across blocks with a second pass when there are few columns;
* small constant windows (stencils): a register tile of outputs per thread, its input window
  and weights cached in registers (stencil.py); 1-D ones: one output per thread;
* matrix products (``matmul_recipe`` decides, the one place): at most 32 rows (decode,
  matrix-vector) B read once with vector loads, split over K across blocks (decode.py); else
  the tiled shared-memory GEMM (gemm.py); 16-bit ones on tensor cores (tensorcore.py,
  hopper.py);
* elementwise stages reading a tensor transposed (``a.T + 0.0``): through a shared-memory
  tile, coalesced on both sides (transpose.py);
* other reductions: one output per thread;
* attention (the frontend's fused online-softmax chain, 16-bit q/k/v, head dims up to 256):
  one kernel, FlashAttention-2's tiles on tensor cores (attention.py), unless hints are given.

Row-wise chains (softmax, layernorm, logsumexp): an intermediate stage read row by row by
one consumer is computed inside the consumer's block loop over rows, by the block's
threads (one block per row, every statistic reduced cross-thread in shared memory).  An
input row that several passes read is copied once into (dynamic) shared memory when it fits
(``cache_rows``): one read of global memory per element instead of one per pass.

The user's hints override fields of the plans (``kdsl.schedule.hints.merge_hints``):
``threads`` (block shape), ``vectorize`` (elements per thread and access), ``rfactor``
(partial reductions across blocks; 1: none), ``tile`` (elements per block along an axis;
matmul: ``i``/``j`` block tile and the k step), ``unroll`` (the per-thread serial loop);
``stages`` multi-buffers the matmul's shared tiles, ``cache`` picks each operand's staging,
``tensor_cores`` the tensor-core GEMM.  A hint adjusts the default and keeps
the rest of it.
"""
from __future__ import annotations

from kdsl.backends.scan_schedules import gpu_scan, take_scans
from kdsl.errors import InternalCompilerError, warn_user
from kdsl.schedule.hints import merge_hints, record_backend_hints
from kdsl.schedule.plan import Recipe, StagePlan
from kdsl.schedule.records import AttachKind
from kdsl.schedule.patterns import sole_root

from . import analysis as A
from . import conv, conv_tc, decode, gemm, hopper, recipes, rules, stencil, tensorcore, transpose


def schedule(sched, hints) -> None:
    """Default plans, adjusted by ``hints`` (declarative Hints), realised on ``sched``."""
    from kdsl.schedule.limits import check_threads_hint
    for h in hints:     # threads= for every target (None) is a block shape here
        if "threads" in h.hints:
            check_threads_hint(h.hints["threads"], h.loc)
    record_backend_hints(sched, hints)
    fused = _flash_attention(sched, hints)
    plans = default_plans(sched)
    for name in fused:      # scheduled whole by attention.py
        plans.pop(name, None)
    scans = take_scans(sched, plans)        # kd.scan stages: their own default (below)
    merge_hints(sched, plans, hints)
    attach = attach_rows(sched, plans)
    caches = cache_rows(sched, plans, attach)
    realize(sched, plans, attach, caches)
    for h in scans:
        gpu_scan(sched, h)


def _flash_attention(sched, hints) -> tuple:
    """The names of the stages of an attention chain given the flash-attention schedule
    (attention.py: 16-bit q, k, v, head dims up to 256, no hints; ``KDSL_CUDA_TENSOR_CORES=0``
    keeps the generic schedule), else ()."""
    from kdsl import config
    from . import attention
    if any(h.hints or h.fn is not None for h in hints) or not config.cuda_tensor_cores():
        return ()
    m = attention.find(sched)
    if m is None:
        return ()
    hd = attention.dims(sched, m)
    if not hd:
        return ()
    attention.schedule(sched, m, hd)
    return tuple(st.name for st in (m.S, m.L, m.O, m.F, *m.fins))


def _accepts(plan, stage) -> bool:
    return True     # every cuda recipe reads the hinted fields it understands


def default_plans(sched) -> dict:
    """Stage name -> the default StagePlan of every stage computed at its own loops."""
    plans = {}
    for h in sched.stages:
        if h.attach is AttachKind.INLINE:
            continue
        k = rules.kind(h.stage)
        vec = rules.vector_width(h.stage, reads_only=h.stage.is_reduction)
        plans[h.name] = StagePlan(vectorize=vec if vec > 1 else None,
                                  recipe=Recipe(k, None, _accepts))
    return plans


def _chain_member(sched, h, plan) -> bool:
    """A stage that may be computed inside a row-wise consumer's block: a row reduction or an
    elementwise stage of at most two axes, not cut across blocks by a hint."""
    k = plan.recipe.name if plan.recipe else None
    if k not in ("row", "elementwise") or len(h.stage.axes) not in (1, 2):
        return False
    if k == "row" and (plan.rfactor or 1) > 1 and "rfactor" in plan.explicit:
        return False
    return not plan.tile


#: the largest row (bytes) of an intermediate a row-wise chain keeps in shared memory
CHAIN_ROW_BYTES = 16 * 1024


def _row_const(h):
    """The number of elements per row of stage ``h`` (its axes after the first), when it is a
    constant (1 for a stage of one axis), else None."""
    total = 1
    for a in h.stage.axes[1:]:
        c = A.const_extent(a)
        if c is None:
            return None
        total *= c
    return total


def _row_buffer_ok(h) -> bool:
    """Whether a producer computed per row of its root fits a GPU kernel: its row buffer (the
    axes after the first) has a constant, small shape (the codegen's shared arrays are static;
    an elementwise producer's row of symbolic length cannot be one), and an elementwise one
    has at least two elements per row for the block's threads to share (a single value per row
    would bind threadIdx.x to one iteration while the root's rows use the whole block)."""
    e = _row_const(h)
    if e is None or e * h.stage.dtype.itemsize > CHAIN_ROW_BYTES:
        return False
    return h.stage.is_reduction or (len(h.stage.axes) == 2 and e >= 2)


def attach_rows(sched, plans) -> dict:
    """Producer name -> root consumer name, for each intermediate stage whose readers are all
    one root stage (or stages attached to it) and read it at their own first axis."""
    attach = {}
    for h in reversed(sched.stages):
        plan = plans.get(h.name)
        if plan is None or A.is_output(sched, h) or not _chain_member(sched, h, plan):
            continue
        if not _row_buffer_ok(h):
            continue
        found = sole_root(sched, h, attach)
        if found is None:
            continue
        readers, root = found
        rplan = plans.get(root.name)
        if rplan is None or root.name in attach or not _chain_member(sched, root, rplan):
            continue
        if not root.stage.is_reduction and (len(root.stage.axes) < 2 or _row_const(root) == 1):
            # one value per row (logsumexp's last step, a keepdims mean): nothing for a block's
            # threads to share, and a store by every thread of the block races; separate kernels
            continue
        if root.stage.axes[0].dom.extent is not h.stage.axes[0].dom.extent and \
                str(root.stage.axes[0].dom.extent) != str(h.stage.axes[0].dom.extent):
            continue
        if len(h.stage.axes) == 2 and not (A.const_extent(h.stage.axes[1]) == 1 or (
                len(root.stage.axes) == 2
                and str(h.stage.axes[1].dom.extent) == str(root.stage.axes[1].dom.extent))):
            continue
        if not all(A.reads_by_row(r, h) for r in readers):
            continue
        attach[h.name] = root.name
    return attach


#: the longest row (bytes, at the top of the size class) a row-wise chain caches in shared
#: memory: with the padding of one block-wide pass (<= 8 KB) at most 72 KB per block, so that
#: 3 blocks of the H200's 227 KB per SM stay resident
ROW_CACHE_BYTES = 64 * 1024


def cache_rows(sched, plans, attach) -> dict:
    """Root name -> the shared caches (``cache_read`` stages) of the kernel inputs that two or
    more stages of its row-wise chain read row by row (softmax's max, sum and output passes
    read X three times): the first pass copies the row from global memory once, 16 bytes per
    access (cp.async, every copy in flight before one wait: kdsl/gpu/async_copies.py), and
    every pass reads it on chip.  Only where the row fits: its length's upper end
    in this size class (``sched.size_hints``) times the item size within ROW_CACHE_BYTES; the
    buffer is dynamic shared memory (its size is known at launch).  A ``tile`` hint on a
    member keeps the chain as it is."""
    roots = {}
    for p, r in attach.items():
        roots.setdefault(r, []).append(p)
    out = {}
    for root, producers in roots.items():
        members = [sched[root]] + [sched[p] for p in producers]
        if any("tile" in plans[m.name].explicit for m in members):
            continue
        for t in sched.graph.inputs:
            if t.ndim != 2:
                continue
            readers = [m for m in members if any(r.tensor is t for r in A.reads_of(m.stage))]
            if len(readers) < 2 or not all(_reads_row(m, t) for m in readers):
                continue
            r = A.expr_range(sched, t.shape[1])
            if r is None or r[1] * t.dtype.itemsize > ROW_CACHE_BYTES or r[1] < 1:
                continue
            out.setdefault(root, []).append(sched.cache_read(t.name, "shared", readers))
    return out


def _reads_row(m, t) -> bool:
    """Every read of ``t`` by stage ``m`` is at ``m``'s own first axis (one row per block)."""
    first = m.stage.axes[0].var if m.stage.axes else None
    return first is not None and all(
        len(r.indices) == 2 and r.indices[0] is first
        for r in A.reads_of(m.stage) if r.tensor is t)


def realize(sched, plans: dict, attach: dict, caches: dict | None = None) -> None:
    """Apply every plan's recipe, consumers first (a producer attaches at its root's row
    loop, and rfactor/bind on a stage come before anything attaches inside it); a root's row
    caches (``cache_rows``) are computed at its row loop by the block's threads, first."""
    roots = set(attach.values())
    chain_tx = {r: _chain_threads(sched, r, attach, plans) for r in roots}
    row_loop = {}
    epilogues = _epilogues(sched, plans)
    fused = {e.name for e in epilogues.values()}
    for h in reversed(list(sched.stages)):
        plan = plans.get(h.name)
        if plan is None or h.attach is AttachKind.INLINE or h.name in fused:
            continue
        k = plan.recipe.name
        if h.name in roots:
            tx = chain_tx[h.name]
            vec = plan.vectorize or 1
            if k == "elementwise":
                row_loop[h.name] = recipes.row_block(sched, h, threads=tx, vec=vec)
            else:
                p = rules.row(sched, h, plan)
                row_loop[h.name] = recipes.row_reduce(sched, h, tx=tx, ty=1, vec=p["vec"],
                                                      parts=None, unroll=p["unroll"])
            continue
        if h.name in attach and row_loop[attach[h.name]] is not None:
            root = attach[h.name]
            where = (sched[root], row_loop[root])
            tx = chain_tx[root]
            if k == "row":
                p = rules.row(sched, h, plan)
                recipes.row_reduce(sched, h, tx=tx, ty=1, vec=p["vec"], parts=None,
                                   unroll=p["unroll"], attach=where)
            else:
                recipes.attached_elementwise(sched, h, where, threads=tx,
                                             vec=plan.vectorize or 1)
            continue
        _root_recipe(sched, h, plan, k, epilogues.get(h.name))
    for root, cs in (caches or {}).items():       # after the readers attached at the row loop
        if row_loop.get(root) is None:
            raise InternalCompilerError(f"cuda schedule: a row cache of {root} without a row loop")
        for c in cs:
            cvec = rules.vector_width(c.stage)
            recipes.attached_elementwise(sched, c, (sched[root], row_loop[root]),
                                         threads=chain_tx[root], vec=max(cvec, 1))


def _epilogues(sched, plans) -> dict:
    """Matmul or convolution name -> the stage casting its result that its tile stores take
    over (tensor-core fragment stores, or the convolution's register tile)."""
    out = {}
    for h in sched.stages:
        plan = plans.get(h.name)
        if plan is not None and (plan.recipe.name == "matmul" and matmul_recipe(
                sched, h, plan) in ("wgmma", "tensorcore", "decode") or plan.recipe.name == "conv"
                and conv_recipe(sched, h, plan) != "per_output"):
            e = tensorcore.cast_epilogue(sched, h, plans)
            if e is not None:
                out[h.name] = e
    return out


def matmul_recipe(sched, h, plan) -> str:
    """The one place a matrix product's recipe is decided: ``"decode"`` (few rows:
    decode.py), ``"wgmma"`` (sm_90 tensor cores), ``"tensorcore"`` (mma.sync) or ``"gemm"``
    (the tiled CUDA-core GEMM; small constant extents that it cannot tile: ``"per_output"``)."""
    if decode.eligible(sched, h, plan):
        return "decode"
    if tensorcore.eligible(sched, h):
        return "wgmma" if hopper.eligible(sched, h) else "tensorcore"
    if gemm.fits(h.stage, **rules.matmul(sched, h, plan)):
        return "gemm"
    return "per_output"


def _root_recipe(sched, h, plan, k, epilogue=None) -> None:
    if k == "elementwise":
        t = transpose.transposed_read(sched, h, plan) if h.stage.axes else None
        if t is not None:       # a tensor read transposed: through a shared tile
            transpose.transpose_tile(sched, h, t)
        elif h.stage.axes:
            recipes.elementwise(sched, h, **rules.elementwise(sched, h, plan))
        return   # a 0-d stage has no loop to bind (the core says so)
    if k == "nested":
        t = rules.threads_hint(sched, h)
        recipes.nested_reduce(sched, h, threads=t[0] * t[1] if t else rules.THREADS)
        return
    if k == "matmul":
        how = matmul_recipe(sched, h, plan)
        if how == "decode":
            decode.gemm(sched, h, decode.choose(sched, h, plan, rules.threads_hint(sched, h)),
                        epilogue)
            return
        if how == "wgmma":                      # sm_90: wgmma from shared memory
            hopper.gemm(sched, h, epilogue=epilogue, **rules.wgmma(sched, h, plan))
            return
        if how == "tensorcore":
            tensorcore.gemm(sched, h, epilogue=epilogue, **rules.tensor_core(sched, h, plan))
            return
        if tensorcore.tensor_cores_hint(sched, h) is True:
            warn_user(f"tensor_cores=True on {h.name}: {tensorcore.unsuitable(h)}; it runs on "
                      f"the CUDA-core GEMM")
        if how == "gemm":
            gemm.gemm(sched, h, **rules.matmul(sched, h, plan))
        else:    # small constant extents: one output per thread (a safe generic mapping)
            recipes.thread_per_output(sched, h, **rules.per_output(sched, h, plan, False))
    elif k == "conv":
        _conv(sched, h, plan, epilogue)
    elif k == "row":
        recipes.row_reduce(sched, h, **rules.row(sched, h, plan))
    elif k == "column":
        recipes.column_reduce(sched, h, **rules.column(sched, h, plan))
    elif k == "stencil" and len(h.stage.axes) >= 2 and not plan.unroll_axes:
        stencil.stencil_tile(sched, h, **rules.stencil(sched, h, plan))
    else:
        recipes.thread_per_output(sched, h, **rules.per_output(sched, h, plan, k == "stencil"))


def conv_recipe(sched, h, plan) -> str:
    """The one place a convolution's recipe is decided: ``"tensorcore"`` (16-bit operands:
    conv_tc.py), ``"tile"`` (the CUDA-core implicit GEMM: conv.py) or ``"per_output"``
    (constant extents its tiles do not fit)."""
    m = conv.find(h.stage)
    if conv_tc.eligible(sched, h, m):
        return "tensorcore"
    return "tile" if conv.fits(h.stage, m, conv.choose(sched, h, m, plan)) else "per_output"


def _conv(sched, h, plan, epilogue=None) -> None:
    """A convolution (conv.py, conv_tc.py), by ``conv_recipe``."""
    how = conv_recipe(sched, h, plan)
    m = conv.find(h.stage)
    if how != "tensorcore" and tensorcore.tensor_cores_hint(sched, h) is True:
        warn_user(f"tensor_cores=True on {h.name}: tensor cores take a convolution of float16 "
                  f"or bfloat16 operands (both of one type, accumulated in float32) at unit "
                  f"stride along its columns, read without a guard; it runs on CUDA cores")
    if how == "tensorcore":
        conv_tc.conv_tc(sched, h, m, conv_tc.choose(sched, h, m, plan), epilogue)
    elif how == "tile":
        conv.conv_tile(sched, h, m, conv.choose(sched, h, m, plan), epilogue)
    else:
        recipes.thread_per_output(sched, h, **rules.per_output(sched, h, plan, False))
        if epilogue is not None:
            raise InternalCompilerError(f"cuda schedule: an epilogue for {h.name} without a tile")


def _chain_threads(sched, root: str, attach: dict, plans: dict) -> int:
    """Threads per block of a row-wise chain: from the row length (the root's second axis or
    the attached reductions' reduce axes), at the widest vector width of the chain; never more
    than any member's loop over the row has iterations where that length is a constant (a
    split of a constant extent by a larger factor is that extent, and every loop of a kernel
    bound to threadIdx.x must have the block's extent)."""
    members = [sched[root]] + [sched[p] for p, r in attach.items() if r == root]
    return min([_chain_threads_wanted(sched, members)]
               + [c for c in (_thread_cap(sched, m, plans[m.name]) for m in members)
                  if c is not None])


def _thread_cap(sched, h, plan) -> int | None:
    """The most threads stage ``h`` of a chain spreads its row over (its recipe's thread
    loop), when its row length is a constant, else None."""
    if plan.recipe.name == "row":
        ext, vec = 1, rules.row(sched, h, plan)["vec"]
        for a in h.stage.reduce_axes:
            c = A.const_extent(a)
            if c is None:
                return None
            ext *= c
    else:
        axes = h.stage.axes[1:] if h.stage.axes else ()
        ext, vec = _row_const(h), plan.vectorize or 1
        if ext is None or not axes:
            return None
    if ext < 1:
        return None     # an empty row: splits of it are not clamped
    return max(1, -(-ext // vec))


def _chain_threads_wanted(sched, members) -> int:
    for m in members:     # a threads hint on any stage of the chain sets the block
        t = rules.threads_hint(sched, m)
        if t is not None:
            return t[0] * t[1]
    vec = max(rules.vector_width(m.stage, reads_only=m.stage.is_reduction) for m in members)
    best = None
    for m in members:
        axes = m.stage.reduce_axes if m.stage.is_reduction else m.stage.axes[1:]
        length = A.typical(sched, axes) if axes else None
        if length is not None:
            best = max(best or 0, length)
    if best is None:
        return rules.THREADS
    vectors = -(-best // (vec * rules.CHAIN_VECTORS))
    return min(rules.CHAIN_THREADS, max(32, rules.pow2ceil(vectors)))
