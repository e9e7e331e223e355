"""Host processes that lead their own process group: start, signal, stop.

`open_local_process` starts a process as the leader of a new session and process group
(POSIX), so signalling the group (`LocalProcess.signal`) reaches everything it started,
unless a descendant deliberately left with `setsid` (the lifespan ends those; see
`lifespan`). `stop_processes` stops many at once: SIGTERM, a grace period, then SIGKILL.
Nothing here knows about workspaces: `LocalEnvironment.spawn` checks the directory first.

Windows: there are no process groups here, so stopping a process terminates (or kills) the
direct process only; its descendants may survive.
"""

from __future__ import annotations

import contextlib
import os
import signal as signals
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

import anyio
import anyio.abc

from hookline.kernel.environment import StrPath
from hookline.kernel.errors import ErrorKind, HooklineError

from .proctable import process_table

if TYPE_CHECKING:
    from .confined import Spawner

__all__ = [
    "KILL_WAIT",
    "POSIX",
    "STOP_GRACE",
    "LocalProcess",
    "open_local_process",
    "stop_processes",
]

POSIX = os.name == "posix"

STOP_GRACE = 3.0
"""Seconds a stopped process group gets between SIGTERM and SIGKILL."""

KILL_WAIT = 5.0
"""Seconds to wait for a killed process group to disappear before giving up."""

READ_CHUNK = 65536
"""Bytes asked for per read of a process's output stream."""

_POLL_INTERVAL = 0.05


# -- process groups --------------------------------------------------------------------


def _live_group_members(pgid: int) -> bool:
    """True while the process group has a member that is not a zombie.

    Zombies count as gone: they have exited and only wait to be reaped, which may never
    happen when the system's init does not reap orphans. Linux reads /proc; other POSIX
    systems fall back to `killpg(pgid, 0)`, which also counts zombies.
    """
    table = process_table()
    if table:
        return any(info.pgrp == pgid and not info.zombie for info in table)
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _signal_group(pgid: int, signum: int) -> None:
    # Gone already (PermissionError: macOS reports a group of zombies this way).
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


# -- processes -------------------------------------------------------------------------


class _EmptyReader:
    """Stands in for a stream that is not piped to us."""

    async def read(self, n: int = -1) -> bytes:
        return b""


class _StreamReader:
    """`ByteReader` over an anyio byte stream: `b""` at end of stream, never an exception."""

    def __init__(self, stream: anyio.abc.ByteReceiveStream) -> None:
        self._stream = stream

    async def read(self, n: int = -1) -> bytes:
        if n == 0:
            return b""
        if n < 0:
            chunks = []
            while chunk := await self.read(READ_CHUNK):
                chunks.append(chunk)
            return b"".join(chunks)
        try:
            return await self._stream.receive(n)
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            return b""


class LocalProcess:
    """A host process (`hookline.kernel.environment.Process`), leader of its own group.

    `signal()` reaches the whole process group on POSIX, so descendants stop too; it
    never raises when the processes are already gone.
    """

    def __init__(self, process: anyio.abc.Process, *, group: bool = POSIX) -> None:
        self._process = process
        self._group = group and POSIX
        self._stdout = _StreamReader(process.stdout) if process.stdout else _EmptyReader()
        self._stderr = _StreamReader(process.stderr) if process.stderr else _EmptyReader()
        self._closed = False

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def closed(self) -> bool:
        """True once `aclose()` has run: the process is reaped and its pipes closed."""
        return self._closed

    @property
    def stdout(self) -> _StreamReader | _EmptyReader:
        return self._stdout

    @property
    def stderr(self) -> _StreamReader | _EmptyReader:
        return self._stderr

    @property
    def returncode(self) -> int | None:
        return self._process.returncode

    def is_running(self) -> bool:
        return self.returncode is None

    async def wait(self) -> int:
        return await self._process.wait()

    async def write_stdin(self, data: bytes) -> None:
        stdin = self._process.stdin
        if stdin is None:
            raise BrokenPipeError("the process's stdin is not piped")
        try:
            await stdin.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise BrokenPipeError(f"cannot write to process {self.pid}: stdin is closed") from exc

    async def close_stdin(self) -> None:
        stdin = self._process.stdin
        if stdin is not None:
            with contextlib.suppress(anyio.BrokenResourceError, OSError):
                await stdin.aclose()

    async def signal(self, kill: bool) -> None:
        """SIGTERM (or SIGKILL with `kill`) the process group; Windows: the process only."""
        if not self._group:
            try:
                if kill:
                    self._process.kill()
                else:
                    self._process.terminate()
            except OSError:  # already gone
                pass
            return
        signum = signals.SIGKILL if kill else signals.SIGTERM
        if self.returncode is None:
            _signal_group(self.pid, signum)
        elif await anyio.to_thread.run_sync(_live_group_members, self.pid):
            # The leader has exited, but processes it started still hold the group.
            _signal_group(self.pid, signum)

    async def alive(self) -> bool:
        """True while the process, or (POSIX) any live member of its group, remains."""
        if self.returncode is None:
            return True
        if not self._group:
            return False
        return await anyio.to_thread.run_sync(_live_group_members, self.pid)

    async def aclose(self) -> None:
        """Kill whatever is left of the group, reap the process and close its pipes."""
        if self._closed:
            return
        with anyio.CancelScope(shield=True):
            if await self.alive():
                await self.signal(True)
                await _wait_gone([self], KILL_WAIT)
            with anyio.move_on_after(KILL_WAIT):
                await self._process.aclose()
            self._closed = True


async def open_local_process(
    command: str | Sequence[str],
    *,
    cwd: StrPath | None = None,
    env: Mapping[str, str] | None = None,
    stdin: int | IO[Any] | None = subprocess.PIPE,
    stdout: int | IO[Any] | None = subprocess.PIPE,
    stderr: int | IO[Any] | None = subprocess.PIPE,
    environ: Mapping[str, str] | None = None,
    spawner: Spawner | None = None,
) -> LocalProcess:
    """Start a host process as the leader of a new session and process group (POSIX).

    A string runs through the shell, a sequence is an argv; `env` is added to `environ`
    (default: the current environment). With `spawner`, the sandbox's confined thread
    starts it, so it runs inside the sandbox. No workspace check happens here:
    `LocalEnvironment.spawn` does that.
    """
    if isinstance(command, str):
        if not command.strip():
            raise HooklineError(ErrorKind.invalid_input, "the command is empty")
        argv: str | list[str] = command
    else:
        argv = [os.fspath(part) for part in command]
        if not argv:
            raise HooklineError(ErrorKind.invalid_input, "the command has no arguments")
    if environ is not None:
        environment: Mapping[str, str] | None = {**environ, **(env or {})}
    else:
        environment = {**os.environ, **env} if env else None
    options: dict[str, Any] = {
        "stdin": stdin,
        "stdout": stdout,
        "stderr": stderr,
        "cwd": os.fspath(cwd) if cwd is not None else None,
        "env": environment,
        "start_new_session": POSIX,
    }
    if spawner is None:
        return LocalProcess(await anyio.open_process(argv, **options))
    from .confined import open_confined

    return LocalProcess(await open_confined(spawner, argv, **options))


async def stop_processes(processes: Iterable[LocalProcess], grace: float = STOP_GRACE) -> None:
    """Stop processes and their groups: SIGTERM, wait up to `grace` seconds, then SIGKILL.

    All processes are stopped together, so the whole call takes about `grace` seconds at
    most before the kill, however many there are. Cancellation cannot interrupt it.
    """
    targets = list(processes)
    if not targets:
        return
    with anyio.CancelScope(shield=True):
        for process in targets:
            await process.signal(False)
        remaining = await _wait_gone(targets, grace)
        for process in remaining:
            await process.signal(True)
        await _wait_gone(remaining, KILL_WAIT)


async def _wait_gone(processes: list[LocalProcess], timeout: float) -> list[LocalProcess]:
    """Poll until every process and group is gone or `timeout` passes; return survivors."""
    remaining = list(processes)
    with anyio.move_on_after(timeout):
        while True:
            remaining = [process for process in remaining if await process.alive()]
            if not remaining:
                break
            await anyio.sleep(_POLL_INTERVAL)
    return remaining
