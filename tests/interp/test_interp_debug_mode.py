"""``backend="interp"``: the loop-IR interpreter as a user-visible debug mode (issue 8, item 7)."""
import os
import subprocess
import sys
import textwrap

import numpy as np

import kdsl as kd
from kdsl.backends import registry

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@kd.kernel
def _rowsum(A):
    return A.sum(axis=1)


def test_interp_is_a_builtin_backend_listed_without_registration():
    assert "interp" in kd.backends() and "interp" in registry._BUILTIN
    # with nothing registered at run time (as a user's process starts), it still resolves
    saved = registry._registered.pop("interp", None)
    try:
        registry.refresh()
        assert "interp" in kd.backends()
        assert type(kd.get_backend("interp")).__name__ == "InterpreterBackend"
    finally:
        if saved is not None:
            registry._registered["interp"] = saved
        registry.refresh()


def test_usable_per_call_per_block_and_from_the_environment(rng, monkeypatch):
    A = rng.standard_normal((5, 7)).astype(np.float32)[:, ::2]     # a strided view
    want = A.astype(np.float64).sum(axis=1)
    np.testing.assert_allclose(_rowsum(A, backend="interp"), want, rtol=1e-5)
    with kd.use_backend("interp"):
        np.testing.assert_allclose(_rowsum(A), want, rtol=1e-5)
    monkeypatch.setenv("KDSL_BACKEND", "interp")
    np.testing.assert_allclose(_rowsum(A), want, rtol=1e-5)
    # the Python it runs is the schedule's loop nest
    assert "for i0 in range(" in _rowsum.source(A, backend="interp")


def test_step_runs_one_call_under_pdb_at_the_generated_loops():
    """A user session: step(kernel, x) stops in the generated loops, lists them, steps, goes on."""
    script = textwrap.dedent("""
        import numpy as np
        import kdsl as kd
        from kdsl.backends.interpreter import step

        @kd.kernel
        def rowsum(A):
            return A.sum(axis=1)

        print("RESULT", step(rowsum, np.ones((3, 4), np.float32)).tolist())
        print("AGAIN", rowsum(np.ones((2, 2), np.float32), backend="interp").tolist())
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [ROOT] + [p for p in [os.environ.get("PYTHONPATH")] if p])}
    env.pop("KDSL_BACKEND", None)
    r = subprocess.run([sys.executable, "-c", script], input="list\nnext\nnext\nnext\ncontinue\n",
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "(Pdb)" in r.stdout
    assert "for i0 in range(" in r.stdout            # pdb lists the generated loop nest
    assert "RESULT [4.0, 4.0, 4.0]" in r.stdout
    assert "AGAIN [2.0, 2.0]" in r.stdout            # later calls run without stopping
    assert r.stdout.count("(Pdb)") == 5


def test_tracebacks_show_the_generated_line():
    import traceback

    from kdsl.backends.interpreter import program

    func = _rowsum.lower(np.ones((2, 3), np.float32), backend="interp")
    _, fn = program(func)
    try:
        fn([np.ones((2, 3), np.float32)], [None], [])     # None output: fails inside the loops
    except Exception as e:  # noqa: BLE001 - any error raised by the generated code
        text = "".join(traceback.format_exception(e))
    assert "kdsl interp" in text and "sum_" in text.split("kdsl interp")[-1]
