"""Issue 26 item 4 on cuda, what a warm process does not load: NVRTC (the early key names it
by its installed wheels) and the code generator (an early entry unpickles into
kdsl_cuda.runtime.early's own classes); and NVRTC's ``-minimal``, which changes no cubin."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kdsl as kd

pytest.importorskip("cuda.core",
                    reason="the cuda wheels are not installed (pip install ./kdsl_cuda)")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _module():
    """A lowered and generated two-kernel module (a row softmax) and its function."""
    from kdsl.runtime import dispatch
    from kdsl.runtime.signature import signature_from_args
    from kdsl_cuda import CUDABackend
    from kdsl_cuda.backend import generate

    @kd.kernel
    def softmax(X):
        e = kd.exp(X - X.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    be = CUDABackend()
    a = np.zeros((3, 300), np.float32)
    sig = signature_from_args((a,), softmax.arg_names, (), False, None, None, True)
    func = be.lower(dispatch.prepare(softmax, be, sig, softmax._trace(sig)))
    return func, generate(func)


_SCRIPT = textwrap.dedent("""
    import json, sys
    from kdsl_cuda.runtime import early
    hit = early.unpack(open(sys.argv[1], "rb").read())
    ident = early.nvrtc_identity()
    mods = [m for m in ("kdsl_cuda.codegen", "kdsl.passes.pipeline", "cuda.bindings.nvrtc",
                        "cuda.pathfinder", "cuda.core") if m in sys.modules]
    # a cold compile: NVRTC through its bindings, never cuda.core (~120 ms to import)
    from kdsl_cuda import build
    cubin = build.compile_cubin('extern "C" __global__ void k(float* x) { x[0] = 1.0f; }')
    print(json.dumps({"names": [k.name for k in hit[1].kernels], "source": hit[1].source,
                      "modules": mods, "identity": ident, "cubin": cubin[:4].hex(),
                      "core": "cuda.core" in sys.modules}))
""")


def test_a_warm_process_loads_neither_nvrtc_nor_the_code_generator(tmp_path):
    """... and a compile loads NVRTC's bindings only."""
    from kdsl_cuda.runtime import early
    func, mod = _module()
    path = tmp_path / "entry"
    path.write_bytes(early.pack(func, mod, "sm_90", b"\x7fELF-cubin"))
    env = dict(os.environ, PYTHONPATH=ROOT)
    p = subprocess.run([sys.executable, "-c", _SCRIPT, str(path)], env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert r["names"] == [k.name for k in mod.kernels] and r["source"] == mod.source
    assert r["modules"] == []
    assert r["cubin"] == b"\x7fELF".hex() and not r["core"]
    # the same identity in this process, which has loaded NVRTC (it depends on nothing loaded)
    assert r["identity"] == early.nvrtc_identity()


def test_minimal_gives_the_same_cubin_and_falls_back_when_rejected(monkeypatch):
    from cuda.core import Program, ProgramOptions

    from kdsl_cuda import build
    monkeypatch.setenv("KDSL_CUDA_FAST_COMPILE", "0")   # the reference compiles without it
    _, mod = _module()
    if "minimal" not in build._nvrtc_options(build.options()):
        pytest.skip("NVRTC older than 12.4: no -minimal")
    prog = Program(mod.source, code_type="c++",
                   options=ProgramOptions(arch="sm_90", std="c++17", name="k.cu"))
    try:
        full = bytes(prog.compile("cubin").code)
    finally:
        prog.close()
    assert build.compile_cubin(mod.source, "sm_90", "k.cu") == full
    # a declaration -minimal leaves out (cudaStream_t): compiled by the full front end
    src = 'extern "C" __global__ void k(float* x) { cudaStream_t s = 0; (void)s; x[0] = 1.0f; }'
    assert build.compile_cubin(src, "sm_90", "s.cu")[:4] == b"\x7fELF"
