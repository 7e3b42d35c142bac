"""Issue 28 item 3 (helper flashgpu): kdsl's tensor-core flash-attention kernel against torch.

    cd <repo root> && python3 .devrun/flashgpu/bench.py [--quick]

1. The kernel text of kdsl_cuda/codegen/flash.py, compiled by kdsl's NVRTC path, launched raw
   (cupy), checked against a float64 reference (torch on the GPU) on small and odd sizes:
   N in 1, 17, 100, 300 (N=1 / ragged tiles / several key tiles), D in 16, 64, 128, f16 and
   bf16, causal and not, GQA (2 query heads per kv head).  Any failure is printed as FAIL.
2. Tile sweep (bm, bn, warps) per head dim at B*H=32, N=4096: registers, spills, time.
3. The table: B*H=32 (B=4, H=8), N 1024/4096 (16384 unless --quick), D 64/128, f16 and bf16,
   causal and not: kdsl flash (best tiles of 2.) against torch SDPA (flash backend), with
   TFLOP/s and ratio = torch / kdsl (>= 1: kdsl faster).
4. kdsl end to end: the user's numpy-style kernel through the default cuda schedule (what
   kernel(q, k, v) runs today), checked and timed at N=1024 D=64 f16 (the "before" number).
Writes $OUT/flashgpu.json (else ./flashgpu.json).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import cupy  # noqa: E402

from kdsl_cuda import build  # noqa: E402
from kdsl_cuda.codegen import flash  # noqa: E402

DEV = "cuda"
RESULTS = {"device": torch.cuda.get_device_name(0), "checks": [], "sweep": [], "table": [],
           "kdsl_default": []}
_MODS = {}


_CUBINS = {}


def _cubin(cfg):
    try:
        return build.compile_cubin(flash.source(cfg), arch=_arch())
    except Exception as e:      # noqa: BLE001  (kdsl's NVRTC not found: cupy's)
        print("kdsl NVRTC failed, cupy's instead:", repr(e)[:200])
        return None


def precompile(cfgs):
    """Compile every config at once (NVRTC in threads: ctypes drops the GIL)."""
    from concurrent.futures import ThreadPoolExecutor
    todo = [c for c in dict.fromkeys(cfgs) if c not in _CUBINS]
    t0 = time.time()
    with ThreadPoolExecutor(16) as ex:
        for c, cub in zip(todo, ex.map(_cubin, todo)):
            _CUBINS[c] = cub
    print(f"compiled {len(todo)} kernels in {time.time() - t0:.1f} s")


def kernel_for(cfg):
    """The cupy kernel of ``cfg``, compiled once per config."""
    if cfg not in _MODS:
        cub = _CUBINS.get(cfg) or _cubin(cfg)
        if cub is None:
            mod = cupy.RawModule(code=flash.source(cfg), options=("-std=c++17",),
                                 backend="nvrtc")
            kern = mod.get_function("kd_flash_fwd")
            kern.max_dynamic_shared_size_bytes = cfg.smem_bytes
            _MODS[cfg] = kern
            return kern
        path = os.path.join(tempfile.gettempdir(), f"kd_flash_{abs(hash(cfg))}.cubin")
        with open(path, "wb") as f:
            f.write(cub)
        mod = cupy.RawModule(path=path)
        kern = mod.get_function("kd_flash_fwd")
        kern.max_dynamic_shared_size_bytes = cfg.smem_bytes
        _MODS[cfg] = kern
    return _MODS[cfg]


def _arch():
    major, minor = torch.cuda.get_device_capability(0)
    return f"sm_{major}{minor}"


def run_flash(cfg, q, k, v, causal, out=None):
    """out = attention(q, k, v) by the flash kernel; q (B, H, N, D), k/v (B, Hk, Nk, D)."""
    B, H, N, D = q.shape
    Hk, Nk = k.shape[1], k.shape[2]
    o = out if out is not None else torch.empty(B, H, N, v.shape[-1], dtype=q.dtype, device=DEV)
    kern = kernel_for(cfg)
    g = flash.grid(cfg, B * H, N)
    s = [x.stride() for x in (q, k, v, o)]
    assert all(x.stride(-1) == 1 for x in (q, k, v, o))
    args = [np.uint64(x.data_ptr()) for x in (q, k, v, o)] + [
            np.int32(H), np.int32(H // Hk), np.int32(N), np.int32(Nk)]
    for st in s:
        args += [np.int64(st[0]), np.int64(st[1]), np.int64(st[2])]
    args += [np.float32(D ** -0.5), np.int64(1)]
    if N > 0 and B * H > 0:
        kern(g[:2], (cfg.threads,), tuple(args), shared_mem=cfg.smem_bytes)
    return o


def reference(q, k, v, causal):
    q, k, v = (x.double() for x in (q, k, v))
    rep = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(rep, 1)
    v = v.repeat_interleave(rep, 1)
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        n, m = s.shape[-2:]
        s = s.masked_fill(~torch.ones(n, m, dtype=torch.bool, device=DEV).tril(), float("-inf"))
    return torch.softmax(s, -1) @ v


def cfg_of(d, dt, causal, bm, bn, nw, gqa=False):
    return flash.FlashConfig(d, d, bf16=dt is torch.bfloat16, bm=bm, bn=bn, nw=nw,
                             causal=causal, gqa=gqa)


CHECK_TILES = ((16, (64, 16, 4)), (64, (128, 64, 4)), (128, (64, 64, 4)), (256, (64, 32, 4)))


def all_configs(ns_table):
    out = []
    for dt in (torch.float16, torch.bfloat16):
        for causal in (False, True):
            out += [cfg_of(d, dt, causal, *t) for d, t in CHECK_TILES]
            out += [cfg_of(d, torch.float16, causal, *t) for d, opts in SWEEP.items() for t in opts]
    return out


def checks():
    bad = 0
    for dt in (torch.float16, torch.bfloat16):
        for d, tiles in CHECK_TILES:
            for n in (1, 17, 100, 300):
                for causal in (False, True):
                    for gqa in (False, True):
                        hk = 2 if gqa else 4
                        q = torch.randn(2, 4, n, d, dtype=dt, device=DEV)
                        k = torch.randn(2, hk, n, d, dtype=dt, device=DEV)
                        v = torch.randn(2, hk, n, d, dtype=dt, device=DEV)
                        cfg = cfg_of(d, dt, causal, *tiles, gqa=gqa)
                        try:
                            got = run_flash(cfg, q, k, v, causal).double()
                            torch.cuda.synchronize()
                            err = (got - reference(q, k, v, causal)).abs().max().item()
                        except Exception as e:      # noqa: BLE001
                            err = float("nan")
                            traceback.print_exc()
                            print("error:", e)
                        tol = 2e-2 if dt is torch.float16 else 6e-2
                        ok = err <= tol
                        bad += not ok
                        RESULTS["checks"].append(dict(dtype=str(dt), d=d, tiles=tiles, n=n,
                                                      causal=causal, gqa=gqa, err=err, ok=ok))
                        if not ok:
                            print(f"FAIL {dt} d={d} tiles={tiles} n={n} causal={causal} "
                                  f"gqa={gqa}: max err {err}")
    # a strided (non-contiguous) view: heads and rows transposed in memory
    q, k, v = (torch.randn(2, 300, 4, 64, dtype=torch.float16, device=DEV).transpose(1, 2)
               for _ in range(3))
    got = run_flash(cfg_of(64, torch.float16, False, 128, 64, 4), q, k, v, False).double()
    err = (got - reference(q, k, v, False)).abs().max().item()
    RESULTS["checks"].append(dict(strided=True, err=err, ok=err <= 2e-2))
    bad += err > 2e-2
    print(f"checks: {len(RESULTS['checks'])} cases, {bad} failed "
          f"(max err {max(c['err'] for c in RESULTS['checks'] if c['err'] == c['err']):.3g})")
    return bad


def timeit(fn, reps=20):
    """Median ms of ``reps`` samples, each the mean of back-to-back calls lasting >= ~2 ms."""
    fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(True), torch.cuda.Event(True)
    a.record()
    fn()
    b.record()
    b.synchronize()
    one = max(a.elapsed_time(b), 1e-3)
    inner = max(1, int(2.0 / one))
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


SWEEP = {64: [(128, 64, 4), (64, 64, 4), (128, 32, 4), (128, 128, 8)],
         128: [(64, 64, 4), (128, 32, 4), (64, 32, 4), (128, 64, 4)]}


def sweep(n=4096):
    best = {}
    for d, opts in SWEEP.items():
        q, k, v = (torch.randn(4, 8, n, d, dtype=torch.float16, device=DEV) for _ in range(3))
        for causal in (False, True):
            for tiles in opts:
                cfg = cfg_of(d, torch.float16, causal, *tiles)
                try:
                    kern = kernel_for(cfg)
                    ms = timeit(lambda: run_flash(cfg, q, k, v, causal), reps=7)
                    regs, spill = kern.num_regs, kern.local_size_bytes
                except Exception as e:      # noqa: BLE001
                    print(f"sweep d={d} tiles={tiles}: {e}")
                    continue
                tf = flops(n, d, causal) / ms / 1e9
                RESULTS["sweep"].append(dict(d=d, causal=causal, tiles=tiles, ms=ms, tflops=tf,
                                             regs=regs, local_bytes=spill))
                print(f"sweep d={d:3d} causal={causal!s:5} bm,bn,warps={tiles}: {ms:7.3f} ms "
                      f"{tf:6.1f} TFLOP/s regs={regs} local={spill}")
                if (d, causal) not in best or ms < best[(d, causal)][1]:
                    best[(d, causal)] = (tiles, ms)
    return {key: t for key, (t, _) in best.items()}


def table(best, ns):
    print(f"{'dtype':9s} {'N':>6s} {'D':>4s} {'causal':6s} {'tiles':>14s} {'kdsl ms':>9s} "
          f"{'sdpa ms':>9s} {'kdsl TF':>8s} {'ratio':>6s} {'maxerr':>8s}")
    for dt in (torch.float16, torch.bfloat16):
        for n in ns:
            for d in (64, 128):
                for causal in (False, True):
                    q, k, v = (torch.randn(4, 8, n, d, dtype=dt, device=DEV) for _ in range(3))
                    tiles = best.get((d, causal), SWEEP[d][0])
                    cfg = cfg_of(d, dt, causal, *tiles)
                    o = torch.empty_like(q)
                    got = run_flash(cfg, q, k, v, causal, o)
                    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
                        want = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                        t_ref = timeit(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
                    err = (got.float() - want.float()).abs().max().item()
                    t = timeit(lambda: run_flash(cfg, q, k, v, causal, o))
                    row = dict(dtype=str(dt), n=n, d=d, causal=causal, tiles=tiles, kdsl_ms=t,
                               sdpa_ms=t_ref, kdsl_tflops=flops(n, d, causal) / t / 1e9,
                               ratio=t_ref / t, err_vs_sdpa=err)
                    RESULTS["table"].append(row)
                    print(f"{str(dt)[6:]:9s} {n:6d} {d:4d} {causal!s:6s} {str(tiles):>14s} {t:9.3f} "
                          f"{t_ref:9.3f} {row['kdsl_tflops']:8.1f} {row['ratio']:6.2f} {err:8.2g}")


def _kdsl_kernels():
    import kdsl as kd
    from kdsl.backends import registry
    if not registry.is_installed("cuda"):
        import kdsl_cuda
        kd.register_backend("cuda", kdsl_cuda.backend)

    @kd.kernel
    def attention(q, k, v):
        s = q @ kd.swapaxes(k, -1, -2) * q.shape[-1] ** -0.5
        p = kd.exp(s - s.max(axis=-1, keepdims=True))
        return (p / p.sum(axis=-1, keepdims=True)) @ v

    @kd.kernel
    def causal_attention(q, k, v):
        s = q @ kd.swapaxes(k, -1, -2) * q.shape[-1] ** -0.5
        i = kd.arange(q.shape[-2])[:, None]
        j = kd.arange(k.shape[-2])[None, :]
        s = kd.where(i >= j, s, -np.inf)
        p = kd.exp(s - s.max(axis=-1, keepdims=True))
        return (p / p.sum(axis=-1, keepdims=True)) @ v

    return {False: attention, True: causal_attention}


E2E = [(torch.float16, (1024, 4096)), (torch.bfloat16, (4096,))]


def kdsl_default(rows=E2E):
    """The user's kernel through kdsl's default cuda schedule (the flash schedule when this
    checkout picks it): checked (float64 reference up to N=1024, else SDPA), then timed.
    Each (dtype, D, causal, size class of N) is one compile (first s)."""
    fns = _kdsl_kernels()
    print(f"{'kdsl e2e':9s} {'N':>6s} {'D':>4s} {'causal':6s} {'first s':>8s} {'kdsl ms':>9s} "
          f"{'sdpa ms':>9s} {'kdsl TF':>8s} {'ratio':>6s} {'maxerr':>8s}")
    for dt, ns in rows:
        for d in (64, 128):
            for causal in (False, True):
                fn = fns[causal]
                for n in ns:
                    q, k, v = (torch.randn(4, 8, n, d, dtype=dt, device=DEV) for _ in range(3))
                    try:
                        t0 = time.perf_counter()
                        got = fn(q, k, v, backend="cuda")
                        torch.cuda.synchronize()
                        first = time.perf_counter() - t0
                        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
                            want = (reference(q, k, v, causal) if n <= 1024 else
                                    F.scaled_dot_product_attention(q, k, v, is_causal=causal))
                            t_ref = timeit(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
                        err = (got.double() - want.double()).abs().max().item()
                        t = timeit(lambda: fn(q, k, v, backend="cuda"), reps=10)
                    except Exception as e:      # noqa: BLE001
                        traceback.print_exc()
                        RESULTS["kdsl_default"].append(dict(dtype=str(dt), n=n, d=d, causal=causal,
                                                            error=repr(e)[:500]))
                        continue
                    row = dict(dtype=str(dt), n=n, d=d, causal=causal, first_call_s=first, ms=t,
                               sdpa_ms=t_ref, ratio=t_ref / t, err=err,
                               tflops=flops(n, d, causal) / t / 1e9)
                    RESULTS["kdsl_default"].append(row)
                    print(f"{str(dt)[6:]:9s} {n:6d} {d:4d} {causal!s:6s} {first:8.1f} {t:9.3f} "
                          f"{t_ref:9.3f} {row['tflops']:8.1f} {row['ratio']:6.2f} {err:8.2g}"
                          + ("  FAIL" if err > (2e-2 if dt is torch.float16 else 6e-2) else ""))
                    save()


def save():
    out = os.environ.get("OUT") or "."
    with open(os.path.join(out, "flashgpu.json"), "w") as f:
        json.dump(RESULTS, f, indent=1, default=str)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="no tile sweep, no raw table")
    ap.add_argument("--raw", action="store_true", help="only the raw kernel (checks, sweep, table)")
    a = ap.parse_args()
    print("device:", RESULTS["device"], "torch", torch.__version__)
    t0 = time.time()
    if not a.raw:
        print("== kdsl end to end: the numpy-style kernel, default cuda schedule, B*H=32 ==")
        kdsl_default()
        print(f"[{time.time() - t0:.0f} s]")
    if a.quick:
        return
    print("== the raw flash kernel (kdsl_cuda/codegen/flash.py) ==")
    precompile(all_configs(None))
    RESULTS["failed_checks"] = checks()
    save()
    print(f"[{time.time() - t0:.0f} s]")
    best = sweep()
    save()
    print(f"[{time.time() - t0:.0f} s]")
    table(best, (1024, 4096, 16384))
    save()
    print(f"[{time.time() - t0:.0f} s]")


if __name__ == "__main__":
    main()
