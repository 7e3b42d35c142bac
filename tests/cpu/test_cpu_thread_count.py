"""The thread count is read at every call, not compiled in (issue 26, item 5).

Precedence: kd.set_num_threads / kd.num_threads > KDSL_NUM_THREADS > OMP_NUM_THREADS > the
CPU affinity; invalid values name the variable; threadpoolctl limits kdsl's pool.
"""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kdsl as kd
import kdsl_cpu
from kdsl import config
from kdsl_cpu import parallel
from kdsl_cpu.codegen.stmt import PARALLEL_MIN_WORK as W

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_VARS = ("KDSL_NUM_THREADS", "OMP_NUM_THREADS", "KDSL_BACKEND")


@pytest.fixture
def clean_env(monkeypatch):
    for k in _VARS:
        monkeypatch.delenv(k, raising=False)
    kd.set_num_threads(None)
    yield monkeypatch
    kd.set_num_threads(None)


def _threads_used(monkeypatch):
    """A pool backend and a function giving the thread count of its last parallel launch
    (a launch of t threads submits t-1 chunks to the pool)."""
    asked = []
    real = parallel._get_pool
    monkeypatch.setattr(parallel, "_get_pool", lambda workers: asked.append(workers) or real(workers))
    be = kdsl_cpu.CPUBackend(threading="pool")

    @kd.kernel
    def axpy(a, x, y):
        return a * x + y

    x = np.random.default_rng(0).random(64 * W, dtype=np.float32)

    def run():
        asked.clear()
        np.testing.assert_allclose(axpy(2.0, x, x, backend=be), 3 * x, rtol=1e-6)
        return max(asked, default=0) + 1
    return be, run


def test_the_count_changes_between_calls_without_recompiling(clean_env):
    be, run = _threads_used(clean_env)
    kd.set_num_threads(3)
    assert run() == 3
    built = be.stats["compiled"] + be.stats["cache_hits"]
    kd.set_num_threads(2)
    assert run() == 2
    with kd.num_threads(4):
        assert kd.get_num_threads() == 4
        assert run() == 4
        with kd.num_threads(1):
            assert run() == 1
        assert run() == 4
    assert run() == 2
    kd.set_num_threads(None)
    clean_env.setenv("KDSL_NUM_THREADS", "3")
    assert kd.get_num_threads() == 3 and run() == 3
    assert be.stats["compiled"] + be.stats["cache_hits"] == built   # never compiled again


def test_precedence_of_the_variables(clean_env):
    clean_env.setenv("OMP_NUM_THREADS", "2,1")
    assert config.num_threads() == 2 and kd.get_num_threads() == 2
    clean_env.setenv("KDSL_NUM_THREADS", "5")
    assert kd.get_num_threads() == 5
    with kd.num_threads(1):
        assert kd.get_num_threads() == 1
    clean_env.delenv("KDSL_NUM_THREADS")
    clean_env.delenv("OMP_NUM_THREADS")
    assert kd.get_num_threads() == config.usable_cores()


@pytest.mark.parametrize("var", ["KDSL_NUM_THREADS", "OMP_NUM_THREADS"])
@pytest.mark.parametrize("value", ["0", "-1", "abc", "2.5"])
def test_invalid_values_name_the_variable(clean_env, var, value):
    clean_env.setenv(var, value)
    with pytest.raises(kd.ThreadCountError, match=var) as e:
        kd.get_num_threads()
    assert isinstance(e.value, ValueError) and "positive integer" in str(e.value)


@pytest.mark.parametrize("bad", [0, -2, 1.5, "4", True])
def test_invalid_arguments(clean_env, bad):
    with pytest.raises(kd.ThreadCountError, match="positive int"):
        kd.set_num_threads(bad)
    with pytest.raises(kd.ThreadCountError):
        with kd.num_threads(bad):
            pass


def _run(code, env):
    full = {k: v for k, v in os.environ.items() if k not in _VARS}
    full.update(env)
    full["PYTHONPATH"] = ROOT
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, env=full, cwd=ROOT, timeout=120)
    return r.returncode, r.stdout + r.stderr


_PROBE = """
import numpy as np, kdsl as kd, kdsl_cpu
from kdsl_cpu import parallel
from kdsl_cpu.codegen.stmt import PARALLEL_MIN_WORK as W
asked = []
real = parallel._get_pool
parallel._get_pool = lambda w: asked.append(w) or real(w)
f = kd.kernel(lambda x: x * 2.0)
x = np.ones(64 * W, np.float32)
assert (f(x, backend=kdsl_cpu.CPUBackend(threading="pool")) == 2).all()
print("USED", max(asked, default=0) + 1)
"""


def test_omp_num_threads_1_is_honoured_in_a_fresh_process():
    rc, out = _run(_PROBE, {"OMP_NUM_THREADS": "1"})
    assert rc == 0 and "USED 1" in out, out
    rc, out = _run(_PROBE, {"OMP_NUM_THREADS": "1", "KDSL_NUM_THREADS": "2"})
    assert rc == 0 and "USED 2" in out, out


def test_an_invalid_variable_fails_the_call_in_a_fresh_process():
    rc, out = _run(_PROBE, {"KDSL_NUM_THREADS": "abc"})
    assert rc != 0 and "KDSL_NUM_THREADS='abc' is not a thread count" in out, out


def test_threadpoolctl_sees_and_limits_kdsl():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    rc, out = _run("""
        import kdsl as kd, kdsl_cpu
        import threadpoolctl             # imported after kdsl_cpu: the import hook registers
        kd.set_num_threads(3)
        info = [i for i in threadpoolctl.threadpool_info() if i["internal_api"] == "kdsl"]
        print("INFO", len(info), info[0]["num_threads"], info[0]["user_api"])
        with threadpoolctl.threadpool_limits(limits=1):
            print("INSIDE", kd.get_num_threads())
        print("AFTER", kd.get_num_threads())
    """, {})
    assert rc == 0, out
    assert "INFO 1 3 openmp" in out and "INSIDE 1" in out and "AFTER 3" in out, out
