"""Background shell processes owned by the `running()` scope, and everything they start.

`BackgroundProcesses` starts host processes that outlive the tool call that started them
(servers, watchers, long builds) and guarantees they do not outlive the scope: its
`lifespan()` is what the builtin plugin returns from `provide_lifespan`, and when the scope
exits - normally, by an error or by cancellation - every owned process group gets SIGTERM,
up to 3 seconds to exit, then SIGKILL. Nothing started through the registry is left running.

Each process leads its own process group and session (POSIX), so the processes it starts
are stopped with it. Descendants that leave on purpose (`setsid`, a double fork, a
daemonising script) are found too, on Linux:

- while the lifespan is entered the hookline process is a child subreaper
  (`PR_SET_CHILD_SUBREAPER`), so such orphans are re-parented to it, not to init;
- every process the registry (or a `LocalEnvironment` using it) starts carries the scope's
  owner token in its environment (`HOOKLINE_PROCESS_OWNER`), inherited by descendants;
- on exit, every descendant of hookline that is ours (carries the token, belongs to a
  session we started, or was adopted earlier) is ended the same way and reaped.

With `records=<dir>` (the builtin plugin uses `<home>/processes`) the lifespan also keeps
a record file of what it owns, so that a later start ends what an instance killed with
SIGKILL left behind; see `records`. Other systems have no /proc: there only the
process groups are stopped, and Windows stops the direct shell process only.

Output: stdout and stderr of a background process go, merged, to a log file in a private
temporary directory under `private_temp_root()` (so the process never blocks on a full
pipe, no task has to read it, and no sandboxed command of another session reads it);
`output(id)` returns its tail. Each sweep frees the start of a log longer than twice
`log_keep_bytes`, so a process that talks all day keeps a bounded log (see `logfile`).
The directory is removed when the scope exits (or, after SIGKILL, by a later
`PrivateFolder`).
"""

from __future__ import annotations

import itertools
import logging
import os
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from hookline.kernel.errors import ErrorKind, HooklineError

from .logfile import read_tail, trim
from .processes import STOP_GRACE, LocalProcess, open_local_process, stop_processes
from .proctable import (
    HAS_PROC,
    ProcInfo,
    acquire_subreaper,
    descendants,
    end_exact,
    environ_has,
    process_table,
    read_proc,
    reap,
    release_subreaper,
)
from .records import OWNER_ENV, ProcessRecord, open_record
from .sandbox import PrivateFolder

if TYPE_CHECKING:
    from .confined import Spawner

__all__ = ["BackgroundInfo", "BackgroundProcesses"]

logger = logging.getLogger(__name__)

DEFAULT_TAIL_BYTES = 16_000
LOG_KEEP_BYTES = 1 << 20
"""Bytes of its latest output a log keeps on disk while its process runs (`logfile.trim`)."""
KEEP_FINISHED = 32
"""Finished processes a session keeps (status and log); starting another forgets the oldest."""

_SESSIONS_PRUNED_AT = 1024
"""Known sessions beyond which `track()` forgets the finished ones (without sweeps)."""

# Descendant processes with whether each carries the owner token (a module-level alias:
# inside BackgroundProcesses, `list` names its method).
_Scanned = list[tuple[ProcInfo, bool]]


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
    log_path: str
    """The file its merged output goes to (removed with the scope)."""

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
    owner: str = ""
    """The session that started it: only its tool calls see it."""
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
            log_path=self.log_path,
        )


class BackgroundProcesses:
    """A registry of background shell processes, alive only inside the lifespan.

    `start()` works only while `lifespan()` is entered (inside `framework.running()`
    with the builtin plugin); ids (`bg1`, `bg2`, ...) stay unique for the registry's life.
    While it is entered the registry also owns what `track()` is given (the processes of a
    `LocalEnvironment` created with `processes=` this registry) and their descendants.
    """

    def __init__(
        self, *, stop_grace: float = STOP_GRACE, tail_bytes: int = DEFAULT_TAIL_BYTES,
        log_keep_bytes: int = LOG_KEEP_BYTES,
    ) -> None:
        self.stop_grace = stop_grace
        self.tail_bytes = tail_bytes
        self.log_keep_bytes = max(log_keep_bytes, tail_bytes)
        self._entries: dict[str, _Entry] = {}
        self._ids = itertools.count(1)
        self._directory: PrivateFolder | None = None
        self._active = False
        self._owner = ""
        self._tracked: dict[int, tuple[LocalProcess, int]] = {}
        """Processes started in the scope and not closed yet: pid -> (process, start time)."""
        self._sessions: set[int] = set()
        """Session ids that are ours: those of tracked processes and of adopted leaders."""
        self._adopted: dict[int, int] = {}
        """Escaped descendants seen by a sweep (pid -> start time)."""
        self._record: ProcessRecord | None = None
        self._record_lock = anyio.Lock()

    @property
    def active(self) -> bool:
        """True while the lifespan is entered and new processes may start."""
        return self._active

    def owner_env(self) -> dict[str, str]:
        """The variables that mark a process as owned by this scope (empty outside it)."""
        return {OWNER_ENV: self._owner} if self._active else {}

    async def track(self, process: LocalProcess) -> None:
        """Own a process started in the scope: its session, and its descendants even after
        they leave it, are ended when the scope exits. Outside the scope: nothing."""
        if not self._active:
            return
        # Known before the first await, so a sweep never takes it for an orphan to reap.
        self._prune_tracked()
        self._tracked[process.pid] = (process, 0)
        self._sessions.add(process.pid)
        info = await anyio.to_thread.run_sync(read_proc, process.pid)
        if info is not None and process.pid in self._tracked:
            self._tracked[process.pid] = (process, info.start)
        if len(self._sessions) > _SESSIONS_PRUNED_AT:
            table = await anyio.to_thread.run_sync(process_table)
            self._prune_sessions({info.session for info in table})
        await self._save_record()

    def _prune_tracked(self) -> None:
        self._tracked = {pid: entry for pid, entry in self._tracked.items()
                         if not entry[0].closed}

    def _prune_sessions(self, live: set[int]) -> None:
        """Forget sessions with no process left (their ids may then be recycled)."""
        self._sessions = {sid for sid in self._sessions if sid in live or sid in self._tracked}

    async def start(
        self,
        command: str,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        spawner: Spawner | None = None,
        owner: str = "",
    ) -> str:
        """Start `command` through the shell as a process group leader; return its id.

        `cwd` is used as given (callers such as LocalEnvironment check it first); `env` is
        added to `environ` (default: the current environment); `spawner` is the sandbox's,
        as for `open_local_process`. Stdin is empty; stdout and stderr go to the process's
        log. `owner` (a session) is the only one `get`, `output` and `stop` show it to when
        they name one.
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
        await self._forget_finished(owner)
        process_id = f"bg{next(self._ids)}"
        log_path = os.path.join(self._directory.path, f"{process_id}.log")
        log = await anyio.to_thread.run_sync(open, log_path, "wb")
        try:
            process = await open_local_process(
                command,
                cwd=cwd,
                env={**(env or {}), **self.owner_env()},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                environ=environ,
                spawner=spawner,
            )
        finally:
            log.close()  # the child holds its own copy of the descriptor
        await self.track(process)
        entry = _Entry(
            id=process_id,
            command=command,
            cwd=os.fspath(cwd) if cwd is not None else None,
            process=process,
            log_path=log_path,
            started_at=time.time(),
            owner=owner,
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

    async def _forget_finished(self, owner: str) -> None:
        """Keep the last `KEEP_FINISHED - 1` finished processes of `owner` (with the one
        about to start, `KEEP_FINISHED`), so a long-lived scope stays bounded. What a
        forgotten process left running is still ended with the scope (its token)."""
        finished = [entry for entry in self._entries.values()
                    if entry.owner == owner and not entry.process.is_running()]
        for entry in finished[: max(len(finished) - KEEP_FINISHED + 1, 0)]:
            del self._entries[entry.id]
            await entry.process.aclose()
            await anyio.to_thread.run_sync(partial(Path(entry.log_path).unlink, missing_ok=True))

    def list(self) -> list[BackgroundInfo]:
        """Every process started in the current scope, running or not, oldest first."""
        return [entry.info() for entry in self._entries.values()]

    def get(self, process_id: str, owner: str | None = None) -> BackgroundInfo:
        return self._entry(process_id, owner).info()

    async def output(self, process_id: str, max_bytes: int | None = None,
                     owner: str | None = None) -> str:
        """The last `max_bytes` (default `tail_bytes`) of the process's merged output."""
        entry = self._entry(process_id, owner)
        limit = self.tail_bytes if max_bytes is None else max_bytes
        data, cut = await anyio.to_thread.run_sync(read_tail, entry.log_path, limit)
        text = data.decode("utf-8", "replace")
        if cut:
            text = f"[... earlier output omitted; last {len(data)} bytes follow]\n{text}"
        return text

    async def stop(self, process_id: str, owner: str | None = None) -> BackgroundInfo:
        """Stop a process group: SIGTERM, up to `stop_grace` seconds, then SIGKILL.

        Stopping a process that has already exited still stops what it left in its group.
        """
        entry = self._entry(process_id, owner)
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

    async def lifespan(
        self,
        records: str | os.PathLike[str] | None = None,
        sweep: Callable[[], Awaitable[Any]] | None = None,
        sweep_seconds: float | None = None,
    ) -> AsyncIterator[None]:
        """The `provide_lifespan` generator: own processes while the scope is open.

        On exit (normal, error or cancellation) every process group is stopped, then every
        escaped descendant (Linux), under a shielded cancel scope; the registry is emptied
        and the log directory removed. `records` is the directory of process records:
        leftovers of dead instances are ended first, and this scope keeps its own record
        there. With `sweep_seconds`, every so many seconds adopted orphans are reaped, long
        logs trimmed (`log_keep_bytes`) and `sweep()` is awaited (the builtin plugin expires
        idle environments with it).
        """
        if self._active:
            raise RuntimeError("BackgroundProcesses.lifespan() is already active")
        subreaper = await anyio.to_thread.run_sync(acquire_subreaper)
        self._owner = uuid.uuid4().hex
        self._record_lock = anyio.Lock()
        try:
            self._directory = await anyio.to_thread.run_sync(PrivateFolder, "hookline-bg-")
            if records is not None:
                self._record = await anyio.to_thread.run_sync(
                    open_record, Path(records), self._owner, self.stop_grace
                )
            self._active = True
            if sweep_seconds is None:
                yield
            else:
                failure: BaseException | None = None
                async with anyio.create_task_group() as group:
                    group.start_soon(self._sweep_loop, sweep, sweep_seconds)
                    try:
                        yield
                    except BaseException as exc:  # re-raised as is, not in an exception group
                        failure = exc
                    finally:
                        group.cancel_scope.cancel()
                if failure is not None:
                    raise failure
        finally:
            self._active = False
            with anyio.CancelScope(shield=True):
                try:
                    await self.stop_all()
                    await self._end_escaped()
                finally:
                    self._entries.clear()
                    self._tracked.clear()
                    self._sessions.clear()
                    self._adopted.clear()
                    directory, self._directory = self._directory, None
                    record, self._record = self._record, None
                    if directory is not None:
                        await anyio.to_thread.run_sync(directory.remove)
                    if record is not None:
                        await anyio.to_thread.run_sync(record.remove)
                    if subreaper:
                        await anyio.to_thread.run_sync(release_subreaper)

    # -- descendants that left their session (Linux) ---------------------------------------

    def _scan(self) -> _Scanned:
        """Our descendants, each with whether it carries the owner token (worker thread)."""
        marker = f"{OWNER_ENV}={self._owner}"
        return [(info, not info.zombie and environ_has(info.pid, marker))
                for info in descendants(process_table(), os.getpid())]

    def _ours(self, info: ProcInfo, marked: bool) -> bool:
        return marked or info.session in self._sessions or info.pid in self._adopted

    async def _end_escaped(self) -> None:
        """End and reap every descendant that is ours, in rounds until none is left."""
        if not HAS_PROC:
            return
        for _ in range(3):
            found = [info for info, marked in await anyio.to_thread.run_sync(self._scan)
                     if self._ours(info, marked)]
            alive = [(info.pid, info.start) for info in found if not info.zombie]
            if alive:
                ended = await anyio.to_thread.run_sync(end_exact, alive, self.stop_grace)
                if ended:
                    logger.info("processes.escaped_ended count=%d pids=%s", len(ended),
                                " ".join(map(str, ended)))
            # Tracked processes are reaped by their owners (anyio); the rest is ours.
            orphans = [info.pid for info in found if info.pid not in self._tracked]
            await anyio.to_thread.run_sync(reap, orphans)
            if not alive:
                return

    async def _sweep_loop(self, sweep: Callable[[], Awaitable[Any]] | None,
                          every: float) -> None:
        while True:
            await anyio.sleep(every)
            try:
                if sweep is not None:
                    await sweep()
                await self._sweep_processes()
                await anyio.to_thread.run_sync(self._trim_logs)
            except Exception:  # a sweep must never end the scope
                logger.exception("processes.sweep_failed")

    async def _sweep_processes(self) -> None:
        """Adopt escaped descendants re-parented to us, reap those that exited, forget
        sessions and pids that are gone, and keep the record up to date."""
        if not HAS_PROC:
            return
        found = await anyio.to_thread.run_sync(self._scan)
        me = os.getpid()
        self._prune_tracked()
        adopted = dict(self._adopted)
        zombies = []
        for info, marked in found:
            if info.pid in self._tracked or not self._ours(info, marked):
                continue
            if info.zombie:
                zombies.append(info.pid)
            elif info.ppid == me:
                self._adopted[info.pid] = info.start
                if info.session == info.pid:  # a leader of its own session (setsid)
                    self._sessions.add(info.session)
        present = {info.pid for info, _ in found if not info.zombie}
        self._adopted = {pid: start for pid, start in self._adopted.items() if pid in present}
        self._prune_sessions({info.session for info, _ in found})
        if zombies:
            await anyio.to_thread.run_sync(reap, zombies)
        if self._adopted != adopted:
            await self._save_record()

    def _trim_logs(self) -> None:
        for entry in list(self._entries.values()):
            trim(entry.log_path, self.log_keep_bytes)

    async def _save_record(self) -> None:
        record = self._record
        if record is None:
            return
        async with self._record_lock:
            sessions = [(pid, start) for pid, (process, start) in self._tracked.items()
                        if start and not process.closed]
            adopted = list(self._adopted.items())
            try:
                await anyio.to_thread.run_sync(record.write, sessions, adopted)
            except OSError as exc:  # the processes run anyway; only the record is behind
                logger.warning("processes.record_failed path=%s error=%s: %s", record.path,
                               type(exc).__name__, exc)

    def _entry(self, process_id: str, owner: str | None) -> _Entry:
        """The process `process_id`, if `owner` started it (None: any owner): another
        session's processes, their output and their ids are not its business."""
        if not isinstance(process_id, str):
            raise HooklineError(
                ErrorKind.invalid_input,
                f"a background process id is a string like 'bg1', got {process_id!r}",
            )
        entries = {key: entry for key, entry in self._entries.items()
                   if owner is None or entry.owner == owner}
        entry = entries.get(process_id)
        if entry is None:
            known = ", ".join(entries) or "none"
            where = "this scope" if owner is None else "this session"
            raise HooklineError(
                ErrorKind.not_found,
                f"no background process {process_id!r} in {where} (known: {known})",
            )
        return entry
