"""Threads that play well with others (issue 8, item 5).

The default thread count follows the process's CPU affinity (``KDSL_NUM_THREADS``
overrides it); libgomp is loaded with a passive wait policy unless the user chose
one (and without leaking the variable); small loops use fewer threads; a forked
child (``multiprocessing`` on Linux) never waits on the parent's OpenMP team.
Everything that depends on process state runs in a fresh subprocess.
"""
import ctypes
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kdsl as kd
import kdsl_cpu
from kdsl_cpu import parallel

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_POLICY_VARS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KDSL_NUM_THREADS", "OMP_NUM_THREADS")


def _run(code: str, env=None, timeout=120) -> str:
    full = {k: v for k, v in os.environ.items() if k not in _POLICY_VARS}
    full.pop("KDSL_BACKEND", None)
    full.update(env or {})
    full["PYTHONPATH"] = os.pathsep.join([ROOT] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, env=full, cwd=ROOT, timeout=timeout)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout + r.stderr


def _have_gomp() -> bool:
    try:
        ctypes.CDLL("libgomp.so.1")
        return True
    except OSError:
        return False


needs_gomp = pytest.mark.skipif(not _have_gomp(), reason="libgomp.so.1 is not installed")

_KERNEL = """
import numpy as np
import kdsl as kd
from kdsl_cpu import parallel

@kd.kernel
def axpy(a, x, y):
    return a * x + y

x = np.arange(1 << 20, dtype=np.float32)
assert (axpy(2.0, x, x) == 3 * x).all()
"""


# ----------------------------------------------------------------- thread counts
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this OS")
def test_default_threads_follow_the_cpu_affinity_and_the_variable_overrides_it():
    one_cpu = sorted(os.sched_getaffinity(0))[:1]
    code = f"""
        import os
        os.sched_setaffinity(0, {one_cpu!r})      # as taskset or a cgroup cpuset would
        from kdsl import config
        import kdsl_cpu
        from kdsl_cpu import parallel
        print("USABLE", config.usable_cores(), config.num_threads(),
              parallel.runtime_table("pool").nthreads)
    """
    assert "USABLE 1 1 1" in _run(code)
    assert "USABLE 1 3 3" in _run(code, {"KDSL_NUM_THREADS": "3"})
    everything = len(os.sched_getaffinity(0))
    out = _run("from kdsl import config; print('ALL', config.num_threads())")
    assert f"ALL {everything}" in out
    # a nonsense value is an error naming the variable (issue 26 item 5; it used to be ignored)
    out = _run("from kdsl import config\ntry:\n    config.num_threads()\n"
               "except ValueError as e:\n    print('ERR', e)", {"KDSL_NUM_THREADS": "zero"})
    assert "ERR KDSL_NUM_THREADS='zero' is not a thread count" in out


def test_small_loops_use_fewer_threads(monkeypatch):
    """Each thread gets at least PARALLEL_MIN_WORK iterations (below that: none is woken)."""
    from kdsl_cpu.codegen.stmt import PARALLEL_MIN_WORK as W
    asked = []
    real = parallel._get_pool
    monkeypatch.setattr(parallel, "_get_pool", lambda workers: asked.append(workers) or real(workers))
    be = kdsl_cpu.CPUBackend(threading="pool", num_threads=4)

    @kd.kernel
    def axpy(a, x, y):
        return a * x + y

    for size, most in ((W // 2, 0), (W + W // 2, 0), (2 * W + W // 4, 1), (3 * W + 100, 2),
                       (40 * W, 3)):
        x = np.random.default_rng(size).random(size, dtype=np.float32)
        asked.clear()
        np.testing.assert_allclose(axpy(2.0, x, x, backend=be), 3 * x, rtol=1e-6)
        # a launch of t threads submits t-1 chunks to the pool
        assert max(asked, default=0) == most, (size, asked)


# ----------------------------------------------------------------- the wait policy
_DISPLAY = """
import ctypes, os, sys
parallel.omp_launcher()     # the default launcher is kdsl's own workers: load OpenMP's now
gomp = ctypes.CDLL("libgomp.so.1")
print("POLICY", parallel.wait_policy(), "ENV", os.environ.get("OMP_WAIT_POLICY"), flush=True)
if hasattr(gomp, "omp_display_env"):
    gomp.omp_display_env(1)          # verbose: prints GOMP_SPINCOUNT (0 when passive) on stderr
"""


@needs_gomp
def test_openmp_workers_sleep_unless_the_user_chose_a_policy():
    out = _run(_KERNEL + _DISPLAY)
    assert "POLICY passive ENV None" in out       # applied, and not left in the environment
    if "OPENMP DISPLAY ENVIRONMENT" in out:
        assert "GOMP_SPINCOUNT = '0'" in out
    out = _run(_KERNEL + _DISPLAY, {"OMP_WAIT_POLICY": "active"})
    assert "POLICY user ENV active" in out
    if "OPENMP DISPLAY ENVIRONMENT" in out:
        assert "OMP_WAIT_POLICY = 'ACTIVE'" in out and "GOMP_SPINCOUNT = '0'" not in out
    out = _run(_KERNEL + _DISPLAY, {"GOMP_SPINCOUNT": "1000"})
    assert "POLICY user" in out
    if "OPENMP DISPLAY ENVIRONMENT" in out:
        assert "GOMP_SPINCOUNT = '1000'" in out
    # another library loaded libgomp first: kdsl shares that runtime as it is
    out = _run("import ctypes; ctypes.CDLL('libgomp.so.1')\n" + _KERNEL + _DISPLAY)
    assert "POLICY inherited" in out


@needs_gomp
def test_subprocesses_do_not_inherit_the_policy():
    out = _run(_KERNEL + """
import subprocess, sys
print("CHILD", subprocess.run([sys.executable, "-c",
      "import os; print(os.environ.get('OMP_WAIT_POLICY'))"], capture_output=True,
      text=True).stdout.strip())
""")
    assert "CHILD None" in out


# ----------------------------------------------------------------- fork
@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this OS")
@pytest.mark.parametrize("mode", ["auto", "omp"])
def test_forked_children_run_parallel_kernels_after_the_parent_did(mode):
    """libgomp's team does not survive fork: children switch to the thread pool instead of
    hanging (kernels compiled in the parent and new ones alike); kdsl's own workers (the
    default launcher) start afresh in the child."""
    if mode == "omp" and not _have_gomp():
        pytest.skip("libgomp.so.1 is not installed")
    out = _run(f"MODE = {mode!r}\n" + """
import kdsl as kd, kdsl_cpu
kd.register_backend("cpu", kdsl_cpu.CPUBackend(threading=MODE))
""" + _KERNEL + """
import multiprocessing as mp

@kd.kernel
def scaled(a, x):
    return a * x

def work(i):
    return (float(axpy(2.0, x, x).sum(dtype=np.float64)),
            float(scaled(float(i), x).sum(dtype=np.float64)),
            parallel.launcher_kind(MODE))

if __name__ == "__main__":
    with mp.get_context("fork").Pool(2) as pool:
        got = pool.map_async(work, [1, 2]).get(timeout=60)
    s = float(x.astype(np.float64).sum())
    assert [g[:2] for g in got] == [(3 * s, s), (3 * s, 2 * s)], got
    print("CHILDREN", [g[2] for g in got], "PARENT", parallel.launcher_kind(MODE))
""", {"KDSL_NUM_THREADS": "2"}, timeout=180)
    if mode == "omp":
        assert "CHILDREN ['pool', 'pool'] PARENT omp" in out
    elif parallel.workers_launcher() is not None:
        assert "CHILDREN ['workers', 'workers'] PARENT workers" in out
