"""The kernels of the GPU-schedule fuzzer, each with its oracle and its recipe.

A family function takes ``(rng, plan)``, adds the schedule's steps to ``plan`` and
returns ``(kernel source, args, expected)``; ``expected`` is a list of
``(dtype name, float64 or int values, error bound or None)`` per output.
"""
from __future__ import annotations

import numpy as np

from .gen_gpu_schedule import (F32_EPS, _deco, _layout, _pick, _size, _sum_bound, _vals,
                               block_threads, coop_fetch, handle, multibuffer, tile2d)

_MM = """{deco}
def kern(A, B):
    n, k = A.shape
    _, m = B.shape
    r = kd.reduce_axis(k, name="r")
    C = kd.compute((n, m), lambda i, j: kd.sum({prod}, axis=r), name="C")
    return {ret}"""
_EPI = 'kd.compute((n, m), lambda i, j: kd.maximum(C[i, j] * 0.5, -1.0) + 1.0, name="O")'


def _mm_sizes(rng, cap=9000):
    while True:
        n, m, k = _size(rng), _size(rng), _size(rng)
        if rng.random() < 0.2:      # matrix-vector products: a constant 1 shrinks the thread loops
            n, m = (1, m) if rng.random() < 0.4 else (n, 1)
        if n * m * max(k, 1) <= cap:
            return n, m, k


def _mm_expected(A, B, epi):
    a, b = A.astype(np.float64), B.astype(np.float64)
    c = a @ b
    bound = _sum_bound(np.abs(a) @ np.abs(b), a.shape[1])
    if epi:
        return [("float32", np.maximum(c * 0.5, -1.0) + 1.0, bound * 0.5 + 4 * F32_EPS * 3)]
    return [("float32", c, bound)]


def fam_gemm(rng, plan, epi=None):
    """Thread-tiled GEMM (TVM's tutorial shape), optionally with an elementwise epilogue."""
    epi = bool(rng.random() < 0.35) if epi is None else epi
    n, m, k = _mm_sizes(rng)
    src = _MM.format(deco=_deco(rng, plan), prod="A[i, r] * B[r, j]", ret=_EPI if epi else "C")
    A, B = _vals(rng, (n, k)), _vals(rng, (k, m))
    args = [_layout(rng, A, plan), _layout(rng, B, plan)]
    ty, tx = block_threads(rng, plan)
    kt = int(_pick(rng, [1, 2, 4, 8, 16]))
    fit = rng.random() < 0.5      # K tile chosen so the block copies whole tiles (TVM's tutorials)
    local = (not epi) and rng.random() < 0.65
    handle(plan, "C", ready=not local)
    if epi:
        plan.feature("epilogue")
        M, acc = handle(plan, "O"), "C"
    elif local:
        plan.feature("cache_write")
        plan.add('CL = s.cache_write(C, "local")', needs=["C"], gives=["CL", "CL:ready", "C:ready"])
        M, acc = "C", "CL"
    else:
        M, acc = "C", "C"
    caches = []
    for X in ("A", "B"):
        if rng.random() < 0.55:
            plan.feature("cache_shared")
            plan.add(f'{X}S = s.cache_read("{X}", "shared", [{acc}])', needs=[acc], gives=[f"{X}S", f"{X}S:ready"])
            caches.append(X)
    if acc == M:
        names = tile2d(rng, plan, M, ty, tx, inner_red=(f"{acc}_ko", f"{acc}_ki"))
        kt = _fit_k(kt, names, ty * tx) if fit else kt
        plan.add(f"{acc}_ko, {acc}_ki = {acc}.split({acc}.reduce_axes[0], factor={kt})", needs=[acc],
                 gives=[f"{acc}_ko", f"{acc}_ki"], after=[f"{acc}:ready"])
    else:
        names = tile2d(rng, plan, M, ty, tx)
        kt = _fit_k(kt, names, ty * tx) if fit else kt
        at = names["tx"]
        if rng.random() < 0.08:       # TVM: a local stage outside the thread loops (one copy per thread)
            at = names["ty"]
            plan.feature("local_outside_threads")
        elif epi and rng.random() < 0.15:
            at = names["bx"]
            plan.feature("unspread")   # legal: kdsl runs it on one thread + barrier
        plan.add(f"{acc}.compute_at({M}, {at})", needs=[acc, M, at], gives=[f"{acc}:at"])
        plan.add(f"{acc}_ko, {acc}_ki = {acc}.split({acc}.reduce_axes[0], factor={kt})", needs=[acc],
                 gives=[f"{acc}_ko", f"{acc}_ki"], after=[f"{acc}:ready"])
        plan.add(f"{acc}.reorder({acc}_ko, {acc}_ki, *{acc}.axes)", needs=[acc, f"{acc}_ko", f"{acc}_ki"],
                 gives=[f"{acc}:reordered"])
    for X in caches:
        coop_fetch(rng, plan, f"{X}S", acc, f"{acc}_ko", ty, tx)
        multibuffer(rng, plan, f"{X}S")
        if rng.random() < 0.3:
            plan.feature("local_of_shared")
            plan.add(f'{X}L = s.cache_read({X}S, "local", [{acc}])', needs=[f"{X}S", acc], gives=[f"{X}L"])
            plan.add(f"{X}L.compute_at({acc}, {acc}_ki)", needs=[f"{X}L", acc, f"{acc}_ki"], gives=[])
    return src, args, _mm_expected(A, B, epi)


def _fit_k(kt, names, threads):
    """The K tile nearest ``kt`` whose A and B tiles the block copies whole, 4-vectors too."""
    ok = [k for k in (1, 2, 4, 8, 16, 32) if (names["BY"] * k) % (4 * threads) == 0
          and (names["BX"] * k) % (4 * threads) == 0]
    return min(ok, key=lambda k: abs(k - kt)) if ok else kt


def fam_gemm_epi(rng, plan):
    return fam_gemm(rng, plan, epi=True)


def fam_wmma(rng, plan):
    """float16 GEMM on tensor cores (wmma 16x16x16): the docs' recipe with random tiles,
    warps, shared staging (padded or not) and orders."""
    plan.feature("wmma")
    n, m, k = _mm_sizes(rng, cap=40000)
    src = _MM.format(deco=_deco(rng, plan), prod="A[i, r].astype(kd.float32) * B[r, j].astype(kd.float32)",
                     ret="C")
    A, B = _vals(rng, (n, k), "float16"), _vals(rng, (k, m), "float16")
    args = [_layout(rng, A, plan), _layout(rng, B, plan)]
    wi_n, wj_n = int(_pick(rng, [1, 2])), int(_pick(rng, [1, 2]))
    plan.add("w = kd.intrin.wmma(16, 16, 16)", gives=["w"])
    handle(plan, "C", ready=False)
    plan.add('CF = s.cache_write(C, "wmma.accumulator")', needs=["C"], gives=["CF", "C:ready", "CF:ready"])
    shared = rng.random() < 0.5
    fr = "CF"
    if shared:
        pad = bool(rng.random() < 0.5)
        for X in ("A", "B"):
            plan.add(f'{X}S = s.cache_read("{X}", "shared", [CF]{", pad=True" if pad else ""})', needs=["CF"],
                     gives=[f"{X}S", f"{X}S:ready"])
        plan.feature("cache_shared")
    for X, sc in (("A", "matrix_a"), ("B", "matrix_b")):
        plan.add(f'{X}F = s.cache_read({(X + "S") if shared else repr(X)}, "wmma.{sc}", [CF])',
                 needs=["CF"] + ([f"{X}S"] if shared else []), gives=[f"{X}F"])
    plan.add(f"bi, bj, ii, jj = C.tile(C.axes[0], C.axes[1], {16 * wi_n}, {16 * wj_n})", needs=["C"],
             gives=["bi", "bj", "ii", "jj"], after=["C:ready"])
    plan.add("wi, ti = C.split(ii, factor=16)", needs=["ii"], gives=["wi", "ti"])
    plan.add("wj, tj = C.split(jj, factor=16)", needs=["jj"], gives=["wj", "tj"])
    plan.add("C.reorder(bi, bj, wi, wj, ti, tj)", needs=["bi", "bj", "wi", "wj", "ti", "tj"], gives=[])
    for ax, tag in (("bi", "blockIdx.y"), ("bj", "blockIdx.x"), ("wi", "threadIdx.z"), ("wj", "threadIdx.y")):
        plan.add(f"C.bind({ax}, {tag!r})", needs=[ax], gives=[])
    plan.add("CF.compute_at(C, wj)", needs=["CF", "wj"], gives=[])
    plan.add("ci, cj = CF.axes", needs=["CF"], gives=["ci", "cj"])
    plan.add("ko, ki = CF.split(CF.reduce_axes[0], factor=16)", needs=["CF"], gives=["ko", "ki"])
    plan.add("CF.reorder(ko, ci, cj, ki)", needs=["ko", "ci", "cj", "ki"], gives=[])
    for X in ("A", "B"):
        plan.add(f"{X}F.compute_at(CF, ko)", needs=[f"{X}F", "ko"], gives=[])
        plan.add(f"{X}F.tensorize({X}F.axes[0], w)", needs=[f"{X}F", "w"], gives=[])
        if shared:
            coop_fetch(rng, plan, f"{X}S", fr, "ko", wj_n, 32, tz=wi_n)
            multibuffer(rng, plan, f"{X}S")
    plan.add("CF.tensorize(ci, w)", needs=["ci", "w"], gives=[])
    plan.add("C.tensorize(ti, w)", needs=["ti", "w"], gives=[])
    return src, args, _mm_expected(A, B, False)


def fam_wgmma(rng, plan):
    """float16 GEMM on Hopper's wgmma (docs' recipe, scaled down: 64 x N tiles, 4 warps)."""
    plan.feature("wgmma")
    while True:
        n, m, k = int(_pick(rng, [0, 1, 17, 64, 70])), int(_pick(rng, [1, 8, 16, 24, 33])), \
            int(_pick(rng, [0, 1, 16, 64, 80]))
        if n * m * max(k, 1) <= 120000:
            break
    src = _MM.format(deco=_deco(rng, plan), prod="A[i, r].astype(kd.float32) * B[r, j].astype(kd.float32)",
                     ret="C")
    A, B = _vals(rng, (n, k), "float16"), _vals(rng, (k, m), "float16")
    args = [_layout(rng, A, plan), _layout(rng, B, plan)]
    N = int(_pick(rng, [64, 64, 128]))   # shared rows of whole 128-byte lines (documented)
    plan.add(f"w = kd.intrin.wgmma({N})", gives=["w"])
    handle(plan, "C", ready=False)
    plan.add('CF = s.cache_write(C, "wmma.accumulator")', needs=["C"], gives=["CF", "C:ready"])
    plan.add(f"bi, bj, ii, jj = C.tile(C.axes[0], C.axes[1], 64, {N})", needs=["C"],
             gives=["bi", "bj", "ii", "jj"], after=["C:ready"])
    plan.add("wi, ti = C.split(ii, factor=16)", needs=["ii"], gives=["wi", "ti"])
    plan.add("C.reorder(bi, bj, wi, ti, jj)", needs=["bi", "bj", "wi", "ti", "jj"], gives=[])
    for ax, tag in (("bi", "blockIdx.y"), ("bj", "blockIdx.x"), ("wi", "threadIdx.y")):
        plan.add(f"C.bind({ax}, {tag!r})", needs=[ax], gives=[])
    plan.add("CF.compute_at(C, wi)", needs=["CF", "wi"], gives=[])
    plan.add("ci, cj = CF.axes", needs=["CF"], gives=["ci", "cj"])
    plan.add("ko, kr = CF.split(CF.reduce_axes[0], factor=64)", needs=["CF"], gives=["ko", "kr"])
    plan.add("kio, ki = CF.split(kr, factor=16)", needs=["kr"], gives=["kio", "ki"])
    plan.add("CF.reorder(ko, kio, ci, cj, ki)", needs=["ko", "kio", "ci", "cj", "ki"], gives=[])
    plan.add("CF.unroll(kio)", needs=["kio"], gives=[])
    plan.add("CF.tensorize(ci, w)", needs=["ci", "w"], gives=[])
    plan.add("C.tensorize(ti, w)", needs=["ti", "w"], gives=[])
    for X in ("A", "B"):
        plan.add(f'{X}S = s.cache_read("{X}", "shared", [CF], pad=True)', needs=["CF"], gives=[f"{X}S", f"{X}S:ready"])
        coop_fetch(rng, plan, f"{X}S", "CF", "ko", 4, 32)
        if rng.random() < 0.5:
            plan.feature("pipeline")
            k = plan.memo.setdefault("stages", int(_pick(rng, [2, 3, 4])))
            plan.add(f"{X}S.pipeline({k})", needs=[f"{X}S"], gives=[])
    return src, args, _mm_expected(A, B, False)


_ROW = """{deco}
def kern(A):
    k = kd.reduce_axis(A.shape[1], name="k")
    B = kd.compute((A.shape[0],), lambda i: kd.sum(A[i, k], axis=k), name="B")
    return {ret}"""


def fam_rowsum(rng, plan):
    """Row sums, with an epilogue (``C = B + 2``) or without; serial per thread, cross-thread
    (``nparts`` split bound to threadIdx.x) or rfactor + cross-thread (the docs' recipe)."""
    epi = bool(rng.random() < 0.6)
    n, m = _size(rng), int(_pick(rng, [0, 1, 2, 7, 16, 33, 64, 100]))
    src = _ROW.format(deco=_deco(rng, plan),
                      ret='kd.compute((A.shape[0],), lambda i: B[i] + 2.0, name="C")' if epi else "B")
    A = _vals(rng, (n, m))
    args = [_layout(rng, A, plan)]
    a = A.astype(np.float64)
    exp = a.sum(axis=1) + (2.0 if epi else 0.0)
    bound = _sum_bound(np.abs(a).sum(axis=1), m) + (4 * F32_EPS * np.abs(exp) if epi else 0)
    T, TY = int(_pick(rng, [2, 4, 8, 16, 32])), int(_pick(rng, [1, 2, 4, 8]))
    handle(plan, "B")
    O = handle(plan, "C") if epi else "B"
    mode = _pick(rng, ["serial", "xthread", "rfactor"], p=[0.3, 0.35, 0.35])
    if epi:
        plan.feature("epilogue")
    plan.add(f"ob, ot = {O}.split({O}.axes[0], factor={TY if mode != 'serial' else T})", needs=[O],
             gives=["ob", "ot"])
    plan.add(f"{O}.bind(ob, 'blockIdx.x')", needs=[O, "ob"], gives=[])
    plan.add(f"{O}.bind(ot, {'threadIdx.y' if mode != 'serial' else 'threadIdx.x'!r})", needs=[O, "ot"], gives=[])
    if mode == "serial":
        if epi:
            plan.add(f"B.compute_at({O}, ot)", needs=["B", O, "ot"], gives=[])
        if rng.random() < 0.4:
            plan.add("B_ko, B_ki = B.split(B.reduce_axes[0], factor=4)", needs=["B"], gives=["B_ko", "B_ki"])
            plan.add("B.unroll(B_ki)", needs=["B_ki"], gives=[])
    elif mode == "xthread":
        plan.feature("xthread")
        plan.add(f"B_kt, B_ks = B.split(B.reduce_axes[0], nparts={T})", needs=["B"], gives=["B_kt", "B_ks"])
        plan.add("B.bind(B_kt, 'threadIdx.x')", needs=["B_kt"], gives=[])
        if epi:
            plan.feature("xthread_epi")   # legal: kdsl runs it on one thread + barrier
            plan.add(f"B.compute_at({O}, ot)", needs=["B", O, "ot"], gives=[])
    else:
        plan.feature("rfactor", "xthread")
        plan.add(f"B_ko, B_ki = B.split(B.reduce_axes[0], factor={T})", needs=["B"], gives=["B_ko", "B_ki"])
        plan.add("BF = s.rfactor(B, B_ki)", needs=["B_ki"], gives=["BF"])
        plan.add("B.bind(B.reduce_axes[0], 'threadIdx.x')", needs=["BF"], gives=["B:xt"])
        plan.add("BF.compute_at(B, B.reduce_axes[0])", needs=["BF"], gives=[])
        if epi:
            plan.feature("rfactor_xthread_epi")   # legal: kdsl runs it on one thread + barrier
            plan.add(f"B.compute_at({O}, ot)", needs=["B", O, "ot"], gives=[])
    return src, args, [("float32", exp, bound)]


_SOFTMAX = """{deco}
def kern(A):
    n, m = A.shape
    k = kd.reduce_axis(m, name="k")
    k2 = kd.reduce_axis(m, name="k2")
    M = kd.compute((n,), lambda i: kd.max(A[i, k], axis=k), name="M")
    E = kd.compute((n, m), lambda i, j: kd.exp(A[i, j] - M[i]), name="E")
    S = kd.compute((n,), lambda i: kd.sum(E[i, k2], axis=k2), name="S")
    return kd.compute((n, m), lambda i, j: E[i, j] / S[i], name="O")"""


def fam_softmax(rng, plan):
    """Softmax rows: one row per block (or per threadIdx.y), reductions cross-thread or
    serial inside the row loop, the exponentials inlined or computed cooperatively."""
    plan.feature("epilogue")
    # m >= 1: a max over an empty row raises, as numpy does (tests/errors covers it)
    n, m = _size(rng), int(_pick(rng, [1, 2, 5, 16, 33, 64]))
    src = _SOFTMAX.format(deco=_deco(rng, plan))
    A = (rng.integers(-16, 17, size=(n, m)) / 8.0).astype(np.float32)
    args = [_layout(rng, A, plan)]
    a = A.astype(np.float64)
    with np.errstate(all="ignore"):
        e = np.exp(a - (a.max(axis=1, keepdims=True) if m else 0))
        o = e / e.sum(axis=1, keepdims=True)
    bound = (m + 16) * F32_EPS * 4 * np.abs(o) + 1e-30
    T = int(_pick(rng, [2, 4, 8, 16, 32]))
    for st in ("M", "E", "S", "O"):
        handle(plan, st)
    plan.add("oi, oj = O.axes", needs=["O"], gives=["oi", "oj"])
    plan.add(f"ojo, oji = O.split(oj, factor={T})", needs=["oj"], gives=["ojo", "oji"])
    plan.add("O.bind(oi, 'blockIdx.x')", needs=["oi"], gives=[])
    plan.add("O.bind(oji, 'threadIdx.x')", needs=["oji"], gives=[])
    for R in ("M", "S"):
        plan.add(f"{R}.compute_at(O, oi)", needs=[R, "oi"], gives=[])
        if rng.random() < 0.85:
            plan.feature("xthread")
            plan.add(f"{R}_kt, {R}_ks = {R}.split({R}.reduce_axes[0], nparts={T})", needs=[R],
                     gives=[f"{R}_kt", f"{R}_ks"])
            plan.add(f"{R}.bind({R}_kt, 'threadIdx.x')", needs=[f"{R}_kt"], gives=[])
        else:
            plan.feature("unspread")   # legal: kdsl runs it on one thread + barrier
    if rng.random() < 0.5:
        plan.add("E.compute_inline()", needs=["E"], gives=[])
    else:
        plan.add("E.compute_at(O, oi)", needs=["E", "oi"], gives=[])
        plan.add(f"E_jo, E_ji = E.split(E.axes[1], factor={T})", needs=["E"], gives=["E_jo", "E_ji"])
        plan.add("E.bind(E_ji, 'threadIdx.x')", needs=["E_ji"], gives=[])
        plan.feature("coop_stage")
    return src, args, [("float32", o, bound)]


_CONV = """{deco}
def kern(A, W):
    n, m = A.shape[0] - 2, A.shape[1] - 2
    ri = kd.reduce_axis(3, name="ri")
    rj = kd.reduce_axis(3, name="rj")
    return kd.compute((n, m), lambda i, j: kd.sum(A[i + ri, j + rj] * W[ri, rj], axis=(ri, rj)), name="O")"""


def fam_conv(rng, plan):
    """3x3 convolution (a 2-D stencil with a reduction): thread tiles, a shared halo tile
    attached at the block loop and fetched cooperatively, W in registers, local output."""
    n, m = _size(rng) + 2, _size(rng) + 2
    src = _CONV.format(deco=_deco(rng, plan))
    A, W = _vals(rng, (n, m)), _vals(rng, (3, 3))
    args = [_layout(rng, A, plan), _layout(rng, W, plan)]
    a, w = A.astype(np.float64), W.astype(np.float64)
    o = sum(a[di:di + n - 2, dj:dj + m - 2] * w[di, dj] for di in range(3) for dj in range(3))
    ab = sum(np.abs(a[di:di + n - 2, dj:dj + m - 2] * w[di, dj]) for di in range(3) for dj in range(3))
    ty, tx = block_threads(rng, plan)
    local = rng.random() < 0.4
    handle(plan, "O", ready=not local)
    acc = "O"
    if local:
        plan.feature("cache_write")
        plan.add('OL = s.cache_write(O, "local")', needs=["O"], gives=["OL", "OL:ready", "O:ready"])
        acc = "OL"
    shared = rng.random() < 0.6
    if shared:
        plan.feature("cache_shared")
        plan.add(f'AS = s.cache_read("A", "shared", [{acc}])', needs=[acc], gives=["AS", "AS:ready"])
    wl = rng.random() < 0.3
    if wl:
        plan.feature("local_cache")
        plan.add(f'WL = s.cache_read("W", "local", [{acc}])', needs=[acc], gives=["WL"])
    names = tile2d(rng, plan, "O", ty, tx, vthread=False)
    if local:
        plan.add(f"OL.compute_at(O, {names['tx']})", needs=["OL", names["tx"]], gives=[])
    if shared:
        coop_fetch(rng, plan, "AS", "O", names["bx"], ty, tx)    # the block's halo tile
    if wl:
        at = "OL.axes[-1]" if local else names["xi"]
        plan.add(f"WL.compute_at({acc}, {at})", needs=["WL", acc, names["xi"]], gives=[])
    if rng.random() < 0.3:
        plan.add(f"{acc}.unroll({acc}.reduce_axes[1])", needs=[acc], gives=[], after=[f"{acc}:ready"])
    return src, args, [("float32", o, _sum_bound(ab, 9))]


def fam_argmax(rng, plan):
    """argmax along rows (ties: the first index, as numpy): serial per thread, cross-thread,
    or rfactor + cross-thread."""
    n, m = _size(rng), int(_pick(rng, [1, 2, 5, 16, 33, 64]))
    dt = _pick(rng, ["float32", "int32"])
    src = f"{_deco(rng, plan)}\ndef kern(A):\n    return A.argmax(axis=1)"
    A = _vals(rng, (n, m), dt, ties=rng.random() < 0.5)
    args = [_layout(rng, A, plan)]
    exp = np.argmax(A, axis=1) if m else np.zeros(n, np.int64)
    T, TY = int(_pick(rng, [2, 4, 8, 16, 32])), int(_pick(rng, [1, 2, 4]))
    handle(plan, "argmax", "X")
    mode = _pick(rng, ["serial", "xthread", "rfactor"])
    plan.add(f"xb, xt = X.split(X.axes[0], factor={T if mode == 'serial' else TY})", needs=["X"], gives=["xb", "xt"])
    plan.add("X.bind(xb, 'blockIdx.x')", needs=["xb"], gives=[])
    plan.add(f"X.bind(xt, {'threadIdx.x' if mode == 'serial' else 'threadIdx.y'!r})", needs=["xt"], gives=[])
    if mode == "xthread":
        plan.feature("xthread")
        plan.add(f"kt, ks = X.split(X.reduce_axes[0], nparts={T})", needs=["X"], gives=["kt", "ks"])
        plan.add("X.bind(kt, 'threadIdx.x')", needs=["kt"], gives=[])
    elif mode == "rfactor":
        plan.feature("rfactor", "xthread")
        plan.add(f"ko, ki = X.split(X.reduce_axes[0], factor={T})", needs=["X"], gives=["ko", "ki"])
        plan.add("XF = s.rfactor(X, ki)", needs=["ki"], gives=["XF"])
        plan.add("X.bind(X.reduce_axes[0], 'threadIdx.x')", needs=["XF"], gives=[])
        plan.add("XF.compute_at(X, X.reduce_axes[0])", needs=["XF"], gives=[])
    return src, args, [("int64", exp, None)]


_CHAIN = """{deco}
def kern(A):
    n, m = A.shape
    B = kd.compute((n, m), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    C = kd.compute((n, m), lambda i, j: kd.maximum(B[i, j], 0.5) * B[i, {jc}], name="C")
    return kd.compute((n, m), lambda i, j: C[i, j] - A[i, j], name="O")"""


def fam_chain(rng, plan):
    """An elementwise chain B -> C -> O (C maybe reading B's row reversed): each inner stage
    inlined, per thread, at the block loop spread over the threads, or a root kernel."""
    n, m = _size(rng), _size(rng)
    rev = rng.random() < 0.25
    if rev:
        plan.feature("mirrored_read")
    src = _CHAIN.format(deco=_deco(rng, plan), jc="m - 1 - j" if rev else "j")
    A = _vals(rng, (n, m))
    args = [_layout(rng, A, plan)]
    a = A.astype(np.float64)
    b = a * 2 + 1
    c = np.maximum(b, 0.5) * (b[:, ::-1] if rev else b)
    o = c - a
    bound = 8 * F32_EPS * (np.abs(c) + np.abs(a)) + 1e-30
    one_d = rng.random() < 0.4
    if one_d:
        T, ty, tx = int(_pick(rng, [1, 4, 8, 32, 64])), 1, 0
        handle(plan, "O")
        plan.add("O_f = O.fuse(O.axes[0], O.axes[1])", needs=["O"], gives=["O_f"])
        plan.add(f"O_bx, O_tx = O.split(O_f, factor={T})", needs=["O_f"], gives=["O_bx", "O_tx"])
        plan.add("O.bind(O_bx, 'blockIdx.x')", needs=["O_bx"], gives=[])
        plan.add("O.bind(O_tx, 'threadIdx.x')", needs=["O_tx"], gives=[])
        names = {"bx": "O_bx", "tx": "O_tx"}
        tx = T
    else:
        ty, tx = block_threads(rng, plan)
        handle(plan, "O")
        names = tile2d(rng, plan, "O", ty, tx)
    depth = 2           # how deep the reader of the next stage runs: 0 root, 1 block, 2 thread
    for X in ("C", "B"):
        handle(plan, X)
        r = rng.random()
        if r < 0.35:
            plan.add(f"{X}.compute_inline()", needs=[X], gives=[])
            continue      # B's reader is then O itself
        elif r < 0.55 and not rev and depth >= 2:
            plan.add(f"{X}.compute_at(O, {names['tx']})", needs=[X, "O", names["tx"]], gives=[])
            depth = 2
        elif r < 0.75 and depth >= 1:
            depth = 1
            plan.feature("coop_stage")
            if rng.random() < 0.4:
                plan.add(f'{X}.set_scope("shared")', needs=[X], gives=[])
            coop_fetch(rng, plan, X, "O", names["bx"], ty, tx)
        else:
            depth = 0
            plan.feature("root_kernel")
            T = int(_pick(rng, [8, 32, 128]))
            plan.add(f"{X}_f = {X}.fuse({X}.axes[0], {X}.axes[1])", needs=[X], gives=[f"{X}_f"])
            plan.add(f"{X}_bx, {X}_tx = {X}.split({X}_f, factor={T})", needs=[f"{X}_f"], gives=[f"{X}_bx", f"{X}_tx"])
            plan.add(f"{X}.bind({X}_bx, 'blockIdx.x')", needs=[f"{X}_bx"], gives=[])
            plan.add(f"{X}.bind({X}_tx, 'threadIdx.x')", needs=[f"{X}_tx"], gives=[])
    return src, args, [("float32", o, bound)]


#: name -> (family function, weight)
FAMILIES = {
    "gemm": (fam_gemm, 4.0),
    "gemm_epi": (fam_gemm_epi, 1.5),
    "wmma": (fam_wmma, 1.2),
    "wgmma": (fam_wgmma, 0.4),
    "rowsum": (fam_rowsum, 2.0),
    "softmax": (fam_softmax, 1.2),
    "conv": (fam_conv, 1.5),
    "argmax": (fam_argmax, 1.0),
    "chain": (fam_chain, 1.5),
}
