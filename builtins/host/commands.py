"""Running a command to completion, through any environment's `spawn`.

`run_command` waits for the command to exit and close its output, keeps the first
`max_output` bytes of each stream (reading and dropping the rest, so a chatty command never
blocks on a full pipe), kills the command and what it started after `timeout` seconds, and
leaves nothing running behind it, cancelled or not. `LocalEnvironment.run` is this
function; the `shell` tool calls it with whatever environment the turn has.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from hookline.kernel.environment import Environment
from hookline.kernel.errors import ErrorKind, HooklineError

from .processes import KILL_WAIT, READ_CHUNK

__all__ = ["CommandResult", "run_command"]


@dataclass(frozen=True)
class CommandResult:
    """The outcome of `run_command()`: exit status, decoded output and what was cut short."""

    returncode: int | None
    """Exit status; negative for a signal on POSIX (-9 after a timeout kill)."""
    stdout: str
    stderr: str
    timed_out: bool = False
    """The timeout passed and the process group was killed."""
    truncated: bool = False
    """A stream produced more than `max_output` bytes; only the first ones are kept."""


class _Capture:
    """Keeps the first `limit` bytes of a stream and notes whether more came."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[bytes] = []
        self.size = 0
        self.truncated = False

    def feed(self, chunk: bytes) -> None:
        room = self.limit - self.size
        if len(chunk) > room:
            self.truncated = True
            chunk = chunk[: max(room, 0)]
        if chunk:
            self.parts.append(chunk)
            self.size += len(chunk)

    def text(self) -> str:
        # A cut may split a multi-byte character: decode with replacement.
        return b"".join(self.parts).decode("utf-8", "replace")


async def _drain(reader: Any, capture: _Capture) -> None:
    while chunk := await reader.read(READ_CHUNK):
        capture.feed(chunk)


async def _feed_stdin(process: Any, data: bytes | None) -> None:
    try:
        if data:
            await process.write_stdin(data)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the command did not read its input; not our error
    finally:
        await process.close_stdin()


async def run_command(
    environment: Environment,
    command: str | Sequence[str],
    *,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = 60,
    max_output: int = 64_000,
    stdin: bytes | None = None,
) -> CommandResult:
    """Run a command through any environment's `spawn` until it finishes.

    The command is finished when it has exited and closed its output streams (a
    descendant that keeps stdout open keeps it running). After `timeout` seconds the
    process and its descendants are killed (`Process.signal(kill=True)`) and the result
    says `timed_out`. Each stream keeps its first `max_output` bytes; the rest is read and
    dropped, so a chatty command never blocks on a full pipe. Cancellation kills the
    command too.

    A foreground command owns its process group: with a `LocalProcess`, anything the
    command left running in its group (`daemon > log &`) is killed when it finishes.
    Long-running processes belong in `BackgroundProcesses` instead.
    """
    if timeout is not None and timeout <= 0:
        raise HooklineError(ErrorKind.invalid_input, f"timeout must be positive, got {timeout}")
    if max_output < 0:
        raise HooklineError(
            ErrorKind.invalid_input, f"max_output must not be negative, got {max_output}"
        )
    process = await environment.spawn(command, cwd=cwd, env=env)
    stdout, stderr = _Capture(max_output), _Capture(max_output)
    timed_out = False
    try:
        with anyio.move_on_after(timeout) as scope:
            await _collect(process, stdout, stderr, stdin)
        if scope.cancelled_caught:
            timed_out = True
            await process.signal(True)
            # The kill closes the pipes: pick up what was written before it.
            with anyio.move_on_after(KILL_WAIT):
                await _collect(process, stdout, stderr, None)
        returncode = process.returncode
    finally:
        await _dispose(process)
    return CommandResult(
        returncode=returncode,
        stdout=stdout.text(),
        stderr=stderr.text(),
        timed_out=timed_out,
        truncated=stdout.truncated or stderr.truncated,
    )


async def _collect(
    process: Any, stdout: _Capture, stderr: _Capture, stdin: bytes | None
) -> None:
    async with anyio.create_task_group() as group:
        group.start_soon(_feed_stdin, process, stdin)
        group.start_soon(_drain, process.stdout, stdout)
        group.start_soon(_drain, process.stderr, stderr)
        await process.wait()


async def _dispose(process: Any) -> None:
    """Leave nothing behind: kill a process still running, reap it, close its pipes."""
    with anyio.CancelScope(shield=True):
        aclose: Callable[[], Awaitable[None]] | None = getattr(process, "aclose", None)
        if aclose is not None:
            await aclose()
            return
        if process.is_running():
            await process.signal(True)
            with anyio.move_on_after(KILL_WAIT):
                await process.wait()
