"""The compiled helper's ``Reader``: torch tensors read through DLPack's C exchange API
(``torch.Tensor.__dlpack_c_exchange_api__``), as the cuda fast launchers read them.

The launchers read CUDA tensors; these tests read CPU tensors (device type 1) so that they run
without a GPU: the checks and values are the same code.  They skip without torch, without a
torch that exports the exchange API (torch < 2.10), or without a C compiler for the helper.
"""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (optional)")

from kdsl_cuda.runtime import native  # noqa: E402

API = getattr(torch.Tensor, "__dlpack_c_exchange_api__", None)
if API is None:
    pytest.skip("this torch does not export DLPack's C exchange API (torch < 2.10)",
                allow_module_level=True)
MOD = native.module()
if MOD is None:
    pytest.skip(f"no compiled launch helper here ({native.error})", allow_module_level=True)

KDL_CPU = 1


def spec(dtype, ndim, contiguous=True):
    from types import SimpleNamespace
    from kdsl_cuda.runtime.native import dl_spec
    return dl_spec(SimpleNamespace(dtype=dtype, dims=(None,) * ndim, contiguous=contiguous))


def test_reads_pointers_and_sizes():
    a = torch.arange(12.0).reshape(3, 4)
    b = torch.ones(5, dtype=torch.int64)
    r = MOD.Reader(API, torch.Tensor, KDL_CPU, 0, (spec(torch.float32, 2), spec(torch.int64, 1)),
                   False)
    assert r(a, b) == (a.data_ptr(), 3, 4, b.data_ptr(), 5)
    v = a[1:]                                  # an offset view: its own first element
    assert r(v, b)[0] == v.data_ptr() == a.data_ptr() + 16


def test_dtype_codes_are_what_torch_exports():
    """Each kdsl dtype's DLPack code (native.dl_spec) reads a tensor of that dtype and
    declines every other dtype (bfloat16 is not float16, bool not uint8)."""
    dtypes = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.bool,
              torch.uint8, torch.uint16, torch.uint32, torch.uint64, torch.int8, torch.int16,
              torch.int32, torch.int64)
    tensors = [torch.zeros(3, dtype=d) for d in dtypes]
    for d in dtypes:
        r = MOD.Reader(API, torch.Tensor, KDL_CPU, 0, (spec(d, 1),), False)
        assert [r(t) is not None for t in tensors] == [e is d for e in dtypes], d


@pytest.mark.parametrize("bad", ["dtype", "rank", "strided", "transposed", "subclass",
                                 "not a tensor", "device"])
def test_declines(bad):
    a = torch.zeros(4, 6)
    r = MOD.Reader(API, torch.Tensor, KDL_CPU, 0, (spec(torch.float32, 2),), False)
    arg = {"dtype": a.double(), "rank": a[None], "strided": a[:, ::2], "transposed": a.T,
           "subclass": torch.nn.Parameter(a), "not a tensor": [[0.0] * 6] * 4,
           "device": a}[bad]
    if bad == "device":     # a reader of CUDA tensors (device type 2) declines a CPU one
        r = MOD.Reader(API, torch.Tensor, 2, 0, (spec(torch.float32, 2),), False)
    assert r(arg) is None


def test_contiguity_as_torch_defines_it():
    r = MOD.Reader(API, torch.Tensor, KDL_CPU, 0, (spec(torch.float32, 2),), False)
    assert r(torch.zeros(4, 1).T) is not None          # size-1 dims: any stride
    assert r(torch.zeros(0, 6)[:, ::2]) is not None     # no elements: contiguous
    loose = MOD.Reader(API, torch.Tensor, KDL_CPU, 0, (spec(torch.float32, 2, False),), False)
    t = torch.zeros(4, 6)[:, ::2]
    assert loose(t) == (t.data_ptr(), 4, 3)


def test_wrong_call_and_spec():
    r = MOD.Reader(API, torch.Tensor, KDL_CPU, 0, (spec(torch.float32, 1),), False)
    with pytest.raises(TypeError):
        r(torch.zeros(2), torch.zeros(2))
    with pytest.raises(TypeError):
        MOD.Reader(API, torch.Tensor, KDL_CPU, 0, ((1, 2),), False)
    with pytest.raises(ValueError):       # not the exchange API's capsule
        MOD.Reader(object(), torch.Tensor, KDL_CPU, 0, (), False)
