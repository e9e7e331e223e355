"""Shared test configuration: every async test runs on asyncio and on trio."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty folder for the framework's workspace (what the tools act on)."""
    path = tmp_path / "workspace"
    path.mkdir()
    return path


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The URL of the tests' PostgreSQL server ("" when there is none); see
    tests/postgres_support.py."""
    from postgres_support import server_url

    with server_url() as url:
        yield url


@pytest.fixture
def postgres_stores(postgres_server: str) -> Iterator[Any]:
    """A `postgres_support.StoreFactory` on the test server (fails in CI without one)."""
    from postgres_support import StoreFactory, unavailable

    try:
        import psycopg  # noqa: F401
    except ImportError:
        unavailable("psycopg is not installed (pip install 'hookline[postgres]')")
    if not postgres_server:
        unavailable("no PostgreSQL server")
    factory = StoreFactory(postgres_server)
    yield factory
    factory.close()
