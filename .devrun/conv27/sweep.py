"""Calibration sweep of conv.py's CUDA-core recipe (explicit Configs) on ResNet layers, f32,
against cuDNN in the same process.  Compiles in a process pool first (disk cache), then times.
    PYTHONPATH=. python3 .devrun/conv27/sweep.py [--layers ...] [--jobs 12]
"""
import argparse, json, os, sys, time
from dataclasses import replace
from multiprocessing import get_context

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

VARIANTS = {
    "default": {},
    "tap": dict(xl="tap"),
    "tap_bk16": dict(xl="tap", bk=16),
    "tap_st3": dict(xl="tap", stages=3),
    "ym4": dict(ym=4),
    "om4": dict(om=4, bm=32),
    "bk4": dict(bk=4),
    "row": dict(xl="row"),
    "bm32": dict(bm=32),
    "tap_ym4_bk16": dict(xl="tap", ym=4, bk=16),
}


def make(layer, dtype, name):
    import kdsl as kd
    import cuda_conv as B
    from kdsl_cuda.schedules import conv as CV
    b, c, s, o, win = B.LAYERS[layer]
    over = VARIANTS[name]
    fn = B.KERNELS[(win, dtype)]

    def sched(S):
        h = S["O"]
        m = CV.find(h.stage)
        cfg = replace(CV.choose(S, h, m), **over)
        CV.conv_tile(S, h, m, cfg)
    k = kd.kernel(fn)
    if name != "default" or os.environ.get("CONV27_EXPLICIT_DEFAULT"):
        k.schedule("cuda")(sched)
    return k


def inputs(layer, dtype, seed=0):
    import torch
    import cuda_conv as B
    b, c, s, o, win = B.LAYERS[layer]
    g = torch.Generator(device="cuda").manual_seed(seed)
    pad = (win - 1) // 2
    X = torch.randn(b, c, s + 2 * pad, s + 2 * pad, generator=g, device="cuda").to(getattr(torch, dtype))
    W = (torch.randn(o, c, win, win, generator=g, device="cuda") / (c * win * win) ** 0.5).to(X.dtype)
    return X, W, (W if win > 1 else W[:, :, 0, 0].contiguous())


def warm(job):
    layer, dtype, name = job
    t = time.time()
    try:
        import kdsl_cuda, kdsl as kd
        if "cuda" not in kd.backends():
            kd.register_backend("cuda", kdsl_cuda.backend)
        X, W, Wk = inputs(layer, dtype)
        make(layer, dtype, name)(X, Wk)
        return job, time.time() - t, None
    except Exception as e:
        return job, time.time() - t, f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", default="r3_64,r3_128,r3_256,r3_512,r1_256_64,r1_1024_256")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--jobs", type=int, default=12)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    jobs = [(l, a.dtype, v) for l in a.layers.split(",") for v in a.variants.split(",")]
    t0 = time.time()
    errs = {}
    with get_context("spawn").Pool(a.jobs) as pool:
        for job, dt, err in pool.imap_unordered(warm, jobs):
            if err:
                errs[job] = err
            print(f"# compiled {job} {dt:.1f}s {err or ''}", flush=True)
    print(f"# compile phase {time.time() - t0:.0f}s", flush=True)
    import torch, torch.nn.functional as F
    import kdsl_cuda, kdsl as kd
    import cuda_conv as B
    if "cuda" not in kd.backends():
        kd.register_backend("cuda", kdsl_cuda.backend)
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    M = B.M
    rows = []
    for layer in a.layers.split(","):
        X, W, Wk = inputs(layer, a.dtype, 1)
        want = F.conv2d(X.double(), W.double())
        scale = want.abs().max().item()
        cud = M.gpu_ms(lambda: F.conv2d(X, W))[0]
        b, c, s, o, win = B.LAYERS[layer]
        fl = 2.0 * b * o * c * win * win * s * s
        print(f"{layer} {a.dtype} cuDNN {cud:.4f} ms {fl / cud / 1e9:.1f} TFLOP/s", flush=True)
        for v in a.variants.split(","):
            r = {"layer": layer, "variant": v, "cudnn_ms": cud}
            if (layer, a.dtype, v) in errs:
                r["error"] = errs[(layer, a.dtype, v)]
            else:
                try:
                    k = make(layer, a.dtype, v)
                    got = k(X, Wk)
                    M.sync()
                    err = (got.double() - want).abs().max().item() / scale
                    ms = M.gpu_ms(lambda: k(X, Wk))[0]
                    r.update(ms=ms, ratio=cud / ms, tflops=fl / ms / 1e9, err=err)
                except Exception as e:
                    r["error"] = M.first_line(e)
            rows.append(r)
            print(f"   {v:<14} " + (f"{r['ms']:.4f} ms {r['tflops']:6.1f} TFLOP/s ratio {r['ratio']:.2f} err {r['err']:.1e}"
                                    if "ms" in r else r["error"]), flush=True)
    if a.json:
        json.dump(rows, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
