"""Backend packages import as themselves from anywhere (issue: a ``kdsl_cpu/kdsl_cpu/`` layout
made ``import kdsl_cpu`` from the repository root find the outer folder as a namespace package).

``kdsl_cpu/`` is the package itself (its pyproject maps the package to ``.``), so the folder at
the repository root is the same regular package that gets installed.  Checked here with an
editable install (what contributors use) and a regular one, run from the repository root, from
inside the backend folder and from elsewhere.
"""
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BACKENDS = [d for d in ("kdsl_cpu", "kdsl_cuda") if os.path.isdir(os.path.join(ROOT, d))]

PROBE = ("import importlib, sys; m = importlib.import_module(sys.argv[1]); "
         "print(m.__file__); print(type(m.backend).__name__)")


@pytest.mark.parametrize("pkg", BACKENDS)
def test_backend_folder_is_a_regular_package(pkg):
    assert os.path.isfile(os.path.join(ROOT, pkg, "__init__.py"))
    assert not os.path.isdir(os.path.join(ROOT, pkg, pkg)), "no nested package folder"


def _isolated_venv(tmp_path):
    """A venv that sees this interpreter's third-party packages (numpy, llvmlite ...) but no kdsl."""
    import site
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "v")], check=True, timeout=120)
    py = str(tmp_path / "v" / "bin" / "python")
    deps = tmp_path / "deps"
    deps.mkdir()
    for sp in site.getsitepackages():
        if not os.path.isdir(sp):
            continue
        for name in os.listdir(sp):
            low = name.lower()
            if (low.startswith(("kdsl", "__editable__", "_distutils", "distutils-precedence"))
                    or low.endswith(".pth") or (deps / name).exists()):
                continue
            os.symlink(os.path.join(sp, name), deps / name)
    venv_sp = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    # appended after the venv's own site-packages, so setuptools/pip of the venv win
    with open(os.path.join(venv_sp, "zz_host_deps.pth"), "w") as f:
        f.write(str(deps) + "\n")
    return py


def _copy_repo(dst):
    ign = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    shutil.copy(os.path.join(ROOT, "pyproject.toml"), dst)
    for d in ("kdsl",) + tuple(BACKENDS):
        shutil.copytree(os.path.join(ROOT, d), dst / d, ignore=ign)


@pytest.mark.parametrize("editable", [True, False], ids=["editable", "regular"])
def test_imports_from_anywhere(tmp_path, editable):
    if not BACKENDS:
        pytest.skip("no backend package folder in this checkout")
    py = _isolated_venv(tmp_path)
    repo = tmp_path / "repo"
    repo.mkdir()
    _copy_repo(repo)
    targets = []
    for t in ["."] + [f"./{b}" for b in BACKENDS]:
        targets += (["-e", t] if editable else [t])
    offline = subprocess.run([py, "-c", "import wheel"], capture_output=True).returncode == 0
    # setuptools < 70 builds wheels only with the 'wheel' package; without it, let pip fetch a
    # build backend (CI machines reach PyPI, which the README's own install commands need too)
    isolation = ["--no-build-isolation", "--no-index"] if offline else []
    r = subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", *isolation, *targets],
                       cwd=repo, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "KDSL_BACKEND")}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for pkg in BACKENDS:
        for cwd in (repo, repo / pkg, elsewhere):
            r = subprocess.run([py, "-c", PROBE, pkg], cwd=cwd, env=env, capture_output=True,
                               text=True, timeout=300)
            assert r.returncode == 0, f"import {pkg} from {cwd}: {r.stdout}{r.stderr}"
            path, kind = r.stdout.split()
            assert kind.endswith("Backend"), r.stdout
            if editable or cwd == repo:
                assert path.startswith(str(repo)), (cwd, path)
    # and the backend runs a kernel, chosen through its entry point, from the repository root
    code = ("import numpy as np, kdsl as kd; "
            "print(kd.kernel(lambda a: a + 1)(np.arange(3.0), backend=%r)[2])")
    for pkg in BACKENDS:
        name = pkg.split("_", 1)[1]
        if name == "cuda":
            continue   # needs a device to run; importing is what this test is about
        r = subprocess.run([py, "-c", code % name], cwd=repo, env=env, capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0 and r.stdout.strip() == "3.0", r.stdout + r.stderr
