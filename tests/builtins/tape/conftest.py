"""Fixtures shared by the tape tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hookline.builtins.store import InMemoryTapeStore, SQLiteTapeStore


@pytest.fixture(params=["memory", "sqlite"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[object]:
    if request.param == "memory":
        yield InMemoryTapeStore()
    else:
        with SQLiteTapeStore(tmp_path / "tapes.db") as store:
            yield store
