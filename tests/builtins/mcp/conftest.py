"""The MCP tests' fixtures: the scripted model's server and a workspace."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from openai_server import OpenAIServer


@pytest.fixture
def model() -> Iterator[OpenAIServer]:
    with OpenAIServer(api_key="sk-mcp") as running:
        yield running


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path
