"""Fakes that let the runtime tests run without the frontend and the schedule package."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "backends"))
sys.path.insert(0, os.path.dirname(__file__))

import fakes  # noqa: E402


@pytest.fixture(autouse=True)
def _fake_parts(monkeypatch):
    """Trace through ``fn.__fake_graph__`` and use a stand-in schedule object."""
    fakes.install(monkeypatch)
    yield


@pytest.fixture
def counting():
    """A registered backend 'counting' (numpy semantics) that records compiles and schedules."""
    from kdsl.backends import registry
    b = fakes.CountingBackend()
    registry.register_backend("counting", b)
    yield b
    registry.unregister_backend("counting")
