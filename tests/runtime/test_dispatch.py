"""Kernel calls: signatures, caching, errors, out=, thread safety, pickling, inspection."""
import multiprocessing as mp
import os
import pickle
import threading

import numpy as np
import pytest

import kdsl as kd
from kdsl.errors import ArgumentError, ShapeError
from fakes import (NullBackend, g_add, g_matvec, g_rowsum, g_scale, g_two, graph_for)
import kernels_mod

HERE = os.path.abspath(__file__)


def make(build, **kw):
    def fn(*args):
        raise AssertionError("the fake trace never runs the body")
    fn.__fake_graph__ = build
    return kd.kernel(**kw)(_named(fn, build))


def _named(fn, build):
    import inspect
    nparams = {g_add: ["A", "B"], g_rowsum: ["A"], g_scale: ["A", "s"], g_matvec: ["M", "x"],
               g_two: ["A"]}[build]
    ns = {}
    exec(f"def {build.__name__[2:]}({', '.join(nparams)}): pass", ns)
    f = ns[build.__name__[2:]]
    f.__fake_graph__ = build
    return f


def test_call_and_symbolic_shapes_compile_once(counting):
    k = make(g_add)
    for n in (3, 7, 100):
        a, b = np.arange(n, dtype=np.float32), np.ones(n, np.float32)
        np.testing.assert_array_equal(k(a, b, backend="counting"), a + 1)
    assert counting.compiles == 1
    k(np.ones(4), np.ones(4), backend="counting")             # new dtype
    k(np.ones((2, 3)), np.ones((2, 3)), backend="counting")   # new rank
    assert counting.compiles == 3
    k(np.ones((1, 3)), np.ones((1, 3)), backend="counting")   # size-1 dim: new key
    k(np.ones((4, 6))[:, ::2], np.ones((4, 3)), backend="counting")  # strided: new key
    assert counting.compiles == 5


def test_specialize_and_constants(counting):
    k = make(g_add, specialize=True)
    k(np.ones(3), np.ones(3), backend="counting")
    k(np.ones(4), np.ones(4), backend="counting")
    k(np.ones(4), np.ones(4), backend="counting")
    assert counting.compiles == 2
    s = make(g_scale, constants=("s",))
    a = np.arange(5.0)
    np.testing.assert_array_equal(s(a, 2.0, backend="counting"), a * 2)
    np.testing.assert_array_equal(s(a, 3.0, backend="counting"), a * 3)
    np.testing.assert_array_equal(s(a, 3.0, backend="counting"), a * 3)
    assert counting.compiles == 4
    with pytest.raises(ArgumentError, match="constant argument 's' must be hashable"):
        s(a, [2.0], backend="counting")
    assert "5.0" in s.source(a, 5.0, backend="numpy")
    sym = make(g_scale)
    np.testing.assert_array_equal(sym(a, 2.0, backend="counting"), a * 2)
    np.testing.assert_array_equal(sym(a, 5.0, backend="counting"), a * 5)
    assert counting.compiles == 5


def test_out_argument(counting):
    k = make(g_add)
    a, b = np.arange(6.0), np.ones(6)
    o = np.empty(6)
    assert k(a, b, out=o, backend="numpy") is o
    np.testing.assert_array_equal(o, a + b)
    big = np.zeros(12)
    k(a, b, out=big[::2], backend="numpy")                  # strided out
    np.testing.assert_array_equal(big[::2], a + b)
    assert not big[1::2].any()
    with pytest.raises(ArgumentError, match="shape"):
        k(a, b, out=np.empty(5), backend="numpy")
    o32 = np.empty(6, np.float32)      # numpy's out= casting (same_kind): issue 24 item 13
    assert k(a, b, out=o32, backend="numpy") is o32
    np.testing.assert_array_equal(o32, (a + b).astype(np.float32))
    with pytest.raises(ArgumentError, match="same_kind"):
        k(a, b, out=np.empty(6, np.int32), backend="numpy")
    two = make(g_two)
    p, q = np.empty(6), np.empty(6)
    res = two(a, out=(p, q), backend="numpy")
    assert res[0] is p and res[1] is q
    np.testing.assert_array_equal(q, a * 2)
    with pytest.raises(ArgumentError, match="returns 2"):
        two(a, out=p, backend="numpy")
    r1, r2 = two(a, backend="numpy")
    np.testing.assert_array_equal(r1, a + 1)


def test_argument_errors_name_parameter_and_call_site():
    k = make(g_add)
    with pytest.raises(ArgumentError) as ei:
        k(np.ones(3), backend="numpy")
    assert "A, B" in str(ei.value) and ei.value.loc.file == HERE
    with pytest.raises(ArgumentError, match="'B' must be an array") as ei:
        k(np.ones(3), [1, 2, 3], backend="numpy")
    assert ei.value.loc.file == HERE and "k(np.ones(3), [1, 2, 3]" in ei.value.loc.code
    with pytest.raises(ArgumentError, match="'A' has unsupported dtype complex128"):
        k(np.ones(3, complex), np.ones(3), backend="numpy")
    # the traceback ends outside kdsl's internals
    try:
        k(np.ones(3), backend="numpy")
    except ArgumentError as e:
        tb = e.__traceback__
        files = []
        while tb is not None:
            files.append(tb.tb_frame.f_code.co_filename)
            tb = tb.tb_next
        assert files[0] == HERE
        internal = [f for f in files if os.sep + "kdsl" + os.sep in f]
        assert len(internal) <= 1 and not any("runtime" in f for f in internal), files


def test_shape_errors_at_call_time():
    mv = make(g_matvec)
    m, x = np.random.rand(3, 4), np.random.rand(4)
    np.testing.assert_allclose(mv(m, x, backend="numpy"), m @ x)
    with pytest.raises(ShapeError, match="M's columns must match x's length: 4 != 5"):
        mv(m, np.ones(5), backend="numpy")
    k = make(g_add)
    with pytest.raises(ShapeError, match="argument 'B' has size 4 in dim 0"):
        k(np.ones(3), np.ones(4), backend="numpy")


def test_concurrent_compile_once(counting):
    k = make(g_rowsum)
    a = np.random.rand(5, 7)
    results, barrier = [], threading.Barrier(8)

    def worker():
        barrier.wait()
        results.append(k(a, backend="counting"))

    ts = [threading.Thread(target=worker) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert counting.compiles == 1 and len(results) == 8
    for r in results:
        np.testing.assert_allclose(r, a.sum(1))


def test_pickle_by_reference_and_across_processes():
    k = kernels_mod.add
    assert pickle.loads(pickle.dumps(k)) is k
    a, b = np.arange(4.0), np.ones(4)
    ctx = mp.get_context("spawn")
    with ctx.Pool(1) as pool:
        out = pool.map(kernels_mod.call_add, [(k, a, b)])
    np.testing.assert_array_equal(out[0], a + b)


def test_schedules_hints_and_explicit(counting):
    from kdsl.schedule.hints import Hint
    k = make(g_add)
    a = np.ones(3)
    k(a, a, backend="counting")
    k._add_schedule(Hint("counting", {"parallel": "i0"}))
    k._add_schedule(Hint("cuda", {"threads": 256}))
    k(a, a, backend="counting")                 # cache dropped: recompiled with the hint
    assert counting.compiles == 2
    assert [h.hints for h in counting.hints[-1]] == [{"parallel": "i0"}]
    seen = []
    k.schedule("counting")(lambda s: seen.append(s.graph.name))
    k(a, a, backend="counting")
    assert seen == ["add"] and counting.compiles == 3
    assert len(counting.hints) == 2               # explicit fns replace backend.schedule


def test_dump_lower_source(counting, monkeypatch, capsys):
    k = make(g_rowsum)
    monkeypatch.setenv("KDSL_DUMP", "1")
    k(np.ones((2, 3)), backend="counting")
    err = capsys.readouterr().err
    assert "=== kdsl: rowsum for counting (float64[?, ?]) ===" in err and "('lowered'" in err
    assert "--- source (counting) ---" in err
    assert k.lower(np.ones((2, 2)), backend="counting") == ("lowered", "rowsum")
    src = k.source(kd.TensorSpec(("n", "m"), kd.float32), backend="numpy")
    assert "B" in src and "A" in src


def test_default_backend_rules(monkeypatch):
    from kdsl.backends import registry
    monkeypatch.setattr(registry, "auto_default", "numpy")
    monkeypatch.setattr(registry, "_warned_numpy", True)
    assert registry.default_backend_name([np.ones(2)]) == "numpy"

    class Dev:
        __cuda_array_interface__ = {"shape": (2,), "typestr": "<f4", "data": (0, False),
                                    "version": 3}

    class DL:
        def __dlpack_device__(self):
            return (2, 0)

    assert registry.default_backend_name([np.ones(2), Dev()]) == "cuda"
    assert registry.default_backend_name([DL()]) == "cuda"
    monkeypatch.setenv("KDSL_BACKEND", "interp")
    assert registry.default_backend_name([Dev()]) == "interp"
    with kd.use_backend("numpy"):
        assert registry.default_backend_name([Dev()]) == "numpy"
    with pytest.raises(kd.BackendNotInstalled):
        with kd.use_backend("nosuch"):
            pass


def test_cached_call_reuses_the_launch_path():
    """The per-signature launcher is built once; later calls never reach the slow path.
    (How fast that path is, is measured by benchmarks/overhead.py, not asserted here.)"""
    from kdsl.backends import registry
    registry.register_backend("null", NullBackend())
    try:
        k = make(g_add)
        a = np.ones(8, np.float32)
        misses = []
        real_miss = k._miss
        k._miss = lambda *args: misses.append(1) or real_miss(*args)
        for _ in range(50):
            k(a, a, backend="null")
        assert len(misses) == 1
        k(np.ones(9, np.float32), np.ones(9, np.float32), backend="null")   # same signature class
        assert len(misses) == 1
        k(np.ones(8, np.float64), np.ones(8, np.float64), backend="null")   # new dtype: a new launcher
        assert len(misses) == 2
    finally:
        registry.unregister_backend("null")
