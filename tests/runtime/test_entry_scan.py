"""The registry's fast entry-point scan gives what importlib.metadata gives (or steps aside)."""
import importlib.metadata as md
import sys

from kdsl.backends import registry


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
    want = _first_by_name(md.entry_points(group=registry.GROUP))
    assert _first_by_name(scanned) == want
    assert want["toy"][0] == "toy_mod : backend" and "other" not in want


def test_scan_steps_aside_for_zip_entries(tmp_path, monkeypatch):
    z = tmp_path / "dists.zip"
    z.write_bytes(b"PK\x05\x06" + b"\0" * 18)   # an empty zip archive
    monkeypatch.setattr(sys, "path", [str(z)] + sys.path)
    assert registry._scan_entry_points() is None


def test_scanned_entry_point_loads(tmp_path, monkeypatch):
    site = _site(tmp_path / "s", [("kdsl_x-1.dist-info", "Name: kdsl-x\nVersion: 1\n",
                                   "[kdsl.backends]\nx = kdsl_scan_mod : obj.attr [extra]\n")])
    (tmp_path / "s" / "kdsl_scan_mod.py").write_text(
        "class obj:\n    attr = 'loaded'\n")
    monkeypatch.setattr(sys, "path", [site] + sys.path)
    (ep,) = [e for e in registry._scan_entry_points() if e.name == "x"]
    assert ep.load() == "loaded" and ep.dist.name == "kdsl-x" and ep.dist.version == "1"
    sys.modules.pop("kdsl_scan_mod", None)
