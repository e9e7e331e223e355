"""Liveness of the PostgreSQL tape store: the owner lease, the heartbeat and the recovery
sweep (docs/deployment.md says what they guarantee).

An open store is an owner: a random 63-bit id whose session-level advisory lock it holds
on a connection of its own, with a heartbeat row refreshed there. A peer recovers the
owner's runs only once that lock is free and the heartbeat is older than `grace`. The
lease is the owner id: a run's journal carries it, and the database refuses a write of
the run under any other (or after its recovery). Locally the lease lasts `grace` minus a
margin from the last heartbeat sent on the lock's connection; a write after that first
asks that same connection (whose answer proves the lock was held throughout), and when it
cannot answer, every run under the lease fails and the store goes on as a new owner. So a
replica stops its runs before any peer may recover them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio

from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.tape import TapeEntry

from ..entries import request_keys, unknown_outcomes
from ..sqlite.journal import JournalOp, check_journal_op
from ..sqlite.store import INTERRUPTED_ERROR
from ..url import redact_url
from .conn import STATEMENT_TIMEOUT, PostgresConnections, deadline
from .sql import _LOCK_TAPES, _SETTLED, NS_REQUEST, NS_TAPE, _apply, _now, _row

if TYPE_CHECKING:
    from psycopg import AsyncConnection

logger = logging.getLogger("hookline.builtins.store.postgres.store")

_HOLDS_CLAIM = ("SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND "
                "granted AND pid = pg_backend_pid() AND classid = %s::oid AND "
                "objid = hashtext(%s)::oid AND objsubid = 2)")
"""Whether this session holds a key's lock (`claim_request`'s two-key advisory lock)."""

OUTCOME_RETENTION: float = 24 * 3600.0
"""Seconds a finished run's outcome (committed or recovered) is kept: a repeated commit
and a late write of a recovered run are answered from it."""


@dataclass
class _Run:
    """A run this store is running: its session tape, the lease (owner id) it started
    under, and how many of its journal rows are known to be stored."""

    tape: str
    owner: int
    upto: int = 0


class PostgresLiveness(PostgresConnections):
    """The owner lease, heartbeat and recovery sweep of `PostgresTapeStore`."""

    owner: int
    grace: float
    heartbeat: float
    sweep: float
    _owner_conn: AsyncConnection | None
    _active: dict[str, _Run]
    _lease_until: float
    _claims: dict[tuple[str, str], bool]
    """The keys this store claimed and has not let go, by (tape, key): True while held
    since taken, False once the lock's connection was lost (its locks with it): a peer
    may have taken the key, and run its request, meanwhile."""

    @property
    def _lease(self) -> float:
        """How long a heartbeat keeps the lease: `grace` less a margin for the time the
        heartbeat took to reach the server."""
        return self.grace - min(0.5, self.grace / 4)

    async def _register(self, conn: AsyncConnection) -> float:
        """Take this owner's session lock and write its heartbeat row; returns when the
        heartbeat was sent (the lease runs from then).

        The server ends the session once it has waited `grace` for the next heartbeat
        (`idle_session_timeout`, PostgreSQL 14 and later): cut off by a partition, the
        replica cannot close the connection itself, and the server would otherwise keep
        its lock until TCP gives up (hours), so no peer could recover its runs."""
        with deadline(conn, STATEMENT_TIMEOUT):
            if conn.info.server_version >= 140000:
                await conn.execute("SELECT set_config('idle_session_timeout', %s, false)",
                                   (f"{max(int(self.grace * 1000), 1)}ms",))
            row = await (await conn.execute(
                "SELECT pg_try_advisory_lock(%s)", (self.owner,))).fetchone()
            if not row or not row[0]:
                raise HooklineError(ErrorKind.temporary,
                                    f"owner id {self.owner} of {self.display} is taken")
            sent = time.monotonic()
            await conn.execute(
                "INSERT INTO hookline_owners (owner, heartbeat, host, pid, opened) "
                "VALUES (%s, now(), %s, %s, now()) "
                "ON CONFLICT (owner) DO UPDATE SET heartbeat = now()",
                (self.owner, socket.gethostname(), os.getpid()),
            )
        return sent

    async def _renew(self) -> bool:
        """Refresh the heartbeat on the lock's own connection. An answer proves that its
        session, and so the lock, lived throughout: the lease is extended. No answer in
        time: the connection is closed (freeing the lock wherever it still exists)."""
        conn = self._owner_conn
        if conn is None or conn.closed:
            return False
        sent = time.monotonic()
        try:
            with deadline(conn, min(self.timeout, max(self.grace / 2, 0.5))):
                await conn.execute(
                    "UPDATE hookline_owners SET heartbeat = now() WHERE owner = %s",
                    (self.owner,))
        except Exception:
            if self._owner_conn is conn:
                self._owner_conn = None
                self._claims_lapse()
            with anyio.CancelScope(shield=True):
                await conn.close()
            return False
        if self._owner_conn is conn:
            self._lease_until = max(self._lease_until, sent + self._lease)
        return True

    async def _lose_lease(self) -> None:
        """Fail every run under the current lease (their later writes are refused) and go
        on as a new owner, whose lock the next heartbeat takes."""
        lost = [run for run, state in self._active.items() if state.owner == self.owner]
        if lost:
            logger.warning("store.postgres_lease_lost store=%s runs=%d: no heartbeat on the "
                           "lock's connection for %g s; those runs fail", self.display,
                           len(lost), self.grace)
        conn, self._owner_conn = self._owner_conn, None
        self._claims_lapse()
        self.owner = secrets.randbits(63) or 1
        self._lease_until = 0.0
        if conn is not None:
            with anyio.CancelScope(shield=True):
                await conn.close()

    async def _hold_lease(self, run: str, state: _Run) -> None:
        """Raise unless `run` may write: its lease is this store's and still held. A run
        that has recorded nothing yet waits up to `timeout` for the heartbeat loop to
        retake the lock (the database just came back) and starts under that lease."""
        if state.owner == self.owner and (time.monotonic() < self._lease_until
                                          or await self._renew()):
            return
        if state.owner == self.owner:
            await self._lose_lease()
        if state.upto == 0:  # nothing recorded yet: it may start under the next lease
            with anyio.move_on_after(self.timeout):
                while time.monotonic() >= self._lease_until:
                    await anyio.sleep(0.05)
            if time.monotonic() < self._lease_until:
                state.owner = self.owner
                return
            self._active.pop(run, None)
            raise HooklineError(
                ErrorKind.temporary,
                f"The PostgreSQL tape store {self.display} has no lock on the database "
                f"right now (it reconnects by itself); run {run} was not started.",
                {"store": self.display})
        raise HooklineError(
            ErrorKind.temporary,
            f"The PostgreSQL tape store {self.display} lost its lock on the database for "
            f"longer than hookline_grace ({self.grace:g} s) during run {run}: the run stops "
            f"here, and what it recorded goes on tape {state.tape} marked interrupted. Send "
            f"the message again (with a new Idempotency-Key, if it had one: the same key "
            f"answers this interrupted run).",
            {"store": self.display, "fenced": True})

    async def claim_request(self, tape: str, key: str) -> bool:
        """Take a request's Idempotency-Key for this replica until `release_request`: a
        session lock on the owner's connection, so a replica that dies lets go of it at
        once. False while another replica holds it (its request is queued or running)."""
        taken = bool(await self._on_owner_connection(
            "SELECT pg_try_advisory_lock(%s, hashtext(%s))", (NS_REQUEST, f"{tape}\n{key}")))
        if taken:
            self._claims[(tape, key)] = True
        return taken

    def _claims_lapse(self) -> None:
        """The lock's connection is gone, and the keys' locks with it."""
        self._claims = dict.fromkeys(self._claims, False)

    async def _check_claims(self, run: str, ops: Sequence[JournalOp]) -> None:
        """Before a run's first write: raise unless each key its messages were sent with
        that this store claimed is held still, and was throughout. A lock lost meanwhile
        (a cut connection, a restarted server) let a peer take the key, find nothing of
        the request recorded and run it: this run must not. Asked on the lock's own
        connection, whose session is the one that holds the lock. Not seen: a lock lost in
        the instant between this question and the write's commit, during which a peer
        would have to take the key and look it up."""
        sent = [(tape, key) for tape, _, entry in map(check_journal_op, ops)
                if entry is not None for key in request_keys([entry])]
        for tape, key in sent:
            held = self._claims.get((tape, key))
            if held is None or (held and await self._on_owner_connection(
                    _HOLDS_CLAIM, (NS_REQUEST, f"{tape}\n{key}"))):
                continue  # not claimed here (another store's run), or held throughout
            self._active.pop(run, None)
            raise HooklineError(
                ErrorKind.temporary,
                f"The PostgreSQL tape store {self.display} lost its lock on the database "
                f"while this request waited, and with it the claim on its Idempotency-Key: "
                f"another replica may have run it meanwhile, so it was not run here. Send "
                f"it again with the same key: the answer comes from wherever it ran.",
                {"store": self.display})

    async def release_request(self, tape: str, key: str) -> None:
        """Let go of a key taken by `claim_request` (gone anyway with a lost connection)."""
        self._claims.pop((tape, key), None)
        with contextlib.suppress(HooklineError):
            await self._on_owner_connection(
                "SELECT pg_advisory_unlock(%s, hashtext(%s))", (NS_REQUEST, f"{tape}\n{key}"))

    async def _on_owner_connection(self, sql: str, params: tuple[object, ...]) -> object:
        """One statement on the lock's connection (the claims live in its session)."""
        conn = self._owner_conn
        if conn is None or conn.closed:
            raise HooklineError(
                ErrorKind.temporary, f"The PostgreSQL tape store {self.display} has no lock "
                f"on the database right now (it reconnects by itself); retry shortly.",
                {"store": self.display})
        try:
            with deadline(conn, min(self.timeout, max(self.grace / 2, 0.5))):
                row = await (await conn.execute(sql, params)).fetchone()
        except HooklineError:
            raise
        except Exception as exc:
            raise self._error(exc) from exc
        return row[0] if row else None

    async def maintain(self) -> None:
        """Forever: the heartbeat every `heartbeat` seconds (at most a third of `grace`)
        and, beside it, the recovery sweep every `sweep` seconds. Two loops, so that the
        heartbeat never waits behind a sweep waiting for a pooled connection (the server
        ends the lock's session after `grace` without one). Failures are logged, once per
        outage by each loop, and retried (the database may be down)."""
        async with anyio.create_task_group() as group:
            group.start_soon(self._every, min(self.heartbeat, self.grace / 3), self._keep_alive)
            group.start_soon(self._every, self.sweep, self._sweep_logged)

    async def _every(self, interval: float, step: Callable[[], Awaitable[None]]) -> None:
        failing = False
        while True:
            await anyio.sleep(interval)
            try:
                await step()
                if failing:
                    failing = False
                    logger.warning("store.postgres_reachable_again store=%s", self.display)
            except Exception as exc:
                if not failing:  # once per outage, not once a second
                    failing = True
                    logger.warning("store.postgres_maintenance_failed store=%s: %s", self.display,
                                   redact_url(" ".join(str(exc).split()), self._conninfo))

    async def _sweep_logged(self) -> None:
        recovered = await self._sweep_runs()
        if recovered:
            logger.warning("store.recovered_interrupted_runs store=%s tapes=%s",
                           self.display, ",".join(recovered))

    async def _keep_alive(self) -> None:
        """Refresh the heartbeat; after a lost connection, reconnect and retake the lock
        (as a new owner once the lease is gone)."""
        if await self._renew() or self._closed:
            return
        if time.monotonic() >= self._lease_until:
            await self._lose_lease()
        conn = await self._connect()
        try:
            sent = await self._register(conn)
        except BaseException:
            await conn.close()
            raise
        self._owner_conn = conn
        self._claims_lapse()  # the last connection's locks went with it
        if self._lease_until and time.monotonic() >= self._lease_until:
            await self._lose_lease()  # expired while reconnecting: a peer may recover
            return
        self._lease_until = sent + self._lease

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
            await conn.execute(
                "DELETE FROM hookline_run_outcomes WHERE at < now() - make_interval(secs => %s)",
                (OUTCOME_RETENTION,))
        return recovered

    async def _recover_run(self, run: str, tape: str) -> bool:
        """Finish one abandoned run (its journal, then the interrupted marker), unless it
        turns out to be alive or already finished; True if this call finished it.

        The tape lock comes first, as in a commit: a commit of the same run either went
        before (the journal row is gone) or waits and then finds the run recovered."""
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
            journaled = await (await conn.execute(
                "SELECT kind, payload FROM hookline_journal WHERE run = %s AND tape = %s "
                "AND kind IN ('tool_call', 'tool_result') ORDER BY seq", (run, tape),
            )).fetchall()
            unknown = unknown_outcomes([(str(kind), json.loads(payload or "{}"))
                                        for kind, payload in journaled])
            await _apply(conn, [_row(tape, "append", entry) for entry in (unknown, marker)
                                if entry], run=run, lock=[tape])
        return True
