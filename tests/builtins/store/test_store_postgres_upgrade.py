"""A populated PostgreSQL tape store of schema version 1 (tests/builtins/store/
postgres_schema_v1.sql, written the way a hookline of that version wrote: its
`hookline_apply`, its journal statement) opened by this hookline: the migration to
version 2 keeps every entry as it was, recovers the run a dead replica left in the
journal, and new writes (plain, batched, runs) carry on from there."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from postgres_support import StoreFactory

from hookline.builtins.store.postgres.sql import SCHEMA_VERSION
from hookline.kernel.tape import TapeEntry, TapeQuery

V1_SCHEMA = Path(__file__).with_name("postgres_schema_v1.sql")


def sql(url: str, statement: str, *args: Any) -> list[tuple]:
    import psycopg

    with psycopg.connect(url.split("&hookline_")[0], autocommit=True) as conn:
        cursor = conn.execute(statement, args or None)
        return cursor.fetchall() if cursor.description else []


def stored(tape: str, action: str, kind: str, payload: dict[str, Any],
           meta: dict[str, Any] | None = None, day: int = 1) -> tuple[Any, ...]:
    """A write in schema 1's stored form: (tape, action, kind, payload, meta, date,
    anchor name)."""
    anchor = payload.get("name") if kind == "anchor" else None
    return (tape, action, kind, json.dumps(payload, ensure_ascii=False),
            json.dumps(meta or {}, ensure_ascii=False), f"2026-01-{day:02d}T10:00:00+00:00",
            anchor)


def v1_apply(url: str, writes: list[tuple[Any, ...]], run: str | None = None) -> None:
    """One write as a version 1 store made it: a call of its `hookline_apply`."""
    columns = [list(column) for column in zip(*writes, strict=True)] if writes else [[]] * 7
    sql(url, "SELECT count(*) FROM hookline_apply(%s, %s::text[], %s::text[], %s::text[], "
             "%s::text[], %s::text[], %s::text[], %s::text[], %s::text[])",
        run, [], *columns)


def v1_journal(url: str, run: str, tape: str, owner: int, writes: list[tuple[Any, ...]],
               seq: int = 0) -> None:
    """A version 1 store's journal write: the run registered, its rows numbered after
    `seq`."""
    numbered = [(seq + n, *write) for n, write in enumerate(writes, 1)]
    columns = [list(column) for column in zip(*numbered, strict=True)]
    sql(url, "WITH run AS (INSERT INTO hookline_journal_runs (run, tape, owner, started) "
             "VALUES (%s, %s, %s, %s) ON CONFLICT (run) DO NOTHING) "
             "INSERT INTO hookline_journal (run, seq, tape, action, kind, payload, meta, "
             "date, anchor) SELECT %s, * FROM unnest(%s::integer[], %s::text[], %s::text[], "
             "%s::text[], %s::text[], %s::text[], %s::text[], %s::text[])",
        run, tape, owner, "2026-01-05T10:00:00+00:00", run, *columns)


def populate_v1(url: str) -> None:
    sql(url, V1_SCHEMA.read_text())
    start = {"name": "session/start", "state": {"owner": "ü"}}
    v1_apply(url, [stored("s1", "bootstrap", "anchor", start),
                   stored("s1", "append", "message", {"role": "user", "content": "héllo 🌍"},
                          {"run_id": "run-1"}),
                   stored("s1", "append", "message", {"role": "assistant", "content": "hi"},
                          {"run_id": "run-1", "usage": {"tokens": [1, 2]}}),
                   stored("s1", "append", "event", {"name": "run", "data": {"status": "ok"}},
                          {"run_id": "run-1"})])
    v1_apply(url, [stored("s1", "bootstrap", "anchor", start)])  # has one: skipped
    v1_apply(url, [stored("s1", "append", "anchor", {"name": "phase-2", "state": {}}, day=2)])
    # A run committed through the journal, a sidecar tape with it.
    v1_journal(url, "run-2", "s1", 7, [
        stored("s1", "append", "message", {"role": "user", "content": "spill"}, day=3),
        stored("s1__sidecar__spill", "append", "spill", {"text": "x" * 5000}, day=3)])
    v1_apply(url, [stored("s1", "append", "event", {"name": "run", "data": {"status": "ok"}},
                          day=3)], run="run-2")
    # A reset tape, written again after it.
    v1_apply(url, [stored("s2", "append", "message", {"role": "user", "content": "old"})])
    v1_apply(url, [("s2", "reset", None, None, None, None, None),
                   stored("s2", "bootstrap", "anchor", start, day=4),
                   stored("s2", "append", "message", {"role": "user", "content": "new"}, day=4)])
    # A replica that died mid-run: its owner row's heartbeat is old, its lock is free.
    sql(url, "INSERT INTO hookline_owners VALUES (99, now() - interval '1 hour', 'old-host', "
             "4242, now() - interval '2 hours')")
    v1_journal(url, "run-3", "s1", 99, [
        stored("s1", "append", "message", {"role": "user", "content": "unfinished"}, day=5)])
    v1_journal(url, "run-3", "s1", 99, [
        stored("s1", "append", "tool_call", {"calls": [{"name": "shell"}]}, day=5)], seq=1)


def entries(url: str) -> list[tuple[Any, ...]]:
    return sql(url, "SELECT tape, id, kind, payload, meta, date, anchor FROM hookline_entries "
                    "ORDER BY tape, id")


def test_a_populated_version_1_database_is_upgraded_with_every_entry_intact(
    postgres_stores: StoreFactory,
) -> None:
    url = postgres_stores.url() + "&hookline_grace=0.5"
    populate_v1(url)
    before = entries(url)
    assert [(tape, entry_id) for tape, entry_id, *_ in before] == [
        ("s1", 1), ("s1", 2), ("s1", 3), ("s1", 4), ("s1", 5), ("s1", 6), ("s1", 7),
        ("s1__sidecar__spill", 1), ("s2", 1), ("s2", 2)]

    # A server up for less than the grace counts no owner dead yet (a fresh test cluster).
    ((uptime,),) = sql(url, "SELECT extract(epoch FROM now() - pg_postmaster_start_time())")
    time.sleep(max(0.0, 0.6 - float(uptime)))
    store = postgres_stores.blocking(url)

    assert sql(url, "SELECT version FROM hookline_schema_version") == [(SCHEMA_VERSION,)]
    assert sql(url, "SELECT pronargs FROM pg_proc WHERE proname = 'hookline_apply' "
                    "AND pronamespace = current_schema()::regnamespace") == [(12,)]
    after = entries(url)
    assert after[:7] == before[:7] and after[-3:] == before[-3:]  # every entry as it was
    # The dead replica's run: its journal, then the interrupted marker, after the rest.
    assert store.store.recovered == ["s1"]
    recovered = [(entry_id, kind, json.loads(payload)) for tape, entry_id, kind, payload, *_
                 in after[7:-3]]
    assert [(entry_id, kind) for entry_id, kind, _ in recovered] == [
        (8, "message"), (9, "tool_call"), (10, "event")]
    assert recovered[2][2]["data"]["status"] == "interrupted"
    assert sql(url, "SELECT count(*) FROM hookline_journal_runs") == [(0,)]

    # Read through the store: the JSON, the dates and the anchors of version 1.
    s1 = store.fetch_all(TapeQuery("s1"))
    assert s1[1].payload == {"role": "user", "content": "héllo 🌍"}
    assert s1[2].meta == {"run_id": "run-1", "usage": {"tokens": [1, 2]}}
    assert s1[1].date == "2026-01-01T10:00:00+00:00"
    assert [e.id for e in store.fetch_all(TapeQuery("s1").after_anchor("phase-2"))] == [
        6, 7, 8, 9, 10]
    assert [e.payload.get("content") for e in store.fetch_all(TapeQuery("s2"))] == [None, "new"]
    assert store.list_tapes() == ["s1", "s2"]
    (spill,) = store.fetch_all(TapeQuery("s1__sidecar__spill"))
    assert spill.payload == {"text": "x" * 5000}

    # New writes carry on after the old ids.
    assert store.append("s1", TapeEntry.new("message", {"content": "later"})).id == 11
    bootstrap = TapeEntry.new("anchor", {"name": "session/start", "state": {}})
    added = store.append_many("s2", [TapeEntry.new("message", {"content": "more"})],
                              bootstrap=bootstrap)
    assert [e.id for e in added] == [3]
    store.journal_write("run-4", "s1", [("s1", "append", TapeEntry.new("message", {}))])
    committed = store.journal_commit("run-4", [("s1", "append", TapeEntry.new("event", {}))])
    assert [e.id for e in committed] == [12, 13]
    assert entries(url)[:7] == before[:7]
