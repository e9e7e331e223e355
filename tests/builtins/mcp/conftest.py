"""The MCP tests' fixtures: the scripted model's server and a workspace."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from openai_server import OpenAIServer


@pytest.fixture
def model() -> Iterator[OpenAIServer]:
    with OpenAIServer(api_key="sk-mcp") as running:
        yield running
