"""Tensor intrinsics that ``tensorize`` can map a loop nest onto."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WMMA:
    """A warp-level matrix multiply-accumulate tile of shape m x n x k (CUDA tensor cores)."""

    m: int
    n: int
    k: int

    def __post_init__(self):
        if (self.m, self.n, self.k) not in ((16, 16, 16), (32, 8, 16), (8, 32, 16)):
            from ..errors import ScheduleError
            raise ScheduleError(f"kd.intrin.wmma({self.m}, {self.n}, {self.k}) is not a WMMA shape",
                                hint="use (16, 16, 16), (32, 8, 16) or (8, 32, 16)")


def wmma(m: int = 16, n: int = 16, k: int = 16) -> WMMA:
    """The WMMA fragment shape for ``tensorize`` (fp16/bf16 inputs, fp32 accumulation)."""
    return WMMA(m, n, k)
