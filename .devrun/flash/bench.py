"""Issue 28 (helper flash): kdsl's flash-attention kernel (kdsl_cuda/codegen/flash.py) on one
H100/H200 against torch SDPA (flash backend).  See run.sh for the modes.

    python3 .devrun/flash/bench.py [--variants SPEC] [--quick] [--no-e2e]
    python3 .devrun/flash/bench.py --racecheck-case     # one small run (under compute-sanitizer)

SPEC: variants of tile choices, ``;``-separated ``D:bm,bn,warps[,stages[,mma_sum]]`` (``bD:...``: the
kernel before this session; mma_sum 1: row sums on the tensor cores; default: VARIANTS below);
each is compiled, its registers/spills (ptxas -v through NVRTC) recorded, checked and timed.
1. checks: every variant against a float64 reference (torch on the GPU) at N = 1, 100, 1000
   (and Nq != Nk, GQA, a strided view), causal and not, f16 and bf16: FAIL lines on error.
2. timing: B*H=32 (B=4, H=8), N 1024/4096/16384, D 64/128, f16 (bf16 at N=4096), causal and
   not: every variant of the head dim, and SDPA; ratio = sdpa_ms / kdsl_ms (>= 1: kdsl faster).
3. end to end (unless --no-e2e): the user's numpy-style kernels through kdsl's default cuda
   schedule (the tiles of kdsl_cuda/schedules/attention_op.py), checked and timed, few rows
   (each is a ~20-30 s compile).
Writes $OUT/flash.json (after every section) and a table $OUT/flash_table.txt.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import re
import sys
import tempfile
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from kdsl_cuda import build  # noqa: E402
from kdsl_cuda.codegen import flash as flash_now  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flash_before  # noqa: E402  (the kernel before this session: the baseline)

DEV = "cuda"
OUT = os.environ.get("OUT") or "."
T0 = time.time()
RES = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
       "nvrtc": build.nvrtc_version(), "variants": {},
       "checks": [], "timing": [], "e2e": [], "errors": []}
VARIANTS = ("b64:128,64,4;64:128,64,4;64:128,64,4,3;64:128,64,4,2,1;64:128,128,4;64:128,96,4;"
            "64:64,64,4;64:64,64,2;64:256,64,8;"
            "b128:64,64,4;128:64,64,4;128:128,32,4;128:128,32,4,3;128:128,32,4,2,1;128:128,48,4;"
            "128:128,48,4,2,1;128:256,32,8;128:64,32,4;128:64,32,2")
#: checked only (the other head dims' tiles of the schedule)
CHECK_ONLY = "16:64,16,4;32:64,32,4;256:64,32,4"
TABLE = []


def log(*a):
    print(f"[{time.time() - T0:5.0f}s]", *a, flush=True)


def save():
    with open(os.path.join(OUT, "flash.json"), "w") as f:
        json.dump(RES, f, indent=1, default=str)
    with open(os.path.join(OUT, "flash_table.txt"), "w") as f:
        f.write("\n".join(TABLE) + "\n")


def parse(spec):
    """[(d, tiles)]: tiles (bm, bn, warps), or ("before", bm, bn, warps) for the kernel before
    this session (``bD:...``)."""
    out = []
    for part in filter(None, (p.strip() for p in spec.split(";"))):
        d, t = part.split(":")
        tiles = tuple(int(x) for x in t.split(","))
        if d.startswith("b"):
            d, tiles = d[1:], ("before",) + tiles
        out.append((int(d), tiles))
    return out


class Cfg:
    """A FlashConfig and the module (flash.py now, or the one before) that compiles it."""

    def __init__(self, mod, cfg):
        self.mod, self.cfg = mod, cfg
        self.key = (mod.__name__, cfg)

    def __getattr__(self, a):
        return getattr(self.cfg, a)

    def __hash__(self):
        return hash(self.key)

    def __eq__(self, o):
        return self.key == o.key

    def __repr__(self):
        return f"{'before:' if self.mod is flash_before else ''}{self.cfg}"


def arch():
    major, minor = torch.cuda.get_device_capability(0)
    return f"sm_{major}{minor}"


def cfg_of(d, bf16, causal, tiles):
    if tiles[0] == "before":
        bm, bn, nw = tiles[1:]
        return Cfg(flash_before, flash_before.FlashConfig(d, d, bf16=bf16, bm=bm, bn=bn, nw=nw,
                                                          causal=causal))
    bm, bn, nw, *st = tiles
    return Cfg(flash_now, flash_now.FlashConfig(d, d, bf16=bf16, bm=bm, bn=bn, nw=nw,
                                                causal=causal, stages=st[0] if st else 2,
                                                mma_sum=bool(st[1]) if len(st) > 1 else False))


# ------------------------------------------------------------------ compile, ptxas -v, load

def compile_one(cfg):
    """(cubin, ptxas -v info: registers, spill bytes) of one variant: NVRTC through kdsl's
    ctypes handle with --ptxas-options=-v (else kdsl's compile, no info)."""
    from kdsl_cuda import nvrtc
    src = cfg.mod.source(cfg.cfg)
    lib = nvrtc.library()
    d = getattr(lib, "dll", None)
    if d is None:
        return build.compile_cubin(src, arch=arch()), {}
    prog = ctypes.c_void_p()
    d.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"flash.cu", 0, None, None)
    try:
        args = [f"-arch={arch()}".encode(), b"--std=c++17", b"--ptxas-options=-v"]
        argv = (ctypes.c_char_p * len(args))(*args)
        err = d.nvrtcCompileProgram(prog, len(args), argv)
        size = ctypes.c_size_t()
        d.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        d.nvrtcGetProgramLog(prog, buf)
        text = buf.raw.rstrip(b"\0").decode(errors="replace")
        if err != 0:
            raise RuntimeError(f"NVRTC error {err}: {text[-2000:]}")
        d.nvrtcGetCUBINSize(prog, ctypes.byref(size))
        cub = ctypes.create_string_buffer(size.value)
        d.nvrtcGetCUBIN(prog, cub)
        cubin = cub.raw
    finally:
        d.nvrtcDestroyProgram(ctypes.byref(prog))
    info = {}
    m = re.search(r"Used (\d+) registers", text)
    if m:
        info["regs"] = int(m.group(1))
    m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", text)
    if m:
        info["spill_stores"], info["spill_loads"] = int(m.group(1)), int(m.group(2))
    m = re.search(r"(\d+) bytes stack frame", text)
    if m:
        info["stack"] = int(m.group(1))
    return cubin, info


_CUBIN, _KERN, INFO = {}, {}, {}


def precompile(cfgs):
    from concurrent.futures import ThreadPoolExecutor
    todo = [c for c in dict.fromkeys(cfgs) if c not in _CUBIN]
    t0 = time.time()

    def one(c):
        try:
            return compile_one(c)
        except Exception as e:      # noqa: BLE001
            return e, {}
    with ThreadPoolExecutor(16) as ex:
        for c, (cub, info) in zip(todo, ex.map(one, todo)):
            _CUBIN[c] = cub
            INFO[c] = info
            if isinstance(cub, Exception):
                RES["errors"].append(f"compile {c}: {cub!r}"[:1000])
                log(f"compile FAILED {c}: {cub!r}"[:2000])
    log(f"compiled {len(todo)} kernels in {time.time() - t0:.1f} s")


def kernel(cfg):
    if cfg not in _KERN:
        import cupy
        cub = _CUBIN.get(cfg)
        if cub is None:
            precompile([cfg])
            cub = _CUBIN[cfg]
        if isinstance(cub, Exception):
            raise cub
        path = os.path.join(tempfile.gettempdir(), f"kd_flash_{abs(hash(cfg))}.cubin")
        with open(path, "wb") as f:
            f.write(cub)
        kern = cupy.RawModule(path=path).get_function("kd_flash_fwd")
        kern.max_dynamic_shared_size_bytes = cfg.smem_bytes
        _KERN[cfg] = kern
    return _KERN[cfg]


def run(cfg, q, k, v, out=None, scale=None):
    """attention(q, k, v) by the raw kernel; q (B, H, Nq, D), k/v (B, Hk, Nk, D)."""
    B, H, N, D = q.shape
    Hk, Nk = k.shape[1], k.shape[2]
    o = out if out is not None else torch.empty(B, H, N, v.shape[-1], dtype=q.dtype, device=DEV)
    kern = kernel(cfg)
    args = [np.uint64(x.data_ptr()) for x in (q, k, v, o)] + [
        np.int32(H), np.int32(H // Hk), np.int32(N), np.int32(Nk)]
    for x in (q, k, v, o):
        assert x.stride(-1) == 1
        args += [np.int64(x.stride(0)), np.int64(x.stride(1)), np.int64(x.stride(2))]
    args += [np.float32(D ** -0.5 if scale is None else scale), np.int64(1)]
    if N > 0 and B * H > 0:
        g = cfg.mod.grid(cfg.cfg, B * H, N)
        kern(g[:2], (cfg.threads,), tuple(args), shared_mem=cfg.smem_bytes)
    return o


def reference(q, k, v, causal, scale=None):
    q, k, v = (x.double() for x in (q, k, v))
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    s = q @ k.transpose(-1, -2) * (q.shape[-1] ** -0.5 if scale is None else scale)
    if causal:      # key j visible to row i iff j < i + 1 (the kernel's causal_end = 1)
        n, m = s.shape[-2:]
        vis = torch.arange(m, device=DEV)[None, :] <= torch.arange(n, device=DEV)[:, None]
        s = s.masked_fill(~vis, float("-inf"))
    return torch.softmax(s, -1) @ v


def vname(c):
    st, ms = getattr(c.cfg, "stages", 2), getattr(c.cfg, "mma_sum", False)
    return ("before " if c.mod is flash_before else "") + f"{c.bm},{c.bn},{c.nw}" + \
        (f",{st},1" if ms else f",{st}" if st != 2 else "")


def tname(t):
    return ("b:" + ",".join(str(x) for x in t[1:])) if t[0] == "before" else ",".join(map(str, t))


def vkey(c):
    return f"{c.d}:{vname(c)}:{int(c.bf16)}:{int(c.causal)}"


# ------------------------------------------------------------------ 1. checks

def checks(variants):
    bad = 0
    for d, tiles in [x for x in variants if x[1][0] != "before"]:     # (checked last session)
        for bf16 in (False, True):
            dt = torch.bfloat16 if bf16 else torch.float16
            rtol = 6e-2 if bf16 else 8e-3      # (the tests' 2 * TOL, of max(1, |reference|))
            for causal in (False, True):
                cfg = cfg_of(d, bf16, causal, tiles)
                cases = [(1, 1, 4, 4), (100, 100, 4, 4), (1000, 1000, 4, 2), (77, 300, 4, 4),
                         (300, 77, 2, 1)]
                for nq, nk, h, hk in cases:
                    torch.manual_seed(nq + nk + d)
                    q = torch.randn(2, h, nq, d, dtype=dt, device=DEV)
                    k = torch.randn(2, hk, nk, d, dtype=dt, device=DEV)
                    v = torch.randn(2, hk, nk, d, dtype=dt, device=DEV)
                    try:
                        got = run(cfg, q, k, v).double()
                        want = reference(q, k, v, causal)
                        torch.cuda.synchronize()
                        ok_rows = ~torch.isnan(want)
                        same_nan = bool((torch.isnan(got) == torch.isnan(want)).all())
                        err = (got[ok_rows] - want[ok_rows]).abs().max().item() if ok_rows.any() else 0.0
                    except Exception as e:      # noqa: BLE001
                        traceback.print_exc()
                        err, same_nan = float("nan"), False
                        RES["errors"].append(f"check {cfg}: {e!r}"[:300])
                    scale_ = max(1.0, want[ok_rows].abs().max().item()) if err == err and ok_rows.any() else 1.0
                    tol = rtol * scale_
                    ok = same_nan and err <= tol
                    bad += not ok
                    RES["checks"].append(dict(d=d, tiles=tiles, bf16=bf16, causal=causal, nq=nq,
                                              nk=nk, heads=(h, hk), err=err, nan_ok=same_nan,
                                              ok=ok))
                    if not ok:
                        log(f"FAIL d={d} tiles={tiles} bf16={bf16} causal={causal} nq={nq} "
                            f"nk={nk} heads={h}/{hk}: err {err} nan_ok={same_nan}")
    # a strided view (heads and rows swapped in memory) and a negative scale
    for d, tiles in [x for x in variants if x[1][0] != "before"][:1]:
        q, k, v = (torch.randn(2, 300, 4, d, dtype=torch.float16, device=DEV).transpose(1, 2)
                   for _ in range(3))
        for scale in (None, -0.3):
            cfg = cfg_of(d, False, False, tiles)
            got = run(cfg, q, k, v, scale=scale).double()
            want = reference(q, k, v, False, scale)
            err = (got - want).abs().max().item()
            tol = 8e-3 * max(1.0, want.abs().max().item())
            RES["checks"].append(dict(d=d, tiles=tiles, strided=True, scale=scale, err=err,
                                      ok=err <= tol))
            bad += not err <= tol
            if not err <= tol:
                log(f"FAIL strided d={d} scale={scale}: err {err}")
    # scores growing by ~10 (natural units) per 64 keys: the lazy rescale raises its reference
    for d, tiles in [x for x in variants if x[1][0] != "before"]:
        for causal in (False, True):
            torch.manual_seed(5)
            q = torch.rand(2, 4, 700, d, device=DEV).add(0.5).half()
            k = (torch.rand(2, 4, 700, d, device=DEV) * 0.1
                 * torch.linspace(0, 40, 700, device=DEV)[None, None, :, None]).half()
            v = torch.randn(2, 4, 700, d, device=DEV).half()
            cfg = cfg_of(d, False, causal, tiles)
            got = run(cfg, q, k, v).double()
            want = reference(q, k, v, causal)
            err = (got - want).abs().max().item()
            tol = 8e-3 * max(1.0, want.abs().max().item())
            RES["checks"].append(dict(d=d, tiles=tiles, growing=True, causal=causal, err=err,
                                      ok=err <= tol))
            bad += not err <= tol
            if not err <= tol:
                log(f"FAIL growing d={d} tiles={tiles} causal={causal}: err {err}")
    errs = [c["err"] for c in RES["checks"] if c["err"] == c["err"]]
    log(f"checks: {len(RES['checks'])} cases, {bad} failed (max err {max(errs):.3g})")
    RES["failed_checks"] = bad
    return bad


# ------------------------------------------------------------------ 2. timing

def timeit(fn, reps=15):
    """Median ms of ``reps`` samples, each the mean of back-to-back calls lasting >= ~2 ms."""
    fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(True), torch.cuda.Event(True)
    a.record()
    fn()
    b.record()
    b.synchronize()
    inner = max(1, int(2.0 / max(a.elapsed_time(b), 1e-3)))
    out = []
    for _ in range(reps):
        a.record()
        for _ in range(inner):
            fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) / inner)
    out.sort()
    return out[len(out) // 2]


def flops(n, d, causal, bh=32):
    f = 4.0 * bh * n * n * d
    return f / 2 if causal else f


def sdpa(q, k, v, causal):
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def timing(variants, ns, quick=False, heads=(4, 8), bf16_rows=True, summary=True):
    hdr = (f"{'dtype':5s} {'N':>6s} {'D':>4s} {'causal':6s} {'tiles':>13s} {'regs':>4s} "
           f"{'spill':>5s} {'kdsl ms':>8s} {'sdpa ms':>8s} {'kdsl TF':>7s} {'ratio':>6s} {'err':>7s}")
    TABLE.append(hdr)
    log(hdr)
    rows = [(False, n) for n in ns] + ([(True, 4096)] if bf16_rows else [])
    bh = heads[0] * heads[1]
    for bf16, n in rows:
        dt = torch.bfloat16 if bf16 else torch.float16
        for d in sorted({d for d, _ in variants}):
            q, k, v = (torch.randn(*heads, n, d, dtype=dt, device=DEV) for _ in range(3))
            o = torch.empty_like(q)
            for causal in (False, True):
                try:
                    want = sdpa(q, k, v, causal)
                    t_ref = timeit(lambda: sdpa(q, k, v, causal))
                except Exception as e:      # noqa: BLE001
                    RES["errors"].append(f"sdpa {n} {d} {causal}: {e!r}"[:300])
                    continue
                for dd, tiles in variants:
                    if dd != d:
                        continue
                    cfg = cfg_of(d, bf16, causal, tiles)
                    try:
                        got = run(cfg, q, k, v, o)
                        torch.cuda.synchronize()
                        err = (got.float() - want.float()).abs().max().item()
                        t = timeit(lambda: run(cfg, q, k, v, o), reps=7 if quick else 11)
                    except Exception as e:      # noqa: BLE001
                        traceback.print_exc()
                        RES["errors"].append(f"time {cfg}: {e!r}"[:300])
                        continue
                    info = RES["variants"].get(vkey(cfg), {})
                    row = dict(dtype=str(dt)[6:], n=n, d=d, causal=causal, tiles=tiles, bh=bh,
                               kdsl_ms=t, sdpa_ms=t_ref, ratio=t_ref / t,
                               kdsl_tflops=flops(n, d, causal, bh) / t / 1e9,
                               sdpa_tflops=flops(n, d, causal, bh) / t_ref / 1e9, err_vs_sdpa=err,
                               regs=info.get("regs"), spill=info.get("spill_stores"))
                    RES["timing"].append(row)
                    line = (f"{row['dtype']:5s} {n:6d} {d:4d} {causal!s:6s} {tname(tiles):>13s} "
                            + (f"B*H={bh} " if bh != 32 else "") +
                            f"{str(row['regs']):>4s} {str(row['spill']):>5s} {t:8.3f} {t_ref:8.3f} "
                            f"{row['kdsl_tflops']:7.1f} {row['ratio']:6.2f} {err:7.1e}")
                    TABLE.append(line)
                    log(line)
            del q, k, v, o
            save()
    if not summary:
        return
    # the best variant per (dtype, n, d, causal), and the kernel before this session
    best, before = {}, {}
    for r in RES["timing"]:
        key = (r["dtype"], r["n"], r["d"], r["causal"], r["bh"])
        tab = before if r["tiles"][0] == "before" else best
        if key not in tab or r["kdsl_ms"] < tab[key]["kdsl_ms"]:
            tab[key] = r
    TABLE.append("")
    TABLE.append("best variant per row (ratio = sdpa_ms / kdsl_ms; before: the kernel of 4f91041):")
    for key, r in sorted(best.items()):
        b = before.get(key)
        line = (f"{r['dtype']:5s} {r['n']:6d} {r['d']:4d} {r['causal']!s:6s} {tname(r['tiles']):>13s} "
                + (f"B*H={r['bh']} " if r["bh"] != 32 else "") + f"ratio {r['ratio']:.2f} ({r['kdsl_tflops']:.0f} vs {r['sdpa_tflops']:.0f} TFLOP/s)"
                + (f"  before {b['ratio']:.2f} ({tname(b['tiles'])})" if b else ""))
        TABLE.append(line)
        log(line)
    RES["best"] = [dict(r) for r in best.values()]


# ------------------------------------------------------------------ 3. end to end

def e2e(rows):
    import kdsl as kd
    from kdsl.backends import registry
    if not registry.is_installed("cuda"):
        import kdsl_cuda
        kd.register_backend("cuda", kdsl_cuda.backend)

    def attention(q, k, v):
        s = q @ kd.swapaxes(k, -1, -2) * q.shape[-1] ** -0.5
        p = kd.exp(s - s.max(axis=-1, keepdims=True))
        return (p / p.sum(axis=-1, keepdims=True)) @ v

    def causal_attention(q, k, v):
        s = q @ kd.swapaxes(k, -1, -2) * q.shape[-1] ** -0.5
        i = kd.arange(q.shape[-2])[:, None]
        j = kd.arange(k.shape[-2])[None, :]
        s = kd.where(i >= j, s, -np.inf)
        p = kd.exp(s - s.max(axis=-1, keepdims=True))
        return p @ v / p.sum(axis=-1, keepdims=True)

    fns = {False: kd.kernel(attention, specialize=True),
           True: kd.kernel(causal_attention, specialize=True)}
    for dt, d, causal, ns in rows:
        for n in ns:
            q, k, v = (torch.randn(4, 8, n, d, dtype=dt, device=DEV) for _ in range(3))
            try:
                t0 = time.perf_counter()
                got = fns[causal](q, k, v, backend="cuda")
                torch.cuda.synchronize()
                first = time.perf_counter() - t0
                want = reference(q, k, v, causal) if n <= 1024 else sdpa(q, k, v, causal)
                err = (got.double() - want.double()).abs().max().item()
                t = timeit(lambda: fns[causal](q, k, v, backend="cuda"), reps=7)
                t_ref = timeit(lambda: sdpa(q, k, v, causal), reps=7)
            except Exception as e:      # noqa: BLE001
                traceback.print_exc()
                RES["e2e"].append(dict(dtype=str(dt), n=n, d=d, causal=causal, error=repr(e)[:500]))
                continue
            tol = 8e-3 if dt is torch.float16 else 4e-2
            row = dict(dtype=str(dt)[6:], n=n, d=d, causal=causal, first_call_s=first, ms=t,
                       sdpa_ms=t_ref, ratio=t_ref / t, err=err, ok=err <= tol)
            RES["e2e"].append(row)
            line = (f"e2e {row['dtype']:5s} N={n:6d} D={d:4d} causal={causal!s:5s} first {first:5.1f} s "
                    f"{t:8.3f} ms sdpa {t_ref:8.3f} ms ratio {row['ratio']:.2f} err {err:.1e}"
                    + ("" if row["ok"] else "  FAIL"))
            TABLE.append(line)
            log(line)
            save()


def racecheck_case():
    """Small attentions under compute-sanitizer: N=200, f16, causal and not, the default
    schedule's tiles for d=64 and d=128 and the few-CTA ones (partial tiles: the last-tile row
    checks), plus Nq != Nk with a strided view."""
    from kdsl_cuda.schedules import attention_op as ao
    bad = 0
    for d, tiles in ((64, ao.TILES[64]), (128, ao.TILES[128]), (64, ao.FEW_ROWS[64])):
        for causal in (False, True):
            cfg = cfg_of(d, False, causal, tiles)
            q, k, v = (torch.randn(1, 2, 200, d, dtype=torch.float16, device=DEV) for _ in range(3))
            got = run(cfg, q, k, v).double()
            err = (got - reference(q, k, v, causal)).abs().max().item()
            q2 = torch.randn(1, 130, 2, d, dtype=torch.float16, device=DEV).transpose(1, 2)
            got2 = run(cfg, q2, k, v).double()
            err2 = (got2 - reference(q2, k, v, causal)).abs().max().item()
            ok = err < 8e-3 and err2 < 8e-3
            bad += not ok
            print(f"racecheck case d={d} tiles={tiles} causal={causal}: max err {err:.2e} "
                  f"(Nq=130 strided: {err2:.2e})", "ok" if ok else "FAIL")
    torch.cuda.synchronize()
    sys.exit(1 if bad else 0)


def default_mode():
    """The tiles kdsl's default schedule picks (kdsl_cuda/schedules/attention_op.tiles) only:
    checked, timed against SDPA on the table's rows (B*H = 32) and on a small grid (B*H = 4:
    fewer CTAs than SMs, where the rule takes FEW_ROWS; TILES timed there too), then the user's
    kernels end to end."""
    from kdsl_cuda.schedules import attention_op as ao
    log("device:", RES["device"], "torch", torch.__version__, "nvrtc", RES["nvrtc"], "default schedule tiles:",
        ao.TILES, "few rows:", ao.FEW_ROWS, "few ctas <", ao.FEW_CTAS)
    RES["mode"] = "default"
    big = sorted({(d, ao.tiles(d, n, 32)) for d in (64, 128) for n in (1024, 4096, 16384)})
    small = sorted({(d, ao.tiles(d, n, 4)) for d in (64, 128) for n in (1024,)} |
                   {(d, ao.TILES[d]) for d in (64, 128)})
    extra = parse(CHECK_ONLY)
    allv = sorted(set(big) | set(small))
    cfgs = [cfg_of(d, bf16, causal, t) for d, t in allv + extra for bf16 in (False, True)
            for causal in (False, True)]
    precompile(cfgs)
    for c in cfgs:
        info = INFO.get(c, {})
        RES["variants"][vkey(c)] = info
        line = (f"ptxas d={c.d} tiles={vname(c)} {'bf16' if c.bf16 else 'f16'} "
                f"{'causal' if c.causal else ''}: {info.get('regs')} registers, "
                f"{info.get('spill_stores')} bytes spill stores, smem {c.smem_bytes} B")
        TABLE.append(line)
        log(line)
    save()
    try:
        checks(allv + extra)
    except Exception as e:      # noqa: BLE001
        traceback.print_exc()
        RES["errors"].append(f"checks: {e!r}"[:300])
    save()
    try:
        timing(big, (1024, 4096, 16384), summary=False)
        TABLE.append("")
        TABLE.append("small grid (B*H = 4): the rule's FEW_ROWS against TILES")
        timing(small, (1024, 4096), heads=(1, 4), bf16_rows=False)
    except Exception as e:      # noqa: BLE001
        traceback.print_exc()
        RES["errors"].append(f"timing: {e!r}"[:300])
    save()
    try:
        e2e([(torch.float16, 64, False, (1000, 4096)), (torch.float16, 64, True, (4096,)),
             (torch.float16, 128, False, (4096,)), (torch.float16, 128, True, (4096,)),
             (torch.bfloat16, 128, False, (4096,))])
    except Exception as e:      # noqa: BLE001
        traceback.print_exc()
        RES["errors"].append(f"e2e: {e!r}"[:300])
    save()
    log("done", "errors:", len(RES["errors"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", default=os.environ.get("FLASH_VARIANTS", VARIANTS))
    ap.add_argument("--quick", action="store_true", help="N 1024/4096 only, fewer samples")
    ap.add_argument("--no-e2e", action="store_true")
    ap.add_argument("--racecheck-case", action="store_true")
    ap.add_argument("--default", action="store_true",
                    help="only the tiles the default schedule picks (attention_op.tiles), < 90 s")
    a = ap.parse_args()
    if a.racecheck_case:
        racecheck_case()
        return
    if a.default:
        return default_mode()
    variants = parse(a.variants)
    log("device:", RES["device"], "torch", torch.__version__, "nvrtc", RES["nvrtc"], "variants:", variants)
    extra = parse(CHECK_ONLY)
    cfgs = [cfg_of(d, bf16, causal, t) for d, t in variants + extra for bf16 in (False, True)
            for causal in (False, True)]
    precompile(cfgs)
    for c in cfgs:
        info = INFO.get(c, {})
        RES["variants"][vkey(c)] = info
        if not c.bf16 and not c.causal:
            line = (f"ptxas d={c.d} tiles={vname(c)}: {info.get('regs')} registers, "
                    f"{info.get('spill_stores')} bytes spill stores, smem {c.smem_bytes} B")
            TABLE.append(line)
            log(line)
    save()
    try:
        checks(variants + extra)
    except Exception as e:      # noqa: BLE001
        traceback.print_exc()
        RES["errors"].append(f"checks: {e!r}"[:300])
    save()
    try:
        timing(variants, (1024, 4096) if a.quick else (1024, 4096, 16384), a.quick)
    except Exception as e:      # noqa: BLE001
        traceback.print_exc()
        RES["errors"].append(f"timing: {e!r}"[:300])
    save()
    if not a.no_e2e:
        try:
            e2e([(torch.float16, 64, False, (1000,)), (torch.float16, 128, True, (4096,))])
        except Exception as e:      # noqa: BLE001
            traceback.print_exc()
            RES["errors"].append(f"e2e: {e!r}"[:300])
    save()
    log("done", "errors:", len(RES["errors"]))


if __name__ == "__main__":
    main()
