"""Cubins in kdsl's disk cache: a second process gets the cubin without NVRTC; a corrupt
entry is dropped and rebuilt; KDSL_CACHE=0 compiles every time."""
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("cuda.core", reason="the cuda wheels are not installed (pip install ./kdsl_cuda)")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, {root!r})
    import kdsl as kd
    from kdsl_cuda import backend
    from kdsl_cuda.runtime import cubin_cache

    @kd.kernel
    def add(a, b):
        return kd.compute(a.shape, lambda i: a[i] + b[i] * 3, name="C")

    def sched(s):
        C = s["C"]
        xo, xi = C.split(C.axes[0], factor=64)
        C.bind(xo, "blockIdx.x")
        C.bind(xi, "threadIdx.x")
    add.schedule("cuda")(sched)
    kd.register_backend("cuda", backend)
    src = add.source(kd.TensorSpec(("n",), kd.float32), kd.TensorSpec(("n",), kd.float32),
                     backend="cuda")
    cubin = cubin_cache.cached_cubin(src, "sm_90", "add.cu")
    assert cubin[:4] == b"\\x7fELF"
    print(cubin_cache.stats["hit"], cubin_cache.stats["compiled"], len(cubin))
""")


def _run(env):
    out = subprocess.run([sys.executable, "-c", SCRIPT.format(root=ROOT)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    hit, compiled, size = map(int, out.stdout.split())
    return hit, compiled, size


def test_second_process_loads_without_nvrtc(tmp_path):
    env = dict(os.environ, KDSL_CACHE_DIR=str(tmp_path), KDSL_CACHE="1")
    assert _run(env)[:2] == (0, 1)
    hit, compiled, size = _run(env)
    assert (hit, compiled) == (1, 0)
    # a corrupt entry is dropped and rebuilt, never loaded
    for dirpath, _, files in os.walk(tmp_path):
        for f in files:
            with open(os.path.join(dirpath, f), "r+b") as fh:
                fh.seek(-8, os.SEEK_END)
                fh.write(b"garbage!")
    assert _run(env)[:2] == (0, 1)
    assert _run(env)[:2] == (1, 0)


def test_cache_disabled_compiles_each_time(tmp_path):
    env = dict(os.environ, KDSL_CACHE_DIR=str(tmp_path), KDSL_CACHE="0")
    assert _run(env)[:2] == (0, 1)
    assert _run(env)[:2] == (0, 1)
