"""Backend registry: discovery, registration, errors, third-party entry points."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kdsl as kd
from kdsl.backends import registry
from kdsl.backends.numpy_backend import NumpyBackend
from kdsl.backends.spec import BackendSpec
from kdsl.errors import BackendNotInstalled, BackendUnavailable

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TESTS = os.path.join(ROOT, "tests")


def test_numpy_is_always_there():
    assert "numpy" in kd.backends()
    b = kd.get_backend("numpy")
    assert isinstance(b, NumpyBackend) and kd.get_backend("numpy") is b


@pytest.mark.parametrize("name,text", [
    ("cpu", "pip install ./kdsl_cpu (distribution kdsl-cpu)"),
    ("cuda", "pip install ./kdsl_cuda (distribution kdsl-cuda)"),
    ("tpu9", "unknown backend 'tpu9'; available backends: "),
])
def test_not_installed_names_the_package(name, text):
    from kdsl.backends import registry
    if name in kd.backends():   # installed here: check the message it would give elsewhere
        err = registry._not_installed(name)
    else:
        with pytest.raises(BackendNotInstalled) as ei:
            kd.get_backend(name)
        err = ei.value
    assert isinstance(err, BackendNotInstalled)
    assert text in str(err) and "numpy" in str(err)


def test_register_object_class_factory_and_shadowing():
    class Mine(NumpyBackend):
        spec = BackendSpec(name="mine")

    try:
        kd.register_backend("mine", Mine)                 # a class
        assert isinstance(kd.get_backend("mine"), Mine) and "mine" in kd.backends()
        kd.register_backend("mine", lambda: Mine())       # a factory
        assert isinstance(kd.get_backend("mine"), Mine)
        obj = Mine()
        kd.register_backend("numpy", obj)                 # shadows the built-in
        assert kd.get_backend("numpy") is obj
    finally:
        registry.unregister_backend("mine")
        registry.unregister_backend("numpy")
    assert type(kd.get_backend("numpy")) is NumpyBackend


def test_not_a_backend_and_failing_factory():
    try:
        kd.register_backend("junk", object())
        with pytest.raises(BackendUnavailable, match="no `spec`.*missing methods schedule, "
                                                     "lower, compile"):
            kd.get_backend("junk")

        def boom():
            raise OSError("libcuda.so.1: cannot open shared object file")
        kd.register_backend("boom", boom)
        with pytest.raises(BackendUnavailable, match="libcuda") as ei:
            kd.get_backend("boom")
        assert isinstance(ei.value.__cause__, OSError)
        assert kd.get_backend("numpy") is not None        # others unaffected
    finally:
        registry.unregister_backend("junk")
        registry.unregister_backend("boom")


def _fake_site(tmp_path, dist, module, body, entry):
    """A module plus a ``*.dist-info`` with an entry point, as pip would install them."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / f"{module}.py").write_text(textwrap.dedent(body))
    info = site / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[kdsl.backends]\n{entry}\n")
    return site


def _run(site, code):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(site), ROOT, os.path.join(TESTS, "runtime"), os.path.join(TESTS, "backends")]))
    env.pop("KDSL_BACKEND", None)
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


THIRD_PARTY = """
    from kdsl.backends.numpy_backend import NumpyBackend
    from kdsl.backends.spec import BackendSpec

    class ToyBackend(NumpyBackend):
        spec = BackendSpec(name="toy")
        compiled = 0

        def compile(self, request):
            ToyBackend.compiled += 1
            return super().compile(request)

    backend = ToyBackend()
"""

BROKEN = """
    import kdsl_missing_dependency_xyz   # raises ModuleNotFoundError
    backend = None
"""

USE = """
    import sys
    import numpy as np
    import pytest
    import kdsl as kd
    import fakes
    fakes.install(pytest.MonkeyPatch())
    assert "toy_mod" not in sys.modules          # discovery reads metadata only
    print(kd.backends())
    def add(A, B): pass
    add.__fake_graph__ = fakes.g_add
    k = kd.kernel(add)
    a = np.arange(5.0)
    with kd.use_backend("toy"):
        r = k(a, a)
    assert (r == 2 * a).all()
    import toy_mod
    assert toy_mod.ToyBackend.compiled == 1
    try:
        kd.get_backend("broken")
    except kd.BackendUnavailable as e:
        assert isinstance(e.__cause__, ModuleNotFoundError)
        print("UNAVAILABLE:", e)
    assert (k(a, a, backend="numpy") == 2 * a).all()   # others still work
    print("OK")
"""


def test_third_party_entry_point_and_broken_backend(tmp_path):
    site = _fake_site(tmp_path, "kdsl-toy", "toy_mod", THIRD_PARTY, "toy = toy_mod:backend")
    _fake_site(tmp_path, "kdsl-broken", "broken_mod", BROKEN, "broken = broken_mod:backend")
    out = _run(site, USE)
    assert "'broken'" in out and "'toy'" in out and "OK" in out
    line = [ln for ln in out.splitlines() if ln.startswith("UNAVAILABLE")][0]
    assert "kdsl_missing_dependency_xyz" in line and "kdsl-broken" in line


def test_default_falls_back_to_numpy_with_one_warning(tmp_path):
    site = _fake_site(tmp_path, "kdsl-cpu", "fake_cpu", BROKEN, "cpu = fake_cpu:backend")
    out = _run(site, """
        import warnings
        import kdsl as kd
        from kdsl.backends import registry
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            assert registry.default_backend_name([]) == "numpy"
            assert registry.default_backend_name([]) == "numpy"
        assert len(w) == 1, w
        print(w[0].message)
    """)
    assert "installed but unusable" in out and "pip install ./kdsl_cpu" in out
