"""Generated code is the same in every process (the cubin cache is keyed by the CUDA source).

Regression: ``full_thread_tiles`` collected its strippable guard conjuncts in a set of ``id()``s,
so the conjunction of the interior-thread condition of the default conv3 schedule came out in an
address-dependent order and the cubin cache missed across processes.
"""
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

_SCRIPT = r"""
import kdsl as kd
from kdsl.frontend.spec import TensorSpec

def conv3(I, W):
    n, m = I.shape
    di, dj = kd.reduce_axis(3, name="di"), kd.reduce_axis(3, name="dj")
    return kd.compute((n - 2, m - 2),
                      lambda i, j: kd.sum(I[i + di, j + dj] * W[di, dj], axis=(di, dj)), name="C")

def cummax(A):
    return kd.cummax(A, axis=0)

out = []
for _ in range(2):     # fresh kernels: fresh IR objects at other addresses
    out.append(kd.kernel(conv3).source(TensorSpec((1024, 1024), "float32"),
                                       TensorSpec((3, 3), "float32"), backend=BACKEND))
    out.append(kd.kernel(cummax).source(TensorSpec((300, 200), "float32"), backend=BACKEND))
import sys; sys.stdout.write("\x00".join(out))
"""


def _sources(seed: str, backend: str) -> list:
    env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-c", _SCRIPT.replace("BACKEND", repr(backend))],
                       env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout.split("\x00")


@pytest.mark.parametrize("backend", ["cuda"])
def test_conv3_source_is_the_same_in_two_processes(backend):
    pytest.importorskip("kdsl_cuda")
    a, b = _sources("1", backend), _sources("12345", backend)
    assert len(a) == 4 and "if (" in a[0]
    assert a[0] == a[2] == b[0] == b[2], "conv3's CUDA source differs between runs"
    assert a[1] == a[3] == b[1] == b[3], "cummax's CUDA source differs between runs"
