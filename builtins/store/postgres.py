"""A PostgreSQL tape store: one database shared by several gateway replicas.

Selected when the `tape_store` setting is a `postgresql://` or `postgres://` URL. Needs the
optional extra (`pip install 'hookline[postgres]'`: psycopg 3 and psycopg-pool); the driver
is imported only when such a store is opened. Asynchronous (psycopg's asyncio connections
and pool), so it needs the asyncio event loop, which every hookline command runs on.

The guarantees are the SQLite store's, across processes and machines:

- Gapless ids per tape, contiguous and all-or-nothing batches. Every write is one
  transaction that first takes a transaction-scoped advisory lock on each tape it writes
  (`pg_advisory_xact_lock(NS_TAPE, hashtext(tape))`, in one fixed order, so two writers
  never deadlock), then reads the tape's highest id and inserts after it. The conditional
  bootstrap anchor of `append_many` is checked for under that lock, so racing replicas
  write exactly one. Readers take no lock; each read is one statement (one snapshot).
- A write returns only after COMMIT (PostgreSQL's durability settings then apply: keep
  `synchronous_commit` on). A turn's reply is acknowledged only after its run's commit,
  and a later turn reads the tape afresh, so its context holds every completed turn of
  its session, whichever replica ran it.
- Anchors pushed down: the anchor of a query is found through a partial index (anchor
  rows only) and only the rows after it are read; tails and limits too, when nothing but
  kinds filters. Dates and text are left to `apply_query`, which defines the semantics.
- The run journal (`journal_write` / `journal_commit`), as in the SQLite store: a running
  turn's writes go to journal rows no reader of the tape sees, and its end moves them onto
  the tapes in one transaction. Liveness: each open store is an owner with a random 63-bit
  id, holding the session-level advisory lock `pg_advisory_lock(id)` on a dedicated
  connection and refreshing a heartbeat row every `heartbeat` seconds. A process that dies
  loses its connection and so its lock; once its heartbeat is also older than `grace`
  seconds, and the server has itself been up that long (so that a replica reconnecting
  after a database restart is not mistaken for a dead one), any other replica's periodic
  sweep (`maintain`, every `sweep` seconds, and once at open) moves the dead run's journal
  onto its tape followed by a `run` event with status `interrupted`. A journal of this
  store's own whose commit failed (the database was down) is recovered the same way by
  the next sweep.
- Versioned schema: `hookline_schema_version` holds the version; opening applies the
  missing migrations in one transaction under an advisory lock (replicas starting at once
  do not race) and refuses a database of a newer version.

Tables live in the connection's current schema (pick one with the libpq option
`?options=-csearch_path%3Dname` in the URL); all names start with `hookline_`. Errors name
the database by its URL without the password (`redact_url`).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, TypeAlias
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import anyio

from hookline.kernel.streaming import ErrorKind, HooklineError
from hookline.kernel.tape import LAST_ANCHOR, TapeEntry, TapeQuery, apply_query

from ..storeurl import is_postgres_url, redact_url
from .memory import SIDECAR_MARKER, check_batch, check_entry, check_tape_name, dump_json
from .sqlite import INTERRUPTED_ERROR, JournalOp, check_journal_op

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

__all__ = [
    "INSTALL_HINT",
    "SCHEMA_VERSION",
    "PostgresCheck",
    "PostgresTapeStore",
    "check_postgres",
    "open_postgres_store",
]

logger = logging.getLogger(__name__)

INSTALL_HINT: Final = "pip install 'hookline[postgres]'"

SCHEMA_VERSION: Final = 1
"""The version this hookline writes; `hookline_schema_version` holds the database's."""

NS_TAPE: Final = 0x686C0001
"""Advisory lock class of tape locks (two-int keys: this, hashtext(tape))."""
NS_MIGRATE: Final = 0x686C0002
"""Advisory lock class of the schema migration (key: this, 0)."""
# Owner locks use the one-bigint form, a key space apart from the two-int one.

_APPLY_FUNCTION: Final = f"""
CREATE OR REPLACE FUNCTION hookline_apply(
    p_run text, p_lock text[], p_tape text[], p_action text[], p_kind text[],
    p_payload text[], p_meta text[], p_date text[], p_anchor text[])
RETURNS TABLE (o_tape text, o_id bigint, o_kind text, o_payload text, o_meta text,
               o_date text)
LANGUAGE plpgsql AS $fn$
DECLARE
    w record;
    next_id bigint;
BEGIN
    -- Lock every tape written, in key order; a sidecar tape shares its session tape's key.
    PERFORM pg_advisory_xact_lock({NS_TAPE}, k) FROM (
        SELECT DISTINCT hashtext(split_part(t, '{SIDECAR_MARKER}', 1)) AS k
        FROM unnest(p_lock || p_tape || ARRAY(
            SELECT j.tape FROM hookline_journal j WHERE j.run = p_run)) AS t
        ORDER BY 1) AS keys;
    FOR w IN
        SELECT x.tape, x.action, x.kind, x.payload, x.meta, x.date, x.anchor FROM (
            SELECT 0 AS part, j.seq::bigint AS n, j.tape, j.action, j.kind, j.payload,
                   j.meta, j.date, j.anchor
            FROM hookline_journal j WHERE j.run = p_run
            UNION ALL
            SELECT 1, g.n, g.tape, g.action, g.kind, g.payload, g.meta, g.date, g.anchor
            FROM unnest(p_tape, p_action, p_kind, p_payload, p_meta, p_date, p_anchor)
                 WITH ORDINALITY AS g (tape, action, kind, payload, meta, date, anchor, n)
        ) AS x ORDER BY x.part, x.n
    LOOP
        IF w.action = 'reset' THEN
            DELETE FROM hookline_entries e WHERE e.tape = w.tape;
            CONTINUE;
        END IF;
        IF w.action = 'bootstrap' AND EXISTS (
                SELECT 1 FROM hookline_entries e WHERE e.tape = w.tape AND e.kind = 'anchor') THEN
            CONTINUE;
        END IF;
        SELECT COALESCE(max(e.id), 0) + 1 INTO next_id
        FROM hookline_entries e WHERE e.tape = w.tape;
        INSERT INTO hookline_entries (tape, id, kind, payload, meta, date, anchor)
        VALUES (w.tape, next_id, w.kind, w.payload, w.meta, w.date, w.anchor);
        o_tape := w.tape; o_id := next_id; o_kind := w.kind; o_payload := w.payload;
        o_meta := w.meta; o_date := w.date;
        RETURN NEXT;
    END LOOP;
    IF p_run IS NOT NULL THEN
        DELETE FROM hookline_journal j WHERE j.run = p_run;
        DELETE FROM hookline_journal_runs r WHERE r.run = p_run;
    END IF;
END
$fn$
"""
"""Every write in one statement (one round trip, atomic even without a transaction
around it): lock the tapes, then apply the run's journal (when `p_run` is given) and the
given writes in order (each gets its tape's next id; `bootstrap` only on a tape without an
anchor; `reset` empties a tape), drop the journal; returns the entries stored. Doing it
in the server keeps the time a pooled connection is held to one round trip, however busy
the gateway's event loop is."""

_MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (
    (  # version 1
        """CREATE TABLE hookline_entries (
            tape    text   NOT NULL,
            id      bigint NOT NULL,
            kind    text   NOT NULL,
            payload text   NOT NULL,
            meta    text   NOT NULL,
            date    text   NOT NULL,
            anchor  text,
            PRIMARY KEY (tape, id)
        )""",
        # The last anchor, and the last anchor of a name: index lookups on anchor rows only.
        "CREATE INDEX hookline_entries_anchors ON hookline_entries (tape, id) "
        "WHERE kind = 'anchor'",
        "CREATE INDEX hookline_entries_named_anchors ON hookline_entries (tape, anchor, id) "
        "WHERE kind = 'anchor'",
        """CREATE TABLE hookline_owners (
            owner     bigint      PRIMARY KEY,
            heartbeat timestamptz NOT NULL,
            host      text        NOT NULL,
            pid       integer     NOT NULL,
            opened    timestamptz NOT NULL
        )""",
        """CREATE TABLE hookline_journal_runs (
            run     text   PRIMARY KEY,
            tape    text   NOT NULL,
            owner   bigint NOT NULL,
            started text   NOT NULL
        )""",
        """CREATE TABLE hookline_journal (
            run     text    NOT NULL,
            seq     integer NOT NULL,
            tape    text    NOT NULL,
            action  text    NOT NULL,
            kind    text,
            payload text,
            meta    text,
            date    text,
            anchor  text,
            PRIMARY KEY (run, seq)
        )""",
        _APPLY_FUNCTION,
    ),
)
assert len(_MIGRATIONS) == SCHEMA_VERSION

_COLUMNS: Final = "e.id, e.kind, e.payload, e.meta, e.date"
_LOCK_TAPES: Final = (
    "SELECT pg_advisory_xact_lock(%s, k) FROM (SELECT DISTINCT "
    f"hashtext(split_part(t, '{SIDECAR_MARKER}', 1)) AS k FROM unnest(%s::text[]) AS t "
    "ORDER BY 1) AS keys"
)
"""Lock tapes for a write, in key order (so writers never deadlock). A sidecar tape shares
its session tape's key: a run's commit knows its session tape before it has read which
sidecars its journal wrote."""
_SETTLED: Final = "now() - pg_postmaster_start_time() > make_interval(secs => %(grace)s)"
"""The server has run for `grace` seconds: after its restart every owner lost its lock at
once, and live ones get that long to reconnect before anyone counts them as dead."""
_HOOKLINE_PARAMS: Final = ("hookline_pool_max", "hookline_grace")
"""Query parameters of the URL read by hookline (and removed before libpq sees it)."""

# A write as stored: (tape, action, kind, payload JSON, meta JSON, date, anchor name).
_Row: TypeAlias = tuple[str, str, str | None, str | None, str | None, str | None, str | None]


def _import_driver() -> tuple[Any, Any]:
    """psycopg and psycopg_pool, or a `config` error saying how to install them."""
    try:
        import psycopg
        import psycopg_pool
    except ImportError as exc:
        raise HooklineError(
            ErrorKind.config,
            f"The tape_store setting is a PostgreSQL URL, which needs the psycopg driver: "
            f"{INSTALL_HINT} (missing: {exc.name or exc}).",
        ) from exc
    return psycopg, psycopg_pool


def split_url(url: str) -> tuple[str, dict[str, str]]:
    """The URL for libpq (without hookline's own query parameters) and those parameters."""
    parts = urlsplit(url.strip())
    query = parse_qsl(parts.query, keep_blank_values=True)
    ours = {key: value for key, value in query if key in _HOOKLINE_PARAMS}
    rest = [(key, value) for key, value in query if key not in _HOOKLINE_PARAMS]
    return urlunsplit(parts._replace(query=urlencode(rest))), ours


def _positive(params: dict[str, str], key: str, default: float, display: str) -> float:
    if key not in params:
        return default
    try:
        value = float(params[key])
    except ValueError:
        value = -1.0
    if not value > 0:
        raise HooklineError(
            ErrorKind.config,
            f"{key} in the tape store URL {display} must be a positive number, got "
            f"{params[key]!r}.",
        )
    return value


class PostgresTapeStore:
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
        self.owner = secrets.randbits(63) or 1
        """This store's owner id (its advisory lock key and heartbeat row)."""
        self.recovered: list[str] = []
        """Tapes on which opening the store finished an interrupted run."""
        self._pool: AsyncConnectionPool | None = None
        self._owner_conn: AsyncConnection | None = None
        self._active: dict[str, tuple[str, int]] = {}
        """The runs this store is running: run -> (its tape, its last journal seq)."""
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
            await self._register(conn)
            pool = psycopg_pool.AsyncConnectionPool(
                self._conninfo, min_size=self.pool_min, max_size=self.pool_max,
                kwargs={"autocommit": True}, open=False, timeout=self.timeout,
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

    async def _connect(self) -> AsyncConnection:
        with anyio.fail_after(max(self.timeout, 10.0)):
            return await self._psycopg.AsyncConnection.connect(self._conninfo, autocommit=True)

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

    async def _register(self, conn: AsyncConnection) -> None:
        """Take this owner's session lock and write its heartbeat row."""
        row = await (await conn.execute(
            "SELECT pg_try_advisory_lock(%s)", (self.owner,))).fetchone()
        if not row or not row[0]:
            raise HooklineError(ErrorKind.temporary,
                                f"owner id {self.owner} of {self.display} is taken")
        await conn.execute(
            "INSERT INTO hookline_owners (owner, heartbeat, host, pid, opened) "
            "VALUES (%s, now(), %s, %s, now()) "
            "ON CONFLICT (owner) DO UPDATE SET heartbeat = now()",
            (self.owner, socket.gethostname(), os.getpid()),
        )

    # -- connections and errors ----------------------------------------------------------

    def _is_driver_error(self, exc: BaseException) -> bool:
        psycopg = self._psycopg
        if psycopg is None:
            return False
        import psycopg_pool

        return isinstance(exc, psycopg.Error | psycopg_pool.PoolTimeout | OSError | TimeoutError)

    def _error(self, exc: BaseException, doing: str = "is unavailable") -> HooklineError:
        """A HooklineError for a driver error, with every password scrubbed."""
        detail = redact_url(" ".join(str(exc).split()) or type(exc).__name__, self._conninfo)
        psycopg = self._psycopg
        if psycopg is not None and isinstance(exc, psycopg.DataError):
            return HooklineError(ErrorKind.invalid_input,
                                 f"The PostgreSQL tape store {self.display} refused the data: "
                                 f"{detail}")
        verb = "cannot be opened" if doing == "cannot open" else "is unavailable"
        return HooklineError(ErrorKind.temporary,
                             f"The PostgreSQL tape store {self.display} {verb}: {detail}",
                             {"store": self.display})

    @asynccontextmanager
    async def _connection(self, wait: float | None = None) -> AsyncIterator[AsyncConnection]:
        """A pooled connection (waiting at most `wait`, default `timeout`, for one)."""
        if self._closed or self._pool is None:
            raise HooklineError(ErrorKind.config, f"Tape store {self.display} is closed.")
        try:
            async with self._pool.connection(timeout=wait) as conn:
                yield conn
        except HooklineError:
            raise
        except UnicodeEncodeError as exc:
            raise HooklineError(ErrorKind.invalid_input,
                                f"An entry is not valid text for PostgreSQL: {exc}") from exc
        except Exception as exc:
            if not self._is_driver_error(exc):
                raise
            if isinstance(exc, self._psycopg.OperationalError):
                await self._drop_dead_connections()
            raise self._error(exc) from exc

    async def _drop_dead_connections(self) -> None:
        """After a connection failed (the server restarted?), check the idle ones now, so
        that the requests after this one get live connections: checking every connection
        before each use would cost a round trip per call."""
        pool = self._pool
        if pool is None:
            return
        with anyio.CancelScope(shield=True), anyio.move_on_after(self.timeout):
            try:
                await pool.check()
            except Exception:
                logger.debug("store.postgres_pool_check_failed", exc_info=True)

    @asynccontextmanager
    async def _statement(self, wait: float | None = None) -> AsyncIterator[AsyncConnection]:
        """A connection for one writing statement (its own transaction), shielded from
        cancellation (a started write completes or fails, it is never abandoned half-way)
        and bounded by a deadline."""
        with anyio.CancelScope(shield=True), anyio.fail_after(max(self.timeout * 6, 30.0)):
            async with self._connection(wait) as conn:
                yield conn

    @asynccontextmanager
    async def _write(self, wait: float | None = None) -> AsyncIterator[AsyncConnection]:
        """One write transaction of several statements, shielded and bounded likewise."""
        with anyio.CancelScope(shield=True), anyio.fail_after(max(self.timeout * 6, 30.0)):
            async with self._connection(wait) as conn, conn.transaction():
                yield conn

    async def check_writable(self) -> None:
        """Raise unless the database takes a write now (a committed heartbeat update);
        backs the gateway's `/v1/health`, so it waits at most 2 s for a connection."""
        async with self._statement(min(self.timeout, 2.0)) as conn:
            await conn.execute("UPDATE hookline_owners SET heartbeat = now() WHERE owner = %s",
                               (self.owner,))

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
        async with self._statement() as conn:
            await _apply(conn, [(tape, "reset", None, None, None, None, None)])

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
        async with self._statement() as conn:
            return await _apply(conn, rows)

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
        (the fork serialises them), so its sequence numbers are counted here."""
        rows = [_op_row(op) for op in ops]
        check_tape_name(tape)
        known = self._active.get(run)
        seq = known[1] if known is not None else 0
        # Registered before the commit: a sweep never sees the run as abandoned.
        self._active[run] = (known[0] if known is not None else tape, seq)
        columns = _columns([(seq + n, *row) for n, row in enumerate(rows, 1)], 8)
        async with self._statement() as conn:
            await conn.execute(
                "WITH run AS (INSERT INTO hookline_journal_runs (run, tape, owner, started) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (run) DO NOTHING) "
                "INSERT INTO hookline_journal (run, seq, tape, action, kind, payload, meta, "
                "date, anchor) SELECT %s, * FROM unnest(%s::integer[], %s::text[], %s::text[], "
                "%s::text[], %s::text[], %s::text[], %s::text[], %s::text[])",
                (run, tape, self.owner, _now(), run, *columns),
            )
        self._active[run] = (self._active[run][0], seq + len(rows))

    async def journal_commit(self, run: str, ops: Sequence[JournalOp] = ()) -> list[TapeEntry]:
        """Apply the run's journal and then `ops` to the tapes, and drop the journal, in one
        transaction; returns the entries stored."""
        try:
            rows = [_op_row(op) for op in ops]
            known = self._active.get(run)
            async with self._statement() as conn:
                return await _apply(conn, rows, run=run,
                                    lock=[known[0]] if known is not None else [])
        finally:
            self._active.pop(run, None)

    async def pending_runs(self) -> int:
        """How many run journals the database holds (running, or left by dead owners)."""
        async with self._connection() as conn:
            row = await (await conn.execute(
                "SELECT count(*) FROM hookline_journal_runs")).fetchone()
        return int(row[0]) if row else 0

    # -- liveness and recovery -----------------------------------------------------------

    async def maintain(self) -> None:
        """Forever: the heartbeat every `heartbeat` seconds and the recovery sweep every
        `sweep` seconds; failures are logged and retried (the database may be down)."""
        since_sweep = 0.0
        failing = False
        while True:
            await anyio.sleep(self.heartbeat)
            since_sweep += self.heartbeat
            try:
                await self._keep_alive()
                if since_sweep >= self.sweep:
                    since_sweep = 0.0
                    recovered = await self._sweep_runs()
                    if recovered:
                        logger.warning("store.recovered_interrupted_runs store=%s tapes=%s",
                                       self.display, ",".join(recovered))
                if failing:
                    failing = False
                    logger.warning("store.postgres_reachable_again store=%s", self.display)
            except Exception as exc:
                if not failing:  # once per outage, not once a second
                    failing = True
                    logger.warning("store.postgres_maintenance_failed store=%s: %s", self.display,
                                   redact_url(" ".join(str(exc).split()), self._conninfo))

    async def _keep_alive(self) -> None:
        """Refresh the heartbeat; after a lost connection, reconnect and retake the lock."""
        conn = self._owner_conn
        if conn is not None and not conn.closed:
            try:
                await conn.execute(
                    "UPDATE hookline_owners SET heartbeat = now() WHERE owner = %s",
                    (self.owner,))
                return
            except Exception:
                with anyio.CancelScope(shield=True):
                    await conn.close()
        self._owner_conn = None
        if self._closed:
            return
        conn = await self._connect()
        try:
            await self._register(conn)
        except BaseException:
            await conn.close()
            raise
        self._owner_conn = conn

    async def _sweep_runs(self) -> list[str]:
        """Recover the journals of dead owners and this store's own abandoned ones."""
        async with self._connection() as conn:
            cursor = await conn.execute(
                "SELECT r.run, r.tape FROM hookline_journal_runs r "
                "LEFT JOIN hookline_owners o ON o.owner = r.owner "
                "WHERE (r.owner = %(me)s AND NOT r.run = ANY(%(active)s::text[])) "
                "OR (r.owner <> %(me)s AND (o.heartbeat IS NULL "
                f"OR o.heartbeat < now() - make_interval(secs => %(grace)s)) AND {_SETTLED})",
                {"me": self.owner, "active": list(self._active), "grace": self.grace},
            )
            runs = [(str(row[0]), str(row[1])) for row in await cursor.fetchall()]
        recovered = []
        for run, tape in runs:
            if await self._recover_run(run, tape):
                recovered.append(tape)
        async with self._write() as conn:  # owners gone for good, without journals
            await conn.execute(
                "DELETE FROM hookline_owners o WHERE o.owner <> %(me)s "
                "AND o.heartbeat < now() - make_interval(secs => %(grace)s) "
                "AND NOT EXISTS (SELECT 1 FROM hookline_journal_runs r WHERE r.owner = o.owner) "
                "AND pg_try_advisory_xact_lock(o.owner)",
                {"me": self.owner, "grace": self.grace},
            )
        return recovered

    async def _recover_run(self, run: str, tape: str) -> bool:
        """Finish one abandoned run (its journal, then the interrupted marker), unless it
        turns out to be alive or already finished; True if this call finished it.

        The tape lock comes first, as in a commit: a commit of the same run either went
        before (the journal row is gone) or waits and then finds nothing left to apply."""
        async with self._write() as conn:
            await conn.execute(_LOCK_TAPES, (NS_TAPE, [tape]))
            row = await (await conn.execute(
                "SELECT r.owner, r.started, (o.heartbeat IS NULL "
                "OR o.heartbeat < now() - make_interval(secs => %(grace)s)) "
                f"AND {_SETTLED} "
                "FROM hookline_journal_runs r LEFT JOIN hookline_owners o ON o.owner = r.owner "
                "WHERE r.run = %(run)s FOR UPDATE OF r",
                {"grace": self.grace, "run": run},
            )).fetchone()
            if row is None:
                return False
            owner, started, stale = row
            if owner == self.owner:
                if run in self._active:
                    return False
            else:
                if not stale:
                    return False
                locked = await (await conn.execute(
                    "SELECT pg_try_advisory_xact_lock(%s)", (owner,))).fetchone()
                if not locked or not locked[0]:
                    return False  # its process still holds the lock: alive
            marker = TapeEntry.new(
                "event",
                {"name": "run", "data": {"status": "interrupted", "error": INTERRUPTED_ERROR}},
                interrupted=True, started=started, recovered=_now(),
            )
            await _apply(conn, [_row(tape, "append", marker)], run=run, lock=[tape])
        return True


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


def _require_asyncio() -> None:
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        raise HooklineError(
            ErrorKind.config,
            "The PostgreSQL tape store needs the asyncio event loop (psycopg's); this one "
            "is another (trio?).",
        ) from None


# -- SQL ---------------------------------------------------------------------------------


def _select(tape: str, query: TapeQuery) -> tuple[str, dict[str, Any]]:
    """One statement reading what `query` needs of the tape (see `fetch_all`)."""
    params: dict[str, Any] = {"tape": tape, "kinds": list(query.kind_filter)}
    exact = query.text_filter is None and query.date_range is None
    kinds = " AND e.kind = ANY(%(kinds)s::text[])" if query.kind_filter else ""
    order = " ORDER BY e.id"
    if exact and query.tail_entries is not None:
        order, params["n"] = " ORDER BY e.id DESC LIMIT %(n)s", query.tail_entries
    elif exact and query.max_entries is not None:
        order, params["n"] = " ORDER BY e.id LIMIT %(n)s", query.max_entries
    base = "FROM hookline_entries e WHERE e.tape = %(tape)s"
    named = "SELECT max(id) AS id FROM hookline_entries WHERE tape = %(tape)s AND kind = 'anchor'"
    if query.anchor_range is not None:
        start, end = query.anchor_range
        if not isinstance(start, str) or not isinstance(end, str):
            return f"SELECT {_COLUMNS} {base} ORDER BY e.id", params
        params.update(start=start, end=end)
        cte = (f"WITH a AS ({named} AND anchor = %(start)s), "
               f"b AS (SELECT min(x.id) AS id FROM hookline_entries x, a WHERE x.tape = %(tape)s "
               f"AND x.kind = 'anchor' AND x.anchor = %(end)s AND x.id > a.id)")
        head = f"SELECT {_COLUMNS} FROM hookline_entries e, a, b WHERE e.tape = %(tape)s " \
               f"AND (e.id = a.id OR e.id = b.id)"
        body = f"SELECT {_COLUMNS} FROM hookline_entries e, a, b WHERE e.tape = %(tape)s " \
               f"AND e.id > a.id AND e.id < b.id{kinds}{order}"
        return f"{cte} ({head}) UNION ALL ({body})", params
    if query.anchor is None:
        return f"SELECT {_COLUMNS} {base}{kinds}{order}", params
    if query.anchor is LAST_ANCHOR:
        cte = f"WITH a AS ({named})"
    elif isinstance(query.anchor, str):
        cte, params["name"] = f"WITH a AS ({named} AND anchor = %(name)s)", query.anchor
    else:  # not a name SQL can match: the whole tape, for apply_query
        return f"SELECT {_COLUMNS} {base} ORDER BY e.id", params
    head = f"SELECT {_COLUMNS} FROM hookline_entries e, a WHERE e.tape = %(tape)s AND e.id = a.id"
    body = (f"SELECT {_COLUMNS} FROM hookline_entries e, a WHERE e.tape = %(tape)s "
            f"AND e.id > a.id{kinds}{order}")
    return f"{cte} ({head}) UNION ALL ({body})", params


def _anchor_name(kind: str, payload: dict[str, Any]) -> str | None:
    name = payload.get("name") if kind == "anchor" else None
    return name if isinstance(name, str) else None


def _row(tape: str, action: str, entry: TapeEntry) -> _Row:
    return (tape, action, entry.kind, dump_json(entry.payload, "payload"),
            dump_json(entry.meta, "meta"), entry.date, _anchor_name(entry.kind, entry.payload))


def _op_row(op: JournalOp) -> _Row:
    """Check one journal op and turn it into its stored form."""
    tape, action, entry = check_journal_op(op)
    if entry is None:
        return (tape, action, None, None, None, None, None)
    return _row(tape, action, entry)


async def _apply(conn: AsyncConnection, rows: Sequence[_Row], *, run: str | None = None,
                 lock: Sequence[str] = ()) -> list[TapeEntry]:
    """Perform writes in order (after `run`'s journal, which is then dropped) with one
    call of `hookline_apply`; returns the entries stored."""
    columns = _columns(rows, 7)
    cursor = await conn.execute(
        "SELECT o_tape, o_id, o_kind, o_payload, o_meta, o_date FROM hookline_apply("
        "%s, %s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[], "
        "%s::text[], %s::text[])", (run, list(lock), *columns))
    return [TapeEntry(int(entry_id), str(kind), _loads(payload), _loads(meta), str(date))
            for _tape, entry_id, kind, payload, meta, date in await cursor.fetchall()]


def _columns(rows: Sequence[Sequence[Any]], width: int) -> list[list[Any]]:
    """Rows turned into `width` column lists (arrays for `unnest`), empty ones for no rows."""
    if not rows:
        return [[] for _ in range(width)]
    return [list(column) for column in zip(*rows, strict=True)]


def _loads(text: str | None) -> dict[str, Any]:
    return _as_dict(json.loads(text or "{}"))


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _now() -> str:
    return datetime.now(UTC).isoformat()


# -- `hookline store check` ----------------------------------------------------------------


@dataclass(frozen=True)
class PostgresCheck:
    """What `check_postgres` found: `problems` is empty when the database is usable."""

    display: str
    problems: list[str]
    schema_version: int | None = None
    tapes: int = 0
    entries: int = 0
    pending_runs: int = 0
    owners: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems


async def check_postgres(url: str) -> PostgresCheck:
    """Connectivity and the schema version of a PostgreSQL store, plus what it holds;
    writes nothing (no migration, no recovery)."""
    display = redact_url(url.strip())
    psycopg, _pool = _import_driver()
    conninfo, _params = split_url(url)
    try:
        with anyio.fail_after(15):
            conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
    except (psycopg.Error, OSError, TimeoutError) as exc:
        return PostgresCheck(display, [f"cannot connect: {redact_url(str(exc).strip(), url)}"])
    try:
        found = await (await conn.execute(
            "SELECT to_regclass('hookline_schema_version') IS NOT NULL")).fetchone()
        if not found or not found[0]:
            return PostgresCheck(display, [], 0)
        row = await (await conn.execute(
            "SELECT max(version) FROM hookline_schema_version")).fetchone()
        version = int(row[0]) if row and row[0] is not None else 0
        if version > SCHEMA_VERSION:
            return PostgresCheck(display, [
                f"schema version {version} is newer than this hookline supports "
                f"({SCHEMA_VERSION}); upgrade hookline"], version)
        if version < 1:
            return PostgresCheck(display, [], version)
        counts = await (await conn.execute(
            "SELECT (SELECT count(DISTINCT tape) FROM hookline_entries), "
            "(SELECT count(*) FROM hookline_entries), "
            "(SELECT count(*) FROM hookline_journal_runs), "
            "(SELECT count(*) FROM hookline_owners)")).fetchone()
        assert counts is not None
        tapes, entries, pending, owners = (int(value) for value in counts)
        return PostgresCheck(display, [], version, tapes, entries, pending, owners)
    except psycopg.Error as exc:
        return PostgresCheck(display, [redact_url(str(exc).strip(), url)])
    finally:
        await conn.close()

