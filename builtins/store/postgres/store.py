"""A PostgreSQL tape store: one database shared by several gateway replicas.

Selected when the `tape_store` setting is a `postgresql://` or `postgres://` URL; needs the
`hookline[postgres]` extra (psycopg 3 and psycopg-pool, imported only when such a store is
opened) and the asyncio event loop. It keeps the SQLite store's guarantees across processes
and machines: gapless ids and whole runs under per-tape advisory locks, writes acknowledged
after COMMIT, the run journal with recovery of dead owners' runs, bounded waits and a
versioned schema. docs/deployment.md states each of them; lease.py holds the owner lease,
heartbeat and sweep, conn.py the connections, sql.py the schema and its functions.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final, TypeVar

import anyio

from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.tape import TapeEntry, TapeQuery, apply_query

from ..budget import store_call
from ..entries import SIDECAR_MARKER, check_batch, check_entry, check_tape_name
from ..sqlite.journal import JournalOp
from ..url import is_postgres_url, redact_url
from .conn import (
    STATEMENT_TIMEOUT,
    _import_driver,
    _positive,
    _require_asyncio,
    capped_pool_class,
    configure_connection,
    deadline,
    split_url,
)
from .group import WriteGroups
from .lease import PostgresLiveness, _Run
from .sql import (
    _MIGRATIONS,
    NS_MIGRATE,
    SCHEMA_VERSION,
    SELECT_SINCE,
    Statement,
    _as_dict,
    _loads,
    _op_row,
    _row,
    _select,
    apply_statement,
    journal_statement,
)

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

__all__ = ["PostgresTapeStore"]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")


_PROBE_TAPE: Final = "__hookline_health_probe__"
_PROBE_ROWS: Final = (
    "WITH journal AS (INSERT INTO hookline_journal (run, seq, tape, action, kind, payload, "
    "meta, date) VALUES (%(tape)s || %(owner)s::text, 0, %(tape)s, 'append', 'event', "
    "%(payload)s, '{}', '')) "
    "INSERT INTO hookline_entries (tape, id, kind, payload, meta, date) "
    "VALUES (%(tape)s, %(owner)s, 'event', %(payload)s, '{}', '')")
"""What the health check writes and rolls back: a journal row and an entry, each of 8 KB
(stored out of line, as a long reply is), under the owner's id so replicas never wait
for each other's probe."""


class PostgresTapeStore(PostgresLiveness):
    """An asynchronous BatchTapeStore with a run journal, in one PostgreSQL database.

    Construct, then `await store.open()` (or `async with store:`); `open_postgres_store`
    also runs `maintain()` (heartbeat and recovery sweep) beside it. `list_tapes` hides
    sidecar tapes; `reset` deletes a tape's entries (its ids restart at 1); `append` and
    `append_many` return what was stored. `recovered` lists the tapes on which opening
    finished an interrupted run. A closed store raises `HooklineError` (`config`); a
    database that cannot be reached raises `temporary` errors until it is back.
    """

    def __init__(
        self,
        url: str,
        *,
        pool_min: int = 1,
        pool_max: int | None = None,
        heartbeat: float = 1.0,
        grace: float | None = None,
        sweep: float = 2.0,
        timeout: float = 5.0,
        statement_timeout: float = STATEMENT_TIMEOUT,
    ) -> None:
        if not is_postgres_url(url):
            raise HooklineError(ErrorKind.config, f"Not a PostgreSQL URL: {redact_url(url)!r}.")
        self.display = redact_url(url.strip())
        """The URL without its password: what errors, logs and the repr show."""
        self._conninfo, params = split_url(url)
        self.pool_min = pool_min
        self.pool_max = int(pool_max or _positive(params, "hookline_pool_max", 10, self.display))
        self.pool_min = min(self.pool_min, self.pool_max)
        self.heartbeat = heartbeat
        self.grace = grace or _positive(params, "hookline_grace", 5.0, self.display)
        self.sweep = sweep
        self.timeout = timeout
        self.statement_timeout = statement_timeout
        """Seconds a call may hold a connection (see `postgres_conn.STATEMENT_TIMEOUT`)."""
        self.owner = secrets.randbits(63) or 1
        """This store's owner id (its advisory lock key and heartbeat row), its lease: a
        new one after the lock was lost for longer than `grace`."""
        self.recovered: list[str] = []
        """Tapes on which opening the store finished an interrupted run."""
        self._pool: AsyncConnectionPool | None = None
        self._groups = WriteGroups(lambda until: self._connection(until=until),
                                   self._outcome_unknown)
        self._owner_conn: AsyncConnection | None = None
        self._active: dict[str, _Run] = {}
        """The runs this store is running (journal written, not yet committed)."""
        self._claims = {}
        self._lease_until = 0.0
        """Until when (monotonic) no peer may recover this owner's runs."""
        self._closed = False
        self._psycopg: Any = None

    def __repr__(self) -> str:
        return f"PostgresTapeStore({self.display!r})"

    # -- opening and closing -------------------------------------------------------------

    async def open(self) -> PostgresTapeStore:
        """Connect, migrate the schema, become an owner, open the pool, recover dead runs."""
        self._psycopg, psycopg_pool = _import_driver()
        _require_asyncio()
        try:
            conn = await self._connect()
            self._owner_conn = conn
            await self._migrate(conn)
            self._lease_until = await self._register(conn) + self._lease
            pool = capped_pool_class(psycopg_pool)(
                self._conninfo, min_size=self.pool_min, max_size=self.pool_max,
                kwargs={"autocommit": True, **self._connect_options()},
                configure=configure_connection, open=False, timeout=self.timeout,
                name="hookline-tapes", reconnect_timeout=24 * 3600.0,  # never give up
            )
            try:
                await pool.open(wait=True, timeout=max(self.timeout, 10.0))
            except BaseException:
                await pool.close()
                raise
            self._pool = pool
            self.recovered = await self._sweep_runs()
        except BaseException as exc:
            with anyio.CancelScope(shield=True):
                await self._shut()
            if isinstance(exc, HooklineError) or not self._is_driver_error(exc):
                raise
            raise self._error(exc, "cannot open") from exc
        return self

    async def close(self) -> None:
        """Close the pool and the owner connection (releasing the owner lock); idempotent."""
        self._closed = True
        with anyio.CancelScope(shield=True):
            await self._shut(unregister=True)

    async def _shut(self, unregister: bool = False) -> None:
        pool, self._pool = self._pool, None
        conn, self._owner_conn = self._owner_conn, None
        if pool is not None:
            try:
                await pool.close()
            except Exception:
                logger.warning("store.postgres_pool_close_failed store=%s", self.display)
        if conn is not None:
            try:
                if unregister and not conn.closed and not self._active:
                    await conn.execute(
                        "DELETE FROM hookline_owners WHERE owner = %s", (self.owner,))
            except Exception:
                pass  # the heartbeat row of a closed owner is removed by the next sweep
            finally:
                await conn.close()

    async def __aenter__(self) -> PostgresTapeStore:
        return await self.open()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def _migrate(self, conn: AsyncConnection) -> None:
        with deadline(conn, STATEMENT_TIMEOUT * 3):
            await self._migrate_within(conn)

    async def _migrate_within(self, conn: AsyncConnection) -> None:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s, 0)", (NS_MIGRATE,))
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS hookline_schema_version (version integer NOT NULL)")
            row = await (await conn.execute(
                "SELECT max(version) FROM hookline_schema_version")).fetchone()
            version = int(row[0]) if row and row[0] is not None else 0
            if version > SCHEMA_VERSION:
                raise HooklineError(
                    ErrorKind.config,
                    f"The PostgreSQL tape store {self.display} has schema version {version}, "
                    f"newer than this hookline supports ({SCHEMA_VERSION}); upgrade hookline "
                    f"(every replica) or use another database.",
                )
            for statements in _MIGRATIONS[version:]:
                for statement in statements:
                    await conn.execute(statement)
            if version < SCHEMA_VERSION:
                await conn.execute("DELETE FROM hookline_schema_version")
                await conn.execute("INSERT INTO hookline_schema_version VALUES (%s)",
                                   (SCHEMA_VERSION,))

    async def check_writable(self) -> None:
        """Raise unless the database takes what a turn writes now: in one transaction, a
        committed update of the schema version row, unchanged (a read-only server or a
        standby refuses it), and, rolled back, a journal row and an entry of 8 KB that
        cannot be compressed (a volume too full for a turn's rows refuses them, where an
        update in place would still fit in its page). Never the heartbeat: only the lock's
        own connection may refresh it, or a probe would keep a replica that lost its lock
        looking alive to its peers. Backs the gateway's `/v1/health`, which answers within
        2 s: the check takes 2 s at most in all (it is shielded, so the channel's own
        deadline could not end it), on a black-holed connection too."""
        until = time.monotonic() + min(self.timeout, 2.0)
        async with self._statement(min(self.timeout, 2.0), until) as conn, conn.transaction():
            cursor = await conn.execute("UPDATE hookline_schema_version SET version = version")
            if cursor.rowcount < 1:
                raise HooklineError(
                    ErrorKind.config,
                    f"The PostgreSQL tape store {self.display} has lost the row of "
                    f"hookline_schema_version (something other than hookline deleted it); "
                    f"restore it: INSERT INTO hookline_schema_version VALUES "
                    f"({SCHEMA_VERSION}).")
            await conn.execute("SAVEPOINT hookline_probe")
            await conn.execute(_PROBE_ROWS, {"owner": self.owner, "tape": _PROBE_TAPE,
                                             "payload": secrets.token_hex(4096)})
            await conn.execute("ROLLBACK TO SAVEPOINT hookline_probe")

    # -- TapeStore -----------------------------------------------------------------------

    async def list_tapes(self) -> list[str]:
        async with self._connection() as conn:
            cursor = await conn.execute(
                "SELECT DISTINCT tape FROM hookline_entries WHERE strpos(tape, %s) = 0",
                (SIDECAR_MARKER,))
            rows = await cursor.fetchall()
        return sorted(row[0] for row in rows)

    async def list_all_tapes(self) -> list[str]:
        """Every tape holding entries, sidecar tapes included (what a copy must read)."""
        async with self._connection() as conn:
            rows = await (await conn.execute(
                "SELECT DISTINCT tape FROM hookline_entries")).fetchall()
        return sorted(row[0] for row in rows)

    async def reset(self, tape: str) -> None:
        check_tape_name(tape)
        await self._write_grouped(apply_statement([(tape, "reset", None, None, None, None, None)]))

    async def append(self, tape: str, entry: TapeEntry) -> TapeEntry:
        return (await self.append_many(tape, [check_entry(entry)]))[0]

    async def append_many(
        self, tape: str, entries: Sequence[TapeEntry], *, bootstrap: TapeEntry | None = None
    ) -> list[TapeEntry]:
        """Append `entries` in one transaction, after `bootstrap` when the tape has no
        anchor yet; returns what was stored."""
        check_tape_name(tape)
        checked, bootstrap = check_batch(entries, bootstrap)
        rows = [] if bootstrap is None else [_row(tape, "bootstrap", bootstrap)]
        rows += [_row(tape, "append", entry) for entry in checked]
        return await self._write_grouped(apply_statement(rows))

    async def fetch_all(self, query: TapeQuery) -> list[TapeEntry]:
        """The tape's entries in id order, filtered by `apply_query` (see the module doc
        for what is pushed into SQL)."""
        tape = check_tape_name(query.tape)
        sql, params = _select(tape, query)
        async with self._connection() as conn:
            rows = await (await conn.execute(sql, params)).fetchall()
        rows.sort(key=lambda row: row[0])
        # No rows for an anchored query: the anchor is missing, and apply_query on nothing
        # raises the reference `not_found` error with the reference message.
        return apply_query(self._entries(tape, rows), query)

    async def fetch_since(self, tape: str, entry_id: int,
                          limit: int | None = None) -> list[TapeEntry]:
        """The entries of `tape` whose id is `entry_id` or more, in id order, at most
        `limit` of them: what the kept context read asks, and a tape read page by page
        (`tape_pages`). Ids are given in commit order (one writer per tape at a time), so
        a later read never finds an id below one read before."""
        check_tape_name(tape)
        params = {"tape": tape, "id": entry_id, "limit": limit}
        async with self._connection() as conn:
            rows = await (await conn.execute(SELECT_SINCE, params)).fetchall()
        return self._entries(tape, rows)

    def _entries(self, tape: str, rows: Sequence[Sequence[Any]]) -> list[TapeEntry]:
        """Entries from rows, their JSON parsed in one call."""
        try:
            texts = json.loads("[" + ",".join(f"[{row[2]},{row[3]}]" for row in rows) + "]")
            return [
                TapeEntry(int(row[0]), row[1], _as_dict(text[0]), _as_dict(text[1]), row[4])
                for row, text in zip(rows, texts, strict=True)
            ]
        except (ValueError, TypeError, IndexError) as exc:
            raise HooklineError(
                ErrorKind.config,
                f"Tape {tape!r} in {self.display} holds an entry that is not valid JSON; "
                f"it was written by something other than hookline.",
            ) from exc

    # -- the run journal -----------------------------------------------------------------

    async def journal_write(self, run: str, tape: str, ops: Sequence[JournalOp]) -> None:
        """Record a run's writes durably (one statement, so one commit) without touching any
        tape yet; see `SQLiteTapeStore.journal_write`. A run's writes come one at a time
        (the fork serialises them), so its sequence numbers are counted here: only rows
        known to be stored count, and each write replaces the rows after them, so a write
        repeated after an unknown outcome (here, or by the caller) is stored once. Fails,
        and so does the run's commit, once the run's lease is gone (see `postgres_lease`)."""
        rows = [_op_row(op) for op in ops]
        check_tape_name(tape)
        state = self._active.get(run)
        if state is None:  # registered before the write: a sweep never sees it abandoned
            state = self._active[run] = _Run(tape, self.owner)
        if state.upto == 0:
            await self._check_claims(run, ops)
        await self._hold_lease(run, state)
        await self._repeatable(lambda _repeat: journal_statement(
            run, state.tape, state.owner, state.upto, rows))
        state.upto += len(rows)

    async def journal_commit(self, run: str, ops: Sequence[JournalOp] = ()) -> list[TapeEntry]:
        """Apply the run's journal and then `ops` to the tapes, and drop the journal, in one
        transaction; returns the entries stored. When the commit's outcome is unknown (its
        connection failed), it is repeated, which reads the outcome back: success when the
        run is saved, an error only when it is not (or the database stays unreachable)."""
        try:
            rows = [_op_row(op) for op in ops]
            state = self._active.get(run)
            if state is None or state.upto == 0:
                await self._check_claims(run, ops)
            if state is not None:
                await self._hold_lease(run, state)
            owner = state.owner if state is not None else self.owner
            upto = state.upto if state is not None else 0
            lock = [state.tape] if state is not None else []
            return await self._repeatable(lambda repeat: apply_statement(
                rows, run=run, owner=owner, upto=upto, repeat=repeat, lock=lock))
        finally:
            self._active.pop(run, None)

    async def _write_grouped(self, statement: Statement[_T],
                             until: float | None = None) -> _T:
        """One write in the next group (see `group.py`), within `statement_timeout`; a
        closed store's error comes from the connection it cannot lend."""
        with store_call(until or time.monotonic() + self.statement_timeout) as bound:
            return await self._groups.write(statement, bound)

    async def _repeatable(self, write: Callable[[bool], Statement[_T]]) -> _T:
        """Run a write that is safe to repeat (`write(repeat)` makes its statement); while
        it fails with its outcome unknown, repeat it, within `statement_timeout` in all."""
        until = time.monotonic() + self.statement_timeout
        repeat = False
        while True:
            try:
                return await self._write_grouped(write(repeat), until)
            except HooklineError as exc:
                if not self._outcome_unknown(exc):
                    raise
                if time.monotonic() + 0.2 >= until:
                    raise HooklineError(
                        exc.kind, f"{exc.message} Whether the write was stored is unknown "
                        f"until the database answers again.", exc.details) from exc
            repeat = True
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0.2)

    async def pending_runs(self) -> int:
        """How many run journals the database holds (running, or left by dead owners)."""
        async with self._connection() as conn:
            row = await (await conn.execute(
                "SELECT count(*) FROM hookline_journal_runs")).fetchone()
        return int(row[0]) if row else 0

    async def journaled_meta(self, tape: str) -> list[dict[str, Any]]:
        """The meta of the messages that runs not yet settled (here, on a peer, or left by
        a dead one until its recovery) wrote to `tape`: how a replica sees a request that
        another one took before it shows on the tape."""
        check_tape_name(tape)
        async with self._connection() as conn:
            rows = await (await conn.execute(
                "SELECT j.meta FROM hookline_journal j WHERE j.tape = %s "
                "AND j.kind = 'message' AND j.meta IS NOT NULL ORDER BY j.run, j.seq",
                (tape,))).fetchall()
        return [_loads(row[0]) for row in rows]


@asynccontextmanager
async def open_postgres_store(url: str, **options: Any) -> AsyncIterator[PostgresTapeStore]:
    """An open store with its maintenance (heartbeat, recovery sweep) running beside the
    block; closed at the end."""
    store = PostgresTapeStore(url, **options)
    await store.open()
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(store.maintain)
            try:
                yield store
            finally:
                group.cancel_scope.cancel()
    finally:
        await store.close()
