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


def _nan_ties(shape):
    """Floats with ties, NaNs and signed zeros (sorting's corner cases)."""
    a = R.integers(-2, 3, shape).astype(np.float64)
    a[a == 2] = np.nan
    a[a == 0] = R.choice([0.0, -0.0], int((a == 0).sum()))
    return a


def _ints(shape, lo, hi):
    return R.integers(lo, hi, shape).astype(np.int64)


# id: (fn, arg factory, flags)  -- fn runs on numpy arrays (the oracle) and traced ones;
# every case runs on numpy and interp, flag "c" also on cpu, "g" also on interp-cuda, "s": specialised to static shapes (the
# cpu backend compiles index clamps and selects slowly: about 1-2 s a kernel; so a subset)
CASES = {
    # einsum and contractions
    "einsum_matmul": (lambda a, b: np.einsum("ij,jk->ik", a, b), lambda: (rnd((5, 7)), rnd((7, 3))), "gc"),
    "einsum_implicit": (lambda a, b: np.einsum("ij,jk", a, b), lambda: (rnd((2, 1)), rnd((3, 4))), ""),
    "einsum_diag": (lambda a: np.einsum("ii->i", a), lambda: (rnd((4, 4)),), "c"),
    "einsum_trace": (lambda a: np.einsum("ii", a), lambda: (rnd((5, 5), view="T"),), "c"),
    "einsum_ellipsis": (lambda a, b: np.einsum("...ij,...jk", a, b),
                        lambda: (rnd((2, 1, 3, 4)), rnd((5, 4, 2))), ""),
    "einsum_repeat3": (lambda a: np.einsum("iji->j", a), lambda: (rnd((2, 3, 2)),), ""),
    "einsum_outer": (lambda a, b: np.einsum("i,j->ij", a, b), lambda: (rnd((3,)), rnd((4,), view="step")), ""),
    "einsum_transpose": (lambda a: np.einsum("ba", a), lambda: (rnd((2, 3)),), ""),
    "einsum_batched_empty": (lambda a, b: np.einsum("bij,bjk->bik", a, b),
                             lambda: (rnd((2, 3, 0)), rnd((2, 0, 4))), ""),
    "einsum_total_int": (lambda a: np.einsum("ij->", a), lambda: (rnd((3, 17), np.int32),), ""),
    "einsum_bool": (lambda a, b: np.einsum("i,i", a, b), lambda: (rnd((9,), bool), rnd((9,), bool)), "c"),
    "einsum_f32": (lambda a, b: np.einsum("ik,jk->ij", a, b),
                   lambda: (rnd((33, 19), np.float32), rnd((5, 19), np.float32)), "gc"),
    "einsum_sublist": (lambda a, b: np.einsum(a, [0, 1], b, [1, 2], [0, 2]),
                       lambda: (rnd((2, 3)), rnd((3, 4))), ""),
    "einsum_chain_optimize": (lambda a, b, c: np.einsum("ij,jk,kl->li", a, b, c, optimize=True),
                              lambda: (rnd((3, 4)), rnd((4, 5)), rnd((5, 2))), "c"),
    "einsum_chain": (lambda a, b, c: np.einsum("ij,jk,kl", a, b, c), lambda: (rnd((3, 4)), rnd((4, 5)), rnd((5, 2))), ""),
    "tensordot_2": (lambda a, b: np.tensordot(a, b), lambda: (rnd((2, 3, 4)), rnd((3, 4, 5))), "c"),
    "tensordot_pairs": (lambda a, b: np.tensordot(a, b, axes=([1, 0], [0, 1])),
                        lambda: (rnd((3, 4, 5)), rnd((4, 3, 2))), ""),
    "inner": (lambda a, b: np.inner(a, b), lambda: (rnd((2, 5)), rnd((3, 5))), ""),
    "inner_int": (lambda a, b: np.inner(a, b), lambda: (rnd((7,), np.int32), rnd((7,), np.int32)), "c"),
    "vdot": (lambda a, b: np.vdot(a, b), lambda: (rnd((2, 3)), rnd((3, 2))), ""),
    "outer": (lambda a, b: np.outer(a, b), lambda: (rnd((2, 2)), rnd((3,), np.float32)), "c"),
    "dot_3d": (lambda a, b: np.dot(a, b), lambda: (rnd((2, 3, 4)), rnd((5, 4, 2))), ""),
    # statistics
    "var": (lambda a: np.var(a), lambda: (rnd((7, 9)),), "gc"),
    "var_axis_ddof": (lambda a: a.var(axis=1, ddof=1, keepdims=True), lambda: (rnd((5, 6), view="T"),), "c"),
    "std_axis0": (lambda a: np.std(a, axis=0), lambda: (rnd((4, 33), np.float32),), "gc"),
    "var_int": (lambda a: np.var(a, axis=(0, 2)), lambda: (rnd((2, 3, 4), np.int32),), "c"),
    "std_bool": (lambda a: a.std(), lambda: (rnd((10,), bool),), ""),
    "var_f16": (lambda a: a.var(axis=-1), lambda: (rnd((3, 8), np.float16),), ""),
    "var_ddof_big": (lambda a: np.var(a, ddof=5), lambda: (rnd((3,)),), ""),
    "std_offset": (lambda a: np.std(a + 1e4, axis=1), lambda: (rnd((3, 50)),), ""),
    # values
    "round": (lambda a: np.round(a * 10), lambda: (rnd((40,)),), "gc"),
    "round_halves": (lambda a: np.round(a - 0.5), lambda: (np.arange(-8, 9, dtype=np.float64)[::-1].copy(),), "c"),
    "round_decimals": (lambda a: a.round(2), lambda: (rnd((30,)),), "c"),
    "round_neg_decimals": (lambda a: np.around(a * 1000, -2), lambda: (rnd((30,)),), ""),
    "round_int_neg": (lambda a: np.round(a * 5, -1), lambda: (rnd((20,), np.int32),), "c"),
    "round_int": (lambda a: np.round(a, 2), lambda: (rnd((5,), np.int16),), ""),
    "round_f32": (lambda a: np.round(a * 100, 1), lambda: (rnd((20,), np.float32),), ""),
    "nan_to_num": (lambda a: np.nan_to_num(np.log(a)), lambda: (np.array([0.0, -1.0, 2.0, np.inf, -0.0]),), "c"),
    "nan_to_num_vals": (lambda a: np.nan_to_num(a / 0.0, nan=-1.0, posinf=9.0, neginf=-9.0),
                        lambda: (np.array([0.0, -1.0, 2.0], np.float32),), ""),
    "nan_to_num_int": (lambda a: np.nan_to_num(a), lambda: (rnd((4,), np.int8),), ""),
    "clip": (lambda a: np.clip(a, -1, 1), lambda: (rnd((3, 4)),), ""),
    "clip_method": (lambda a: a.clip(min=0.5) + np.clip(a) + np.clip(a, 1, 0), lambda: (rnd((3, 4)),), ""),
    "diff": (lambda a: np.diff(a), lambda: (rnd((3, 6)),), "gc"),
    "diff_n2_axis0": (lambda a: np.diff(a, n=2, axis=0), lambda: (rnd((5, 3), np.int32),), ""),
    "diff_bool": (lambda a: np.diff(a), lambda: (rnd((7,), bool),), ""),
    "diff_prepend": (lambda a: np.diff(a, prepend=0.0, append=a[-1:]), lambda: (rnd((6,)),), ""),
    "cumsum": (lambda a: np.cumsum(a, axis=1), lambda: (rnd((3, 20)),), "gc"),
    "cumsum_flat_int": (lambda a: a.cumsum(), lambda: (rnd((3, 4), np.int32),), ""),
    "cumprod": (lambda a: np.cumprod(a * 0.5 + 1, axis=0), lambda: (rnd((6, 3)),), "c"),
    "cumsum_long_scan": (lambda a: np.cumsum(a, axis=0), lambda: (rnd((150, 3)),), "sc"),
    "cumprod_long_int": (lambda a: np.cumprod(a % 3 - 1, axis=1), lambda: (rnd((2, 70), np.int64),), "s"),
    "cumulative_sum": (lambda a: np.cumulative_sum(a, include_initial=True), lambda: (rnd((5,)),), ""),
    "count_nonzero": (lambda a: np.count_nonzero(a, axis=0), lambda: (rnd((4, 3), np.int8),), "c"),
    # joins and rearrangements
    "concatenate0": (lambda a, b: np.concatenate([a, b]), lambda: (rnd((3, 4)), rnd((2, 4), np.float32)), "gc"),
    "concatenate1": (lambda a, b: np.concatenate((a, b, a), axis=1), lambda: (rnd((3, 4)), rnd((3, 1))), ""),
    "concatenate_none": (lambda a, b: np.concatenate([a, b], axis=None), lambda: (rnd((3, 4)), rnd((5,), np.int32)), ""),
    "concatenate_view": (lambda a, b: np.concatenate([a, b], -1), lambda: (rnd((3, 4), view="T"), rnd((3, 2), view="step")), ""),
    "stack": (lambda a, b: np.stack([a, b], axis=1), lambda: (rnd((3, 4)), rnd((3, 4))), "c"),
    "stack_last": (lambda a, b: np.stack([a, b, b], axis=-1), lambda: (rnd((5,), bool), rnd((5,), bool)), ""),
    "hstack": (lambda a, b: np.hstack([a, b]), lambda: (rnd((3,)), rnd((4,))), ""),
    "vstack": (lambda a, b: np.vstack([a, b]), lambda: (rnd((3,)), rnd((2, 3))), ""),
    "pad_constant": (lambda a: np.pad(a, ((1, 2), (3, 0)), constant_values=((1, 2), (3, 4))),
                     lambda: (rnd((2, 3)),), "gc"),
    "pad_empty_axis": (lambda a: np.pad(a, ((1, 1), (0, 2)), constant_values=5), lambda: (rnd((0, 3)),), "s"),
    "var_size_one": (lambda a: np.var(a, axis=0) + np.std(a, axis=1), lambda: (rnd((1, 1)),), ""),
    "flip_roll_empty": (lambda a: np.flip(np.roll(a, 3, axis=0), axis=1), lambda: (rnd((0, 4)),), ""),
    "pad_edge": (lambda a: np.pad(a, 3, mode="edge"), lambda: (rnd((4, 2), np.int32),), ""),
    "pad_reflect": (lambda a: np.pad(a, (2, 7), mode="reflect"), lambda: (rnd((4,)),), "c"),
    "pad_reflect_one": (lambda a: np.pad(a, ((1, 1), (2, 3)), mode="reflect"), lambda: (rnd((1, 3)),), ""),
    "pad_symmetric": (lambda a: np.pad(a, ((1, 9), (2, 0)), mode="symmetric"), lambda: (rnd((3, 4)),), ""),
    "pad_wrap": (lambda a: np.pad(a, (5, 6), mode="wrap"), lambda: (rnd((3,), view="step"),), "c"),
    "roll": (lambda a: np.roll(a, 2, axis=1), lambda: (rnd((3, 5)),), "gc"),
    "roll_flat_neg": (lambda a: np.roll(a, -7), lambda: (rnd((3, 5)),), ""),
    "roll_multi": (lambda a: np.roll(a, (1, -2), axis=(0, 1)), lambda: (rnd((3, 5), np.int64),), ""),
    "flip": (lambda a: np.flip(a), lambda: (rnd((3, 5)),), ""),
    "flip_axis": (lambda a: np.flip(a, axis=(0, 2)), lambda: (rnd((2, 3, 4)),), "c"),
    "fliplr_flipud": (lambda a: np.fliplr(a) + np.flipud(a), lambda: (rnd((4, 4)),), ""),
    "tril": (lambda a: np.tril(a, -1), lambda: (rnd((2, 3, 5)),), "gc"),
    "triu": (lambda a: np.triu(a, 1), lambda: (rnd((4, 3), np.int8),), ""),
    "triu_1d": (lambda a: np.triu(a), lambda: (rnd((4,)),), ""),
    "expand_squeeze": (lambda a: np.squeeze(np.expand_dims(a, (0, 2)), axis=0), lambda: (rnd((3, 4)),), ""),
    "moveaxis": (lambda a: np.moveaxis(a, 0, -1) * 2, lambda: (rnd((2, 3, 4)),), ""),
    "swapaxes": (lambda a: np.swapaxes(a, 0, 2), lambda: (rnd((2, 3, 4)),), ""),
    "broadcast_to": (lambda a: np.broadcast_to(a, (3, 2, 4)), lambda: (rnd((2, 1)),), ""),
    "ravel": (lambda a: np.ravel(a.T), lambda: (rnd((2, 3)),), ""),
    "repeat_tile": (lambda a: np.repeat(a, 2, axis=0) + np.tile(a, (2, 1)), lambda: (rnd((3, 2)),), "c"),
    "meshgrid": (lambda a, b: np.meshgrid(a, b)[0] * np.meshgrid(a, b, indexing="ij")[1].T,
                 lambda: (rnd((3,)), rnd((4,))), "c"),
    # gathers
    "take": (lambda a, i: np.take(a, i, axis=1), lambda: (rnd((3, 5)), _ints((2, 4), -5, 5)), "gc"),
    "take_flat": (lambda a, i: a.take(i), lambda: (rnd((3, 5)), _ints((6,), -15, 15)), ""),
    "take_wrap": (lambda a, i: np.take(a, i, mode="wrap"), lambda: (rnd((4,)), _ints((9,), -20, 20)), ""),
    "take_clip": (lambda a, i: np.take(a, i, mode="clip"), lambda: (rnd((4,)), _ints((9,), -20, 20)), ""),
    "take_along_axis": (lambda a, i: np.take_along_axis(a, i, axis=1),
                        lambda: (rnd((3, 5)), _ints((1, 7), -5, 5)), "c"),
    "take_along_argmax": (lambda a: np.take_along_axis(a, np.argmax(a, axis=0, keepdims=True), 0),
                          lambda: (rnd((6, 4)),), ""),
    # creation
    "arange_static": (lambda a: a + np.arange(a.shape[0] if isinstance(a, np.ndarray) else 5),
                      lambda: (rnd((5,)),), ""),
    "arange_like": (lambda a: a * np.arange(1, 2 * a.shape[0] + 1, 2, like=a), lambda: (rnd((6,)),), "gc"),
    "arange_float": (lambda a: a + np.arange(0.5, 3.0, 0.25), lambda: (rnd((10,)),), ""),
    "arange_f32": (lambda a: a + np.arange(0, 1, 0.1, dtype=np.float32), lambda: (rnd((10,), np.float32),), "c"),
    "linspace_static": (lambda a: a + np.linspace(0, 1, 7), lambda: (rnd((7,)),), "c"),
    "eye": (lambda a: a + np.eye(a.shape[0], a.shape[1], k=1, like=a), lambda: (rnd((4, 6)),), "c"),
    "zeros_ones_full": (lambda a: np.zeros_like(a) + np.ones_like(a) * np.full_like(a, 3),
                        lambda: (rnd((2, 3)),), ""),
    # already there before issue 25 (listed for the coverage table)
    "matmul": (lambda a, b: np.matmul(a, b), lambda: (rnd((2, 3)), rnd((3, 2))), ""),
    "reshape": (lambda a: np.reshape(a, (3, -1)), lambda: (rnd((2, 6)),), ""),
    "argmax_argmin": (lambda a: np.argmax(a, axis=1) - np.argmin(a, axis=0), lambda: (rnd((4, 4)),), ""),
    "reductions": (lambda a: np.sum(a, axis=0) + np.prod(a, axis=0) + np.max(a, axis=0) + np.min(a, axis=0)
                   + np.mean(a, axis=0), lambda: (rnd((3, 2)),), ""),
    "all_any": (lambda a: np.all(a, axis=0) ^ np.any(a, axis=0), lambda: (rnd((3, 4), bool),), ""),
    "where": (lambda a: np.where(a > 0, a, -a), lambda: (rnd((5,)),), ""),
    # array API spellings
    "permute_dims": (lambda a: np.permute_dims(a, (2, 0, 1)), lambda: (rnd((2, 3, 4)),), ""),
    "matrix_transpose": (lambda a: np.matrix_transpose(a), lambda: (rnd((2, 3, 4)),), ""),
    "concat": (lambda a, b: np.concat([a, b], axis=1), lambda: (rnd((2, 3)), rnd((2, 1))), ""),
    "unstack": (lambda a: np.unstack(a, axis=1)[2], lambda: (rnd((2, 3)),), "s"),
    "asarray_astype": (lambda a: np.astype(np.asarray(a, like=a), np.float32), lambda: (rnd((3,)),), ""),
    "broadcast_arrays": (lambda a, b: np.broadcast_arrays(a, b)[0], lambda: (rnd((3, 1)), rnd((4,))), ""),
    "empty_full": (lambda a: np.empty_like(a) * 0 + np.full((2, 3), 7, like=a) + np.ones((2, 3), like=a),
                   lambda: (rnd((2, 3)),), ""),
    "identity_tri": (lambda a: a + np.identity(3, like=a) + np.tri(3, k=-1, like=a), lambda: (rnd((3, 3)),), ""),
    "cumulative_prod": (lambda a: np.cumulative_prod(a, axis=0), lambda: (rnd((3, 2)),), ""),
    # sorting networks (static lengths)
    "sort": (lambda a: np.sort(a, axis=1), lambda: (_nan_ties((3, 6)),), "s"),
    "sort_int_axis0": (lambda a: np.sort(a, axis=0), lambda: (rnd((5, 2), np.int16),), "sc"),
    "sort_flat_bool": (lambda a: np.sort(a, axis=None), lambda: (rnd((2, 3), bool),), "s"),
    "argsort": (lambda a: np.argsort(a, kind="stable"), lambda: (_nan_ties((2, 9)),), "s"),
    "argsort_method": (lambda a: a.argsort(axis=0, kind="stable"), lambda: (rnd((4, 3), np.uint8),), "s"),
    "constant_small": (lambda a: a * np.array([[1.0, -2.0, 3.5], [0.0, 7.0, -1.0]]), lambda: (rnd((2, 3)),), "c"),
}

CPU = [k for k, (_f, _a, fl) in CASES.items() if "c" in fl]
GPU = [k for k, (_f, _a, fl) in CASES.items() if "g" in fl]


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
    k = kd.kernel(fn, specialize="s" in CASES[case][2])
    _check(k(*args, backend=backend), ref)


@pytest.mark.parametrize("backend", ["numpy", "interp"])
@pytest.mark.parametrize("case", list(CASES))
def test_matches_numpy(case, backend):
    _run(case, backend)


@pytest.mark.parametrize("case", CPU)
def test_matches_numpy_cpu(case):
    _run(case, "cpu")


@pytest.mark.parametrize("case", GPU)
def test_matches_numpy_simt(case):
    _run(case, "interp-cuda")


# ------------------------------------------------------------------ coverage table
_SORT = "refused: not yet (write them with np.sort)"
_DATA = "refused: data-dependent result shape"
#: (group, function, status, the CASES ids that test it) -- the array API standard's
#: non-elementwise functions, then numpy's extras asked for in issue 25
COVERAGE = [
    ("creation", "arange", "yes: static or traced integer bounds, static float bounds",
     ["arange_static", "arange_like", "arange_float", "arange_f32"]),
    ("creation", "asarray", "yes, as np.asarray(x, like=x) (np.asarray(x) makes numpy convert)",
     ["asarray_astype"]),
    ("creation", "empty, empty_like", "yes (zeros)", ["empty_full"]),
    ("creation", "eye, identity, tri", "yes: static or traced sizes", ["eye", "identity_tri"]),
    ("creation", "from_dlpack", "n/a: no foreign arrays inside a kernel", []),
    ("creation", "full, full_like", "yes", ["empty_full", "zeros_ones_full"]),
    ("creation", "linspace", "yes: scalar bounds, static or traced num", ["linspace_static"]),
    ("creation", "meshgrid", "yes", ["meshgrid"]),
    ("creation", "ones, ones_like, zeros, zeros_like", "yes", ["zeros_ones_full", "empty_full"]),
    ("creation", "tril, triu", "yes (with k)", ["tril", "triu", "triu_1d"]),
    ("data type", "astype", "yes", ["asarray_astype"]),
    ("data type", "can_cast, finfo, iinfo, isdtype, result_type",
     "n/a: numpy's, on dtypes, outside kernels", []),
    ("indexing", "take", "yes: mode raise (checked), wrap, clip",
     ["take", "take_flat", "take_wrap", "take_clip"]),
    ("indexing", "take_along_axis", "yes", ["take_along_axis", "take_along_argmax"]),
    ("linear algebra", "matmul", "yes", ["matmul"]),
    ("linear algebra", "matrix_transpose, permute_dims", "yes", ["matrix_transpose", "permute_dims"]),
    ("linear algebra", "tensordot", "yes", ["tensordot_2", "tensordot_pairs"]),
    ("linear algebra", "vecdot", "refused: a gufunc; write np.einsum('...i,...i', a, b)", []),
    ("manipulation", "broadcast_arrays, broadcast_to", "yes", ["broadcast_arrays", "broadcast_to"]),
    ("manipulation", "concat, concatenate", "yes (a part empty at run time needs a static size)",
     ["concat", "concatenate0", "concatenate1", "concatenate_none", "concatenate_view"]),
    ("manipulation", "expand_dims, squeeze", "yes", ["expand_squeeze"]),
    ("manipulation", "flip, fliplr, flipud", "yes", ["flip", "flip_axis", "fliplr_flipud"]),
    ("manipulation", "moveaxis, swapaxes", "yes", ["moveaxis", "swapaxes"]),
    ("manipulation", "repeat, tile", "yes: one count for all elements", ["repeat_tile"]),
    ("manipulation", "reshape, ravel", "yes", ["reshape", "ravel"]),
    ("manipulation", "roll", "yes", ["roll", "roll_flat_neg", "roll_multi"]),
    ("manipulation", "stack, hstack, vstack", "yes", ["stack", "stack_last", "hstack", "vstack"]),
    ("manipulation", "unstack", "yes: static length along the axis", ["unstack"]),
    ("searching", "argmax, argmin", "yes", ["argmax_argmin"]),
    ("searching", "count_nonzero", "yes", ["count_nonzero"]),
    ("searching", "nonzero, argwhere, flatnonzero, extract", _DATA, []),
    ("searching", "searchsorted", "refused: needs a search (np.sort works)", []),
    ("searching", "where", "yes (one argument: refused, data-dependent shape)", ["where"]),
    ("set", "unique_all, unique_counts, unique_inverse, unique_values", _DATA, []),
    ("sorting", "sort, argsort", "yes: static length <= 1024, a bitonic network; NaN last, "
     "ties in index order", ["sort", "sort_int_axis0", "sort_flat_bool", "argsort", "argsort_method"]),
    ("sorting", "partition, median, percentile, quantile", _SORT, []),
    ("statistical", "cumulative_sum, cumulative_prod, cumsum, cumprod",
     "yes: a scan (kd.scan) along the axis, the other axes in parallel; a long scan with "
     "few other positions a parallel blocked scan",
     ["cumulative_sum", "cumulative_prod", "cumsum", "cumsum_flat_int", "cumprod",
      "cumsum_long_scan", "cumprod_long_int"]),
    ("statistical", "max, min, mean, prod, sum", "yes", ["reductions"]),
    ("statistical", "std, var", "yes: ddof/correction, axis, keepdims; two passes",
     ["var", "var_axis_ddof", "std_axis0", "var_int", "std_bool", "var_f16", "std_offset"]),
    ("utility", "all, any", "yes", ["all_any"]),
    ("utility", "diff", "yes: n, axis, prepend, append", ["diff", "diff_n2_axis0", "diff_bool",
                                                           "diff_prepend"]),
    ("numpy", "einsum", "yes: implicit/explicit output, diagonals, '...', sublists, "
     "optimize=True contracts pairwise",
     ["einsum_matmul", "einsum_implicit", "einsum_diag", "einsum_trace", "einsum_ellipsis",
      "einsum_repeat3", "einsum_outer", "einsum_batched_empty", "einsum_bool", "einsum_sublist", "einsum_chain",
      "einsum_chain_optimize"]),
    ("numpy", "inner, outer, vdot, dot", "yes", ["inner", "inner_int", "outer", "vdot", "dot_3d"]),
    ("numpy", "pad", "yes: constant, edge, reflect, symmetric, wrap; static widths",
     ["pad_constant", "pad_empty_axis", "pad_edge", "pad_reflect", "pad_reflect_one", "pad_symmetric", "pad_wrap"]),
    ("numpy", "round, around", "yes: half to even, decimals", ["round", "round_halves",
                                                              "round_decimals", "round_int_neg"]),
    ("numpy", "nan_to_num", "yes", ["nan_to_num", "nan_to_num_vals", "nan_to_num_int"]),
    ("numpy", "clip", "yes", ["clip", "clip_method"]),
    ("numpy", "numpy arrays made in the kernel", "constants: 1-D progressions, <= 64 elements",
     ["arange_static", "constant_small"]),
]

_BEGIN, _END = "<!-- array-functions: begin -->", "<!-- array-functions: end -->"


def render_coverage() -> str:
    """The docs' coverage table (markdown), from COVERAGE and CASES."""
    rows = ["| group | function | inside kernels | tests |", "|---|---|---|---|"]
    for group, name, status, cases in COVERAGE:
        rows.append(f"| {group} | `{name}` | {status} | {len(cases) or '-'} |")
    return "\n".join(rows)


def test_coverage_rows_are_tested():
    for _group, name, status, cases in COVERAGE:
        assert all(c in CASES for c in cases), name
        assert bool(cases) == status.startswith(("yes", "constants")), name


def test_docs_table():
    path = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "kernels.md")
    text = open(path).read()
    body = text.split(_BEGIN)[1].split(_END)[0].strip()
    assert body == render_coverage(), "docs/kernels.md: run python3 tests/frontend/test_array_funcs.py"


if __name__ == "__main__":      # rewrite the table in docs/kernels.md
    path = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "kernels.md")
    text = open(path).read()
    head, rest = text.split(_BEGIN)
    tail = rest.split(_END)[1]
    open(path, "w").write(f"{head}{_BEGIN}\n{render_coverage()}\n{_END}{tail}")
    print(render_coverage())
