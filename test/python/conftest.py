"""Every test compiles into a cache of its session (never the user's)."""

import pytest


@pytest.fixture(autouse=True)
def _session_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("CMASK_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cmask-cache"))
