#!/usr/bin/env python3
"""Harness for the wgmma prototypes (run on the H200): cd /work/proto/wgmma && python3 run.py

Each kernel runs in its own child process (a sticky CUDA error or a hang in one kernel cannot take
the others down): compile with CuPy RawKernel (-arch=sm_90a), check against
torch.matmul(a.float(), b.float()) at small sizes and at 8192^3, time with CUDA events
(median of 5 x 20 launches) against torch.matmul(a, b) (cuBLAS, f16 out), print registers,
local memory, and the SASS counts (HGMMA, LDGSTS/UTMALDG, BAR, STL/LDL) when cuobjdump is found.
If a kernel fails the small check, descriptor variants (-D...) are tried and reported.
Options: --only wg1[,wg2]   --no-big   --child NAME (internal)
"""
import glob, os, subprocess, sys, time, traceback

HERE = os.path.dirname(os.path.abspath(__file__))
OPTS = ("-std=c++17", "-arch=sm_90a")
SMALL = [(1024, 2048, 512), (384, 768, 192), (128, 256, 64)]
BIG = (8192, 8192, 8192)
KERNELS = {
    # name: file, function, threads, block tile (BM, BN), dynamic smem bytes, grid kind, uses TMA
    "wg0": dict(file="wg0.cu", func="wg0_gemm", threads=128, bm=64, bn=128,
                smem=8192 + 16384 + 128, grid="2d", tma=False,
                variants=[("A lbo/sbo swapped", ("-DWG0_A_LBO=1024", "-DWG0_A_SBO=128")),
                          ("B lbo/sbo swapped", ("-DWG0_B_LBO=1024", "-DWG0_B_SBO=128")),
                          ("A+B lbo/sbo swapped", ("-DWG0_A_LBO=1024", "-DWG0_A_SBO=128",
                                                   "-DWG0_B_LBO=1024", "-DWG0_B_SBO=128"))]),
    "wg1": dict(file="wg1.cu", func="wg1_gemm", threads=256, bm=128, bn=256,
                smem=4 * 49152 + 1024, grid="1d", tma=False,
                variants=[("B lbo/sbo swapped", ("-DWG1_B_LBO=1024", "-DWG1_B_SBO=8192")),
                          ("A lbo=0", ("-DWG1_A_LBO=0",)),
                          ("3 stages", ("-DWG1_STAGES=3",))],
                perf_variants=[("kdsl structure: wait 0, 2 barriers/step, distance S-1", ("-DWG1_KDSL=1",)),
                               ("kdsl structure, 3 stages", ("-DWG1_KDSL=1", "-DWG1_STAGES=3")),
                               ("no fence.proxy.async (spec says needed; timing experiment)", ("-DWG1_PROXY_FENCE=0",)),
                               ("GROUP_M=16", ("-DWG1_GROUP_M=16",))]),
    "wg2": dict(file="wg2.cu", func="wg2_gemm", threads=384, bm=128, bn=256,
                smem=4 * 49152 + 64 + 1024, grid="1d", tma=True, variants=[],
                perf_variants=[("GROUP_M=16", ("-DWG2_GROUP_M=16",)), ("3 stages", ("-DWG2_STAGES=3",))]),
}
HANG_S = 10.0


def log(*a):
    print(*a, flush=True)


# ----------------------------------------------------------------------------- child side
def sass_counts(src, extra_opts):
    """SASS instruction counts, if cuobjdump can be found (optional)."""
    import shutil, tempfile
    tool = shutil.which("cuobjdump")
    if tool is None:
        import site
        pats = ["/usr/local/cuda*/bin/cuobjdump", "/tmp/cudatools/nvidia/cu13/bin/cuobjdump"]
        pats += [sp + "/nvidia/*/bin/cuobjdump" for sp in site.getsitepackages()]
        for pat in pats:
            hits = glob.glob(pat)
            if hits:
                tool = hits[0]
                break
    if tool is None:
        return "cuobjdump not found (SASS counts skipped)"
    import cupy
    obj = cupy.cuda.compiler.compile_using_nvrtc(src, OPTS + tuple(extra_opts))
    if isinstance(obj, tuple):   # (binary, name mapping) in recent CuPy
        obj = obj[0]
    if isinstance(obj, str) or not bytes(obj[:4]) == b"\x7fELF":
        return "NVRTC gave PTX, not a cubin (SASS counts skipped)"
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(bytes(obj))
        path = f.name
    out = subprocess.run([tool, "-sass", path], capture_output=True, text=True).stdout
    os.unlink(path)
    import re
    counts = {}
    for key, rx in (("HGMMA", r"\bHGMMA\."), ("LDGSTS", r"\bLDGSTS\b"), ("UTMALDG", r"\bUTMALDG\b"),
                    ("BAR", r"\bBAR\."), ("SYNCS", r"\bSYNCS\."), ("STL", r"\bSTL\b"), ("LDL", r"\bLDL\b"),
                    ("WARPGROUP.DEPBAR", r"WARPGROUP\.DEPBAR"), ("STG", r"\bSTG\b")):
        counts[key] = len(re.findall(rx, out))
    return " ".join(f"{k}={v}" for k, v in counts.items())


def child(name, big=True):
    import numpy as np
    import torch
    import cupy as cp

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    cfg = KERNELS[name]
    src = open(os.path.join(HERE, cfg["file"])).read()
    dev = torch.cuda.get_device_name()
    log(f"[{name}] device: {dev}; torch {torch.__version__}, cupy {cp.__version__}")

    def build(extra=()):
        k = cp.RawKernel(src, cfg["func"], options=OPTS + tuple(extra))
        k.max_dynamic_shared_size_bytes = cfg["smem"]
        return k

    def tensor_map(ptr, inner, outer, box_inner, box_outer):
        from cuda.bindings import driver as drv
        import ctypes
        u64, u32 = drv.cuuint64_t, drv.cuuint32_t
        err, tm = drv.cuTensorMapEncodeTiled(
            drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, ptr,
            [u64(inner), u64(outer)], [u64(inner * 2)], [u32(box_inner), u32(box_outer)], [u32(1), u32(1)],
            drv.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
            drv.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
            drv.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            drv.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
        if err != drv.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"cuTensorMapEncodeTiled: {err}")
        raw = ctypes.string_at(tm.getPtr(), 128)
        return np.frombuffer(raw, dtype=np.dtype("V128")).copy()   # size-1 array: passed by value

    def make_launch(k, a, b, c, M, N, K):
        if cfg["grid"] == "2d":
            grid = (N // cfg["bn"], M // cfg["bm"], 1)
        else:
            grid = ((N // cfg["bn"]) * (M // cfg["bm"]), 1, 1)
        block = (cfg["threads"], 1, 1)
        ca, cb, cc = cp.from_dlpack(a), cp.from_dlpack(b), cp.from_dlpack(c)
        if cfg["tma"]:
            tmA = tensor_map(a.data_ptr(), K, M, 64, 128)
            tmB = tensor_map(b.data_ptr(), N, K, 64, 64)
            args = (tmA, tmB, cc, np.int32(M), np.int32(N), np.int32(K))
        else:
            args = (ca, cb, cc, np.int32(M), np.int32(N), np.int32(K))
        return lambda: k(grid, block, args, shared_mem=cfg["smem"])

    def sync_or_die(what):
        ev = cp.cuda.Event()
        ev.record()
        t0 = time.time()
        while not ev.done:
            if time.time() - t0 > HANG_S:
                log(f"[{name}] HANG: {what} not finished after {HANG_S:.0f} s -- giving up on this kernel")
                os._exit(3)
            time.sleep(0.002)
        cp.cuda.runtime.deviceSynchronize()   # raises on a launch / memory error

    def check(k, M, N, K, seed=0):
        g = torch.Generator(device="cuda").manual_seed(seed)
        a = torch.randn(M, K, device="cuda", dtype=torch.float16, generator=g)
        b = torch.randn(K, N, device="cuda", dtype=torch.float16, generator=g)
        c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float32)
        run = make_launch(k, a, b, c, M, N, K)
        torch.cuda.synchronize()
        run()
        sync_or_die(f"{M}x{N}x{K} launch")
        ref = torch.matmul(a.float(), b.float())
        err = (c - ref).abs().max().item()
        scale = ref.abs().max().item()
        nan = torch.isnan(c).any().item()
        ok = (not nan) and err <= 1e-2 * scale
        return ok, err, scale, nan, (a, b, c, run)

    def bench(fn, reps=5, inner=20):
        fn()
        torch.cuda.synchronize()
        ts = []
        for _ in range(reps):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            for _ in range(inner):
                fn()
            e1.record()
            e1.synchronize()
            ts.append(e0.elapsed_time(e1) / inner)
        return sorted(ts)[len(ts) // 2]

    t0 = time.time()
    k = build()
    try:
        nreg, lmem = k.num_regs, k.local_size_bytes
    except Exception as e:   # compile error surfaces here
        log(f"[{name}] COMPILE FAILED: {e}")
        return 2
    log(f"[{name}] compiled in {time.time() - t0:.1f} s: num_regs={nreg} local_size_bytes={lmem} "
        f"smem={cfg['smem']} threads={cfg['threads']}")
    try:
        log(f"[{name}] SASS: {sass_counts(src, ())}")
    except Exception as e:
        log(f"[{name}] SASS counts failed: {e!r}")

    all_ok = True
    for (M, N, K) in SMALL:
        ok, err, scale, nan, _ = check(k, M, N, K)
        all_ok &= ok
        log(f"[{name}] check {M}x{N}x{K}: {'PASS' if ok else 'FAIL'} max_abs_err={err:.3e} "
            f"(max|ref|={scale:.1f}, rel={err / max(scale, 1e-30):.2e}{', NaN in output' if nan else ''})")
    if not all_ok:
        for label, extra in cfg["variants"]:
            try:
                kv = build(extra)
                ok, err, scale, nan, _ = check(kv, *SMALL[0])
                log(f"[{name}] variant '{label}' {' '.join(extra)}: {'PASS' if ok else 'fail'} "
                    f"rel={err / max(scale, 1e-30):.2e}")
            except SystemExit:
                raise
            except Exception as e:
                log(f"[{name}] variant '{label}': error {e!r}")
        return 1
    if not big:
        return 0

    M, N, K = BIG
    ok, err, scale, nan, (a, b, c, run) = check(k, M, N, K)
    log(f"[{name}] check {M}x{N}x{K}: {'PASS' if ok else 'FAIL'} max_abs_err={err:.3e} "
        f"(max|ref|={scale:.1f}, rel={err / max(scale, 1e-30):.2e})")
    ms = bench(run)
    ms_cublas = bench(lambda: torch.matmul(a, b))
    tf = 2.0 * M * N * K / 1e12
    log(f"[{name}] RESULT {M}x{N}x{K}: kernel {ms:.3f} ms ({tf / ms * 1e3:.0f} TFLOP/s) | "
        f"cuBLAS f16 {ms_cublas:.3f} ms ({tf / ms_cublas * 1e3:.0f} TFLOP/s) | "
        f"ratio cuBLAS/kernel = {ms_cublas / ms:.3f} | num_regs={nreg} local={lmem}")
    ref = torch.matmul(a.float(), b.float())
    for label, extra in cfg.get("perf_variants", []):
        try:
            kv = build(extra)
            c.fill_(float("nan"))
            runv = make_launch(kv, a, b, c, M, N, K)
            runv()
            sync_or_die(f"variant {label}")
            err = (c - ref).abs().max().item()
            okv = not torch.isnan(c).any().item() and err <= 1e-2 * ref.abs().max().item()
            msv = bench(runv)
            log(f"[{name}] variant '{label}' {' '.join(extra)}: {'PASS' if okv else 'FAIL'} "
                f"{msv:.3f} ms ({tf / msv * 1e3:.0f} TFLOP/s), ratio cuBLAS/kernel = {ms_cublas / msv:.3f}, "
                f"num_regs={kv.num_regs}")
        except SystemExit:
            raise
        except Exception as e:
            log(f"[{name}] variant '{label}': error {e!r}")
    return 0 if ok else 1


# ----------------------------------------------------------------------------- parent side
def main():
    argv = sys.argv[1:]
    if "--child" in argv:
        name = argv[argv.index("--child") + 1]
        try:
            sys.exit(child(name, big="--no-big" not in argv))
        except SystemExit:
            raise
        except BaseException:
            traceback.print_exc()
            sys.stdout.flush()
            sys.exit(4)
    names = list(KERNELS)
    if "--only" in argv:
        names = argv[argv.index("--only") + 1].split(",")
    t_all = time.time()
    summary = []
    for name in names:
        t0 = time.time()
        cmd = [sys.executable, os.path.abspath(__file__), "--child", name] + (["--no-big"] if "--no-big" in argv else [])
        try:
            rc = subprocess.run(cmd, timeout=40).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout(40s)"
        summary.append(f"{name}: rc={rc} ({time.time() - t0:.1f} s)")
        log(f"---- {summary[-1]}")
    log("SUMMARY: " + "; ".join(summary) + f"; total {time.time() - t_all:.1f} s")


if __name__ == "__main__":
    main()
