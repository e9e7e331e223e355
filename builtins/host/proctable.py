"""The host's process table, read from /proc, and the means to end processes exactly.

Linux only: other systems have no /proc, so `process_table()` is empty there, nothing is
found and nothing is ended by these helpers (the process groups of `environment` still
work on every POSIX system).

- `process_table()` reads pid, parent, process group, session, state and start time of
  every process; a pid together with its start time (clock ticks since boot) names one
  process for good, even after the number is recycled.
- `signal_exact()` signals a pid only while it is still the process that was seen, through
  a pidfd when the system has them, so a recycled pid is never hit.
- `end_exact()` ends a set of processes: SIGTERM, a grace period, SIGKILL.
- `acquire_subreaper()` makes this process a child subreaper (`PR_SET_CHILD_SUBREAPER`):
  orphaned descendants (after `setsid`, a double fork, a daemonising script) are
  re-parented to it instead of to init, so they stay findable below it and it can reap
  them. `release_subreaper()` undoes it when the last user is done.

Everything here blocks (it reads /proc, it sleeps while waiting): call it in a worker
thread from async code.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal as signals
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "ProcInfo",
    "acquire_subreaper",
    "boot_id",
    "descendants",
    "end_exact",
    "environ_has",
    "process_table",
    "read_proc",
    "reap",
    "release_subreaper",
    "signal_exact",
]

HAS_PROC = sys.platform.startswith("linux") and os.path.isdir("/proc/self")

_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37
_POLL = 0.05


@dataclass(frozen=True)
class ProcInfo:
    """One line of the process table (fields of /proc/PID/stat)."""

    pid: int
    ppid: int
    pgrp: int
    session: int
    state: str
    start: int
    """Start time in clock ticks since boot: with the pid, the process's identity."""

    @property
    def zombie(self) -> bool:
        """Exited, waiting to be reaped (or being torn down)."""
        return self.state in ("Z", "X")


def read_proc(pid: int) -> ProcInfo | None:
    """The process `pid`, or None when there is no such process (or no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    # "pid (comm) state ppid pgrp session ... starttime(22nd) ...": comm may hold ')'.
    fields = stat.rpartition(b")")[2].split()
    if len(fields) < 20:
        return None
    return ProcInfo(pid, int(fields[1]), int(fields[2]), int(fields[3]),
                    fields[0].decode("ascii", "replace"), int(fields[19]))


def process_table() -> list[ProcInfo]:
    """Every process visible in /proc; empty without /proc."""
    if not HAS_PROC:
        return []
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    table = []
    for name in names:
        if name.isdigit():
            info = read_proc(int(name))
            if info is not None:  # None: it vanished while we looked
                table.append(info)
    return table


def descendants(table: Iterable[ProcInfo], root: int) -> list[ProcInfo]:
    """The processes below `root` in the parent tree, parents before their children."""
    children: dict[int, list[ProcInfo]] = {}
    for info in table:
        children.setdefault(info.ppid, []).append(info)
    found: list[ProcInfo] = []
    todo = [root]
    while todo:
        for child in children.pop(todo.pop(), ()):
            found.append(child)
            todo.append(child.pid)
    return found


def environ_has(pid: int, entry: str) -> bool:
    """True when the process started with `entry` (``NAME=value``) in its environment.

    Unreadable environments (other users, zombies, vanished processes) count as False.
    """
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            data = handle.read()
    except OSError:
        return False
    return f"\0{entry}\0".encode() in b"\0" + data + b"\0"


def boot_id() -> str:
    """This boot's id: start times count from boot, so a record from another boot is void."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def signal_exact(pid: int, start: int, signum: int) -> bool:
    """Send `signum` to `pid` only if it is still the process that started at `start`.

    Returns False when that process is gone (or not ours to signal). With a pidfd the
    check and the signal cannot be separated by a recycling of the pid.
    """
    if hasattr(os, "pidfd_open") and hasattr(signals, "pidfd_send_signal"):
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            return False
        try:
            info = read_proc(pid)  # the pidfd pins the process it was opened for
            if info is None or info.start != start or info.zombie:
                return False
            signals.pidfd_send_signal(fd, signum)
            return True
        except OSError:
            return False
        finally:
            os.close(fd)
    info = read_proc(pid)
    if info is None or info.start != start or info.zombie:
        return False
    try:
        os.kill(pid, signum)
    except OSError:
        return False
    return True


def _alive(pid: int, start: int) -> bool:
    info = read_proc(pid)
    return info is not None and info.start == start and not info.zombie


def end_exact(targets: Iterable[tuple[int, int]], grace: float) -> list[int]:
    """End processes given as (pid, start time): SIGTERM, up to `grace` seconds, SIGKILL.

    Returns the pids that were still running and got a signal; zombies count as ended.
    """
    hit = [(pid, start) for pid, start in dict.fromkeys(targets)
           if signal_exact(pid, start, signals.SIGTERM)]
    deadline = time.monotonic() + grace
    remaining = hit
    while remaining and time.monotonic() < deadline:
        time.sleep(_POLL)
        remaining = [(pid, start) for pid, start in remaining if _alive(pid, start)]
    for pid, start in remaining:
        signal_exact(pid, start, signals.SIGKILL)
    deadline = time.monotonic() + 5.0
    while remaining and time.monotonic() < deadline:
        time.sleep(_POLL)
        remaining = [(pid, start) for pid, start in remaining if _alive(pid, start)]
    return [pid for pid, _ in hit]


def reap(pids: Iterable[int]) -> int:
    """Collect the exit status of those `pids` that are exited children of this process.

    Only for processes nobody else waits for (adopted orphans): reaping a child that a
    subprocess object or an event loop watches would rob it of its exit status.
    """
    me = os.getpid()
    reaped = 0
    for pid in pids:
        info = read_proc(pid)
        if info is None or info.ppid != me or not info.zombie:
            continue
        with contextlib.suppress(ChildProcessError, OSError):
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                reaped += 1
    return reaped


# -- the child subreaper -----------------------------------------------------------------

_subreaper_lock = threading.Lock()
_subreaper_users = 0
_subreaper_ours = False
"""True when this module turned the attribute on (and so turns it off again)."""


def _prctl(option: int, value: int | ctypes.c_int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        arg = ctypes.byref(value) if isinstance(value, ctypes.c_int) else ctypes.c_ulong(value)
        return libc.prctl(option, arg, 0, 0, 0) == 0
    except (OSError, AttributeError):  # no libc prctl here
        return False


def acquire_subreaper() -> bool:
    """Make this process a child subreaper (Linux); True when it is one afterwards.

    Counted: every call needs one `release_subreaper()`. Elsewhere it does nothing and
    returns False.
    """
    global _subreaper_users, _subreaper_ours
    if not sys.platform.startswith("linux"):
        return False
    with _subreaper_lock:
        if _subreaper_users == 0:
            current = ctypes.c_int(0)
            already = _prctl(_PR_GET_CHILD_SUBREAPER, current) and current.value != 0
            _subreaper_ours = not already and _prctl(_PR_SET_CHILD_SUBREAPER, 1)
            if not (already or _subreaper_ours):
                return False
        _subreaper_users += 1
        return True


def release_subreaper() -> None:
    """Undo one successful `acquire_subreaper()`; the last one restores the attribute."""
    global _subreaper_users, _subreaper_ours
    with _subreaper_lock:
        if _subreaper_users == 0:
            return
        _subreaper_users -= 1
        if _subreaper_users == 0 and _subreaper_ours:
            _prctl(_PR_SET_CHILD_SUBREAPER, 0)
            _subreaper_ours = False
