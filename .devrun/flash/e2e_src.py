"""The CUDA source kdsl's default cuda schedule makes of the user's attention (no GPU):
    python3 .devrun/flash/e2e_src.py D causal [out.cu]  -> registers, the flash call lines."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "cuda_attention"))

import kdsl as kd  # noqa: E402
from kdsl.backends.protocol import CompileRequest  # noqa: E402
from kdsl.frontend.spec import TensorSpec  # noqa: E402
from kdsl.frontend.trace import trace  # noqa: E402
from kdsl.schedule import Schedule  # noqa: E402

import attention_cases as ac  # noqa: E402
from kdsl_cuda import backend  # noqa: E402

d, causal = int(sys.argv[1]), sys.argv[2] not in ("0", "False")
fn = ac.causal_attention if causal else ac.attention
g = trace(fn, [TensorSpec((4, 8, 4096, d), kd.float16)] * 3)
s = Schedule(g)
backend.schedule(s, {})
req = CompileRequest(graph=g, schedule=s, signature=None)
src = backend.source(req)
if len(sys.argv) > 3:
    open(sys.argv[3], "w").write(src)
print("\n".join(ln for ln in src.splitlines() if "_block(" in ln and "kd_flash" in ln)[:2000])
print([ln for ln in src.splitlines() if "const float fac" in ln])
if "--regs" in sys.argv:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import sass
    from kdsl_cuda import build
    cub = build.compile_cubin(src, arch="sm_90")
    print(sass.resources(cub))
    ops, total = sass.loop_ops(sass.sass(cub))
    print("longest loop:", total, dict(ops.most_common(12)))
