"""The builtin execution environment: processes and files on the host, inside a workspace.

`LocalEnvironment` implements `hookline.kernel.environment.Environment` for the machine the
framework runs on:

- every path (absolute or relative, after resolving symlinks and `..`) must stay inside the
  workspace; anything else is refused with `HooklineError(invalid_input)`;
- file I/O runs in worker threads, never on the event loop thread;
- each spawned process leads its own process group (POSIX), so stopping it also stops
  everything it started (unless a descendant deliberately left the group with `setsid`);
- `run()` runs a command to completion with a timeout and output limits.

Files: only regular files are opened. Every open uses `O_NONBLOCK` and `O_NOFOLLOW` (the
path is already resolved) and checks the opened descriptor with `fstat`, so a FIFO, a
device or a socket is refused with a clear error instead of blocking a worker thread, and
nothing can be swapped in between the check and the open. A file with more than one hard
link is not read (it may be a link to a file outside the workspace). `read_lines()` reads a
slice of lines in bounded memory and time, whatever the file's size.

The workspace check guards against mistakes, not against a hostile process: a command run
through `spawn()` or `run()` can still touch any file the user can. Code mode (`run_code`) is
not supported by this environment.

Windows: there are no process groups here, so stopping a process terminates (or kills) the
direct process only; its descendants may survive.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import os
import re
import signal as signals
import stat
import subprocess
import tempfile
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, BinaryIO

import anyio
import anyio.abc

from hookline.kernel.environment import Environment, StrPath
from hookline.kernel.streaming import ErrorKind, HooklineError

from .proctable import process_table

if TYPE_CHECKING:
    from .lifespan import BackgroundProcesses

__all__ = [
    "CommandResult",
    "FileTooLarge",
    "LineSlice",
    "LocalEnvironment",
    "LocalProcess",
    "open_local_process",
    "open_regular_file",
    "read_line_slice",
    "run_command",
    "stop_processes",
]

POSIX = os.name == "posix"

STOP_GRACE = 3.0
"""Seconds a stopped process group gets between SIGTERM and SIGKILL."""

_KILL_WAIT = 5.0
"""Seconds to wait for a killed process group to disappear before giving up."""

_POLL_INTERVAL = 0.05
_READ_CHUNK = 65536


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
            while chunk := await self.read(_READ_CHUNK):
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
                await _wait_gone([self], _KILL_WAIT)
            with anyio.move_on_after(_KILL_WAIT):
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
) -> LocalProcess:
    """Start a host process as the leader of a new session and process group (POSIX).

    A string runs through the shell, a sequence is an argv; `env` is added to the current
    environment. No workspace check happens here: `LocalEnvironment.spawn` does that.
    """
    if isinstance(command, str):
        if not command.strip():
            raise HooklineError(ErrorKind.invalid_input, "the command is empty")
        argv: str | list[str] = command
    else:
        argv = [os.fspath(part) for part in command]
        if not argv:
            raise HooklineError(ErrorKind.invalid_input, "the command has no arguments")
    environment = {**os.environ, **env} if env else None
    process = await anyio.open_process(
        argv,
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        cwd=os.fspath(cwd) if cwd is not None else None,
        env=environment,
        start_new_session=POSIX,
    )
    return LocalProcess(process)


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
        await _wait_gone(remaining, _KILL_WAIT)


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


# -- running a command to completion ---------------------------------------------------


@dataclass(frozen=True)
class CommandResult:
    """The outcome of `run()`: exit status, decoded output and what was cut short."""

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
    while chunk := await reader.read(_READ_CHUNK):
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
            with anyio.move_on_after(_KILL_WAIT):
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
            with anyio.move_on_after(_KILL_WAIT):
                await process.wait()


# -- regular files ---------------------------------------------------------------------

_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)  # opening a FIFO or a device must never wait
    | getattr(os, "O_NOFOLLOW", 0)  # the path is resolved: a link now is a swap, refuse it
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)

_SLICE_CHUNK = 65536

_COUNT_AHEAD = 8 * 1024 * 1024
"""Bytes `read_line_slice` reads past a slice to count the file's lines; a longer file is
reported as having "at least" the lines counted, so a slice never costs the whole file."""

_ESCAPED = re.compile("[\udc80-\udcff]")


class FileTooLarge(HooklineError):
    """A whole-file read was refused because the file is larger than the caller allows."""

    def __init__(self, name: str, size: int, limit: int) -> None:
        super().__init__(
            ErrorKind.invalid_input,
            f"cannot read {name!r}: it is {size:,} bytes, more than the {limit:,} bytes "
            f"this read allows",
            {"path": name, "size": size, "max_bytes": limit},
        )
        self.size = size
        self.limit = limit


def _file_type(mode: int) -> str:
    """What a file that is not a regular file is, in words."""
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    return "a special file"


def _check_regular(mode: int, path: str, name: str, action: str) -> None:
    # A resolved path that is a link now was swapped after resolving: an open with
    # O_NOFOLLOW refuses it, and a write's rename replaces the link, not what it points to.
    if stat.S_ISREG(mode) or stat.S_ISLNK(mode):
        return
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    what = _file_type(mode)
    raise HooklineError(
        ErrorKind.invalid_input,
        f"cannot {action} {name!r}: it is {what}, not a regular file; the file tools only "
        f"read and write regular files",
        {"path": name, "type": what},
    )


def open_regular_file(
    path: str, *, name: str | None = None, action: str = "read"
) -> tuple[BinaryIO, os.stat_result]:
    """Open `path` for reading, only if it is a regular file; return it and its `fstat`.

    Never blocks: the open uses `O_NONBLOCK`, so a FIFO with no writer or a device cannot
    hold the calling thread, and the type is checked with `fstat` on the opened descriptor,
    so a file swapped in after a check cannot slip through. `O_NOFOLLOW` refuses a final
    symbolic link: pass a path that is already resolved. A FIFO, device or socket is a
    `HooklineError(invalid_input)` naming `name` (default `path`) and what it is; a
    directory is `IsADirectoryError`, other failures the usual `OSError`.
    """
    shown = path if name is None else name
    # A cheap look first, so that a FIFO or a device is normally not even opened (opening
    # some devices has side effects); the fstat below is what makes the check race-free.
    with contextlib.suppress(OSError):  # the open reports a missing file properly
        _check_regular(os.lstat(path).st_mode, path, shown, action)
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise HooklineError(
                ErrorKind.temporary,
                f"cannot {action} {shown!r}: it was replaced by a symbolic link while being "
                f"opened; try again",
                {"path": shown},
            ) from exc
        raise
    try:
        info = os.fstat(fd)
        _check_regular(info.st_mode, path, shown, action)
        if POSIX:
            os.set_blocking(fd, True)  # no effect on regular files; plain reads from here on
        return os.fdopen(fd, "rb"), info
    except BaseException:
        os.close(fd)
        raise


@dataclass(frozen=True)
class LineSlice:
    """Lines `first` to `last` of a file, as `read_line_slice` found them."""

    text: str
    """The lines, decoded as UTF-8 with bytes that are not valid UTF-8 shown as U+FFFD."""
    first: int
    """Number of the first line asked for (from 1)."""
    last: int
    """Number of the last line in `text` (partly, when `truncated`); `first - 1` if none."""
    lines: int
    """Lines in the whole file when `complete`, else the lines counted (a lower bound)."""
    complete: bool
    """The end of the file was reached, so `lines` is its exact line count."""
    truncated: bool
    """`text` was cut at the character cap."""
    replaced: int
    """Bytes that were not valid UTF-8 and show as U+FFFD in `text`."""

    @property
    def empty(self) -> bool:
        """The file has no content at all."""
        return self.complete and self.lines == 0


class _CountingReader:
    """Reads fixed chunks and counts every newline it hands out, and the last byte."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.newlines = 0
        self.tail = b""
        self.ended = False

    def read(self) -> bytes:
        data = self.stream.read(_SLICE_CHUNK) or b""
        if data:
            self.newlines += data.count(b"\n")
            self.tail = data[-1:]
        else:
            self.ended = True
        return data

    def lines(self) -> int:
        return self.newlines + (1 if self.tail not in (b"", b"\n") else 0)


def _after_newline(data: bytes, count: int) -> int:
    """The index just after the `count`-th newline of `data` (which has that many)."""
    position = -1
    for _ in range(count):
        position = data.index(b"\n", position + 1)
    return position + 1


def read_line_slice(
    stream: IO[bytes], offset: int = 1, limit: int | None = None, max_chars: int = 100_000
) -> LineSlice:
    """Read `limit` lines (all when None) from line `offset` of a binary stream.

    Lines end with "\n". The stream is read in chunks and reading stops at the end of the
    slice or at `max_chars` characters, then counts lines for at most a few more megabytes:
    memory stays around `max_chars` and time depends on where the slice is, not on the
    size of the file (skipping to a far `offset` reads what it skips, without keeping it).
    Bytes that are not valid UTF-8 become U+FFFD and are counted in `replaced`.
    """
    reader = _CountingReader(stream)
    skip, data = offset - 1, b""
    while skip and not reader.ended:
        before = reader.newlines
        data = reader.read()
        found = reader.newlines - before
        if found < skip:
            skip, data = skip - found, b""
        else:
            data, skip = data[_after_newline(data, skip):], 0
    decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")
    pieces: list[str] = []
    chars, wanted, truncated = 0, limit, False
    while not skip:
        data = data or reader.read()
        done = not data
        if wanted is not None and data:
            found = data.count(b"\n")
            if found >= wanted:
                data, done = data[: _after_newline(data, wanted)], True
            else:
                wanted -= found
        text = decoder.decode(data, final=not data)
        if chars + len(text) > max_chars:
            text, truncated, done = text[: max_chars - chars], True, True
        pieces.append(text)
        chars += len(text)
        data = b""
        if done:
            break
    budget = _COUNT_AHEAD
    while budget > 0 and not reader.ended:
        budget -= len(reader.read())
    text, replaced = _ESCAPED.subn("\ufffd", "".join(pieces))
    last = offset - 1 + text.count("\n") + (1 if text and not text.endswith("\n") else 0)
    return LineSlice(
        text=text,
        first=offset,
        last=last,
        lines=reader.lines(),
        complete=reader.ended,
        truncated=truncated,
        replaced=replaced,
    )


# -- the environment -------------------------------------------------------------------


class LocalEnvironment(Environment):
    """Processes and files on the host, confined to a workspace directory.

    `processes`, when given, is the lifespan's `BackgroundProcesses` registry used by
    `start_background`, so background shells live exactly as long as the `running()`
    scope. Processes started with `spawn()` belong to this environment: `close()` stops
    the ones still running; with `processes`, the scope also ends their descendants that
    left the process group (see `lifespan`).
    """

    workspace: str

    def __init__(
        self,
        workspace: StrPath,
        *,
        processes: BackgroundProcesses | None = None,
        python: str | None = None,
    ) -> None:
        root = os.path.realpath(os.fspath(workspace))
        super().__init__(root, python=python)
        self.processes = processes
        self._owned: set[LocalProcess] = set()

    # -- paths -------------------------------------------------------------------------

    def resolve_path(self, path: StrPath) -> str:
        """The real absolute path of `path`; refused when it leaves the workspace.

        Relative paths are joined to the workspace; symlinks and `..` are resolved before
        the check, so a link pointing outside is refused too. The file need not exist.
        """
        try:
            text = os.fspath(path)
        except TypeError:
            raise HooklineError(
                ErrorKind.invalid_input,
                f"path must be a string, got {type(path).__name__}",
            ) from None
        if not isinstance(text, str):
            raise HooklineError(ErrorKind.invalid_input, f"path must be text, got {text!r}")
        if not text:
            raise HooklineError(ErrorKind.invalid_input, "path is empty")
        if "\0" in text:
            raise HooklineError(ErrorKind.invalid_input, f"path {text!r} contains a NUL byte")
        joined = text if os.path.isabs(text) else os.path.join(self.workspace, text)
        resolved = os.path.realpath(joined)
        if not _inside(resolved, self.workspace):
            raise HooklineError(
                ErrorKind.invalid_input,
                # Relative names only: the message reaches the model and HTTP clients, which
                # need not learn where the workspace is on this machine.
                f"path {text!r} resolves to {os.path.relpath(resolved, self.workspace)!r}, "
                f"outside the workspace; only paths inside the workspace are allowed",
                {"path": text, "resolved": os.path.relpath(resolved, self.workspace)},
            )
        return resolved

    # -- files -------------------------------------------------------------------------

    async def read_bytes(self, path: StrPath, *, max_bytes: int | None = None) -> bytes:
        """The whole file; with `max_bytes`, a larger file is refused with `FileTooLarge`."""
        return await anyio.to_thread.run_sync(self._read_bytes, path, max_bytes)

    async def read_text(self, path: StrPath, *, max_bytes: int | None = None) -> str:
        """Read UTF-8 text exactly as stored (line endings are not translated)."""
        data = await self.read_bytes(path, max_bytes=max_bytes)
        return data.decode("utf-8")

    async def read_lines(
        self, path: StrPath, offset: int = 1, limit: int | None = None,
        max_chars: int = 100_000,
    ) -> LineSlice:
        """`limit` lines from line `offset`, at most `max_chars` characters, in bounded
        memory and time; see `read_line_slice`."""
        return await anyio.to_thread.run_sync(self._read_lines, path, offset, limit, max_chars)

    async def write_text(self, path: StrPath, content: str) -> None:
        """Write UTF-8 text exactly as given, creating missing parent directories."""
        await anyio.to_thread.run_sync(self._write_bytes, path, content.encode("utf-8"))

    def _name(self, target: str) -> str:
        """How errors name a resolved path: relative to the workspace."""
        return os.path.relpath(target, self.workspace)

    def _open(self, path: StrPath) -> tuple[BinaryIO, os.stat_result, str]:
        """Open a regular file of the workspace for reading; refuse a hard-linked one.

        A second hard link may be a name for a file outside the workspace, and nothing in
        the file says where its other names are, so such a file is not read at all.
        """
        target = self.resolve_path(path)
        name = self._name(target)
        handle, info = open_regular_file(target, name=name)
        if info.st_nlink > 1:
            handle.close()
            raise HooklineError(
                ErrorKind.invalid_input,
                f"cannot read {name!r}: it has {info.st_nlink} hard links, and a hard link "
                f"may be a name for a file outside the workspace, so the file tools do not "
                f"read it; if it belongs to the workspace (a package manager's hard-linked "
                f"install, say), read it with the shell tool",
                {"path": name, "links": info.st_nlink},
            )
        return handle, info, name

    def _read_bytes(self, path: StrPath, max_bytes: int | None = None) -> bytes:
        handle, info, name = self._open(path)
        with handle:
            if max_bytes is None:
                return handle.read()
            if info.st_size > max_bytes:
                raise FileTooLarge(name, info.st_size, max_bytes)
            data = handle.read(max_bytes + 1)  # the file may have grown since the fstat
            if len(data) > max_bytes:
                raise FileTooLarge(name, os.fstat(handle.fileno()).st_size, max_bytes)
            return data

    def _read_lines(
        self, path: StrPath, offset: int, limit: int | None, max_chars: int
    ) -> LineSlice:
        handle, _info, _name = self._open(path)
        with handle:
            return read_line_slice(handle, offset, limit, max_chars)

    def _write_bytes(self, path: StrPath, data: bytes) -> None:
        target = self.resolve_path(path)
        try:
            existing: os.stat_result | None = os.lstat(target)
        except FileNotFoundError:
            existing = None
        if existing is not None:
            # Replacing a FIFO or a device by a file is never what was meant.
            _check_regular(existing.st_mode, target, self._name(target), "write")
        parent = os.path.dirname(target)
        try:
            os.makedirs(parent, exist_ok=True)
        except FileExistsError as exc:  # a file sits where a parent directory should be
            raise NotADirectoryError(
                errno.ENOTDIR, "a parent path is a file, not a directory", parent
            ) from exc
        # Write a sibling file and rename it over the target: a failure part way leaves
        # the old file intact instead of truncated. The rename replaces this name only, so
        # other hard links to the old file (inside the workspace or not) keep its content.
        handle, temporary = tempfile.mkstemp(dir=parent, prefix=".hookline-", suffix=".tmp")
        try:
            with os.fdopen(handle, "wb") as stream:
                stream.write(data)
                stream.flush()
                os.fsync(stream.fileno())
            # mkstemp makes 0600; keep the old file's mode, a new file is world-readable.
            os.chmod(temporary, stat.S_IMODE(existing.st_mode) if existing else 0o644)
            os.replace(temporary, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise

    # -- processes ---------------------------------------------------------------------

    async def spawn(
        self,
        command: str | Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> LocalProcess:
        """Start a process in the workspace (or `cwd`, which must be inside it)."""
        directory = self.resolve_path(cwd) if cwd is not None else self.workspace
        owner = self.processes.owner_env() if self.processes is not None else {}
        process = await open_local_process(command, cwd=directory, env={**(env or {}), **owner})
        self._owned = {p for p in self._owned if not p.closed}
        self._owned.add(process)
        if self.processes is not None:  # the scope then ends what escapes from it too
            await self.processes.track(process)
        return process

    async def run(
        self,
        command: str | Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = 60,
        max_output: int = 64_000,
        stdin: bytes | None = None,
    ) -> CommandResult:
        """Run a command to completion; see `run_command` for timeouts and limits."""
        return await run_command(
            self, command, cwd=cwd, env=env, timeout=timeout, max_output=max_output,
            stdin=stdin,
        )

    async def start_background(
        self,
        command: str,
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> str:
        """Start a background shell owned by the lifespan registry; returns its id."""
        if self.processes is None:
            raise HooklineError(
                ErrorKind.config,
                "background processes need a BackgroundProcesses registry: create the "
                "LocalEnvironment with processes=... (the builtin lifespan's registry)",
            )
        directory = self.resolve_path(cwd) if cwd is not None else self.workspace
        return await self.processes.start(command, cwd=directory, env=env)

    async def run_code(
        self,
        code: str,
        *,
        tools: Sequence[str],
        call_tool: Callable[[str, dict[str, Any]], Awaitable[Any]],
        write: Callable[[str], Any],
    ) -> None:
        """Not supported: the local environment does not run model-written code.

        Running untrusted code in the framework's own interpreter would give it the whole
        process; code mode needs an environment that provides isolation.
        """
        raise HooklineError(
            ErrorKind.config,
            "code mode is not supported by the local environment: it does not run "
            "model-written Python in the host process. Turn code mode off, or provide an "
            "environment that implements run_code (a higher-priority provide_environment).",
        )

    async def close(self) -> None:
        """Stop every process started through `spawn` that is still running."""
        owned, self._owned = list(self._owned), set()
        running = [process for process in owned if await process.alive()]
        await stop_processes(running)
        for process in owned:
            await process.aclose()


def _inside(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:  # different drives on Windows
        return False
