"""Schedule and call-time errors: the message names what exists, the location is the user's
line, and the traceback ends in user code (never inside kdsl)."""
import os
import traceback

import numpy as np
import pytest

import kdsl as kd

KDSL_DIR = os.path.dirname(kd.__file__)


def _last_frame(exc):
    return traceback.extract_tb(exc.__traceback__)[-1]


def _kdsl_frames(exc):
    return [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith(KDSL_DIR)]


def _check_user_location(exc, line_text, ends_in_user_code=True):
    """The message shows the user's file and line; the one kdsl frame left is the public entry
    point that re-raised it, and when the mistake is in user code, the traceback ends there."""
    assert __file__ in str(exc), str(exc)
    assert line_text in str(exc), str(exc)
    assert len(_kdsl_frames(exc)) == 1, _kdsl_frames(exc)
    if ends_in_user_code:
        assert _last_frame(exc).filename == __file__, _last_frame(exc)


def _rowsum(A):
    return A.sum(axis=1)


def test_primitive_misuse_in_schedule_function():
    k = kd.kernel(_rowsum)

    def sched(s):
        B = s["sum"]
        B.vectorize(B.reduce_axes[0])  # the bad line
    k.schedule("numpy")(sched)
    with pytest.raises(kd.ScheduleError) as ei:
        k(np.ones((2, 3)), backend="numpy")
    assert "r0 is a reduction axis of stage sum" in str(ei.value) and "rfactor" in str(ei.value)
    _check_user_location(ei.value, "B.vectorize(B.reduce_axes[0])  # the bad line")


def test_unknown_stage_lists_stages():
    k = kd.kernel(_rowsum)
    k.schedule("numpy")(lambda s: s["B"])
    with pytest.raises(kd.ScheduleError, match="there is no stage 'B'; stages: sum") as ei:
        k(np.ones((2, 3)), backend="numpy")
    _check_user_location(ei.value, 'k.schedule("numpy")(lambda s: s["B"])')


def test_hint_naming_missing_axis_points_at_the_decorator():
    @kd.kernel
    @kd.schedule(None, tile={"i9": 4})
    def tiled(A):
        return A.sum(axis=1)
    with pytest.raises(kd.ScheduleError, match="tile names axis 'i9', but stage sum has axes i0 and reduction axes r0") as ei:
        tiled(np.ones((2, 3)), backend="numpy")
    assert '@kd.schedule(None, tile={"i9": 4})' in str(ei.value)


def test_unknown_hint_raises_at_decoration():
    with pytest.raises(kd.ScheduleError, match="the hints are: tile, parallel") as ei:
        kd.schedule("cpu", threadz=4)
    _check_user_location(ei.value, 'kd.schedule("cpu", threadz=4)', ends_in_user_code=False)


def _add(A, B):
    return A + B


@pytest.mark.parametrize("args, exc, text", [
    ((np.ones(3),), kd.ArgumentError, "argument"),
    ((np.ones(3), np.ones(4)), kd.ShapeError, "must be equal"),
    ((np.ones(3), "x"), kd.ArgumentError, "B"),
    ((np.ones(3, np.complex64), np.ones(3)), kd.KernelError, "complex64"),
])
def test_call_errors_point_at_the_call(args, exc, text):
    k = kd.kernel(_add)
    with pytest.raises(exc) as ei:
        k(*args, backend="numpy")  # the call line
    assert text in str(ei.value), str(ei.value)
    where = "return A + B" if exc is kd.ShapeError else 'k(*args, backend="numpy")  # the call line'
    _check_user_location(ei.value, where, ends_in_user_code=False)
