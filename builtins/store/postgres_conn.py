"""Reaching the PostgreSQL tape store's database: the driver's lazy import, hookline's own
URL parameters, and the pooled connections every store call runs on, with the mapping of
driver errors to `HooklineError`s that never show a password."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import anyio

from hookline.kernel.streaming import ErrorKind, HooklineError

from ..storeurl import redact_url

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

logger = logging.getLogger("hookline.builtins.store.postgres")

INSTALL_HINT: Final = "pip install 'hookline[postgres]'"

_HOOKLINE_PARAMS: Final = ("hookline_pool_max", "hookline_grace")
"""Query parameters of the URL read by hookline (and removed before libpq sees it)."""


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



class PostgresConnections:
    """The connection handling of `PostgresTapeStore`: its pool, the deadlines and
    shielding of writes, and driver errors turned into `HooklineError`s."""

    display: str
    timeout: float
    _conninfo: str
    _pool: AsyncConnectionPool | None
    _closed: bool
    _psycopg: Any

    async def _connect(self) -> AsyncConnection:
        with anyio.fail_after(max(self.timeout, 10.0)):
            return await self._psycopg.AsyncConnection.connect(self._conninfo, autocommit=True)

    def _is_driver_error(self, exc: BaseException) -> bool:
        psycopg = self._psycopg
        if psycopg is None:
            return False
        import psycopg_pool

        return isinstance(exc, psycopg.Error | psycopg_pool.PoolTimeout | OSError | TimeoutError)

    def _error(self, exc: BaseException, doing: str = "is unavailable") -> HooklineError:
        """A HooklineError for a driver error, with every password scrubbed."""
        detail = redact_url(" ".join(str(exc).split()) or type(exc).__name__)
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
