"""The durable default tape store: one SQLite database in WAL mode.

Atomic, durable (`synchronous=FULL` by default) appends with gapless ids per tape, also with
several processes on the file; a run journal recovered after its process dies; a file that
is deleted, replaced or damaged is refused, never written into; the file stays 0600
(`privacy.files.secure_store`). docs/tapes.md ("The tape store") states each guarantee;
writer.py holds the writer thread (group commit) and the reader connections.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager, suppress
from os import PathLike
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Literal, TypeVar

from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.tape import TapeEntry, TapeQuery, apply_query

from ...privacy.files import secure_store
from ..entries import SIDECAR_MARKER, check_batch, check_entry, check_tape_name
from .claims import KeyClaims
from .files import (
    FileIdentity,
    damaged_error,
    is_damage,
    moved_error,
    problem_lines,
    transient_error,
)
from .journal import JournalOp, Owner
from .sql import (
    SCHEMA_TABLES,
    anchor_start,
    apply_rows,
    as_dict,
    drop_journal,
    end_run,
    entry_row,
    journal_rows,
    loads,
    now_iso,
    op_row,
    rollback,
    select_entries,
    select_since,
    switch_to_wal,
)
from .writer import GroupWriter, ReaderPool, WriterStopped, wait

__all__ = [
    "COMMIT_FAILED_ERROR",
    "INTERRUPTED_ERROR",
    "SCHEMA_VERSION",
    "SQLiteTapeStore",
]

SCHEMA_VERSION: Final = 2
"""Stored in `PRAGMA user_version`; a database from a newer version is refused.

Version 2 added the anchor index and the run journal (a version 1 file is upgraded)."""

INTERRUPTED_ERROR: Final = (
    "the process running this turn ended before the turn finished; what it recorded up "
    "to then is kept on the session's tape"
)
"""The `error` of the `run` event that marks a recovered, interrupted run."""

COMMIT_FAILED_ERROR: Final = (
    "saving this turn failed (the tape store could not write); what it recorded up to "
    "then is kept on the session's tape"
)
"""The `error` of the `run` event that ends a run whose commit failed."""

logger = logging.getLogger(__name__)

T = TypeVar("T")

class SQLiteTapeStore:
    """A synchronous BatchTapeStore over one SQLite file (created 0600, its parent 0700).

    `list_tapes` lists every tape holding entries except sidecar tapes (names containing
    `__sidecar__`), sorted. `reset` deletes a tape's entries (its ids start again at 1).
    `append` returns the stored entry with its id, `append_many` the stored entries.
    Opening the store refuses a damaged file and finishes runs left by dead processes
    (`recovered` lists their tapes). Use `close()` (or `with store:`) when done; a closed
    store raises `HooklineError` (`config`).
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
        secure_store(self.path)  # 0600 before SQLite opens it, so its -wal/-shm are too
        self._damage: str | None = None
        self._moved: str | None = None  # what became of the file: see FileIdentity
        self._failed: set[str] = set()  # runs whose commit failed, ended at the next call
        self._journaled: dict[str, int] = {}  # rows of each run's journal known stored
        self._owner = Owner(self.path)
        self._claims = KeyClaims(self.path)
        self.recovered: list[str] = []
        """Tapes on which opening the store finished an interrupted run."""
        # isolation_level=None: no implicit transactions; every transaction here is explicit.
        conn = sqlite3.connect(
            self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
        )
        self._conn: sqlite3.Connection | None = conn
        try:
            with self._guard():
                self._setup(conn, busy_timeout, synchronous)
                self._identity = FileIdentity(self.path)
                self.recovered = self._recover(conn)
        except BaseException:
            self._conn = None
            conn.close()
            raise
        self._readers = ReaderPool(self.path, busy_timeout)
        self._writer = GroupWriter(conn, self._group, self._before_group, self._is_fatal,
                                   name=f"hookline tape writer {self.path.name}")
        self._writer.translate = lambda exc: transient_error(self.path, exc)

    def _setup(self, conn: sqlite3.Connection, busy_timeout: float, synchronous: str) -> None:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        # journal_mode is stored in the file; synchronous is per connection.
        mode = switch_to_wal(conn, busy_timeout)
        if str(mode).lower() != "wal":
            raise HooklineError(ErrorKind.config, f"SQLite refused WAL mode (got {mode!r}).")
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        problems = problem_lines(conn.execute("PRAGMA quick_check").fetchall())
        if problems != ["ok"]:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise self._damaged(problems[0] + more)
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise HooklineError(
                    ErrorKind.config,
                    f"Tape database {self.path} has schema version {version}, newer than this "
                    f"hookline supports ({SCHEMA_VERSION}); upgrade hookline or use another "
                    f"store path.",
                )
            if version < SCHEMA_VERSION:
                for statement in SCHEMA_TABLES:
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            rollback(conn)
            raise

    # -- connection handling -------------------------------------------------------------

    def _damaged(self, detail: str) -> HooklineError:
        """The error for a damaged file; the store refuses every call from now on."""
        self._damage = detail
        return damaged_error(self.path, detail)

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """Turn SQLite's corruption reports into the damaged-file error."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            if not is_damage(exc):
                translated = transient_error(self.path, exc)
                if translated is exc:
                    raise
                raise translated from exc
            raise self._damaged(str(exc)) from exc

    def _check_open(self) -> None:
        """Refuse a call to a closed store, a moved file or a damaged one."""
        if self._moved is not None:
            raise moved_error(self.path, self._moved)
        if self._conn is None:
            raise HooklineError(ErrorKind.config, f"Tape store {self.path} is closed.")
        if self._damage is not None:
            raise damaged_error(self.path, self._damage)

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        """A reader connection (after the failed runs are ended, as any call does)."""
        self._check_open()
        if self._failed:
            self._start(None).result()  # the writer ends them ahead of a group
        with self._guard(), self._readers.connection() as conn:
            yield conn

    def _start(self, work: Callable[[sqlite3.Connection], T] | None,
               on_error: Callable[[BaseException], None] | None = None) -> Future[T]:
        """Queue a write for the writer's next group (see `writer.py`)."""
        self._check_open()
        try:
            return self._writer.submit(work, on_error)
        except WriterStopped:
            raise HooklineError(ErrorKind.config, f"Tape store {self.path} is closed.") from None

    def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        return self._start(work).result()

    def _before_group(self, conn: sqlite3.Connection) -> None:
        self._check_open()
        if self._failed:
            with self._guard():
                self._end_failed_runs(conn)

    @contextmanager
    def _group(self, conn: sqlite3.Connection) -> Iterator[None]:
        """The writer's transaction for one group of writes."""
        try:
            with self._guard(), self._transaction(conn):
                yield
        finally:
            if self._moved is not None and self._conn is not None:
                self._let_go(conn)

    def _is_fatal(self, exc: BaseException) -> bool:
        """Whether a member's error ends its whole group (damage, a moved file)."""
        if isinstance(exc, sqlite3.DatabaseError) and is_damage(exc):
            return True
        return self._moved is not None or self._damage is not None

    @contextmanager
    def _transaction(self, conn: sqlite3.Connection) -> Iterator[None]:
        """BEGIN IMMEDIATE to COMMIT; the file is checked once the write lock is held and
        again after the commit, which is not done if it went to a file no longer there."""
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise HooklineError(
                ErrorKind.temporary, f"Tape store {self.path} is busy: {exc}"
            ) from exc
        try:
            self._check_file()
            yield
            conn.execute("COMMIT")
        except BaseException:
            rollback(conn)
            raise
        self._check_file()

    def _let_go(self, conn: sqlite3.Connection) -> None:
        """Close a moved file's connection after making the old file whole (its WAL
        checkpointed into it) and emptying its WAL, still at the path: the next opener
        would otherwise replay it onto the file now there."""
        self._conn = None
        with suppress(sqlite3.Error):
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()

    def _check_file(self) -> None:
        problem = self._identity.problem()
        if problem is not None:
            self._moved = problem  # every call is refused from now on
            raise moved_error(self.path, problem)

    def close(self) -> None:
        """Close the database once the writes queued so far are done; later calls do
        nothing."""
        self._writer.stop()
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
        self._readers.close()
        self._owner.release()
        self._claims.close()

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

    def check_writable(self) -> None:
        """Raise when the store cannot record a turn now: its file deleted or replaced, a
        full disk, a read-only file system, a damaged file, a lock held past the busy
        timeout. Like a turn's write it takes the write lock, checks the file, and inserts
        a journal row and an entry (rolled back); then it commits a real one-page write
        (the schema version, unchanged) and checks the file again. Backs `/v1/health`."""
        self._run(_probe)

    # -- TapeStore -----------------------------------------------------------------------

    def list_tapes(self) -> list[str]:
        with self._connection() as conn:
            rows = conn.execute(
                "SELECT DISTINCT tape FROM entries WHERE instr(tape, ?) = 0 ORDER BY tape",
                (SIDECAR_MARKER,),
            ).fetchall()
        return [row[0] for row in rows]

    def list_all_tapes(self) -> list[str]:
        """Every tape holding entries, sidecar tapes included (what a copy must read)."""
        with self._connection() as conn:
            rows = conn.execute("SELECT DISTINCT tape FROM entries ORDER BY tape").fetchall()
        return [row[0] for row in rows]

    def reset(self, tape: str) -> None:
        check_tape_name(tape)
        self._run(lambda conn: conn.execute("DELETE FROM entries WHERE tape = ?", (tape,)))

    def reset_if_last(self, tape: str, last_id: int) -> bool:
        """Remove the tape's entries, in one statement, only while its last is `last_id`
        (nothing was added since it was read); whether they were removed."""
        check_tape_name(tape)
        removed = self._run(lambda conn: conn.execute(
            "DELETE FROM entries WHERE tape = ? AND (SELECT MAX(id) FROM entries WHERE "
            "tape = ?) = ?", (tape, tape, last_id)).rowcount)
        return removed > 0

    def append(self, tape: str, entry: TapeEntry) -> TapeEntry:
        return self.append_many(tape, [check_entry(entry)])[0]

    def append_many(
        self, tape: str, entries: Sequence[TapeEntry], *, bootstrap: TapeEntry | None = None
    ) -> list[TapeEntry]:
        """Append `entries` in one transaction (one commit), after `bootstrap` when the tape
        has no anchor yet; returns what was stored."""
        return self._start_append(tape, entries, bootstrap).result()

    async def append_many_async(
        self, tape: str, entries: Sequence[TapeEntry], *, bootstrap: TapeEntry | None = None
    ) -> list[TapeEntry]:
        """`append_many` awaited without a worker thread (what `as_async_store` uses)."""
        return await wait(self._start_append(tape, entries, bootstrap))

    def _start_append(self, tape: str, entries: Sequence[TapeEntry],
                      bootstrap: TapeEntry | None) -> Future[list[TapeEntry]]:
        check_tape_name(tape)
        checked, bootstrap = check_batch(entries, bootstrap)
        rows = [] if bootstrap is None else [entry_row(tape, "bootstrap", bootstrap)]
        rows += [entry_row(tape, "append", entry) for entry in checked]
        return self._start(lambda conn: apply_rows(conn, rows))

    def fetch_all(self, query: TapeQuery) -> list[TapeEntry]:
        """The tape's entries in id order, filtered by `apply_query`.

        Pushed into SQL: the anchor slice (rows from the selected anchor on, so
        `apply_query` still sees that anchor) and, for queries without an anchor rule,
        the kind filter; the tail (the last rows) and the limit when nothing else but
        kinds filters. Everything else (dates, text) is left to `apply_query`, which
        defines the semantics. A context read therefore costs its window, not the tape.
        """
        return self._fetch(query)

    async def fetch_all_async(self, query: TapeQuery) -> list[TapeEntry]:
        """`fetch_all` on the calling thread (what `as_async_store` uses). A read is one
        query on a WAL snapshot of its own: it never waits for the writer, and the window
        it reads costs less than the hop to a worker thread and back would."""
        await self._failed_ended()
        return self._fetch(query)

    async def fetch_since_async(self, tape: str, entry_id: int,
                                limit: int | None = None) -> list[TapeEntry]:
        """The entries of `tape` whose id is `entry_id` or more, in id order, at most
        `limit` of them, read as `fetch_all_async` reads: what the kept context read asks
        (`fetch_since`), and a tape read page by page (`tape_pages`)."""
        await self._failed_ended()
        check_tape_name(tape)
        with self._connection() as conn:
            rows = select_since(conn, tape, entry_id, limit)
        return self._row_entries(tape, rows)

    async def _failed_ended(self) -> None:
        """Before a read: the runs whose commit failed are ended by the writer first, so
        wait for it (without blocking the loop) when there are any."""
        if self._failed:
            await wait(self._start(None))

    def _fetch(self, query: TapeQuery) -> list[TapeEntry]:
        tape = check_tape_name(query.tape)
        with self._connection() as conn:
            try:
                start = anchor_start(conn, tape, query)
            except ValueError as exc:
                raise self._damaged(f"an anchor of tape {tape!r} is not valid JSON") from exc
            rows = [] if start is None else select_entries(conn, tape, start, query)
        # With start None the anchor is missing: apply_query on nothing raises the
        # reference `not_found` error with the reference message.
        return apply_query(self._row_entries(tape, rows), query)

    def _row_entries(self, tape: str, rows: list[tuple]) -> list[TapeEntry]:
        """Entries from rows; their JSON is parsed in one call (the cost of reading a tape
        is mostly per-call overhead of json.loads otherwise)."""
        try:
            texts = json.loads("[" + ",".join(f"[{row[2]},{row[3]}]" for row in rows) + "]")
            if all(len(text) == 2 for text in texts):
                return [
                    TapeEntry(int(row[0]), row[1], as_dict(text[0]), as_dict(text[1]), row[4])
                    for row, text in zip(rows, texts, strict=True)
                ]
        except (ValueError, TypeError, IndexError):
            pass
        for entry_id, _kind, payload, meta, _date in rows:  # find the damaged one
            try:
                loads(payload), loads(meta)
            except ValueError as exc:
                raise self._damaged(
                    f"entry {entry_id} of tape {tape!r} is not valid JSON"
                ) from exc
        raise self._damaged(f"the entries of tape {tape!r} are not valid JSON")

    # -- the run journal -----------------------------------------------------------------

    def journal_write(self, run: str, tape: str, ops: Sequence[JournalOp]) -> None:
        """Record a run's writes durably (one commit) without touching any tape yet.

        `run` names the journal (any unique string), `tape` the run's session tape, on
        which an interrupted marker goes if this process dies before `journal_commit`.
        Safe to repeat, as the PostgreSQL store's: a write replaces the rows after those
        known stored, so ops sent again after a write whose outcome was unknown (its
        caller stopped waiting) land once; the commit does the same.
        """
        self._start_journal_write(run, tape, ops).result()
        self._journaled[run] = self._journaled.get(run, 0) + len(ops)

    async def journal_write_async(self, run: str, tape: str, ops: Sequence[JournalOp]) -> None:
        """`journal_write` awaited without a worker thread (what `journal_of` uses)."""
        await wait(self._start_journal_write(run, tape, ops))
        self._journaled[run] = self._journaled.get(run, 0) + len(ops)  # as its caller knows

    def _start_journal_write(self, run: str, tape: str, ops: Sequence[JournalOp]
                             ) -> Future[None]:
        rows = [op_row(op) for op in ops]
        started = (run, check_tape_name(tape), self._owner.name, now_iso())
        upto = self._journaled.get(run, 0)

        def work(conn: sqlite3.Connection) -> None:
            self._owner.acquire()
            conn.execute("INSERT OR IGNORE INTO journal_runs (run, tape, owner, started) "
                         "VALUES (?, ?, ?, ?)", started)
            conn.execute("DELETE FROM journal WHERE run = ? AND seq > ?", (run, upto))
            conn.executemany(
                "INSERT INTO journal (run, seq, tape, action, kind, payload, meta, date) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(run, upto + n, *row) for n, row in enumerate(rows, 1)],
            )

        return self._start(work)

    def journal_commit(self, run: str, ops: Sequence[JournalOp] = ()) -> list[TapeEntry]:
        """Apply the run's journal and then `ops` to the tapes, and drop the journal, in one
        transaction (one commit); returns the entries stored. A failed commit ends the run
        too: the next call puts its journal on the tape, marked interrupted."""
        return self._start_journal_commit(run, ops).result()

    async def journal_commit_async(self, run: str, ops: Sequence[JournalOp] = ()
                                   ) -> list[TapeEntry]:
        """`journal_commit` awaited without a worker thread (what `journal_of` uses)."""
        return await wait(self._start_journal_commit(run, ops))

    def _start_journal_commit(self, run: str, ops: Sequence[JournalOp]
                              ) -> Future[list[TapeEntry]]:
        try:
            rows = [op_row(op) for op in ops]
        except BaseException:
            self._failed.add(run)
            raise

        upto = self._journaled.pop(run, 0)  # rows after it are in `ops` again

        def work(conn: sqlite3.Connection) -> list[TapeEntry]:
            conn.execute("DELETE FROM journal WHERE run = ? AND seq > ?", (run, upto))
            stored = apply_rows(conn, journal_rows(conn, run) + rows)
            drop_journal(conn, run)
            return stored

        def failed(exc: BaseException) -> None:
            self._failed.add(run)

        try:
            return self._start(work, failed)
        except BaseException:
            self._failed.add(run)
            raise

    def _end_failed_runs(self, conn: sqlite3.Connection) -> None:
        """End the runs whose commit failed, in a transaction of their own before the call's
        work; if that fails too they wait for the next call (damage, a moved file raise)."""
        runs = set(self._failed)
        try:
            with self._transaction(conn):
                for run in runs:
                    found = conn.execute(
                        "SELECT tape, started FROM journal_runs WHERE run = ?", (run,)
                    ).fetchone()
                    if found is not None:
                        end_run(conn, run, found[0], found[1], COMMIT_FAILED_ERROR)
        except Exception as exc:
            if self._moved is not None or (
                isinstance(exc, sqlite3.DatabaseError) and is_damage(exc)
            ):
                raise  # _guard turns damage into its error
            logger.debug("tape store %s: the runs whose commit failed wait for the next "
                         "call: %s", self.path, exc)
            return
        self._failed -= runs
        logger.info("tape store %s: ended %d run(s) whose commit had failed", self.path,
                    len(runs))

    def _recover(self, conn: sqlite3.Connection) -> list[str]:
        """Finish the runs whose process is gone: their journal, then an interrupted marker."""
        if conn.execute("SELECT 1 FROM journal_runs LIMIT 1").fetchone() is None:
            return []
        with self._transaction(conn):
            return self._end_abandoned(conn)

    def _end_abandoned(self, conn: sqlite3.Connection) -> list[str]:
        recovered = []
        runs = conn.execute("SELECT run, tape, owner, started FROM journal_runs").fetchall()
        for run, tape, owner, started in runs:
            if owner == self._owner.name or Owner.alive(self.path, owner):
                continue
            end_run(conn, run, tape, started, INTERRUPTED_ERROR)
            recovered.append(tape)
        return recovered

    async def recover_abandoned_async(self) -> list[str]:
        """Finish now the runs of processes that died since the store was opened (a
        `hookline run` killed beside a gateway that stays up); their tapes. A look at the
        journal's owners first: the writer is asked only when one is gone."""
        await self._failed_ended()  # as every read: never the writer waited for on the loop
        with self._connection() as conn:
            owners = {row[0] for row in conn.execute(
                "SELECT DISTINCT owner FROM journal_runs WHERE owner != ?",
                (self._owner.name,))}
        if all(Owner.alive(self.path, owner) for owner in owners):
            return []
        return await wait(self._start(self._end_abandoned))

    async def journaled_meta(self, tape: str) -> list[dict[str, Any]]:
        """The meta of the messages that runs not yet on the tape (this process's and
        others') wrote to `tape`, once the runs of dead processes are finished: how a
        gateway sees a request that another one took before it shows on the tape."""
        await self.recover_abandoned_async()
        check_tape_name(tape)
        with self._connection() as conn:
            rows = conn.execute(
                "SELECT meta FROM journal WHERE tape = ? AND kind = 'message' AND meta IS "
                "NOT NULL ORDER BY run, seq", (tape,)).fetchall()
        return [loads(row[0]) for row in rows]

    async def claim_request(self, tape: str, key: str) -> bool:
        """Claim a request's key (`claims.py`): False while another process holds it."""
        return self._claims.claim(tape, key)

    async def release_request(self, tape: str, key: str) -> None:
        self._claims.release(tape, key)

    def pending_runs(self) -> int:
        """How many run journals the file holds (running, or left by dead processes)."""
        with self._connection() as conn:
            return int(conn.execute("SELECT COUNT(*) FROM journal_runs").fetchone()[0])


def _probe(conn: sqlite3.Connection) -> Any:
    """What `check_writable` writes: rolled-back rows, then a real unchanged page."""
    conn.execute("SAVEPOINT probe")
    conn.execute("INSERT OR REPLACE INTO journal (run, seq, tape, action) "
                 "VALUES ('', 0, '', 'reset')")
    conn.execute("INSERT OR REPLACE INTO entries (tape, id, kind, payload, meta, date) "
                 "VALUES ('', 0, 'event', '{}', '{}', '')")
    conn.execute("ROLLBACK TO probe")
    conn.execute("RELEASE probe")
    return conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
