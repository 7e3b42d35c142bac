"""Issue 26 item 4: a kernel without explicit schedule functions is looked up in the disk cache
before it is scheduled (kdsl.runtime.dispatch.DeferredRequest, fingerprint.schedule_key): the
key holds everything the default schedule reads, and a warm process neither schedules, lowers
nor imports the schedules."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kdsl as kd
from kdsl.errors import KdslUserError
from kdsl.runtime import dispatch, fingerprint
from kdsl.runtime.signature import signature_from_args

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(autouse=True)
def _fake_parts():
    """The real frontend and schedules here (overrides tests/runtime/conftest.py's fakes)."""
    yield


kdsl_cpu = pytest.importorskip("kdsl_cpu")
cpu = kdsl_cpu.backend
cpu_backend_mod = sys.modules["kdsl_cpu.backend"]


def _softmax(*hints, **kw):
    def softmax(X):
        e = kd.exp(X - X.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    for h in hints:
        softmax = h(softmax)
    return kd.kernel(softmax, **kw)


def _deferred(kernel, a, be=None):
    be = be or cpu
    sig = signature_from_args((a,), kernel.arg_names, kernel.constants, kernel.specialize, None)
    return dispatch.DeferredRequest(kernel, be, sig, kernel._trace(sig))


def _pre(kernel, a, be=None):
    be = be or cpu
    req = _deferred(kernel, a, be)
    key = be.schedule_key(req)
    assert not req.scheduled       # the key is computed without scheduling
    return key


X = np.zeros((5, 7), np.float32)


def test_the_key_is_stable_and_changes_with_each_input_of_the_default_schedule(monkeypatch):
    from kdsl_cpu import CPUBackend
    base = _pre(_softmax(), X)
    assert base is not None and base == _pre(_softmax(), X)
    keys = {
        "dtype": _pre(_softmax(), X.astype(np.float64)),
        "layout": _pre(_softmax(), X[:, ::2]),
        "size-1 dim": _pre(_softmax(), np.zeros((1, 7), np.float32)),
        "specialized sizes": _pre(_softmax(specialize=True), X),
        "hint": _pre(_softmax(kd.schedule("cpu", vectorize=4)), X),
        "other hint value": _pre(_softmax(kd.schedule("cpu", vectorize=8)), X),
        "threads hint": _pre(_softmax(kd.schedule("cpu", threads=3)), X),
        "backend thread count": _pre(_softmax(), X, CPUBackend(num_threads=3)),
    }
    with monkeypatch.context() as m:
        from kdsl import config
        m.setattr(config, "usable_cores", lambda: 61)
        keys["usable cores"] = _pre(_softmax(), X)
    with monkeypatch.context() as m:
        m.setattr(cpu_backend_mod, "_host_caches", lambda: (("index0", "1", "Data", "1K"),))
        keys["host caches"] = _pre(_softmax(), X)
    with monkeypatch.context() as m:
        m.setattr(cpu_backend_mod.jit, "host_id", lambda: "another cpu")
        keys["host cpu"] = _pre(_softmax(), X)
    import kdsl_cpu.schedules as cpu_schedules
    with monkeypatch.context() as m:
        m.setattr(cpu_schedules, "GENERATOR", False)
        keys["schedule generator off"] = _pre(_softmax(), X)
    req = _deferred(_softmax(), X)
    k = fingerprint.schedule_key(req, "cpu", "1", {"host": "a"}, {"threads": 1})
    keys["backend version"] = fingerprint.schedule_key(req, "cpu", "2", {"host": "a"},
                                                       {"threads": 1})
    keys["backend name"] = fingerprint.schedule_key(req, "cpu2", "1", {"host": "a"},
                                                    {"threads": 1})
    keys["schedule input"] = fingerprint.schedule_key(req, "cpu", "1", {"host": "a"},
                                                      {"threads": 2})
    keys["codegen option"] = fingerprint.schedule_key(req, "cpu", "1", {"host": "b"},
                                                      {"threads": 1})
    assert k is not None and None not in keys.values()
    assert len(set(keys.values()) | {base, k}) == len(keys) + 2, keys
    # the key after scheduling is another key space: the two never collide
    assert base != cpu.early_key(dispatch.prepare(_softmax(), cpu, req.signature, req.graph))


def test_explicit_schedule_functions_are_keyed_after_scheduling():
    split = _softmax()
    split.schedule("cpu")(lambda s: s.outputs[0].split(s.outputs[0].axes[1], 4))
    sig = signature_from_args((X,), split.arg_names, (), False, None)
    assert dispatch._explicit(split, cpu) and not dispatch._explicit(_softmax(), cpu)
    # a function for another target does not stop the key before scheduling on cpu
    other = _softmax()
    other.schedule("cuda")(lambda s: None)
    assert not dispatch._explicit(other, cpu)
    req = dispatch.prepare(split, cpu, sig, split._trace(sig))
    assert cpu.schedule_key(req) is None      # an eager request: the early key decides


def test_one_key_before_scheduling_means_one_lowering():
    """The property that matters: requests sharing a key before scheduling lower to the same
    IR, over backends with other thread counts, hints, layouts, dtypes and sizes."""
    from kdsl_cpu import CPUBackend
    kernels = (_softmax(), _softmax(kd.schedule("cpu", vectorize=4)), _softmax(specialize=True))
    arrays = (np.zeros((512, 96), np.float32)[:, ::2], X, np.zeros((1, 9), np.float64))
    seen = {}
    for be in (CPUBackend(num_threads=1), CPUBackend(num_threads=3), cpu):
        for k in kernels:
            for a in arrays:
                req = _deferred(k, a, be)
                key = be.schedule_key(req)
                ir = str(be.lower(req))
                assert seen.setdefault(key, ir) == ir
    assert len(set(seen.values())) >= 5


def test_a_deferred_request_lowers_like_an_eager_one():
    """The generated code is the same whichever way the request was made."""
    k = _softmax(kd.schedule("cpu", vectorize=4))
    a = np.zeros((64, 33), np.float32)[:, 1:]
    sig = signature_from_args((a,), k.arg_names, (), False, None)
    eager = dispatch.prepare(k, cpu, sig, k._trace(sig))
    deferred = dispatch.DeferredRequest(k, cpu, sig, k._trace(sig))
    assert cpu.source(eager) == cpu.source(deferred)
    assert deferred.out_contiguous == eager.out_contiguous and deferred.options == eager.options


def test_a_schedule_error_is_still_the_users(monkeypatch, tmp_path):
    """A bad hint raises the user's ScheduleError through the deferred path, cache on or off."""
    for cache in ("1", "0"):
        monkeypatch.setenv("KDSL_CACHE_DIR", str(tmp_path))
        monkeypatch.setenv("KDSL_CACHE", cache)
        k = _softmax(kd.schedule("cpu", tile={"nope": 4}))   # no such axis
        with pytest.raises(KdslUserError):
            k(np.ones((4, 5), np.float32), backend="cpu")


def test_results_and_hits_across_kernels_with_different_hints(monkeypatch, tmp_path):
    """Right results for sizes that do and do not divide the tiles (and 1s); the same kernel
    made again (a new object, traced again) hits the key before scheduling."""
    monkeypatch.setenv("KDSL_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("KDSL_CACHE", raising=False)
    rng = np.random.default_rng()
    for shape in ((1, 1), (3, 1), (64, 100)):
        x = rng.standard_normal(shape).astype(np.float32)
        e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
        want = e / e.sum(1, keepdims=True)
        for hints in ((), (kd.schedule("cpu", vectorize=4),), (kd.schedule("cpu", parallel=False),)):
            got = _softmax(*hints)(x, backend="cpu")
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
            before = dict(cpu.stats)
            again = _softmax(*hints)(x[:, ::1], backend="cpu")     # a new kernel object
            np.testing.assert_allclose(again, want, rtol=1e-5, atol=1e-7)
            assert cpu.stats["unscheduled"] == before["unscheduled"] + 1
            assert cpu.stats["lowered"] == before["lowered"]


_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import kdsl as kd
    import kdsl_cpu

    @kd.kernel
    def softmax(X):
        e = kd.exp(X - X.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    x = np.random.default_rng(int(sys.argv[1])).standard_normal((33, 65)).astype(np.float32)[:, 1:]
    r = softmax(x, backend="cpu")
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    ok = bool(np.allclose(r, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7))
    heavy = ("llvmlite.binding", "kdsl.passes.pipeline", "kdsl_cpu.codegen", "logging",
             "kdsl_cpu.schedules", "kdsl.schedule.legality", "kdsl.schedule.generator",
             "kdsl.frontend.fori", "importlib.metadata")
    print(json.dumps({"ok": ok, "modules": [m for m in heavy if m in sys.modules],
                      **kdsl_cpu.backend.stats}))
""")


def _run(cache, seed):
    env = dict(os.environ, KDSL_CACHE_DIR=str(cache), PYTHONPATH=ROOT)
    env.pop("KDSL_CACHE", None)
    p = subprocess.run([sys.executable, "-c", _SCRIPT, str(seed)], env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr + p.stdout
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_a_warm_process_neither_schedules_nor_lowers(tmp_path):
    cold = _run(tmp_path, 1)
    assert cold["ok"] and cold["lowered"] == 1 and cold["unscheduled"] == 0
    warm = _run(tmp_path, 2)
    assert warm["ok"] and warm["lowered"] == 0 and warm["compiled"] == 0
    assert warm["unscheduled"] == 1 and warm["cache_hits"] == 1
    from kdsl.backends import registry
    from kdsl_cpu import elfload
    mods = warm["modules"]
    if registry._path_state() is None:   # finders of other distributions: importlib.metadata
        mods = [m for m in mods if m != "importlib.metadata"]
    if elfload.supported():
        assert mods == []     # no schedules, passes, code generator, LLVM or importlib.metadata


def test_verify_checks_a_hit_against_a_fresh_compile(monkeypatch, tmp_path):
    """KDSL_VERIFY=1: an entry before scheduling that names other object code (what a key
    missing an input of the default schedule would find) is an internal error, not a result."""
    from kdsl.errors import InternalCompilerError
    monkeypatch.setenv("KDSL_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("KDSL_CACHE", raising=False)
    x = np.random.default_rng().standard_normal((9, 13)).astype(np.float32)
    _softmax(kd.schedule("cpu", vectorize=4))(x, backend="cpu")
    _softmax()(x, backend="cpu")
    monkeypatch.setenv("KDSL_VERIFY", "1")
    _softmax()(x, backend="cpu")                   # a true hit passes the check
    # the vectorize=4 kernel's entry (before scheduling) put under the plain kernel's key
    req_plain, req_hint = _deferred(_softmax(), x), _deferred(
        _softmax(kd.schedule("cpu", vectorize=4)), x)
    from kdsl.runtime.cache import DiskCache
    store = DiskCache()
    store.put(cpu.schedule_key(req_plain), store.get(cpu.schedule_key(req_hint)))
    with pytest.raises(InternalCompilerError, match="before scheduling"):
        _softmax()(x, backend="cpu")


def test_a_kernel_moved_in_its_file_keeps_its_keys(tmp_path, monkeypatch):
    """Shape constraints word their errors with the user's file and line; that text is not part
    of the keys (the errors are raised from the live graph), so inserting lines above a kernel
    keeps its disk-cache entries (regression: every edit above a kernel recompiled it)."""
    src = "import kdsl as kd\n\n@kd.kernel\ndef f(a, b):\n    return (a + b) @ a.T\n"
    monkeypatch.syspath_prepend(str(tmp_path))
    keys = []
    for name, pad in (("moved_a", ""), ("moved_b", "\n\n\n# a comment\n")):
        (tmp_path / f"{name}.py").write_text(pad + src)
        k = __import__(name).f
        a = np.zeros((4, 4), np.float32)
        sig = signature_from_args((a, a), k.arg_names, k.constants, k.specialize, None)
        req = dispatch.DeferredRequest(k, cpu, sig, k._trace(sig))
        keys.append(cpu.schedule_key(req))
        assert any("moved_" in c.message for c in req.graph.constraints)   # the text says where
    assert keys[0] == keys[1]
