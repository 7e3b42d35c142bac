"""Issue 26 item 4: the key before tracing (kdsl.runtime.trace_key).  A warm process takes the
traced graph from the disk cache without running the kernel's function; the key changes with
everything the trace reads, and is None where something cannot be written faithfully."""
import functools
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kdsl as kd
from kdsl.kernel import Kernel
from kdsl.runtime import trace_key
from kdsl.runtime.signature import signature_from_args

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
X = np.zeros((5, 7), np.float32)


@pytest.fixture(autouse=True)
def _fake_parts():
    """The real frontend here (overrides tests/runtime/conftest.py's fakes)."""
    yield


def _key(kernel, a=X):
    sig = signature_from_args((a,), kernel.arg_names, kernel.constants, kernel.specialize, None)
    return trace_key.key(kernel.fn, sig.specs(), kernel.__name__, kernel.constants, Kernel)


SCALE = 2.0
TABLE = {"a": (1, 2.5), "b": [np.float32(3)]}


def _helper(x):
    return x * SCALE


def test_the_key_follows_what_the_trace_reads():
    global SCALE

    @kd.kernel
    def f(A):
        return _helper(A) + TABLE["a"][1]
    k = _key(f)
    assert k is not None and k == _key(f)
    assert _key(f, X.astype(np.float64)) != k and _key(f, X[:, ::2]) != k   # the specs
    SCALE = 3.0                  # a global read by a helper the kernel calls
    try:
        assert _key(f) != k
    finally:
        SCALE = 2.0
    TABLE["b"].append(1)         # a container the code names, changed in place
    try:
        assert _key(f) != k
    finally:
        TABLE["b"].pop()
    assert _key(f) == k


def test_closures_defaults_and_other_kernels():
    def make(c):
        @kd.kernel
        def g(A, s=c):
            return A * c + s
        return g
    assert _key(make(1.0)) != _key(make(2.0))
    assert _key(make(1.0)) == _key(make(1.0))

    @kd.kernel
    def inner(A):
        return A + 1

    @kd.kernel
    def outer(A):
        return inner(A) * 2
    k = _key(outer)
    assert k is not None

    @kd.kernel
    def inner(A):       # noqa: F811  (the closure cell outer reads, rebound: a new key)
        return A + 2
    assert _key(outer) != k
    twice = functools.partial(_helper)

    @kd.kernel
    def p(A):
        return twice(A)
    assert _key(p) is not None


def test_unwritable_reads_make_no_key():
    class Box:
        v = 2.0
    box = Box()

    @kd.kernel
    def f(A):
        return A * box.v
    assert _key(f) is None                              # an object of a user class
    big = np.ones(1 << 16, np.float32)

    @kd.kernel
    def g(A):
        return A * big[0]
    assert _key(g) is None                              # an array too large to hash
    small = np.ones(4, np.float32)

    @kd.kernel
    def h(A):
        return A * small[0]
    k = _key(h)
    assert k is not None
    small[0] = 5                                        # its bytes are in the key
    assert _key(h) != k


def test_a_graph_holding_user_code_is_not_pickled():
    graph_like = {"f": _helper}
    assert trace_key.dumps(graph_like) is None
    assert trace_key.dumps({"g": np.add, "t": (1, 2.0)}) is not None


_SCRIPT = textwrap.dedent("""
    import json, sys, warnings
    import numpy as np
    import kdsl as kd
    SHIFT = float(sys.argv[1])

    def centre(X):
        return X - X.max(axis=1, keepdims=True) + SHIFT

    @kd.kernel
    def softmax(X):
        e = kd.exp(centre(X))
        return e / e.sum(axis=1, keepdims=True)

    x = np.random.default_rng(0).standard_normal((9, 13)).astype(np.float32)
    r = softmax(x, backend="cpu")
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True) + SHIFT)
    ok = bool(np.allclose(r, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7))
    print(json.dumps({"ok": ok, "traced": "kdsl.frontend.trace" in sys.modules}))
""")


def _run(cache, shift, verify=False):
    env = dict(os.environ, KDSL_CACHE_DIR=str(cache), PYTHONPATH=ROOT)
    env.pop("KDSL_CACHE", None)
    env.pop("KDSL_VERIFY", None)
    if verify:
        env["KDSL_VERIFY"] = "1"
    p = subprocess.run([sys.executable, "-c", _SCRIPT, str(shift)], env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr + p.stdout
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_a_warm_process_does_not_trace(tmp_path):
    pytest.importorskip("kdsl_cpu")
    cold = _run(tmp_path, 0.5)
    assert cold == {"ok": True, "traced": True}
    assert _run(tmp_path, 0.5) == {"ok": True, "traced": False}
    # a global of a helper the kernel calls, changed: a new key, traced, the new value used
    assert _run(tmp_path, 0.25) == {"ok": True, "traced": True}
    # KDSL_VERIFY=1: a hit is traced again and compared (it agrees)
    assert _run(tmp_path, 0.25, verify=True) == {"ok": True, "traced": True}


def test_functions_a_factory_made_are_told_apart():
    """kd.sqrt and kd.exp share a module and qualified name (one factory made both): a
    closure holding one or the other keys by the function's content, not its name."""
    def case(f):
        def ref(A):
            return f(A) + 1
        return ref
    assert kd.sqrt.__qualname__ == kd.exp.__qualname__
    keys = {_key(kd.kernel(case(f))) for f in (kd.sqrt, kd.exp, kd.sqrt)}
    assert len(keys) == 2 and None not in keys


def test_graphs_with_custom_combiners_are_not_kept():
    """Schedules recognise the online-softmax fusion's combiner (and a kd.reducer's) by identity
    with this process's objects: an unpickled graph would hold copies, so such graphs are traced
    in every process (the attention chain is fused by the trace)."""
    @kd.kernel
    def attn(q, k, v):
        s = q @ k.T
        p = kd.exp(s - s.max(axis=-1, keepdims=True))
        return (p / p.sum(axis=-1, keepdims=True)) @ v
    x = np.ones((8, 4), np.float32)
    sig = signature_from_args((x, x, x), attn.arg_names, attn.constants, attn.specialize, None)
    assert trace_key.dumps(attn._run_trace(sig, sig.specs())) is None

    @kd.kernel
    def rowmax(A):
        return A.max(axis=1)          # a built-in combiner (its kind says what it is): kept
    sig = signature_from_args((x,), rowmax.arg_names, rowmax.constants, rowmax.specialize, None)
    assert trace_key.dumps(rowmax._run_trace(sig, sig.specs())) is not None
