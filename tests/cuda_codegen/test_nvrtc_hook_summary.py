"""The NVRTC hook's summary under pytest-xdist: the controller runs no tests, so
tests/conftest.py adds up each worker's counts (``nvrtc_hook.merge``) before printing."""
import nvrtc_hook


def _stats(runs, compiled, cached, tc, seconds):
    return {"runs": runs, "compiled": compiled, "cached": cached, "tensor_core": tc,
            "seconds": seconds}


def test_merge_adds_up_the_workers(monkeypatch):
    monkeypatch.setattr(nvrtc_hook, "STATS", _stats(0, 0, 0, 0, 0.0))
    nvrtc_hook.merge(_stats(10, 4, 6, 1, 1.5))
    nvrtc_hook.merge(_stats(7, 3, 4, 0, 2.0))
    s = nvrtc_hook.STATS
    assert (s["runs"], s["compiled"], s["cached"], s["tensor_core"]) == (17, 7, 10, 1)
    assert abs(s["seconds"] - 3.5) < 1e-9 and s["workers"] == 2
    line = nvrtc_hook.summary()
    assert line.startswith("cuda codegen hook (2 pytest-xdist workers together): 17 GPU-form")
    assert "7 modules NVRTC-compiled (1 with tensor cores), 10 memoised, 3.5 s" in line


def test_single_process_summary_names_no_workers(monkeypatch):
    monkeypatch.setattr(nvrtc_hook, "STATS", _stats(3, 2, 1, 0, 0.25))
    assert nvrtc_hook.summary().startswith("cuda codegen hook: 3 GPU-form SIMT runs, 2 modules")
