"""The core suite on the cuda backend (issue 10 item 6), numpy in and out, against numpy in
float64.

- Explicit GPU schedules (cuda_cases.py: the gpu_core and seed schedules on traced kernels)
  and the seed-000 cross-thread schedules of tests/e2e (every view of tests/e2e, 0 and 1
  sizes, the product reducer, the store predicate).  These need only the codegen and the
  runtime.
- The core suite's backend-parametrised tests, re-exported from private copies of their
  modules: the ``executor`` tests of tests/e2e, tests/frontend/test_fe_call_edges.py and
  tests/passes/test_hints_compose.py (``executor`` is "cuda" here, tests/cuda/conftest.py),
  the bounds cases of tests/errors/test_bounds.py, and tests/backends/test_reducers.py and
  tests/frontend/test_fe_numpy_semantics.py with ``BACKENDS = ["cuda"]``.  These kernels have
  no cuda schedule: they need the default cuda schedules (issue 10 item 5).
"""
import numpy as np
import pytest

import kdsl as kd
from cuda_cases import CASES, check
from cuda_support import load_suite
from seed_schedules import bind_rows, cross_thread

pytestmark = pytest.mark.cuda

ON = ["cuda"]
E = load_suite("e2e/test_spec_examples.py", "_kdsl_cuda_e2e")
B = load_suite("errors/test_bounds.py", "_kdsl_cuda_bounds")
EDGES = load_suite("frontend/test_fe_call_edges.py", "_kdsl_cuda_fe_call_edges")
HINTS = load_suite("passes/test_hints_compose.py", "_kdsl_cuda_hints_compose")
RED = load_suite("backends/test_reducers.py", "_kdsl_cuda_reducers", BACKENDS=ON)
SEM = load_suite("frontend/test_fe_numpy_semantics.py", "_kdsl_cuda_fe_numpy_semantics", BACKENDS=ON)


# ----------------------------------------------------------------- explicit GPU schedules
_KERNELS = {}


def _kernel(name):
    """One kernel object per case for the whole module (each specialisation compiled once)."""
    if name not in _KERNELS:
        _KERNELS[name] = CASES[name].kernel()
    return _KERNELS[name]


@pytest.mark.parametrize("name", sorted(CASES))
def test_gpu_schedules(name, rng):
    case, k = CASES[name], _kernel(name)
    for shape in case.shapes:
        args = case.inputs(rng, shape)
        got = k(*args, backend="cuda")
        assert type(got) is np.ndarray
        check(case, got, args)


def _seed_kernel(fn, sched, key):
    if key not in _KERNELS:
        k = kd.kernel(fn)
        k.schedule("cuda")(sched)
        _KERNELS[key] = k
    return _KERNELS[key]


@pytest.mark.parametrize("sched", [bind_rows, cross_thread], ids=lambda f: f.__name__)
@pytest.mark.parametrize("shape", E.SHAPES)
def test_seed000_schedules(sched, shape, rng):
    """tests/e2e's seed-000 test on cuda: the GPU-valid schedules (split_only and rfactor_only
    bind nothing: they are CPU schedules), C/F/strided/negative views."""
    k = _seed_kernel(E._rowsum_te, sched, ("seed", sched.__name__))
    a = rng.standard_normal(shape).astype(np.float32)
    for name, v in E.views(a):
        np.testing.assert_allclose(k(v, backend="cuda"), v.astype(np.float64).sum(1),
                                   rtol=1e-5, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("sched", [bind_rows, cross_thread], ids=lambda f: f.__name__)
def test_seed000_product_reducer_schedules(sched, rng):
    k = _seed_kernel(E._rowprod_te, sched, ("prod", sched.__name__))
    for shape in [(37, 21), (1, 1), (40, 1)]:
        a = rng.uniform(0.5, 1.5, shape)
        np.testing.assert_allclose(k(a, backend="cuda"), a.prod(1), rtol=1e-10)


def test_seed000_store_predicate(rng):
    def sched(s):
        cross_thread(s)
        B_ = s["B"]
        B_.set_store_predicate(lambda tx: tx == 0, B_.reduce_axes[0])
    k = _seed_kernel(E._rowsum_te, sched, "store_predicate")
    for shape in [(45, 37), (64, 16), (1, 1)]:
        a = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(k(a, backend="cuda"), a.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------- the core suite, default schedules
# (collected here with this directory's fixtures: executor is "cuda")
test_rowsum_both_styles = E.test_rowsum_both_styles
test_conv3x3 = E.test_conv3x3
test_rowprod = E.test_rowprod
test_softmax = E.test_softmax
test_matmul = E.test_matmul
test_scalar_arguments_symbolic_and_constant = E.test_scalar_arguments_symbolic_and_constant

test_negative_compute_size_is_a_shape_error_at_the_users_line = \
    EDGES.test_negative_compute_size_is_a_shape_error_at_the_users_line
test_clamped_size_from_the_hint_works = EDGES.test_clamped_size_from_the_hint_works
test_reduce_axis_of_a_negative_extent_is_empty = EDGES.test_reduce_axis_of_a_negative_extent_is_empty
test_python_ints_beyond_int64_are_an_argument_error_everywhere = \
    EDGES.test_python_ints_beyond_int64_are_an_argument_error_everywhere

test_bad_hint_names_list_what_exists = HINTS.test_bad_names_list_what_exists_in_the_users_words
test_zero_d_outputs_take_any_hint = HINTS.test_zero_d_outputs_take_any_hint


@pytest.mark.parametrize("case", B.CASES)
def test_bounds(case):
    getattr(B, case)("cuda")


# test_reducers / test_fe_numpy_semantics with BACKENDS = ["cuda"]: their tests that run on
# BACKENDS (not the cpu-only ones, nor those that run no kernel), under a prefixed name
_RUNS_ON_BACKENDS = {"BACKENDS", "_all", "_check", "_on_all", "_raises_like_numpy"}
_SKIP = {"test_cpu_schedules_with_partial_results_agree",
         "test_uint64_against_signed_arrays_compares_exactly"}    # parametrised at import: below
for _mod, _prefix in ((RED, "test_reducers_"), (SEM, "test_semantics_")):
    for _name, _fn in list(vars(_mod).items()):
        if (_name.startswith("test_") and _name not in _SKIP and hasattr(_fn, "__code__")
                and _RUNS_ON_BACKENDS & set(_fn.__code__.co_names)):
            globals()[_prefix + _name[5:]] = _fn


def _params(fn, name):
    return next(m.args[1] for m in fn.pytestmark if m.name == "parametrize" and m.args[0] == name)


_U64 = SEM.test_uint64_against_signed_arrays_compares_exactly


@pytest.mark.parametrize("signed", _params(_U64, "signed"))
@pytest.mark.parametrize("opname", _params(_U64, "opname"))
def test_semantics_uint64_against_signed_arrays_compares_exactly(signed, opname):
    _U64("cuda", signed, opname)
