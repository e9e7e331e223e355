"""The SQL under the SQLite tape store: entry rows, a run's writes applied, reads pushed
down, and the connection helpers.

Split out of `sqlite` to keep each module small; every function works inside a
transaction or connection that the store holds.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from contextlib import suppress
from datetime import UTC, datetime
from typing import Any, Final, TypeAlias

from hookline.kernel.tape import LAST_ANCHOR, TapeEntry, TapeQuery

from ..entries import dump_json, unknown_outcomes
from .journal import JournalOp, check_journal_op

__all__ = [
    "COLUMNS",
    "SCHEMA_TABLES",
    "Row",
    "anchor_start",
    "apply_rows",
    "as_dict",
    "drop_journal",
    "end_run",
    "entry_row",
    "journal_rows",
    "loads",
    "now_iso",
    "op_row",
    "rollback",
    "select_entries",
    "select_since",
    "switch_to_wal",
]

SCHEMA_TABLES: Final = (
    """CREATE TABLE IF NOT EXISTS entries (
        tape    TEXT    NOT NULL,
        id      INTEGER NOT NULL,
        kind    TEXT    NOT NULL,
        payload TEXT    NOT NULL,
        meta    TEXT    NOT NULL,
        date    TEXT    NOT NULL,
        PRIMARY KEY (tape, id)
    ) WITHOUT ROWID""",
    # Finding the last anchor (every context read) without scanning the tape.
    "CREATE INDEX IF NOT EXISTS entries_by_kind ON entries (tape, kind, id)",
    """CREATE TABLE IF NOT EXISTS journal_runs (
        run     TEXT NOT NULL PRIMARY KEY,
        tape    TEXT NOT NULL,
        owner   TEXT NOT NULL,
        started TEXT NOT NULL
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS journal (
        run     TEXT    NOT NULL,
        seq     INTEGER NOT NULL,
        tape    TEXT    NOT NULL,
        action  TEXT    NOT NULL,
        kind    TEXT,
        payload TEXT,
        meta    TEXT,
        date    TEXT,
        PRIMARY KEY (run, seq)
    ) WITHOUT ROWID""",
)
"""The tables and the index of a store file, made where missing."""

COLUMNS: Final = "id, kind, payload, meta, date"

# A write as stored: (tape, action, kind, payload JSON, meta JSON, date); None for a reset.
Row: TypeAlias = tuple[str, str, str | None, str | None, str | None, str | None]


def select_since(conn: sqlite3.Connection, tape: str, entry_id: int,
                 limit: int | None = None) -> list[tuple]:
    """The rows of `tape` from id `entry_id` on, in id order, at most `limit` of them."""
    return conn.execute(f"SELECT {COLUMNS} FROM entries WHERE tape = ? AND id >= ? ORDER BY id "
                        f"LIMIT ?", (tape, entry_id, -1 if limit is None else limit)).fetchall()


def select_entries(
    conn: sqlite3.Connection, tape: str, start: int, query: TapeQuery
) -> list[tuple]:
    anchored = query.anchor is not None or query.anchor_range is not None
    exact = query.text_filter is None and query.date_range is None
    kinds = f" AND kind IN ({', '.join('?' * len(query.kind_filter))})" if query.kind_filter else ""
    if query.tail_entries is not None and exact and query.anchor_range is None:
        # The last matching rows after the anchor, read newest first; the anchor row is
        # put back in front so apply_query slices exactly as it would on the whole tape.
        rows = conn.execute(
            f"SELECT {COLUMNS} FROM entries WHERE tape = ? AND id >= ?{kinds} "
            f"ORDER BY id DESC LIMIT ?",
            [tape, start + 1 if anchored else start, *query.kind_filter, query.tail_entries],
        ).fetchall()
        rows.reverse()
        if anchored:
            rows[:0] = conn.execute(
                f"SELECT {COLUMNS} FROM entries WHERE tape = ? AND id = ?", (tape, start)
            ).fetchall()
        return rows
    sql = f"SELECT {COLUMNS} FROM entries WHERE tape = ? AND id >= ?"
    params: list[object] = [tape, start]
    if kinds and not anchored:  # an anchor slice needs the anchor row, whatever its kind
        sql += kinds
        params.extend(query.kind_filter)
    sql += " ORDER BY id"
    if query.max_entries is not None and not anchored and exact and query.tail_entries is None:
        sql += " LIMIT ?"
        params.append(query.max_entries)
    return conn.execute(sql, params).fetchall()


def entry_row(tape: str, action: str, entry: TapeEntry) -> Row:
    return (tape, action, entry.kind, dump_json(entry.payload, "payload"),
            dump_json(entry.meta, "meta"), entry.date)


def op_row(op: JournalOp) -> Row:
    """Check one journal op and turn it into its stored form."""
    tape, action, entry = check_journal_op(op)
    if entry is None:
        return (tape, action, None, None, None, None)
    return entry_row(tape, action, entry)


def apply_rows(conn: sqlite3.Connection, rows: Sequence[Row]) -> list[TapeEntry]:
    """Perform writes in order inside the caller's transaction; returns the entries stored."""
    next_ids: dict[str, int] = {}
    anchored: dict[str, bool] = {}
    stored: list[TapeEntry] = []
    for tape, action, kind, payload, meta, date in rows:
        if action == "reset":
            conn.execute("DELETE FROM entries WHERE tape = ?", (tape,))
            next_ids[tape], anchored[tape] = 1, False
            continue
        if tape not in next_ids:
            (next_ids[tape],) = conn.execute(
                "SELECT COALESCE(MAX(id), 0) + 1 FROM entries WHERE tape = ?", (tape,)
            ).fetchone()
        if action == "bootstrap":
            if tape not in anchored:
                anchored[tape] = conn.execute(
                    "SELECT 1 FROM entries WHERE tape = ? AND kind = 'anchor' LIMIT 1", (tape,)
                ).fetchone() is not None
            if anchored[tape]:
                continue
        entry_id = next_ids[tape]
        conn.execute(
            "INSERT INTO entries (tape, id, kind, payload, meta, date) VALUES (?, ?, ?, ?, ?, ?)",
            (tape, entry_id, kind, payload, meta, date),
        )
        next_ids[tape] = entry_id + 1
        if kind == "anchor":
            anchored[tape] = True
        stored.append(TapeEntry(entry_id, str(kind), loads(payload), loads(meta), str(date)))
    return stored


def end_run(conn: sqlite3.Connection, run: str, tape: str, started: str, error: str) -> None:
    """Move a run's journal onto the tapes, then a `run` event marking it interrupted."""
    marker = TapeEntry.new(
        "event", {"name": "run", "data": {"status": "interrupted", "error": error}},
        interrupted=True, started=started, recovered=now_iso(),
    )
    rows = journal_rows(conn, run)
    unknown = unknown_outcomes([(str(row[2]), loads(row[3])) for row in rows
                                if row[0] == tape and row[2] is not None])
    ending = [entry_row(tape, "append", entry) for entry in (unknown, marker) if entry]
    apply_rows(conn, [*rows, *ending])
    drop_journal(conn, run)


def journal_rows(conn: sqlite3.Connection, run: str) -> list[Row]:
    return conn.execute(
        "SELECT tape, action, kind, payload, meta, date FROM journal WHERE run = ? ORDER BY seq",
        (run,),
    ).fetchall()


def drop_journal(conn: sqlite3.Connection, run: str) -> None:
    conn.execute("DELETE FROM journal WHERE run = ?", (run,))
    conn.execute("DELETE FROM journal_runs WHERE run = ?", (run,))


def switch_to_wal(conn: sqlite3.Connection, busy_timeout: float) -> str:
    """`PRAGMA journal_mode = WAL`, retried while another process holds the new file's
    lock: SQLite does not apply the busy timeout to this switch, so two processes opening
    a new store at once would otherwise fail with "database is locked"."""
    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            return str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


def rollback(conn: sqlite3.Connection) -> None:
    # SQLite may already have rolled back (some errors end the transaction themselves);
    # a failing rollback must not hide the error that caused it.
    if conn.in_transaction:
        with suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


def loads(text: str | None) -> dict:
    return as_dict(json.loads(text or "{}"))


def as_dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


def anchor_start(conn: sqlite3.Connection, tape: str, query: TapeQuery) -> int | None:
    """First id worth reading: 1, or the selected anchor's id; None if it is missing."""
    if query.anchor_range is not None:
        name: str | None = query.anchor_range[0]
    elif query.anchor is LAST_ANCHOR:
        (found,) = conn.execute(
            "SELECT MAX(id) FROM entries WHERE tape = ? AND kind = 'anchor'", (tape,)
        ).fetchone()
        return found
    elif query.anchor is not None:
        name = query.anchor
    else:
        return 1
    # Anchor names live in the JSON payload; scan anchors newest first in Python so
    # matching is exactly apply_query's (`payload.get("name") == name`).
    cursor = conn.execute(
        "SELECT id, payload FROM entries WHERE tape = ? AND kind = 'anchor' ORDER BY id DESC",
        (tape,),
    )
    for anchor_id, payload in cursor:
        if loads(payload).get("name") == name:
            return int(anchor_id)
    return None
