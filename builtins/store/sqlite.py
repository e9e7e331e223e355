"""The durable default tape store: one SQLite database in WAL mode.

Guarantees:
- An append is one `BEGIN IMMEDIATE` transaction that reads the tape's highest id and
  inserts the next one, so ids are unique and gapless per tape even with several
  processes appending to the same file (the write lock is taken before the id is read;
  a busy timeout makes competing writers wait instead of failing).
- An entry is either wholly in the database or not at all: the row is written by that one
  transaction, and SQLite's journal rolls back anything not committed.
- `append` returns only after COMMIT, and with `synchronous=FULL` (the default) the WAL is
  fsynced at every commit. In WAL mode `NORMAL` would already survive a process kill
  (committed WAL frames are in the OS page cache, which outlives the process), but it may
  lose the last commits on power loss or an OS crash; FULL closes that gap for the cost of
  one fsync per append, which is small next to a model call. Pass
  `synchronous="NORMAL"` to trade that for speed.

Readers never block writers (WAL). One connection per store, guarded by a lock: calls
come from worker threads (see `as_async_store`), and a single connection can be closed
from any thread, which per-thread connections in pooled threads could not.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from os import PathLike
from pathlib import Path
from types import TracebackType
from typing import Final, Literal

from hookline.kernel.streaming import ErrorKind, HooklineError
from hookline.kernel.tape import LAST_ANCHOR, TapeEntry, TapeQuery, apply_query

from .memory import SIDECAR_MARKER, check_entry, check_tape_name, dump_json

__all__ = ["SCHEMA_VERSION", "SQLiteTapeStore"]

SCHEMA_VERSION: Final = 1
"""Stored in `PRAGMA user_version`; a database from a newer version is refused."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    tape    TEXT    NOT NULL,
    id      INTEGER NOT NULL,
    kind    TEXT    NOT NULL,
    payload TEXT    NOT NULL,
    meta    TEXT    NOT NULL,
    date    TEXT    NOT NULL,
    PRIMARY KEY (tape, id)
) WITHOUT ROWID
"""

_COLUMNS = "id, kind, payload, meta, date"


class SQLiteTapeStore:
    """A synchronous TapeStore over one SQLite file (created with its parent directory).

    `list_tapes` lists every tape holding entries except sidecar tapes (names containing
    `__sidecar__`), sorted. `reset` deletes a tape's entries (its ids start again at 1).
    `append` returns the stored entry with its id. Use `close()` (or `with store:`) when
    done; a closed store raises `HooklineError` (`config`).
    """

    def __init__(
        self,
        path: str | PathLike[str],
        *,
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
        busy_timeout: float = 30.0,
    ) -> None:
        if synchronous not in ("FULL", "NORMAL"):
            raise ValueError(f"synchronous must be 'FULL' or 'NORMAL', got {synchronous!r}")
        if busy_timeout < 0:
            raise ValueError(f"busy_timeout must be >= 0, got {busy_timeout}")
        self.path = Path(path).expanduser()
        self.synchronous = synchronous
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        # isolation_level=None: no implicit transactions; every transaction here is explicit.
        conn = sqlite3.connect(
            self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
        )
        try:
            self._setup(conn, busy_timeout, synchronous)
        except BaseException:
            conn.close()
            raise
        self._conn: sqlite3.Connection | None = conn

    @staticmethod
    def _setup(conn: sqlite3.Connection, busy_timeout: float, synchronous: str) -> None:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        # journal_mode is stored in the file; synchronous is per connection.
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise HooklineError(ErrorKind.config, f"SQLite refused WAL mode (got {mode!r}).")
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise HooklineError(
                    ErrorKind.config,
                    f"Tape database schema version {version} is newer than this hookline "
                    f"supports ({SCHEMA_VERSION}); upgrade hookline or use another store path.",
                )
            if version < SCHEMA_VERSION:
                conn.execute(_SCHEMA)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise

    # -- connection handling -------------------------------------------------------------

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._conn
            if conn is None:
                raise HooklineError(ErrorKind.config, f"Tape store {self.path} is closed.")
            yield conn

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction holding the database write lock from its first statement."""
        with self._connection() as conn:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                raise HooklineError(
                    ErrorKind.temporary, f"Tape store {self.path} is busy: {exc}"
                ) from exc
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise

    def close(self) -> None:
        """Close the database; later calls do nothing."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def __enter__(self) -> SQLiteTapeStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SQLiteTapeStore({str(self.path)!r})"

    # -- TapeStore -----------------------------------------------------------------------

    def list_tapes(self) -> list[str]:
        with self._connection() as conn:
            rows = conn.execute(
                "SELECT DISTINCT tape FROM entries WHERE instr(tape, ?) = 0 ORDER BY tape",
                (SIDECAR_MARKER,),
            ).fetchall()
        return [row[0] for row in rows]

    def reset(self, tape: str) -> None:
        check_tape_name(tape)
        with self._write() as conn:
            conn.execute("DELETE FROM entries WHERE tape = ?", (tape,))

    def append(self, tape: str, entry: TapeEntry) -> TapeEntry:
        check_tape_name(tape)
        check_entry(entry)
        payload = dump_json(entry.payload, "payload")
        meta = dump_json(entry.meta, "meta")
        with self._write() as conn:
            (next_id,) = conn.execute(
                "SELECT COALESCE(MAX(id), 0) + 1 FROM entries WHERE tape = ?", (tape,)
            ).fetchone()
            conn.execute(
                "INSERT INTO entries (tape, id, kind, payload, meta, date) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (tape, next_id, entry.kind, payload, meta, entry.date),
            )
        return replace(entry, id=next_id, payload=json.loads(payload), meta=json.loads(meta))

    def fetch_all(self, query: TapeQuery) -> list[TapeEntry]:
        """The tape's entries in id order, filtered by `apply_query`.

        Pushed into SQL: the anchor slice (rows from the selected anchor on, so
        `apply_query` still sees that anchor) and, for queries without an anchor rule,
        the kind filter; plus the limit when nothing else but kinds filters. Everything
        else (dates, text) is left to `apply_query`, which defines the semantics.
        """
        tape = check_tape_name(query.tape)
        with self._connection() as conn:
            start = self._anchor_start(conn, tape, query)
            if start is None:
                rows: list[tuple] = []
            else:
                sql = f"SELECT {_COLUMNS} FROM entries WHERE tape = ? AND id >= ?"
                params: list[object] = [tape, start]
                anchored = query.anchor is not None or query.anchor_range is not None
                if query.kind_filter and not anchored:
                    sql += f" AND kind IN ({', '.join('?' * len(query.kind_filter))})"
                    params.extend(query.kind_filter)
                sql += " ORDER BY id"
                if (
                    query.max_entries is not None
                    and not anchored
                    and query.text_filter is None
                    and query.date_range is None
                ):
                    sql += " LIMIT ?"
                    params.append(query.max_entries)
                rows = conn.execute(sql, params).fetchall()
        entries = [_row_entry(row) for row in rows]
        # With start None the anchor is missing: apply_query on nothing raises the
        # reference `not_found` error with the reference message.
        return apply_query(entries, query)

    @staticmethod
    def _anchor_start(conn: sqlite3.Connection, tape: str, query: TapeQuery) -> int | None:
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
            if _payload(payload).get("name") == name:
                return int(anchor_id)
        return None


def _rollback(conn: sqlite3.Connection) -> None:
    # SQLite may already have rolled back (some errors end the transaction themselves).
    if conn.in_transaction:
        conn.execute("ROLLBACK")


def _payload(text: str) -> dict:
    value = json.loads(text)
    return value if isinstance(value, dict) else {}


def _row_entry(row: tuple) -> TapeEntry:
    entry_id, kind, payload, meta, date = row
    return TapeEntry(
        id=int(entry_id), kind=kind, payload=_payload(payload), meta=_payload(meta), date=date
    )
