"""Compile logging, ``python -m kdsl cache info|clear`` and the cache directory (issue 26, item 7)."""
import logging
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kdsl as kd
from kdsl.compile_log import STAGES

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _compiles(caplog):
    return [r for r in caplog.records if r.name == "kdsl" and r.levelno == logging.INFO]


def test_each_compile_is_logged_with_stage_times_and_the_reason(caplog):
    caplog.set_level(logging.DEBUG, logger="kdsl")

    @kd.kernel
    def scale_add(x, y):
        return x * 2 + y

    rng = np.random.default_rng()
    a = rng.random(7).astype(np.float32)
    calls = [
        ((a, a), "numpy", "first compile"),
        ((a, a), "numpy", None),                                     # cached: nothing logged
        ((a.astype(np.float64), a), "numpy", "argument 'x': dtype float32 -> float64"),
        ((a, rng.random((3, 7)).astype(np.float32)), "numpy", "argument 'y': shape class rank 1 -> rank 2"),
        ((a, a[::-1]), "numpy", "argument 'y': layout contiguous -> strided"),
        ((a, 2.0), "numpy", "argument 'y': class numpy.ndarray -> float"),
        ((a, a), "interp", "new backend 'interp' (had: 'numpy')"),
    ]
    for args, backend, reason in calls:
        caplog.clear()
        x, y = args
        np.testing.assert_allclose(scale_add(*args, backend=backend),
                                   np.asarray(x, np.float64) * 2 + np.asarray(y, np.float64), rtol=1e-6)
        recs = _compiles(caplog)
        if reason is None:
            assert recs == []
            continue
        assert len(recs) == 1, [r.getMessage() for r in recs]
        msg = recs[0].getMessage()
        assert msg.startswith(f"kdsl: compiled scale_add for {backend} in ") and reason in msg, msg
        assert recs[0].kdsl_reason.endswith(reason) and recs[0].kdsl_backend == backend
        times = recs[0].kdsl_times
        assert set(times) <= set(STAGES) and "schedule" in times and "backend compile" in times
        assert all(t >= 0 for t in times.values())
        assert any(r.levelno == logging.DEBUG and reason in r.getMessage() for r in caplog.records)
    caplog.clear()
    scale_add.schedule("numpy")(lambda s: None)
    scale_add(a, a, backend="numpy")
    assert "schedule added" in _compiles(caplog)[0].getMessage()


def test_cpu_compiles_time_every_stage(caplog):
    pytest.importorskip("llvmlite")
    caplog.set_level(logging.INFO, logger="kdsl")

    @kd.kernel
    def twice(x):
        return x + x

    x = np.arange(5, dtype=np.int32)
    assert (twice(x, backend="cpu") == 2 * x).all()
    (rec,) = _compiles(caplog)
    assert set(rec.kdsl_times) == set(STAGES), rec.kdsl_times
    assert "object code" in rec.getMessage()


def _cli(args, env_extra, cwd):
    env = {k: v for k, v in os.environ.items() if k not in ("KDSL_CACHE_DIR", "XDG_CACHE_HOME", "KDSL_CACHE")}
    env.update(env_extra)
    env["PYTHONPATH"] = ROOT
    r = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                       cwd=cwd, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_cache_info_and_clear_from_the_command_line(tmp_path):
    cache = tmp_path / "xdg" / "kdsl"       # the default under XDG_CACHE_HOME
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    out = _cli(["-m", "kdsl", "cache", "info"], env, tmp_path)
    assert f"location: {cache}" in out and "entries:  0" in out
    _cli(["-c", textwrap.dedent("""
        import numpy as np, kdsl as kd
        f = kd.kernel(lambda x: x * 3)
        f(np.ones(4, np.float32), backend="cpu"); f(np.ones(4, np.float64), backend="cpu")
    """)], env, tmp_path)
    entries = [p for p in cache.rglob("*.bin")]
    assert len(entries) >= 2                  # two kernels (and the OpenMP launcher)
    size = sum(p.stat().st_size for p in entries)
    (cache / "ab").mkdir(exist_ok=True)
    (cache / "ab" / ".tmp-x.part").write_bytes(b"half")   # an interrupted write
    (cache / "notes.txt").write_text("not ours")
    out = _cli(["-m", "kdsl", "cache", "info"], env, tmp_path)
    assert f"entries:  {len(entries)}" in out and f"({size} bytes)" in out, out
    assert "leftover temporary files: 1" in out
    # KDSL_CACHE_DIR comes first
    other = tmp_path / "other"
    out = _cli(["-m", "kdsl", "cache", "info"], {**env, "KDSL_CACHE_DIR": str(other)}, tmp_path)
    assert f"location: {other} (does not exist)" in out and "entries:  0" in out
    out = _cli(["-m", "kdsl", "cache", "clear"], env, tmp_path)
    assert f"removed {len(entries)} entries" in out, out
    assert list(cache.rglob("*.bin")) == [] and list(cache.rglob("*.part")) == []
    assert (cache / "notes.txt").read_text() == "not ours"   # never deletes what it did not write
    assert "entries:  0" in _cli(["-m", "kdsl", "cache", "info"], env, tmp_path)
