"""exp in explicit vector code (kdsl_cpu/codegen/vector.py with vecmath's exp built on a
vector type): a vectorized loop of constant width whose body calls exp, edge tiles (masked)
included, against numpy; the same ulp bound and special values as the scalar path
(test_cpu_vecmath.py)."""
import numpy as np
import pytest

import kdsl as kd

from test_cpu_vecmath import MAX_ULP, _inputs, _reference, _ulp_distance


def _vexp(x, width):
    @kd.kernel
    def vexp(a):
        return kd.exp(a - 1.0) * 2.0

    @vexp.schedule("cpu")
    def _(s):
        h = s.outputs[0]
        _, xi = h.split(h.axes[0], factor=width)
        h.vectorize(xi)
    with np.errstate(all="ignore"):
        return vexp(x, backend="cpu"), vexp


@pytest.mark.parametrize("dtype,width", [(np.float32, 16), (np.float64, 8)],
                         ids=["float32", "float64"])
def test_vector_exp_ulp_and_specials(dtype, width):
    x = _inputs(dtype)
    x = x[: len(x) - len(x) % width + 5]            # a partial last vector: the masked tile
    x[-5:] = np.array([0.0, -np.inf, np.inf, np.nan, 1.0], dtype)   # specials in the edge
    got, k = _vexp(x, width)
    with np.errstate(all="ignore"):
        want = (_reference(np.exp, (x.astype(np.float64) - 1.0).astype(dtype), dtype)
                * dtype(2.0))
    d = _ulp_distance(got, want)
    j = int(np.argmax(d))
    assert d[j] <= MAX_ULP[dtype] + 1, f"exp({x[j]!r} - 1) * 2 = {got[j]!r}, want {want[j]!r}"
    # the loop is vector code with a vector exp (no scalar call per lane)
    src = k.source(x, backend="cpu")
    suffix = f"v{width}f32" if dtype is np.float32 else f"v{width}f64"
    assert f"kdsl.exp.{suffix}" in src
