"""Shared reads of the SQLite store: a context read parses only rows it has not seen, and
never answers with an entry that differs from the row in the file (a reset tape whose ids
start again, another process's write, a damaged row), within a bounded memory."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from postgres_support import StoreFactory

from hookline.builtins.store import SQLiteTapeStore, as_async_store
from hookline.builtins.store.asyncstore import fetch_shared
from hookline.builtins.store.parsed import ParsedEntries
from hookline.builtins.tape import Tape
from hookline.kernel.errors import HooklineError
from hookline.kernel.tape import TapeContext, TapeEntry, TapeQuery

pytestmark = pytest.mark.anyio


def payloads(entries: list[TapeEntry]) -> list[object]:
    return [entry.payload.get("n") for entry in entries]


async def test_a_shared_read_reuses_the_entries_it_parsed_and_a_plain_read_gets_its_own(
        tmp_path: Path) -> None:
    with SQLiteTapeStore(tmp_path / "tapes.db") as store:
        adapted = as_async_store(store)
        store.append_many("t", [TapeEntry.new("event", {"n": n}) for n in range(3)])
        first = await fetch_shared(adapted, TapeQuery("t"))
        store.append("t", TapeEntry.new("event", {"n": 3}))
        second = await fetch_shared(adapted, TapeQuery("t"))
        assert payloads(second) == [0, 1, 2, 3]
        assert all(a is b for a, b in zip(first, second[:3], strict=True))  # not parsed again

        own = await adapted.fetch_all(TapeQuery("t"))
        own[0].payload["n"] = "changed by a plain reader"
        assert payloads(await fetch_shared(adapted, TapeQuery("t"))) == [0, 1, 2, 3]
        assert own[0] is not second[0]


async def test_a_reset_tape_written_again_with_the_same_ids_is_read_as_it_is_now(
        tmp_path: Path) -> None:
    with SQLiteTapeStore(tmp_path / "tapes.db") as store:
        adapted = as_async_store(store)
        store.append_many("t", [TapeEntry.new("event", {"n": n}) for n in range(3)])
        assert payloads(await fetch_shared(adapted, TapeQuery("t"))) == [0, 1, 2]
        store.reset("t")
        store.append_many("t", [TapeEntry.new("event", {"n": n}) for n in (7, 8, 9)])
        again = await fetch_shared(adapted, TapeQuery("t"))
        assert [entry.id for entry in again] == [1, 2, 3]
        assert payloads(again) == [7, 8, 9]


WRITER = """
import sys
from hookline.builtins.store import SQLiteTapeStore
from hookline.kernel.tape import TapeEntry
with SQLiteTapeStore(sys.argv[1]) as store:
    store.reset("t")
    store.append_many("t", [TapeEntry.new("event", {"n": "other process"})] * 2)
"""


async def test_another_process_rewriting_the_tape_is_seen_by_the_next_shared_read(
        tmp_path: Path) -> None:
    path = tmp_path / "tapes.db"
    with SQLiteTapeStore(path) as store:
        adapted = as_async_store(store)
        store.append_many("t", [TapeEntry.new("event", {"n": n}) for n in range(2)])
        assert payloads(await fetch_shared(adapted, TapeQuery("t"))) == [0, 1]
        subprocess.run([sys.executable, "-c", WRITER, str(path)], check=True, timeout=60)
        assert payloads(await fetch_shared(adapted, TapeQuery("t"))) == ["other process"] * 2


async def test_a_row_damaged_after_it_was_parsed_stops_the_shared_read_too(
        tmp_path: Path) -> None:
    path = tmp_path / "tapes.db"
    with SQLiteTapeStore(path) as store:
        adapted = as_async_store(store)
        store.append_many("t", [TapeEntry.new("event", {"n": n}) for n in range(3)])
        await fetch_shared(adapted, TapeQuery("t"))
        raw = sqlite3.connect(path)
        raw.execute("UPDATE entries SET payload = '{\"n\": 1' WHERE id = 2")  # cut short
        raw.commit()
        raw.close()
        with pytest.raises(HooklineError, match=r"entry 2 of tape 't' is not valid JSON"):
            await fetch_shared(adapted, TapeQuery("t"))


def test_the_parsed_entries_kept_stay_within_their_limit() -> None:
    parsed = ParsedEntries(limit=1000)
    made: list[int] = []

    def parse(tape: str, rows: list[tuple[int, str, str, str, str]]) -> list[TapeEntry]:
        made.extend(row[0] for row in rows)
        return [TapeEntry(row[0], row[1], {"text": row[2]}, {}, row[4]) for row in rows]

    rows = [(n, "event", "x" * 90, "{}", "d") for n in range(1, 101)]  # 92 chars a row
    for start in range(0, 100, 10):
        parsed.entries("t", rows[start:start + 10], parse)
    assert len(parsed) == 1000 // 92
    made.clear()
    parsed.entries("t", rows[-10:], parse)
    assert made == []  # the newest ten rows are the ones kept
    parsed.entries("t", rows[:1], parse)
    assert made == [1] and len(parsed) == 1000 // 92  # the oldest kept one went for it
    made.clear()
    parsed.entries("t", rows[-10:], parse)
    assert made == [91]
    parsed.entries("t", [(1, "event", "y" * 2000, "{}", "d")], parse)  # over the limit alone
    assert len(parsed) <= 1000 // 92


async def test_a_turn_context_is_unchanged_by_what_a_reader_did_to_an_earlier_one(
        tmp_path: Path) -> None:
    with SQLiteTapeStore(tmp_path / "tapes.db") as store:
        tape = Tape(as_async_store(store), "s", TapeContext())
        await tape.append("message", {"role": "user", "content": "first"})
        async with tape.fork() as run:
            shared = await run.read_messages(shared=True)
            copied = await run.read_messages()
        copied[0]["content"] = "changed by a plugin"
        assert shared[0]["content"] == "first"
        async with tape.fork() as run:
            await run.append("message", {"role": "user", "content": "second"})
            assert [m["content"] for m in await run.read_messages()] == ["first", "second"]


def test_postgres_shared_reads_see_resets_and_another_replica_as_the_database_has_them(
        postgres_stores: StoreFactory) -> None:
    url = postgres_stores.url()
    one, other = postgres_stores.blocking(url), postgres_stores.blocking(url)

    def shared() -> list[TapeEntry]:
        return postgres_stores.portal.call(fetch_shared, one.store, TapeQuery("t"))

    one.append_many("t", [TapeEntry.new("event", {"n": n}) for n in range(3)])
    first = shared()
    one.append("t", TapeEntry.new("event", {"n": 3}))
    second = shared()
    assert payloads(second) == [0, 1, 2, 3]
    assert all(a is b for a, b in zip(first, second[:3], strict=True))  # not parsed again
    own = one.fetch_all(TapeQuery("t"))
    own[0].payload["n"] = "changed by a plain reader"
    assert own[0] is not second[0] and payloads(shared()) == [0, 1, 2, 3]

    other.reset("t")  # another replica resets the tape and writes the same ids again
    other.append_many("t", [TapeEntry.new("event", {"n": n}) for n in (7, 8)])
    assert [(entry.id, entry.payload["n"]) for entry in shared()] == [(1, 7), (2, 8)]
