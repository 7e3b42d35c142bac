"""The cpu backend's runtime: LLVM IR source, the GIL released during kernels, the disk cache
(a new process loads object code without compiling; a corrupt entry is rebuilt)."""
import glob
import json
import marshal
import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import kdsl as kd
from kdsl.ir import nodes as n

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@kd.kernel
def heavy(A):
    n_, m = A.shape
    k = kd.reduce_axis(m, name="k")
    return kd.compute((n_,), lambda i: kd.sum(kd.sin(A[i, k]) * kd.cos(A[i, k]), axis=k))


def test_source_is_llvm_ir():
    src = heavy.source(kd.TensorSpec(("n", "m"), kd.float32), backend="cpu")
    assert "define i32 @\"kdsl_heavy\"(ptr %\"buffers\", ptr %\"scalars\", ptr %\"runtime\")" in src
    assert "kdsl.sin.f32" in src and "kdsl.cos.f32" in src   # inline vector math (vecmath.py)


def test_kernel_runs_without_the_gil(rng):
    a = rng.standard_normal((2000, 4000)).astype(np.float32)
    ref = (np.sin(a.astype(np.float64)) * np.cos(a)).sum(1)
    np.testing.assert_allclose(heavy(a, backend="cpu"), ref, rtol=1e-3, atol=1e-2)  # compiled now
    out = {}
    t0 = time.perf_counter()
    heavy(a, backend="cpu")
    one = time.perf_counter() - t0
    th = threading.Thread(target=lambda: out.setdefault("r", heavy(a, backend="cpu")))
    count = 0
    th.start()
    while th.is_alive():      # this loop needs the GIL: it only spins if the kernel let it go
        count += 1
    th.join()
    assert "r" in out
    # with the GIL held for the whole kernel, the loop would run a handful of times at most
    assert count > 1000, (count, one)


def test_intrinsic_is_a_compile_error():
    from kdsl_cpu.codegen import generate
    a = n.Buffer("A", kd.float32, (n.const(4),), param=True)
    func = n.LoweredFunc("wmma_user", (a,), (), (), n.Intrinsic("wmma.load_a", (a,)))
    with pytest.raises(kd.BackendCompileError, match="wmma.load_a"):
        generate(func)


_SCRIPT = textwrap.dedent("""
    import json, os, sys
    import numpy as np
    import kdsl as kd
    import kdsl_cpu
    from kdsl_cpu import jit
    if os.environ.get("FORBID_COMPILE"):
        def no(*a, **k):
            raise SystemExit("compile_object was called")
        jit.compile_object = no
    kd.register_backend("cpu", kdsl_cpu.backend)

    @kd.kernel
    @kd.schedule("cpu", parallel="i0", vectorize=4)
    def f(A, x):
        return kd.exp(A * x).sum(axis=1)

    a = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    r = f(a, 0.5, backend="cpu")
    ok = bool(np.allclose(r, np.exp(a * 0.5).sum(1), rtol=1e-5))
    st = kdsl_cpu.backend.stats
    print(json.dumps({"ok": ok, **{k: st[k] for k in ("compiled", "cache_hits", "lowered")}}))
""")


#: the head of the cpu backend's object-code entries (kdsl_cpu/backend.py ``_MAGIC``)
_CPU_MAGIC = b"KDSLCPU2"


def _run(cache_dir, forbid=False):
    env = dict(os.environ)
    env["KDSL_CACHE_DIR"] = str(cache_dir)
    env["PYTHONPATH"] = ROOT
    env.pop("KDSL_CACHE", None)
    if forbid:
        env["FORBID_COMPILE"] = "1"
    p = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr + p.stdout
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_disk_cache_across_processes_and_corrupt_entries(tmp_path):
    first = _run(tmp_path)
    assert first == {"ok": True, "compiled": 1, "cache_hits": 0, "lowered": 1}
    second = _run(tmp_path, forbid=True)          # a new process: loads, never compiles
    assert second == {"ok": True, "compiled": 0, "cache_hits": 1, "lowered": 0}
    entries = [p for p in glob.glob(os.path.join(str(tmp_path), "*", "*.bin"))
               if _CPU_MAGIC in open(p, "rb").read()]     # the kernel (not the OpenMP runtime)
    assert len(entries) == 1
    blob = bytearray(open(entries[0], "rb").read())
    blob[len(blob) // 2] ^= 0xFF                  # flip a byte of the object code
    open(entries[0], "wb").write(bytes(blob))
    third = _run(tmp_path)                        # corrupt: dropped and rebuilt
    assert third == {"ok": True, "compiled": 1, "cache_hits": 0, "lowered": 1}
    fourth = _run(tmp_path, forbid=True)
    assert fourth == {"ok": True, "compiled": 0, "cache_hits": 1, "lowered": 0}


def _object(entry: str, calls_missing: bool) -> bytes:
    """Object code defining ``entry`` (optionally calling a function no process defines)."""
    from kdsl_cpu import jit
    call = "  call void @kdsl_no_such_function()\n" if calls_missing else ""
    return jit.compile_object(f"declare void @kdsl_no_such_function()\n"
                              f"define i32 @{entry}() {{\n{call}  ret i32 0\n}}\n")


@pytest.mark.parametrize("case", ["not_elf", "other_machine", "no_entry", "unresolved", "truncated"])
def test_cache_payload_validated_before_loading(tmp_path, case):
    """An entry whose header and checksum are consistent but whose payload is not loadable object
    code for this process is discarded and rebuilt -- never handed to the JIT (which would crash
    every later run until the cache directory is deleted by hand)."""
    from kdsl.runtime import cache as disk
    assert _run(tmp_path) == {"ok": True, "compiled": 1, "cache_hits": 0, "lowered": 1}
    (path,) = [p for p in glob.glob(os.path.join(str(tmp_path), "*", "*.bin"))
               if _CPU_MAGIC in open(p, "rb").read()]
    key = os.path.basename(path)[:-4]
    payload = disk._unpack(open(path, "rb").read(), key)
    head_len = int.from_bytes(payload[8:12], "little")
    head, obj = payload[:12 + head_len], payload[12 + head_len:]
    entry = marshal.loads(head[12:])["entry"]
    obj = {"not_elf": lambda: b"this is not object code" * 10,
           "other_machine": lambda: obj[:18] + (183 if obj[18] != 183 else 62).to_bytes(2, "little")
           + obj[20:],
           "no_entry": lambda: _object("kdsl_something_else", False),
           "unresolved": lambda: _object(entry, True),
           "truncated": lambda: obj[:200]}[case]()
    with open(path, "wb") as f:   # a consistent header and checksum around the bad payload
        f.write(disk._pack(key, head + obj))
    assert _run(tmp_path) == {"ok": True, "compiled": 1, "cache_hits": 0, "lowered": 1}   # rebuilt, no crash
    assert _run(tmp_path, forbid=True) == {"ok": True, "compiled": 0, "cache_hits": 1, "lowered": 0}


def test_unloadable_object_is_an_error_not_a_crash():
    """Object code with an unresolvable call raises BackendCompileError instead of jumping to 0."""
    from kdsl.errors import BackendCompileError
    from kdsl_cpu import jit
    with pytest.raises(BackendCompileError, match="kdsl_no_such_function"):
        jit.load_object(_object("kdsl_entry", True), "kdsl_entry")


def test_compiles_from_several_threads(rng):
    """Kernels compile and run concurrently (LLVM work is serialised inside the backend)."""
    errors, results = [], {}

    def work(j):
        try:
            @kd.kernel
            def add_j(A):
                return A + j
            results[j] = add_j(np.full((3, 4), 1.0), backend="cpu")
        except Exception as e:  # surfaced below
            errors.append(e)
    ts = [threading.Thread(target=work, args=(j,)) for j in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    for j in range(6):
        np.testing.assert_array_equal(results[j], np.full((3, 4), 1.0 + j))
