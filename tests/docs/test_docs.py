"""The user documentation stays true: every ```python block in README.md and docs/*.md that
starts with an import runs, in a fresh process, with the repository's kdsl."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PAGES = [os.path.join(ROOT, "README.md")] + sorted(
    os.path.join(ROOT, "docs", f) for f in os.listdir(os.path.join(ROOT, "docs")) if f.endswith(".md"))
_BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def _blocks():
    for page in PAGES:
        with open(page) as f:
            text = f.read()
        for k, m in enumerate(_BLOCK.finditer(text)):
            code = m.group(1)
            if code.lstrip().startswith(("import", "from")):
                yield pytest.param(code, id=f"{os.path.basename(page)}-{k}")


@pytest.mark.parametrize("code", list(_blocks()))
def test_docs_example_runs(code, tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT, KDSL_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("KDSL_BACKEND", None)
    r = subprocess.run([sys.executable, "-c", code], cwd=str(tmp_path), env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


def test_no_page_points_outside_the_repository():
    for page in PAGES:
        with open(page) as f:
            assert "../shared" not in f.read(), page
