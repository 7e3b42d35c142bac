"""The registry's fast entry-point scan gives what importlib.metadata gives (or steps aside)."""
import importlib.metadata as md
import sys

import pytest

from kdsl.backends import registry


def test_scan_steps_aside_for_another_distribution_finder(monkeypatch):
    class Finder:
        def find_spec(self, *a):
            return None

        def find_distributions(self, *a, **k):
            return iter(())
    monkeypatch.setattr(sys, "meta_path", sys.meta_path + [Finder()])
    assert registry._scan_entry_points() is None


def test_the_metadata_backport_keeps_the_scan(monkeypatch):
    """importing dask installs importlib_metadata's finder (and takes the standard one's
    find_distributions away): it lists the same directories, so the scan still applies."""
    backport = pytest.importorskip("importlib_metadata", reason="the backport is not installed")
    monkeypatch.setattr(sys, "meta_path", sys.meta_path + [backport.MetadataPathFinder()])
    assert registry._scan_entry_points() is not None


def _stdlib_entry_points(group):
    """The standard library's listing of ``group`` on sys.path, whether or not the
    importlib_metadata backport (imported by dask) has replaced the standard finder."""
    ctx = md.DistributionFinder.Context(path=sys.path)
    dists = md._unique(md.MetadataPathFinder.find_distributions(ctx))  # first of each name
    return [ep for d in dists for ep in d.entry_points if ep.group == group]


def _first_by_name(eps):
    out = {}
    for ep in eps:
        out.setdefault(ep.name, (ep.value, ep.dist.name, ep.dist.version))
    return out


def _site(root, dists):
    root.mkdir()
    for dirname, meta, entries in dists:
        d = root / dirname
        d.mkdir()
        if meta is not None:
            (d / "METADATA").write_text(meta)
        if entries is not None:
            (d / "entry_points.txt").write_text(entries)
    return str(root)


def test_scan_matches_importlib_metadata(tmp_path, monkeypatch):
    a = _site(tmp_path / "a", [
        ("kdsl_toy-0.1.dist-info", "Metadata-Version: 2.1\nName: kdsl-toy\nVersion: 0.1\n\nbody",
         "# comment\n[console_scripts]\ntoy = x:y\n\n[kdsl.backends]\ntoy = toy_mod : backend\n"
         "numpy = shadow:backend [extra]\n"),
        ("No_Meta-2.0.dist-info", None, "[kdsl.backends]\nnometa = nm:b\n"),
        ("plain.egg-info", "Name: plain\nVersion: 3\n", "[kdsl.backends]\n plain=plain_mod:obj\n"),
    ])
    b = _site(tmp_path / "b", [
        ("kdsl.toy-0.2.dist-info", "Name: kdsl-toy\nVersion: 0.2\n",   # same normalised name
         "[kdsl.backends]\ntoy = old:backend\nother = other_mod:backend\n"),
    ])
    monkeypatch.setattr(sys, "path", [a, b] + sys.path)
    scanned = registry._scan_entry_points()
    assert scanned is not None
    want = _first_by_name(_stdlib_entry_points(registry.GROUP))
    assert _first_by_name(scanned) == want
    assert want["toy"][0] == "toy_mod : backend" and "other" not in want


def test_scan_steps_aside_for_zip_entries(tmp_path, monkeypatch):
    z = tmp_path / "dists.zip"
    z.write_bytes(b"PK\x05\x06" + b"\0" * 18)   # an empty zip archive
    monkeypatch.setattr(sys, "path", [str(z)] + sys.path)
    assert registry._scan_entry_points() is None


def test_the_metadata_backport_keeps_the_scan(monkeypatch):
    """importing dask installs importlib_metadata's finder (and takes the standard one's
    find_distributions away): it lists the same directories, so the scan still applies."""
    backport = pytest.importorskip("importlib_metadata", reason="the backport is not installed")
    monkeypatch.setattr(sys, "meta_path", sys.meta_path + [backport.MetadataPathFinder()])
    assert registry._scan_entry_points() is not None


def test_scanned_entry_point_loads(tmp_path, monkeypatch):
    site = _site(tmp_path / "s", [("kdsl_x-1.dist-info", "Name: kdsl-x\nVersion: 1\n",
                                   "[kdsl.backends]\nx = kdsl_scan_mod : obj.attr [extra]\n")])
    (tmp_path / "s" / "kdsl_scan_mod.py").write_text(
        "class obj:\n    attr = 'loaded'\n")
    monkeypatch.setattr(sys, "path", [site] + sys.path)
    (ep,) = [e for e in registry._scan_entry_points() if e.name == "x"]
    assert ep.load() == "loaded" and ep.dist.name == "kdsl-x" and ep.dist.version == "1"
    sys.modules.pop("kdsl_scan_mod", None)


# ----------------------------------------------------------------- the scan kept on disk
def _fresh_registry(monkeypatch, tmp_path, site):
    """A registry state of a new process: nothing discovered or loaded, the cache in tmp."""
    monkeypatch.setenv("KDSL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KDSL_CACHE", raising=False)
    monkeypatch.setattr(sys, "path", [site] + [p for p in sys.path if p])
    for name, value in (("_entry_points", None), ("_eps_from_disk", False),
                        ("_want_fresh", False), ("_loaded", dict(registry._loaded)),
                        ("_failed", {})):
        monkeypatch.setattr(registry, name, value)


def _new_process(monkeypatch):
    monkeypatch.setattr(registry, "_entry_points", None)
    monkeypatch.setattr(registry, "_eps_from_disk", False)


_T0 = 1_600_000_000


def _age(path, when=_T0):
    """Set ``path``'s modification time to ``when``, in the past (a directory the scan may
    keep; the same ``when``: as if the directory had not changed)."""
    import os
    os.utime(path, (when, when))


def _count_listings(monkeypatch):
    calls = []
    real = registry._dir_dists

    def counted(root):
        calls.append(root)
        return real(root)
    monkeypatch.setattr(registry, "_dir_dists", counted)
    return calls


_MOD = "from kdsl.backends.numpy_backend import NumpyBackend\nbackend = NumpyBackend()\n"


def test_the_kept_scan_is_used_and_matches_a_fresh_one(tmp_path, monkeypatch):
    site = _site(tmp_path / "s", [("kdsl_k1-1.dist-info", "Name: kdsl-k1\nVersion: 1\n",
                                   "[kdsl.backends]\nk1 = kdsl_k1_mod:backend\n")])
    _age(site)
    _fresh_registry(monkeypatch, tmp_path, site)
    calls = _count_listings(monkeypatch)
    first = {n: (e.value, e.dist.name) for n, e in registry._discover().items()}
    assert first["k1"] == ("kdsl_k1_mod:backend", "kdsl-k1") and site in calls
    _new_process(monkeypatch)
    calls.clear()
    again = {n: (e.value, e.dist.name) for n, e in registry._discover().items()}
    assert again == first and registry._eps_from_disk
    assert site not in calls        # unchanged directories are not listed again


def test_a_backend_installed_later_is_found(tmp_path, monkeypatch):
    """A new distribution in a kept directory (its time changes) is found by the next
    process; one added without changing the time (copied in place) by a rescan on the miss."""
    site = _site(tmp_path / "s", [("kdsl_k1-1.dist-info", "Name: kdsl-k1\nVersion: 1\n",
                                   "[kdsl.backends]\nk1 = kdsl_k1_mod:backend\n")])
    (tmp_path / "s" / "kdsl_k2_mod.py").write_text(_MOD)
    _age(site, _T0)
    _fresh_registry(monkeypatch, tmp_path, site)
    assert "k2" not in registry.backends()
    d = tmp_path / "s" / "kdsl_k2-1.dist-info"
    d.mkdir()
    (d / "entry_points.txt").write_text("[kdsl.backends]\nk2 = kdsl_k2_mod:backend\n")
    _age(site, _T0 + 1)              # the install changed the directory's time
    _new_process(monkeypatch)
    assert "k2" in registry.backends()
    # an entry added where the directory's time stays what the kept scan says
    d3 = tmp_path / "s" / "kdsl_k3-1.dist-info"
    d3.mkdir()
    (d3 / "entry_points.txt").write_text("[kdsl.backends]\nk3 = kdsl_k2_mod:backend\n")
    _age(site, _T0 + 1)
    _new_process(monkeypatch)
    assert registry._discover() and "k3" not in registry._entry_points   # the kept answer
    try:
        assert registry.is_installed("k3")          # a miss scans again
        assert registry.get_backend("k3").spec.name == "numpy"
    finally:
        registry._loaded.pop("k3", None)
        sys.modules.pop("kdsl_k2_mod", None)


def test_a_kept_entry_that_fails_to_load_is_scanned_again(tmp_path, monkeypatch):
    site = _site(tmp_path / "s", [("kdsl_k4-1.dist-info", "Name: kdsl-k4\nVersion: 1\n",
                                   "[kdsl.backends]\nk4 = kdsl_gone_mod:backend\n")])
    (tmp_path / "s" / "kdsl_k4_mod.py").write_text(_MOD)
    _age(site)
    _fresh_registry(monkeypatch, tmp_path, site)
    assert registry._discover()["k4"].value == "kdsl_gone_mod:backend"
    # the entry point is rewritten in place (the directory's time stays)
    (tmp_path / "s" / "kdsl_k4-1.dist-info" / "entry_points.txt").write_text(
        "[kdsl.backends]\nk4 = kdsl_k4_mod:backend\n")
    _age(site)
    _new_process(monkeypatch)
    try:
        assert registry.get_backend("k4").spec.name == "numpy"
        assert registry._discover()["k4"].value == "kdsl_k4_mod:backend"
    finally:
        registry._loaded.pop("k4", None)
        sys.modules.pop("kdsl_k4_mod", None)


def test_refresh_scans_and_a_recent_directory_is_not_kept(tmp_path, monkeypatch):
    site = _site(tmp_path / "s", [("kdsl_k5-1.dist-info", "Name: kdsl-k5\nVersion: 1\n",
                                   "[kdsl.backends]\nk5 = m:b\n")])
    _fresh_registry(monkeypatch, tmp_path, site)
    calls = _count_listings(monkeypatch)
    registry._discover()
    _new_process(monkeypatch)
    calls.clear()
    registry._discover()
    assert site in calls           # changed a moment ago: its listing was not kept
    _age(site)
    registry.refresh()
    calls.clear()
    assert "k5" in registry._discover() and site in calls and not registry._eps_from_disk


def test_a_changing_directory_without_distributions_is_listed_not_rewritten(tmp_path,
                                                                             monkeypatch):
    import os
    site = _site(tmp_path / "s", [("kdsl_k6-1.dist-info", "Name: kdsl-k6\nVersion: 1\n",
                                   "[kdsl.backends]\nk6 = m:b\n")])
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    _age(site)
    _age(str(scripts))
    _fresh_registry(monkeypatch, tmp_path, site)
    monkeypatch.setattr(sys, "path", [str(scripts)] + sys.path)
    registry._discover()
    kept = registry._scan_file(registry._path_state())
    before = os.stat(kept).st_mtime_ns
    _age(str(scripts), _T0 + 5)          # a script saved there
    _new_process(monkeypatch)
    calls = _count_listings(monkeypatch)
    assert "k6" in registry._discover() and calls == [str(scripts)]
    assert os.stat(kept).st_mtime_ns == before
