"""Fixtures of the builtin plugin tests: a fresh hookline home and no setting of the machine
(autouse), and the workspace."""

from __future__ import annotations

from pathlib import Path

import pytest

# -- fixtures and helpers ------------------------------------------------------------------


@pytest.fixture(autouse=True)
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A fresh hookline home, and no setting of the machine running the tests."""
    for name in ("MODEL", "FALLBACK_MODELS", "API_KEY", "API_BASE", "API_FORMAT", "MAX_STEPS",
                 "MAX_TOKENS", "TAPE_STORE", "STREAM"):
        monkeypatch.delenv(f"HOOKLINE_{name}", raising=False)
    monkeypatch.delenv("HOOKLINE_DISABLE_PLUGINS", raising=False)
    path = tmp_path / "home"
    monkeypatch.setenv("HOOKLINE_HOME", str(path))
    return path
