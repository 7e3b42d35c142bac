"""The end-to-end SPEC examples and seed-000 schedules of tests/e2e, on the cpu backend."""
import numpy as np
import pytest

import kdsl as kd

from conftest import load_e2e

E = load_e2e()


@pytest.fixture
def rng():
    return np.random.default_rng(7)


@pytest.mark.parametrize("shape", E.SHAPES)
def test_rowsum_both_styles(shape, rng):
    a = rng.standard_normal(shape).astype(np.float32)
    for _, v in E.views(a):
        ref = v.astype(np.float64).sum(axis=1)
        np.testing.assert_allclose(E.rowsum(v, backend="cpu"), ref, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(E.rowsum_te(v, backend="cpu"), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(2, 2), (3, 3), (4, 7), (10, 9)])
def test_conv3x3(shape, rng):
    I, F = rng.standard_normal(shape), rng.standard_normal((3, 3))
    np.testing.assert_allclose(E.conv3x3(I, F, backend="cpu"), E.ref_conv(I, F), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("shape", E.SHAPES)
def test_rowprod(shape, rng):
    a = rng.uniform(0.5, 1.5, shape)
    np.testing.assert_allclose(E.rowprod(a, backend="cpu"), a.prod(axis=1), rtol=1e-10)


@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (8, 33)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax(shape, dtype, rng):
    x = (rng.standard_normal(shape) * 4).astype(dtype)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    out = E.softmax(x, backend="cpu")
    assert out.dtype == dtype
    np.testing.assert_allclose(out, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shapes", [((5,), (5,)), ((4, 3), (3,)), ((3,), (3, 6)), ((4, 3), (3, 6)),
                                    ((2, 4, 3), (3, 5)), ((2, 1, 4, 3), (3, 3, 2)), ((0, 3), (3, 2)),
                                    ((3, 0), (0, 2))])
def test_matmul(shapes, rng):
    a = rng.standard_normal(shapes[0]).astype(np.float32)
    b = rng.standard_normal(shapes[1]).astype(np.float32)
    out = E.matmul(a, b, backend="cpu")
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert out.shape == ref.shape
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("sched", E.SEED_SCHEDULES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("shape", E.SHAPES)
def test_seed000_schedules(sched, shape, rng):
    k = kd.kernel(E._rowsum_te)
    k.schedule("cpu")(sched)
    a = rng.standard_normal(shape).astype(np.float32)
    for _, v in E.views(a):
        np.testing.assert_allclose(k(v, backend="cpu"), v.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("sched", E.SEED_SCHEDULES, ids=lambda f: f.__name__)
def test_seed000_product_reducer_schedules(sched, rng):
    k = kd.kernel(E._rowprod_te)
    k.schedule("cpu")(sched)
    a = rng.uniform(0.5, 1.5, (37, 21))
    np.testing.assert_allclose(k(a, backend="cpu"), a.prod(1), rtol=1e-10)


def test_seed000_conv_tile_unroll_schedule(rng):
    def sched(s):
        O = s.outputs[0]
        O.tile(O.axes[0], O.axes[1], 4, 4)
        O.unroll(O.reduce_axes[1])
    k = kd.kernel(E.conv3x3.fn if hasattr(E.conv3x3, "fn") else E.conv3x3.__wrapped__)
    k.schedule("cpu")(sched)
    assert "llvm.loop.unroll" in k.source(kd.TensorSpec(("n", "m"), kd.float64),
                                          kd.TensorSpec((3, 3), kd.float64), backend="cpu")
    for shape in [(2, 2), (6, 6), (11, 9)]:
        I, F = rng.standard_normal(shape), rng.standard_normal((3, 3))
        np.testing.assert_allclose(k(I, F, backend="cpu"), E.ref_conv(I, F), rtol=1e-10, atol=1e-12)
