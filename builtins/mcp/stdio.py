"""A stdio MCP server as a process hookline owns: sandboxed, filtered, tracked.

The SDK's `stdio_client` starts its own process; this module starts it the way the shell
tool starts commands instead (`open_local_process` through the sandbox's confined thread,
with the filtered environment and the scope's owner mark, tracked by the background
processes' lifespan), so it is confined like a command and ended with the `running()`
scope, or by the next start after a SIGKILL. Starting it needs no MCP SDK: only when a
turn needs the server are its pipes bridged to the in-memory streams `ClientSession` reads
and writes (one JSON-RPC message per line). Its stderr is read from the start, so a server
that cannot start says why.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from hookline.kernel.errors import ErrorKind, HooklineError

from ..host.processes import READ_CHUNK, LocalProcess, open_local_process, stop_processes
from ..privacy.redact import redact_credentials

if TYPE_CHECKING:
    from ..host.background import BackgroundProcesses
    from ..host.sandbox import Confinement
    from .config import ServerConfig

__all__ = ["ServerProcess", "launch_stdio_server"]

logger = logging.getLogger(__name__)

STDERR_LINES = 10
"""Last lines of a server's stderr kept to explain why it ended."""

STDERR_CHARS = 2048
"""Characters of those lines shown at most (the last ones)."""

EXIT_WAIT = 2.0
"""Seconds a server whose pipes closed gets to be seen exiting, for its exit status."""

MAX_LINE = 16 * 1024 * 1024
"""Bytes of one message line at most: a server that sends more is cut off."""


@dataclass(eq=False)
class ServerProcess:
    """The running process of a stdio server, the last lines it wrote to stderr, and the
    streams of a session with it."""

    process: LocalProcess
    name: str
    stderr: deque[str] = field(default_factory=lambda: deque(maxlen=STDERR_LINES))
    ended: anyio.Event = field(default_factory=anyio.Event)
    """Set once the process has exited and its stderr has been read to the end."""
    overflowed: bool = False
    """It wrote a line longer than `MAX_LINE` to stdout: nothing after it was read."""
    _stderr_read: anyio.Event = field(default_factory=anyio.Event)

    async def exit_note(self) -> str:
        """Why it ended, for the line that says so (its exit status, once known: the pipes
        close a moment before the exit is seen)."""
        with anyio.move_on_after(EXIT_WAIT):
            await self.ended.wait()
        code = self.process.returncode
        status = "is still running" if code is None else f"exited with status {code}"
        why = (f"it sent a message over {MAX_LINE // 2**20} MiB (a result too large to "
               f"take), after which its output is not read; " if self.overflowed else "")
        return f"{why}the server process (pid {self.process.pid}) {status}"

    def stderr_tail(self) -> str:
        """The last lines of its stderr (credentials hidden, at most `STDERR_LINES` and
        `STDERR_CHARS`), one indented line each; empty when it wrote none."""
        if not self.stderr:
            return ""
        text = redact_credentials("\n".join(self.stderr))  # before the cut: whole URLs
        if len(text) > STDERR_CHARS:
            text = "..." + text[-STDERR_CHARS:]
        lines = "".join(f"\n    {line}" for line in text.split("\n"))
        return f"; its stderr ended with:{lines}"

    @contextlib.asynccontextmanager
    async def streams(self) -> AsyncIterator[tuple[Any, Any]]:
        """The read and write streams of a session with the server: its stdout and stdin,
        one JSON-RPC message per line."""
        from mcp.shared.message import SessionMessage

        process, name = self.process, self.name
        incoming_send, incoming = anyio.create_memory_object_stream[Any](0)
        outgoing, outgoing_receive = anyio.create_memory_object_stream[SessionMessage](0)

        async def read_messages() -> None:
            async with incoming_send:
                async for line in _lines(process, name, overflowed=self._overflowed):
                    if not line.strip():
                        continue
                    try:
                        await incoming_send.send(_parse(line))
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        return

        async def write_messages() -> None:
            async with outgoing_receive:
                async for message in outgoing_receive:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    try:
                        await process.write_stdin(data.encode("utf-8") + b"\n")
                    except BrokenPipeError:
                        await incoming_send.aclose()  # the session sees the connection end
                        return

        async with anyio.create_task_group() as group:
            group.start_soon(read_messages)
            group.start_soon(write_messages)
            try:
                yield incoming, outgoing
            finally:
                group.cancel_scope.cancel()

    def _overflowed(self) -> None:
        self.overflowed = True

    async def _read_stderr(self) -> None:
        async for line in _lines(self.process, self.name, stderr=True):
            text = line.decode("utf-8", "replace").rstrip()
            if text:
                self.stderr.append(text[-STDERR_CHARS:])
                logger.debug("mcp.stderr server=%s %s", self.name, text)
        self._stderr_read.set()

    async def _watch_exit(self) -> None:
        await self.process.wait()
        with anyio.move_on_after(EXIT_WAIT):  # a child of the server may hold stderr open
            await self._stderr_read.wait()
        self.ended.set()


async def _start(config: ServerConfig, workspace: str, confinement: Confinement,
                 processes: BackgroundProcesses) -> LocalProcess:
    assert config.command is not None
    cwd = os.path.join(workspace, os.path.expanduser(config.cwd)) if config.cwd else workspace
    extra = {**config.env, **processes.owner_env()}
    environ, spawner = await anyio.to_thread.run_sync(confinement.prepare, extra)
    try:
        process = await open_local_process([config.command, *config.args], cwd=cwd,
                                           environ=environ, spawner=spawner)
    except FileNotFoundError as exc:
        missing = config.command if exc.filename in (None, config.command) else exc.filename
        what = "its working folder" if missing == cwd else "the command"
        raise HooklineError(ErrorKind.config, (
            f"MCP server {config.name!r}: {what} {missing!r} does not exist; fix command "
            f"(or cwd) in [mcp_servers.{config.name}] of config.toml")) from None
    except PermissionError as exc:
        raise HooklineError(ErrorKind.config, (
            f"MCP server {config.name!r}: cannot run {config.command!r}: {exc.strerror}; "
            f"fix command in [mcp_servers.{config.name}] of config.toml")) from None
    await processes.track(process)
    return process


@contextlib.asynccontextmanager
async def launch_stdio_server(config: ServerConfig, workspace: str, confinement: Confinement,
                              processes: BackgroundProcesses) -> AsyncIterator[ServerProcess]:
    """Start the server's process and yield it, its stderr read from the start and its exit
    watched. On exit its stdin is closed and the process group stopped (SIGTERM, then
    SIGKILL)."""
    with anyio.CancelScope(shield=True):  # started and tracked, or not started: never lost
        process = await _start(config, workspace, confinement, processes)
    server = ServerProcess(process, config.name)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(server._read_stderr)
            group.start_soon(server._watch_exit)
            try:
                yield server
            finally:
                group.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await process.close_stdin()
            await _stop(process, processes.stop_grace)
            await process.aclose()


async def _stop(process: LocalProcess, grace: float) -> None:
    """SIGTERM the group, SIGKILL what is left `grace` seconds later (`stop_processes`).
    The server's own exit is awaited rather than polled for: most end at SIGTERM, and a
    run's exit then waits for that alone, not for a poll interval."""
    began = anyio.current_time()
    await process.signal(False)
    with anyio.move_on_after(grace):
        await process.wait()
    await stop_processes([process], max(0.0, grace - (anyio.current_time() - began)))


async def _lines(process: LocalProcess, name: str, stderr: bool = False,
                 overflowed: Callable[[], None] = lambda: None) -> AsyncIterator[bytes]:
    stream = process.stderr if stderr else process.stdout
    buffer = b""
    while chunk := await stream.read(READ_CHUNK):
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            yield line
        if len(buffer) > MAX_LINE:
            logger.warning("mcp.line_too_long server=%s: a line over %d bytes; the rest of "
                           "its output is ignored", name, MAX_LINE)
            overflowed()
            return
    if buffer:
        yield buffer


def _parse(line: bytes) -> Any:
    """A JSON-RPC message, or the error the session reports for a line that is not one."""
    from mcp.shared.message import SessionMessage
    from mcp_types import jsonrpc_message_adapter

    try:
        return SessionMessage(jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        return exc
