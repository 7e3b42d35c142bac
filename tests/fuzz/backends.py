"""The backends the fuzzer runs, and how each is set up.

An entry names the kdsl backend a kernel is called with (``target``), the
schedule profile its explicit schedules are generated in (``gen_schedule``),
the largest case it takes (the loop-IR interpreter is slow), and a setup
function that registers it (returns a reason string when it is not available
here).  A new backend (``cuda``, a SIMT interpreter) is one more entry; cases
and schedules need no change.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass(frozen=True)
class FuzzBackend:
    name: str                  # the fuzzer's name for it (what --backend takes)
    target: str                # kdsl backend name kernels are called and scheduled with
    profile: str               # schedule profile: "host" or "gpu"
    max_elems: int             # largest input/output (elements) it runs
    setup: object              # () -> None if usable, else a reason
    schedules: bool = True     # whether schedules are generated for it
    default: bool = True       # part of the default backend list
    explicit: bool = True      # explicit primitive sequences too (else hint sets only)
    sched_target: str = ""     # the target its schedules are written for ("": ``target``)

    @property
    def schedules_for(self) -> str:
        return self.sched_target or self.target


def _setup_numpy():
    return None


def _setup_interp():
    import kdsl as kd
    from kdsl.backends.interpreter import InterpreterBackend
    if "interp" not in kd.backends():
        kd.register_backend("interp", InterpreterBackend())
    return None


def _setup_cpu():
    if importlib.util.find_spec("llvmlite") is None:
        return "llvmlite is not installed (pip install ./kdsl_cpu)"
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    import kdsl as kd
    import kdsl_cpu
    from kdsl.backends.registry import get_backend
    try:
        if get_backend("cpu") is kdsl_cpu.backend:
            return None
    except Exception:
        pass
    kd.register_backend("cpu", kdsl_cpu.backend)
    return None


def _setup_cuda():
    """kdsl_cuda's backend as "cuda", where it has a usable device (else the reason)."""
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    try:
        import kdsl_cuda
    except Exception as e:  # noqa: BLE001  (cuda.core missing or broken: no device either way)
        return f"no CUDA device: kdsl_cuda is not importable ({type(e).__name__}: {e})"
    probe = getattr(kdsl_cuda, "is_available", None)
    if probe is None:
        return "no CUDA device: kdsl_cuda has no is_available() (no runtime yet)"
    if not probe():
        return "no CUDA device: kdsl_cuda.is_available() is false"
    import kdsl as kd
    from kdsl.backends.registry import get_backend
    try:
        if get_backend("cuda") is kdsl_cuda.backend:
            return None
    except Exception:
        pass
    kd.register_backend("cuda", kdsl_cuda.backend)
    return None


def _setup_interp_cuda():
    """The core's ``interp-cuda`` (SIMT interpreter, race-checked) on kdsl_cuda's default
    schedules, where kdsl_cuda is importable (no device needed).  Each GPU-form function it
    runs is also printed as CUDA and NVRTC-compiled (tests/cuda_codegen/nvrtc_hook.py, where
    the cuda wheels are installed): a codegen or NVRTC failure is a bug of the case."""
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    try:
        import kdsl_cuda   # its default schedules are what interp-cuda runs
    except Exception as e:  # noqa: BLE001
        return f"kdsl_cuda is not importable ({type(e).__name__}: {e})"
    import kdsl as kd
    from kdsl.backends import registry
    if not registry.is_installed("cuda"):   # not pip-installed: this checkout's kdsl_cuda
        kd.register_backend("cuda", kdsl_cuda.backend)
    hook_dir = os.path.join(ROOT, "tests", "cuda_codegen")
    if hook_dir not in sys.path:
        sys.path.insert(0, hook_dir)
    import nvrtc_hook
    nvrtc_hook.install()
    return None


BACKENDS = {
    "numpy": FuzzBackend("numpy", "numpy", "host", 1 << 20, _setup_numpy),
    "interp": FuzzBackend("interp", "interp", "host", 600, _setup_interp),
    "cpu": FuzzBackend("cpu", "cpu", "host", 1 << 20, _setup_cpu),
    # the interpreter running GPU-style schedules (bind, cross-thread reductions, shared
    # caches): the loop IR a CUDA backend receives, executed sequentially
    "interp-gpu": FuzzBackend("interp-gpu", "interp", "gpu", 600, _setup_interp, default=False),
    # the GPU (tests/fuzz/test_fuzz_slice_cuda.py, under the `cuda` mark): every case on the
    # default cuda schedules (codegen, NVRTC, runtime, default schedules).  No generated
    # primitive sequences: the gpu profile's random binds are mostly not GPU-valid (a stage left
    # unbound, thread extents that differ in one kernel), which the cuda lowering refuses by
    # design and the judge would count as late schedule errors; interp-gpu runs them.
    "cuda": FuzzBackend("cuda", "cuda", "gpu", 1 << 20, _setup_cuda, schedules=False, default=False),
    # the same default cuda schedules without a GPU: the core's GPU lowering on the SIMT
    # interpreter (races, divergent barriers, out-of-bounds accesses reported) and, through the
    # NVRTC hook, the CUDA it prints compiled.  Hint sets (which adjust the default schedules)
    # but no generated primitive sequences (see "cuda"); small cases (the SIMT interpreter
    # runs every thread in Python)
    "interp-cuda": FuzzBackend("interp-cuda", "interp-cuda", "gpu", 400, _setup_interp_cuda,
                               explicit=False, sched_target="cuda", default=False),
    # every generated kernel family under a TVM-style explicit GPU schedule (gen_schedule.gpu_tvm:
    # inlined intermediates, one kernel per root stage over blockIdx.x x threadIdx.x, cross-thread
    # reductions) on the SIMT interpreter + NVRTC; the TVM-tutorial recipes (tiling, shared
    # caches, tensor cores...) are the separate ``--gpu-schedules`` generator (gpu_cli.py)
    "interp-cuda-tvm": FuzzBackend("interp-cuda-tvm", "interp-cuda", "gpu-tvm", 400, _setup_interp_cuda,
                                   sched_target="cuda", default=False),
}


def available(names=None) -> list:
    """The usable backends among ``names`` (default: every default entry), with reasons."""
    names = names or [k for k, v in BACKENDS.items() if v.default]
    out = []
    for nm in names:
        fb = BACKENDS[nm]
        reason = fb.setup()
        out.append((fb, reason))
    return out
