"""Issues 24 and 25 on the device: the race reproducers of tests/gpu_core/test_issue24_races.py
(their ``GPU`` backend set to "cuda"; the tests that switch a fix off to see the SIMT race
report stay on interp-cuda) and the new numpy surface of tests/frontend (ufuncs, bit
operators, bitcasts, float->int casts, Philox bits) with the default cuda schedules."""
import numpy as np
import pytest

from cuda_support import load_suite

pytestmark = pytest.mark.cuda

R = load_suite("gpu_core/test_issue24_races.py", "_kdsl_cuda_issue24_races", GPU="cuda")
for _name, _fn in list(vars(R).items()):
    if _name.startswith("test_") and "without_the_fix" not in _name:
        globals()[_name] = _fn

U = load_suite("frontend/test_ufuncs.py", "_kdsl_cuda_ufuncs")
BR = load_suite("frontend/test_bits_random.py", "_kdsl_cuda_bits_random")


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16], ids=lambda d: d.__name__)
def test_float_ufuncs_match_numpy(dtype, rng):
    U.test_float_ufuncs_match_numpy("cuda", dtype, rng)


@pytest.mark.parametrize("dtype", U.INT_TYPES, ids=lambda d: d.__name__)
def test_integer_ufuncs_match_numpy(dtype, rng):
    U.test_integer_ufuncs_match_numpy("cuda", dtype, rng)


def test_bit_operators(rng):
    U.test_bit_operators("cuda", rng)


def test_bfloat16():
    U.test_bfloat16("cuda")


def test_frexp_and_ldexp_are_exact(rng):
    U.test_frexp_and_ldexp_are_exact("cuda", rng)


def test_view_is_a_bitcast(rng):
    BR.test_view_is_a_bitcast("cuda", rng)


@pytest.mark.parametrize("src", [np.float64, np.float32, np.float16], ids=lambda d: d.__name__)
def test_astype_of_special_floats_is_numpys(src):
    BR.test_astype_of_special_floats_is_numpys("cuda", src)


def test_random_bits_equal_the_reference_everywhere(rng):
    BR.test_random_bits_equal_the_reference_everywhere("cuda", rng)


# ----------------------------------------------------------------- tuple reducers (issue 25 item 3)
T = load_suite("frontend/test_tuple_reduce.py", "_kdsl_cuda_tuple_reduce", GPU="cuda")
test_tuple_gpu_schedules = T.test_gpu_schedules


@pytest.mark.parametrize("shape", T.SHAPES)
def test_tuple_pairs_and_triples_on_the_default_schedules(shape, rng):
    T.test_argmax_pair("cuda", shape, rng)
    T.test_logsumexp_pair("cuda", shape, rng)
    T.test_welford_triple("cuda", shape, rng)


@pytest.mark.parametrize("shape", [(37, 5), (1, 1), (0, 3), (70, 9)])
def test_tuple_column_reduction_default(shape, rng):
    T.test_column_reduction_default("cuda", shape, rng)


# ----------------------------------------------------------------- scans (issue 25 item 4)
S = load_suite("frontend/test_scan.py", "_kdsl_cuda_scan")


@pytest.mark.parametrize("n", [0, 1, 7])
def test_scan_triangular_sums_and_trisolv(n, rng):
    S.test_triangular_sums("cuda", n, rng)
    S.test_trisolv("cuda", n, rng)


@pytest.mark.parametrize("shape", [(0, 3), (1, 4), (7, 5), (6, 0)])
def test_scan_cumsum_both_axes(shape, rng):
    S.test_cumsum_both_axes("cuda", shape, rng)


def test_scan_dtypes_strides_recurrences(rng):
    S.test_cumulative_ops_dtypes_and_strides("cuda", rng)
    for shape in [(3, 1), (5, 9)]:
        S.test_deriche_causal_recurrence("cuda", shape, rng)
    S.test_neighbour_scan("cuda", rng)
