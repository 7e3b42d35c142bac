"""The hint-composition matrix shared by tests/passes (interp) and tests/cpu (cpu).

Kernels of every kind a default schedule distinguishes (elementwise, row,
column and full reductions, argmax, a 3x3 stencil, matmul, softmax), hint sets
written with axis placeholders (``SP0``: the first spatial axis, ``SPL``: the
last, ``RD0``: the first reduction axis), each checked against numpy in float64
over shapes that do and do not divide the factors, with 0 and 1 sizes.
"""
from __future__ import annotations

import numpy as np

import kdsl as kd


def _stencil(x):
    n, m = x.shape
    ri = kd.reduce_axis(3, name="ri")
    rj = kd.reduce_axis(3, name="rj")
    return kd.compute((n - 2, m - 2), lambda i, j: kd.sum(x[i + ri, j + rj] * (ri + 1.0) - rj,
                                                          axis=[ri, rj]))


def _stencil_ref(x):
    n, m = x.shape
    out = np.zeros((max(n - 2, 0), max(m - 2, 0)))
    for a in range(3):
        for b in range(3):
            out += x[a:a + out.shape[0], b:b + out.shape[1]] * (a + 1.0) - b
    return out


def _softmax(x):
    e = kd.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _softmax_ref(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


#: name -> (kernel function, numpy float64 oracle, input shapes per case, axis placeholders)
KERNELS = {
    "elementwise": (lambda a, b: a * 2.0 + b, lambda a, b: a * 2.0 + b,
                    [[(13, 37), (13, 37)], [(1, 1), (1, 1)], [(0, 5), (0, 5)], [(3, 8), (3, 8)]],
                    {"SP0": "i0", "SPL": "i1"}),
    "row": (lambda a: a.sum(axis=1), lambda a: a.sum(axis=1),
            [[(13, 37)], [(1, 1)], [(3, 0)], [(4, 16)]], {"SP0": "i0", "SPL": "i0", "RD0": "r0"}),
    "column": (lambda a: a.sum(axis=0), lambda a: a.sum(axis=0),
               [[(37, 13)], [(1, 1)], [(0, 3)], [(16, 300)]], {"SP0": "i0", "SPL": "i0", "RD0": "r0"}),
    "full": (lambda a: a.sum(), lambda a: a.sum(),
             [[(13, 37)], [(1, 1)], [(0, 4)], [(8, 8)]], {"RD0": "r0", "RDL": "r1"}),
    "argmax": (lambda a: a.argmax(axis=1), lambda a: a.argmax(axis=1),
               [[(13, 37)], [(1, 1)], [(4, 16)]], {"SP0": "i0", "SPL": "i0", "RD0": "r0"}),
    "stencil": (_stencil, _stencil_ref, [[(13, 37)], [(3, 3)], [(2, 9)], [(10, 18)]],
                {"SP0": "i", "SPL": "j", "RD0": "ri", "RDL": "rj"}),
    "matmul": (lambda a, b: a @ b, lambda a, b: a @ b,
               [[(13, 37), (37, 11)], [(1, 1), (1, 1)], [(0, 5), (5, 3)], [(4, 0), (0, 6)],
                [(8, 16), (16, 8)]], {"SP0": "i0", "SPL": "i1", "RD0": "r0"}),
    "softmax": (_softmax, _softmax_ref, [[(13, 37)], [(1, 1)], [(4, 16)]], {"SP0": "i0", "SPL": "i1"}),
}

#: hint sets; ``SP0``-style strings stand for a kernel's axes (sets naming an axis kind the
#: kernel lacks are skipped for it)
HINT_SETS = [
    # each hint alone
    dict(tile={"SP0": 4}), dict(tile={"RD0": 5}), dict(parallel=True), dict(parallel=False),
    dict(parallel="SP0"), dict(parallel="RD0"), dict(vectorize=8), dict(vectorize=3),
    dict(vectorize="SPL"), dict(vectorize="RD0"), dict(unroll=4), dict(unroll="RD0"),
    dict(unroll="SPL"), dict(rfactor=3), dict(threads=3), dict(threads=(8, 4)),
    dict(cache={}, stages=2, tensor_cores=True),
    # pairs
    dict(parallel="SP0", vectorize=8), dict(vectorize=8, unroll=4), dict(rfactor=8, parallel=True),
    dict(tile={"SP0": 4, "SPL": 8}, vectorize="SPL"), dict(tile={"SPL": 16}, vectorize=4),
    dict(rfactor=3, vectorize=4), dict(rfactor=3, unroll=2), dict(tile={"RD0": 4}, vectorize="RD0"),
    dict(parallel=False, unroll=3), dict(unroll="SP0", tile={"SP0": 2}),
    dict(parallel="RD0", tile={"RD0": 7}), dict(vectorize="SPL", unroll="SPL"),
    # triples and more
    dict(parallel="SP0", vectorize=8, unroll=4), dict(rfactor=4, parallel=True, vectorize=4),
    dict(tile={"SP0": 3, "RD0": 5}, parallel="SP0", unroll=2),
    dict(rfactor=2, tile={"RD0": 3}, vectorize="RD0", unroll=2, threads=2),
    dict(tile={"SP0": 5, "SPL": 3}, vectorize=2, unroll=5, parallel=True),
]


def resolve(hints: dict, axes: dict):
    """``hints`` with placeholders replaced by the kernel's axis names, or None (axis missing)."""
    def one(v):
        if isinstance(v, str) and v in ("SP0", "SPL", "RD0", "RDL"):
            if v not in axes:
                raise KeyError(v)
            return axes[v]
        return v
    if "rfactor" in hints and "RD0" not in axes:
        return None      # rfactor on a stage that does not reduce is an error (tested apart)
    try:
        out = {}
        for k, v in hints.items():
            if k == "tile":
                t = {}
                for a, f in v.items():
                    t[one(a)] = f
                out[k] = t
            elif isinstance(v, (list, tuple)) and k == "unroll":
                out[k] = [one(x) for x in v]
            else:
                out[k] = one(v)
        return out
    except KeyError:
        return None


def cases():
    """(kernel name, hint-set index) pairs that apply."""
    out = []
    for kname, (_, _, _, axes) in KERNELS.items():
        for k, hs in enumerate(HINT_SETS):
            if resolve(hs, axes) is not None:
                out.append((kname, k))
    return out


def hint_id(k: int) -> str:
    return ",".join(f"{a}={b}" for a, b in HINT_SETS[k].items()).replace(" ", "")


def make_kernel(kname: str, target: str, k: int, **extra):
    fn, _, _, axes = KERNELS[kname]
    hv = resolve(HINT_SETS[k], axes)
    hv.update(extra)
    return kd.kernel(kd.schedule(target, **hv)(fn))


def check(kname: str, kern, backend: str, rng) -> None:
    """Run ``kern`` on every shape of ``kname`` and compare with numpy in float64."""
    _, ref, shapes, _ = KERNELS[kname]
    for shape_set in shapes:
        args = [rng.standard_normal(s).astype(np.float32) for s in shape_set]
        got = kern(*args, backend=backend)
        want = ref(*[a.astype(np.float64) for a in args])
        if kname == "argmax":
            np.testing.assert_array_equal(got, want, err_msg=f"{kname} {shape_set}")
        else:
            np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=2e-5, atol=2e-4,
                                       err_msg=f"{kname} {shape_set}")
