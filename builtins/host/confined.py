"""Starting commands through the sandbox helper: a process that shares nothing with hookline.

`Spawner` has a helper started for one sandbox and reads its report: which layers it
applied, which are missing, the temporary folder commands see. Helpers are forked by the
template, the helper program (`jail/`) run once by path with an empty environment, so
that none shares memory, descriptors, environment or Landlock domain with hookline, and a
new sandbox costs a fork of a small process rather than a new interpreter. Each `popen`
then asks the helper for one command: the command's streams and a status pipe travel with
the request, the answer brings a pidfd.

`ConfinedProcess` gives such a command the face of `anyio.abc.Process` (what `LocalProcess`
wraps): its pipes are read and written without blocking through `anyio.wait_readable` and
`wait_writable`, it is signalled through its pidfd, and its exit status arrives on the
status pipe (the helper reaps it: a command is not hookline's child).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

import anyio
import anyio.abc
import anyio.to_thread

from .jail import wire

__all__ = ["ConfinedProcess", "HelperReport", "Spawner"]

HELPER = os.path.join(os.path.dirname(__file__), "jail", "__main__.py")
"""The helper program, run by path (its folder is then first on `sys.path`)."""

START_TIMEOUT = 30.0
"""Seconds the helper may take to confine itself and report."""
ENDED_WAIT = 2.0
"""Seconds a closed helper is waited for to end, with its commands."""

_ENDED = ("the sandbox helper ended (killed: out of memory, or by a signal) with every "
          "process it ran; run the command again, in a new sandbox")

_KILLED = -signal.SIGKILL
"""The status of a command whose helper ended before it (the pid namespace was killed)."""

Stream = int | IO[Any] | None


@dataclass(frozen=True)
class HelperReport:
    """What a helper says once confined: the layers it could not apply, the temporary
    folder as commands see it, the folders whose change needs a new helper, and whether
    mounts of its own shape what commands see (only then can it `protect`)."""

    missing: tuple[str, ...]
    tmpdir: str
    watched: tuple[tuple[str, int], ...]
    mounted: bool


class Spawner:
    """One sandbox helper process and the sockets hookline asks it through: one to start
    commands, one to protect paths."""

    def __init__(self, policy: Mapping[str, Any]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._keeper, keeper_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._lock = threading.Lock()
        self._channel = ours
        self._started: weakref.WeakSet[ConfinedProcess] = weakref.WeakSet()
        self._handed_out = 0
        """Commands to start here: each `reserve` not `release`d yet."""
        self._handed_out_lock = threading.Lock()
        try:
            _fork_helper(policy, [theirs, keeper_end])
            ours.settimeout(START_TIMEOUT)
            answer = wire.receive(ours)
            ours.settimeout(None)
            reason = answer[0].get("error") if answer else "it ended before it reported"
        except (OSError, ValueError) as exc:
            answer, reason = None, str(exc)
        finally:
            theirs.close()
            keeper_end.close()
        if answer is None or reason:
            self.close()
            raise OSError(f"the sandbox helper could not confine itself: {reason}")
        report = answer[0]
        self.report = HelperReport(tuple(report["missing"]), report["tmpdir"],
                                   tuple((path, when) for path, when in report["watched"]),
                                   report["mounted"])

    def reserve(self) -> None:
        """A command is to start here (the sandbox handed this helper out): not `idle`, and
        so not closed when a new helper replaces it, until its caller `release`s it once
        `popen` started it (or failed, or never ran)."""
        with self._handed_out_lock:
            self._handed_out += 1

    def release(self) -> None:
        with self._handed_out_lock:
            self._handed_out -= 1

    def popen(self, argv: str | Sequence[str], *, stdin: Stream, stdout: Stream,
              stderr: Stream, cwd: str | None, env: Mapping[str, str] | None) -> ConfinedProcess:
        """Start `argv` (a string runs through the shell) inside the sandbox; blocking."""
        ends = _Ends()
        try:
            child_in = ends.child(stdin, "stdin")
            child_out = ends.child(stdout, "stdout")
            child_err = (child_out if stderr == subprocess.STDOUT
                         else ends.child(stderr, "stderr"))
            status_read, status_write = os.pipe2(os.O_CLOEXEC)
            ends.ours.append(status_read)
            ends.theirs.append(status_write)
            request = {"argv": argv if isinstance(argv, str) else list(argv),
                       "shell": isinstance(argv, str), "cwd": cwd,
                       "env": dict(env) if env is not None else {}}
            with self._lock:
                if self._channel.fileno() < 0:
                    raise OSError("this sandbox was closed (its session's environment was "
                                  "closed); start the command again")
                try:
                    wire.send(self._channel, request,
                              [child_in, child_out, child_err, status_write])
                    answer = wire.receive(self._channel)
                except (BrokenPipeError, ConnectionResetError):
                    answer = None
                if answer is None:
                    raise OSError(_ENDED)
                reply, fds = answer
                if "errno" in reply:
                    raise OSError(reply["errno"], reply["message"], reply.get("filename"))
                try:  # read before the helper may reap it: it waits for the word
                    process = ConfinedProcess(fds[0], status_read, ends.pipes, self)
                finally:
                    wire.send(self._channel, {"claimed": True})
            self._started.add(process)
        except BaseException:
            ends.close_ours()
            raise
        finally:
            ends.close_theirs()
        return process

    def protect(self, paths: Sequence[str]) -> bool:
        """Make `paths` read-only to this helper's commands from now on, the running ones
        too (they share its mount namespace; one that holds a folder open inside keeps it).
        False when that failed: a new helper protects them. Blocking."""
        if not self.report.mounted:  # without mounts of its own it protects none at all
            return True
        with self._lock:
            try:
                self._keeper.settimeout(START_TIMEOUT)
                wire.send(self._keeper, {"protect": list(paths)})
                answer = wire.receive(self._keeper)
            except (OSError, ValueError):
                return False
        return answer is not None and not answer[0]["errors"]

    def ended(self) -> bool:
        """True when the helper is gone (killed: out of memory, by a signal), and every
        command it ran with it: its socket hung up. It says nothing unasked, so anything
        to read between requests is its end."""
        with self._lock:
            if self._channel.fileno() < 0:
                return True
            poll = select.poll()
            poll.register(self._channel, select.POLLIN)
            return bool(poll.poll(0))

    def idle(self) -> bool:
        """True when no command this helper started is still running, nor one it was
        handed out for about to start."""
        with self._handed_out_lock:
            if self._handed_out:
                return False
        return all(process.returncode is not None for process in list(self._started))

    def close(self) -> None:
        """End the helper: with its pid namespace every process in it is killed. Waits (a
        moment at most) for its parent to hang up, which it does once the helper and every
        process of the namespace are gone: nothing of the sandbox still runs, to move
        things about, when its private folder is removed."""
        with self._lock:
            self._channel.close()
            with contextlib.suppress(OSError):
                self._keeper.settimeout(ENDED_WAIT)
                while self._keeper.recv(4096):
                    pass
            self._keeper.close()


class _Template:
    """The program that forks sandbox helpers (`jail/__main__.py`), started once."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-E", "-s", "-S", HELPER, str(theirs.fileno())], env={},
                cwd="/", stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, pass_fds=(theirs.fileno(),),
                start_new_session=True)  # a Ctrl-C at hookline's terminal is not for it
        finally:
            theirs.close()
        self.channel = ours
        atexit.register(self.close)

    def close(self) -> None:
        """End the template (the helpers it forked end with their own sockets)."""
        self.channel.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(2)


_template: _Template | None = None
_template_lock = threading.Lock()


def _fork_helper(policy: Mapping[str, Any], ends: Sequence[socket.socket]) -> None:
    """Ask the template (started now if it is not running) for a helper on `ends`."""
    global _template
    with _template_lock:
        if _template is None or _template.process.poll() is not None:
            _template = _Template()
        try:
            wire.send(_template.channel, dict(policy), [end.fileno() for end in ends])
        except OSError as exc:
            code = _template.process.poll()
            raise OSError(f"the sandbox template ended (status {code}): {exc}") from None


class _Ends:
    """The descriptors of one start: ours (kept on success) and the command's (sent)."""

    def __init__(self) -> None:
        self.ours: list[int] = []
        self.theirs: list[int] = []
        self.pipes: dict[str, int] = {}

    def child(self, stream: Stream, name: str) -> int:
        """The command's end of `stream` (a pipe's other end is kept as `pipes[name]`)."""
        if stream == subprocess.PIPE:
            read, write = os.pipe2(os.O_CLOEXEC)
            mine, theirs = (write, read) if name == "stdin" else (read, write)
            self.ours.append(mine)
            self.theirs.append(theirs)
            self.pipes[name] = mine
            return theirs
        if stream is None or stream == subprocess.DEVNULL:
            fd = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
            self.theirs.append(fd)
            return fd
        return stream if isinstance(stream, int) else stream.fileno()

    def close_theirs(self) -> None:
        for fd in self.theirs:
            os.close(fd)
        self.theirs.clear()

    def close_ours(self) -> None:
        for fd in self.ours:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.ours.clear()


class _Pipe(anyio.abc.ByteStream):
    """One end of a command's pipe, used without blocking (only one direction works)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._open = True
        os.set_blocking(fd, False)

    async def receive(self, max_bytes: int = 65536) -> bytes:
        while True:
            if not self._open:
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
            if not self._open:
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
        if self._open:
            self._open = False
            anyio.notify_closing(self.fd)
            os.close(self.fd)


class ConfinedProcess(anyio.abc.Process):
    """A command the helper started, as an `anyio.abc.Process`."""

    def __init__(self, pidfd: int, status: int, pipes: Mapping[str, int],
                 helper: Spawner | None = None) -> None:
        self._helper = helper
        """Held so the helper (whose end would kill this process's whole namespace)
        lives as long as the process is referenced, whoever dropped the environment."""
        self._pidfd = pidfd
        self._status = status
        self._returncode: int | None = None
        self._pid = _outer_pid(pidfd)
        os.set_blocking(status, False)
        self._stdin, self._stdout, self._stderr = (
            _Pipe(pipes[name]) if name in pipes else None
            for name in ("stdin", "stdout", "stderr"))

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
        """The pid in hookline's pid namespace (the command leads a session of that id)."""
        return self._pid

    @property
    def returncode(self) -> int | None:
        if self._returncode is None and self._status >= 0:
            try:
                data = os.read(self._status, 4)
            except BlockingIOError:
                return None
            self._returncode = struct.unpack("<i", data)[0] if len(data) == 4 else _KILLED
        return self._returncode

    async def wait(self) -> int:
        while self.returncode is None:
            await anyio.wait_readable(self._status)
        return self._returncode  # type: ignore[return-value]

    def send_signal(self, signal_number: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, signal_number)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    async def aclose(self) -> None:
        for pipe in (self.stdin, self.stdout, self.stderr):
            if pipe is not None:
                await pipe.aclose()
        try:
            await self.wait()
        finally:
            for name in ("_pidfd", "_status"):
                fd = getattr(self, name)
                if fd >= 0:
                    with contextlib.suppress(OSError):
                        anyio.notify_closing(fd)
                        os.close(fd)
                    setattr(self, name, -1)


def _outer_pid(pidfd: int) -> int:
    """The pid a pidfd names, as hookline's pid namespace numbers it (the process is not
    reaped yet: at worst a zombie, which still has its number)."""
    with open(f"/proc/self/fdinfo/{pidfd}") as info:
        for line in info:
            if line.startswith("Pid:") and (pid := int(line.split()[1])) > 0:
                return pid
    raise OSError("the kernel does not say which process a pidfd names (Linux 5.3+ does)")


async def open_confined(spawner: Spawner, argv: str | Sequence[str], *,
                        stdin: Stream, stdout: Stream, stderr: Stream, cwd: str | None,
                        env: Mapping[str, str] | None, start_new_session: bool) -> ConfinedProcess:
    """Start `argv` through the helper; the same options as `anyio.open_process` (every
    command leads a session of its own there, whatever `start_new_session` says)."""
    return await anyio.to_thread.run_sync(lambda: spawner.popen(
        argv, stdin=stdin, stdout=stdout, stderr=stderr, cwd=cwd, env=env))
