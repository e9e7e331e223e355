"""One MCP server for one `running()` scope: started on first need, restarted after a
failure with a back-off, its tools listed once per start.

A connection lives in a task of the scope's task group (the SDK's session must be entered
and left by one task); calls are made from the turns' tasks. Every failure is one line
naming the server: the start's reason, or the call's.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from hookline.kernel.streaming import ErrorKind, HooklineError

from .config import ServerConfig

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp_types import CallToolResult, Tool

    from .stdio import ServerProcess

__all__ = ["BACKOFF_MAX", "Connection", "Opener"]

logger = logging.getLogger(__name__)

BACKOFF_MAX = 30.0
"""Seconds between restarts at most; the first restart after a failure is immediate, each
further consecutive failure doubles the wait (1, 2, 4 ... seconds)."""

Opener = Callable[[ServerConfig], Any]
"""Makes the async context manager that yields `(process or None, read, write)` streams."""


@dataclass
class _Live:
    session: ClientSession
    process: ServerProcess | None
    closing: anyio.Event
    closed: anyio.Event


class Connection:
    """The state of one configured server in the scope: `idle`, `ready`, `failed`."""

    def __init__(self, config: ServerConfig, open_streams: Opener,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self._open = open_streams
        self._clock = clock
        self._lock = anyio.Lock()
        self._live: _Live | None = None
        self._group: anyio.abc.TaskGroup | None = None
        self.tools: list[Tool] | None = None
        """The server's tools as last listed (None before the first successful start)."""
        self.error: str | None = None
        """Why the server is not usable now (one line), or None."""
        self.failures = 0
        self._retry_at = 0.0
        self.starts = 0

    @property
    def state(self) -> str:
        if self._live is not None:
            return "ready"
        return "failed" if self.error is not None else "idle"

    def bind(self, group: anyio.abc.TaskGroup | None) -> None:
        """Run in `group` (the scope's); None when the scope ends."""
        self._group = group

    async def ensure(self) -> ClientSession:
        """The live session, started now when there is none (unless backing off)."""
        async with self._lock:
            if self._live is not None:
                return self._live.session
            wait = self._retry_at - self._clock()
            if self.error is not None and wait > 0:
                raise HooklineError(ErrorKind.temporary, (
                    f"{self.error}; hookline tries again in {wait:.0f} s"))
            if self._group is None:
                raise HooklineError(ErrorKind.config, (
                    f"MCP server {self.config.name!r} is only started inside running() "
                    f"(the builtin lifespan owns its process)"))
            try:
                with anyio.fail_after(self.config.timeout):
                    self._live = await self._group.start(self._serve)
            except TimeoutError:
                self._failed(f"MCP server {self.config.name!r} did not start and list its "
                             f"tools within {self.config.timeout:g} s (timeout in "
                             f"[mcp_servers.{self.config.name}])")
                raise HooklineError(ErrorKind.temporary, str(self.error)) from None
            except HooklineError as exc:
                self._failed(exc.message)
                raise
            except Exception as exc:
                self._failed(f"MCP server {self.config.name!r} could not start: "
                             f"{_reason(exc)}")
                raise HooklineError(ErrorKind.tool, str(self.error)) from exc
            self.error = None
            return self._live.session

    async def call(self, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        """Call one tool; a crash or a hang fails the call and marks the server for a
        restart at its next use."""
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        session = await self.ensure()
        live = self._live
        name = self.config.name
        try:
            result = await session.call_tool(tool, arguments,
                                             read_timeout_seconds=self.config.timeout)
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                reason = (f"MCP server {name!r} did not answer {tool!r} within "
                          f"{self.config.timeout:g} s (timeout in [mcp_servers.{name}])")
            elif exc.code == CONNECTION_CLOSED:
                note = await live.process.exit_note() if live and live.process else "it went away"
                reason = f"MCP server {name!r} stopped during the call to {tool!r}: {note}"
            else:
                raise HooklineError(ErrorKind.tool, (
                    f"MCP server {name!r} refused {tool!r}: {exc.error.message}")) from None
            await self._drop(live, reason)
            raise HooklineError(ErrorKind.tool, f"{reason}; it is restarted at its next use"
                                ) from None
        except Exception as exc:
            reason = f"MCP server {name!r} failed during the call to {tool!r}: {_reason(exc)}"
            await self._drop(live, reason)
            raise HooklineError(ErrorKind.tool, f"{reason}; it is restarted at its next use"
                                ) from exc
        self.failures = 0
        return result

    async def close(self) -> None:
        """End the server (its process too) and wait until it has ended."""
        live, self._live = self._live, None
        if live is not None:
            live.closing.set()
            with anyio.CancelScope(shield=True):
                await live.closed.wait()

    # -- inside the scope's task group -------------------------------------------------

    async def _serve(self, *, task_status: anyio.abc.TaskStatus[_Live]) -> None:
        """Open the streams and the session, list the tools, then hold them until closed."""
        from mcp import ClientSession

        closing, closed = anyio.Event(), anyio.Event()
        started = False
        try:
            async with contextlib.AsyncExitStack() as stack:
                process, read, write = await stack.enter_async_context(
                    self._open(self.config))
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                self.tools = await _list_tools(session)
                self.starts += 1
                live = _Live(session, process, closing, closed)
                task_status.started(live)
                started = True
                await closing.wait()
        except BaseException as exc:
            if not started:
                raise _first_error(exc) from None
            if isinstance(exc, Exception):  # ending the session failed: the server is gone
                logger.debug("mcp.close_failed server=%s error=%s", self.config.name,
                             _reason(exc))
            else:
                raise
        finally:
            closed.set()

    async def _drop(self, live: _Live | None, reason: str) -> None:
        async with self._lock:
            if live is not None and self._live is live:
                self._live = None
                self._failed(reason)
        if live is not None:
            live.closing.set()

    def _failed(self, reason: str) -> None:
        self.failures += 1
        delay = 0.0 if self.failures <= 1 else min(2.0 ** (self.failures - 2), BACKOFF_MAX)
        self._retry_at = self._clock() + delay
        self.error = reason
        logger.warning("%s", reason)


async def _list_tools(session: ClientSession) -> list[Tool]:
    from mcp_types import PaginatedRequestParams

    listed = await session.list_tools()
    tools = list(listed.tools)
    while listed.next_cursor:
        listed = await session.list_tools(params=PaginatedRequestParams(cursor=listed.next_cursor))
        tools.extend(listed.tools)
    return tools


def _first_error(exc: BaseException) -> BaseException:
    """The first real error of an exception group (the SDK's task groups nest them)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _reason(exc: BaseException) -> str:
    exc = _first_error(exc)
    if isinstance(exc, HooklineError):
        return exc.message
    text = str(exc) or type(exc).__name__
    return text if type(exc).__name__ in text else f"{type(exc).__name__}: {text}"


@contextlib.asynccontextmanager
async def no_process(streams: Any) -> AsyncIterator[tuple[None, Any, Any]]:
    """An HTTP transport's streams, with no process of ours behind them."""
    async with streams as (read, write):
        yield None, read, write
