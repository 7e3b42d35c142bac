"""Passes of the GPU table imported when a kernel first has work for them (kdsl.gpu.gates,
``kdsl.gpu.pipeline.Deferred``; issue 26 item 4: a cold process's first cuda kernel)."""
import os
import subprocess
import sys
import textwrap

import numpy as np

import kdsl as kd
from kdsl.gpu import pipeline as G
from kdsl.passes import pipeline as P

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFERRED = {p.name: p.fn for p in G.PIPELINE if isinstance(p.fn, G.Deferred)}


def test_the_table_defers_the_passes_most_kernels_skip():
    assert set(DEFERRED) == {"scan_legality", "padded_compute", "pipeline_legality", "scan_tiles",
                             "tensorize", "software_pipeline", "vthread", "interior_blocks"}
    core = {p.name for p in P.CORE if isinstance(p.fn, P.Deferred)}
    assert core == {"scan_legality", "padded_compute"}


def _softmax_func():
    def softmax(x):
        e = kd.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    return kd.kernel(softmax).lower(np.zeros((256, 1000), np.float32), backend="cuda")


def test_a_pass_without_work_returns_its_input_and_imports_nothing():
    func = _softmax_func()
    for name in ("tensorize", "software_pipeline", "vthread", "interior_blocks"):
        d = G.Deferred(DEFERRED[name].__module__, DEFERRED[name].__name__, DEFERRED[name].has_work)
        assert not d.has_work(func)
        assert d(func) is func and d._fn is None
        # the pass itself agrees: its own first test is the same gate
        real = getattr(__import__(d.__module__, fromlist=["_"]), d.__name__)
        assert real(func) is func


def test_a_pass_with_work_runs_the_pass():
    calls = []
    d = G.Deferred("kdsl.gpu.vthread", "inject_vthreads", lambda f: True)
    d._fn = lambda f: calls.append(f) or "done"
    assert d("func") == "done" and calls == ["func"]
    d = G.Deferred("kdsl.gpu.vthread", "inject_vthreads", lambda f: True)
    from kdsl.gpu.vthread import inject_vthreads
    func = _softmax_func()
    assert d(func) is func and d._fn is inject_vthreads     # imported, then run (no vthreads)


def test_lazy_tables_are_the_real_ones():
    assert P.SEQUENTIAL is P.sequential() and G.for_target("cpu") is P.SEQUENTIAL
    from kdsl.passes.blocked_sums import blocked_sums
    assert P.SEQUENTIAL.passes[P.SEQUENTIAL.index("blocked_sums")].fn is blocked_sums
    assert G.GPU_SEQUENTIAL is G.GPU_SEQUENTIAL
    assert "sequential_kernels" in G.GPU_SEQUENTIAL.names()


def test_a_cold_cuda_softmax_imports_only_the_passes_it_needs(tmp_path):
    """A fresh process's first cuda softmax (its CUDA source: no GPU needed) imports none of
    the deferred passes, nor the sequential table's, nor the verifier (off outside tests)."""
    code = textwrap.dedent("""
        import sys
        import numpy as np
        import kdsl as kd

        @kd.kernel
        def softmax(x):
            e = kd.exp(x - x.max(axis=1, keepdims=True))
            return e / e.sum(axis=1, keepdims=True)

        src = softmax.source(np.zeros((256, 1000), np.float32), backend="cuda")
        assert "__global__" in src
        print(" ".join(sorted(m for m in sys.modules if m.startswith("kdsl"))))
    """)
    env = dict(os.environ, KDSL_CACHE_DIR=str(tmp_path), PYTHONPATH=ROOT)
    env.pop("KDSL_VERIFY", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout.split()
    for m in ("kdsl.gpu.tensorize", "kdsl.gpu.tensor_nests", "kdsl.gpu.wgmma_tiles",
              "kdsl.gpu.software_pipeline", "kdsl.gpu.vthread", "kdsl.gpu.interior_blocks",
              "kdsl.gpu.scan_tiles", "kdsl.gpu.sequential", "kdsl.passes.blocked_sums",
              "kdsl.passes.scan_check", "kdsl.passes.padded_compute",
              "kdsl.passes.lower_cross_thread", "kdsl.ir.verifier", "kdsl.ir.printer"):
        assert m not in out, m
    assert "kdsl.gpu.sync" in out and "kdsl.gpu.device_kernels" in out
