"""as_async_store: async stores pass through, sync stores run in worker threads."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from hookline.builtins.store import (
    AsyncStoreAdapter,
    InMemoryTapeStore,
    SQLiteTapeStore,
    as_async_store,
)
from hookline.kernel.tape import AsyncTapeStore, TapeEntry, TapeQuery, is_async_store


class ThreadRecordingStore:
    """A sync store that notes the thread of every call and yields its entries lazily."""

    def __init__(self) -> None:
        self.inner = InMemoryTapeStore()
        self.threads: list[tuple[str, int]] = []
        self.iterated_on: list[int] = []

    def _note(self, method: str) -> None:
        self.threads.append((method, threading.get_ident()))

    def list_tapes(self) -> list[str]:
        self._note("list_tapes")
        return self.inner.list_tapes()

    def reset(self, tape: str) -> None:
        self._note("reset")
        self.inner.reset(tape)

    def fetch_all(self, query: TapeQuery) -> Iterator[TapeEntry]:
        self._note("fetch_all")
        for entry in self.inner.fetch_all(query):
            self.iterated_on.append(threading.get_ident())
            yield entry

    def append(self, tape: str, entry: TapeEntry) -> TapeEntry:
        self._note("append")
        return self.inner.append(tape, entry)


class NativeAsyncStore:
    async def list_tapes(self) -> list[str]:
        return []

    async def reset(self, tape: str) -> None:
        return None

    async def fetch_all(self, query: TapeQuery) -> list[TapeEntry]:
        return []

    async def append(self, tape: str, entry: TapeEntry) -> None:
        return None


@pytest.mark.anyio
async def test_sync_calls_run_off_the_event_loop_thread() -> None:
    loop_thread = threading.get_ident()
    store = ThreadRecordingStore()
    adapted = as_async_store(store)
    assert isinstance(adapted, AsyncStoreAdapter) and is_async_store(adapted)
    assert isinstance(adapted, AsyncTapeStore)
    stored = await adapted.append("t", TapeEntry.new("event", {"n": 1}))
    assert stored.id == 1
    entries = await adapted.fetch_all(TapeQuery("t"))
    assert isinstance(entries, list) and [e.id for e in entries] == [1]
    assert await adapted.list_tapes() == ["t"]
    await adapted.reset("t")
    assert [method for method, _ in store.threads] == ["append", "fetch_all", "list_tapes", "reset"]
    assert all(ident != loop_thread for _, ident in store.threads)
    # The lazy iterable was consumed in the worker thread too.
    assert store.iterated_on and all(ident != loop_thread for ident in store.iterated_on)


@pytest.mark.anyio
async def test_sqlite_store_calls_run_in_worker_threads(tmp_path: Path) -> None:
    loop_thread = threading.get_ident()
    seen: list[int] = []

    class Spy(SQLiteTapeStore):
        def append(self, tape: str, entry: TapeEntry) -> TapeEntry:
            seen.append(threading.get_ident())
            return super().append(tape, entry)

    with Spy(tmp_path / "tapes.db") as store:
        adapted = as_async_store(store)
        async with anyio.create_task_group() as group:
            for n in range(20):
                group.start_soon(adapted.append, "t", TapeEntry.new("event", {"n": n}))
        entries = await adapted.fetch_all(TapeQuery("t"))
    assert sorted(e.id for e in entries) == list(range(1, 21))
    assert len(seen) == 20 and loop_thread not in seen


@pytest.mark.anyio
async def test_sqlite_reads_run_on_the_calling_thread_and_see_every_acknowledged_write(
        tmp_path: Path) -> None:
    """A context read costs no thread hop: `fetch_all_async` queries on the loop's thread,
    on a WAL snapshot that already holds what the writer thread acknowledged."""
    loop_thread = threading.get_ident()
    read_on: list[int] = []

    with SQLiteTapeStore(tmp_path / "tapes.db") as store:
        connection = store._readers.connection

        def reader() -> Any:  # the reader connection is taken where the query runs
            read_on.append(threading.get_ident())
            return connection()

        store._readers.connection = reader  # type: ignore[method-assign]
        adapted = as_async_store(store)
        for n in range(3):
            await adapted.append("t", TapeEntry.new("event", {"n": n}))
            entries = await adapted.fetch_all(TapeQuery("t"))
            assert [e.payload["n"] for e in entries] == list(range(n + 1))
    assert read_on == [loop_thread] * 3


@pytest.mark.anyio
async def test_async_stores_pass_through() -> None:
    native = NativeAsyncStore()
    assert as_async_store(native) is native


def test_non_stores_are_rejected() -> None:
    with pytest.raises(TypeError, match="missing"):
        as_async_store(object())  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_an_append_in_flight_completes_when_the_caller_is_cancelled() -> None:
    started = threading.Event()
    release = threading.Event()

    class Slow(InMemoryTapeStore):
        def append(self, tape: str, entry: TapeEntry) -> TapeEntry:
            started.set()
            release.wait(5)
            return super().append(tape, entry)

    store = Slow()
    adapted = as_async_store(store)
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as group:
            group.start_soon(adapted.append, "t", TapeEntry.new("event", {}))
            await anyio.to_thread.run_sync(started.wait, 5)
            threading.Timer(0.2, release.set).start()
            scope.cancel()
    # The call that had started was waited for, not abandoned: the entry is already there.
    assert [e.id for e in store.fetch_all(TapeQuery("t"))] == [1]
