"""Convolutions (kdsl_cuda/schedules/conv.py, conv_tc.py) on a device (mark ``cuda``; skipped
without one): ResNet-like layers and odd sizes, float32 on CUDA cores and float16/bfloat16 on
tensor cores, 3x3, 1x1, stride 2 and padded, against numpy in float64.

    python3 -m pytest -q -m cuda tests/cuda_schedules/test_conv_device.py
"""
import numpy as np
import pytest

import kdsl as kd
from test_conv_default import (check, conv1, conv1_16, conv3, conv3_16, conv3_f32, conv3_s2,
                               conv3_where, half, ref, tc_tol)

pytestmark = pytest.mark.cuda     # (tests/conftest.py skips it where there is no device)


@pytest.mark.parametrize("xs,ws", [((4, 64, 58, 58), (64, 64, 3, 3)), ((2, 128, 30, 30), (128, 128, 3, 3)),
                                   ((3, 35, 17, 23), (37, 35, 3, 3)), ((1, 1, 3, 3), (1, 1, 3, 3)),
                                   ((2, 512, 9, 9), (512, 512, 3, 3))])
def test_float32_3x3(xs, ws):
    rng = np.random.default_rng(0)
    X = rng.standard_normal(xs).astype(np.float32)
    W = rng.standard_normal(ws).astype(np.float32)
    check(kd.kernel(conv3)(X, W, backend="cuda"), ref(X, W), 1e-5)


def test_float32_other_forms():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((2, 64, 29, 31)).astype(np.float32)
    W3 = rng.standard_normal((48, 64, 3, 3)).astype(np.float32)
    W1 = rng.standard_normal((80, 64)).astype(np.float32)
    check(kd.kernel(conv1)(X, W1, backend="cuda"), ref(X, W1), 1e-5)
    check(kd.kernel(conv3_s2)(X, W3, backend="cuda"), ref(X, W3, stride=2), 1e-5)
    check(kd.kernel(conv3_where)(X, W3, backend="cuda"), ref(X, W3, pad=1), 1e-5)


@pytest.mark.parametrize("fn,xs,ws", [(conv3_16, (4, 64, 58, 58), (64, 64, 3, 3)),
                                      (conv3_f32, (2, 256, 16, 16), (256, 256, 3, 3)),
                                      (conv3_16, (3, 35, 17, 23), (37, 35, 3, 3)),
                                      (conv3_16, (2, 512, 9, 9), (512, 512, 3, 3))])
def test_float16_3x3_tensor_cores(fn, xs, ws):
    rng = np.random.default_rng(2)
    X, W = half(rng, xs, "float16"), half(rng, ws, "float16")
    W = (W / np.sqrt(W[0].size)).astype(np.float16)
    got = kd.kernel(fn)(X, W, backend="cuda")
    check(got, ref(X, W), tc_tol(X, W, "float16" if fn is conv3_16 else "float32"))


@pytest.mark.parametrize("xs,ws", [((4, 256, 56, 56), (64, 256)), ((2, 1024, 14, 14), (256, 1024)),
                                   ((3, 20, 7, 33), (17, 20))])
def test_float16_1x1_tensor_cores(xs, ws):
    rng = np.random.default_rng(3)
    X, W = half(rng, xs, "float16"), half(rng, ws, "float16")
    W = (W / np.sqrt(W.shape[1])).astype(np.float16)
    check(kd.kernel(conv1_16)(X, W, backend="cuda"), ref(X, W), tc_tol(X, W, "float16"))


def test_bfloat16_3x3():
    pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(4)
    X, W = half(rng, (2, 48, 20, 20), "bfloat16"), half(rng, (64, 48, 3, 3), "bfloat16")
    got = kd.kernel(conv3_16)(X, W, backend="cuda")
    check(np.asarray(got, np.float64), ref(X, W), tc_tol(X, W, "bfloat16") * 10)
