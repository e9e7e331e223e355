"""Fixtures of the end-to-end agent tests: an isolated environment (autouse), the loopback
OpenAI-compatible server and the workspace."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_e2e_support import KEY
from openai_server import OpenAIServer

# -- fixtures and helpers ------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No key, endpoint or setting of the machine running the tests may leak in."""
    for provider in ("OPENAI_COMPATIBLE", "OPENAI"):
        monkeypatch.delenv(f"REPUBLIC_{provider}_API_KEY", raising=False)
        monkeypatch.delenv(f"REPUBLIC_{provider}_API_BASE", raising=False)
    for name in ("MODEL", "FALLBACK_MODELS", "API_KEY", "API_BASE", "API_FORMAT", "MAX_STEPS",
                 "MAX_TOKENS", "TAPE_STORE", "STREAM"):
        monkeypatch.delenv(f"HOOKLINE_{name}", raising=False)
    monkeypatch.setenv("HOOKLINE_HOME", str(tmp_path / "home"))


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(api_key=KEY) as running:
        yield running
