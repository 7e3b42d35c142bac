"""The hardware a default schedule is generated for: a small, frozen description per backend.

The schedule generator (generator.py) reads only this: how many cores to fill,
how wide a SIMD register is and how many there are (the register micro-tile),
and the cache sizes (how long a reduction block may be).  The GPU fields are
there for the GPU generator to come (threads per block, warp, shared memory,
tensor-core tile shapes); CPU targets leave them at their defaults.

A backend supplies its own ``Target`` (the cpu backend detects the host's
cores, SIMD width and caches, with the fallbacks below when it cannot read
them); ``GENERIC_CPU`` is what a caller without a backend gets.
"""
from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Target:
    """What a schedule generator may assume about one device."""

    name: str = "cpu"
    cores: int = 1                       # threads a parallel loop should fill
    vector_bytes: int = 32               # one SIMD register
    vector_registers: int = 16           # architectural SIMD registers
    fma_per_cycle: int = 2               # vector FMAs issued per cycle per core
    loads_per_cycle: int = 2             # vector loads per cycle per core
    fma_latency: int = 4                 # cycles: independent accumulators needed = this x rate
    cache_line: int = 64
    #: copies of a loop body (holding a loop) the backend unrolls without refusing: register-tile rows
    max_unroll: int = 7
    l1_bytes: int = 32 * 1024            # per core
    l2_bytes: int = 1024 * 1024          # per core
    l3_bytes: int = 8 * 1024 * 1024      # shared
    # GPU fields (unused on CPU targets)
    threads_per_block: int = 0
    warp: int = 0
    shared_bytes: int = 0
    registers_per_thread: int = 0
    tensor_core_shapes: tuple = ()

    def lanes(self, itemsize: int) -> int:
        """SIMD lanes of one register for elements of ``itemsize`` bytes (at least 1)."""
        return max(1, self.vector_bytes // max(1, int(itemsize)))

    def with_cores(self, cores: int) -> "Target":
        """The same target planned for ``cores`` threads (a ``threads=`` hint, a fixed count)."""
        return replace(self, cores=max(1, int(cores)))


#: a conservative x86-64 CPU (AVX2): what the generator assumes when nothing is detected
GENERIC_CPU = Target()
