"""Starting processes inside a Landlock sandbox without paying for a fork.

A process inherits the Landlock domain of the thread that starts it. So each ruleset gets
one thread of its own (`Spawner`) that confines itself once and then starts every
sandboxed process: `subprocess.Popen` there can `vfork` (nothing runs in the child before
exec), where a `preexec_fn` would force a full fork, about 8x slower for a large process.
The thread never runs anything else, so hookline itself is never confined.

`ConfinedProcess` gives such a process the face of `anyio.abc.Process` (what `LocalProcess`
wraps): its pipes are read and written without blocking through `anyio.wait_readable`
and `wait_writable`, and its exit is awaited on a pidfd, so no worker thread waits on it.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures.thread import BrokenThreadPool
from typing import IO, Any

import anyio
import anyio.abc
import anyio.to_thread

__all__ = ["ConfinedProcess", "Spawner"]


class Spawner:
    """One thread confined by `confine` (run there first), starting processes on request."""

    def __init__(self, confine: Callable[[], None]) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hookline-sandbox",
                                            initializer=confine)
        try:  # the thread starts and confines itself now: a refusal surfaces here, once
            self._executor.submit(int).result()
        except BrokenThreadPool as exc:
            self._executor.shutdown(wait=False)
            raise OSError(f"the sandbox thread could not confine itself: {exc}") from None

    def popen(self, argv: str | Sequence[str], **options: Any) -> subprocess.Popen[bytes]:
        """`subprocess.Popen` on the confined thread (call from a worker thread)."""
        def start() -> subprocess.Popen[bytes]:
            return subprocess.Popen(argv, shell=isinstance(argv, str), **options)

        return self._executor.submit(start).result()

    def close(self) -> None:
        self._executor.shutdown(wait=False)


async def open_confined(spawner: Spawner, argv: str | Sequence[str], *,
                        stdin: int | IO[Any] | None, stdout: int | IO[Any] | None,
                        stderr: int | IO[Any] | None, cwd: str | None,
                        env: Mapping[str, str] | None, start_new_session: bool) -> ConfinedProcess:
    """Start `argv` on the spawner's thread; the same options as `anyio.open_process`."""
    popen = await anyio.to_thread.run_sync(lambda: spawner.popen(
        argv, stdin=stdin, stdout=stdout, stderr=stderr, cwd=cwd, env=env,
        start_new_session=start_new_session))
    return ConfinedProcess(popen)


class _Pipe(anyio.abc.ByteStream):
    """One end of a child's pipe, used without blocking (only one direction works)."""

    def __init__(self, file: IO[bytes]) -> None:
        self._file: IO[bytes] | None = file
        self.fd = file.fileno()
        os.set_blocking(self.fd, False)

    async def receive(self, max_bytes: int = 65536) -> bytes:
        while True:
            if self._file is None:
                raise anyio.ClosedResourceError
            try:
                data = os.read(self.fd, max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(self.fd)
                continue
            if not data:
                raise anyio.EndOfStream
            return data

    async def send(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            if self._file is None:
                raise anyio.ClosedResourceError
            try:
                view = view[os.write(self.fd, view):]
            except BlockingIOError:
                await anyio.wait_writable(self.fd)
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise anyio.BrokenResourceError from exc

    async def send_eof(self) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._file is not None:
            anyio.notify_closing(self.fd)
            file, self._file = self._file, None
            file.close()


class ConfinedProcess(anyio.abc.Process):
    """A `subprocess.Popen` as an `anyio.abc.Process`."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self._popen = popen
        self._pidfd = os.pidfd_open(popen.pid)
        self._stdin = _Pipe(popen.stdin) if popen.stdin else None
        self._stdout = _Pipe(popen.stdout) if popen.stdout else None
        self._stderr = _Pipe(popen.stderr) if popen.stderr else None

    @property
    def stdin(self) -> _Pipe | None:
        return self._stdin

    @property
    def stdout(self) -> _Pipe | None:
        return self._stdout

    @property
    def stderr(self) -> _Pipe | None:
        return self._stderr

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        if self._popen.returncode is None and self._pidfd >= 0:
            self._popen.poll()
        return self._popen.returncode

    async def wait(self) -> int:
        while self.returncode is None:
            await anyio.wait_readable(self._pidfd)  # readable once the process has exited
        return self._popen.returncode  # type: ignore[return-value]

    def send_signal(self, signal: int) -> None:
        self._popen.send_signal(signal)

    def terminate(self) -> None:
        self._popen.terminate()

    def kill(self) -> None:
        self._popen.kill()

    async def aclose(self) -> None:
        for pipe in (self.stdin, self.stdout, self.stderr):
            if pipe is not None:
                await pipe.aclose()
        try:
            await self.wait()
        finally:
            if self._pidfd >= 0:
                with contextlib.suppress(OSError):
                    anyio.notify_closing(self._pidfd)
                    os.close(self._pidfd)
                self._pidfd = -1
