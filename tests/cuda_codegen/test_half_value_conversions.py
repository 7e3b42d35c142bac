"""float16 -> float conversions by value (``kd_h2fv``: one cvt, shared by NVVM between uses)
where a NaN's payload cannot matter: operands of + - * / (the GPU's result of a NaN operand is
the canonical NaN), unless the other operand is a constant (NVVM may fold ``x * 1``); every
other use keeps the exact ``kd_h2f`` (a cast stored as float32 keeps sign and payload).
The device side: tests/cuda_schedules/test_issue27_device.py."""
import re

import numpy as np

import kdsl as kd
from kdsl_cuda.build import compile_ptx
from kdsl_cuda.codegen.types import value_only


def _src(fn, *args):
    return kd.kernel(fn).source(*args, backend="cuda")


def _body(src):
    return src.split('extern "C" __global__', 1)[1]


X = np.zeros((4, 40), np.float16)
V = np.zeros(40, np.float16)


def test_products_convert_by_value():
    src = _src(lambda x, y: x.astype(np.float32) * y.astype(np.float32) + 1.0, X, X)
    body = _body(src)
    assert "kd_h2fv(" in body and not re.search(r"kd_h2f\(", body)
    assert "cvt.f32.f16" in compile_ptx(src)


def test_float16_arithmetic_converts_by_value():
    body = _body(_src(lambda x, y: x * y - y, X, X))
    assert "kd_h2fv(" in body


def test_exact_where_the_payload_can_show():
    """A cast stored as float32, a negation, a product with a constant, a maximum, a matvec
    row's ``astype`` copy: exact conversions only."""
    for fn in (lambda x: x.astype(np.float32), lambda x: -x.astype(np.float32),
               lambda x: x.astype(np.float32) * 1.0, lambda x, y: np.maximum(x, y)):
        args = (X,) if fn.__code__.co_argcount == 1 else (X, X)
        body = _body(_src(fn, *args))
        assert "kd_h2f(" in body and "kd_h2fv(" not in body, body


def test_value_only_text():
    assert value_only("kd_h2f(a[i])") == "kd_h2fv(a[i])"
    assert value_only("((float)(kd_h2f(a[(i * 3)])))") == "kd_h2fv(a[(i * 3)])"
    assert value_only("((float)(kd_rh((x + y))))") == "kd_h2fv(kd_f2h((x + y)))"
    for t in ("(kd_h2f(a) + kd_h2f(b))", "kd_h2f(a) * kd_h2f(b)", "((float)(x))", "x",
              "((float)(kd_h2f(a)) + 1)", "kd_bf2f(a)"):
        assert value_only(t) == t
