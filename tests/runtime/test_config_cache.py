"""KDSL_* configuration and the on-disk cache (corruption, atomic writes, several processes)."""
import multiprocessing as mp
import os

import pytest

from kdsl import config
from kdsl.runtime import cache as dc


def test_config_reads_env_on_demand(monkeypatch, tmp_path):
    for v in ("KDSL_BACKEND", "KDSL_DUMP", "KDSL_CACHE", "KDSL_CACHE_DIR", "KDSL_NUM_THREADS",
              "OMP_NUM_THREADS", "XDG_CACHE_HOME"):
        monkeypatch.delenv(v, raising=False)
    c = config.config()
    assert c.backend is None and not c.dump and c.cache
    assert c.cache_dir == os.path.expanduser("~/.cache/kdsl")
    assert c.num_threads == len(os.sched_getaffinity(0))   # the usable cores
    monkeypatch.setenv("KDSL_BACKEND", "cpu")
    monkeypatch.setenv("KDSL_DUMP", "1")
    monkeypatch.setenv("KDSL_CACHE", "0")
    monkeypatch.setenv("KDSL_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("KDSL_NUM_THREADS", "3")
    c = config.config()
    assert (c.backend, c.dump, c.cache, c.cache_dir, c.num_threads) == ("cpu", True, False,
                                                                         str(tmp_path), 3)
    monkeypatch.setenv("KDSL_NUM_THREADS", "many")
    with pytest.raises(ValueError, match="KDSL_NUM_THREADS='many'"):   # issue 26: no silent fallback
        config.num_threads()


def test_cache_dir_honours_xdg_cache_home_after_kdsl_cache_dir(monkeypatch, tmp_path):
    monkeypatch.delenv("KDSL_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert config.cache_dir() == str(tmp_path / "xdg" / "kdsl")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")     # the XDG spec: ignore relative paths
    assert config.cache_dir() == os.path.expanduser("~/.cache/kdsl")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("KDSL_CACHE_DIR", str(tmp_path / "mine"))
    assert config.cache_dir() == str(tmp_path / "mine")


def test_nvrtc_fast_compile_levels(monkeypatch):
    """``--Ofast-compile``: ``auto`` by default (per module: kdsl_cuda.build.for_source), a
    level for every module, or off; anything else names the variable."""
    from kdsl import config
    monkeypatch.delenv("KDSL_CUDA_FAST_COMPILE", raising=False)
    assert config.cuda_fast_compile() == "auto"
    monkeypatch.setenv("KDSL_CUDA_FAST_COMPILE", "off")
    assert config.cuda_fast_compile() is None
    monkeypatch.setenv("KDSL_CUDA_FAST_COMPILE", "min")
    assert config.cuda_fast_compile() == "min"
    monkeypatch.setenv("KDSL_CUDA_FAST_COMPILE", "0")
    assert config.cuda_fast_compile() is None
    monkeypatch.setenv("KDSL_CUDA_FAST_COMPILE", "MAX")
    assert config.cuda_fast_compile() == "max"
    monkeypatch.setenv("KDSL_CUDA_FAST_COMPILE", "fastest")
    with pytest.raises(ValueError, match="KDSL_CUDA_FAST_COMPILE"):
        config.cuda_fast_compile()


def test_key_depends_on_everything():
    k = dc.cache_key("ir", "cpu", {"opt": 3}, "1.0")
    assert len(k) == 64 and k == dc.cache_key("ir", "cpu", {"opt": 3}, "1.0")
    assert len({k, dc.cache_key("ir2", "cpu", {"opt": 3}, "1.0"),
                dc.cache_key("ir", "cuda", {"opt": 3}, "1.0"),
                dc.cache_key("ir", "cpu", {"opt": 2}, "1.0"),
                dc.cache_key("ir", "cpu", {"opt": 3}, "1.1")}) == 5


def test_roundtrip_disabled_and_env(tmp_path, monkeypatch):
    c = dc.DiskCache(str(tmp_path), enabled=True)
    key = dc.cache_key("x", "cpu")
    assert c.get(key) is None
    path = c.put(key, b"\x00object code\xff")
    assert os.path.exists(path) and c.get(key) == b"\x00object code\xff"
    assert not [f for f in os.listdir(os.path.dirname(path)) if f.startswith(".tmp-")]
    off = dc.DiskCache(str(tmp_path), enabled=False)
    assert off.get(key) is None and off.put(key, b"y") is None
    monkeypatch.setenv("KDSL_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("KDSL_CACHE", "0")
    assert dc.get(key) is None
    monkeypatch.setenv("KDSL_CACHE", "1")
    assert dc.get(key) == b"\x00object code\xff"


@pytest.mark.parametrize("damage", ["flip", "truncate", "foreign", "other_key", "empty"])
def test_corrupt_entries_are_dropped(tmp_path, damage):
    c = dc.DiskCache(str(tmp_path), enabled=True)
    key, other = dc.cache_key("a", "cpu"), dc.cache_key("b", "cpu")
    p = c.put(key, b"payload" * 100)
    blob = open(p, "rb").read()
    if damage == "flip":
        blob = blob[:-5] + bytes([blob[-5] ^ 1]) + blob[-4:]
    elif damage == "truncate":
        blob = blob[:-10]
    elif damage == "foreign":
        blob = b"\x7fELF" + blob[4:]
    elif damage == "other_key":
        blob = open(c.put(other, b"payload" * 100), "rb").read()
    else:
        blob = b""
    open(p, "wb").write(blob)
    assert c.get(key) is None
    assert not os.path.exists(p)              # dropped, so the caller rebuilds it
    c.put(key, b"rebuilt")
    assert c.get(key) == b"rebuilt"


def _writer(args):
    d, key, wid = args
    c = dc.DiskCache(d, enabled=True)
    seen = 0
    for i in range(40):
        c.put(key, (b"%03d" % wid) * 5000)
        got = c.get(key)
        if got is not None:
            # whole entries only: one writer's payload, never a mix or a torn file
            assert len(got) == 15000 and got == got[:3] * 5000, got[:20]
            seen += 1
    return seen


def test_concurrent_writers_share_a_directory(tmp_path):
    key = dc.cache_key("shared", "cpu")
    ctx = mp.get_context("fork")
    with ctx.Pool(4) as pool:
        seen = pool.map(_writer, [(str(tmp_path), key, w) for w in range(4)])
    assert sum(seen) > 0
    c = dc.DiskCache(str(tmp_path), enabled=True)
    assert c.get(key) is not None
    leftovers = [f for root, _, fs in os.walk(tmp_path) for f in fs if f.startswith(".tmp-")]
    assert leftovers == []
