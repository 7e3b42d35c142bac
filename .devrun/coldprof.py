"""Cold first cuda softmax in fresh processes: stage times (NVRTC apart) and NVRTC's options."""
import subprocess, sys, os, tempfile
SRC = r'''
import time, sys, json
t0 = time.perf_counter()
import numpy as np, kdsl as kd, kdsl_cuda
import logging
logging.basicConfig(level=logging.DEBUG, format="   %(relativeCreated)6.0f %(message)s", stream=sys.stdout)
t_imp = time.perf_counter() - t0
from kdsl_cuda.runtime import driver
from kdsl_cuda import build
driver.device(0)
x = kdsl_cuda.to_device(np.random.default_rng(0).standard_normal((256, 1000)).astype(np.float32))
kdsl_cuda.synchronize()
nv = []
real = build._try_compile
def spy(lib, src, opts, output="cubin"):
    t = time.perf_counter(); r = real(lib, src, opts, output); nv.append((time.perf_counter() - t, build.nvrtc_args(opts), len(src)))
    return r
build._try_compile = spy
@kd.kernel
def softmax(X):
    e = kd.exp(X - X.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)
import cProfile, pstats, io
pr = cProfile.Profile()
t = time.perf_counter()
if len(sys.argv) > 1: pr.enable()
softmax(x, backend="cuda"); kdsl_cuda.synchronize()
pr.disable()
tot = time.perf_counter() - t
print("imports ms %.1f first call ms %.1f  nvrtc %s" % (t_imp * 1e3, tot * 1e3, [(round(a * 1e3, 1), [o.decode() for o in b], c) for a, b, c in nv]))
if len(sys.argv) > 1:
    s = io.StringIO(); st = pstats.Stats(pr, stream=s); st.sort_stats("cumulative").print_stats(60); st.sort_stats("tottime").print_stats(40); print(s.getvalue()[:16000])
'''
env = dict(os.environ)
env.pop("PYTHONDONTWRITEBYTECODE", None)
for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 4):
    env["KDSL_CACHE_DIR"] = tempfile.mkdtemp()
    r = subprocess.run([sys.executable, "-c", SRC] + (["p"] if i == int(sys.argv[1] if len(sys.argv) > 1 else 4) - 1 else []), env=env, capture_output=True, text=True)
    print(r.stdout[-7000:], r.stderr[-1500:])
