"""Shared test configuration: every async test runs on asyncio and on trio."""

from __future__ import annotations

import pytest
import spec_support  # noqa: F401  (puts spec/ on sys.path before any test module imports runner)


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return request.param
