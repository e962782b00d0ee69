"""Fixtures shared by the test modules."""
import pytest


@pytest.fixture
def gpu(monkeypatch):
    """The CPU stand-in for the fast path's driver calls (fake_gpu.FakeGpu), patched in for one test."""
    from fake_gpu import FakeGpu
    return FakeGpu(monkeypatch)
