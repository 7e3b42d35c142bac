"""What the finding tests share: strict xfail markers and kernels made from plain functions."""
import types

import pytest

import kdsl as kd


def xf(fid, why):
    """``xfail(strict=True)`` for an open finding: a fix turns it into a failure to notice."""
    return pytest.mark.xfail(strict=True, reason=f"{fid}: {why}")


def fresh(fn):
    """A copy of ``fn``: kd.schedule records hints on the function it decorates."""
    return types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)


def kern(fn, target=None, sched=None, **hints):
    """A kernel of ``fn`` with ``hints`` and the explicit schedule ``sched`` for ``target``."""
    fn = fresh(fn)
    k = kd.kernel(kd.schedule(target, **hints)(fn) if hints else fn)
    if sched is not None:
        k.schedule(target)(sched)
    return k
