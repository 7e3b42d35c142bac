"""kdsl's ``cuda`` backend against PyTorch, CuPy and Triton on one GPU, in one run (issue #10).

    python3 benchmarks/cuda.py [--quick] [--only NAME[,NAME]] [--json PATH]
    python3 benchmarks/cuda.py --check        # no GPU needed: trace and lower every kernel

Every kdsl kernel runs its *default* cuda schedule (no hints) on torch CUDA tensors (the
device rule picks ``cuda``; kdsl launches on torch's current stream) and is checked, with a
NaN-poisoned ``out=`` too, against a float64 oracle before it is timed; so is every peer.
Times are medians of CUDA-event-timed batches (``torch.cuda.Event`` on the current stream,
after a warm-up, several calls per batch so that launch gaps vanish).  Bandwidth is bytes
moved (each input read once, each output written once) over time, as a fraction of the same
run's device-to-device copy (``dst.copy_(src)`` of 1 GiB, bytes read plus written).  Ratio =
peer time / kdsl time (above 1: kdsl is faster).  A kernel that raises or computes a wrong
result is a FAIL row (exception type and first line), never a crash of the whole run.

Peers get their best: cuDNN autotuning on (``cudnn.benchmark``) with TF32 off (kdsl computes
the 3x3 in float32); Triton's softmax at 8 and 16 warps, the faster counted; CuPy runs on
torch's current stream.  ``Python cost per launch`` is host wall time per call of a cached
2-input kernel on 8 floats, the median over batches of calls (the GPU is idle between
batches, never the bottleneck): kdsl on torch tensors, and (rows ``CuPy add``) kdsl on the
very CuPy arrays CuPy's RawKernel is timed on, its like-for-like peer.  ``cold compile`` runs in fresh processes with new, empty
``KDSL_CACHE_DIR``/``TRITON_CACHE_DIR``: each library first runs an unrelated kernel (driver,
context, compiler loaded), then a fresh row-sum kernel is timed from its definition to a
synchronized first result (cuda_peers.COLD_CHILD).

``--quick`` shrinks every size and skips torch.compile (a smoke run of the harness, < 60 s).
The JSON goes to ``--json PATH``, else ``$OUT/cuda_<gpu>.json`` when ``$OUT`` is set, else
``benchmarks/results/cuda_<gpu>.json``.
"""
from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# This file is named cuda.py: with its folder on sys.path (Python puts it first when running a
# script) it would shadow cuda-python's ``cuda`` namespace package (cuda.core, cuda.pathfinder)
# that kdsl_cuda and CuPy import.  Drop the folder; load the helper module by its path.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]
sys.path.insert(0, ROOT)   # this checkout's kdsl and kdsl_cuda, not installed copies

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402

import numpy as np  # noqa: E402

import kdsl as kd  # noqa: E402


def _load(name):
    """benchmarks/cuda_<name>.py, loaded from its path (this folder is not on sys.path)."""
    spec = importlib.util.spec_from_file_location(f"kdsl_bench_cuda_{name}",
                                                  os.path.join(HERE, f"cuda_{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod   # Triton's jit and dataclasses look the module up
    spec.loader.exec_module(mod)
    return mod


peers_mod, M, R = _load("peers"), _load("measure"), _load("report")
O = _load("overhead")
sync, safe_sync, first_line, compare = M.sync, M.safe_sync, M.first_line, M.compare
gpu_ms, per_call_s, nbytes, shape_text = M.gpu_ms, M.per_call_s, M.nbytes, M.shape_text
judge, print_row, HEADER = R.judge, R.print_row, R.HEADER

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    torch = F = None
try:
    import cupy as cp
except Exception:   # not installed, or no usable CUDA for it: the CuPy rows say so
    cp = None
triton = peers_mod.triton


# ----------------------------------------------------------------- kdsl kernels (default schedules)
@kd.kernel
def rowsum(A):
    return A.sum(axis=1)


@kd.kernel
def colsum(A):
    return A.sum(axis=0)


@kd.kernel
def fullsum(A):
    return A.sum()


@kd.kernel
def argmax_rows(A):
    return kd.argmax(A, axis=1)


@kd.kernel
def conv3x3(I, W):                    # the seed's valid 3x3 correlation, index style
    n, m = I.shape
    di, dj = kd.reduce_axis(3, name="di"), kd.reduce_axis(3, name="dj")
    return kd.compute((n - 2, m - 2),
                      lambda i, j: kd.sum(I[i + di, j + dj] * W[di, dj], axis=(di, dj)),
                      name="C")


@kd.kernel
def softmax(X):
    e = kd.exp(X - X.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


EPS = 1e-5


@kd.kernel
def layernorm(X):                     # torch's layer_norm without weight and bias
    mu = X.mean(axis=1, keepdims=True)
    d = X - mu
    return d * kd.rsqrt((d * d).mean(axis=1, keepdims=True) + EPS)


@kd.kernel
def gelu_add(a, b):                   # exact (erf) GELU of a + b, torch's default
    x = a + b
    return 0.5 * x * (1.0 + kd.erf(x * 0.7071067811865476))


@kd.kernel
def add(a, b):
    return a + b


# ----------------------------------------------------------------- workloads
@dataclass
class Workload:
    """One row of the issue's table: kdsl kernel, inputs, oracles, peers and targets."""

    key: str
    title: str                 # with {shape}
    kernel: object
    shape: tuple               # full size
    quick: tuple               # --quick size
    inputs: object             # shape -> [(shape, "rand" | "randn" | "weights")]
    torch_oracle: object       # (*args) -> float64 (or exact) torch result
    np_oracle: object          # (*np args) -> numpy result (--check's SIMT run)
    tol: float
    peers: dict                # name -> (*args) -> fn() or {variant: fn()}
    targets: dict = field(default_factory=dict)   # peer -> minimum ratio
    bw_target: float | None = None                 # minimum fraction of copy bandwidth
    exact: bool = False        # integer results: must be equal
    tiny: tuple = (5, 67)      # --check's SIMT size


def _np_softmax(X):
    e = np.exp(X - X.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _np_layernorm(X):
    d = X - X.mean(axis=1, keepdims=True)
    return d / np.sqrt((d * d).mean(axis=1, keepdims=True) + EPS)


def _np_gelu_add(a, b):
    from math import erf
    x = a.astype(np.float64) + b
    return 0.5 * x * (1.0 + np.vectorize(erf)(x / np.sqrt(2.0)))


def _np_conv(I, W):
    n, m = I.shape
    out = np.zeros((n - 2, m - 2))
    for a in range(3):
        for b in range(3):
            out += I[a:a + n - 2, b:b + m - 2].astype(np.float64) * W[a, b]
    return out


def _torch_conv_oracle(I, W):
    """The 3x3 correlation in float64 as nine shifted slices (cuDNN's float64 path is slow)."""
    n, m = I.shape
    I64, W64 = I.double(), W.double().cpu()
    out = torch.zeros((n - 2, m - 2), dtype=torch.float64, device=I.device)
    for a in range(3):
        for b in range(3):
            out.add_(I64[a:a + n - 2, b:b + m - 2], alpha=float(W64[a, b]))
    return out


def _torch_conv(I, W):
    x, w = I[None, None], W[None, None]
    return lambda: F.conv2d(x, w)[0, 0]


def _cupy_sum(V):
    if cp is None:
        raise ImportError("cupy is not installed (or found no usable CUDA)")
    cV = cp.from_dlpack(V)          # the same device memory, no copy
    stream = cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)

    def run():
        with stream:                # on torch's current stream, where the events are
            return cp.sum(cV)
    return run


def _triton_softmax(X):
    if triton is None:
        raise ImportError("triton is not installed")
    return {f"{w} warps": (lambda w=w: peers_mod.triton_softmax(X, w)) for w in (8, 16)}


_compiled_gelu = []


def _torch_compile_gelu(a, b):
    if not _compiled_gelu:
        _compiled_gelu.append(torch.compile(lambda x, y: F.gelu(x + y)))
    fn = _compiled_gelu[0]
    return lambda: fn(a, b)


def _mat(shape):
    return [(shape, "rand")]


WORKLOADS = [
    Workload("rowsum", "row sum {shape} f32", rowsum, (16384, 16384), (4096, 4096), _mat,
             lambda A: torch.sum(A, dim=1, dtype=torch.float64),
             lambda A: A.astype(np.float64).sum(axis=1), 1e-4,
             {"torch.sum(dim=1)": lambda A: (lambda: torch.sum(A, dim=1))},
             {"torch.sum(dim=1)": 1.0}, bw_target=0.95),
    Workload("rowsum_tall", "row sum {shape} f32 (tall-skinny)", rowsum, (4194304, 256),
             (262144, 256), _mat, lambda A: torch.sum(A, dim=1, dtype=torch.float64),
             lambda A: A.astype(np.float64).sum(axis=1), 1e-4,
             {"torch.sum(dim=1)": lambda A: (lambda: torch.sum(A, dim=1))},
             {"torch.sum(dim=1)": 1.2}, tiny=(70, 6)),
    Workload("rowsum_wide", "row sum {shape} f32 (short-wide)", rowsum, (256, 4194304),
             (256, 262144), _mat, lambda A: torch.sum(A, dim=1, dtype=torch.float64),
             lambda A: A.astype(np.float64).sum(axis=1), 1e-4,
             {"torch.sum(dim=1)": lambda A: (lambda: torch.sum(A, dim=1))},
             {"torch.sum(dim=1)": 1.0}, tiny=(3, 700)),
    Workload("colsum", "column sum {shape} f32", colsum, (16384, 16384), (4096, 4096), _mat,
             lambda A: torch.sum(A, dim=0, dtype=torch.float64),
             lambda A: A.astype(np.float64).sum(axis=0), 1e-4,
             {"torch.sum(dim=0)": lambda A: (lambda: torch.sum(A, dim=0))},
             {"torch.sum(dim=0)": 1.0}),
    Workload("fullsum", "full sum {shape} f32", fullsum, (2 ** 28,), (2 ** 24,), _mat,
             lambda V: torch.sum(V, dtype=torch.float64),
             lambda V: V.astype(np.float64).sum(), 1e-4,
             {"torch.sum": lambda V: (lambda: torch.sum(V)), "cupy.sum": _cupy_sum},
             {"torch.sum": 1.0, "cupy.sum": 1.0}, tiny=(1000,)),
    Workload("argmax", "argmax rows {shape} f32", argmax_rows, (16384, 16384), (4096, 4096),
             _mat, lambda A: torch.argmax(A, dim=1), lambda A: A.argmax(axis=1), 0.0,
             {"torch.argmax": lambda A: (lambda: torch.argmax(A, dim=1))},
             {"torch.argmax": 1.0}, exact=True),
    Workload("conv3x3", "3x3 2-D reduction (seed) {shape} f32", conv3x3, (16384, 16384),
             (4096, 4096), lambda s: [(s, "rand"), ((3, 3), "weights")], _torch_conv_oracle,
             _np_conv, 1e-5, {"torch conv2d (cuDNN)": _torch_conv}, {}, bw_target=0.90,
             tiny=(9, 37)),
    Workload("softmax", "softmax {shape} f32", softmax, (8192, 8192), (2048, 2048),
             lambda s: [(s, "randn")], lambda X: torch.softmax(X.double(), dim=1), _np_softmax,
             1e-5, {"torch.softmax": lambda X: (lambda: torch.softmax(X, dim=1)),
                    "triton fused": _triton_softmax},
             {"torch.softmax": 1.0, "triton fused": 1.0}),
    Workload("layernorm", "layernorm {shape} f32 (no affine)", layernorm, (8192, 8192),
             (2048, 2048), lambda s: [(s, "randn")],
             lambda X: F.layer_norm(X.double(), X.shape[1:], eps=EPS), _np_layernorm, 1e-4,
             {"F.layer_norm": lambda X: (lambda: F.layer_norm(X, X.shape[1:], eps=EPS))},
             {"F.layer_norm": 1.0}),
    Workload("gelu", "gelu(a+b) {shape} f32", gelu_add, (2 ** 28,), (2 ** 24,),
             lambda s: [(s, "randn"), (s, "randn")],
             lambda a, b: F.gelu(a.double() + b.double()), _np_gelu_add, 1e-5,
             {"torch unfused": lambda a, b: (lambda: F.gelu(a + b)),
              "torch.compile": _torch_compile_gelu},
             {"torch unfused": 2.0}, tiny=(1000,)),
]
KEYS = [w.key for w in WORKLOADS] + ["overhead", "cold"]


# ----------------------------------------------------------------- one workload
def _out_check(w, args, got, want):
    """Run again into a NaN-poisoned (integers: -1) ``out=``: every element must be written.
    Returns a note when ``out=`` cannot be checked or raises, an error text when wrong."""
    if not torch.is_tensor(got):
        return None, f"out= not checked: the result is a {type(got).__name__}, not a torch tensor"
    out = torch.empty_like(got)
    out.fill_(float("nan") if out.is_floating_point() else -1)
    try:
        w.kernel(*args, out=out)
        sync()
    except Exception as e:
        safe_sync()
        return None, f"out= raised {first_line(e)}"
    bad = compare(out, want, w.tol, w.exact)
    return (None if bad is None else "with a poisoned out=: " + bad), None


def _run_kdsl(w, args, want, row, copy_bw):
    try:
        got = w.kernel(*args)
        sync()
        row["result_type"] = f"{type(got).__module__}.{type(got).__name__}"
        bad = compare(got, want, w.tol, w.exact)
        if bad is None:
            bad, note = _out_check(w, args, got, want)
            if note:
                row["notes"].append(note)
        if bad is not None:
            row["kdsl_error"] = "wrong result: " + bad
            return
        ms, per = gpu_ms(lambda: w.kernel(*args))
        row["kdsl_s"], row["kdsl_batches_ms"] = ms / 1e3, per
        row["bytes"] = sum(nbytes(a) for a in args) + nbytes(got)
        row["pct_copy"] = row["bytes"] / (ms / 1e3) / copy_bw
    except Exception as e:
        row["kdsl_error"] = first_line(e)
        safe_sync()


def _run_peer(w, pname, factory, args, want, row, quick):
    p = {"s": None, "error": None, "target": w.targets.get(pname), "ratio": None, "met": None}
    row["peers"][pname] = p
    if pname == "torch.compile" and quick:
        p["error"] = "skipped in --quick (compiles for tens of seconds)"
        return
    try:
        fns = factory(*args)
        fns = fns if isinstance(fns, dict) else {"": fns}
        best, wrong = None, []
        for variant, fn in fns.items():
            r = fn()
            sync()
            bad = compare(r, want, max(w.tol, 1e-4), w.exact)
            del r
            if bad is not None:
                wrong.append(f"{variant or pname}: wrong result: {bad}")
                continue
            ms, per = gpu_ms(fn)
            if len(fns) > 1:
                p.setdefault("variants_s", {})[variant] = ms / 1e3
            if best is None or ms < best[0]:
                best = (ms, variant, per)
        if best is None:
            p["error"] = "; ".join(wrong)
            return
        p["s"], p["batches_ms"] = best[0] / 1e3, best[2]
        if best[1]:
            p["variant"] = best[1]
    except Exception as e:
        p["error"] = first_line(e)
        safe_sync()


def run_workload(w: Workload, quick, copy_bw, gen) -> dict:
    """Inputs, oracle, kdsl checked then timed, each peer checked then timed: one row."""
    shape = w.quick if quick else w.shape
    row = {"key": w.key, "workload": w.title.format(shape=shape_text(shape)),
           "shape": list(shape), "kdsl_s": None, "kdsl_error": None, "pct_copy": None,
           "bw_target": w.bw_target, "peers": {}, "notes": []}
    try:
        args = M.make_inputs(w, shape, gen)
        want = w.torch_oracle(*args)
        sync()
    except Exception as e:
        row["kdsl_error"] = "inputs or oracle: " + first_line(e)
        safe_sync()
        return row
    _run_kdsl(w, args, want, row, copy_bw)
    for pname, factory in w.peers.items():
        sync()      # one library at a time
        _run_peer(w, pname, factory, args, want, row, quick)
    del args, want
    torch.cuda.empty_cache()
    return row


# ----------------------------------------------------------------- --check (no GPU needed)
def ensure_cuda_backend() -> str | None:
    """Register this checkout's kdsl_cuda as ``cuda`` when it is not installed."""
    if "cuda" in kd.backends():
        return None
    try:
        import kdsl_cuda
    except Exception as e:
        return f"kdsl_cuda does not import: {first_line(e)}"
    kd.register_backend("cuda", kdsl_cuda.backend)
    return "kdsl_cuda is not installed: registered this checkout's as backend 'cuda'"


def _check_cases():
    for w in WORKLOADS:
        yield w.key, w.kernel, [s for s, _ in w.inputs(w.shape)], w.inputs(w.tiny), \
            w.np_oracle, w.tol, w.exact
    yield "overhead", add, [(O.N_TINY,)] * 2, [((O.N_TINY,), "rand")] * 2, np.add, 0.0, False


def _lowering_summary(f) -> str:
    """Its device kernels with their launches, as the printed lowering shows them."""
    heads = [ln.strip().removeprefix("kernel ").rstrip(":") for ln in str(f).splitlines()
             if "<<<" in ln]
    parts = [f"{len(f.kernels)} kernel(s)"] + heads
    if f.workspaces:
        parts.append(f"{len(f.workspaces)} workspace(s)")
    return "; ".join(parts)


def check_mode(only, simt=True) -> int:
    """Trace and lower every kdsl kernel of the benchmark for ``cuda`` (symbolic shapes),
    print its CUDA size, and run it on the SIMT interpreter at a tiny size against numpy."""
    note = ensure_cuda_backend()
    if note:
        print(f"# {note}")
    rng = np.random.default_rng()
    total = lowered = simt_bad = 0
    for key, k, shapes, tiny, oracle, tol, exact in _check_cases():
        if only and key not in only:
            continue
        total += 1
        specs = [kd.TensorSpec((None,) * len(s), kd.float32) for s in shapes]
        tag = f"{key:<12} {k.__name__:<12}"
        try:
            f = k.lower(*specs, backend="cuda")
        except Exception as e:
            print(f"{tag} does not lower: {first_line(e)}", flush=True)
            continue
        lowered += 1
        msg = _lowering_summary(f)
        try:
            msg += f"; {len(k.source(*specs, backend='cuda').splitlines())} lines of CUDA"
        except Exception as e:
            msg += f"; source: {first_line(e)}"
        print(f"{tag} lowers: {msg}", flush=True)
        if not simt:
            continue
        args = [rng.standard_normal(s, dtype=np.float32) if d == "randn" else
                rng.random(s, dtype=np.float32) - (0.5 if d == "weights" else 0.0)
                for s, d in tiny]
        size = "x".join(map(str, tiny[0][0]))
        try:
            t0 = time.perf_counter()
            got = np.asarray(k(*args, backend="interp-cuda"))
            want = np.asarray(oracle(*args))
            if exact:
                ok = got.shape == want.shape and bool((got == want).all())
            else:
                scale = max(float(np.abs(want).max()), 1e-30)
                ok = got.shape == want.shape and float(np.abs(got - want).max()) / scale <= tol
            print(f"{'':<25} SIMT at {size}: {'ok' if ok else 'WRONG RESULT'} "
                  f"({time.perf_counter() - t0:.1f} s)", flush=True)
            simt_bad += not ok
        except Exception as e:
            simt_bad += 1
            print(f"{'':<25} SIMT at {size}: {first_line(e)}", flush=True)
    print(f"# {lowered} of {total} kernels lower for cuda"
          + (f"; {simt_bad} wrong or failing on the SIMT interpreter" if simt else ""))
    failed = total - lowered + simt_bad
    return 1 if failed else 0


# ----------------------------------------------------------------- main
def require_gpu():
    """Exit with a clear message unless torch, a CUDA device and kdsl_cuda's runtime are here."""
    hint = "(`python3 benchmarks/cuda.py --check` traces and lowers the kernels without a GPU)"
    if torch is None:
        sys.exit(f"benchmarks/cuda.py: needs PyTorch with CUDA, and torch is not installed {hint}")
    if not torch.cuda.is_available():
        sys.exit(f"benchmarks/cuda.py: torch {torch.__version__} finds no CUDA device {hint}")
    try:
        import kdsl_cuda
    except Exception as e:
        sys.exit(f"benchmarks/cuda.py: kdsl_cuda does not import ({first_line(e)}); install "
                 "it: python3 -m pip install --no-deps --no-build-isolation -e ./kdsl_cuda")
    available = getattr(kdsl_cuda, "is_available", None)
    if available is None:
        sys.exit("benchmarks/cuda.py: this kdsl_cuda cannot run kernels yet "
                 f"(no kdsl_cuda.is_available) {hint}")
    if not available():
        sys.exit("benchmarks/cuda.py: kdsl_cuda.is_available() is False: no usable device or "
                 f"driver for kdsl {hint}")
    note = ensure_cuda_backend()
    if note:
        print(f"# {note}")


def _versions() -> dict:
    out = {"python": platform.python_version(), "numpy": np.__version__,
           "kdsl": kd.__version__, "torch": torch.__version__, "torch_cuda": torch.version.cuda,
           "cudnn": torch.backends.cudnn.version()}
    for name, mod in (("cupy", cp), ("triton", triton)):
        out[name] = getattr(mod, "__version__", None)
    try:
        import kdsl_cuda
        out["kdsl_cuda"] = kdsl_cuda.__version__
    except Exception:
        pass
    try:   # whether cupy.sum goes through CUB (CUPY_ACCELERATORS)
        out["cupy_accelerators"] = [str(a) for a in cp._core.get_routine_accelerators()]
    except Exception:
        pass
    return out


def _json_path(arg, gpu_name) -> str:
    if arg:
        return arg
    slug = "h200" if "H200" in gpu_name else "".join(
        c if c.isalnum() else "_" for c in gpu_name.lower()).strip("_") or "gpu"
    base = os.environ.get("OUT") or os.path.join(ROOT, "benchmarks", "results")
    return os.path.join(base, f"cuda_{slug}.json")


def main(argv=None) -> int:
    """Parse the options; ``--check`` or the GPU run; print the table, write the JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="small sizes, no torch.compile: a smoke run of the harness (< 60 s)")
    ap.add_argument("--only", default="", help="comma-separated: " + ",".join(KEYS))
    ap.add_argument("--json", default=None, help="where the JSON goes (default: $OUT/ or "
                    "benchmarks/results/, cuda_<gpu>.json)")
    ap.add_argument("--check", action="store_true", help="no GPU: trace and lower every kdsl "
                    "kernel for cuda and run it on the SIMT interpreter at a tiny size")
    ap.add_argument("--no-simt", action="store_true", help="with --check: lower only")
    args = ap.parse_args(argv)
    only = {x.strip() for x in args.only.split(",") if x.strip()}
    unknown = sorted(only - set(KEYS))
    if unknown:
        ap.error(f"--only: unknown {', '.join(unknown)}; known: {', '.join(KEYS)}")
    if args.check:
        return check_mode(only, simt=not args.no_simt)
    require_gpu()

    if args.quick:
        M.REPS, M.BATCH_MS = 3, 2.0
    t_start = time.perf_counter()
    torch.backends.cudnn.benchmark = True       # cuDNN picks its fastest conv algorithm
    torch.backends.cudnn.allow_tf32 = False     # float32 as kdsl computes it, not TF32
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    seed = int(time.time_ns() % (2 ** 31))
    gen = torch.Generator(device=M.DEV).manual_seed(seed)
    copy = M.copy_bandwidth(args.quick)
    print(f"# kdsl cuda benchmark on {props.name} ({props.multi_processor_count} SMs, "
          f"{props.total_memory / 2 ** 30:.0f} GiB), {platform.node()}; "
          + ", ".join(f"{k} {v}" for k, v in _versions().items() if v) + "")
    print(f"# device-to-device copy: {copy['bytes_per_s'] / 1e12:.2f} TB/s "
          f"({copy['bytes'] / 2 ** 30:.1f} GiB in {R.fmt_s(copy['s'])}); ratio = peer time / "
          f"kdsl time (> 1: kdsl faster); seed {seed}{'; --quick' if args.quick else ''}",
          flush=True)
    print(HEADER, flush=True)
    results = []
    for w in WORKLOADS:
        if not only or w.key in only:
            results.append(judge(run_workload(w, args.quick, copy["bytes_per_s"], gen)))
            print_row(results[-1])
    if not only or "overhead" in only:
        for row in O.run_overhead(args.quick, add, M, peers_mod, torch, cp):
            results.append(judge(row))
            print_row(row)
    if not only or "cold" in only:
        results.append(judge(M.run_cold(args.quick, ROOT, peers_mod.COLD_CHILD)))
        print_row(results[-1])
    elapsed = time.perf_counter() - t_start
    # the whole table again at the end, where a truncated log still shows it
    print(f"\n# summary ({elapsed:.0f} s)\n{HEADER}")
    for row in results:
        print_row(row)
    for line in R.summary(results):
        print(line)
    meta = {"gpu": props.name, "sms": props.multi_processor_count,
            "memory_bytes": props.total_memory, "host": platform.node(), "seed": seed,
            "quick": args.quick, "reps": M.REPS, "batch_ms": M.BATCH_MS, "elapsed_s": elapsed,
            "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "versions": _versions(), "copy": copy}
    path = _json_path(args.json, props.name)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
    print(f"# wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
