"""The kept context read: what the store would give for the context query, read from the
last row kept on; a tape reset, rewritten by another process or by another replica is read
as the store has it now."""

from __future__ import annotations

import random
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from postgres_support import StoreFactory

from hookline.builtins.store import SQLiteTapeStore, as_async_store
from hookline.builtins.tape import Tape
from hookline.builtins.tape.kept import KeptContext
from hookline.kernel.errors import HooklineError
from hookline.kernel.tape import TapeContext, TapeEntry, TapeQuery

pytestmark = pytest.mark.anyio


def payloads(entries: list[TapeEntry]) -> list[object]:
    return [entry.payload.get("n") for entry in entries]


def events(*numbers: object) -> list[TapeEntry]:
    return [TapeEntry.new("event", {"n": n}) for n in numbers]


async def test_a_kept_read_gives_what_the_store_gives_whatever_was_written_between(
        any_store: Any) -> None:
    """Appends, anchors, resets and windows in a seeded random order: each kept read is
    equal to a plain read of the same query."""
    adapted = as_async_store(any_store)
    chance = random.Random(7)
    for window in (None, 0, 1, 5):
        tape = f"t{window}"
        query = TapeQuery(tape).last_anchor()
        query = query if window is None else query.tail(window)
        kept = KeptContext()
        any_store.append(tape, TapeEntry.new("anchor", {"name": "start"}))
        for step in range(120):
            roll = chance.random()
            if roll < 0.05:
                any_store.reset(tape)
                any_store.append(tape, TapeEntry.new("anchor", {"name": "again"}))
            elif roll < 0.15:
                any_store.append(tape, TapeEntry.new("anchor", {"name": f"a{step}"}))
            elif roll < 0.7:
                any_store.append_many(tape, events(*range(step, step + chance.randint(1, 3))))
            assert await kept.read(adapted, query) == await adapted.fetch_all(query), step


async def test_a_kept_read_hands_out_the_entries_it_kept_and_adds_what_was_written(
        any_store: Any) -> None:
    adapted = as_async_store(any_store)
    any_store.append_many("t", [TapeEntry.new("anchor", {"name": "start"}), *events(0, 1, 2)])
    kept, query = KeptContext(), TapeQuery("t").last_anchor().tail(3)
    first = await kept.read(adapted, query)
    any_store.append("t", events(3)[0])
    second = await kept.read(adapted, query)
    assert payloads(second) == [1, 2, 3]
    assert second[0] is first[1] and second[1] is first[2]  # not read again

    own = await adapted.fetch_all(query)
    own[0].payload["n"] = "changed by a plain reader"
    assert payloads(await kept.read(adapted, query)) == [1, 2, 3]


async def test_a_reset_tape_written_again_with_the_same_ids_is_read_as_it_is_now(
        any_store: Any) -> None:
    adapted = as_async_store(any_store)
    kept, query = KeptContext(), TapeQuery("t")
    any_store.append_many("t", events(0, 1, 2))
    assert payloads(await kept.read(adapted, query)) == [0, 1, 2]
    any_store.reset("t")
    any_store.append_many("t", events(7, 8, 9, 10))
    again = await kept.read(adapted, query)
    assert [entry.id for entry in again] == [1, 2, 3, 4]
    assert payloads(again) == [7, 8, 9, 10]


async def test_queries_other_than_a_context_read_are_not_kept(any_store: Any) -> None:
    adapted = as_async_store(any_store)
    kept = KeptContext()
    any_store.append_many("t", events(0, 1))
    assert payloads(await kept.read(adapted, TapeQuery("t").kinds("event"))) == [0, 1]
    assert len(kept) == 0


WRITER = """
import sys
from hookline.builtins.store import SQLiteTapeStore
from hookline.kernel.tape import TapeEntry
with SQLiteTapeStore(sys.argv[1]) as store:
    store.reset("t")
    store.append_many("t", [TapeEntry.new("event", {"n": "other process"})] * 3)
"""


async def test_another_process_rewriting_the_tape_is_seen_by_the_next_kept_read(
        tmp_path: Path) -> None:
    path = tmp_path / "tapes.db"
    with SQLiteTapeStore(path) as store:
        adapted, kept = as_async_store(store), KeptContext()
        store.append_many("t", events(0, 1))
        assert payloads(await kept.read(adapted, TapeQuery("t"))) == [0, 1]
        subprocess.run([sys.executable, "-c", WRITER, str(path)], check=True, timeout=60)
        assert payloads(await kept.read(adapted, TapeQuery("t"))) == ["other process"] * 3


async def test_a_damaged_row_written_since_stops_the_kept_read(tmp_path: Path) -> None:
    path = tmp_path / "tapes.db"
    with SQLiteTapeStore(path) as store:
        adapted, kept = as_async_store(store), KeptContext()
        store.append_many("t", events(0, 1))
        await kept.read(adapted, TapeQuery("t"))
        store.append("t", events(2)[0])
        raw = sqlite3.connect(path)
        raw.execute("UPDATE entries SET payload = '{\"n\": 2' WHERE id = 3")  # cut short
        raw.commit()
        raw.close()
        with pytest.raises(HooklineError, match=r"entry 3 of tape 't' is not valid JSON"):
            await kept.read(adapted, TapeQuery("t"))


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


def test_postgres_kept_reads_see_resets_and_another_replica_as_the_database_has_them(
        postgres_stores: StoreFactory) -> None:
    url = postgres_stores.url()
    one, other = postgres_stores.blocking(url), postgres_stores.blocking(url)
    kept, query = KeptContext(), TapeQuery("t").tail(3)

    def read() -> list[TapeEntry]:
        return postgres_stores.portal.call(kept.read, one.store, query)

    one.append_many("t", events(0, 1, 2))
    first = read()
    other.append("t", events(3)[0])
    second = read()
    assert payloads(second) == [1, 2, 3]
    assert second[0] is first[1]  # not read again
    other.reset("t")
    other.append_many("t", events(7, 8, 9))
    assert payloads(read()) == [7, 8, 9]
