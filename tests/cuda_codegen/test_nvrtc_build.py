"""The NVRTC step (issue 26, cold start): ``kdsl_cuda.nvrtc`` calls ``libnvrtc`` through ctypes
(no ``cuda.bindings`` import), gives what the ``cuda.bindings`` path gives, finds the library
where the wheels / toolkits put it and falls back; the generated module carries only the prelude
helpers it calls; a vectorized loop's lane guards are tested once where the last lane decides."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import kdsl as kd
from kdsl import dtypes as dt
from kdsl.errors import BackendCompileError, BackendUnavailable
from kdsl.ir import make as mk
from kdsl.ir import nodes as n
from kdsl_cuda import build, nvrtc
from kdsl_cuda.codegen import prelude
from kdsl_cuda.codegen.vector import _last_lane_decides

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SRC = 'extern "C" __global__ void k(float* x, int n) { if (threadIdx.x < n) x[threadIdx.x] = 2.0f; }'
BROKEN = 'extern "C" __global__ void broken(float* a) { a[0] = undefined_name; }'


def _softmax_fn(X):
    e = kd.exp(X - X.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


_softmax = kd.kernel(_softmax_fn)


def _bindings():
    bind = pytest.importorskip("cuda.bindings.nvrtc")
    return nvrtc.BindingsNvrtc(bind)


def _ctypes():
    lib = nvrtc.load_ctypes()
    if lib is None:
        pytest.skip("no libnvrtc found by the ctypes search")
    return lib


def test_cold_compile_imports_no_cuda_bindings():
    """A fresh process compiles a cubin without importing cuda.bindings / cuda.pathfinder."""
    script = ("import json, sys\nfrom kdsl_cuda import build, nvrtc\n"
              f"c = build.compile_cubin({SRC!r})\n"
              "print(json.dumps({'elf': c[:4].hex(), 'kind': nvrtc.library().kind,"
              " 'mods': [m for m in ('cuda.bindings', 'cuda.pathfinder', 'cuda.core')"
              " if m in sys.modules]}))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KDSL_NVRTC")}
    env["PYTHONPATH"] = ROOT
    p = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout.strip().splitlines()[-1])
    if r["kind"] != "ctypes":
        pytest.skip("no libnvrtc found by the ctypes search (cuda.bindings used)")
    assert r["elf"] == b"\x7fELF".hex() and r["mods"] == []


def test_ctypes_and_bindings_agree_byte_for_byte():
    """Same version, same cubin, same PTX, same log for a rejected source."""
    c, b = _ctypes(), _bindings()
    assert c.version() == b.version()
    src = (prelude.PRELUDE + SRC).encode()          # every helper parsed, inline PTX too
    args = build.nvrtc_args(build._nvrtc_options(build.options("sm_90")))
    for out in ("cubin", "ptx"):
        got, want = c.compile(src, b"s.cu", args, out), b.compile(src, b"s.cu", args, out)
        assert got[1] is None and want[1] is None
        assert got[0] == want[0] and len(got[0]) > 100
    bad_c, bad_b = c.compile(BROKEN.encode(), b"b.cu", args), b.compile(BROKEN.encode(), b"b.cu", args)
    assert bad_c[0] is None and bad_c[1] == bad_b[1]
    assert bad_c[1].startswith("NVRTC_ERROR_COMPILATION") and "undefined_name" in bad_c[1]


def test_rejection_error_and_ptx_through_ctypes(tmp_path, monkeypatch):
    monkeypatch.setenv("KDSL_CUDA_DUMP_DIR", str(tmp_path))
    with pytest.raises(BackendCompileError) as ei:
        build.compile_cubin(BROKEN, name="broken.cu")
    e = ei.value
    assert "NVRTC_ERROR_COMPILATION" in e.log and "undefined_name" in e.log
    assert open(e.source_path).read() == BROKEN and "sm_90" in e.repro
    with pytest.raises(BackendCompileError, match="PTX"):
        build.compile_ptx(BROKEN, name="broken.cu")
    ptx = build.compile_ptx(SRC)
    assert ".entry k(" in ptx and "\0" not in ptx


def test_search_order_and_explicit_library(tmp_path, monkeypatch):
    """Wheel layouts on sys.path first (cu13 before cuda_nvrtc), then the system loader's
    sonames, then $CUDA_PATH / $CUDA_HOME; $KDSL_NVRTC_LIBRARY alone when set."""
    for d in ("nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib"):
        os.makedirs(tmp_path / d)
    (tmp_path / "nvidia/cuda_nvrtc/lib/libnvrtc.so.12").write_bytes(b"")
    (tmp_path / "nvidia/cu13/lib/libnvrtc.so.13").write_bytes(b"")
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    monkeypatch.delenv("KDSL_NVRTC_LIBRARY", raising=False)
    monkeypatch.delenv("CONDA_PREFIX", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setenv("CUDA_HOME", "/opt/cuda")
    c = nvrtc.candidates()
    assert c[:2] == [str(tmp_path / "nvidia/cu13/lib/libnvrtc.so.13"),
                     str(tmp_path / "nvidia/cuda_nvrtc/lib/libnvrtc.so.12")]
    assert c[2:4] == list(nvrtc.SONAMES)
    assert c[4] == "/opt/cuda/lib64/libnvrtc.so.13" and len(c) == 8
    monkeypatch.setenv("KDSL_NVRTC_LIBRARY", "/x/libnvrtc.so.99")
    assert nvrtc.candidates() == ["/x/libnvrtc.so.99"]


def test_unloadable_candidates_are_skipped_and_bindings_are_the_fallback(tmp_path, monkeypatch):
    """An empty file where a library should be is skipped; with nothing loadable the
    cuda.bindings wrapper compiles (the same cubin)."""
    b = _bindings()
    fake = tmp_path / "libnvrtc.so.13"
    fake.write_bytes(b"not an ELF")
    monkeypatch.setattr(nvrtc, "_already_loaded", lambda: None)
    monkeypatch.setenv("KDSL_NVRTC_LIBRARY", str(fake))
    assert nvrtc.load_ctypes() is None
    nvrtc.library.cache_clear()
    try:
        lib = nvrtc.library()
        assert lib.kind == "cuda.bindings"
        args = build.nvrtc_args(build.options())
        assert lib.compile(SRC.encode(), b"k.cu", args) == b.compile(SRC.encode(), b"k.cu", args)
        # neither: BackendUnavailable saying where it looked and what to install
        nvrtc.library.cache_clear()
        monkeypatch.setitem(sys.modules, "cuda.bindings.nvrtc", None)
        with pytest.raises(BackendUnavailable, match="KDSL_NVRTC_LIBRARY.*pip install"):
            build.compile_cubin(SRC)
    finally:
        nvrtc.library.cache_clear()


def test_prelude_pieces_cover_it_and_follow_uses():
    assert "".join(p.text for p in prelude.PIECES) == prelude.PRELUDE
    names = [x for p in prelude.PIECES for x in p.defines]
    assert len(names) == len(set(names)) and {"kd_rh", "kd_cp_async", "kd_mma_bf16"} <= set(names)
    bare = prelude.prelude_for("")
    assert "typedef unsigned long long uint64_t;" in bare and "kd_" not in bare
    rh = prelude.prelude_for("x = kd_rh(y);")
    for f in ("kd_rh(", "kd_f2h(", "kd_h2f(", "kd_nan2h("):
        assert f in rh, f
    assert "kd_d2h" not in rh and "kd_fmax" not in rh
    mma = prelude.prelude_for("kd_mma_bf16(d, a, b, c, e, f, g, h, i, j, k);")
    assert "#define KD_MMA_F32" in mma and "KD_MMA_F32(kd_mma_bf16" in mma
    assert "KD_MMA_F32(kd_mma_f16," not in mma
    # every helper alone compiles (what it uses comes along), the whole prelude too
    calls = {"kd_cp_async": "kd_cp_async<16>((void*)x, (const void*)x, true);",
             "kd_cvtu64": "x[0] = (float)kd_cvtu64((double)x[1]);",
             "kd_rh": "x[0] = kd_rh(x[1]);", "kd_shfl_up": "x[0] = kd_shfl_up(0xffffffffu, x[1], 1);"}
    for name, call in calls.items():
        src = f'extern "C" __global__ void k(float* x) {{ {call} }}\n'
        assert build.compile_cubin(prelude.prelude_for(src) + src)[:4] == b"\x7fELF", name


def test_generated_module_has_only_the_helpers_it_calls():
    src = _softmax.source(np.zeros((5, 37), np.float32), backend="cuda")
    assert "kd_fmax<" in src and "kd_shfl_" in src
    for absent in ("kd_mma_f16", "kd_ldsm_x4", "kd_f2h", "kd_ipow", "kd_cvt32"):
        assert absent not in src, absent
    assert build.compile_cubin(src)[:4] == b"\x7fELF"


def _lane_guard_cases():
    v, x, m = (n.Var(dt.int32, name) for name in "vxm")
    lt = lambda a, b: mk.compare(n.CmpOp.LT, a, b)
    le = lambda a, b: mk.compare(n.CmpOp.LE, a, b)
    return v, [
        ([lt(mk.add(mk.mul(x, 4), v), m)], True),                       # x*4 + v < m
        ([le(mk.add(v, x), m), lt(x, m)], True),                        # <=, lane-free
        ([mk.all_of([lt(mk.add(x, v), m), lt(mk.add(v, 3), m)])], True),
        ([lt(m, mk.add(x, v))], False),                                 # m < x + v: falls
        ([lt(mk.sub(x, v), m)], False),                                 # x - v < m: falls
        ([lt(mk.mul(v, 2), m)], False),                                 # step 2
        ([mk.compare(n.CmpOp.NE, mk.add(x, v), m)], False),
    ]


def test_last_lane_decides_only_for_rising_upper_bounds():
    v, cases = _lane_guard_cases()
    for guards, want in cases:
        assert _last_lane_decides(guards, v) is want, guards


@kd.kernel
def _argmax_rows(A):
    return kd.argmax(A, axis=1)


@kd.kernel
def _cumsum_rows(x):
    return np.cumsum(x, axis=1)


def test_vector_lane_guards_are_one_test_and_shuffle_combines_have_no_copies():
    """Softmax rows of 37 (a tail, guarded lanes): each kd_vok's lane test is printed once (the
    last lane's); every shuffle combine is one assignment; argmax's two-value combine goes
    through temporaries; a scan's shared operand is read once into a register.  All compile."""
    import re
    src = _softmax.source(np.zeros((5, 37), np.float32), backend="cuda")
    oks = re.findall(r"bool (kd_vok\w*) =", src)
    assert oks
    for ok in oks:
        tests = re.findall(r"\{ const int \w+ = (\d+); %s = %s && " % (ok, ok), src)
        assert tests in ([], ["3"]), (ok, tests)
    assert re.search(r"\{ const int \w+ = 3; kd_vok\w* = ", src)
    assert re.search(r"(kd_v\d+) = kd_fmax<float>\(\1, kd_o\w+\);", src)
    assert re.search(r"(kd_v\d+) = \(\1 \+ kd_o\w+\);", src)
    assert "const float x" not in src and "kd_new" not in src
    arg = _argmax_rows.source(np.zeros((5, 37), np.float32), backend="cuda")
    assert re.search(r"const int64_t kd_new\w* = .*\n\s*const float kd_new", arg)
    scan = _cumsum_rows.source(np.zeros((5, 300), np.float32), backend="cuda")
    assert re.search(r"const float (kd_y\w*) = kd_red\w*\[\w+\];\n\s*(kd_pre\w*) = \(\2 \+ \1\);", scan)
    for text in (src, arg, scan):
        assert build.compile_cubin(text)[:4] == b"\x7fELF"


def test_rolled_fallback_option_keeps_the_fast_path(monkeypatch):
    """vector.ROLLED_FALLBACK (off by default; ofc.py measures it) rolls only the scalar
    fallback loops that index no per-thread array by the lane; the rest of the text is
    unchanged and the module compiles."""
    import re
    from kdsl_cuda.codegen import vector
    X = np.zeros((5, 37), np.float32)
    plain = kd.kernel(_softmax_fn).source(X, backend="cuda")
    monkeypatch.setattr(vector, "ROLLED_FALLBACK", True)
    rolled = kd.kernel(_softmax_fn).source(X, backend="cuda")
    assert "#pragma unroll 1" not in plain
    loops = re.findall(r"#pragma unroll 1\n( *)for \(.*\n((?:.*\n)*?)\1\}", rolled)
    # the copy-in and the store loops roll; the reductions index their per-thread partials
    # (max_rf[lane]) by the lane: rolled, those would live in local memory
    assert len(loops) == rolled.count("#pragma unroll 1") == 2
    assert all("_rf[" not in body for _, body in loops) and "sum_rf[" in rolled
    assert re.sub(r"\n\s*#pragma unroll 1", "", rolled) == plain
    assert build.compile_cubin(rolled)[:4] == b"\x7fELF"


def _cubin_args(monkeypatch, source):
    """NVRTC's command line ``compile_cubin`` gives for ``source`` (the compile still runs)."""
    seen = []
    real = build._try_compile

    def spy(lib, src, opts, output="cubin"):
        seen.append(build.nvrtc_args(opts))
        return real(lib, src, opts, output)
    monkeypatch.setattr(build, "_try_compile", spy)
    assert build.compile_cubin(source)[:4] == b"\x7fELF"
    return seen[-1]


def test_fast_compile_auto_is_per_module(monkeypatch):
    """Unset KDSL_CUDA_FAST_COMPILE is ``auto``: memory-bound modules (a softmax, an elementwise
    chain) carry the codegen's mark and compile with --Ofast-compile=min; a register-tiled
    matmul keeps full optimisation; ``0`` turns it off everywhere, ``min`` on everywhere."""
    from kdsl_cuda.codegen.module import LIGHT_MARK
    monkeypatch.delenv("KDSL_CUDA_FAST_COMPILE", raising=False)
    if tuple(int(x) for x in build.nvrtc_version().split(".")[:2]) < (12, 8):
        pytest.skip("NVRTC older than 12.8 has no --Ofast-compile")
    x = np.zeros((64, 300), np.float32)
    soft = _softmax.source(x, backend="cuda")
    axpy = kd.kernel(lambda a, b: 2.0 * a + b).source(x, x, backend="cuda")
    a = np.zeros((256, 256), np.float32)
    mm = kd.kernel(lambda a, b: a @ b).source(a, a, backend="cuda")
    assert soft.startswith(LIGHT_MARK) and axpy.startswith(LIGHT_MARK)
    assert LIGHT_MARK not in mm
    assert b"--Ofast-compile=min" in _cubin_args(monkeypatch, soft)
    assert not any(x.startswith(b"--Ofast") for x in _cubin_args(monkeypatch, mm))
    monkeypatch.setenv("KDSL_CUDA_FAST_COMPILE", "0")
    assert not any(x.startswith(b"--Ofast") for x in _cubin_args(monkeypatch, soft))
    monkeypatch.setenv("KDSL_CUDA_FAST_COMPILE", "min")
    assert b"--Ofast-compile=min" in _cubin_args(monkeypatch, mm)


def test_rejected_sources_are_dumped_where_no_import_finds_them(monkeypatch, tmp_path):
    """The default dump folder is not a Python identifier: a script run from the temp folder
    once imported kdsl's own dump folder ``kdsl_cuda`` in place of the package."""
    monkeypatch.delenv("KDSL_CUDA_DUMP_DIR", raising=False)
    monkeypatch.setattr(build.tempfile, "gettempdir", lambda: str(tmp_path))
    path = build.dump_source(BROKEN, "broken.cu")
    folder = os.path.basename(os.path.dirname(path))
    assert os.path.dirname(os.path.dirname(path)) == str(tmp_path)
    assert not folder.isidentifier()
