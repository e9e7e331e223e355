"""One MCP server for one `running()` scope: launched in the background, its session opened
when a turn needs it, restarted after a failure with a back-off.

Each start is a `_Run`, a task of the scope's task group (the SDK's session must be entered
and left by one task) that launches the server (a stdio server's process; nothing for an
HTTP one) and waits: for a turn that needs it (`ensure`: the session is then opened, and
the tools listed), for the process's end (a failure, with what it wrote on stderr), or for
the scope's end. Calls are made from the turns' tasks. Every failure is one warning naming
the server: the start's reason, or the call's.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.abc

from hookline.kernel.errors import ErrorKind, HooklineError

from .cache import ListedTool, listed_tool
from .config import ServerConfig

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp_types import CallToolResult, Tool

__all__ = ["BACKOFF_MAX", "LAUNCH_DELAY", "Connection", "Launched", "Launcher"]

logger = logging.getLogger(__name__)

BACKOFF_MAX = 30.0
"""Seconds between restarts at most; the first restart after a failure is immediate, each
further consecutive failure doubles the wait (1, 2, 4 ... seconds)."""


class Launched(Protocol):
    """A launched server: what a connection waits on and opens its session with."""

    ended: anyio.Event
    """Set when the server has gone (a stdio server's process exited)."""

    def streams(self) -> AbstractAsyncContextManager[tuple[Any, Any]]:
        """The read and write streams of a session with the server (the MCP SDK is loaded)."""
        ...

    async def exit_note(self) -> str:
        """Why its connection closed, for the line that says so."""
        ...

    def stderr_tail(self) -> str:
        """What it last wrote on stderr, as lines that follow that line (or nothing)."""
        ...


LAUNCH_DELAY = 0.5
"""Seconds a server started in the background waits before it launches, unless a turn
needs it sooner. Launching a stdio server starts the sandbox's helper first (a process of
its own: tens of milliseconds, more on a busy machine), which a run ending meanwhile would
wait for at its exit; a run that ends within this delay (an offline answer, an early
error) starts nothing, and one that waits on a model still has its servers started long
before the model asks for their tools."""

Launcher = Callable[[ServerConfig], AbstractAsyncContextManager[Launched]]
Listed = Callable[[ServerConfig, list[ListedTool]], Awaitable[None]]
"""Told every list the live server gives (to keep it for the next process)."""


@dataclass(eq=False)
class _Run:
    """One start of the server, from its launch to its end."""

    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    needed: anyio.Event = field(default_factory=anyio.Event)
    """Set by a turn that needs the server: it launches at once."""
    connect: anyio.Event = field(default_factory=anyio.Event)
    """Set once that turn has loaded the MCP SDK: the session is opened then, not before."""
    settled: anyio.Event = field(default_factory=anyio.Event)
    """Set once the session is open or the start has failed."""
    closed: anyio.Event = field(default_factory=anyio.Event)
    changed: anyio.Event = field(default_factory=anyio.Event)
    """Set by the server's `notifications/tools/list_changed`."""
    launched: Launched | None = None
    session: ClientSession | None = None
    error: HooklineError | None = None


class Connection:
    """The state of one configured server in the scope: `idle`, `starting`, `ready` (its
    session open) or `failed`."""

    def __init__(self, config: ServerConfig, launch: Launcher, listed: Listed | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self._launch = launch
        self._listed = listed
        self._clock = clock
        self._run: _Run | None = None
        self._group: anyio.abc.TaskGroup | None = None
        self.tools: list[ListedTool] | None = None
        """The server's tools as last listed, by this process or (until it lists them) a
        previous one; None when never listed."""
        self.error: str | None = None
        """Why the server is not usable now (one line), or None."""
        self.failures = 0
        self._retry_at = 0.0

    @property
    def state(self) -> str:
        run = self._run
        if run is None:
            return "idle"
        if run.error is not None:
            return "failed"
        return "ready" if run.session is not None else "starting"

    def bind(self, group: anyio.abc.TaskGroup | None) -> None:
        """Run in `group` (the scope's); None when the scope ends."""
        self._group = group

    def start_soon(self) -> None:
        """Start the server in the background unless it is started already (or backing
        off after a failure); its session waits for a turn that needs it (`ensure`)."""
        run = self._run
        if self._group is not None and (run is None or run.error is not None) \
                and self._retry_at <= self._clock():
            self._begin(self._group)

    async def ensure(self) -> ClientSession:
        """The open session: the server is launched now if it is not, and waited for (at
        most `timeout` seconds) when it is still starting."""
        session = (await self._ready()).session
        assert session is not None
        return session

    async def call(self, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        """Call one tool; a crash or a hang fails the call and marks the server for a
        restart at its next use."""
        run = await self._ready()  # the SDK is loaded once it is
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        session, launched, name = run.session, run.launched, self.config.name
        assert session is not None and launched is not None
        if self.tools is not None and tool not in {listed.name for listed in self.tools}:
            raise HooklineError(ErrorKind.tool, (
                f"MCP server {name!r} no longer offers the tool {tool!r} (its tools changed "
                f"since they were listed); the next run offers its current tools"))
        try:
            result = await session.call_tool(tool, arguments,
                                             read_timeout_seconds=self.config.timeout)
        except MCPError as exc:
            tail = ""
            if exc.code == REQUEST_TIMEOUT:
                reason = (f"MCP server {name!r} did not answer {tool!r} within "
                          f"{self.config.timeout:g} s (timeout in [mcp_servers.{name}])")
            elif exc.code == CONNECTION_CLOSED:
                reason = (f"MCP server {name!r} stopped during the call to {tool!r}: "
                          f"{await launched.exit_note()}")
                tail = launched.stderr_tail()
            else:
                raise HooklineError(ErrorKind.tool, (
                    f"MCP server {name!r} refused {tool!r}: {exc.error.message}")) from None
            reason += f"; it is restarted at its next use{tail}"
            self._fail(run, reason)
            raise HooklineError(ErrorKind.tool, reason) from None
        except Exception as exc:
            reason = (f"MCP server {name!r} failed during the call to {tool!r}: "
                      f"{_reason(exc)}; it is restarted at its next use")
            self._fail(run, reason)
            raise HooklineError(ErrorKind.tool, reason) from exc
        self.failures = 0
        return result

    async def close(self) -> None:
        """End the server (its process too) and wait until it has ended."""
        run, self._run = self._run, None
        if run is not None:
            run.scope.cancel()
            with anyio.CancelScope(shield=True):
                await run.closed.wait()

    # -- starting ----------------------------------------------------------------------

    async def _ready(self) -> _Run:
        run = self._run
        if run is None or run.error is not None:
            wait = self._retry_at - self._clock()
            if self.error is not None and wait > 0:
                raise HooklineError(ErrorKind.temporary, (
                    f"{self.error}; hookline tries again in {wait:.0f} s"))
            if self._group is None:
                raise HooklineError(ErrorKind.config, (
                    f"MCP server {self.config.name!r} is only started inside running() "
                    f"(the builtin lifespan owns its process)"))
            run = self._begin(self._group)
        if not run.settled.is_set():
            run.needed.set()
            # Off the event loop (it takes about a second of CPU) and outside `timeout`,
            # which is the server's: meanwhile the server starts.
            await anyio.to_thread.run_sync(_load_sdk)
            run.connect.set()
            with anyio.move_on_after(self.config.timeout):
                await run.settled.wait()
            if not run.settled.is_set():
                self._fail(run, (
                    f"MCP server {self.config.name!r} did not start and list its tools "
                    f"within {self.config.timeout:g} s (timeout in "
                    f"[mcp_servers.{self.config.name}])"), ErrorKind.temporary)
        if run.error is not None:  # a copy: other waiters of the run raise it too
            raise HooklineError(run.error.kind, run.error.message) from None
        return run

    def _begin(self, group: anyio.abc.TaskGroup) -> _Run:
        run = self._run = _Run()
        group.start_soon(self._serve, run)
        return run

    async def _serve(self, run: _Run) -> None:
        """Launch (after `LAUNCH_DELAY`, or when a turn needs the server), open the session
        when a turn needs it, then follow the tool list until the run is cancelled (by
        `close`, a failure or a timeout)."""
        try:
            with run.scope:
                with anyio.move_on_after(LAUNCH_DELAY):
                    await run.needed.wait()
                async with contextlib.AsyncExitStack() as stack:
                    run.launched = await stack.enter_async_context(self._launch(self.config))
                    try:
                        session = await self._open(run, stack)
                    except Exception as exc:  # said while the process is there to ask
                        raise _StartFailed(await self._why(run, exc), _kind(exc)) from exc
                    await self._follow(run, session)
        except Exception as exc:  # the launch failed, the session did, or its end did
            first = _first_error(exc)
            if isinstance(first, _StartFailed):
                self._fail(run, first.reason, first.kind)
            elif not run.settled.is_set():  # a transport's own reason (HTTP 401) comes first
                self._fail(run, self._start_failure(exc), _kind(exc))
            else:
                logger.debug("mcp.close_failed server=%s error=%s", self.config.name,
                             _reason(exc))
        finally:
            if run.error is None and run.session is None:  # closed before it was ready
                run.error = HooklineError(ErrorKind.temporary, (
                    f"MCP server {self.config.name!r} was stopped before it was ready "
                    f"(its scope ended)"))
            run.settled.set()
            run.closed.set()

    async def _open(self, run: _Run, stack: contextlib.AsyncExitStack) -> ClientSession:
        launched = run.launched
        assert launched is not None
        async with anyio.create_task_group() as race:
            for event in (run.connect, launched.ended):
                race.start_soon(_set_then_cancel, event, race.cancel_scope)
        if not run.connect.is_set():
            raise _Ended()
        from mcp import ClientSession  # loaded by the turn that wants the session

        async def notified(message: Any) -> None:
            if getattr(message, "method", None) == "notifications/tools/list_changed":
                run.changed.set()

        read, write = await stack.enter_async_context(launched.streams())
        session = await stack.enter_async_context(
            ClientSession(read, write, message_handler=notified))
        await session.initialize()
        await self._list(session)
        self.error = None
        run.session = session
        run.settled.set()
        return session

    async def _follow(self, run: _Run, session: ClientSession) -> None:
        """List the tools again whenever the server says they changed."""
        while True:
            await run.changed.wait()
            run.changed = anyio.Event()
            try:
                await self._list(session)
            except Exception as exc:  # the server is going: the next call says so
                logger.debug("mcp.relist_failed server=%s error=%s", self.config.name,
                             _reason(exc))

    async def _list(self, session: ClientSession) -> None:
        tools = [listed_tool(tool) for tool in await _list_tools(session)]
        if tools != self.tools and self._listed is not None:
            await self._listed(self.config, tools)
        self.tools = tools

    async def _why(self, run: _Run, exc: Exception) -> str:
        """Why the session could not be opened: a server that went away says how, with
        what it wrote on stderr last."""
        first = _first_error(exc)
        gone = isinstance(first, _Ended)
        if not gone:  # a turn asked for the session: the SDK is loaded
            from mcp import MCPError
            from mcp_types import CONNECTION_CLOSED

            gone = isinstance(first, MCPError) and first.code == CONNECTION_CLOSED
        if gone and run.launched is not None:
            note = await run.launched.exit_note()
            return (f"MCP server {self.config.name!r} could not start: {note}"
                    f"{run.launched.stderr_tail()}")
        return self._start_failure(first)

    def _start_failure(self, exc: BaseException) -> str:
        first = _first_error(exc)
        if isinstance(first, HooklineError):  # it names the server and the fix
            return first.message
        at = f" at {self.config.describe()}" if self.config.url is not None else ""
        return f"MCP server {self.config.name!r}{at} could not start: {_reason(first)}"

    def _fail(self, run: _Run, reason: str, kind: ErrorKind = ErrorKind.tool) -> None:
        """Mark the run failed (once: its first reason counts) and end it; the connection
        fails with it while it is the current one."""
        if run.error is not None:
            return
        run.error = HooklineError(kind, reason)
        run.settled.set()
        run.scope.cancel()
        if run is not self._run:
            return
        self.failures += 1
        delay = 0.0 if self.failures <= 1 else min(2.0 ** (self.failures - 2), BACKOFF_MAX)
        self._retry_at = self._clock() + delay
        self.error = reason
        logger.warning("%s", reason)


class _Ended(Exception):
    """The server went away before a turn needed it."""


class _StartFailed(Exception):
    def __init__(self, reason: str, kind: ErrorKind) -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind


async def _set_then_cancel(event: anyio.Event, scope: anyio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


def _load_sdk() -> None:
    import mcp  # noqa: F401
    import mcp_types  # noqa: F401


async def _list_tools(session: ClientSession) -> list[Tool]:
    from mcp_types import PaginatedRequestParams

    listed = await session.list_tools()
    tools = list(listed.tools)
    while listed.next_cursor:
        listed = await session.list_tools(params=PaginatedRequestParams(cursor=listed.next_cursor))
        tools.extend(listed.tools)
    return tools


def _kind(exc: BaseException) -> ErrorKind:
    first = _first_error(exc)
    return first.kind if isinstance(first, HooklineError) else ErrorKind.tool


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
