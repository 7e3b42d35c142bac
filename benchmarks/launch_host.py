"""Host (Python) cost of a cached cuda call, without a GPU: a fake driver and fake torch tensors.

    python3 benchmarks/launch_host.py [--profile] [--source] [--cupy] [--real-torch | --real-cupy]

Runs the real call path of ``add(a, b, out=c)`` and ``add(a, b)`` on 8 float32 elements --
``Kernel.__call__``, the generated fast launcher (``kdsl_cuda.runtime.fastlaunch``), the
normal path when it declines -- with the driver replaced: ``cuLaunchKernel`` is a C function
that returns 0 (built with ``cc`` into a temporary folder; a Python stub when there is no C
compiler), loaded through ctypes like the real one, so the ctypes call cost stays in the
numbers.  The cubin is still compiled with NVRTC (no device needed) and never loaded.

Without a GPU machine torch is faked too (``--real-torch`` uses an installed torch with CUDA):
a module named ``torch`` whose ``Tensor`` answers ``dtype``, ``shape``, ``data_ptr()``,
``stride()``, ``is_contiguous()``, ``get_device()`` and ``torch.empty`` from C-implemented
callables (bound builtins), so an attribute read costs about what a C getter does.  Real torch
getters cost more (tens to a few hundred ns each: measure them on the GPU machine); the fake
numbers are kdsl's own Python work plus one ctypes call.  ``--cupy`` calls the kernel on fake
CuPy arrays instead (tests/cuda_runtime/fake_cupy.py: CuPy's Cython fields as C getters, its
``flags`` a new object per read); ``--real-cupy`` on an installed CuPy, on a GPU.  Prints us
per call (minimum and median of batches) for the fast launcher, the whole call, and the normal
(slow) path.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]
sys.path.insert(0, ROOT)

N = 8


# ----------------------------------------------------------------- a fake torch
def fake_torch() -> types.ModuleType:
    """tests/cuda_runtime/fake_torch.py's fake ``torch`` (loaded by path)."""
    return _fake("torch")


def fake_cupy() -> types.ModuleType:
    """tests/cuda_runtime/fake_cupy.py's fake ``cupy`` (loaded by path)."""
    return _fake("cupy")


def _fake(lib) -> types.ModuleType:
    import importlib.util
    path = os.path.join(ROOT, "tests", "cuda_runtime", f"fake_{lib}.py")
    spec = importlib.util.spec_from_file_location(f"kdsl_fake_{lib}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.make()


# ----------------------------------------------------------------- a fake driver
def noop_launch():
    """A C ``int noop(...) { return 0; }`` through ctypes (None: no C compiler here)."""
    d = tempfile.mkdtemp(prefix="kdsl_noop_")
    src, so = os.path.join(d, "noop.c"), os.path.join(d, "noop.so")
    with open(src, "w") as f:
        f.write("int noop(void) { return 0; }\n")
    try:
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", src, "-o", so], check=True,
                       capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return so


def install_fake_driver():
    """Replace kdsl_cuda's driver with a fake whose launches are C no-ops (or Python stubs)."""
    from kdsl_cuda.runtime import driver, fastlaunch, launch, memory
    so = noop_launch()

    class FakeLib:
        def __init__(self):
            if so is not None:
                self.raw_launch = ctypes.CDLL(so).noop
                self.raw_launch.restype = ctypes.c_int
                typed = ctypes.CDLL(so).noop
                typed.argtypes = driver._SIGNATURES["cuLaunchKernel"]
                typed.restype = ctypes.c_int
                self.cuLaunchKernel = typed
            else:
                self.raw_launch = self.cuLaunchKernel = lambda *a: 0

        def check(self, code, what):
            if code:
                raise driver.CudaError(f"{what} failed with {code}", code)

        def cuModuleLoadData(self, mod, data):
            return 0

        def cuModuleGetFunction(self, f, mod, name):
            f._obj.value = 0x1000 + len(name)
            return 0

    class FakeDevice:
        arch, max_shared, pools, ordinal = "sm_90", 227 * 1024, False, 0

    class FakeAllocation:
        next_ptr = 1 << 44

        def __init__(self, nbytes, device=0, stream=0):
            self.ptr = FakeAllocation.next_ptr
            FakeAllocation.next_ptr += max(int(nbytes), 1) + 256

    lib = FakeLib()
    try:
        import cuda.core  # noqa: F401  (NVRTC, through cuda-core)
    except ImportError:   # no NVRTC for this Python: the cubin is never loaded, any ELF will
        from kdsl_cuda.runtime import cubin_cache    # do (and none goes to the disk cache)
        cubin_cache.cached_cubin = lambda source, arch, name, fresh=False: b"\x7fELF" + bytes(60)
    driver.lib = lambda: lib
    driver.device = lambda o=0: FakeDevice()
    driver.device_count = lambda: 1
    for mod in (memory, launch, fastlaunch):
        mod.Allocation = FakeAllocation
    return "C no-op via ctypes" if so else "Python stub (no C compiler)"


# ----------------------------------------------------------------- timing
def per_call_us(fn, batch=2000, batches=25, sync=None) -> tuple:
    """(minimum, median) over batches of the mean time of one call, in microseconds (the
    minimum: this machine may be shared, and other work only ever adds time).  ``sync``: run
    (untimed) after each batch, so that a GPU's launch queue never fills."""
    for _ in range(batch):
        fn()
    per = []
    for _ in range(batches):
        if sync is not None:
            sync()
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        per.append((time.perf_counter() - t0) / batch)
    return min(per) * 1e6, statistics.median(per) * 1e6


def _real_extras(torch, a, b, c, fo):
    """Rows that split a real call's cost: torch's getters and allocators, the launch alone."""
    ns = fo[2].__globals__        # the generated launcher's namespace (its codes, function handle)
    dev = torch.device("cuda", 0)
    rows = [("  a.dtype, a.shape, a.data_ptr()", lambda: (a.dtype, a.shape, a.data_ptr())),
            ("  a.is_contiguous(), a.get_device()", lambda: (a.is_contiguous(), a.get_device())),
            ("  a.__cuda_array_interface__", lambda: a.__cuda_array_interface__),
            ("  torch.empty(8, dtype, device=0)", lambda: torch.empty((N,), dtype=a.dtype, device=0)),
            ("  torch.empty(8, dtype, device=dev)", lambda: torch.empty((N,), dtype=a.dtype,
                                                                        device=dev)),
            ("  a.new_empty((8,))", lambda: a.new_empty((N,))),
            ("  torch.empty_like(a)", lambda: torch.empty_like(a)),
            ("  torch.add(a, b, out=c)", lambda: torch.add(a, b, out=c))]
    vals = (a.data_ptr(), b.data_ptr(), c.data_ptr(), N, N)
    stream = torch._C._cuda_getCurrentRawStream(0)
    launcher = ns.get("_L0")       # the compiled helper's Launcher (grid bound: 8 elements)
    if launcher is not None and "_L0(stream, p" in fo[2].__kdsl_source__:
        rows.append(("  launch: compiled helper", lambda: launcher(stream, *vals)))
    try:
        import cupy as cp
        import numpy as np
        k = cp.RawKernel(r"""extern "C" __global__ void k(const float* a, const float* b,
            float* c, int n) { int i = threadIdx.x; if (i < n) c[i] = a[i] + b[i]; }""", "k")
        ca, cb, cc = cp.from_dlpack(a), cp.from_dlpack(b), cp.from_dlpack(c)
        n32 = np.int32(N)
        rows.append(("cupy RawKernel (peer)", lambda: k((1,), (32,), (ca, cb, cc, n32))))
    except Exception as e:     # noqa: BLE001  (no CuPy here: its row says so)
        print(f"# cupy: {type(e).__name__}: {e}")
    return rows


def _real_cupy_extras(cp, a, b, c):
    """Rows that split a real CuPy call's cost: its getters, allocators and RawKernel."""
    import numpy as np
    rows = [("  a.dtype, a.shape, a.data.ptr", lambda: (a.dtype, a.shape, a.data.ptr)),
            ("  a._c_contiguous", lambda: a._c_contiguous),
            ("  a.flags.c_contiguous", lambda: a.flags.c_contiguous),
            ("  get_current_stream().ptr", lambda: cp.cuda.get_current_stream().ptr),
            ("  get_current_stream(0).ptr", lambda: cp.cuda.get_current_stream(0).ptr),
            ("  cupy.ndarray((8,), float32)", lambda: cp.ndarray((N,), np.float32)),
            ("  cupy.empty(8, float32)", lambda: cp.empty((N,), np.float32)),
            ("  cupy.empty_like(a)", lambda: cp.empty_like(a))]
    k = cp.RawKernel(r"""extern "C" __global__ void k(const float* a, const float* b,
        float* c, int n) { int i = threadIdx.x; if (i < n) c[i] = a[i] + b[i]; }""", "k")
    n32 = np.int32(N)

    def fresh():
        o = cp.empty_like(a)
        k((1,), (32,), (a, b, o, n32))
        return o
    rows += [("cupy RawKernel (peer)", lambda: k((1,), (32,), (a, b, c, n32))),
             ("cupy empty+RawKernel (peer)", fresh)]
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", action="store_true", help="cProfile 20000 calls of each form")
    ap.add_argument("--source", action="store_true", help="print the generated fast launchers")
    ap.add_argument("--cupy", action="store_true", help="call the kernel on CuPy arrays")
    real = ap.add_mutually_exclusive_group()
    real.add_argument("--real-torch", action="store_true", help="the installed torch, on a GPU")
    real.add_argument("--real-cupy", action="store_true",
                      help="the installed CuPy, on a GPU (implies --cupy)")
    args = ap.parse_args(argv)
    use_cupy = args.cupy or args.real_cupy
    sync = torch = cp = None
    if args.real_torch and use_cupy:
        ap.error("--real-torch times torch tensors: use --real-cupy for CuPy arrays")
    if args.real_torch:
        import torch
        sync = torch.cuda.synchronize
        print(f"# torch {torch.__version__} on {torch.cuda.get_device_name()}; "
              f"python {sys.version.split()[0]}")
    elif args.real_cupy:
        import cupy as cp
        sync = cp.cuda.runtime.deviceSynchronize
        name = cp.cuda.runtime.getDeviceProperties(0)["name"]
        name = name.decode() if isinstance(name, bytes) else name
        print(f"# cupy {cp.__version__} on {name}; python {sys.version.split()[0]}")
    else:
        for lib in ("torch", "cupy"):
            if lib in sys.modules:
                raise SystemExit(f"{lib} is already imported")
        if use_cupy:
            cp = sys.modules["cupy"] = fake_cupy()
        else:
            torch = sys.modules["torch"] = fake_torch()
        how = install_fake_driver()
        print(f"# fake {'cupy' if use_cupy else 'torch'}, fake driver ({how}); "
              f"python {sys.version.split()[0]}")
    import kdsl as kd
    import kdsl_cuda
    try:
        from kdsl_cuda.runtime import native
    except ImportError:       # an older checkout (the baseline): no compiled helper
        native = None
    if "cuda" not in kd.backends():
        kd.register_backend("cuda", kdsl_cuda.backend)

    @kd.kernel
    def add(a, b):
        return a + b

    if args.real_torch:
        a, b = torch.rand(N, device="cuda"), torch.rand(N, device="cuda")
        c = torch.empty_like(a)
    elif args.real_cupy:
        a, b = cp.random.rand(N, dtype=cp.float32), cp.random.rand(N, dtype=cp.float32)
        c = cp.empty_like(a)
    elif use_cupy:
        import numpy as np
        a, b, c = (cp.ndarray((N,), np.float32) for _ in range(3))
    else:
        a, b, c = (torch.Tensor((N,), torch.float32) for _ in range(3))
    for _ in range(5):          # compile, promote the fast launchers
        add(a, b, out=c)
        add(a, b)
    fo, fa = add._fast_out, add._fast
    assert fo is not None and fa is not None, "no fast launchers were promoted"
    src = fo[2].__kdsl_source__
    launch = "compiled helper" if "_L0(" in src else "ctypes cuLaunchKernel"
    print(f"# fast launchers launch through: {launch}" +
          (f" (helper: {native.error})" if native is not None and native.error else ""))
    if args.real_torch or args.real_cupy:       # the results, before anything is timed
        c.fill(float("nan")) if args.real_cupy else c.fill_(float("nan"))
        assert add(a, b, out=c) is c and bool((c == a + b).all()), "add(out=) is wrong"
        assert bool((add(a, b) == a + b).all()), "add() is wrong"
    if args.source:
        print(fo[2].__kdsl_source__)
        print(fa[2].__kdsl_source__)
    # the (args, out) entries: (name, gen, packed, device), or (name, gen, fn, device, packed)
    pack_o, pack_a = fo[-1] if len(fo) > 4 else fo[2], fa[-1] if len(fa) > 4 else fa[2]
    ab = (a, b)
    rows = [("add(a, b, out=c)", lambda: add(a, b, out=c)),
            ("  fast launcher alone (out=)", lambda: pack_o(ab, c)),
            ("add(a, b)", lambda: add(a, b)),
            ("  fast launcher alone (allocating)", lambda: pack_a(ab, None)),
            # the normal path: a call no fast launcher serves (stream= given)
            ("add(a, b, out=c, stream=0)", lambda: add(a, b, out=c, stream=0)),
            ("add(a, b, stream=0)", lambda: add(a, b, stream=0))]
    if args.real_torch:
        rows += _real_extras(torch, a, b, c, fo)
    elif args.real_cupy:
        rows += _real_cupy_extras(cp, a, b, c)
    elif use_cupy:
        import numpy as np
        rows += [("  fake cupy.ndarray alone", lambda: cp.ndarray((N,), np.float32))]
    else:
        rows += [("  fake torch.empty alone", lambda: torch.empty((N,), dtype=torch.float32,
                                                                   device=0))]
    real = args.real_torch or args.real_cupy
    batch = 200 if real else 2000
    print(f"{'us per call':36s} {'min':>7s} {'median':>7s}")
    for title, fn in rows:
        lo, med = per_call_us(fn, batch=batch, batches=40, sync=sync)
        print(f"{title:36s} {lo:7.3f} {med:7.3f}")
    if args.profile:
        import cProfile
        import pstats
        for title, fn in rows[:1] + rows[2:3]:
            print(f"\n# cProfile, 20000 x {title}")
            pr = cProfile.Profile()
            pr.enable()
            for _ in range(20000):
                fn()
            pr.disable()
            pstats.Stats(pr).sort_stats("tottime").print_stats(12)
    return 0


if __name__ == "__main__":
    sys.exit(main())
