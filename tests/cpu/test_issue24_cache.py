"""Issue 24 item 7: a disk-cache entry that passes the checksum but fails to load is discarded
and rebuilt, with a CacheWarning, so that no later process keeps failing on it."""
import warnings

import numpy as np
import pytest

from kdsl.runtime import cache as dc


def test_fetch_discards_an_entry_that_fails_to_load(tmp_path):
    c = dc.DiskCache(str(tmp_path), enabled=True)
    key = dc.cache_key("ir", "cpu")
    c.put(key, b"forged")                 # a whole, checksummed entry: get() accepts it

    def load(payload):
        if payload != b"good":
            raise RuntimeError("symbol kdsl_x is undefined")
        return "loaded"
    with pytest.warns(dc.CacheWarning, match="failed to load.*deleted and is rebuilt"):
        got, from_cache = c.fetch(key, lambda: b"good", load, what="a test entry")
    assert (got, from_cache) == ("loaded", False)
    assert c.get(key) == b"good"          # the entry was replaced: the next process loads it
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert c.fetch(key, lambda: b"never built", load) == ("loaded", True)


def test_fetch_error_of_a_fresh_build_propagates(tmp_path):
    c = dc.DiskCache(str(tmp_path), enabled=True)

    def load(payload):
        raise ValueError("broken builder")
    with pytest.raises(ValueError, match="broken builder"):
        c.fetch(dc.cache_key("x", "cpu"), lambda: b"p", load)


def _forged_omp_object() -> bytes:
    """Object code that defines ``kdsl_omp_launch`` but calls a symbol nobody defines: it
    passes every checksum and fails only when loaded (the entry the issue met)."""
    from llvmlite import ir

    from kdsl_cpu import jit
    m = ir.Module("forged")
    void = ir.VoidType()
    ghost = ir.Function(m, ir.FunctionType(void, []), "kdsl_no_such_symbol_24")
    f = ir.Function(m, ir.FunctionType(void, []), "kdsl_omp_launch")
    b = ir.IRBuilder(f.append_basic_block("entry"))
    b.call(ghost, [])
    b.ret_void()
    m.triple = jit.host()[0]
    return jit.compile_glue(str(m))


def test_forged_omp_launcher_entry_is_rebuilt(tmp_path, monkeypatch):
    from kdsl_cpu import parallel
    if parallel._libgomp() is None:
        pytest.skip("libgomp is not available here: the OpenMP launcher is not used")
    monkeypatch.setenv("KDSL_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("KDSL_CACHE", "1")
    key = parallel.omp_cache_key()
    dc.DiskCache().put(key, _forged_omp_object())
    monkeypatch.setattr(parallel, "_omp_code", None)      # as in a new process
    with pytest.warns(dc.CacheWarning, match="OpenMP launcher"):
        assert parallel.omp_launcher()
    # the entry now holds the real launcher: a second "process" loads it without a warning
    monkeypatch.setattr(parallel, "_omp_code", None)
    with warnings.catch_warnings():
        warnings.simplefilter("error", dc.CacheWarning)
        assert parallel.omp_launcher()


def test_cpu_kernel_entry_that_fails_to_load_is_rebuilt(tmp_path, monkeypatch):
    import kdsl as kd
    from kdsl_cpu import jit
    monkeypatch.setenv("KDSL_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("KDSL_CACHE", "1")

    def make():
        @kd.kernel
        def twice(A):
            return A * 2.0
        return twice
    a = np.random.default_rng().random(7)
    np.testing.assert_array_equal(make()(a, backend="cpu"), a * 2)   # stores the entry
    real = jit.load_cached
    calls = []

    def failing_once(blob, entry, unpack):      # the entry passes every check, then fails
        calls.append(entry)
        if len(calls) == 1:
            raise jit.BackendCompileError(f"object code for {entry!r} cannot be loaded")
        return real(blob, entry, unpack)
    monkeypatch.setattr(jit, "load_cached", failing_once)
    with pytest.warns(dc.CacheWarning, match="kernel"):
        np.testing.assert_array_equal(make()(a, backend="cpu"), a * 2)
    assert len(calls) == 2                        # discarded, rebuilt, loaded


def test_cubin_cache_validates_and_rebuilds(tmp_path, monkeypatch):
    pytest.importorskip("cuda.core")
    from kdsl_cuda.runtime import cubin_cache
    assert not cubin_cache.is_cubin(b"\x7fELF" + bytes(40))     # an ELF for another machine
    monkeypatch.setenv("KDSL_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("KDSL_CACHE", "1")
    src = 'extern "C" __global__ void k24(float* x) { x[threadIdx.x] += 1.0f; }\n'
    first = cubin_cache.cached_cubin(src, "sm_90", "k24.cu")
    assert cubin_cache.is_cubin(first)
    # the driver refused the cached cubin: the launcher asks for a fresh one
    with pytest.warns(dc.CacheWarning, match="cubin k24"):
        again = cubin_cache.cached_cubin(src, "sm_90", "k24.cu", fresh=True)
    assert cubin_cache.is_cubin(again)
