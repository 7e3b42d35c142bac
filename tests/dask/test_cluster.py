"""Kernels on a distributed LocalCluster with process workers (issue 29): tokens, pickling
(kernels made in functions too), map_blocks/submit, kdsl.dask graphs computed by workers,
the workers' thread count.  One cluster (2 workers x 1 thread) for the module.
Skipped only when dask or distributed is not installed."""
import functools
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

da = pytest.importorskip("dask.array", reason="dask[array] is not installed")
distributed = pytest.importorskip("distributed", reason="distributed is not installed")
from dask.base import tokenize  # noqa: E402

# kdsl came first here (conftest): an installed kdsl registers its token rule through the
# dask.sizeof entry point when Dask loads; a source checkout (not installed) through kdsl.dask
import kdsl.dask  # noqa: E402,F401

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


from cluster_kernels import cpu_stats, make_local, probe, rowsum, scale  # noqa: E402


@pytest.fixture(scope="module")
def client():
    # the workers' default backend is numpy (cheap to start); one test asks for cpu
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None, env={"KDSL_BACKEND": "numpy"})
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def test_tokenize_is_deterministic():
    t = tokenize(rowsum)
    assert t == tokenize(rowsum) and t != tokenize(scale)
    assert tokenize(make_local(2.0)) == tokenize(make_local(2.0))
    assert tokenize(make_local(2.0)) != tokenize(make_local(3.0))


def test_local_kernel_pickles_by_value():
    cloudpickle = pytest.importorskip("cloudpickle")
    k = make_local(2.5)
    assert pickle.loads(cloudpickle.dumps(k)) is k      # this process: the kernel itself
    data = cloudpickle.dumps(make_local(-0.5))
    src = ("import pickle, sys, numpy as np\n"
           f"k = pickle.loads({data!r})\n"
           "assert pickle.loads(sys.stdin.buffer.read()) is k\n"   # one kernel per token
           "print(k(np.arange(4.0), backend='numpy').tolist())\n")
    out = subprocess.run([sys.executable, "-c", src], input=data, capture_output=True,
                         env=dict(os.environ, PYTHONPATH=ROOT + os.pathsep + HERE),
                         timeout=120)
    assert out.stdout.decode().split() == ["[1.0,", "0.5,", "0.0,", "-0.5]"], out.stderr[-2000:]
    assert pickle.loads(pickle.dumps(rowsum)) is rowsum  # module level: by reference


def test_map_blocks_and_submit(client):
    rng = np.random.default_rng()
    x = rng.standard_normal((40, 12))
    X = da.from_array(x, chunks=(10, 12))
    r = da.map_blocks(rowsum, X, drop_axis=1, meta=np.empty((0,), x.dtype))
    np.testing.assert_allclose(r.compute(), x.sum(axis=1))
    np.testing.assert_allclose(client.submit(scale, x, 2.0).result(), 2 * x)
    np.testing.assert_allclose(client.submit(make_local(-1.0), x).result(), 1 - x)


def test_kdsl_graphs_on_workers(client):
    rng = np.random.default_rng()
    x = rng.standard_normal((50, 33))
    X = da.from_array(x, chunks=(13, 8))
    np.testing.assert_allclose(rowsum(X, backend="numpy").compute(), x.sum(axis=1))
    local = make_local(0.5)
    np.testing.assert_allclose(local(X, backend="numpy").compute(), x * 0.5 + 1)
    np.testing.assert_allclose(rowsum(X.astype(np.float32), backend="cpu").compute(),
                               x.sum(axis=1), rtol=1e-5, atol=1e-4)   # compiled on workers


def test_workers_hit_the_shared_disk_cache(client):
    x = np.random.default_rng().standard_normal((24, 40)).astype(np.float32)
    X = da.from_array(x, chunks=(8, 40))
    rowsum(x[:8], backend="cpu")        # compiled here, into the disk cache the workers share
    before = client.run(cpu_stats)
    r = da.map_blocks(rowsum, X, drop_axis=1, meta=np.empty((0,), np.float32), backend="cpu")
    np.testing.assert_allclose(r.compute(), x.sum(axis=1), rtol=1e-5, atol=1e-4)
    after = client.run(cpu_stats)
    for w, s in after.items():
        b = before.get(w, {"lowered": 0, "compiled": 0})
        assert s["lowered"] == b["lowered"] and s["compiled"] == b["compiled"], (before, after)
    assert sum(s["cache_hits"] for s in after.values()) > sum(
        s["cache_hits"] for s in before.values()), (before, after)


def test_worker_threads_follow_budget(client):
    # Dask's nanny sets OMP_NUM_THREADS=1 for each worker; kdsl honours it (kdsl.threads):
    # 2 workers x 1 thread on a small machine run one kdsl thread each, not one per core
    got = client.run(probe)
    assert got and all(v == (1, "1") for v in got.values()), got


def test_tokenize_when_dask_comes_second():
    # the dask.sizeof entry point (pyproject.toml) runs dask_plugin when Dask loads: it
    # registers a lazy rule for kdsl's types (no kdsl import), or the rule itself when
    # kdsl.kernel is loaded already (the case here)
    from dask.base import normalize_token
    from kdsl.dask.tokens import dask_plugin
    from kdsl.kernel import Kernel
    dask_plugin(None)
    assert normalize_token.dispatch(Kernel) is not normalize_token.dispatch(functools.partial)
    assert tokenize(rowsum) == tokenize(rowsum)
    text = open(os.path.join(ROOT, "pyproject.toml")).read()
    assert 'kdsl = "kdsl_dask_plugin:dask_plugin"' in text


def _with_entry_point(tmp_path, src):
    """Run ``src`` in a fresh process where an installed distribution declares kdsl's
    dask.sizeof entry point (as an installed kdsl does); its stdout lines and stderr."""
    info = tmp_path / "kdslhook-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kdslhook\nVersion: 0\n")
    (info / "entry_points.txt").write_text(
        "[dask.sizeof]\nkdsl = kdsl_dask_plugin:dask_plugin\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), ROOT]))
    out = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True,
                         env=env, timeout=120)
    return out.stdout.split("\n"), out.stdout + out.stderr[-3000:]


_KERNEL_TOKENS = ("import kdsl as kd\n"
                  "@kd.kernel\n"
                  "def f(a):\n    return a + 1\n")


def test_entry_point_imports_no_kdsl_until_a_kernel_meets_dask(tmp_path):
    # Dask runs the plugin in every process that imports it; it must not load kdsl there
    # (a worker that never calls a kernel); tokens still work once kdsl comes
    lines, log = _with_entry_point(tmp_path, (
        "import sys\nimport dask.base, dask.array\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'kdsl'))\n" + _KERNEL_TOKENS +
        "print(dask.base.tokenize(f) == dask.base.tokenize(f))\n"))
    assert lines[:2] == ["[]", "True"], log


def test_entry_point_when_kdsl_comes_first(tmp_path):
    # an installed kdsl's dask.sizeof entry point, as Dask loads it: before its tokenizer
    lines, log = _with_entry_point(tmp_path, _KERNEL_TOKENS + (
        "import dask.base\nprint(dask.base.tokenize(f) == dask.base.tokenize(f))\n"))
    assert lines[0] == "True", log
