"""Packaging: light import, pyproject contents, and real pip installs (offline)."""
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TESTS = os.path.join(ROOT, "tests")
HEAVY = ("llvmlite", "cuda", "torch", "cupy", "numba", "jax", "kdsl_cpu", "kdsl_cuda", "scipy")


def _py(code, python=sys.executable, pythonpath=ROOT, cwd=None):
    env = dict(os.environ)
    env.pop("KDSL_BACKEND", None)
    if pythonpath is None:
        env.pop("PYTHONPATH", None)
    else:
        env["PYTHONPATH"] = pythonpath
    r = subprocess.run([python, "-c", textwrap.dedent(code)], env=env, cwd=cwd,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_import_is_light():
    out = _py(f"""
        import sys
        import kdsl as kd
        kd.backends(); kd.float32; kd.KernelError; kd.kernel
        heavy = [m for m in sys.modules if m.split(".")[0] in {HEAVY!r}]
        print("HEAVY", heavy)
        print("FRONTEND", "kdsl.frontend.ops" in sys.modules, "kdsl.backends.numpy_backend" in sys.modules)
    """)
    assert "HEAVY []" in out
    assert "FRONTEND False False" in out    # lazy: nothing imported until used


def test_pyproject():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        meta = tomllib.load(f)
    assert meta["build-system"]["build-backend"] == "setuptools.build_meta"
    p = meta["project"]
    assert p["name"] == "kdsl" and p["requires-python"] == ">=3.11"
    assert p["dependencies"] == ["numpy"]
    assert p["entry-points"]["kdsl.backends"] == {
        "numpy": "kdsl.backends.numpy_backend:NumpyBackend",
        "interp": "kdsl.backends.interpreter:InterpreterBackend"}   # the debug mode
    assert "pytest" in p["optional-dependencies"]["test"]
    assert meta["tool"]["setuptools"]["packages"]["find"]["include"] == ["kdsl*"]


TOY_PYPROJECT = """
[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "kdsl-toy"
version = "0.1"
dependencies = ["kdsl"]

[project.entry-points."kdsl.backends"]
toy = "kdsl_toy:backend"

[tool.setuptools]
py-modules = ["kdsl_toy"]
"""

TOY_MODULE = """
from kdsl.backends.numpy_backend import NumpyBackend
from kdsl.backends.spec import BackendSpec


class ToyBackend(NumpyBackend):
    spec = BackendSpec(name="toy")


backend = ToyBackend()
"""


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A venv sharing this interpreter's site-packages, able to build wheels offline."""
    d = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(d / "v")],
                   check=True, timeout=120)
    py = str(d / "v" / "bin" / "python")
    has_wheel = subprocess.run([py, "-c", "import setuptools, sys; from setuptools.command "
                                "import bdist_wheel"], capture_output=True).returncode == 0
    if not has_wheel and subprocess.run([py, "-c", "import wheel"],
                                        capture_output=True).returncode != 0:
        r = subprocess.run([py, "-m", "pip", "install", "-q", "wheel"], capture_output=True,
                           text=True, timeout=120)
        if r.returncode != 0:
            pytest.skip("setuptools here cannot build wheels (no 'wheel' package, none "
                        "installable offline): " + r.stderr[-300:])
    return d, py


def test_install_and_third_party_backend(venv):
    d, py = venv
    src = d / "kdsl_src"
    src.mkdir()
    shutil.copy(os.path.join(ROOT, "pyproject.toml"), src)
    shutil.copytree(os.path.join(ROOT, "kdsl"), src / "kdsl",
                    ignore=shutil.ignore_patterns("__pycache__"))
    toy = d / "toy"
    toy.mkdir()
    (toy / "pyproject.toml").write_text(TOY_PYPROJECT)
    (toy / "kdsl_toy.py").write_text(TOY_MODULE)
    # a plain (not editable) install: the venv's site-packages then precede a kdsl that the system
    # site-packages may hold (CI installs one); setuptools' editable finder would come after it
    for args in ([str(src)], [str(toy)]):
        r = subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                            "--no-index", "--ignore-installed", *args], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
    out = _py(f"""
        import sys
        import numpy as np
        import kdsl as kd
        assert kd.__file__.startswith({str(d)!r}), kd.__file__
        from importlib.metadata import entry_points
        print(sorted(e.name for e in entry_points(group="kdsl.backends")))
        print(kd.backends())
        assert "kdsl_toy" not in sys.modules
        import pytest, fakes
        fakes.install(pytest.MonkeyPatch())
        def add(A, B): pass
        add.__fake_graph__ = fakes.g_add
        a = np.arange(4.0)
        assert (kd.kernel(add)(a, a, backend="toy") == 2 * a).all()
        print(type(kd.get_backend("toy")).__module__)
        def twice_plus(A):
            return A * 2 + 1
        assert (kd.kernel(twice_plus)(a, backend="interp") == 2 * a + 1).all()
        print(type(kd.get_backend("interp")).__module__)
    """, python=py, pythonpath=os.pathsep.join([os.path.join(TESTS, "runtime"),
                                                 os.path.join(TESTS, "backends")]), cwd=str(d))
    lines = out.splitlines()
    # other backends installed on this machine (kdsl-cpu in CI) may be listed as well
    import ast
    eps, names = ast.literal_eval(lines[0]), ast.literal_eval(lines[1])
    assert {"numpy", "interp", "toy"} <= set(eps) and {"numpy", "interp", "toy"} <= set(names)
    assert names == sorted(names) and set(eps) <= set(names)
    assert lines[2] == "kdsl_toy"
    assert lines[3] == "kdsl.backends.interpreter"


@pytest.mark.parametrize("first", ["kdsl", "kdsl.backends.interpreter", "kdsl.backends.registry"])
def test_kd_backends_and_the_backends_package_do_not_shadow_each_other(first):
    # kd.backends() (README) and the kdsl.backends package are one callable object, whatever
    # is imported first; `import kdsl.backends.X as m` used to die on the function
    out = _py(f"""
        import importlib
        importlib.import_module({first!r})
        import kdsl as kd
        import kdsl.backends.registry as reg
        import kdsl.backends.interpreter
        from kdsl.backends import numpy_backend
        assert kd.backends() == reg.backends() and "numpy" in kd.backends()
        assert kd.backends is kdsl.backends and callable(kdsl.backends.interpreter.step)
        print("OK")
    """)
    assert "OK" in out
