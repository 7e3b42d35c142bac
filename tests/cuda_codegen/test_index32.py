"""32-bit index arithmetic in the generated CUDA (issue 10): ``kdsl_cuda.codegen.index32``.

Golden checks on the benchmark kernels (stencil, softmax, rowsum): ``int`` indices at 16384 x
16384, 64-bit offsets where the arrays hold more than 2**31 elements; int64 data stays int64;
the interval rules are checked against brute force; the generated sources compile with NVRTC.
Arrays of any size are made with ``as_strided`` over 16 bytes: codegen only reads their
shapes.  The ``cuda``-marked test at the end reads and writes past element 2**31 on a device.
"""
import dataclasses
import itertools
import re
from types import SimpleNamespace

import numpy as np
import pytest

import kdsl as kd
from kdsl import dtypes as dt
from kdsl.ir import nodes as n
from kdsl_cuda.codegen import generate
from kdsl_cuda.codegen.index32 import IndexWidths, fits32

BIG = 2 ** 31 + 16


@kd.kernel
def rowsum(A):
    return A.sum(axis=1)


@kd.kernel
def fullsum(A):
    return A.sum()


@kd.kernel
def softmax(X):
    e = kd.exp(X - X.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@kd.kernel
def conv3x3(I, W):
    n_, m = I.shape
    di, dj = kd.reduce_axis(3, name="di"), kd.reduce_axis(3, name="dj")
    return kd.compute((n_ - 2, m - 2),
                      lambda i, j: kd.sum(I[i + di, j + dj] * W[di, dj], axis=(di, dj)), name="C")


@kd.kernel
def plus_one(A):
    return A + 1


@kd.kernel
def mod_sums(A, B):
    """S[i] = sum_j ((i * j) % 7 + B[j]) + A[i]: i * j passes 2**31 when len(A) * len(B) does."""
    j = kd.reduce_axis(B.shape[0], name="j")
    return kd.compute(A.shape, lambda i: kd.sum((i * j) % 7 + B[j], axis=j) + A[i], name="S")


def mod_sums_oracle(n_, m):
    """mod_sums of zero arrays in closed form: j's residues mod 7 repeat."""
    counts = np.array([len(range(k, m, 7)) for k in range(7)], np.int64)
    r = np.arange(n_, dtype=np.int64) % 7
    return ((r[:, None] * np.arange(7)) % 7 * counts).sum(axis=1)


@kd.kernel
def index_product(A):
    return kd.compute(A.shape, lambda i, j: i * j + A[i, j], name="P")


def fake(shape, dtype=np.float32):
    """A C-contiguous array of ``shape`` over 16 elements (never read: codegen needs shapes)."""
    item = np.dtype(dtype).itemsize
    strides = tuple(int(np.prod(shape[k + 1:], dtype=np.int64)) * item for k in range(len(shape)))
    return np.lib.stride_tricks.as_strided(np.zeros(16, dtype), shape=shape, strides=strides)


def bodies(src: str) -> list:
    """The kernels' bodies (after the parameter list), one string each."""
    return [k.split(") {", 1)[1] for k in src.split('extern "C" __global__')[1:]]


def source(kernel, *args):
    return kernel.source(*args, backend="cuda")


# ----------------------------------------------------------------- golden: 32 bits at 16384^2
CASES_16K = {
    "conv3x3": lambda: (conv3x3, fake((16384, 16384)), fake((3, 3))),
    "softmax": lambda: (softmax, fake((16384, 16384))),
    "rowsum": lambda: (rowsum, fake((16384, 16384))),
    "softmax_8192": lambda: (softmax, fake((8192, 8192))),
}


@pytest.mark.parametrize("case", sorted(CASES_16K))
def test_int_indices_at_16384(case):
    kernel, *args = CASES_16K[case]()
    src = source(kernel, *args)
    for body in bodies(src):
        assert "int64_t" not in body, f"64-bit index arithmetic left in {case}:\n{body}"
        assert "LL" not in body.replace("ULL", "")
        assert "kd_sfloordiv" not in body and "kd_smod" not in body
        assert re.search(r"const int \w+ = \(int\)blockIdx\.x;", body)
    # the shape parameters stay int64_t in the ABI, copied once into const int locals
    assert re.search(r"int64_t \w+_1[,)]", src)
    assert re.search(r"const int (\w+)_1_i = \(int\)\1_1;", src)


def test_conv3x3_offsets_golden():
    src = source(conv3x3, fake((16384, 16384)), fake((3, 3)))
    assert "for (int di = 0, di_end = 3; di < di_end; ++di)" in src
    # the fused block index split by the row's block count: an unsigned division, in int
    assert re.search(r"const int kd_ix_\d+ = \(\(int\)\(\(unsigned\)\(i_outer_j_outer_fused\) / "
                     r"\(unsigned\)\(kd_ix_\d+\)\)\);", src)
    assert re.search(r"I\[\(\(\(+kd_ix_\d+ \* \d+\).* \* I_1_i\) \+", src)


# ----------------------------------------------------------------- 64 bits where needed
def test_wide_offsets_past_2_31_elements():
    src = source(softmax, fake((65536, 65536)))        # 2**32 elements
    body = bodies(src)[0]
    # the row's offset is a 64-bit product of two ints (mul.wide), the rest stays int
    assert "X[((((int64_t)i0) * X_1_i) + " in body
    assert "const int i0 = (int)blockIdx.x;" in body


@pytest.mark.parametrize("kernel,shape", [(fullsum, (BIG,)), (rowsum, (1, BIG))])
def test_one_row_longer_than_2_31(kernel, shape):
    src = source(kernel, fake(shape, np.int8))
    assert "A_0_i" not in src and "A_1_i" not in src    # 2**31 + 16 does not fit: no int copy
    body = bodies(src)[0]
    # the row's block count is an int64 value and every offset into A is taken with it
    wide = re.search(r"const int64_t (kd_ix_\d+) = ", body)
    assert wide, body
    offsets = re.findall(r"\bA\[([^\]]*)\]", body)
    assert offsets and all(wide.group(1) in o for o in offsets), offsets


def test_strided_offsets_stay_64_bit():
    x = fake((8192, 8192))[:, ::2]          # run-time strides: no bound, int64 parameters
    src = source(rowsum, x)
    offsets = re.findall(r"\bA\[([^\]]*)\]", src)
    assert offsets and all("* A_s0)" in o and "* A_s1)" in o for o in offsets), offsets
    assert "A_s0_i" not in src and "A_s1_i" not in src
    assert "const int A_1_i = (int)A_1;" in src     # the shapes still fit


def test_symbolic_lower_stays_64_bit():
    func = rowsum.lower(kd.TensorSpec(("n", "m"), kd.float32), backend="cuda")
    assert func.size_hints == ()
    src = generate(func).source
    body = "".join(bodies(src))
    assert "int64_t" in body and "_i = (int)" not in body


# ----------------------------------------------------------------- data stays int64
def test_int64_data_stays_int64():
    src = source(plus_one, fake((4096, 4096), np.int64))
    # the int64 value plus a literal: an int64 addition (no cast of the value to int)
    assert re.search(r"add\[[^\]]*\] = \(A\[[^\]]*\] \+ 1(LL)?\);", src), src
    assert "(int)(A[" not in src and "int64_t* __restrict__ add" in src
    src = source(index_product, fake((65536, 65536), np.int64))
    # i * j overflows int: the product of the two int indices is taken in 64 bits
    stores = re.findall(r"\bP\[[^\]]*\] = (.*);", src)
    assert stores and all(s.startswith("((((int64_t)kd_ix_") for s in stores), stores


def test_index_values_as_data_are_exact(rng):
    a = rng.integers(-5, 5, size=(37, 301)).astype(np.int64)
    got = index_product(a, backend="interp-cuda")      # SIMT run + NVRTC compile (hook)
    i, j = np.indices(a.shape)
    np.testing.assert_array_equal(got, i * j + a)
    b = np.array([[2 ** 62, -2 ** 63, 2 ** 63 - 1]], np.int64)
    np.testing.assert_array_equal(plus_one(b, backend="interp-cuda"), b + 1)   # wraps


def test_index_products_in_values(rng):
    a, b = np.zeros(45, np.int64), np.zeros(333, np.int64)
    np.testing.assert_array_equal(mod_sums(a, b, backend="interp-cuda"), mod_sums_oracle(45, 333))
    src = source(mod_sums, fake((65536,), np.int64), fake((65536,), np.int64))
    assert "int64_t" in "".join(bodies(src))      # i * j reaches 2**32: not all int


def test_argmax_indices_stay_int64():
    @kd.kernel
    def argmax_rows(A):
        return A.argmax(axis=1)
    src = source(argmax_rows, fake((16384, 16384)))
    assert "int64_t" in "".join(bodies(src))            # the combiner's index values
    a = np.random.default_rng(0).standard_normal((5, 700)).astype(np.float32)
    np.testing.assert_array_equal(argmax_rows(a, backend="interp-cuda"), a.argmax(axis=1))


# ----------------------------------------------------------------- NVRTC
@pytest.mark.parametrize("case", ["conv3x3", "softmax"])
def test_nvrtc_compiles_32_bit_sources(case):
    pytest.importorskip("cuda.core")
    from kdsl_cuda.build import compile_cubin
    kernel, *args = CASES_16K[case]()
    assert compile_cubin(source(kernel, *args), name=f"{case}.cu")[:4] == b"\x7fELF"
    assert compile_cubin(source(softmax, fake((65536, 65536))), name="wide.cu")[:4] == b"\x7fELF"


# ----------------------------------------------------------------- the interval rules
def _widths(var_ranges, body=None, grid=()):
    vs = tuple(var_ranges)
    func = SimpleNamespace(size_hints=tuple((v, lo, hi) for v, (lo, hi) in var_ranges.items()),
                           scalars=vs)
    kernel = SimpleNamespace(launch=SimpleNamespace(grid=grid), body=body or n.Seq(()))
    return IndexWidths(func, kernel, (1, 1, 1))


def _eval(e, env):
    t = type(e)
    if t is n.Const:
        return e.value
    if t is n.Var:
        return env[e]
    a, b = _eval(e.a, env), _eval(e.b, env)
    op = e.op
    if op is n.BinOp.FLOORDIV:
        return 0 if b == 0 else a // b
    if op is n.BinOp.MOD:
        return 0 if b == 0 else a % b
    return {n.BinOp.ADD: a + b, n.BinOp.SUB: a - b, n.BinOp.MUL: a * b,
            n.BinOp.MIN: min(a, b), n.BinOp.MAX: max(a, b)}[op]


def _random_expr(r, leaves, depth):
    if depth == 0 or r.random() < 0.25:
        if r.random() < 0.3:
            return n.Const(dt.index, int(r.integers(-9, 10)))
        return leaves[int(r.integers(len(leaves)))]
    op = [n.BinOp.ADD, n.BinOp.SUB, n.BinOp.MUL, n.BinOp.FLOORDIV, n.BinOp.MOD,
          n.BinOp.MIN, n.BinOp.MAX][int(r.integers(7))]
    return n.Binary(dt.index, op, _random_expr(r, leaves, depth - 1), _random_expr(r, leaves, depth - 1))


def test_intervals_contain_every_value():
    r = np.random.default_rng(7)
    for trial in range(300):
        vs = [n.var(f"v{k}") for k in range(3)]
        ranges = {}
        for v in vs:
            lo = int(r.integers(-6, 6))
            ranges[v] = (lo, lo + int(r.integers(0, 6)))
        w = _widths(ranges)
        e = _random_expr(r, vs, 4)
        iv = w.interval(e)
        assert iv is not None
        for vals in itertools.product(*(range(lo, hi + 1) for lo, hi in ranges.values())):
            x = _eval(e, dict(zip(vs, vals)))
            assert iv[0] <= x <= iv[1], (e, ranges, vals, x, iv)


def test_fused_quotient_rule_and_narrowness():
    p, q = n.var("p"), n.var("q")
    v = n.var("f")
    ext = n.Binary(dt.index, n.BinOp.MUL, p, q)
    quo = n.Binary(dt.index, n.BinOp.FLOORDIV, v, q)
    body = n.For(v, n.Const(dt.index, 0), ext, n.ForKind.BOUND, n.Seq(()), n.ThreadTag.BLOCK_X)
    w = _widths({p: (1, 40), q: (3, 50)}, body, grid=(ext,))
    assert w.interval(quo) == (0, 39)           # f < p * q  ->  f // q <= p - 1
    big = n.Binary(dt.index, n.BinOp.MUL, v, n.Const(dt.index, 2 ** 21))   # 1999 * 2**21
    assert w.narrow(quo) and not w.narrow(big) and w.declared32(v)
    # the same loop whose grid differs from its extent: the plain interval only
    w2 = _widths({p: (1, 40), q: (3, 50)}, body, grid=(n.Const(dt.index, 4000),))
    assert w2.interval(quo) == (0, 3999 // 3)


def test_fits32_edges():
    assert fits32((-2 ** 31, 2 ** 31 - 1)) and not fits32((0, 2 ** 31)) and not fits32(None)


# ----------------------------------------------------------------- device: past 2**31
@pytest.mark.cuda
def test_device_offsets_past_2_31():
    """Reads and writes past element 2**31 of a 1 x (2**31 + 16) int8 array (2 GiB)."""
    x = np.ones((1, BIG), np.int8)
    x[0, -16:] = np.arange(16, dtype=np.int8)
    want = BIG - 16 + 120
    assert int(fullsum(x, backend="cuda")) == want
    assert int(rowsum(x, backend="cuda")[0]) == want
    y = plus_one(x, backend="cuda")
    np.testing.assert_array_equal(y[0, -16:], np.arange(1, 17, dtype=np.int8))
    np.testing.assert_array_equal(y[0, :16], 2)


@pytest.mark.cuda
def test_device_index_products_past_2_31():
    """i * j up to 2**32 inside a value: computed in 64 bits on the device."""
    a, b = np.zeros(65536, np.int64), np.zeros(65536, np.int64)
    np.testing.assert_array_equal(mod_sums(a, b, backend="cuda"), mod_sums_oracle(65536, 65536))


@pytest.mark.cuda
@pytest.mark.parametrize("n_", [2 ** 31 - 1, 2 ** 30 + 3])
def test_device_sum_at_the_top_of_int(n_):
    """One row of 2**31 - 1 (the largest int) and of 2**30 + 3 int8 ones, summed."""
    x = np.ones((1, n_), np.int8)
    x[0, -3:] = 5
    assert int(rowsum(x, backend="cuda")[0]) == n_ + 12


@pytest.mark.cuda
def test_device_softmax_at_the_top_of_its_size_class():
    """32767 x 32767 (2**30 elements, offsets near the proof's bound): last rows and first."""
    x = np.random.default_rng(3).standard_normal((32767, 32767), dtype=np.float32)
    y = softmax(x, backend="cuda")
    for r in (0, 32765, 32766):
        row = x[r].astype(np.float64)
        want = np.exp(row - row.max())
        np.testing.assert_allclose(y[r], want / want.sum(), rtol=1e-5, atol=1e-9)
