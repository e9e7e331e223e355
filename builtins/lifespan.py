"""Background shell processes owned by the `running()` scope.

`BackgroundProcesses` starts host processes that outlive the tool call that started them
(servers, watchers, long builds) and guarantees they do not outlive the scope: its
`lifespan()` is what the builtin plugin returns from `provide_lifespan`, and when the scope
exits - normally, by an error or by cancellation - every owned process group gets SIGTERM,
up to 3 seconds to exit, then SIGKILL. Nothing started through the registry is left running.

Each process leads its own process group (POSIX), so the processes it starts are stopped
with it. A descendant that leaves the group on purpose (`setsid`, a double-forking daemon)
and a framework that is itself killed need process management at the host level.

Windows has no process groups: stopping terminates, then kills, the direct shell process
only; processes it started may survive.

Output: stdout and stderr of a background process go, merged, to a log file in a private
temporary directory (so the process never blocks on a full pipe and no task has to read
it); `output(id)` returns its tail. The directory is removed when the scope exits.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass

import anyio

from hookline.kernel.streaming import ErrorKind, HooklineError

from .environment import STOP_GRACE, LocalProcess, open_local_process, stop_processes

__all__ = ["BackgroundInfo", "BackgroundProcesses"]

DEFAULT_TAIL_BYTES = 16_000


@dataclass(frozen=True)
class BackgroundInfo:
    """A snapshot of one background process."""

    id: str
    command: str
    pid: int
    cwd: str | None
    started_at: float
    """Wall-clock start time (`time.time()`)."""
    returncode: int | None
    """Exit status of the shell; None while it runs."""
    stopped: bool
    """`stop()` (or the end of the scope) stopped it."""

    @property
    def running(self) -> bool:
        return self.returncode is None

    def describe(self) -> str:
        if self.running:
            status = "running"
        elif self.stopped:
            status = f"stopped (exit status {self.returncode})"
        else:
            status = f"exited with status {self.returncode}"
        return f"{self.id} pid {self.pid} {status}: {self.command}"


@dataclass
class _Entry:
    id: str
    command: str
    cwd: str | None
    process: LocalProcess
    log_path: str
    started_at: float
    stopped: bool = False

    def info(self) -> BackgroundInfo:
        return BackgroundInfo(
            id=self.id,
            command=self.command,
            pid=self.process.pid,
            cwd=self.cwd,
            started_at=self.started_at,
            returncode=self.process.returncode,
            stopped=self.stopped,
        )


class BackgroundProcesses:
    """A registry of background shell processes, alive only inside the lifespan.

    `start()` works only while `lifespan()` is entered (inside `framework.running()`
    with the builtin plugin); ids (`bg1`, `bg2`, ...) stay unique for the registry's life.
    """

    def __init__(
        self, *, stop_grace: float = STOP_GRACE, tail_bytes: int = DEFAULT_TAIL_BYTES
    ) -> None:
        self.stop_grace = stop_grace
        self.tail_bytes = tail_bytes
        self._entries: dict[str, _Entry] = {}
        self._ids = itertools.count(1)
        self._directory: str | None = None
        self._active = False

    @property
    def active(self) -> bool:
        """True while the lifespan is entered and new processes may start."""
        return self._active

    async def start(
        self,
        command: str,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> str:
        """Start `command` through the shell as a process group leader; return its id.

        `cwd` is used as given (callers such as LocalEnvironment check it first); `env` is
        added to the current environment. Stdin is empty; stdout and stderr go to the
        process's log.
        """
        if not self._active or self._directory is None:
            raise HooklineError(
                ErrorKind.config,
                "background processes can only be started inside framework.running() with "
                "the builtin lifespan active: the lifespan owns them and stops them when the "
                "scope exits",
            )
        if not isinstance(command, str) or not command.strip():
            raise HooklineError(ErrorKind.invalid_input, "the background command is empty")
        process_id = f"bg{next(self._ids)}"
        log_path = os.path.join(self._directory, f"{process_id}.log")
        log = await anyio.to_thread.run_sync(open, log_path, "wb")
        try:
            process = await open_local_process(
                command,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        finally:
            log.close()  # the child holds its own copy of the descriptor
        entry = _Entry(
            id=process_id,
            command=command,
            cwd=os.fspath(cwd) if cwd is not None else None,
            process=process,
            log_path=log_path,
            started_at=time.time(),
        )
        self._entries[process_id] = entry
        if not self._active:
            # The scope closed while the process was starting: it must not survive.
            entry.stopped = True
            await stop_processes([process], self.stop_grace)
            await process.aclose()
            raise HooklineError(
                ErrorKind.config,
                f"the running() scope closed while {process_id} was starting; it was stopped",
            )
        return process_id

    def list(self) -> list[BackgroundInfo]:
        """Every process started in the current scope, running or not, oldest first."""
        return [entry.info() for entry in self._entries.values()]

    def get(self, process_id: str) -> BackgroundInfo:
        return self._entry(process_id).info()

    async def output(self, process_id: str, max_bytes: int | None = None) -> str:
        """The last `max_bytes` (default `tail_bytes`) of the process's merged output."""
        entry = self._entry(process_id)
        limit = self.tail_bytes if max_bytes is None else max_bytes
        data, cut = await anyio.to_thread.run_sync(_read_tail, entry.log_path, limit)
        text = data.decode("utf-8", "replace")
        if cut:
            text = f"[... earlier output omitted; last {len(data)} bytes follow]\n{text}"
        return text

    async def stop(self, process_id: str) -> BackgroundInfo:
        """Stop a process group: SIGTERM, up to `stop_grace` seconds, then SIGKILL.

        Stopping a process that has already exited still stops what it left in its group.
        """
        entry = self._entry(process_id)
        entry.stopped = entry.stopped or entry.process.is_running()
        await stop_processes([entry.process], self.stop_grace)
        await entry.process.aclose()
        return entry.info()

    async def stop_all(self) -> None:
        """Stop every owned process group at once (bounded by about `stop_grace` + 5 s)."""
        entries = list(self._entries.values())
        with anyio.CancelScope(shield=True):
            for entry in entries:
                entry.stopped = entry.stopped or entry.process.is_running()
            await stop_processes([entry.process for entry in entries], self.stop_grace)
            for entry in entries:
                await entry.process.aclose()

    async def lifespan(self) -> AsyncIterator[None]:
        """The `provide_lifespan` generator: own processes while the scope is open.

        On exit (normal, error or cancellation) every process group is stopped under a
        shielded cancel scope, the registry is emptied and the log directory removed.
        """
        if self._active:
            raise RuntimeError("BackgroundProcesses.lifespan() is already active")
        self._directory = await anyio.to_thread.run_sync(
            lambda: tempfile.mkdtemp(prefix="hookline-bg-")
        )
        self._active = True
        try:
            yield
        finally:
            self._active = False
            with anyio.CancelScope(shield=True):
                try:
                    await self.stop_all()
                finally:
                    self._entries.clear()
                    directory, self._directory = self._directory, None
                    await anyio.to_thread.run_sync(
                        lambda: shutil.rmtree(directory, ignore_errors=True)
                    )

    def _entry(self, process_id: str) -> _Entry:
        if not isinstance(process_id, str):
            raise HooklineError(
                ErrorKind.invalid_input,
                f"a background process id is a string like 'bg1', got {process_id!r}",
            )
        entry = self._entries.get(process_id)
        if entry is None:
            known = ", ".join(self._entries) or "none"
            raise HooklineError(
                ErrorKind.not_found,
                f"no background process {process_id!r} in this scope (known: {known})",
            )
        return entry


def _read_tail(path: str, limit: int) -> tuple[bytes, bool]:
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            start = max(size - max(limit, 0), 0)
            handle.seek(start)
            return handle.read(), start > 0
    except FileNotFoundError:
        return b"", False
