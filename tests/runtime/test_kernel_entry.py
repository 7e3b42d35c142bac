"""A kernel's call entry (functools.partial's C entry forwarding to ``Kernel._call``): the
kernel still behaves as the plain object it was -- a class attribute, pickled by reference,
its function's signature and name, weak references, keyword calls -- and keeps the
vectorcall entry that is the point of it (CPython >= 3.12)."""
import gc
import inspect
import pickle
import sys
import warnings
import weakref

import numpy as np
import pytest

import kdsl as kd
from kdsl.errors import ArgumentError


@kd.kernel
def scaled_add(a, b, k=2.0):
    return a + b * k


def test_a_kernel_as_a_class_attribute_is_the_kernel():
    class Model:
        add = scaled_add
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # Python 3.13 warns when a partial would bind
        assert Model().add is scaled_add and Model.add is scaled_add
    rng = np.random.default_rng()
    a, b = rng.random(37), rng.random(37)
    np.testing.assert_allclose(Model().add(a, b, backend="numpy"), a + b * 2.0)


def test_pickle_signature_repr_weakref():
    assert pickle.loads(pickle.dumps(scaled_add)) is scaled_add
    assert inspect.signature(scaled_add) == inspect.signature(scaled_add.fn)
    assert scaled_add.__name__ == "scaled_add" and scaled_add.__wrapped__ is scaled_add.fn
    text = repr(scaled_add)
    assert text.startswith("<kdsl.kernel ") and "scaled_add(a, b, k)" in text
    assert weakref.ref(scaled_add)() is scaled_add
    assert isinstance(scaled_add, kd.Kernel)


def test_keywords_positions_and_out_reach_the_call():
    rng = np.random.default_rng()
    n = int(rng.integers(1, 50))
    a, b = rng.random(n), rng.random(n)
    want = a + b * 3.0
    np.testing.assert_allclose(scaled_add(a, b, 3.0, backend="numpy"), want)
    np.testing.assert_allclose(scaled_add(b=b, a=a, k=3.0, backend="numpy"), want)
    out = np.full(n, np.nan)
    assert scaled_add(a, b, k=3.0, out=out, backend="numpy") is out
    np.testing.assert_allclose(out, want)
    with pytest.raises(ArgumentError, match="missing a required argument"):
        scaled_add(a, backend="numpy")


def test_a_dropped_kernel_is_freed():
    """The entry is a cycle (the kernel holds its bound ``_call``): the collector frees it."""
    @kd.kernel
    def twice(a):
        return a * 2
    rng = np.random.default_rng()
    a = rng.random(int(rng.integers(1, 20)))
    np.testing.assert_allclose(twice(a, backend="numpy"), a * 2)
    ref = weakref.ref(twice)
    del twice
    gc.collect()
    assert ref() is None


@pytest.mark.skipif(sys.version_info < (3, 12), reason="heap types keep vectorcall from 3.12")
def test_the_entry_is_vectorcall():
    """Defining ``__call__`` on Kernel would drop back to CPython's generic call slot (a
    tuple and a keyword dict built per call): the class must not define one."""
    have_vectorcall = 1 << 11          # Py_TPFLAGS_HAVE_VECTORCALL
    assert type(scaled_add).__flags__ & have_vectorcall
    assert "__call__" not in vars(type(scaled_add))
