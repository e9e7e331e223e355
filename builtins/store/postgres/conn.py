"""Reaching the PostgreSQL tape store's database: the driver's lazy import, hookline's own
URL parameters, and the pooled connections every store call runs on, with the mapping of
driver errors to `HooklineError`s that never show a password."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import anyio

from hookline.kernel.errors import ErrorKind, HooklineError

from ..budget import store_call
from ..url import redact_url
from .sql import FENCED

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

logger = logging.getLogger("hookline.builtins.store.postgres.store")

INSTALL_HINT: Final = "pip install 'hookline[postgres]'"

_HOOKLINE_PARAMS: Final = ("hookline_pool_max", "hookline_grace")
"""Query parameters of the URL read by hookline (and removed before libpq sees it)."""

CONNECT_TIMEOUT: Final = 5
"""Seconds libpq may take to open a connection (its `connect_timeout`, unless the URL
sets one)."""
STATEMENT_TIMEOUT: Final = 10.0
"""Seconds a store call may hold a connection: the server's `statement_timeout` on every
connection, and a client-side deadline that shuts the socket down when the server does
not answer (a black-holed connection), so the call fails instead of hanging."""
RECONNECT_MAX_DELAY: Final = 2.0
"""The longest pause between the pool's attempts to reconnect (psycopg_pool doubles it
after each failure, without a limit of its own); a success ends the series."""


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
    """The URL for libpq (without hookline's own query parameters) and those parameters.
    Spaces are written %20: libpq reads a `+` as itself, which would break `options`
    holding two settings."""
    parts = urlsplit(url.strip())
    query = parse_qsl(parts.query, keep_blank_values=True)
    ours = {key: value for key, value in query if key in _HOOKLINE_PARAMS}
    rest = [(key, value) for key, value in query if key not in _HOOKLINE_PARAMS]
    return urlunsplit(parts._replace(query=urlencode(rest, quote_via=quote))), ours


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



def capped_pool_class(psycopg_pool: Any) -> Any:
    """psycopg_pool's AsyncConnectionPool with its reconnect back-off capped at
    `RECONNECT_MAX_DELAY`: its attempt object doubles its delay after each failed
    connection, so the delay is clamped before each attempt."""

    class CappedPool(psycopg_pool.AsyncConnectionPool):  # type: ignore[misc, name-defined]
        async def _add_connection(self, attempt: Any, growing: bool = False) -> None:
            backoff = float(getattr(attempt, "DELAY_BACKOFF", 2.0))
            if attempt is not None and attempt.delay * backoff > RECONNECT_MAX_DELAY:
                attempt.delay = RECONNECT_MAX_DELAY / backoff
            await super()._add_connection(attempt, growing=growing)

    return CappedPool


async def configure_connection(conn: AsyncConnection) -> None:
    """Every new connection: the server ends a statement after `STATEMENT_TIMEOUT`."""
    await conn.execute("SELECT set_config('statement_timeout', %s, false)",
                       (f"{int(STATEMENT_TIMEOUT * 1000)}ms",))


def _sever(conn: AsyncConnection) -> None:
    """Shut the connection's socket down: a statement waiting for the server's answer then
    fails at once (psycopg's own cancellation would wait for a server that may never
    answer)."""
    try:
        sock = socket.socket(fileno=os.dup(conn.pgconn.socket))
    except Exception:  # already closed
        return
    with sock, suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


class StatementTimeout(Exception):
    """The server did not answer within the deadline; the connection was shut."""


@contextmanager
def deadline(conn: AsyncConnection, seconds: float) -> Iterator[None]:
    """Bound what runs on `conn` inside the block to `seconds`: after that the socket is
    shut down, and the block's driver error becomes `StatementTimeout`."""
    fired: list[bool] = []

    def fire() -> None:
        fired.append(True)
        _sever(conn)

    timer = asyncio.get_running_loop().call_later(max(seconds, 0.0), fire)
    try:
        yield
    except Exception as exc:
        if fired:
            raise StatementTimeout(f"no answer within {seconds:.3g} s") from exc
        raise
    finally:
        timer.cancel()


class PostgresConnections:
    """The connection handling of `PostgresTapeStore`: its pool, the deadlines and
    shielding of writes, and driver errors turned into `HooklineError`s."""

    display: str
    timeout: float
    statement_timeout: float = STATEMENT_TIMEOUT
    _conninfo: str
    _pool: AsyncConnectionPool | None
    _closed: bool
    _psycopg: Any
    _checking: asyncio.Task[None] | None = None

    async def _connect(self) -> AsyncConnection:
        """A connection of its own (the owner's), configured like the pooled ones."""
        with anyio.fail_after(CONNECT_TIMEOUT + 1.0):
            conn = await self._psycopg.AsyncConnection.connect(
                self._conninfo, autocommit=True, **self._connect_options())
        try:
            with deadline(conn, STATEMENT_TIMEOUT):
                await configure_connection(conn)
        except BaseException:
            await conn.close()
            raise
        return conn

    def _connect_options(self) -> dict[str, Any]:
        """libpq's `connect_timeout`, unless the URL sets it."""
        from psycopg.conninfo import conninfo_to_dict

        if "connect_timeout" in conninfo_to_dict(self._conninfo):
            return {}
        return {"connect_timeout": CONNECT_TIMEOUT}

    def _is_driver_error(self, exc: BaseException) -> bool:
        psycopg = self._psycopg
        if psycopg is None:
            return False
        import psycopg_pool

        return isinstance(exc, psycopg.Error | psycopg_pool.PoolTimeout | OSError | TimeoutError
                          | StatementTimeout)

    def _outcome_unknown(self, exc: BaseException) -> bool:
        """Whether a failed write may have committed all the same: its connection failed
        or timed out after the statement may have reached the server (or a connection
        could not be had, which a repetition of the write also handles)."""
        import psycopg_pool

        cause = exc.__cause__ if isinstance(exc, HooklineError) else exc
        state = getattr(cause, "sqlstate", None) or ""
        if state and not state.startswith(("08", "57P")):
            return False  # the server answered with an error: the write rolled back
        return isinstance(cause, self._psycopg.OperationalError | OSError | TimeoutError
                          | StatementTimeout | psycopg_pool.PoolTimeout)

    def _error(self, exc: BaseException, doing: str = "is unavailable") -> HooklineError:
        """A HooklineError for a driver error, with every password scrubbed."""
        detail = redact_url(" ".join(str(exc).split()) or type(exc).__name__, self._conninfo)
        psycopg = self._psycopg
        if getattr(exc, "sqlstate", None) == FENCED:
            message = getattr(getattr(exc, "diag", None), "message_primary", None) or detail
            return HooklineError(
                ErrorKind.temporary,
                f"The PostgreSQL tape store {self.display} refused the write: {message}. "
                f"This replica lost its lock on the database for longer than "
                f"hookline_grace, so the run was (or will be) put on the tape as interrupted; "
                f"nothing more of it is saved. Send the message again.",
                {"store": self.display, "fenced": True})
        if psycopg is not None and isinstance(exc, psycopg.DataError):
            return HooklineError(ErrorKind.invalid_input,
                                 f"The PostgreSQL tape store {self.display} refused the data: "
                                 f"{detail}")
        verb = "cannot be opened" if doing == "cannot open" else "is unavailable"
        return HooklineError(ErrorKind.temporary,
                             f"The PostgreSQL tape store {self.display} {verb}: {detail}",
                             {"store": self.display})

    @asynccontextmanager
    async def _connection(self, wait: float | None = None,
                          until: float | None = None) -> AsyncIterator[AsyncConnection]:
        """A pooled connection (waiting at most `wait`, default `timeout`, for one), held
        until `until` (monotonic; default `statement_timeout` from now) at most."""
        if self._closed or self._pool is None:
            raise HooklineError(ErrorKind.config, f"Tape store {self.display} is closed.")
        if until is None:
            until = time.monotonic() + self.statement_timeout
        with store_call(until) as until:
            async with self._pooled(wait, until) as conn:
                yield conn

    @asynccontextmanager
    async def _pooled(self, wait: float | None, until: float) -> AsyncIterator[AsyncConnection]:
        """`_connection` within the turn's store budget: driver errors become ours."""
        assert self._pool is not None
        wait = min(self.timeout if wait is None else wait, until - time.monotonic())
        try:
            async with self._pool.connection(timeout=max(wait, 0.01)) as conn:
                with deadline(conn, until - time.monotonic()):
                    yield conn
        except HooklineError:
            raise
        except UnicodeEncodeError as exc:
            raise HooklineError(ErrorKind.invalid_input,
                                f"An entry is not valid text for PostgreSQL: {exc}") from exc
        except Exception as exc:
            if not self._is_driver_error(exc):
                raise
            if isinstance(exc, self._psycopg.OperationalError | StatementTimeout):
                self._drop_dead_connections()
            raise self._error(exc) from exc

    def _drop_dead_connections(self) -> None:
        """After a connection failed (the server restarted?), check the idle ones now, so
        that the requests after this one get live connections: checking every connection
        before each use would cost a round trip per call. In the background: the failed
        call answers at once."""
        pool = self._pool
        if pool is None or (self._checking is not None and not self._checking.done()):
            return
        self._checking = asyncio.get_running_loop().create_task(self._check_pool(pool))

    async def _check_pool(self, pool: AsyncConnectionPool) -> None:
        with anyio.move_on_after(self.timeout):
            try:
                await pool.check()
            except Exception:
                logger.debug("store.postgres_pool_check_failed", exc_info=True)

    @asynccontextmanager
    async def _statement(self, wait: float | None = None,
                         until: float | None = None) -> AsyncIterator[AsyncConnection]:
        """A connection for one writing statement (its own transaction), shielded from
        cancellation (a started write completes or fails, it is never abandoned half-way)
        and bounded like every connection (see `_connection`)."""
        with anyio.CancelScope(shield=True):
            async with self._connection(wait, until) as conn:
                yield conn

    @asynccontextmanager
    async def _write(self, wait: float | None = None) -> AsyncIterator[AsyncConnection]:
        """One write transaction of several statements, shielded and bounded likewise."""
        with anyio.CancelScope(shield=True):
            async with self._connection(wait) as conn, conn.transaction():
                yield conn
