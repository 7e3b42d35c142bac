"""CI runs exactly the README's second command: ``.ci/run`` ends with the same command line as
the second line of the README's first ```bash block (install the test extras and both
backends, run the whole suite)."""
import os
import re

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _readme_commands():
    with open(os.path.join(ROOT, "README.md")) as f:
        block = re.search(r"```bash\n(.*?)```", f.read(), re.S)
    assert block, "README.md has no ```bash block"
    return [line.strip() for line in block.group(1).splitlines() if line.strip()]


def _ci_command():
    with open(os.path.join(ROOT, ".ci", "run")) as f:
        lines = [line.strip() for line in f if line.strip() and not line.lstrip().startswith("#")]
    return lines[-1]


def test_ci_runs_the_readme_test_command():
    cmds = _readme_commands()
    assert len(cmds) >= 2, cmds
    assert _ci_command() == cmds[1]


def test_readme_test_command_runs_the_whole_suite():
    cmd = _readme_commands()[1]
    assert ".[test]" in cmd and "./kdsl_cpu" in cmd and "./kdsl_cuda" in cmd, cmd
    assert re.search(r"python3 -m pytest .*\btests$", cmd), cmd


def test_test_extra_brings_the_plugins_the_command_uses():
    """`-n 2` needs pytest-xdist: the `test` extra the command installs must bring it."""
    import tomllib
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        extra = tomllib.load(f)["project"]["optional-dependencies"]["test"]
    names = {re.split(r"[<>=!~\[; ]", req, maxsplit=1)[0].lower() for req in extra}
    assert "pytest" in names, extra
    if re.search(r"\s-n\s", _readme_commands()[1]):
        assert "pytest-xdist" in names, extra
