"""A stdio MCP server as a process hookline owns: sandboxed, filtered, tracked.

The SDK's `stdio_client` starts its own process; this module starts it the way the shell
tool starts commands instead (`open_local_process` through the sandbox's confined thread,
with the filtered environment and the scope's owner mark, tracked by the background
processes' lifespan), so it is confined like a command and ended with the `running()`
scope, or by the next start after a SIGKILL. Then it bridges the process's pipes to the
in-memory streams `ClientSession` reads and writes: one JSON-RPC message per line.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from hookline.kernel.streaming import ErrorKind, HooklineError

from ..host.processes import READ_CHUNK, LocalProcess, open_local_process, stop_processes

if TYPE_CHECKING:
    from ..host.background import BackgroundProcesses
    from ..host.sandbox import Confinement
    from .config import ServerConfig

__all__ = ["ServerProcess", "open_stdio_server"]

logger = logging.getLogger(__name__)

STDERR_LINES = 5
"""Last lines of a server's stderr kept to explain why it ended."""

EXIT_WAIT = 2.0
"""Seconds a server whose pipes closed gets to be seen exiting, for its exit status."""

MAX_LINE = 16 * 1024 * 1024
"""Bytes of one message line at most: a server that sends more is cut off."""


@dataclass
class ServerProcess:
    """The running process of a stdio server and the last lines it wrote to stderr."""

    process: LocalProcess
    stderr: deque[str] = field(default_factory=lambda: deque(maxlen=STDERR_LINES))

    async def exit_note(self) -> str:
        """Why it ended, for the one line that says so (its exit status, once known:
        the pipes close a moment before the exit is seen)."""
        with anyio.move_on_after(EXIT_WAIT):
            await self.process.wait()
        code = self.process.returncode
        status = "is still running" if code is None else f"exited with status {code}"
        last = f"; its stderr ended with: {self.stderr[-1]}" if self.stderr else ""
        return f"the server process (pid {self.process.pid}) {status}{last}"


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
async def open_stdio_server(config: ServerConfig, workspace: str, confinement: Confinement,
                            processes: BackgroundProcesses
                            ) -> AsyncIterator[tuple[ServerProcess, Any, Any]]:
    """Start the server; yield it with the read and write streams of its session. On exit
    its stdin is closed and the process group stopped (SIGTERM, then SIGKILL)."""
    from mcp.shared.message import SessionMessage

    process = await _start(config, workspace, confinement, processes)
    server = ServerProcess(process)
    incoming_send, incoming = anyio.create_memory_object_stream[Any](0)
    outgoing, outgoing_receive = anyio.create_memory_object_stream[SessionMessage](0)

    async def read_messages() -> None:
        async with incoming_send:
            async for line in _lines(process, config.name):
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

    async def read_stderr() -> None:
        async for line in _lines(process, config.name, stderr=True):
            text = line.decode("utf-8", "replace").rstrip()
            if text:
                server.stderr.append(text)
                logger.debug("mcp.stderr server=%s %s", config.name, text)

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(read_messages)
            group.start_soon(write_messages)
            group.start_soon(read_stderr)
            try:
                yield server, incoming, outgoing
            finally:
                group.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await process.close_stdin()
            await stop_processes([process], processes.stop_grace)
            await process.aclose()


async def _lines(process: LocalProcess, name: str, stderr: bool = False
                 ) -> AsyncIterator[bytes]:
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
