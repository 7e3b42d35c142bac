"""Issue 26 item 4: the disk-cache key is computed before lowering (kdsl.runtime.fingerprint),
from what decides the compiled code, and a warm process loads the kernel without lowering,
code generation or LLVM (kdsl_cpu.elfload maps the object code)."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kdsl as kd
from kdsl.runtime import dispatch, fingerprint
from kdsl.runtime.signature import signature_from_args

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(autouse=True)
def _fake_parts():
    """The real frontend and schedules here (overrides tests/runtime/conftest.py's fakes)."""
    yield


cpu = pytest.importorskip("kdsl_cpu").backend


def _request(kernel, a, be=None):
    sig = signature_from_args((a,), kernel.arg_names, kernel.constants, kernel.specialize, None)
    return dispatch.prepare(kernel, be or cpu, sig, kernel._trace(sig))


def _key(kernel, a, backend=None):
    return (backend or cpu).early_key(_request(kernel, a, backend))


def _softmax():
    @kd.kernel
    def softmax(X):
        e = kd.exp(X - X.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    return softmax


X = np.zeros((5, 7), np.float32)


def test_the_key_is_stable_and_structural():
    """Traced twice, in one process or by two kernel objects: one key (no id(), no repr)."""
    a, b = _softmax(), _softmax()
    k = _key(a, X)
    assert k is not None and len(k) == 64
    assert _key(a, X) == k == _key(b, X)


def test_what_changes_the_code_changes_the_key():
    base = _key(_softmax(), X)
    assert _key(_softmax(), X.astype(np.float64)) != base             # dtype
    assert _key(_softmax(), X[:, ::2]) != base                         # layout class
    assert _key(_softmax(), np.zeros((1, 7), np.float32)) != base      # a size-1 dim
    with_split = _softmax()
    with_split.schedule("cpu")(lambda s: s.outputs[0].split(s.outputs[0].axes[1], 4))
    other_split = _softmax()
    other_split.schedule("cpu")(lambda s: s.outputs[0].split(s.outputs[0].axes[1], 8))
    k4, k8 = _key(with_split, X), _key(other_split, X)
    assert len({base, k4, k8}) == 3                                    # schedule functions
    hinted = kd.kernel(kd.schedule("cpu", vectorize=4)(_softmax().fn))
    hinted8 = kd.kernel(kd.schedule("cpu", vectorize=8)(_softmax().fn))
    assert len({base, _key(hinted, X), _key(hinted8, X)}) == 3          # declarative hints
    req = _request(_softmax(), X)
    k = fingerprint.request_key(req, "cpu", "1", {"host": "a"})
    assert k != fingerprint.request_key(req, "cpu", "1", {"host": "b"})   # host / options
    assert k != fingerprint.request_key(req, "cpu", "2", {"host": "a"})   # backend version
    assert k != fingerprint.request_key(req, "cpu2", "1", {"host": "a"})  # backend name


def test_a_different_lowering_always_has_a_different_key():
    """The property that matters: two requests whose lowered IR differs never share a key,
    over backends with other thread counts, layouts, sizes, hints and schedule functions."""
    from kdsl_cpu import CPUBackend
    big = np.zeros((512, 96), np.float32)
    split = _softmax()
    split.schedule("cpu")(lambda s: s.outputs[0].split(s.outputs[0].axes[1], 4))
    kernels = (_softmax(), split, kd.kernel(kd.schedule("cpu", vectorize=4)(_softmax().fn)))
    seen = {}
    for be in (CPUBackend(num_threads=1), CPUBackend(num_threads=3), cpu):
        for k in kernels:
            for a in (big, big[:, ::2], X):
                req = _request(k, a, be)
                ir, key = str(be.lower(req)), be.early_key(req)
                assert seen.setdefault(key, ir) == ir
    assert len(set(seen.values())) >= 4


SCALE = 2.0


@pytest.mark.filterwarnings("ignore::kdsl.errors.StaleGlobalWarning")
def test_a_global_read_by_the_trace_is_part_of_the_key():
    global SCALE

    @kd.kernel
    def scaled(A):
        return A * SCALE
    k2 = _key(scaled, X)
    SCALE = 3.0
    try:
        assert _key(scaled, X) != k2
    finally:
        SCALE = 2.0
    assert _key(scaled, X) == k2


def test_what_cannot_be_written_canonically_has_no_key():
    class Holder:
        pass
    h = Holder()
    h.fn = lambda: 1
    with pytest.raises(fingerprint.Unkeyable):
        fingerprint.fingerprint(h)
    h.fn = {Holder(), Holder()}                     # objects in a set: no canonical order
    with pytest.raises(fingerprint.Unkeyable):
        fingerprint.fingerprint(h)
    h.fn = {3, 1, 2}
    assert fingerprint.fingerprint(h) == fingerprint.fingerprint(h)


_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import kdsl as kd
    import kdsl_cpu

    @kd.kernel
    def softmax(X):
        e = kd.exp(X - X.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    x = np.random.default_rng(0).standard_normal((33, 65)).astype(np.float32)[:, 1:]
    r = softmax(x, backend="cpu")
    for _ in range(3):      # the third call builds the native fast launcher (kept on disk too)
        r = softmax(x, backend="cpu")
    fast = softmax._fast is not None
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    ok = bool(np.allclose(r, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7))
    mods = [m for m in ("llvmlite.binding", "kdsl.passes.pipeline", "kdsl_cpu.codegen", "logging",
                        "kdsl.frontend.trace") if m in sys.modules]
    from kdsl import _dataclass_code as dc
    print(json.dumps({"ok": ok, "modules": mods, "fast": fast, **kdsl_cpu.backend.stats,
                      "dataclass_misses": dc._dirty, "dataclass_hits": len(dc._used)}))
""")


def _run(cache):
    # bytecode written (as an installed kdsl's is), to a folder of this test's: the compiled
    # dataclass methods are kept beside it (kdsl/_dataclass_code.py)
    env = dict(os.environ, KDSL_CACHE_DIR=str(cache), PYTHONPATH=ROOT,
               PYTHONPYCACHEPREFIX=os.path.join(str(cache), "pyc"))
    env.pop("KDSL_CACHE", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    p = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr + p.stdout
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_a_warm_process_neither_lowers_nor_loads_llvm(tmp_path):
    cold = _run(tmp_path)
    assert cold["ok"] and cold["lowered"] == 1 and cold["compiled"] == 1
    warm = _run(tmp_path)
    assert warm["ok"] and warm["lowered"] == 0 and warm["compiled"] == 0
    assert cold["fast"] and warm["fast"]     # the fast launcher's object code: from the cache
    assert warm["cache_hits"] == 1
    # the warm process compiled no dataclass method: all came from the cold one's table
    assert cold["dataclass_misses"] and not warm["dataclass_misses"] and warm["dataclass_hits"] > 50
    # nor imported logging to drop the compile's INFO record (nothing could hear it)
    assert "logging" not in warm["modules"]
    from kdsl_cpu import elfload
    if elfload.supported():     # elsewhere MCJIT maps the code (LLVM is loaded, nothing lowered)
        assert warm["modules"] == []      # no LLVM, no passes, no code generator, no trace
