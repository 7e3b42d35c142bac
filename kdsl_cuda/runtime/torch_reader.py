"""Torch tensors read in one C call by the cuda fast launchers (``fastlaunch``): the compiled
helper's ``Reader`` over DLPack's C exchange API (``torch.Tensor.__dlpack_c_exchange_api__``,
torch >= 2.10), which returns torch's current stream and each tensor's pointer and sizes, or
None when a check (type, device, dtype, rank, contiguity) fails."""
from __future__ import annotations

import sys

from . import native

#: DLPack's device type of CUDA memory (dlpack.h ``kDLCUDA``)
KDL_CUDA = 2


def available() -> bool:
    """Whether torch tensors can be read by the compiled helper's ``Reader``: torch exports
    DLPack's exchange API and the helper is built.  ``KDSL_CUDA_DLPACK_READER=0`` keeps the
    attribute reads."""
    torch = sys.modules.get("torch")
    if torch is None or getattr(torch.Tensor, "__dlpack_c_exchange_api__", None) is None:
        return False
    from kdsl import config
    if not config.cuda_dlpack_reader():
        return False
    mod = native.module()
    return mod is not None and hasattr(mod, "Reader")


def dl_spec(spec) -> tuple:
    """``(code, bits, lanes, ndim, contiguous)`` of an array spec of a torch plan: its dtype's
    DLPack code (dlpack.h: kDLBool 6, kDLBfloat 4, kDLFloat 2, kDLInt 0, kDLUInt 1; a code torch
    exports otherwise only makes the reader decline)."""
    d, torch = spec.dtype, sys.modules["torch"]
    code = (6 if d is torch.bool else 4 if d is torch.bfloat16 else 2 if d.is_floating_point
            else 0 if d.is_signed else 1)
    return code, 8 * d.itemsize, 1, len(spec.dims), bool(spec.contiguous)


def reader(specs, ordinal: int):
    """The ``Reader`` of torch tensors with these array specs on GPU ``ordinal``; its call
    returns ``(stream, pointer, sizes..., pointer, sizes...)`` or None."""
    torch = sys.modules["torch"]
    return native.module().Reader(torch.Tensor.__dlpack_c_exchange_api__, torch.Tensor,
                                  KDL_CUDA, ordinal, tuple(dl_spec(s) for s in specs), True)
