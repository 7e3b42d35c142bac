"""Every GPU-form kernel the suite runs on the SIMT executor is also compiled by NVRTC (issue 10
item 6): ``install()`` (called by tests/conftest.py) wraps ``kdsl.gpu.simt.run_simt`` so
that after a successful SIMT run of a function with device kernels (``backend="interp-cuda"``
calls and direct ``run_simt`` calls alike), ``kdsl_cuda.codegen.generate`` prints it and
``kdsl_cuda.build.compile_cubin`` compiles it for sm_90.  A failure is raised from the
``run_simt`` call, so it fails the test that ran the kernel.  Tensor-core (WMMA) kernels are
compiled like every other (issue 11) and counted apart ("tensor-core").  Memoised per function object and per source text
(NVRTC costs ~0.1 s per module).  ``KDSL_CUDA_COMPILE_ALL=0`` turns it off; it is off when
kdsl_cuda or the cuda wheels are missing.  A summary line ends the pytest report (under
pytest-xdist each worker runs its own hook and tests/conftest.py adds up their counts).
"""
from __future__ import annotations

import os
import time

STATS = {"runs": 0, "compiled": 0, "cached": 0, "tensor_core": 0, "seconds": 0.0}
_BY_FUNC: dict = {}        # id(func) -> (func, outcome): keeps func alive so ids stay unique
_BY_SOURCE: dict = {}      # source text -> outcome


def available() -> bool:
    if os.environ.get("KDSL_CUDA_COMPILE_ALL", "1") == "0":
        return False
    try:
        import kdsl_cuda.build  # noqa: F401
        import kdsl_cuda.codegen  # noqa: F401
        from kdsl_cuda import nvrtc
        nvrtc.library().version()     # libnvrtc through ctypes, else cuda.bindings
    except Exception:       # no NVRTC, a missing or broken wheel: the hook is off
        return False
    return True


def _tensor_core(func) -> bool:
    """Whether ``func`` holds tensor-core (WMMA) statements."""
    from kdsl.ir import nodes as n
    from kdsl.ir.visitor import collect
    return bool(collect(func.body, lambda x: type(x) in n.WMMA_STMTS))


def check(func) -> str:
    """NVRTC-compile ``func`` (memoised): "compiled" or "cached"; raises the codegen's or
    NVRTC's error otherwise."""
    from kdsl_cuda.build import compile_cubin
    from kdsl_cuda.codegen import generate
    STATS["runs"] += 1
    hit = _BY_FUNC.get(id(func))
    if hit is not None and hit[0] is func:
        STATS["cached"] += 1
        return "cached"
    t0 = time.perf_counter()
    try:
        src = generate(func).source
        if src not in _BY_SOURCE:
            cubin = compile_cubin(src, name=f"{func.name}.cu")
            if cubin[:4] != b"\x7fELF":
                raise AssertionError(f"NVRTC gave no cubin for {func.name}")
            _BY_SOURCE[src] = "compiled"
            STATS["compiled"] += 1
            STATS["tensor_core"] += _tensor_core(func)
        else:
            STATS["cached"] += 1
        _BY_FUNC[id(func)] = (func, "compiled")
        return "compiled"
    finally:
        STATS["seconds"] += time.perf_counter() - t0


def install() -> bool:
    """Wrap ``run_simt`` where the suite reaches it; False when the hook is off."""
    if not available():
        return False
    import kdsl.gpu.simt as simt
    import kdsl.gpu.simt.compiled as compiled
    original = simt.run_simt
    if getattr(original, "_nvrtc_hook", False):
        return True

    def run_simt(func, *args, **kwargs):
        original(func, *args, **kwargs)
        if func.kernels:                    # GPU form (the cuda table's host program)
            check(func)

    run_simt._nvrtc_hook = True
    run_simt.__doc__ = original.__doc__
    simt.run_simt = run_simt
    compiled.run_simt = run_simt
    return True


def merge(stats: dict) -> None:
    """Add one pytest-xdist worker's ``STATS`` to this process's (the controller's): each
    worker compiles the kernels it runs, so a module two workers run is counted twice."""
    STATS["workers"] = STATS.get("workers", 0) + 1
    for k, v in stats.items():
        if k != "workers":
            STATS[k] += v


def summary() -> str:
    s = STATS
    who = f" ({s['workers']} pytest-xdist workers together)" if s.get("workers") else ""
    return (f"cuda codegen hook{who}: {s['runs']} GPU-form SIMT runs, {s['compiled']} modules "
            f"NVRTC-compiled ({s['tensor_core']} with tensor cores), {s['cached']} memoised, "
            f"{s['seconds']:.1f} s in codegen + NVRTC")
