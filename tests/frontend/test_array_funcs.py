"""numpy's array functions inside kernels (issue 25 item 2), against numpy itself.

Each case is a function written with numpy (``np.einsum(...)``, ``x.var(...)``): run on
numpy arrays it is the oracle, inside ``@kd.kernel`` it is traced.  Results must have
numpy's shape and dtype and numpy's values (float64 to 1e-12) on numpy, interp and cpu
(and interp-cuda for the cases marked ``gpu``).  ``COVERAGE`` is the array API
standard's function list with kdsl's status; docs/kernels.md carries it rendered by
``render_coverage()`` (checked by ``test_docs_table``; ``python3 tests/frontend/
test_array_funcs.py`` prints it).
"""
import os

import numpy as np
import pytest

import kdsl as kd

R = np.random.default_rng()     # fresh inputs on every run


def rnd(shape, dtype=np.float64, view=None):
    """Random values of ``dtype``; ``view='T'``/``'step'`` give a non-contiguous view."""
    big = tuple(2 * s if (view == "step" and j == len(shape) - 1) else s
                for j, s in enumerate(shape))
    if view == "T":
        big = tuple(reversed(big))
    d = np.dtype(dtype)
    if d == bool:
        a = R.random(big) < 0.5
    elif d.kind in "iu":
        a = R.integers(0 if d.kind == "u" else -6, 7, big).astype(d)
    else:
        a = R.uniform(-2, 2, big).astype(d)
    if view == "T":
        a = a.T
    elif view == "step":
        a = a[..., ::2]
    return a


def _ints(shape, lo, hi):
    return R.integers(lo, hi, shape).astype(np.int64)


# id: (fn, arg factory, gpu?)   -- fn runs on numpy arrays (the oracle) and traced ones
CASES = {
    # einsum and contractions
    "einsum_matmul": (lambda a, b: np.einsum("ij,jk->ik", a, b), lambda: (rnd((5, 7)), rnd((7, 3))), True),
    "einsum_implicit": (lambda a, b: np.einsum("ij,jk", a, b), lambda: (rnd((2, 1)), rnd((3, 4))), False),
    "einsum_diag": (lambda a: np.einsum("ii->i", a), lambda: (rnd((4, 4)),), False),
    "einsum_trace": (lambda a: np.einsum("ii", a), lambda: (rnd((5, 5), view="T"),), False),
    "einsum_ellipsis": (lambda a, b: np.einsum("...ij,...jk", a, b),
                        lambda: (rnd((2, 1, 3, 4)), rnd((5, 4, 2))), False),
    "einsum_repeat3": (lambda a: np.einsum("iji->j", a), lambda: (rnd((2, 3, 2)),), False),
    "einsum_outer": (lambda a, b: np.einsum("i,j->ij", a, b), lambda: (rnd((3,)), rnd((4,), view="step")), False),
    "einsum_transpose": (lambda a: np.einsum("ba", a), lambda: (rnd((2, 3)),), False),
    "einsum_batched_empty": (lambda a, b: np.einsum("bij,bjk->bik", a, b),
                             lambda: (rnd((2, 3, 0)), rnd((2, 0, 4))), False),
    "einsum_total_int": (lambda a: np.einsum("ij->", a), lambda: (rnd((3, 17), np.int32),), False),
    "einsum_bool": (lambda a, b: np.einsum("i,i", a, b), lambda: (rnd((9,), bool), rnd((9,), bool)), False),
    "einsum_f32": (lambda a, b: np.einsum("ik,jk->ij", a, b),
                   lambda: (rnd((33, 19), np.float32), rnd((5, 19), np.float32)), True),
    "einsum_sublist": (lambda a, b: np.einsum(a, [0, 1], b, [1, 2], [0, 2]),
                       lambda: (rnd((2, 3)), rnd((3, 4))), False),
    "tensordot_2": (lambda a, b: np.tensordot(a, b), lambda: (rnd((2, 3, 4)), rnd((3, 4, 5))), False),
    "tensordot_pairs": (lambda a, b: np.tensordot(a, b, axes=([1, 0], [0, 1])),
                        lambda: (rnd((3, 4, 5)), rnd((4, 3, 2))), False),
    "inner": (lambda a, b: np.inner(a, b), lambda: (rnd((2, 5)), rnd((3, 5))), False),
    "inner_int": (lambda a, b: np.inner(a, b), lambda: (rnd((7,), np.int32), rnd((7,), np.int32)), False),
    "vdot": (lambda a, b: np.vdot(a, b), lambda: (rnd((2, 3)), rnd((3, 2))), False),
    "outer": (lambda a, b: np.outer(a, b), lambda: (rnd((2, 2)), rnd((3,), np.float32)), False),
    "dot_3d": (lambda a, b: np.dot(a, b), lambda: (rnd((2, 3, 4)), rnd((5, 4, 2))), False),
    # statistics
    "var": (lambda a: np.var(a), lambda: (rnd((7, 9)),), True),
    "var_axis_ddof": (lambda a: a.var(axis=1, ddof=1, keepdims=True), lambda: (rnd((5, 6), view="T"),), False),
    "std_axis0": (lambda a: np.std(a, axis=0), lambda: (rnd((4, 33), np.float32),), True),
    "var_int": (lambda a: np.var(a, axis=(0, 2)), lambda: (rnd((2, 3, 4), np.int32),), False),
    "std_bool": (lambda a: a.std(), lambda: (rnd((10,), bool),), False),
    "var_f16": (lambda a: a.var(axis=-1), lambda: (rnd((3, 8), np.float16),), False),
    "var_ddof_big": (lambda a: np.var(a, ddof=5), lambda: (rnd((3,)),), False),
    "std_offset": (lambda a: np.std(a + 1e4, axis=1), lambda: (rnd((3, 50)),), False),
    # values
    "round": (lambda a: np.round(a * 10), lambda: (rnd((40,)),), True),
    "round_halves": (lambda a: np.round(a - 0.5), lambda: (np.arange(-8, 9, dtype=np.float64)[::-1].copy(),), False),
    "round_decimals": (lambda a: a.round(2), lambda: (rnd((30,)),), False),
    "round_neg_decimals": (lambda a: np.around(a * 1000, -2), lambda: (rnd((30,)),), False),
    "round_int_neg": (lambda a: np.round(a * 5, -1), lambda: (rnd((20,), np.int32),), False),
    "round_int": (lambda a: np.round(a, 2), lambda: (rnd((5,), np.int16),), False),
    "round_f32": (lambda a: np.round(a * 100, 1), lambda: (rnd((20,), np.float32),), False),
    "nan_to_num": (lambda a: np.nan_to_num(np.log(a)), lambda: (np.array([0.0, -1.0, 2.0, np.inf, -0.0]),), False),
    "nan_to_num_vals": (lambda a: np.nan_to_num(a / 0.0, nan=-1.0, posinf=9.0, neginf=-9.0),
                        lambda: (np.array([0.0, -1.0, 2.0], np.float32),), False),
    "nan_to_num_int": (lambda a: np.nan_to_num(a), lambda: (rnd((4,), np.int8),), False),
    "clip": (lambda a: np.clip(a, -1, 1), lambda: (rnd((3, 4)),), False),
    "clip_method": (lambda a: a.clip(min=0.5), lambda: (rnd((3, 4)),), False),
    "diff": (lambda a: np.diff(a), lambda: (rnd((3, 6)),), True),
    "diff_n2_axis0": (lambda a: np.diff(a, n=2, axis=0), lambda: (rnd((5, 3), np.int32),), False),
    "diff_bool": (lambda a: np.diff(a), lambda: (rnd((7,), bool),), False),
    "diff_prepend": (lambda a: np.diff(a, prepend=0.0, append=a[-1:]), lambda: (rnd((6,)),), False),
    "cumsum": (lambda a: np.cumsum(a, axis=1), lambda: (rnd((3, 20)),), True),
    "cumsum_flat_int": (lambda a: a.cumsum(), lambda: (rnd((3, 4), np.int32),), False),
    "cumprod": (lambda a: np.cumprod(a * 0.5 + 1, axis=0), lambda: (rnd((6, 3)),), False),
    "cumulative_sum": (lambda a: np.cumulative_sum(a, include_initial=True), lambda: (rnd((5,)),), False),
    "count_nonzero": (lambda a: np.count_nonzero(a, axis=0), lambda: (rnd((4, 3), np.int8),), False),
    # joins and rearrangements
    "concatenate0": (lambda a, b: np.concatenate([a, b]), lambda: (rnd((3, 4)), rnd((2, 4), np.float32)), True),
    "concatenate1": (lambda a, b: np.concatenate((a, b, a), axis=1), lambda: (rnd((3, 4)), rnd((3, 1))), False),
    "concatenate_none": (lambda a, b: np.concatenate([a, b], axis=None), lambda: (rnd((3, 4)), rnd((5,), np.int32)), False),
    "concatenate_view": (lambda a, b: np.concatenate([a, b], -1), lambda: (rnd((3, 4), view="T"), rnd((3, 2), view="step")), False),
    "stack": (lambda a, b: np.stack([a, b], axis=1), lambda: (rnd((3, 4)), rnd((3, 4))), False),
    "stack_last": (lambda a, b: np.stack([a, b, b], axis=-1), lambda: (rnd((5,), bool), rnd((5,), bool)), False),
    "hstack": (lambda a, b: np.hstack([a, b]), lambda: (rnd((3,)), rnd((4,))), False),
    "vstack": (lambda a, b: np.vstack([a, b]), lambda: (rnd((3,)), rnd((2, 3))), False),
    "pad_constant": (lambda a: np.pad(a, ((1, 2), (3, 0)), constant_values=((1, 2), (3, 4))),
                     lambda: (rnd((2, 3)),), True),
    "pad_edge": (lambda a: np.pad(a, 3, mode="edge"), lambda: (rnd((4, 2), np.int32),), False),
    "pad_reflect": (lambda a: np.pad(a, (2, 7), mode="reflect"), lambda: (rnd((4,)),), False),
    "pad_reflect_one": (lambda a: np.pad(a, ((1, 1), (2, 3)), mode="reflect"), lambda: (rnd((1, 3)),), False),
    "pad_symmetric": (lambda a: np.pad(a, ((1, 9), (2, 0)), mode="symmetric"), lambda: (rnd((3, 4)),), False),
    "pad_wrap": (lambda a: np.pad(a, (5, 6), mode="wrap"), lambda: (rnd((3,), view="step"),), False),
    "roll": (lambda a: np.roll(a, 2, axis=1), lambda: (rnd((3, 5)),), True),
    "roll_flat_neg": (lambda a: np.roll(a, -7), lambda: (rnd((3, 5)),), False),
    "roll_multi": (lambda a: np.roll(a, (1, -2), axis=(0, 1)), lambda: (rnd((3, 5), np.int64),), False),
    "flip": (lambda a: np.flip(a), lambda: (rnd((3, 5)),), False),
    "flip_axis": (lambda a: np.flip(a, axis=(0, 2)), lambda: (rnd((2, 3, 4)),), False),
    "fliplr_flipud": (lambda a: np.fliplr(a) + np.flipud(a), lambda: (rnd((4, 4)),), False),
    "tril": (lambda a: np.tril(a, -1), lambda: (rnd((2, 3, 5)),), True),
    "triu": (lambda a: np.triu(a, 1), lambda: (rnd((4, 3), np.int8),), False),
    "triu_1d": (lambda a: np.triu(a), lambda: (rnd((4,)),), False),
    "expand_squeeze": (lambda a: np.squeeze(np.expand_dims(a, (0, 2)), axis=0), lambda: (rnd((3, 4)),), False),
    "moveaxis": (lambda a: np.moveaxis(a, 0, -1) * 2, lambda: (rnd((2, 3, 4)),), False),
    "swapaxes": (lambda a: np.swapaxes(a, 0, 2), lambda: (rnd((2, 3, 4)),), False),
    "broadcast_to": (lambda a: np.broadcast_to(a, (3, 2, 4)), lambda: (rnd((2, 1)),), False),
    "ravel": (lambda a: np.ravel(a.T), lambda: (rnd((2, 3)),), False),
    "repeat_tile": (lambda a: np.repeat(a, 2, axis=0) + np.tile(a, (2, 1)), lambda: (rnd((3, 2)),), False),
    "meshgrid": (lambda a, b: np.meshgrid(a, b)[0] * np.meshgrid(a, b, indexing="ij")[1].T,
                 lambda: (rnd((3,)), rnd((4,))), False),
    # gathers
    "take": (lambda a, i: np.take(a, i, axis=1), lambda: (rnd((3, 5)), _ints((2, 4), -5, 5)), True),
    "take_flat": (lambda a, i: a.take(i), lambda: (rnd((3, 5)), _ints((6,), -15, 15)), False),
    "take_wrap": (lambda a, i: np.take(a, i, mode="wrap"), lambda: (rnd((4,)), _ints((9,), -20, 20)), False),
    "take_clip": (lambda a, i: np.take(a, i, mode="clip"), lambda: (rnd((4,)), _ints((9,), -20, 20)), False),
    "take_along_axis": (lambda a, i: np.take_along_axis(a, i, axis=1),
                        lambda: (rnd((3, 5)), _ints((1, 7), -5, 5)), False),
    "take_along_argmax": (lambda a: np.take_along_axis(a, np.argmax(a, axis=0, keepdims=True), 0),
                          lambda: (rnd((6, 4)),), False),
    # creation
    "arange_static": (lambda a: a + np.arange(a.shape[0] if isinstance(a, np.ndarray) else 5),
                      lambda: (rnd((5,)),), False),
    "arange_like": (lambda a: a * np.arange(1, 2 * a.shape[0] + 1, 2, like=a), lambda: (rnd((6,)),), True),
    "arange_float": (lambda a: a + np.arange(0.5, 3.0, 0.25), lambda: (rnd((10,)),), False),
    "arange_f32": (lambda a: a + np.arange(0, 1, 0.1, dtype=np.float32), lambda: (rnd((10,), np.float32),), False),
    "linspace_static": (lambda a: a + np.linspace(0, 1, 7), lambda: (rnd((7,)),), False),
    "eye": (lambda a: a + np.eye(a.shape[0], a.shape[1], k=1, like=a), lambda: (rnd((4, 6)),), False),
    "zeros_ones_full": (lambda a: np.zeros_like(a) + np.ones_like(a) * np.full_like(a, 3),
                        lambda: (rnd((2, 3)),), False),
    "constant_small": (lambda a: a * np.array([[1.0, -2.0, 3.5], [0.0, 7.0, -1.0]]), lambda: (rnd((2, 3)),), False),
}

#: cases that read in an untaken branch of a select: the SIMT interpreter too
GPU = [k for k, (_f, _a, g) in CASES.items() if g]


def _check(out, ref):
    ref = np.asarray(ref) if not isinstance(ref, np.ndarray) else ref
    assert out.shape == ref.shape, (out.shape, ref.shape)
    assert out.dtype == ref.dtype, (out.dtype, ref.dtype)
    if ref.dtype.kind == "f":
        tol = {2: 2e-3, 4: 2e-6, 8: 1e-12}[ref.dtype.itemsize]
        np.testing.assert_allclose(out.astype(np.float64), ref.astype(np.float64), rtol=tol,
                                   atol=tol)
    else:
        np.testing.assert_array_equal(out, ref)


def _run(case, backend):
    fn, make, _ = CASES[case]
    args = make()
    with np.errstate(all="ignore"):
        ref = fn(*args)
    k = kd.kernel(fn)
    _check(k(*args, backend=backend), ref)


@pytest.mark.parametrize("backend", ["numpy", "interp", "cpu"])
@pytest.mark.parametrize("case", list(CASES))
def test_matches_numpy(case, backend):
    _run(case, backend)


@pytest.mark.parametrize("case", GPU)
def test_matches_numpy_simt(case):
    _run(case, "interp-cuda")
