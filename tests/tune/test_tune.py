"""kernel.tune, its persisted winners, export/load and KDSL_AUTOTUNE (tiny budgets).

Most tests run on ``tunetoy`` (tests/tune/tunetoy.py), whose candidates are slow, fast,
wrong or uncompilable by construction, so which one must win is known; one test tunes on
the real ``cpu`` backend.  Every test has its own cache directory."""
import json
import logging
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import kdsl as kd
from kdsl.backends import registry
from kdsl.tune import store

sys.path.insert(0, os.path.dirname(__file__))
from tunetoy import TuneToy, rowdot as _rowmax  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def toy(tmp_path, monkeypatch):
    monkeypatch.setenv("KDSL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KDSL_AUTOTUNE", raising=False)
    monkeypatch.delenv("KDSL_CACHE", raising=False)
    store.forget()
    from kdsl.tune import search
    monkeypatch.setattr(search, "SAMPLE_S", 0.001)   # one call a sample: toy timings are 0 or 2 ms
    be = TuneToy()
    kd.register_backend("tunetoy", be)
    yield be
    store.forget()


def _args(rng, n=5, m=7):
    return (rng.standard_normal((n, m)).astype(np.float32),
            rng.standard_normal((n, m)).astype(np.float32))


def _ref(A, B):
    return (A.astype(np.float64) * B).sum(axis=1) + 1.0


def test_wrong_and_failing_candidates_never_win(toy, caplog):
    rng = np.random.default_rng()
    k = kd.kernel(_rowmax)
    A, B = _args(rng)
    with caplog.at_level(logging.INFO, logger="kdsl"), warnings.catch_warnings():
        warnings.simplefilter("error")        # a candidate's warning is logged, not shown
        res = k.tune(A, B, backend="tunetoy", budget_s=30, progress=False)
    status = {json.dumps(t.hints): t.status for t in res.trials}
    assert status == {"[]": "ok", '[{"unroll": 3}]': "wrong result",
                      '[{"unroll": 5}]': "compile error", '[{"unroll": 2}]': "ok",
                      '[{"unroll": 4}]': "ok"}
    assert res.best == [{"unroll": 2}]        # unroll=3 is faster, but wrong
    assert res.speedup > 1.5 and res.device == "toy device 1"
    text = caplog.text
    assert "disagrees with the reference" in text and "{'unroll': 3}" in text
    assert "failed to compile or run" in text and "{'unroll': 5}" in text
    assert "ScheduleWarning: tunetoy: unroll=4 warns" in text
    # the kernel's next call compiles with the winner, and is right
    toy.ran.clear()
    A2, B2 = _args(rng, 9, 4)
    np.testing.assert_allclose(k(A2, B2, backend="tunetoy"), _ref(A2, B2), rtol=1e-5)
    assert toy.ran == [2]


def test_budget_and_trials_stop_the_search(toy):
    rng = np.random.default_rng()
    k = kd.kernel(_rowmax)
    res = k.tune(*_args(rng), backend="tunetoy", budget_s=30, trials=2, progress=False)
    assert len(res.trials) == 2 and res.best == []      # default, then the wrong one
    res = kd.kernel(_rowmax).tune(*_args(rng, 3, 3), backend="tunetoy", budget_s=1e-6,
                                  progress=False)
    assert len(res.trials) == 1                  # the default always runs; then time is up
    with pytest.raises(kd.ArgumentError, match="budget_s"):
        k.tune(*_args(rng), backend="tunetoy", budget_s=0)
    with pytest.raises(kd.ArgumentError, match="trials"):
        k.tune(*_args(rng), backend="tunetoy", trials=0)


def test_winner_is_used_by_a_fresh_process(toy, tmp_path):
    rng = np.random.default_rng()
    k = kd.kernel(_rowmax)
    res = k.tune(*_args(rng), backend="tunetoy", budget_s=30, progress=False)
    assert res.best == [{"unroll": 2}] and res.key is not None
    script = f"""
import sys, numpy as np
sys.path.insert(0, {os.path.dirname(__file__)!r})
import kdsl as kd
from tunetoy import TuneToy, rowdot
be = TuneToy()
kd.register_backend("tunetoy", be)
k = kd.kernel(rowdot)
A = np.arange(12, dtype=np.float32).reshape(4, 3)
r = k(A, A, backend="tunetoy")
assert np.allclose(r, (A * A).sum(1) + 1), r
print("ran", be.ran)
"""
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "ran [2]" in out.stdout


def test_export_load_round_trip(toy, tmp_path, monkeypatch):
    rng = np.random.default_rng()
    res = kd.kernel(_rowmax).tune(*_args(rng), backend="tunetoy", budget_s=30, progress=False)
    path = tmp_path / "winners.json"
    assert kd.tune.export(path) == 1
    doc = json.loads(path.read_text())
    assert doc["entries"][0]["hints"] == [{"unroll": 2}]
    assert doc["entries"][0]["key"] == res.key
    # a new process-state and an empty cache: nothing until the file is loaded
    monkeypatch.setenv("KDSL_CACHE_DIR", str(tmp_path / "empty"))
    store.forget()
    toy.ran.clear()
    A, B = _args(rng)
    kd.kernel(_rowmax)(A, B, backend="tunetoy")
    assert toy.ran == [None]
    assert kd.tune.load(path) == 1
    toy.ran.clear()
    np.testing.assert_allclose(kd.kernel(_rowmax)(A, B, backend="tunetoy"), _ref(A, B),
                               rtol=1e-5)
    assert toy.ran == [2]
    assert not os.path.exists(tmp_path / "empty" / "tune")    # load(persist=False): memory only
    store.forget()
    assert kd.tune.load(path, persist=True) == 1
    store.forget()
    assert store.lookup(res.key, "rowdot")["hints"] == [{"unroll": 2}]   # now from the disk cache
    bad = tmp_path / "bad.json"
    bad.write_text('{"something": 1}')
    with pytest.raises(kd.KdslError, match="not a kdsl tuning file"):
        kd.tune.load(bad)


def test_autotune_on_first_call(toy, monkeypatch):
    monkeypatch.setenv("KDSL_AUTOTUNE", "1")
    rng = np.random.default_rng()
    k = kd.kernel(_rowmax)
    A, B = _args(rng, 6, 5)
    np.testing.assert_allclose(k(A, B, backend="tunetoy"), _ref(A, B), rtol=1e-5)
    # the search ran the candidates, then the call compiled the winner
    assert toy.ran[-1] == 2 and len(toy.ran) > 4
    assert len(store.entries()) == 1
    toy.ran.clear()
    k2 = kd.kernel(_rowmax)                    # a winner exists: no second search
    k2(A, B, backend="tunetoy")
    assert toy.ran == [2]


def test_explicit_schedule_is_not_tuned(toy):
    k = kd.schedule("tunetoy", lambda s: None)(kd.kernel(_rowmax))
    with pytest.raises(kd.ScheduleError, match="explicit schedule"):
        k.tune(*_args(np.random.default_rng()), backend="tunetoy", progress=False)


def test_plain_progress_line(toy, capsys, monkeypatch):
    from kdsl.tune import progress
    monkeypatch.setattr(progress.importlib.util, "find_spec", lambda name: None)
    kd.kernel(_rowmax).tune(*_args(np.random.default_rng()), backend="tunetoy", budget_s=30,
                            trials=3, progress=True)
    err = capsys.readouterr().err
    assert "kdsl tune rowdot [tunetoy]: 3/3 candidates, best" in err


@pytest.mark.skipif("cpu" not in registry.backends(), reason="the cpu backend is not installed")
def test_tune_on_cpu(tmp_path, monkeypatch):
    monkeypatch.setenv("KDSL_CACHE_DIR", str(tmp_path / "cache"))
    store.forget()
    rng = np.random.default_rng()

    @kd.kernel
    def rowsum(A):
        return A.sum(axis=1)
    A = rng.standard_normal((37, 300)).astype(np.float32)[:, ::2]      # strided
    res = rowsum.tune(A, backend="cpu", budget_s=20, trials=2, space=[{"rfactor": 4}],
                      progress=False)
    assert [t.status for t in res.trials] == ["ok", "ok"]
    assert res.best in ([], [{"rfactor": 4}]) and res.best_s > 0
    entry = store.lookup(res.key, "rowsum")
    assert entry["hints"] == res.best and entry["backend"] == "cpu"
    for shape in ((0, 5), (1, 1), (64, 129)):       # every size of the signature, the winner's code
        X = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(rowsum(X), X.astype(np.float64).sum(axis=1), rtol=1e-4,
                                   atol=1e-4)
    store.forget()


def test_scalars_empty_and_multiple_outputs(toy):
    """Scalar arguments stay scalars, 0-size arrays tune, tuple results are all checked."""
    rng = np.random.default_rng()

    def two(A, s):
        return A * s, A.sum(axis=1)
    k = kd.kernel(two)
    for shape in ((0, 4), (3, 5)):
        A = rng.standard_normal(shape).astype(np.float32)
        res = k.tune(A, np.float32(2.5), backend="tunetoy", budget_s=30, progress=False)
        st = {json.dumps(t.hints): t.status for t in res.trials}
        assert st['[{"unroll": 3}]'] == ("ok" if shape[0] == 0 else "wrong result"), shape
        assert st['[{"unroll": 5}]'] == "compile error"
        store.forget()


def _expo(x):
    return kd.exp(x) * 2.0 + 1.0


def test_cuda_space_on_interp_cuda(tmp_path, monkeypatch):
    """The cuda space compiles and agrees on the SIMT interpreter; winners are keyed by size
    class there (the bit length of every dim)."""
    kdsl_cuda = pytest.importorskip("kdsl_cuda")
    if not registry.is_installed("cuda"):     # as tests/cuda_schedules/conftest.py does
        kd.register_backend("cuda", kdsl_cuda.backend)
    monkeypatch.setenv("KDSL_CACHE_DIR", str(tmp_path / "cache"))
    store.forget()
    from kdsl.runtime.signature import signature_from_args
    rng = np.random.default_rng()
    k = kd.kernel(_expo)
    x = rng.standard_normal(40).astype(np.float32)
    res = k.tune(x, backend="interp-cuda", budget_s=30, trials=3, progress=False, repeat=1)
    assert [t.status for t in res.trials] == ["ok"] * 3
    assert res.trials[1].hints == [{"threads": (64,)}]
    be = registry.get_backend("interp-cuda")

    def key(n):
        a = np.zeros(n, np.float32)
        sig = signature_from_args((a,), k.arg_names, (), False, None, None, True)
        return store.winner_key(be, sig, k._graph(sig), [])
    assert key(40) == key(50) == res.key != key(100)
    y = rng.standard_normal(50).astype(np.float32)
    np.testing.assert_allclose(k(y, backend="interp-cuda"), np.exp(y.astype(np.float64)) * 2 + 1,
                               rtol=1e-5)
    hinted = kd.kernel(_expo)     # the winner's hints are what the next compile of the class gets
    if res.best:
        hinted = kd.schedule("cuda", **res.best[0])(hinted)
        assert str(k.lower(y, backend="interp-cuda")) == str(hinted.lower(y, backend="interp-cuda"))
    store.forget()


def test_candidates_that_schedule_alike_compile_once(toy):
    rng = np.random.default_rng()
    k = kd.kernel(_rowmax)
    res = k.tune(*_args(rng), backend="tunetoy", budget_s=30, progress=False,
                 space=[{"unroll": 2}, [{"unroll": 2}, {}]])
    assert [t.status for t in res.trials] == ["ok", "ok", "duplicate"]
    assert res.trials[2].detail == "the schedule of [{'unroll': 2}]"
    assert res.best == [{"unroll": 2}]


def test_key_ignores_where_the_kernel_is_written():
    """Moving a kernel in its file (or to another file) keeps its winner; changing what it
    computes, its dtypes or its hints does not."""
    from kdsl.runtime.signature import signature_from_args
    src = ("import kdsl as kd\n"
           "def f(x, y):\n"
           "    return kd.exp(x - x.max(axis=1, keepdims=True)) * y\n")
    be = registry.get_backend("numpy")

    def key(code, filename, dtype=np.float32, hints=()):
        ns = {}
        exec(compile(code, filename, "exec"), ns)
        k = kd.kernel(ns["f"])
        a = np.ones((3, 4), dtype)
        sig = signature_from_args((a, a), k.arg_names, (), False, None, None, False)
        return store.winner_key(be, sig, k._graph(sig), hints)
    base = key(src, "/somewhere/a.py")
    assert base == key("\n\n# moved\n" + src, "/elsewhere/b.py")
    assert base != key(src.replace("* y", "+ y"), "/somewhere/a.py")
    assert base != key(src, "/somewhere/a.py", np.float64)
    from kdsl.schedule.hints import Hint
    assert base != key(src, "/somewhere/a.py", hints=[Hint("numpy", {"unroll": 2})])


def test_winner_changes_the_key_before_scheduling(tmp_path, monkeypatch):
    """A default compile already in the disk cache must not hide a winner persisted later: the
    cpu backend's key before scheduling holds the winner's hints (regression: it held only
    the user's, so a warm cache kept running the default's code)."""
    monkeypatch.setenv("KDSL_CACHE_DIR", str(tmp_path / "cache"))
    store.forget()
    rng = np.random.default_rng()
    A = rng.standard_normal((37, 150)).astype(np.float32)

    def make():
        @kd.kernel
        def rowsum(A):
            return A.sum(axis=1)
        return rowsum
    be = kd.get_backend("cpu")
    make()(A, backend="cpu")                    # the default, now in the disk cache
    res = make().tune(A, backend="cpu", trials=1, budget_s=5, progress=False, persist=False)
    store.save({"key": res.key, "kernel": "rowsum", "backend": "cpu", "hints": [{"rfactor": 4}]})
    lowered = be.stats["lowered"]
    got = make()(A, backend="cpu")             # a fresh kernel: the winner's schedule
    assert be.stats["lowered"] == lowered + 1
    np.testing.assert_allclose(got, A.astype(np.float64).sum(axis=1), rtol=1e-4, atol=1e-4)
    lowered = be.stats["lowered"]
    make()(A, backend="cpu")                   # and its code is what the next one loads
    assert be.stats["lowered"] == lowered
    store.forget()
