"""Reading a whole tape a page at a time (`tape_pages`), and what uses it: a session's
archive and `store copy` hold one page in memory, whatever the tape's size, and an
interrupted copy is resumed from where it stopped."""

from __future__ import annotations

import functools
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from postgres_support import StoreFactory

from hookline.builtins.store import (
    AsyncStoreAdapter,
    InMemoryTapeStore,
    SQLiteTapeStore,
    as_async_store,
    copy_store,
    tape_pages,
)
from hookline.builtins.tape import archive_session
from hookline.kernel.errors import HooklineError
from hookline.kernel.tape import TapeEntry, TapeQuery

BIG = 20_000
"""Characters of each entry of the large tapes below."""


def entries(count: int, size: int = 10) -> list[TapeEntry]:
    return [TapeEntry.new("event", {"n": n, "text": "x" * size}) for n in range(count)]


async def collect(store: Any, tape: str, size: int, after: int = 0) -> list[list[int]]:
    return [[entry.id for entry in page] async for page in tape_pages(store, tape, size, after)]


def test_pages_cover_the_tape_in_id_order_on_every_builtin_store(
    tmp_path: Path, postgres_stores: StoreFactory,
) -> None:
    sqlite = SQLiteTapeStore(tmp_path / "tapes.db")
    stores = [(anyio.run, as_async_store(InMemoryTapeStore())),
              (anyio.run, AsyncStoreAdapter(sqlite)),
              (postgres_stores.portal.call, postgres_stores.open())]
    try:
        for run, store in stores:
            run(store.append_many, "t", entries(7))
            pages = functools.partial(run, collect, store)
            assert pages("t", 3) == [[1, 2, 3], [4, 5, 6], [7]], store
            assert pages("t", 7) == [[1, 2, 3, 4, 5, 6, 7]]
            assert pages("t", 3, 5) == [[6, 7]]
            assert pages("t", 100, 7) == []
            assert pages("none", 100, 0) == []
    finally:
        sqlite.close()


class TwoArgumentStore(InMemoryTapeStore):
    """A plugin's store with the older `fetch_since_async(tape, entry_id)` only."""

    async def fetch_since_async(  # type: ignore[override]
        self, tape: str, entry_id: int,
    ) -> list[TapeEntry]:
        return await super().fetch_since_async(tape, entry_id)


@pytest.mark.anyio
async def test_a_store_that_cannot_read_a_page_is_read_whole() -> None:
    store = as_async_store(TwoArgumentStore())
    await store.append_many("t", entries(5))  # type: ignore[attr-defined]
    assert await collect(store, "t", 2) == [[1, 2, 3, 4, 5]]
    assert await collect(store, "t", 2, 3) == [[4, 5]]


def peak_of(work: Callable[[], Awaitable[Any]]) -> tuple[Any, int]:
    """What `work` returns, and the most memory Python held at once while it ran."""
    tracemalloc.start()
    try:
        result = anyio.run(work)
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def large_store(path: Path, count: int = 4_000) -> int:
    """A SQLite store with a session tape and a spill sidecar tape of `count` entries of
    `BIG` characters (80 MB); returns the sidecar's size in bytes, about."""
    with SQLiteTapeStore(path) as store:
        store.append_many("session", entries(3))
        for start in range(0, count, 100):
            store.append_many("session__sidecar__spill", entries(min(100, count - start), BIG))
    return count * BIG


def test_archiving_a_large_session_holds_a_page_not_the_tape(tmp_path: Path) -> None:
    size = large_store(tmp_path / "tapes.db")
    store = SQLiteTapeStore(tmp_path / "tapes.db")
    try:
        paths, peak = peak_of(functools.partial(
            archive_session, store, "session", tmp_path / "archive", sidecars=["spill"]))
        assert [path.read_text().count("\n") for path in paths] == [3, 4_000]
        assert not store.fetch_all(TapeQuery("session__sidecar__spill"))
    finally:
        store.close()
    assert peak < size / 4, f"archiving {size:,} bytes held {peak:,} at once"


def test_copying_a_large_store_holds_a_page_not_the_tape(tmp_path: Path) -> None:
    size = large_store(tmp_path / "a.db")
    lines: list[str] = []
    report, peak = peak_of(functools.partial(copy_store, tmp_path / "a.db", tmp_path / "b.db",
                                             progress=lines.append))
    assert (report.tapes, report.entries) == (2, 4_003)
    assert lines[-1] == "verifying 2 tape(s)"
    with SQLiteTapeStore(tmp_path / "a.db") as source, SQLiteTapeStore(tmp_path / "b.db") as copy:
        tape = "session__sidecar__spill"
        assert copy.fetch_all(TapeQuery(tape)) == source.fetch_all(TapeQuery(tape))
    assert peak < size / 4, f"copying {size:,} bytes held {peak:,} at once"


def test_an_interrupted_copy_is_completed_and_a_different_tape_refused(
    tmp_path: Path,
) -> None:
    with SQLiteTapeStore(tmp_path / "a.db") as source:
        source.append_many("long", entries(250))
        source.append_many("short", entries(2))
        whole = source.fetch_all(TapeQuery("long"))
    with SQLiteTapeStore(tmp_path / "b.db") as target:  # cut after the first 130 entries
        target.append_many("long", [TapeEntry(0, e.kind, e.payload, e.meta, e.date)
                                    for e in whole[:130]])
    copy = functools.partial(copy_store, tmp_path / "a.db", tmp_path / "b.db")
    with pytest.raises(HooklineError, match="already holds 1 tape"):
        anyio.run(copy)
    report = anyio.run(functools.partial(copy, into_existing=True))
    assert (report.tapes, report.entries, report.skipped) == (2, 122, 0)
    again = anyio.run(functools.partial(copy, into_existing=True))
    assert (again.tapes, again.entries, again.skipped) == (0, 0, 2)
    with SQLiteTapeStore(tmp_path / "b.db") as target:
        assert target.fetch_all(TapeQuery("long")) == whole
        target.append("short", TapeEntry.new("event", {"not": "the source's"}))
    with pytest.raises(HooklineError, match="'short' is in both stores with different"):
        anyio.run(functools.partial(copy, into_existing=True))
