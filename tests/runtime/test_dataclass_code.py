"""kdsl/_dataclass_code.py: the compiled methods of kdsl's dataclasses reused between processes
(issue 26 item 4, ``import kdsl`` time).  A class made through the table behaves as
``dataclasses`` makes it; other modules' classes never enter it; a damaged table is ignored."""
import dataclasses
import sys
import types

import pytest

import kdsl  # noqa: F401  (installs the table)
from kdsl import _dataclass_code as dc


@pytest.fixture
def table(monkeypatch, tmp_path):
    """An empty table of this test's own, in tmp_path, with a fake ``kdsl.`` module."""
    monkeypatch.setattr(dc, "_codes", {})
    monkeypatch.setattr(dc, "_used", set())
    monkeypatch.setattr(dc, "_dirty", True)       # no atexit registration from the test
    monkeypatch.setattr(dc, "_paths", lambda: [str(tmp_path / "t.bin")])
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    mod = types.ModuleType("kdsl._table_test_module")
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    return mod


def _make(module_name, frozen=True):
    ns = {"__module__": module_name, "__annotations__": {"a": "int", "b": "list", "c": "float"},
          "b": dataclasses.field(default_factory=list), "c": -0.0}
    cls = type("Point", (), ns)
    return dataclasses.dataclass(frozen=frozen)(cls)


def test_methods_from_the_table_behave_as_dataclasses_own(table):
    P = _make(table.__name__)
    n = len(dc._codes)
    assert n >= 4                        # __init__, __repr__, __eq__, __hash__, __setattr__...
    Q = _make(table.__name__)            # the same source: every method from the table
    assert len(dc._codes) == n
    for cls in (P, Q):
        p = cls(1)
        assert p == cls(1, []) and p != cls(2) and hash(cls(1, (2,))) == hash(cls(1, (2,)))
        assert repr(p) == "Point(a=1, b=[], c=-0.0)" and p.b is not cls(1).b
        with pytest.raises(dataclasses.FrozenInstanceError):
            p.a = 3
    assert all(c.co_filename == "<string>" for c in dc._codes.values())
    # not inherited from the table module: no `from __future__ import annotations` flags
    assert P.__init__.__annotations__ == {"a": "int", "b": "list", "c": "float", "return": None}
    R = _make(table.__name__, frozen=False)
    r = R(1)
    r.a = 5
    assert r == R(5)


def test_other_modules_classes_pass_through(table, monkeypatch):
    mod = types.ModuleType("not_kdsl_mod")
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    P = _make(mod.__name__)
    assert dc._codes == {} and P(1) == P(1)


def test_the_table_round_trips_and_a_damaged_one_is_ignored(table, tmp_path):
    _make(table.__name__)
    dc._save()
    saved = dict(dc._codes)
    assert dc._read().keys() == saved.keys()
    path = tmp_path / "t.bin"
    blob = bytearray(path.read_bytes())
    blob[-5] ^= 0xFF                     # a flipped byte: the checksum refuses it
    path.write_bytes(bytes(blob))
    assert dc._read() == {}
    path.write_bytes(b"garbage")
    assert dc._read() == {}
    path.write_bytes(bytes(blob[:40]))   # truncated
    assert dc._read() == {}
