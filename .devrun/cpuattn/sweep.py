"""Block-size sweep of the cpu attention schedule (kdsl_cpu/schedules/attention.py) against
torch SDPA in the same process: f32, B*H=32, N=2048, D=64, non-causal and causal.
Prints one line per setting and writes JSON to argv[1] (optional)."""
import json
import os
import statistics
import sys
import time

os.environ["KDSL_CACHE"] = "0"          # each setting compiles its own kernel
sys.path[:0] = [os.getcwd(), os.path.join(os.getcwd(), "kdsl_cpu")]
import numpy as np  # noqa: E402
import torch  # noqa: E402

import kdsl as kd  # noqa: E402
from kdsl_cpu.schedules import attention as CA  # noqa: E402

sys.path.insert(0, os.path.join(os.getcwd(), "benchmarks"))
from attention import attention, causal_attention, reference  # noqa: E402


def med(fn, reps=5):
    fn()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def main():
    B, H, N, D = 4, 8, 2048, 64
    g = torch.Generator().manual_seed(0)
    tq = [torch.randn(B, H, N, D, generator=g) for _ in range(3)]
    q, k, v = (x.numpy() for x in tq)
    rows = []
    F = torch.nn.functional
    settings = [dict(), dict(BQ=32), dict(BQ=128), dict(SCORE_ROWS=8, SCORE_VECTORS=2),
                dict(PV_TILE=(8, 2)), dict(VECTOR_WEIGHTS=False), dict(PACK_ONCE=False),
                dict(PANEL_OUTER=False)]
    defaults = {k: getattr(CA, k) for st in settings for k in st}
    for _ in range(3):      # torch's thread pool and kernels warm
        for c in (False, True):
            F.scaled_dot_product_attention(*tq, is_causal=c)
    for causal in (False, True):
        t_th = med(lambda: F.scaled_dot_product_attention(*tq, is_causal=causal))
        for st in (settings if not causal else settings[:1]):
            for k_, v_ in {**defaults, **st}.items():
                setattr(CA, k_, v_)
            fn = kd.kernel((causal_attention if causal else attention).fn)
            out = fn(q, k, v, backend="cpu")
            err = float(np.abs(out[0, 0] - reference(q[0, 0], k[0, 0], v[0, 0], causal)).max())
            assert err < 2e-3, err
            t = med(lambda: fn(q, k, v, backend="cpu"))
            rows.append(dict(causal=causal, setting=repr(st), kdsl_ms=t * 1e3,
                             torch_ms=t_th * 1e3, ratio=t_th / t, err=err))
            print(f"causal={causal!s:5} {st!r:45} kdsl {t * 1e3:8.2f} ms "
                  f"torch {t_th * 1e3:8.2f} ms ratio {t_th / t:.3f}", flush=True)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            json.dump(dict(cores=os.cpu_count(), threads=torch.get_num_threads(), rows=rows), f,
                      indent=1)


if __name__ == "__main__":
    main()
