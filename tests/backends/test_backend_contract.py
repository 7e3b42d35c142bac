"""The explicit backend contract (kdsl/backends/spec.py, docs/backends.md): a third-party
backend written from the docs alone (toy_backend.py) runs kernels through it, its spec's
fields mean what they say, and a backend that breaks the contract gets a clear error."""
import dataclasses

import numpy as np
import pytest

import kdsl as kd
from kdsl.backends import registry
from kdsl.backends.spec import BackendSpec, check_backend
from kdsl.errors import BackendUnavailable, ShapeError
from kdsl.runtime.fastpath import PROMOTE_AFTER

from toy_backend import ToyBackend

rng = np.random.default_rng()


@pytest.fixture
def toy():
    b = ToyBackend()
    kd.register_backend("toy", b)
    yield b
    registry.unregister_backend("toy")


@kd.kernel
def axpy(alpha, x, y):
    return alpha * x + y


@kd.kernel
def row_sums(a):
    return a.sum(axis=1)


@pytest.mark.parametrize("n", [0, 1, 7, 64])
def test_toy_runs_kernels_like_numpy(toy, n):
    x, y = rng.standard_normal(n), rng.standard_normal(n)
    np.testing.assert_allclose(axpy(2.5, x, y, backend="toy"), 2.5 * x + y)
    a = rng.standard_normal((3, n))
    np.testing.assert_allclose(row_sums(a, backend="toy"), a.sum(axis=1), atol=1e-12)
    v = rng.standard_normal((n, 4))[:, 1]                   # a strided view
    np.testing.assert_allclose(axpy(-1.0, v, v, backend="toy"), np.zeros(n), atol=0)
    assert toy.compiles >= 2 and all(r.options == {} for r in toy.requests)


def test_toy_fast_launcher_serves_and_declines(toy):
    x, y = rng.standard_normal(9), rng.standard_normal(9)
    for _ in range(PROMOTE_AFTER + 2):
        r = axpy(0.5, x, y, backend="toy")
    np.testing.assert_allclose(r, 0.5 * x + y)
    assert len(toy.plans) == 1 and toy.fast_calls >= 1 and axpy._fast is not None
    out = np.empty(9)
    for _ in range(PROMOTE_AFTER + 2):
        got = axpy(0.5, x, y, out=out, backend="toy")
    assert got is out and axpy._fast_out is not None
    np.testing.assert_allclose(out, 0.5 * x + y)
    fast = toy.fast_calls
    with pytest.raises(ShapeError, match="9 != 4"):         # declined: the normal path's error
        axpy(0.5, x, y[:4], backend="toy")
    assert toy.fast_calls == fast
    np.testing.assert_allclose(axpy(2, x, y, backend="toy"), 2 * x + y)   # another scalar type


def test_kernel_lower_and_source_go_through_the_backend(toy):
    x = np.ones(5)
    assert "for " in str(axpy.lower(1.0, x, x, backend="toy"))
    assert axpy.source(1.0, x, x, backend="toy") == str(axpy.lower(1.0, x, x, backend="toy"))


def test_spec_fields_options_result_wrapper_size_classes_target():
    class Tagged(np.ndarray):
        pass
    seen = []

    def wrapper(kind):
        seen.append(kind)
        return lambda a: a.view(Tagged)
    b = ToyBackend("toy2", options={"unroll": 4}, result_wrapper=wrapper, size_classes=True)
    kd.register_backend("toy2", b)
    try:
        x = rng.standard_normal(6)
        r = axpy(3.0, x, x, backend="toy2")
        assert type(r) is Tagged and seen == [np.ndarray]
        np.testing.assert_allclose(np.asarray(r), 4 * x)
        assert b.requests[-1].options == {"unroll": 4}
        assert "toy2" in registry.size_classed
        axpy(3.0, np.ones(100), np.ones(100), backend="toy2")    # another size class
        assert b.compiles == 2 and b.requests[-1].signature.size_classes
        assert registry.backend_spec("toy2") is b.spec and registry.runs_on_host("toy2")
    finally:
        registry.unregister_backend("toy2")
    assert "toy2" not in registry.size_classed


def test_a_backend_running_another_targets_schedules(toy):
    @kd.kernel
    def double(x):
        return 2 * x
    calls = []
    double.schedule("cpu")(lambda s: calls.append("cpu"))
    double.schedule("toy")(lambda s: calls.append("toy"))
    other = ToyBackend("toy3", target="cpu")          # runs the cpu schedules
    kd.register_backend("toy3", other)
    try:
        x = np.arange(4.0)
        double(x, backend="toy")
        double(x, backend="toy3")
        assert calls == ["toy", "cpu"]
    finally:
        registry.unregister_backend("toy3")


# ----------------------------------------------------------------- broken backends
class _Methods:
    def schedule(self, sched, hints): pass
    def lower(self, request): return request.lower()
    def compile(self, request): return lambda i, o, s, stream=None: None   # no `fast`
    def source(self, request): return ""
    def accepts(self, a): return True
    def empty(self, shape, dtype, like=None): return np.empty(shape)


@pytest.mark.parametrize("obj,message", [
    (object(), r"no `spec` \(a kdsl.backends.spec.BackendSpec\); missing methods schedule, "
               r"lower, compile, source, accepts, empty"),
    (type("NoSpec", (_Methods,), {})(), r"no `spec`"),
    (type("DictSpec", (_Methods,), {"spec": {"name": "x"}})(), r"`spec` is a dict"),
    (type("Half", (), {"spec": BackendSpec("half"), "compile": lambda s, r: None})(),
     r"missing methods schedule, lower, source, accepts, empty"),
    (type("Old", (_Methods,), {"spec": BackendSpec("old"), "device": "cuda"})(),
     r"its `device` \('cuda'\) is not its spec's \('host'\)"),
])
def test_contract_breaks_are_named(obj, message):
    kd.register_backend("broken", obj)
    try:
        with pytest.raises(BackendUnavailable, match=message) as ei:
            axpy(1.0, np.ones(2), np.ones(2), backend="broken")
        assert "'broken'" in str(ei.value) and "docs/backends.md" in str(ei.value)
    finally:
        registry.unregister_backend("broken")


def test_compiled_object_without_fast_is_named():
    kd.register_backend("nofast", type("NoFast", (_Methods,), {"spec": BackendSpec("nofast")}))
    try:
        with pytest.raises(BackendUnavailable, match=r"'nofast': compile\(\) returned a function, "
                                                     r"which is not a compiled kernel: it has no "
                                                     r"`fast` member"):
            axpy(1.0, np.ones(2), np.ones(2), backend="nofast")
    finally:
        registry.unregister_backend("nofast")


@pytest.mark.parametrize("fields,message", [
    (dict(name=""), "name must be a non-empty string"),
    (dict(name="x", device="tpu"), "device must be one of cuda, host, got 'tpu'"),
    (dict(name="x", size_classes=1), "size_classes must be a bool"),
    (dict(name="x", pipeline="SEQUENTIAL"), "pipeline must be None or callable"),
    (dict(name="x", contract=99), "written for backend contract 99"),
])
def test_invalid_specs_fail_where_they_are_made(fields, message):
    with pytest.raises(BackendUnavailable, match=message):
        BackendSpec(**fields)


def test_spec_is_frozen_and_options_read_only():
    s = BackendSpec("x", options={"a": 1})
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.name = "y"
    with pytest.raises(TypeError):
        s.options["a"] = 2
    assert s.schedule_target == "x" and BackendSpec("y", target="cuda").schedule_target == "cuda"
    assert {s: 1}[s] == 1                  # hashable (by identity) though options is a mapping
    assert check_backend("toy", ToyBackend(), "test") is not None


def test_builtin_backends_keep_the_contract():
    for name in ("numpy", "interp", "interp-cuda"):
        b = kd.get_backend(name)
        assert isinstance(b.spec, BackendSpec) and check_backend(name, b, "built in") is b
    from kdsl.gpu.pipeline import PIPELINE
    from kdsl.passes.pipeline import SEQUENTIAL
    assert kd.get_backend("interp-cuda").spec.pipeline() is PIPELINE
    assert kd.get_backend("interp").spec.pipeline() is SEQUENTIAL


def test_a_fast_launch_build_that_breaks_the_contract_keeps_the_normal_path(toy):
    from toy_backend import ToyCompiled
    from kdsl.backends.spec import FastLaunch

    class Sloppy(ToyCompiled):
        def __init__(self, func, backend):
            super().__init__(func, backend)
            self.fast = FastLaunch(lambda plan: (lambda *args: NotImplemented))  # no FastLauncher
    toy.compile = lambda request: Sloppy(toy.lower(request), toy)
    x = rng.standard_normal(3)
    for _ in range(PROMOTE_AFTER + 2):
        np.testing.assert_allclose(axpy(1.5, x, x, backend="toy"), 2.5 * x)
    # no fast launcher of this generation was promoted, none served a call
    assert axpy._fast is None or axpy._fast[1] != registry.generation
    assert toy.fast_calls == 0
    gen = registry.generation
    (slot,) = [axpy._slots[f] for k, f in axpy._cache.items() if k[:2] == ("toy", gen)]
    assert isinstance(slot.error, TypeError) and "not a kdsl.backends.spec.FastLauncher" in str(slot.error)
